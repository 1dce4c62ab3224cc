"""PyTorch's reference for hotlab's combined policy (tests/structured.rs), written as
Stable-Baselines3's `CombinedExtractor` lays out a Dict observation: one extractor per key
in the space's order (an image: convolutions with ReLUs, `nn.Flatten`, `nn.Linear`, ReLU,
fed `x / 255.0` for pixels and flags as they are, channels first; a vector: `nn.Flatten`; a
Discrete or MultiDiscrete: each index one-hot over its choices), their outputs concatenated,
then CleanRL's actor and critic (`nn.Linear` and `nn.Tanh` layers, then a linear head each).

argv[1]: a JSON list of cases {"dir", "rows", "leaves": [{"name", "kind", "shape",
"classes", "image": {"channels", "height", "width", "channels_last", "convs": [[out,
kernel, stride]], "width"}}], "hidden", "outputs", "layout": [{"name", "shape"}]}; each
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
        img = leaf["image"]
        self.leaf, self.img = leaf, img
        layers, ch = [], img["channels"]
        for out, kernel, stride in img["convs"]:
            layers += [nn.Conv2d(ch, out, kernel, stride=stride), nn.ReLU()]
            ch = out
        with torch.no_grad():
            flat = nn.Sequential(*layers, nn.Flatten())(torch.zeros(1, img["channels"], img["height"], img["width"])).shape[1]
        self.net = nn.Sequential(*layers, nn.Flatten(), nn.Linear(flat, img["width_out"]), nn.ReLU())

    def forward(self, x):
        x = x.float() / 255.0 if self.leaf["kind"] == "u8" else x.float()
        if len(self.leaf["shape"]) == 2:
            x = x.unsqueeze(1)
        elif self.img["channels_last"]:
            x = x.permute(0, 3, 1, 2)
        return self.net(x)


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
    values = np.fromfile(os.path.join(d, "params.f32"), dtype=np.float32)
    at = 0
    with torch.no_grad():
        for p, slot in zip(params, case["layout"], strict=True):
            assert list(p.shape) == slot["shape"], (slot["name"], list(p.shape), slot["shape"])
            p.copy_(torch.from_numpy(values[at:at + p.numel()]).view(p.shape))
            at += p.numel()
    assert at == values.size
    features = combined(obs)
    outputs, value = actor(features), critic(features).squeeze(-1)
    r_out = torch.from_numpy(np.fromfile(os.path.join(d, "r_out.f32"), dtype=np.float32)).view(outputs.shape)
    r_val = torch.from_numpy(np.fromfile(os.path.join(d, "r_val.f32"), dtype=np.float32)).view(value.shape)
    ((outputs * r_out).sum() + (value * r_val).sum()).backward()
    outputs.detach().numpy().astype(np.float32).tofile(os.path.join(d, "outputs.f32"))
    value.detach().numpy().astype(np.float32).tofile(os.path.join(d, "value.f32"))
    torch.cat([p.grad.reshape(-1) for p in params]).numpy().astype(np.float32).tofile(os.path.join(d, "grads.f32"))
