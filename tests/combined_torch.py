"""PyTorch's reference for hotlab's combined policy (tests/structured.rs), written as
Stable-Baselines3's `CombinedExtractor` lays out a Dict observation: one extractor per key
in the space's order (an image: convolutions with ReLUs, `nn.Flatten`, `nn.Linear`, ReLU,
fed `x / 255.0` for pixels and flags as they are, channels first; a vector: `nn.Flatten`; a
Discrete or MultiDiscrete: each index one-hot over its choices), their outputs concatenated,
then CleanRL's actor and critic (`nn.Linear` and `nn.Tanh` layers, then a linear head each).
An image's network is `tests/cnn_torch.py`'s, built from the image's shape (CleanRL's Atari
network, or MinAtar's for small grids).

argv[1]: a JSON list of cases {"dir", "rows", "leaves": [{"name", "kind", "shape",
"classes"}], "hidden", "outputs", "layout": [{"name", "shape"}]}; each
case's dir holds params.f32 (flat, in `layout`'s order), leaf<i>.bin (leaf i's rows as the
env gave them: float32, int64, or bytes), r_out.f32 and r_val.f32 (the weights of the loss
`sum(outputs * r_out) + sum(value * r_val)`). Writes outputs.f32, value.f32 and grads.f32
(in `layout`'s order) into the same dir.
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cnn_torch import channels_first, encoder, load  # noqa: E402

torch.set_num_threads(1)


class OneHot(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.classes = classes

    def forward(self, x):
        return torch.cat([F.one_hot(x[:, j].long(), c).float() for j, c in enumerate(self.classes)], dim=1)


class Image(nn.Module):
    def __init__(self, leaf):
        super().__init__()
        self.leaf = leaf
        self.net = encoder(leaf["shape"])

    def forward(self, x):
        return self.net(channels_first(x, self.leaf["shape"], self.leaf["kind"]))


class Combined(nn.Module):
    """SB3's CombinedExtractor's layout: an extractor per key, outputs concatenated."""

    def __init__(self, leaves):
        super().__init__()
        self.keys = [leaf["name"] for leaf in leaves]
        extractors = []
        for leaf in leaves:
            if leaf["kind"] in ("u8", "bool"):
                extractors.append(Image(leaf))
            elif leaf["kind"] == "i64":
                extractors.append(OneHot(leaf["classes"]))
            else:
                extractors.append(nn.Flatten())
        self.extractors = nn.ModuleList(extractors)

    def forward(self, obs):
        return torch.cat([ex(obs[k]) for k, ex in zip(self.keys, self.extractors)], dim=1)


def mlp(inputs, hidden, out):
    layers, width = [], inputs
    for h in hidden:
        layers += [nn.Linear(width, h), nn.Tanh()]
        width = h
    return nn.Sequential(*layers, nn.Linear(width, out))


for case in json.load(open(sys.argv[1])):
    d, rows = case["dir"], case["rows"]
    combined = Combined(case["leaves"])
    obs = {}
    for i, leaf in enumerate(case["leaves"]):
        dtype = {"f32": np.float32, "i64": np.int64, "u8": np.uint8, "bool": np.uint8}[leaf["kind"]]
        a = np.fromfile(os.path.join(d, f"leaf{i}.bin"), dtype=dtype).reshape([rows] + leaf["shape"])
        obs[leaf["name"]] = torch.from_numpy(a.copy())
    with torch.no_grad():
        width = combined(obs).shape[1]
    actor, critic = mlp(width, case["hidden"], case["outputs"]), mlp(width, case["hidden"], 1)
    params = [p for part in (combined, actor, critic) for m in part.modules()
              if isinstance(m, (nn.Conv2d, nn.Linear)) for p in (m.weight, m.bias)]
    load(params, case)
    features = combined(obs)
    outputs, value = actor(features), critic(features).squeeze(-1)
    r_out = torch.from_numpy(np.fromfile(os.path.join(d, "r_out.f32"), dtype=np.float32)).view(outputs.shape)
    r_val = torch.from_numpy(np.fromfile(os.path.join(d, "r_val.f32"), dtype=np.float32)).view(value.shape)
    ((outputs * r_out).sum() + (value * r_val).sum()).backward()
    outputs.detach().numpy().astype(np.float32).tofile(os.path.join(d, "outputs.f32"))
    value.detach().numpy().astype(np.float32).tofile(os.path.join(d, "value.f32"))
    torch.cat([p.grad.reshape(-1) for p in params]).numpy().astype(np.float32).tofile(os.path.join(d, "grads.f32"))
