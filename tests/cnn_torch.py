"""PyTorch's reference for hotlab's CNN encoder (tests/pixels.rs), built as CleanRL's
`ppo_atari.py` builds its network: `nn.Conv2d`s with ReLUs, `nn.Flatten`, `nn.Linear`, ReLU,
fed `x / 255.0` (flags as they are), channels first.

argv[1]: a JSON list of cases {"dir", "rows", "shape", "kind", "image": {"channels",
"height", "width", "channels_last"}, "convs": [[out, kernel, stride]], "width", "layout":
[{"name", "shape"}]}; each case's dir holds params.f32 (the encoder's weights, flat, in
`layout`'s order), x.u8 (the images) and r.f32 (the weights of the loss `sum(features * r)`).
Writes features.f32 and grads.f32 (in `layout`'s order) into the same dir.
"""
import json
import os
import sys

import numpy as np
import torch
from torch import nn

torch.set_num_threads(1)
for case in json.load(open(sys.argv[1])):
    d, rows, img = case["dir"], case["rows"], case["image"]
    c, h, w = img["channels"], img["height"], img["width"]
    layers, ch = [], c
    for out, kernel, stride in case["convs"]:
        layers += [nn.Conv2d(ch, out, kernel, stride=stride), nn.ReLU()]
        ch = out
    with torch.no_grad():
        flat = nn.Sequential(*layers, nn.Flatten())(torch.zeros(1, c, h, w)).shape[1]
    net = nn.Sequential(*layers, nn.Flatten(), nn.Linear(flat, case["width"]), nn.ReLU())
    params = [p for m in net if isinstance(m, (nn.Conv2d, nn.Linear)) for p in (m.weight, m.bias)]
    values = np.fromfile(os.path.join(d, "params.f32"), dtype=np.float32)
    at = 0
    with torch.no_grad():
        for p, slot in zip(params, case["layout"], strict=True):
            assert list(p.shape) == slot["shape"], (slot["name"], list(p.shape), slot["shape"])
            p.copy_(torch.from_numpy(values[at:at + p.numel()]).view(p.shape))
            at += p.numel()
    assert at == values.size
    x = torch.from_numpy(np.fromfile(os.path.join(d, "x.u8"), dtype=np.uint8).reshape([rows] + case["shape"]).copy())
    x = x.float() / 255.0 if case["kind"] == "u8" else x.float()
    if len(case["shape"]) == 2:
        x = x.unsqueeze(1)
    elif img["channels_last"]:
        x = x.permute(0, 3, 1, 2)
    features = net(x)
    r = torch.from_numpy(np.fromfile(os.path.join(d, "r.f32"), dtype=np.float32)).view(features.shape)
    (features * r).sum().backward()
    features.detach().numpy().astype(np.float32).tofile(os.path.join(d, "features.f32"))
    torch.cat([p.grad.reshape(-1) for p in params]).numpy().astype(np.float32).tofile(os.path.join(d, "grads.f32"))
