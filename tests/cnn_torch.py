"""PyTorch's reference for hotlab's CNN encoder (tests/pixels.rs), written from the networks
it follows, not from hotlab's layer list: for frames of 36 pixels a side and more, CleanRL's
`ppo_atari.py` network (Conv2d 32 8×8 stride 4, 64 4×4 stride 2, 64 3×3 stride 1, each with a
ReLU, `nn.Flatten`, `nn.Linear` to 512, ReLU); for smaller grids MinAtar's baseline (Conv2d
16 3×3 stride 1, ReLU, `nn.Flatten`, `nn.Linear` to 128, ReLU). Fed `x / 255.0` (flags as they
are), channels first: a `[H, W]` image is one channel; of `[a, b, c]` the smallest axis holds
the channels (the last on a tie, Gymnasium's `[H, W, C]`).

argv[1]: a JSON list of cases {"dir", "rows", "shape", "kind", "layout": [{"name", "shape"}]};
each case's dir holds params.f32 (the encoder's weights, flat, in `layout`'s order), x.u8 (the
images) and r.f32 (the weights of the loss `sum(features * r)`). Writes features.f32 and
grads.f32 (in `layout`'s order) into the same dir.
"""
import json
import os
import sys

import numpy as np
import torch
from torch import nn

torch.set_num_threads(1)
NATURE = ([(32, 8, 4), (64, 4, 2), (64, 3, 1)], 512)
MINATAR = ([(16, 3, 1)], 128)


def layout(shape):
    """(channels, height, width, channels last) of an image of `shape`."""
    if len(shape) == 2:
        return 1, shape[0], shape[1], True
    a, b, c = shape
    if c <= a and c <= b:
        return c, a, b, True
    return a, b, c, False


def encoder(shape):
    c, h, w, _ = layout(shape)
    convs, width = NATURE if min(h, w) >= 36 else MINATAR
    layers, ch = [], c
    for out, kernel, stride in convs:
        layers += [nn.Conv2d(ch, out, kernel, stride=stride), nn.ReLU()]
        ch = out
    with torch.no_grad():
        flat = nn.Sequential(*layers, nn.Flatten())(torch.zeros(1, c, h, w)).shape[1]
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(flat, width), nn.ReLU())


def channels_first(x, shape, kind):
    """Images `[rows, *shape]` as the network reads them."""
    x = x.float() / 255.0 if kind == "u8" else x.float()
    if len(shape) == 2:
        return x.unsqueeze(1)
    return x.permute(0, 3, 1, 2) if layout(shape)[3] else x


def load(params, case):
    """The flat weights of case's dir (params.f32), in its `layout`'s order, into `params`."""
    values = np.fromfile(os.path.join(case["dir"], "params.f32"), dtype=np.float32)
    at = 0
    with torch.no_grad():
        for p, slot in zip(params, case["layout"], strict=True):
            assert list(p.shape) == slot["shape"], (slot["name"], list(p.shape), slot["shape"])
            p.copy_(torch.from_numpy(values[at:at + p.numel()]).view(p.shape))
            at += p.numel()
    assert at == values.size


def main():
    for case in json.load(open(sys.argv[1])):
        d, rows, shape = case["dir"], case["rows"], case["shape"]
        net = encoder(shape)
        params = [p for m in net if isinstance(m, (nn.Conv2d, nn.Linear)) for p in (m.weight, m.bias)]
        load(params, case)
        x = torch.from_numpy(np.fromfile(os.path.join(d, "x.u8"), dtype=np.uint8).reshape([rows] + shape).copy())
        features = net(channels_first(x, shape, case["kind"]))
        r = torch.from_numpy(np.fromfile(os.path.join(d, "r.f32"), dtype=np.float32)).view(features.shape)
        (features * r).sum().backward()
        features.detach().numpy().astype(np.float32).tofile(os.path.join(d, "features.f32"))
        grads = torch.cat([p.grad.reshape(-1) for p in params])
        grads.numpy().astype(np.float32).tofile(os.path.join(d, "grads.f32"))


if __name__ == "__main__":
    main()
