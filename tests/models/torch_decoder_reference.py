#!/usr/bin/env python3
"""PyTorch float64 logits of a Hugging Face decoder checkpoint: the reference for vktower's.

Usage:
  torch_decoder_reference.py MODEL_DIR --tokens 1,5,7 [options]
  torch_decoder_reference.py MODEL_DIR --batch-tokens "1,2,3;4,5,6" [options]

MODEL_DIR is a Hugging Face model directory (config.json and model.safetensors, or shards
named by model.safetensors.index.json) of LlamaForCausalLM, MistralForCausalLM,
Qwen2ForCausalLM or GPT2LMHeadModel, such as scripts/make_tiny_model.py writes. The decoders
here are written from the architectures' published math, not from any library's model code:
the point is a second, independent reading of the same checkpoint.

Options:
  --positions P        position ids, comma-separated (one list for every row, or one list per
                       row separated by ';'); default 0..T-1
  --out FILE.npy       save the logits [B, T, V] (numpy.save) instead of printing them
  --loss               print the mean next-token cross-entropy over all rows
  --greedy N           print N greedily generated ids after each row (the whole sequence
                       recomputed each step; ties go to the lowest id; eos does not stop)
  --self-check         recompute one position's logits in numpy with explicit loops over
                       positions and heads, and fail unless they match to 1e-10
  --check-position I   the position --self-check recomputes (default: the last)

Output, one key=value per line: arch, tokens_shape=B,T, logits_shape=B,T,V, then logits= the
values in row-major order as comma-separated %.17g (or out=FILE.npy), loss=, greedy= (rows
separated by ';'), self_check_max_abs_diff= and self_check=ok.

Exits 77 when torch or numpy cannot be imported, 1 when --self-check fails, 2 on bad input.
"""

import argparse
import json
import math
import os
import struct
import sys

try:
    import numpy as np
    import torch
except ImportError as error:
    print(f"torch_decoder_reference: {error} (apt-get install python3-torch python3-numpy)",
          file=sys.stderr)
    sys.exit(77)

LLAMA_FAMILY = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")


class InputError(Exception):
    """A checkpoint or an argument this reference cannot use; reported with exit code 2."""


# ----------------------------------------------------------------------------------------------
# Checkpoint


def read_safetensors(path):
    """The tensors of one safetensors file as float64 numpy arrays, by name.

    The format: an 8-byte little-endian header length, a JSON header giving each tensor's
    dtype, shape and [begin, end) offsets into the data that follows the header, then the
    data. F32, F16 and BF16 are read; bfloat16 is the upper half of a float32, so widening
    its bits by 16 gives the float32 of the same value."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise InputError(f"{path}: too short for a safetensors file")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if 8 + header_len > len(blob):
        raise InputError(f"{path}: header length {header_len} past the end of the file")
    header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    data = memoryview(blob)[8 + header_len:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        shape = tuple(entry["shape"])
        count = math.prod(shape)
        dtype = entry["dtype"]
        if not 0 <= begin <= end <= len(data):
            raise InputError(f"{path}: {name}'s offsets [{begin}, {end}) are outside the data")
        raw = data[begin:end]
        if dtype == "F32":
            values = np.frombuffer(raw, "<f4")
        elif dtype == "F16":
            values = np.frombuffer(raw, "<f2")
        elif dtype == "BF16":
            values = (np.frombuffer(raw, "<u2").astype("<u4") << 16).view("<f4")
        else:
            raise InputError(f"{path}: {name} is {dtype}; this reference reads F32, F16, BF16")
        if values.size != count:
            raise InputError(f"{path}: {name} has {values.size} values for shape {list(shape)}")
        tensors[name] = values.astype(np.float64).reshape(shape)
    return tensors


def read_checkpoint(model_dir):
    """All the checkpoint's tensors: model.safetensors, or every shard its index names."""
    index_path = os.path.join(model_dir, "model.safetensors.index.json")
    if not os.path.exists(index_path):
        return read_safetensors(os.path.join(model_dir, "model.safetensors"))
    with open(index_path, encoding="utf-8") as f:
        weight_map = json.load(f)["weight_map"]
    tensors = {}
    for file_name in sorted(set(weight_map.values())):
        for name, values in read_safetensors(os.path.join(model_dir, file_name)).items():
            if weight_map.get(name) != file_name:
                raise InputError(f"{file_name} holds {name}, which the index puts elsewhere")
            tensors[name] = values
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise InputError(f"the index names tensors no shard holds: {', '.join(missing[:5])}")
    return tensors


