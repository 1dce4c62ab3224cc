"""PyTorch's reference for hotlab's recurrent core (tests/recurrent.rs): one layer of
`nn.LSTM` or `nn.GRU`, its weights copied from hotlab's, stepped one step at a time for
each env with its state zeroed where an episode starts, as CleanRL's `ppo_atari_lstm.py`
does it.

argv[1]: a JSON list of cases {"dir", "cell", "steps", "envs", "inputs", "width"}; each
case's dir holds params.f32 (w_ih, w_hh, b_ih, b_hh, flat), x.f32 ([T, M, inputs]),
h0.f32 and c0.f32 ([M, width]; c0 for an LSTM), starts.u8 ([T, M]) and r.f32 (the
weights of the loss `sum(out * r)`). Writes out.f32 ([T, M, width]) and grads.f32 (the
four parameters' gradients, flat) into the same dir.
"""
import json
import os
import sys

import numpy as np
import torch
from torch import nn

torch.set_num_threads(1)


def read(d, name, shape, dtype=np.float32):
    return torch.from_numpy(np.fromfile(os.path.join(d, name), dtype=dtype).reshape(shape).copy())


for case in json.load(open(sys.argv[1])):
    d, T, M, n, H = case["dir"], case["steps"], case["envs"], case["inputs"], case["width"]
    lstm = case["cell"] == "lstm"
    net = (nn.LSTM if lstm else nn.GRU)(n, H)
    params = [net.weight_ih_l0, net.weight_hh_l0, net.bias_ih_l0, net.bias_hh_l0]
    flat = np.fromfile(os.path.join(d, "params.f32"), dtype=np.float32)
    at = 0
    with torch.no_grad():
        for p in params:
            p.copy_(torch.from_numpy(flat[at:at + p.numel()]).view(p.shape))
            at += p.numel()
    assert at == flat.size
    x = read(d, "x.f32", [T, M, n])
    starts = read(d, "starts.u8", [T, M], np.uint8).bool()
    h0 = read(d, "h0.f32", [M, H])
    c0 = read(d, "c0.f32", [M, H]) if lstm else None
    outs = []
    for m in range(M):
        h, c = h0[m].view(1, 1, H), (c0[m].view(1, 1, H) if lstm else None)
        column = []
        for t in range(T):
            if starts[t, m]:
                h = torch.zeros_like(h)
                c = torch.zeros_like(c) if lstm else None
            y, state = net(x[t, m].view(1, 1, n), (h, c) if lstm else h)
            h, c = state if lstm else (state, None)
            column.append(y.view(H))
        outs.append(torch.stack(column))
    out = torch.stack(outs, 1)
    r = read(d, "r.f32", [T, M, H])
    (out * r).sum().backward()
    out.detach().numpy().astype(np.float32).tofile(os.path.join(d, "out.f32"))
    torch.cat([p.grad.reshape(-1) for p in params]).numpy().astype(np.float32).tofile(os.path.join(d, "grads.f32"))
