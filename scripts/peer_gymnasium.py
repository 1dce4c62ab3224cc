"""Gymnasium's CartPole stepping speed, for `hotlab bench envs --peer gymnasium`.

usage: peer_gymnasium.py SECONDS N [N ...]
Prints one JSON object per line: {"peer", "impl", "envs", "steps", "seconds", "steps_per_s"}.
`CartPoleVectorEnv` (numpy, one process) runs at every N; `make_vec` sync and async
(one process per env) only up to 64 envs.
"""
import json
import sys
import time

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv


def measure(env, n, seconds):
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, size=(64, n))
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
    seconds = float(sys.argv[1])
    for n in map(int, sys.argv[2:]):
        impls = [("CartPoleVectorEnv", lambda: CartPoleVectorEnv(num_envs=n))]
        if n <= 64:
            impls.append(("make_vec_sync", lambda: gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode="sync")))
            impls.append(("make_vec_async", lambda: gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode="async")))
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