class Model:
    """A checkpoint's config and tensors, with the architecture's numbers resolved."""

    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
            self.config = c = json.load(f)
        self.weights = read_checkpoint(model_dir)
        architecture = (c.get("architectures") or [""])[0]
        if architecture in LLAMA_FAMILY or c.get("model_type") in ("llama", "mistral", "qwen2"):
            self.arch = "llama"
            self.d = c["hidden_size"]
            self.heads = c["num_attention_heads"]
            self.kv_heads = c.get("num_key_value_heads") or self.heads
            self.dh = c.get("head_dim") or self.d // self.heads
            self.layers = c["num_hidden_layers"]
            self.eps = c["rms_norm_eps"]
            self.theta = c.get("rope_theta", 10000.0)
            self.tied = c.get("tie_word_embeddings", False)
            self.embed = self.weights["model.embed_tokens.weight"]
            if c.get("hidden_act", "silu") != "silu":
                raise InputError(f"hidden_act {c['hidden_act']}: only silu is implemented")
            if c.get("rope_scaling"):
                raise InputError("rope_scaling is not implemented")
            if self.heads % self.kv_heads:
                raise InputError("num_attention_heads is not a multiple of num_key_value_heads")
            # A sliding window narrower than the context would change which keys a query
            # sees; refuse rather than guess its exact edge.
            window = c.get("sliding_window")
            use_window = c.get("use_sliding_window", c.get("model_type") == "mistral")
            self.window = window if (use_window and window) else None
        elif architecture == "GPT2LMHeadModel" or c.get("model_type") == "gpt2":
            self.arch = "gpt2"
            self.d = c["n_embd"]
            self.heads = self.kv_heads = c["n_head"]
            self.dh = self.d // self.heads
            self.layers = c["n_layer"]
            self.eps = c.get("layer_norm_epsilon", 1e-5)
            self.positions = c.get("n_positions", 1024)
            self.tied = c.get("tie_word_embeddings", True)
            self.embed = self.weights["transformer.wte.weight"]
            self.activation = c.get("activation_function", "gelu_new")
            if self.activation not in ("gelu_new", "gelu_pytorch_tanh", "gelu"):
                raise InputError(f"activation_function {self.activation} is not implemented")
            self.scale_weights = c.get("scale_attn_weights", True)
            self.scale_by_layer = c.get("scale_attn_by_inverse_layer_idx", False)
            self.window = None
        else:
            raise InputError(f"unknown architecture {architecture or c.get('model_type')}")
        self.vocab = c["vocab_size"]
        if self.embed.shape[0] != self.vocab:
            raise InputError(f"the embedding has {self.embed.shape[0]} rows, vocab_size is "
                             f"{self.vocab}")
        if "lm_head.weight" in self.weights:
            self.head = self.weights["lm_head.weight"]
        elif self.tied:
            self.head = self.embed
        else:
            raise InputError("no lm_head.weight, and the config does not tie the embedding")

    def get(self, name):
        """A tensor as float64 torch, or None where the checkpoint has none (optional biases)."""
        values = self.weights.get(name)
        return None if values is None else torch.from_numpy(values)

    def need(self, name):
        values = self.get(name)
        if values is None:
            raise InputError(f"the checkpoint has no {name}")
        return values


# ----------------------------------------------------------------------------------------------
# The decoders, batched, in torch float64


def linear(model, name, x):
    """nn.Linear: x @ W^T (+ b), W stored [out, in]; the bias only where the checkpoint has it."""
    y = x @ model.need(f"{name}.weight").T
    bias = model.get(f"{name}.bias")
    return y if bias is None else y + bias


def conv1d(model, name, x):
    """GPT-2's Conv1D: x @ W + b, W stored [in, out]."""
    return x @ model.need(f"{name}.weight") + model.need(f"{name}.bias")


