"""Gymnasium's stepping speed, for `hotlab bench envs --peer gymnasium`.

usage: peer_gymnasium.py SECONDS [--id ID] N [N ...]
Prints one JSON object per line: {"peer", "impl", "envs", "steps", "seconds", "steps_per_s"}.
`make_vec` sync and async (one process per env) of ID (default CartPole-v1), up to 64 envs;
for CartPole-v1 also `CartPoleVectorEnv` (numpy, one process) at every N.
"""
import json
import sys
import time

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv


def measure(env, n, seconds):
    env.reset(seed=0)
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(64)]
    for i in range(10):  # warm-up
        env.step(actions[i % 64])
    steps, start = 0, time.perf_counter()
    while True:
        for i in range(16):
            env.step(actions[i % 64])
        steps += 16 * n
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return steps, elapsed


def main():
    seconds, rest = float(sys.argv[1]), sys.argv[2:]
    env_id = None
    if rest[:1] == ["--id"]:
        env_id, rest = rest[1], rest[2:]
    vec_id = env_id or "CartPole-v1"
    for n in map(int, rest):
        impls = [("CartPoleVectorEnv", lambda: CartPoleVectorEnv(num_envs=n))] if vec_id == "CartPole-v1" else []
        if n <= 64:
            impls.append(("make_vec_sync", lambda: gym.make_vec(vec_id, num_envs=n, vectorization_mode="sync")))
            impls.append(("make_vec_async", lambda: gym.make_vec(vec_id, num_envs=n, vectorization_mode="async")))
        for name, make in impls:
            env = make()
            try:
                steps, elapsed = measure(env, n, seconds)
            finally:
                env.close()
            print(json.dumps({"peer": "gymnasium", "impl": name, "envs": n, "steps": steps,
                              "seconds": elapsed, "steps_per_s": steps / elapsed}), flush=True)


if __name__ == "__main__":
    main()
