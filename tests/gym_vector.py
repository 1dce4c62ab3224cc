"""Gymnasium's own SyncVectorEnv, same-step autoreset: the reference for tests/gym.rs.

argv[1]: a JSON file {"id", "envs", "seed", "actions": [[a per env] per step], and
optionally "atari": true, "digest": true}; argv[2]: where to write one JSON line per step
(and one for the reset first) with the observations, rewards, terminations, truncations and
the final observations of the envs that ended. Floats are float32 values written with repr,
so they round-trip exactly. With "digest", each env's observation is its bytes' CRC-32
instead. With "atari", each env is wrapped in Atari's standard preprocessing, written here
with Gymnasium's own wrappers (AtariPreprocessing, FrameStackObservation) as CleanRL's
`ppo_atari.py` has it, and each ended episode's return is the game's (unclipped) score.
"""
import importlib
import json
import sys
import zlib

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
    if case.get("atari"):
        return lambda: atari(gym.make(target, frameskip=1))
    return lambda: gym.make(target)


class FireReset(gym.Wrapper):
    """FIRE after each reset, for the games that wait for it (CleanRL's FireResetEnv, one press)."""

    def reset(self, **kw):
        obs, info = self.env.reset(**kw)
        if self.env.unwrapped.get_action_meanings()[1:2] == ["FIRE"]:
            obs, _, term, trunc, info = self.env.step(1)
            if term or trunc:
                obs, info = self.env.reset(**kw)
        return obs, info


class SignReward(gym.Wrapper):
    """The reward's sign for learning; the score summed per episode, reported at its end."""

    def reset(self, **kw):
        self.score = 0.0
        return self.env.reset(**kw)

    def step(self, action):
        obs, reward, term, trunc, info = self.env.step(action)
        self.score += float(reward)
        info["score"] = self.score
        return obs, float(np.sign(reward)), term, trunc, info


def atari(env):
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    env = AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True)
    return FrameStackObservation(SignReward(FireReset(env)), 4)


if case["id"].startswith("ALE/"):
    import ale_py  # noqa: F401  (registers Atari's ids)

envs = gym.vector.SyncVectorEnv(
    [maker(case["id"]) for _ in range(case["envs"])],
    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
)


def floats(a):
    return [float(v) for v in np.asarray(a, dtype=np.float32).reshape(-1)]


def observed(a):
    """The batch's observations: as floats, or each env's bytes' CRC-32."""
    if case.get("digest"):
        return [zlib.crc32(np.ascontiguousarray(row).tobytes()) for row in a]
    return floats(a)


with open(sys.argv[2], "w") as out:
    obs, _ = envs.reset(seed=case["seed"])
    out.write(json.dumps({"obs": observed(obs)}) + "\n")
    for actions in case["actions"]:
        obs, reward, term, trunc, info = envs.step(np.asarray(actions))
        ended, scores = {}, {}
        for e in np.flatnonzero(np.logical_or(term, trunc)):
            final = info["final_obs"][e]
            ended[int(e)] = observed([final])[0] if case.get("digest") else floats(final)
            if "final_info" in info and "score" in info["final_info"]:
                scores[int(e)] = float(info["final_info"]["score"][e])
        out.write(json.dumps({"obs": observed(obs), "reward": floats(reward), "terminated": [bool(t) for t in term],
                              "truncated": [bool(t) for t in trunc], "final_obs": ended, "scores": scores}) + "\n")