def rms_norm(x, weight, eps):
    """x / sqrt(mean(x^2) + eps) * w, over the last axis."""
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * weight


def layer_norm(x, weight, bias, eps):
    """(x - mean) / sqrt(var + eps) * w + b, the population variance over the last axis."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def silu(x):
    return x / (1 + torch.exp(-x))


def gelu(x, activation):
    if activation == "gelu":
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    # gelu_new: the tanh approximation GPT-2 was trained with.
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def rotate_half(x):
    """[x1, x2] -> [-x2, x1], the halves of the last axis: Hugging Face's rotary pairing turns
    the pairs (x[i], x[i + Dh/2]), not adjacent elements."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary(x, positions, theta):
    """x [B, heads, T, Dh] turned by angle position * theta^(-2i/Dh) in each pair i.

    The angles are float64 here; Hugging Face's float32 models compute them in float32, which
    at large positions moves their logits by float32 rounding, not by more."""
    dh = x.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, dh, 2, dtype=torch.float64) / dh)
    freqs = positions.to(torch.float64)[:, :, None] * inv_freq  # [B, T, Dh/2]
    angles = torch.cat((freqs, freqs), dim=-1)[:, None]  # [B, 1, T, Dh]
    return x * torch.cos(angles) + rotate_half(x) * torch.sin(angles)


def attention(q, k, v, scale):
    """Causal softmax(q k^T * scale) v over [B, heads, T, Dh]; query t sees keys 0..t."""
    t = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)) * scale
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def split_heads(x, heads):
    """[B, T, heads * Dh] -> [B, heads, T, Dh]."""
    b, t, _ = x.shape
    return x.reshape(b, t, heads, -1).transpose(1, 2)


def merge_heads(x):
    """[B, heads, T, Dh] -> [B, T, heads * Dh]."""
    b, _, t, _ = x.shape
    return x.transpose(1, 2).reshape(b, t, -1)


def llama_logits(model, tokens, positions):
    """LlamaForCausalLM (and Mistral, Qwen2): pre-norm blocks of RMSNorm, grouped-query
    attention with rotary embedding, and a SwiGLU MLP; logits [B, T, V]."""
    x = torch.from_numpy(model.embed)[tokens]
    group = model.heads // model.kv_heads
    for n in range(model.layers):
        p = f"model.layers.{n}."
        h = rms_norm(x, model.need(f"{p}input_layernorm.weight"), model.eps)
        q = rotary(split_heads(linear(model, f"{p}self_attn.q_proj", h), model.heads),
                   positions, model.theta)
        k = rotary(split_heads(linear(model, f"{p}self_attn.k_proj", h), model.kv_heads),
                   positions, model.theta)
        v = split_heads(linear(model, f"{p}self_attn.v_proj", h), model.kv_heads)
        # Each kv head serves `group` consecutive query heads: query head j reads kv head
        # j // group.
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        y = merge_heads(attention(q, k, v, 1 / math.sqrt(model.dh)))
        x = x + linear(model, f"{p}self_attn.o_proj", y)
        h = rms_norm(x, model.need(f"{p}post_attention_layernorm.weight"), model.eps)
        gate = silu(linear(model, f"{p}mlp.gate_proj", h))
        x = x + linear(model, f"{p}mlp.down_proj", gate * linear(model, f"{p}mlp.up_proj", h))
    x = rms_norm(x, model.need("model.norm.weight"), model.eps)
    return x @ torch.from_numpy(model.head).T


