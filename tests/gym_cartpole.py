"""Steps Gymnasium's CartPole-v1 from given states: the reference for tests/gym_parity.rs.

Reads JSON lines {"state": [x, x_dot, theta, theta_dot], "elapsed": k, "action": a} from
argv[1] and writes {"state": next, "reward": r, "terminated": t, "truncated": u} lines to
argv[2]. Floats are written with repr, so f64 values round-trip exactly.
"""
import json
import sys

import gymnasium as gym
import numpy as np

env = gym.make("CartPole-v1")
env.reset(seed=0)
time_limit = env
while not hasattr(time_limit, "_max_episode_steps"):
    time_limit = time_limit.env
assert time_limit._max_episode_steps == 500

with open(sys.argv[1]) as src, open(sys.argv[2], "w") as dst:
    for line in src:
        case = json.loads(line)
        env.unwrapped.state = np.array(case["state"], dtype=np.float64)
        env.unwrapped.steps_beyond_terminated = None
        time_limit._elapsed_steps = case["elapsed"]
        _, reward, terminated, truncated, _ = env.step(case["action"])
        dst.write(json.dumps({
            "state": [float(v) for v in env.unwrapped.state],
            "reward": float(reward),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
        }) + "\n")
print(gym.__version__)
