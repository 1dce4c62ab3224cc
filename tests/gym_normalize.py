"""Gymnasium's own normalizers on a recorded trajectory, for the `continuous` test.

Records `SyncVectorEnv` (same-step autoreset, as hotlab steps envs) of the case's id under
random actions from its seed: the observations as float32 (as hotlab's workers hand them
over), the rewards, terminations and truncations. Then replays that record through
`gymnasium.wrappers.vector.NormalizeObservation` and `NormalizeReward`, each on a replay env
of its own, and clips their outputs at ±10 as CleanRL's `ppo_continuous_action.py` does.

The observation wrapper refuses an env in same-step mode (its check guards the final
observation, which it never sees here); its update rule does not depend on the mode, so its
replay env says `NEXT_STEP` and hands it exactly the batches hotlab's normalizer gets. The
reward wrapper has a same-step branch (a done env's return restarts at 0), and its replay
env says `SAME_STEP`."""

import json
import sys

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.wrappers.vector import NormalizeObservation, NormalizeReward


class Replay(VectorEnv):
    def __init__(self, steps, like, mode):
        self.steps, self.t = steps, 0
        self.num_envs = like.num_envs
        self.single_observation_space = like.single_observation_space
        self.observation_space = like.observation_space
        self.single_action_space = like.single_action_space
        self.action_space = like.action_space
        self.metadata = {"autoreset_mode": mode}

    def reset(self, seed=None, options=None):
        self.t = 0
        return self.steps[0]["obs"], {}

    def step(self, actions):
        self.t += 1
        s = self.steps[self.t]
        return s["obs"], s["reward"], s["terminated"], s["truncated"], {}


def main():
    case = json.load(open(sys.argv[1]))
    envs, steps, seed, gamma = case["envs"], case["steps"], case["seed"], case["gamma"]
    env = SyncVectorEnv([lambda: gym.make(case["id"]) for _ in range(envs)], autoreset_mode=AutoresetMode.SAME_STEP)
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    record = [{"obs": np.asarray(obs, dtype=np.float32)}]
    for _ in range(steps):
        obs, reward, term, trunc, _ = env.step(env.action_space.sample())
        record.append({"obs": np.asarray(obs, dtype=np.float32), "reward": np.asarray(reward, dtype=np.float32),
                       "terminated": np.asarray(term), "truncated": np.asarray(trunc)})
    norm_obs = NormalizeObservation(Replay(record, env, AutoresetMode.NEXT_STEP))
    norm_reward = NormalizeReward(Replay(record, env, AutoresetMode.SAME_STEP), gamma=gamma)
    o, _ = norm_obs.reset()
    norm_reward.reset()
    out = [{"obs": record[0]["obs"].reshape(-1).tolist(), "norm_obs": np.clip(o, -10, 10).reshape(-1).tolist()}]
    for t in range(1, steps + 1):
        o = norm_obs.step(None)[0]
        r = norm_reward.step(None)[1]
        s = record[t]
        out.append({
            "obs": s["obs"].reshape(-1).tolist(), "reward": s["reward"].tolist(),
            "terminated": s["terminated"].tolist(), "truncated": s["truncated"].tolist(),
            "norm_obs": np.clip(o, -10, 10).reshape(-1).tolist(), "norm_reward": np.clip(r, -10, 10).tolist(),
        })
    json.dump(out, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
