#!/usr/bin/env python3
"""vkt-bench-finetune's reference: a Llama-shaped decoder (RMSNorm, rotary embedding,
grouped-query attention, SwiGLU MLP, untied lm_head) with LoRA adapters on its attention
projections, fine-tuned by PyTorch on the CPU (or, with `--device cuda`, the GPU) on random
tokens, timed over `--steps` steps after a warm-up; then greedy generation at batch 1, timed
with a key/value cache (one token per forward) and without one (the whole prefix recomputed
for every token). The base is frozen, in bf16 under `--precision bf16` and in f32 otherwise,
as vktower freezes it; only the adapters train (AdamW, clipped to a global norm of 1).
Prints `key=value` lines: pytorch_tokens_per_s counts trained tokens, pytorch_tokens_per_cpu_s
the same per CPU second of this process, pytorch_generate_tokens_per_s and
pytorch_generate_nocache_tokens_per_s generated tokens (the prompt's forward included)."""

import argparse
import contextlib
import math
import sys

from torch_blas import autocast_dtype, print_run_facts, timed_steps


def build_model(torch, args, base_dtype):
    """The decoder with LoRA on q/k/v/o, its base parameters in base_dtype and frozen.

    Defined inside a function so that `import torch` stays after argparse (--help works
    without torch), as in the other bench scripts."""
    nn = torch.nn
    functional = torch.nn.functional

    class RmsNorm(nn.Module):
        """x / sqrt(mean(x^2) + eps) * w, reduced in f32 whatever the weight's dtype: the
        residual stream stays f32 and only the matmuls drop to the autocast dtype."""

        def __init__(self, width, eps):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(width, dtype=base_dtype))

        def forward(self, x):
            x = x.float()
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    class LoraLinear(nn.Module):
        """A frozen bias-free projection plus a trainable rank-r update, scaled by alpha / r:
        y = W x + (alpha / r) B A x. A starts Kaiming-uniform (a = sqrt(5), nn.Linear's own
        init) and B at zero, so the adapted model starts equal to the base; no dropout."""

        def __init__(self, inputs, outputs, rank, alpha):
            super().__init__()
            self.base = nn.Linear(inputs, outputs, bias=False, dtype=base_dtype)
            self.lora_a = nn.Parameter(torch.empty(rank, inputs))
            self.lora_b = nn.Parameter(torch.zeros(outputs, rank))
            nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))
            self.scaling = alpha / rank

        def forward(self, x):
            update = functional.linear(functional.linear(x, self.lora_a), self.lora_b)
            return self.base(x) + update * self.scaling

    def rotate_half(x):
        """[x1, x2] -> [-x2, x1] over the halves of the last axis: the rotary pairs are
        (x[i], x[i + Dh/2]), the Hugging Face Llama layout vktower's checkpoints use."""
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def split_heads(x, heads):
        """[B, T, heads * Dh] -> [B, heads, T, Dh]."""
        b, t, _ = x.shape
        return x.reshape(b, t, heads, -1).transpose(1, 2)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads, self.kv_heads = args.heads, args.kv_heads
            self.head_dim = args.hidden // args.heads
            kv_width = args.kv_heads * self.head_dim
            lora = (args.lora_rank, args.lora_alpha)
            self.q_proj = LoraLinear(args.hidden, args.hidden, *lora)
            self.k_proj = LoraLinear(args.hidden, kv_width, *lora)
            self.v_proj = LoraLinear(args.hidden, kv_width, *lora)
            self.o_proj = LoraLinear(args.hidden, args.hidden, *lora)

        def forward(self, x, cos, sin, past):
            """x [B, T, hidden] at the positions whose angles cos/sin [T, Dh] hold; past the
            keys and values [B, kv_heads, S, Dh] of the S positions before them, or None.
            Returns the output and the keys and values of all S + T positions."""
            q = split_heads(self.q_proj(x), self.heads)
            k = split_heads(self.k_proj(x), self.kv_heads)
            v = split_heads(self.v_proj(x), self.kv_heads)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            if past is not None:
                k = torch.cat((past[0], k), dim=2)
                v = torch.cat((past[1], v), dim=2)
            present = (k, v)
            # Grouped-query attention: kv head j serves query heads j * group .. + group - 1.
            # The cache keeps the kv_heads, not the repeats: that is its memory saving.
            group = self.heads // self.kv_heads
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
            scores = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(self.head_dim))
            t, s = q.shape[-2], k.shape[-2]
            if t > 1:
                # torch 1.13 has no scaled_dot_product_attention: the causal mask by hand.
                # Query i sits at position s - t + i and sees keys 0 .. s - t + i.
                future = torch.ones(t, s, dtype=torch.bool, device=x.device).triu(s - t + 1)
                scores = scores.masked_fill(future, float("-inf"))
            # The softmax in f32 whatever autocast did to the scores.
            probs = torch.softmax(scores.float(), dim=-1)
            y = (probs @ v).transpose(1, 2).reshape(x.shape[0], t, -1)
            return self.o_proj(y), present

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RmsNorm(args.hidden, 1e-6)
            self.self_attn = Attention()
            self.post_attention_layernorm = RmsNorm(args.hidden, 1e-6)
            self.gate_proj = nn.Linear(args.hidden, args.intermediate, bias=False,
                                       dtype=base_dtype)
            self.up_proj = nn.Linear(args.hidden, args.intermediate, bias=False,
                                     dtype=base_dtype)
            self.down_proj = nn.Linear(args.intermediate, args.hidden, bias=False,
                                       dtype=base_dtype)

        def forward(self, x, cos, sin, past):
            y, present = self.self_attn(self.input_layernorm(x), cos, sin, past)
            x = x + y
            h = self.post_attention_layernorm(x)
            x = x + self.down_proj(functional.silu(self.gate_proj(h)) * self.up_proj(h))
            return x, present

    class Decoder(nn.Module):
        def __init__(self, positions):
            super().__init__()
            self.embed_tokens = nn.Embedding(args.vocab, args.hidden, dtype=base_dtype)
            self.layers = nn.ModuleList(Block() for _ in range(args.layers))
            self.norm = RmsNorm(args.hidden, 1e-6)
            self.lm_head = nn.Linear(args.hidden, args.vocab, bias=False, dtype=base_dtype)
            # Angle position * 10000^(-2i/Dh) for pair i, both halves alike; f32 tables
            # (buffers, not parameters: they neither train nor take the base's dtype).
            head_dim = args.hidden // args.heads
            inv_freq = 1.0 / 10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim)
            freqs = torch.arange(positions).float()[:, None] * inv_freq
            angles = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos", angles.cos(), persistent=False)
            self.register_buffer("sin", angles.sin(), persistent=False)

        def forward(self, tokens, start=0, past=None):
            """The final-normed hidden states [B, T, hidden] of tokens at positions start ..
            start + T - 1 (past holding each layer's keys and values of 0 .. start - 1), and
            each layer's keys and values of 0 .. start + T - 1. The lm_head is the caller's:
            training needs every position's logits, generation only the last one's."""
            x = self.embed_tokens(tokens).float()
            cos = self.cos[start:start + tokens.shape[1]]
            sin = self.sin[start:start + tokens.shape[1]]
            presents = []
            for n, layer in enumerate(self.layers):
                x, present = layer(x, cos, sin, None if past is None else past[n])
                presents.append(present)
            return self.norm(x), presents

    positions = max(args.context, args.prompt_tokens + args.generate_tokens)
    model = Decoder(positions)
    for name, parameter in model.named_parameters():
        parameter.requires_grad_("lora_" in name)
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--intermediate", type=int, default=1024)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lora-rank", type=int, default=8)
    parser.add_argument("--lora-alpha", type=float, default=16)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--generate-tokens", type=int, default=256)
    parser.add_argument("--prompt-tokens", type=int, default=8)
    parser.add_argument("--skip-train", action="store_true", help="time generation only")
    parser.add_argument("--skip-generate", action="store_true", help="time training only")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--precision", choices=["fp32", "fp16", "bf16"], default="fp32",
                        help="fp16/bf16: the step under torch.autocast to that type "
                             "(fp16 with a GradScaler, as PyTorch trains in fp16); bf16 "
                             "also stores the frozen base in bf16")
    args = parser.parse_args()
    if args.skip_train and args.skip_generate:
        parser.error("--skip-train and --skip-generate together leave nothing to time")
    if args.hidden % args.heads or args.heads % args.kv_heads or (args.hidden // args.heads) % 2:
        parser.error("--hidden must split into --heads even-width heads, and --heads into "
                     "--kv-heads groups")
    if args.prompt_tokens < 1 or args.generate_tokens < 1:
        parser.error("--prompt-tokens and --generate-tokens must be at least 1")

    import torch  # after argparse: --help works without torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("pytorch_finetune.py: --device cuda, but torch.cuda.is_available() is false "
              "(a CPU-only torch build, or no GPU here)", file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    device = torch.device(args.device)

    half, reference = autocast_dtype(torch, args.precision, args.device)
    if reference != args.precision:
        print(f"pytorch_finetune.py: PyTorch's CPU autocast has no fp16 (bf16 only), so the "
              f"reference runs {reference}", file=sys.stderr)
    base_dtype = torch.bfloat16 if reference == "bf16" else torch.float32
    model = build_model(torch, args, base_dtype).to(device)
    adapters = [p for p in model.parameters() if p.requires_grad]
    adamw = torch.optim.AdamW(adapters, lr=1e-3, weight_decay=0.0)
    scaler = torch.cuda.amp.GradScaler(enabled=half == torch.float16)
    autocast = (lambda: torch.autocast(args.device, dtype=half)) if half is not None \
        else contextlib.nullcontext
    # One extra token per row: position t's target is token t + 1.
    tokens = torch.randint(0, args.vocab, (args.batch, args.context + 1), device=device)
    prompt = torch.randint(0, args.vocab, (1, args.prompt_tokens), device=device)

    def step():
        with autocast():
            hidden, _ = model(tokens[:, :-1])
            logits = model.lm_head(hidden)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, args.vocab).float(),
                                                     tokens[:, 1:].reshape(-1))
        adamw.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(adamw)
        torch.nn.utils.clip_grad_norm_(adapters, 1.0)
        scaler.step(adamw)
        scaler.update()

    def generate(count, cached):
        """`count` greedy tokens after the prompt: with the cache, the prompt's forward and
        then one token per forward; without it, the whole sequence's forward per token.
        Either way only the last position goes through the lm_head."""
        sequence = prompt
        with torch.no_grad(), autocast():
            hidden, past = model(sequence)
            for i in range(count):
                following = model.lm_head(hidden[:, -1]).argmax(-1, keepdim=True)
                sequence = torch.cat((sequence, following), dim=1)
                if i + 1 == count:
                    break
                if cached:
                    hidden, past = model(following, sequence.shape[1] - 1, past)
                else:
                    hidden, _ = model(sequence)
        return sequence

    print_run_facts(torch, args.device)
    print(f"torch_precision={reference}")
    print(f"pytorch_parameters={sum(p.numel() for p in model.parameters())}")
    print(f"pytorch_trainable_parameters={sum(p.numel() for p in adapters)}")
    if not args.skip_train:
        seconds, cpu_seconds = timed_steps(torch, args.device, step, args.warmup, args.steps)
        trained = args.batch * args.context * args.steps
        print(f"pytorch_tokens_per_s={trained / seconds:.1f}")
        print(f"pytorch_tokens_per_cpu_s={trained / cpu_seconds:.1f}")
    if not args.skip_generate:
        rates = {}
        for cached in (True, False):
            # The warm-up is a short generation: a whole one without the cache costs as
            # much as the timed one.
            for _ in range(args.warmup):
                generate(min(args.generate_tokens, 4), cached)
            seconds, _ = timed_steps(torch, args.device,
                                     lambda: generate(args.generate_tokens, cached), 0, 1)
            rates[cached] = args.generate_tokens / seconds
        print(f"pytorch_generate_tokens_per_s={rates[True]:.1f}")
        print(f"pytorch_generate_nocache_tokens_per_s={rates[False]:.1f}")
        print(f"pytorch_cache_speedup={rates[True] / rates[False]:.2f}")


if __name__ == "__main__":
    main()
