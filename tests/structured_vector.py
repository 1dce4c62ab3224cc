"""Gymnasium's own SyncVectorEnv (same-step autoreset) on a structured observation: the
reference for tests/structured.rs.

argv[1]: a JSON file {"target" (a `module:callable`), "kwargs", "envs", "seed", "actions":
[[a per env] per step]}; argv[2]: where to write one JSON line for the reset, then one per
step, with each leaf's values (a Dict's keys joined by `.`, a Tuple's positions; a
Discrete's or MultiDiscrete's indices less their start, flags as 0 and 1, every value as a
float32 written with repr), the rewards, the ends, and the final observation of each env that
ended.
"""
import importlib
import json
import sys

import gymnasium as gym
import numpy as np
from gymnasium import spaces

with open(sys.argv[1]) as f:
    case = json.load(f)

module, _, name = case["target"].partition(":")
factory = getattr(importlib.import_module(module), name)
envs = gym.vector.SyncVectorEnv(
    [lambda: factory(**case["kwargs"]) for _ in range(case["envs"])],
    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
)


def leaves(space, batch, key=""):
    """{key: [n, width] float32} of a batch of observations of `space`."""
    if isinstance(space, spaces.Dict):
        out = {}
        for k, sub in space.spaces.items():
            out.update(leaves(sub, batch[k], f"{key}.{k}" if key else k))
        return out
    if isinstance(space, spaces.Tuple):
        out = {}
        for i, sub in enumerate(space.spaces):
            out.update(leaves(sub, batch[i], f"{key}.{i}" if key else str(i)))
        return out
    a = np.asarray(batch)
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        a = a.astype(np.int64) - np.asarray(space.start, dtype=np.int64)
    return {key or "obs": a.reshape(a.shape[0], -1).astype(np.float32)}


def listed(tree):
    return {k: [[float(v) for v in row] for row in a] for k, a in tree.items()}


single = envs.single_observation_space
with open(sys.argv[2], "w") as out:
    obs, _ = envs.reset(seed=case["seed"])
    out.write(json.dumps({"obs": listed(leaves(single, obs))}) + "\n")
    for actions in case["actions"]:
        obs, reward, term, trunc, info = envs.step(np.asarray(actions))
        ended = {}
        for e in np.flatnonzero(np.logical_or(term, trunc)):
            final = info["final_obs"][e]
            # One observation as a batch of one, in the space's own batched form.
            one = gym.vector.utils.concatenate(single, [final], gym.vector.utils.create_empty_array(single, 1))
            ended[int(e)] = {k: a[0] for k, a in listed(leaves(single, one)).items()}
        out.write(json.dumps({"obs": listed(leaves(single, obs)), "reward": [float(r) for r in reward],
                              "terminated": [bool(t) for t in term], "truncated": [bool(t) for t in trunc],
                              "final_obs": ended}) + "\n")
