#!/usr/bin/env python3
"""A PyTorch replica of vkt-gpt, to check its validation loss against an
independent implementation (and to try sizes and rates quickly). The same
corpus (every plain file of the fortunes directory in name order, *.dat, *.u8
and links skipped; bytes, the vocabulary the distinct bytes in byte order), the
same windows of context + 1 taken every `context` characters with every tenth
(w % 10 == 9) held out, the same training order (vkt::Dataset's splitmix64
Fisher-Yates shuffle, seed + epoch), the same model (GPT-2 pre-LayerNorm blocks
with a fused qkv projection, tanh GELU, dropout on the attention probabilities
and both residual branches; embeddings normal(0, 0.02) and normal(0, 0.01),
Glorot-uniform kernels and zero biases as vktower's dense), AdamW (weight decay
0.1) on the matrices and Adam on the rest, each clipping its own gradients to a
global norm of 1 as vktower clips (scale 1 / max(norm, 1)), the token table
updated as vktower updates a sparse gradient (its rows in the batch only:
their moments and weight decay, the untouched rows left alone, and its norm
counted per occurrence of a token; unless the weights are tied, when the
table's gradient is dense on both sides), and vktower's LearningRate::cosine_decay (linear warm-up from
0 over max(steps // 20, 1) steps, counted from global step 0, then a cosine to
alpha = 0.1 over `steps` steps after the warm-up). Validation: the first
eval-batches x batch-size validation windows, in order. Its initial weights and
dropout masks are torch's, not vktower's, so the losses are the same
distribution, not the same numbers.

  /usr/bin/python3 samples/vkt_gpt/torch_replica.py               # vkt-gpt's defaults
  /usr/bin/python3 samples/vkt_gpt/torch_replica.py --steps 20 --layers 1 --width 32

Prints "step N: validation loss X nats/char" every --eval-every steps and
"val_loss=X" at the end."""
import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

M64 = (1 << 64) - 1


