"""The policies that learn nothing, on the episodes `hotlab eval` plays, for the `continuous`
test: episode i is a fresh env of the case's id reset with seed `seed + i`, played to its
end. The best constant action (over a grid across the Box, chosen on these same episodes:
the strongest such policy) and uniform random actions; each episode's return, in order."""

import json
import sys

import gymnasium as gym
import numpy as np


def play(env_id, seed, act):
    env = gym.make(env_id)
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
    env_id, seed, episodes, points = case["id"], case["seed"], case["episodes"], case["grid"]
    space = gym.make(env_id).action_space
    low, high = np.maximum(space.low, -1e3), np.minimum(space.high, 1e3)
    best = None
    for k in range(points):
        c = (low + (high - low) * k / (points - 1)).astype(space.dtype)
        returns = [play(env_id, seed + i, lambda env: c) for i in range(episodes)]
        if best is None or np.mean(returns) > np.mean(best["returns"]):
            best = {"action": c.tolist(), "returns": returns}

    def uniform(i):
        rng = np.random.default_rng(seed + i)
        return lambda env: rng.uniform(low, high).astype(space.dtype)

    random = [play(env_id, seed + i, uniform(i)) for i in range(episodes)]
    json.dump({"constant": best, "random": random}, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
