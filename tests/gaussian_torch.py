"""PyTorch's own `Normal` on the cases the `continuous` test writes: per case the log-prob
of each row's action and each row's entropy, summed over the components, in float64."""

import json
import sys

import torch
from torch.distributions import Normal


def main():
    cases = json.load(open(sys.argv[1]))
    out = []
    for c in cases:
        rows, dims = c["rows"], c["dims"]
        mean = torch.tensor(c["mean"], dtype=torch.float64).view(rows, dims)
        log_std = torch.tensor(c["log_std"], dtype=torch.float64).view(1, dims).expand(rows, dims)
        actions = torch.tensor(c["actions"], dtype=torch.float64).view(rows, dims)
        d = Normal(mean, log_std.exp())
        out.append({"log_prob": d.log_prob(actions).sum(-1).tolist(), "entropy": d.entropy().sum(-1).tolist()})
    json.dump(out, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
