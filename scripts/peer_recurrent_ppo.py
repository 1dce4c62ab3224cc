"""sb3-contrib's RecurrentPPO on hotlab's cue-recall memory task (`hotlab/CueRecall-v0`, defined
in the gym worker, workloads/src/gym/worker.py), the peer of `hotlab train --preset memory`
(docs/benchmarks.md).

usage: peer_recurrent_ppo.py [STEPS]   (in a venv of its own with sb3-contrib: .venv-peers)
Trains with rl-baselines3-zoo's hyperparameters for RecurrentPPO on CartPoleNoVel-v1 (8 envs
× 32 steps, batch 256, 20 epochs, γ 0.999, λ 0.98, lr and clip linearly annealed from 1e-3 and
0.2, no entropy bonus, an LSTM of 64 for the actor and one for the critic, ReLU heads of 64),
then plays 200 greedy episodes (seed 12345). Prints one JSON object:
{"peer", "steps", "wall_s", "sps", "eval_mean"}.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads", "src", "gym"))

import gymnasium  # noqa: E402
import torch  # noqa: E402
import worker  # noqa: E402
from sb3_contrib import RecurrentPPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402
from torch import nn  # noqa: E402

torch.set_num_threads(2)
worker.builtin_envs(gymnasium)
CueRecall = "hotlab/CueRecall-v0"
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40960


def linear(start):
    return lambda progress: progress * start


env = make_vec_env(CueRecall, n_envs=8, seed=1)
model = RecurrentPPO(
    "MlpLstmPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.98, gamma=0.999, n_epochs=20, ent_coef=0.0,
    learning_rate=linear(1e-3), clip_range=linear(0.2), seed=1, device="cpu", verbose=0,
    policy_kwargs=dict(ortho_init=False, activation_fn=nn.ReLU, lstm_hidden_size=64, enable_critic_lstm=True,
                       net_arch=dict(pi=[64], vf=[64])))
start = time.time()
model.learn(steps)
wall = time.time() - start
mean, _ = evaluate_policy(model, make_vec_env(CueRecall, n_envs=1, seed=12345), n_eval_episodes=200, deterministic=True)
print(json.dumps({"peer": "sb3-contrib RecurrentPPO", "steps": steps, "wall_s": wall, "sps": steps / wall,
                  "eval_mean": mean}))
