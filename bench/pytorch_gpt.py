#!/usr/bin/env python3
"""vkt-bench-gpt's reference: vkt-gpt's model (samples/vkt_gpt/torch_replica.py's
Gpt: GPT-2 pre-LayerNorm blocks, dropout, AdamW on the matrices and Adam on the
rest, each clipped to a global norm of 1) trained by PyTorch on the CPU (or,
with `--device cuda`, the GPU) on random tokens, timed over `--steps` steps
after a warm-up. Prints `key=value` lines; pytorch_examples_per_s counts
sequences, pytorch_tokens_per_s tokens, pytorch_tokens_per_cpu_s tokens per
CPU second of this process."""

import argparse
import contextlib
import os
import sys

from torch_blas import autocast_dtype, print_run_facts, timed_steps

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "samples", "vkt_gpt"))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=96)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--precision", choices=["fp32", "fp16", "bf16"], default="fp32",
                        help="fp16/bf16: the step under torch.autocast to that type "
                             "(fp16 with a GradScaler, as PyTorch trains in fp16)")
    args = parser.parse_args()

    import torch  # after argparse: --help works without torch
    from torch_replica import Gpt
    if args.device == "cuda" and not torch.cuda.is_available():
        print("pytorch_gpt.py: --device cuda, but torch.cuda.is_available() is false "
              "(a CPU-only torch build, or no GPU here)", file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    device = torch.device(args.device)
    model = Gpt(args.vocab, args.context, args.width, args.layers, args.heads,
                args.dropout).to(device)
    matrices = [p for p in model.parameters() if p.dim() == 2]
    others = [p for p in model.parameters() if p.dim() != 2]
    adamw = torch.optim.AdamW(matrices, lr=1e-3, weight_decay=0.1)
    adam = torch.optim.Adam(others, lr=1e-3)
    tokens = torch.randint(0, args.vocab, (args.batch, args.context), device=device)
    nxt = torch.randint(0, args.vocab, (args.batch, args.context), device=device)

    half, reference = autocast_dtype(torch, args.precision, args.device)
    if reference != args.precision:
        print(f"pytorch_gpt.py: PyTorch's CPU autocast has no fp16 (bf16 only), so the "
              f"reference runs {reference}", file=sys.stderr)
    scaler = torch.cuda.amp.GradScaler(enabled=half == torch.float16)
    autocast = (lambda: torch.autocast(args.device, dtype=half)) if half is not None \
        else contextlib.nullcontext

    def step():
        with autocast():
            logits = model(tokens)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, args.vocab).float(),
                                                     nxt.reshape(-1))
        adamw.zero_grad(set_to_none=True)
        adam.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(adamw)
        scaler.unscale_(adam)
        torch.nn.utils.clip_grad_norm_(matrices, 1.0)
        torch.nn.utils.clip_grad_norm_(others, 1.0)
        scaler.step(adamw)
        scaler.step(adam)
        scaler.update()

    seconds, cpu_seconds = timed_steps(torch, args.device, step, args.warmup, args.steps)
    print_run_facts(torch, args.device)
    print(f"torch_precision={reference}")
    print(f"pytorch_examples_per_s={args.batch * args.steps / seconds:.2f}")
    print(f"pytorch_tokens_per_s={args.batch * args.context * args.steps / seconds:.1f}")
    print(f"pytorch_tokens_per_cpu_s={args.batch * args.context * args.steps / cpu_seconds:.1f}")


if __name__ == "__main__":
    main()
