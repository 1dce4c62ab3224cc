"""The policies that learn nothing, on the episodes `hotlab eval` plays, for the learning
tests (`continuous`, `pixels`): episode i is a fresh env of the case's id (registered, or a
user's `module:callable`) reset with seed `seed + i`, played to its end. The best constant
action (over a grid across a Box, or every choice of a Discrete, chosen on these same
episodes: the strongest such policy) and uniform random actions; each episode's return,
in order."""

import importlib
import json
import sys

import gymnasium as gym
import numpy as np


def make(target):
    if ":" in target:
        module, _, name = target.partition(":")
        return getattr(importlib.import_module(module), name)()
    return gym.make(target)


def play(env_id, seed, act):
    env = make(env_id)
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        obs, reward, term, trunc, _ = env.step(act(env))
        total += float(reward)
        done = term or trunc
    env.close()
    return total


def main():
    case = json.load(open(sys.argv[1]))
    env_id, seed, episodes, points = case["id"], case["seed"], case["episodes"], case.get("grid", 0)
    space = make(env_id).action_space
    if isinstance(space, gym.spaces.Discrete):
        constants = [space.start + k for k in range(space.n)]

        def draw(rng):
            return space.start + int(rng.integers(space.n))
    else:
        low, high = np.maximum(space.low, -1e3), np.minimum(space.high, 1e3)
        constants = [(low + (high - low) * k / (points - 1)).astype(space.dtype) for k in range(points)]

        def draw(rng):
            return rng.uniform(low, high).astype(space.dtype)
    best = None
    for c in constants:
        returns = [play(env_id, seed + i, lambda env: c) for i in range(episodes)]
        if best is None or np.mean(returns) > np.mean(best["returns"]):
            best = {"action": np.asarray(c).tolist(), "returns": returns}

    def uniform(i):
        rng = np.random.default_rng(seed + i)
        return lambda env: draw(rng)

    random = [play(env_id, seed + i, uniform(i)) for i in range(episodes)]
    json.dump({"constant": best, "random": random}, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