def gpt2_logits(model, tokens, positions):
    """GPT2LMHeadModel: learned positions, pre-norm blocks of LayerNorm, multi-head attention
    through one fused qkv Conv1D, a gelu MLP, and logits through the tied token table."""
    x = torch.from_numpy(model.embed)[tokens] + model.need("transformer.wpe.weight")[positions]
    for n in range(model.layers):
        p = f"transformer.h.{n}."
        h = layer_norm(x, model.need(f"{p}ln_1.weight"), model.need(f"{p}ln_1.bias"), model.eps)
        q, k, v = conv1d(model, f"{p}attn.c_attn", h).split(model.d, dim=-1)
        scale = 1 / math.sqrt(model.dh) if model.scale_weights else 1.0
        if model.scale_by_layer:
            scale /= n + 1
        y = attention(split_heads(q, model.heads), split_heads(k, model.heads),
                      split_heads(v, model.heads), scale)
        x = x + conv1d(model, f"{p}attn.c_proj", merge_heads(y))
        h = layer_norm(x, model.need(f"{p}ln_2.weight"), model.need(f"{p}ln_2.bias"), model.eps)
        x = x + conv1d(model, f"{p}mlp.c_proj",
                       gelu(conv1d(model, f"{p}mlp.c_fc", h), model.activation))
    x = layer_norm(x, model.need("transformer.ln_f.weight"), model.need("transformer.ln_f.bias"),
                   model.eps)
    return x @ torch.from_numpy(model.head).T


def logits(model, tokens, positions):
    """Logits [B, T, V] (float64 numpy) of int arrays tokens and positions [B, T]."""
    tokens_t = torch.from_numpy(np.asarray(tokens, dtype=np.int64))
    positions_t = torch.from_numpy(np.asarray(positions, dtype=np.int64))
    if tokens_t.min() < 0 or tokens_t.max() >= model.vocab:
        raise InputError(f"token ids must lie in [0, {model.vocab})")
    if model.window is not None and tokens_t.shape[1] > model.window:
        raise InputError(f"{tokens_t.shape[1]} tokens exceed the sliding window {model.window}")
    if model.arch == "gpt2" and (positions_t.min() < 0 or positions_t.max() >= model.positions):
        raise InputError(f"GPT-2's positions must lie in [0, {model.positions})")
    with torch.no_grad():
        decoder = gpt2_logits if model.arch == "gpt2" else llama_logits
        return decoder(model, tokens_t, positions_t).numpy()


def next_token_loss(values, tokens):
    """Mean over rows and positions 0..T-2 of -log softmax(logits[t])[tokens[t + 1]]."""
    rows = values[:, :-1]
    top = rows.max(-1, keepdims=True)
    log_z = top[..., 0] + np.log(np.exp(rows - top).sum(-1))
    targets = np.take_along_axis(rows, tokens[:, 1:, None], axis=-1)[..., 0]
    return float((log_z - targets).mean())


def greedy(model, tokens, steps):
    """`steps` greedy ids after each row, the whole sequence recomputed for each one."""
    sequence = np.array(tokens)
    for _ in range(steps):
        t = sequence.shape[1]
        last = logits(model, sequence, np.tile(np.arange(t), (sequence.shape[0], 1)))[:, -1]
        # numpy's argmax returns the first of equal maxima: ties go to the lowest id.
        sequence = np.concatenate([sequence, last.argmax(-1)[:, None]], axis=1)
    return sequence[:, len(tokens[0]):]


# ----------------------------------------------------------------------------------------------
# The self-check: a second computation in plain numpy, one position, explicit loops


def np_rms_norm(x, w, eps):
    return x / math.sqrt(float(np.dot(x, x)) / x.size + eps) * w


def np_layer_norm(x, w, b, eps):
    mean = sum(x) / x.size
    var = sum((xi - mean) ** 2 for xi in x) / x.size
    return (x - mean) / math.sqrt(var + eps) * w + b


