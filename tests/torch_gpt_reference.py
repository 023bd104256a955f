#!/usr/bin/env python3
"""PyTorch's float64 side of tests/tower/test_gpt_torch.cpp.

Usage: torch_gpt_reference.py DIR STEPS. Reads from DIR the initial variables
(init.<name>.npy, vktower's names with '/' as '.', dense kernels [in, out])
and each step's batch (tokens.<k>.npy and next.<k>.npy, [B, T] i32); trains
vkt-gpt's model (samples/vkt_gpt/gpt_model.h) without dropout for STEPS steps
in float64: AdamW (weight decay 0.1) on the rank-2 variables and Adam on the
rest, vktower's LearningRate::cosine_decay(0.01, STEPS, 0.1, max(STEPS // 20, 1)),
each optimizer scaling its gradients by 1 / max(global norm, 1) first, the
norm taken as vktower takes it (tf.clip_by_global_norm: the token table's
gradient counted per occurrence of a token, as the rows of its sparse
gradient, and its update lazy: only the rows in the batch change; with the
weights tied, the table's gradient is dense). Writes
loss.npy and final.<name>.npy."""

import glob
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


def load(directory):
    p = {}
    for path in glob.glob(f"{directory}/init.*.npy"):
        name = os.path.basename(path)[len("init."):-len(".npy")].replace(".", "/")
        p[name] = torch.from_numpy(np.load(path).astype(np.float64)).requires_grad_(True)
    return p


def layer_norm(p, name, x):
    return F.layer_norm(x, x.shape[-1:], p[f"{name}/gamma"], p[f"{name}/beta"], eps=1e-5)


def dense(p, name, x):
    return x @ p[f"{name}/kernel"] + p[f"{name}/bias"]


def block(p, name, h, heads):
    b, t, d = h.shape
    q, k, v = dense(p, f"{name}/attention/qkv", layer_norm(p, f"{name}/ln_1", h)).split(d, -1)
    q, k, v = (y.reshape(b, t, heads, d // heads).permute(0, 2, 1, 3) for y in (q, k, v))
    s = (q @ k.transpose(-1, -2)) / math.sqrt(d // heads)
    s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    y = (F.softmax(s, -1) @ v).permute(0, 2, 1, 3).reshape(b, t, d)
    h = h + dense(p, f"{name}/attention/out", y)
    inner = F.gelu(dense(p, f"{name}/mlp_in", layer_norm(p, f"{name}/ln_2", h)), approximate="tanh")
    return h + dense(p, f"{name}/mlp_out", inner)


@torch.no_grad()
def lazy_adamw(table, m, v, tokens, lr, t, wd=0.1, b1=0.9, b2=0.999, eps=1e-8):
    """AdamW on the rows of `table` named in `tokens` only, with the global
    step's bias corrections (vktower's sparse update)."""
    rows = torch.unique(tokens)
    g = table.grad[rows]
    m[rows] = m[rows] * b1 + (1 - b1) * g
    v[rows] = v[rows] * b2 + (1 - b2) * g * g
    p = table[rows] * (1 - lr * wd)
    table[rows] = p - lr / (1 - b1 ** t) * m[rows] / ((v[rows] / (1 - b2 ** t)).sqrt() + eps)


def main():
    directory, steps = sys.argv[1], int(sys.argv[2])
    torch.set_default_dtype(torch.float64)
    p = load(directory)
    blocks = sorted({n.split("/")[0] for n in p if n.startswith("transformer_block")},
                    key=lambda n: (len(n), n))
    heads = 2
    # Tied: the logits read the token table (no lm_head/kernel), whose gradient
    # is then dense in vktower too (the lookup's rows scattered into it).
    tied = "lm_head/kernel" not in p
    matrices = [n for n in sorted(p) if p[n].dim() == 2]
    others = [n for n in sorted(p) if p[n].dim() != 2]
    # Untied, the table's gradient is sparse in vktower and its update lazy
    # (optimizer.h): only the rows in the batch change, parameters and moments.
    dense_matrices = [n for n in matrices if n != "wte" or tied]
    adamw = torch.optim.AdamW([p[n] for n in dense_matrices], lr=0.0, weight_decay=0.1)
    table_m = torch.zeros_like(p["wte"])
    table_v = torch.zeros_like(p["wte"])
    adam = torch.optim.Adam([p[n] for n in others], lr=0.0)
    warmup = max(steps // 20, 1)

    def rate(step):
        if step < warmup:
            return 0.01 * step / warmup
        s = min(float(step - warmup), float(steps))
        return 0.01 * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * s / steps)))

    losses = []
    for step in range(steps):
        tokens = torch.from_numpy(np.load(f"{directory}/tokens.{step}.npy").astype(np.int64))
        nxt = torch.from_numpy(np.load(f"{directory}/next.{step}.npy").astype(np.int64))
        rows = p["wte"][tokens]
        rows.retain_grad()
        h = rows + p["wpe"]
        for name in blocks:
            h = block(p, name, h, heads)
        features = layer_norm(p, "ln_f", h)
        if tied:
            logits = features @ p["wte"].t() + p["lm_head/bias"]
        else:
            logits = dense(p, "lm_head", features)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), nxt.reshape(-1))
        for t in p.values():
            t.grad = None
        loss.backward()
        for names, opt in ((matrices, adamw), (others, adam)):
            sq = sum(float((p[n].grad ** 2).sum()) for n in names if n != "wte" or tied)
            if "wte" in names and not tied:
                sq += float((rows.grad ** 2).sum())
            scale = 1.0 / max(math.sqrt(sq), 1.0)
            for n in names:
                p[n].grad.mul_(scale)
            for g in opt.param_groups:
                g["lr"] = rate(step)
            opt.step()
        if not tied:
            lazy_adamw(p["wte"], table_m, table_v, tokens, rate(step), step + 1)
        losses.append(loss.item())
    np.save(f"{directory}/loss.npy", np.array(losses))
    for name, t in p.items():
        np.save(f"{directory}/final.{name.replace('/', '.')}.npy", t.detach().numpy())


if __name__ == "__main__":
    main()
