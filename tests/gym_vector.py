"""Gymnasium's own SyncVectorEnv, same-step autoreset: the reference for tests/gym.rs.

argv[1]: a JSON file {"id", "envs", "seed", "actions": [[a per env] per step]}; argv[2]:
where to write one JSON line per step (and one for the reset first) with the observations,
rewards, terminations, truncations and the final observations of the envs that ended.
Floats are float32 values written with repr, so they round-trip exactly.
"""
import importlib
import json
import sys

import gymnasium as gym
import numpy as np

with open(sys.argv[1]) as f:
    case = json.load(f)


def maker(target):
    """A registered id, or a user's `module:callable` (its factory, as hotlab's workers call it)."""
    if ":" in target:
        module, _, name = target.partition(":")
        factory = getattr(importlib.import_module(module), name, None)
        if callable(factory):
            return factory
    return lambda: gym.make(target)


if case["id"].startswith("ALE/"):
    import ale_py  # noqa: F401  (registers Atari's ids)

envs = gym.vector.SyncVectorEnv(
    [maker(case["id"]) for _ in range(case["envs"])],
    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
)


def floats(a):
    return [float(v) for v in np.asarray(a, dtype=np.float32).reshape(-1)]


with open(sys.argv[2], "w") as out:
    obs, _ = envs.reset(seed=case["seed"])
    out.write(json.dumps({"obs": floats(obs)}) + "\n")
    for actions in case["actions"]:
        obs, reward, term, trunc, info = envs.step(np.asarray(actions))
        ended = {}
        for e in np.flatnonzero(np.logical_or(term, trunc)):
            ended[int(e)] = floats(info["final_obs"][e])
        out.write(json.dumps({"obs": floats(obs), "reward": floats(reward), "terminated": [bool(t) for t in term],
                              "truncated": [bool(t) for t in trunc], "final_obs": ended}) + "\n")