def np_rotate(vec, position, theta):
    """Turns each pair (vec[i], vec[i + Dh/2]) by position * theta^(-2i/Dh), one at a time."""
    dh = vec.size
    out = np.empty(dh)
    for i in range(dh // 2):
        angle = position * math.pow(theta, -2.0 * i / dh)
        c, s = math.cos(angle), math.sin(angle)
        out[i] = vec[i] * c - vec[i + dh // 2] * s
        out[i + dh // 2] = vec[i + dh // 2] * c + vec[i] * s
    return out


def np_attend(query, keys, values, scale):
    """One query over its visible keys, the softmax written out with its max subtracted."""
    scores = [float(np.dot(query, key)) * scale for key in keys]
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    total = sum(weights)
    out = np.zeros(values[0].size)
    for w, value in zip(weights, values):
        out += (w / total) * value
    return out


def np_position_logits(model, tokens, positions, last):
    """Logits at position `last` of one row, recomputing positions 0..last one at a time and
    each head on its own."""
    w = model.weights
    dh, group = model.dh, model.heads // model.kv_heads
    if model.arch == "gpt2":
        xs = [w["transformer.wte.weight"][tokens[i]] + w["transformer.wpe.weight"][positions[i]]
              for i in range(last + 1)]
    else:
        xs = [w["model.embed_tokens.weight"][tokens[i]].copy() for i in range(last + 1)]
    for n in range(model.layers):
        if model.arch == "gpt2":
            p = f"transformer.h.{n}."
            qs, ks, vs = [], [], []
            for x in xs:
                h = np_layer_norm(x, w[f"{p}ln_1.weight"], w[f"{p}ln_1.bias"], model.eps)
                qkv = w[f"{p}attn.c_attn.weight"].T.dot(h) + w[f"{p}attn.c_attn.bias"]
                qs.append(qkv[:model.d])
                ks.append(qkv[model.d:2 * model.d])
                vs.append(qkv[2 * model.d:])
            scale = (1 / math.sqrt(dh) if model.scale_weights else 1.0)
            scale /= (n + 1) if model.scale_by_layer else 1
        else:
            p = f"model.layers.{n}."
            qs, ks, vs = [], [], []
            for i, x in enumerate(xs):
                h = np_rms_norm(x, w[f"{p}input_layernorm.weight"], model.eps)
                proj = {}
                for name in ("q", "k", "v"):
                    proj[name] = w[f"{p}self_attn.{name}_proj.weight"].dot(h)
                    if f"{p}self_attn.{name}_proj.bias" in w:
                        proj[name] = proj[name] + w[f"{p}self_attn.{name}_proj.bias"]
                qs.append(np.concatenate([np_rotate(proj["q"][j * dh:(j + 1) * dh],
                                                    positions[i], model.theta)
                                          for j in range(model.heads)]))
                ks.append(np.concatenate([np_rotate(proj["k"][j * dh:(j + 1) * dh],
                                                    positions[i], model.theta)
                                          for j in range(model.kv_heads)]))
                vs.append(proj["v"])
            scale = 1 / math.sqrt(dh)
        new_xs = []
        for i, x in enumerate(xs):
            heads_out = []
            for j in range(model.heads):
                kv = j // group
                heads_out.append(np_attend(
                    qs[i][j * dh:(j + 1) * dh],
                    [k[kv * dh:(kv + 1) * dh] for k in ks[:i + 1]],
                    [v[kv * dh:(kv + 1) * dh] for v in vs[:i + 1]],
                    scale))
            y = np.concatenate(heads_out)
            if model.arch == "gpt2":
                x = x + w[f"{p}attn.c_proj.weight"].T.dot(y) + w[f"{p}attn.c_proj.bias"]
                h = np_layer_norm(x, w[f"{p}ln_2.weight"], w[f"{p}ln_2.bias"], model.eps)
                u = w[f"{p}mlp.c_fc.weight"].T.dot(h) + w[f"{p}mlp.c_fc.bias"]
                if model.activation == "gelu":
                    u = np.array([0.5 * a * (1 + math.erf(a / math.sqrt(2))) for a in u])
                else:
                    u = np.array([0.5 * a * (1 + math.tanh(math.sqrt(2 / math.pi)
                                                           * (a + 0.044715 * a ** 3)))
                                  for a in u])
                x = x + w[f"{p}mlp.c_proj.weight"].T.dot(u) + w[f"{p}mlp.c_proj.bias"]
            else:
                x = x + w[f"{p}self_attn.o_proj.weight"].dot(y)
                if f"{p}self_attn.o_proj.bias" in w:
                    x = x + w[f"{p}self_attn.o_proj.bias"]
                h = np_rms_norm(x, w[f"{p}post_attention_layernorm.weight"], model.eps)
                gate = w[f"{p}mlp.gate_proj.weight"].dot(h)
                up = w[f"{p}mlp.up_proj.weight"].dot(h)
                act = np.array([g / (1 + math.exp(-g)) for g in gate]) * up
                x = x + w[f"{p}mlp.down_proj.weight"].dot(act)
            new_xs.append(x)
        xs = new_xs
    if model.arch == "gpt2":
        x = np_layer_norm(xs[last], w["transformer.ln_f.weight"], w["transformer.ln_f.bias"],
                          model.eps)
    else:
        x = np_rms_norm(xs[last], w["model.norm.weight"], model.eps)
    return model.head.dot(x)


# ----------------------------------------------------------------------------------------------
# Command line


def parse_rows(text, what):
    """'1,2,3;4,5,6' -> [[1, 2, 3], [4, 5, 6]]; every row the same length."""
    try:
        rows = [[int(v) for v in row.split(",")] for row in text.split(";")]
    except ValueError:
        raise InputError(f"{what}: expected comma-separated integers, rows separated by ';'")
    if len({len(r) for r in rows}) != 1:
        raise InputError(f"{what}: the rows differ in length")
    return rows


def format_values(values):
    return ",".join("%.17g" % v for v in np.ravel(values))


def run(args):
    model = Model(args.model_dir)
    if (args.tokens is None) == (args.batch_tokens is None):
        raise InputError("give one of --tokens and --batch-tokens")
    tokens = np.array(parse_rows(args.tokens if args.tokens is not None else args.batch_tokens,
                                 "tokens"), dtype=np.int64)
    if args.tokens is not None and tokens.shape[0] != 1:
        raise InputError("--tokens is one row; use --batch-tokens for several")
    b, t = tokens.shape
    if args.positions is None:
        positions = np.tile(np.arange(t), (b, 1))
    else:
        if args.greedy:
            raise InputError("--greedy extends positions 0..T-1; leave --positions out")
        positions = np.array(parse_rows(args.positions, "--positions"), dtype=np.int64)
        if positions.shape[1] != t or positions.shape[0] not in (1, b):
            raise InputError("--positions: one list of T positions, or one per row")
        positions = np.tile(positions, (b // positions.shape[0], 1))

    values = logits(model, tokens, positions)
    print(f"arch={model.arch}")
    print(f"tokens_shape={b},{t}")
    print(f"logits_shape={b},{t},{values.shape[2]}")
    if args.out:
        np.save(args.out, values)
        print(f"out={args.out}")
    else:
        print(f"logits={format_values(values)}")
    if args.loss:
        if t < 2:
            raise InputError("--loss needs at least two tokens")
        print("loss=%.17g" % next_token_loss(values, tokens))
    if args.greedy:
        ids = greedy(model, tokens, args.greedy)
        print("greedy=" + ";".join(",".join(str(v) for v in row) for row in ids))
    if args.self_check:
        at = t - 1 if args.check_position is None else args.check_position
        if not 0 <= at < t:
            raise InputError(f"--check-position {at} is outside 0..{t - 1}")
        expected = np_position_logits(model, tokens[0], positions[0], at)
        diff = float(np.abs(expected - values[0, at]).max())
        print("self_check_max_abs_diff=%.3g" % diff)
        if not diff <= 1e-10:
            print(f"torch_decoder_reference: the numpy recomputation of position {at} differs "
                  f"by {diff:.3g}", file=sys.stderr)
            return 1
        print("self_check=ok")
    return 0


def main(argv):
    parser = argparse.ArgumentParser(
        description="PyTorch float64 logits of a Hugging Face decoder checkpoint.")
    parser.add_argument("model_dir", metavar="MODEL_DIR")
    parser.add_argument("--tokens", help="one row of ids: 1,5,7")
    parser.add_argument("--batch-tokens", help="rows of ids: '1,2,3;4,5,6'")
    parser.add_argument("--positions", help="position ids (default 0..T-1)")
    parser.add_argument("--out", help="save the logits here (.npy) instead of printing them")
    parser.add_argument("--loss", action="store_true", help="print the next-token loss")
    parser.add_argument("--greedy", type=int, default=0, metavar="N",
                        help="print N greedily generated ids per row")
    parser.add_argument("--self-check", action="store_true",
                        help="recompute one position in numpy loops; fail past 1e-10")
    parser.add_argument("--check-position", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except (InputError, KeyError, OSError, ValueError) as error:
        print(f"torch_decoder_reference: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
