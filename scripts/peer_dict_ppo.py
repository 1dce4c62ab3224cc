"""Stable-Baselines3's PPO with its `MultiInputPolicy` on the goal env of the structured-
observation tests (tests/fixtures/structured/dict_envs.py: a goal given only in a Discrete
leaf, noise floats, a noise image), the peer of `hotlab train --env gym:dict_envs:GoalDict`
(docs/benchmarks.md).

usage: peer_dict_ppo.py STEPS KWARGS_JSON   (in a venv of its own with SB3: .venv-peers)
Trains with hotlab's settings of that run, as SB3 names them (8 envs × 64 steps, 4 epochs of 4
minibatches of 128, lr 1e-3, entropy 0.01, clip 0.2, γ 0.99, λ 0.95, tanh MLPs of 64, 64 for
the actor and the critic after SB3's CombinedExtractor: NatureCNN for an image leaf, a flatten
for the floats, one-hot for the Discrete), then plays 200 greedy episodes (seed 12345). Prints
one JSON object: {"peer", "steps", "wall_s", "sps", "eval_mean"}.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "structured"))

import torch  # noqa: E402
from dict_envs import GoalDict  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402

torch.set_num_threads(2)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 32768
kwargs = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}

env = make_vec_env(GoalDict, n_envs=8, seed=3, env_kwargs=kwargs)
model = PPO("MultiInputPolicy", env, n_steps=64, batch_size=128, n_epochs=4, learning_rate=1e-3, ent_coef=0.01,
            clip_range=0.2, gamma=0.99, gae_lambda=0.95, seed=3, device="cpu", verbose=0)
start = time.time()
model.learn(steps)
wall = time.time() - start
evaluation = make_vec_env(GoalDict, n_envs=1, seed=12345, env_kwargs=kwargs)
mean, _ = evaluate_policy(model, evaluation, n_eval_episodes=200, deterministic=True)
print(json.dumps({"peer": "SB3 PPO MultiInputPolicy", "kwargs": kwargs, "steps": steps, "wall_s": wall,
                  "sps": steps / wall, "eval_mean": mean}))