def permutation(n, seed):
    """vkt::Dataset's shuffle (runtime/io/dataset.cpp): Fisher-Yates with splitmix64."""
    order = list(range(n))
    state = seed & M64
    for i in range(n - 1, 0, -1):
        state = (state + 0x9E3779B97F4A7C15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        z ^= z >> 31
        j = z % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def read_corpus(path):
    """corpus.h's read_corpus: (text bytes, vocab bytes, files)."""
    if os.path.isdir(path):
        files = []
        for name in os.listdir(path):
            full = os.path.join(path, name)
            ext = os.path.splitext(name)[1]
            if os.path.islink(full) or not os.path.isfile(full) or ext in (".dat", ".u8"):
                continue
            files.append(full)
        files.sort(key=os.fsencode)  # std::sort of fs::path: byte order for these names
    else:
        files = [path]
    text = b"".join(open(f, "rb").read() for f in files)
    vocab = sorted(set(text))
    return text, vocab, len(files)


def windows(ids, context, validation):
    """corpus.h's windows: tokens [N, T] and next [N, T]."""
    size = ids.numel()
    starts = [s for w, s in enumerate(range(0, size - context, context))
              if (w % 10 == 9) == validation]
    idx = torch.tensor(starts, dtype=torch.long)[:, None] + torch.arange(context + 1)[None, :]
    rows = ids[idx]
    return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()


def dense(d_in, d_out):
    """vktower's layers::dense: Glorot-uniform kernel, zero bias."""
    m = nn.Linear(d_in, d_out)
    nn.init.xavier_uniform_(m.weight)
    nn.init.zeros_(m.bias)
    return m


class Block(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads, self.p = heads, dropout
        self.ln_1 = nn.LayerNorm(d, eps=1e-5)
        self.qkv = dense(d, 3 * d)
        self.out = dense(d, d)
        self.ln_2 = nn.LayerNorm(d, eps=1e-5)
        self.mlp_in = dense(d, 4 * d)
        self.mlp_out = dense(4 * d, d)

    def attention(self, x):
        b, t, d = x.shape
        h, dh = self.heads, d // self.heads
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (y.reshape(b, t, h, dh).permute(0, 2, 1, 3) for y in (q, k, v))
        s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(dh))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        p = F.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
        p = F.dropout(p, self.p, self.training)
        y = (p @ v).permute(0, 2, 1, 3).reshape(b, t, d)
        return self.out(y)

    def forward(self, x):
        h = x + F.dropout(self.attention(self.ln_1(x)), self.p, self.training)
        inner = F.gelu(self.mlp_in(self.ln_2(h)), approximate="tanh")
        return h + F.dropout(self.mlp_out(inner), self.p, self.training)


class Gpt(nn.Module):
    def __init__(self, vocab, context, width, layers, heads, dropout, tie_weights=False):
        super().__init__()
        self.tie_weights = tie_weights
        self.wte = nn.Parameter(torch.randn(vocab, width) * 0.02)
        self.wpe = nn.Parameter(torch.randn(context, width) * 0.01)
        self.blocks = nn.ModuleList(Block(width, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width, eps=1e-5)
        if tie_weights:  # vkt-gpt --tie-weights: the token table, and a bias
            self.lm_bias = nn.Parameter(torch.zeros(vocab))
        else:
            self.lm_head = dense(width, vocab)

    def forward(self, tokens):
        self.rows = self.wte[tokens]  # the lookup's rows: vktower's sparse gradient
        if self.rows.requires_grad:
            self.rows.retain_grad()
        h = self.rows + self.wpe
        for block in self.blocks:
            h = block(h)
        if self.tie_weights:
            return self.ln_f(h) @ self.wte.t() + self.lm_bias
        return self.lm_head(self.ln_f(h))


def read_safetensors(path):
    """name -> float32 tensor of a safetensors file (vktower's checkpoints), by hand:
    an 8-byte header length, a JSON header, the data."""
    import json
    import struct
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        begin, end = info["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.float32).reshape(
            info["shape"])
    return out


@torch.no_grad()
def load_vktower(model, path):
    """The model's weights from a vkt-gpt checkpoint (--init): vktower's names,
    dense kernels [in, out] transposed into nn.Linear's [out, in]."""
    saved = read_safetensors(path)
    model.wte.copy_(saved["wte"])
    model.wpe.copy_(saved["wpe"])
    for i, block in enumerate(model.blocks):
        prefix = "transformer_block" + (f"_{i}" if i else "")
        for ln in ("ln_1", "ln_2"):
            getattr(block, ln).weight.copy_(saved[f"{prefix}/{ln}/gamma"])
            getattr(block, ln).bias.copy_(saved[f"{prefix}/{ln}/beta"])
        for mine, theirs in (("qkv", "attention/qkv"), ("out", "attention/out"),
                             ("mlp_in", "mlp_in"), ("mlp_out", "mlp_out")):
            getattr(block, mine).weight.copy_(saved[f"{prefix}/{theirs}/kernel"].t())
            getattr(block, mine).bias.copy_(saved[f"{prefix}/{theirs}/bias"])
    model.ln_f.weight.copy_(saved["ln_f/gamma"])
    model.ln_f.bias.copy_(saved["ln_f/beta"])
    if model.tie_weights:
        model.lm_bias.copy_(saved["lm_head/bias"])
    else:
        model.lm_head.weight.copy_(saved["lm_head/kernel"].t())
        model.lm_head.bias.copy_(saved["lm_head/bias"])


def cosine_decay(rate, decay_steps, alpha, warmup_steps):
    """vkt::LearningRate::cosine_decay (optimizers/schedule.cpp), of the global
    step before the update (0 for the first)."""
    def at(step):
        if step < warmup_steps:
            return rate * step / warmup_steps
        s = min(float(step - warmup_steps), float(decay_steps))
        return rate * (alpha + (1.0 - alpha) * 0.5 * (1.0 + math.cos(math.pi * s / decay_steps)))
    return at


@torch.no_grad()
def clip(params, rows_grad=None, table=None):
    """vktower's Clipping::global_norm = 1 of one optimizer call: every
    gradient scaled by 1 / max(norm, 1), the norm over the dense gradients and,
    for the sparse token table, its rows as the lookup gave them (a token
    counted as often as it occurs, as tf.clip_by_global_norm on IndexedSlices)."""
    sq = sum(float((q.grad ** 2).sum()) for q in params)
    if rows_grad is not None:
        sq += float((rows_grad ** 2).sum())
    scale = 1.0 / max(math.sqrt(sq), 1.0)
    for q in params:
        q.grad.mul_(scale)
    if table is not None:
        table.param.grad.mul_(scale)


class LazyAdamW:
    """vktower's AdamW on a sparse gradient (optimizer.h): only the rows named
    in the batch change, parameters and moments; the step count and bias
    corrections are the global step's."""

    def __init__(self, param, weight_decay, betas=(0.9, 0.999), eps=1e-8):
        self.param, self.wd, self.betas, self.eps = param, weight_decay, betas, eps
        self.m = torch.zeros_like(param)
        self.v = torch.zeros_like(param)

    @torch.no_grad()
    def step(self, tokens, lr, t):
        rows = torch.unique(tokens)
        g = self.param.grad[rows]  # duplicates already summed by the dense gradient
        b1, b2 = self.betas
        p = self.param[rows] * (1.0 - lr * self.wd)
        m = self.m[rows].mul_(b1).add_(g, alpha=1.0 - b1)
        v = self.v[rows].mul_(b2).addcmul_(g, g, value=1.0 - b2)
        denom = (v / (1.0 - b2 ** t)).sqrt_().add_(self.eps)
        self.param[rows] = p - lr / (1.0 - b1 ** t) * m / denom
        self.m[rows], self.v[rows] = m, v
        self.param.grad = None


def loss_of(model, tokens, nxt):
    logits = model(tokens)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), nxt.reshape(-1))


