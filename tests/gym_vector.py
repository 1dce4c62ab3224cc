"""Gymnasium's own SyncVectorEnv, same-step autoreset: the reference for tests/gym.rs.

argv[1]: a JSON file {"id", "envs", "seed", "actions": [[a per env] per step], and
optionally "atari": true, "digest": true}; argv[2]: where to write one JSON line per step
(and one for the reset first) with the observations, rewards, terminations, truncations and
the final observations of the envs that ended. Floats are float32 values written with repr,
so they round-trip exactly. With "digest", each env's observation is its bytes' CRC-32
instead. With "atari", each env is wrapped in Atari's standard preprocessing, written here
with Gymnasium's own wrappers (AtariPreprocessing, FrameStackObservation) and
Stable-Baselines3's episodic life as CleanRL's `ppo_atari.py` has them; `scores` holds the
game's (unclipped) score of each game that ended, not of a life lost.
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


class EpisodicLife(gym.Wrapper):
    """Stable-Baselines3's `EpisodicLifeEnv` (CleanRL's `ppo_atari.py` imports it): a lost
    life is `terminated` for the learner, and the reset after it one no-op step, not a new
    game; `life_lost` in the info marks such an end (the game goes on)."""

    def __init__(self, env):
        super().__init__(env)
        self.lives, self.was_real_done = 0, True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.was_real_done = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self.lives:
            terminated = True
            if not self.was_real_done:
                info["life_lost"] = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs):
        if self.was_real_done:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.lives = self.env.unwrapped.ale.lives()
        return obs, info


class SignReward(gym.Wrapper):
    """The reward's sign for learning; the game's score summed over all its lives, reported
    at each end (the test reads it at a game's end)."""

    def reset(self, **kw):
        if self.env.get_wrapper_attr("was_real_done"):
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
    return FrameStackObservation(SignReward(FireReset(EpisodicLife(env))), 4)


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
            final_info = info.get("final_info", {})
            lost = final_info.get("_life_lost", np.zeros(len(term), dtype=bool))[e]
            if "score" in final_info and not lost:
                scores[int(e)] = float(final_info["score"][e])
        out.write(json.dumps({"obs": observed(obs), "reward": floats(reward), "terminated": [bool(t) for t in term],
                              "truncated": [bool(t) for t in trunc], "final_obs": ended, "scores": scores}) + "\n")
