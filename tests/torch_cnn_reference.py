#!/usr/bin/env python3
"""PyTorch's float64 side of tests/tower/test_cnn_torch.cpp.

Usage: torch_cnn_reference.py DIR STEPS. Reads from DIR the initial variables
(init.<name>.npy, in vktower's layouts: conv kernels [KH, KW, C, O], dense
kernels [in, out]) and each step's batch (x.<k>.npy [N, H, W, 1] f32,
y.<k>.npy [N] i32); trains the same CNN with Adam for STEPS steps in float64;
writes loss.npy (one loss per step) and final.<name>.npy in vktower's layouts."""

import sys

import numpy as np
import torch

CONVS = ("conv1", "conv2")


def load(directory, name):
    return torch.from_numpy(np.load(f"{directory}/init.{name}.npy").astype(np.float64))


def parameters(directory):
    """Leaf tensors in PyTorch's layouts, keyed by vktower's names."""
    p = {}
    for conv in CONVS:
        p[f"{conv}/kernel"] = load(directory, f"{conv}.kernel").permute(3, 2, 0, 1).contiguous()
        p[f"{conv}_bn/gamma"] = load(directory, f"{conv}_bn.gamma")
        p[f"{conv}_bn/beta"] = load(directory, f"{conv}_bn.beta")
    for dense in ("dense", "logits"):
        p[f"{dense}/kernel"] = load(directory, f"{dense}.kernel").t().contiguous()
        p[f"{dense}/bias"] = load(directory, f"{dense}.bias")
    for t in p.values():
        t.requires_grad_(True)
    return p


def forward(p, stats, x):
    """conv 3x3 (same, no bias) - batch norm (training) - relu - 2x2 max pool, twice;
    flatten in NHWC order, as vktower; dense 16 relu; dense logits."""
    h = x.permute(0, 3, 1, 2)  # NHWC -> NCHW
    for conv in CONVS:
        h = torch.nn.functional.conv2d(h, p[f"{conv}/kernel"], padding=1)
        mean, var = stats[conv]
        # momentum 0.1 here is vktower's 0.9; running_var is updated unbiased in both.
        h = torch.nn.functional.batch_norm(h, mean, var, p[f"{conv}_bn/gamma"],
                                           p[f"{conv}_bn/beta"], training=True, momentum=0.1,
                                           eps=1e-3)
        h = torch.nn.functional.max_pool2d(torch.relu(h), 2)
    h = h.permute(0, 2, 3, 1).reshape(h.shape[0], -1)
    h = torch.relu(torch.nn.functional.linear(h, p["dense/kernel"], p["dense/bias"]))
    return torch.nn.functional.linear(h, p["logits/kernel"], p["logits/bias"])


def main():
    directory, steps = sys.argv[1], int(sys.argv[2])
    torch.set_default_dtype(torch.float64)
    p = parameters(directory)
    stats = {conv: (load(directory, f"{conv}_bn.moving_mean").clone(),
                    load(directory, f"{conv}_bn.moving_variance").clone()) for conv in CONVS}
    adam = torch.optim.Adam(p.values(), lr=0.01)
    losses = []
    for step in range(steps):
        x = torch.from_numpy(np.load(f"{directory}/x.{step}.npy").astype(np.float64))
        y = torch.from_numpy(np.load(f"{directory}/y.{step}.npy").astype(np.int64))
        adam.zero_grad()
        loss = torch.nn.functional.cross_entropy(forward(p, stats, x), y)
        loss.backward()
        adam.step()
        losses.append(loss.item())
    np.save(f"{directory}/loss.npy", np.array(losses))
    out = {name: t.detach() for name, t in p.items()}
    for conv in CONVS:
        out[f"{conv}/kernel"] = out[f"{conv}/kernel"].permute(2, 3, 1, 0)
        out[f"{conv}_bn/moving_mean"], out[f"{conv}_bn/moving_variance"] = stats[conv]
    for dense in ("dense", "logits"):
        out[f"{dense}/kernel"] = out[f"{dense}/kernel"].t()
    for name, t in out.items():
        np.save(f"{directory}/final.{name.replace('/', '.')}.npy", t.contiguous().numpy())


if __name__ == "__main__":
    main()
