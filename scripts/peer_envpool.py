"""EnvPool's stepping speed, for `hotlab bench envs --peer envpool`.

usage: peer_envpool.py SECONDS ID N [N ...]
Prints one JSON object per line: {"peer", "impl", "version", "envs", "steps", "seconds", "steps_per_s"}
per N, stepping `envpool.make_gymnasium(ID, num_envs=N)` (EnvPool's own C++ env, its default
threads) with random actions; or, where EnvPool has no env of that id, one line
{"peer", "id", "skipped": why}. Run with the interpreter `cargo xtask peers` makes
(.venv-envpool): EnvPool and its dependencies live there, not in the project's .venv.
"""
import json
import sys
import time
import warnings

warnings.filterwarnings("ignore", category=UserWarning)  # gymnasium's notes on EnvPool's spaces

import envpool  # noqa: E402
import numpy as np  # noqa: E402


def measure(env, n, seconds):
    env.reset()
    rng = np.random.default_rng(0)
    space = env.action_space
    actions = [np.array([space.sample() for _ in range(n)]) for _ in range(64)]
    for i in range(10):  # warm-up
        env.step(actions[i % 64])
    steps, start = 0, time.perf_counter()
    while True:
        for i in range(16):
            env.step(actions[int(rng.integers(64))])
        steps += 16 * n
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return steps, elapsed


def main():
    seconds, env_id, counts = float(sys.argv[1]), sys.argv[2], [int(n) for n in sys.argv[3:]]
    known = envpool.list_all_envs()
    if env_id not in known:
        near = [k for k in known if k.split("-")[0].lower() in env_id.lower()][:5]
        why = f"EnvPool has no env '{env_id}': it has its own C++ envs only ({len(known)} ids"
        why += f"; near it: {', '.join(near)})" if near else ")"
        print(json.dumps({"peer": "envpool", "id": env_id, "skipped": why}), flush=True)
        return
    for n in counts:
        env = envpool.make_gymnasium(env_id, num_envs=n, seed=0)
        try:
            steps, elapsed = measure(env, n, seconds)
        finally:
            env.close()
        print(json.dumps({"peer": "envpool", "impl": "make_gymnasium", "version": envpool.__version__, "envs": n, "steps": steps,
                          "seconds": elapsed, "steps_per_s": steps / elapsed}), flush=True)


if __name__ == "__main__":
    main()