@torch.no_grad()
def evaluate(model, val_tokens, val_next, batch_size, batches):
    """Estimator::evaluate: the validation windows in order, `batches` batches,
    every example counted once."""
    model.eval()
    total, count = 0.0, 0
    for b in range(batches):
        lo = b * batch_size
        if lo >= val_tokens.shape[0]:
            break
        x, y = val_tokens[lo:lo + batch_size], val_next[lo:lo + batch_size]
        total += loss_of(model, x, y).item() * x.shape[0]
        count += x.shape[0]
    model.train()
    return total / count


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--learning-rate", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-batches", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default="/usr/share/games/fortunes")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tie-weights", action="store_true")
    p.add_argument("--init", help="start from a vkt-gpt checkpoint's weights (a .safetensors "
                   "file; vkt-gpt --steps 1 writes its initial weights, the warm-up's first "
                   "rate being 0)")
    a = p.parse_args()
    if a.width % a.heads:
        p.error(f"--heads {a.heads} does not divide --width {a.width}")
    torch.set_num_threads(a.threads)
    torch.set_default_dtype(torch.float32)
    torch.manual_seed(a.seed)

    text, vocab, files = read_corpus(a.data)
    table = torch.full((256,), -1, dtype=torch.long)
    table[torch.tensor(vocab)] = torch.arange(len(vocab))
    ids = table[torch.tensor(list(text), dtype=torch.long)]
    train_tokens, train_next = windows(ids, a.context, False)
    val_tokens, val_next = windows(ids, a.context, True)
    n_train = train_tokens.shape[0]
    print(f"{len(text)} characters of {files} files ({len(vocab)} distinct); {n_train} training "
          f"and {val_tokens.shape[0]} validation windows of {a.context}", flush=True)

    model = Gpt(len(vocab), a.context, a.width, a.layers, a.heads, a.dropout, a.tie_weights)
    if a.init:
        load_vktower(model, a.init)
    lazy = not a.tie_weights  # the token table's gradient is sparse in vktower
    matrices = [q for q in model.parameters() if q.dim() == 2 and not (lazy and q is model.wte)]
    others = [q for q in model.parameters() if q.dim() != 2]
    adamw = torch.optim.AdamW(matrices, lr=0.0, betas=(0.9, 0.999), eps=1e-8,
                              weight_decay=a.weight_decay)
    table = LazyAdamW(model.wte, a.weight_decay) if lazy else None
    adam = torch.optim.Adam(others, lr=0.0, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    lr = cosine_decay(a.learning_rate, a.steps, 0.1, max(a.steps // 20, 1))

    per_epoch = n_train // a.batch_size  # drop_remainder
    order, epoch = None, -1
    val_loss = float("nan")
    start = time.time()
    for step in range(a.steps):
        if step // per_epoch != epoch:
            epoch = step // per_epoch
            order = torch.tensor(permutation(n_train, a.seed + epoch), dtype=torch.long)
        b = step % per_epoch
        rows = order[b * a.batch_size:(b + 1) * a.batch_size]
        loss = loss_of(model, train_tokens[rows], train_next[rows])
        adamw.zero_grad(set_to_none=True)
        adam.zero_grad(set_to_none=True)
        loss.backward()
        clip(matrices, model.rows.grad if lazy else None, table)
        clip(others)
        rate = lr(step)
        for opt in (adamw, adam):
            for g in opt.param_groups:
                g["lr"] = rate
        adamw.step()
        adam.step()
        if lazy:
            table.step(train_tokens[rows], rate, step + 1)
        done = step + 1
        if done % a.eval_every == 0 or done == a.steps:
            val_loss = evaluate(model, val_tokens, val_next, a.batch_size, a.eval_batches)
            print(f"step {done}: validation loss {val_loss:.4f} nats/char "
                  f"(training loss {loss.item():.4f}, {time.time() - start:.0f} s)", flush=True)
    print(f"val_loss={val_loss:.4f}")


if __name__ == "__main__":
    main()
