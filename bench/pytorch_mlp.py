#!/usr/bin/env python3
"""vkt-bench-train's reference: the MLP 784-1024-1024-10 (ReLU, softmax
cross-entropy, batch 256) trained by PyTorch with SGD or Adam on random
batches, timed over `--steps` steps after a warm-up. On the CPU vkt-bench-train
runs it with OMP_WAIT_POLICY=PASSIVE and 2 threads (so that PyTorch's OpenMP
pool and OpenBLAS's threads do not spin against each other on 2 cores); with
`--device cuda` it trains on the GPU (the comparison for a Vulkan GPU). Prints
`key=value` lines."""

import argparse
import os
import sys
import time

from torch_blas import openblas_core


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--widths", default="784,1024,1024,10",
                        help="layer widths, input first")
    parser.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args()
    widths = [int(w) for w in args.widths.split(",")]

    import torch  # after argparse: --help works without torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("pytorch_mlp.py: --device cuda, but torch.cuda.is_available() is false "
              "(a CPU-only torch build, or no GPU here)", file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    device = torch.device(args.device)
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    net = torch.nn.Sequential(*layers).to(device)
    if args.optimizer == "sgd":
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
    else:
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(args.batch, widths[0], device=device)
    y = torch.randint(0, widths[-1], (args.batch,), device=device)

    def step():
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    for _ in range(args.warmup):
        step()
    sync()
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(args.steps):
        step()
    sync()
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start  # every thread of this process
    print(f"torch_version={torch.__version__}")
    print(f"torch_device={args.device}")
    if args.device == "cuda":
        print(f"torch_gpu={torch.cuda.get_device_name(0)}")
    else:
        print(f"torch_threads={torch.get_num_threads()}")
        print(f"omp_wait_policy={os.environ.get('OMP_WAIT_POLICY', 'unset')}")
        print(f"openblas_coretype_env={os.environ.get('OPENBLAS_CORETYPE', 'unset')}")
        print(f"openblas_core={openblas_core()}")
    print(f"pytorch_optimizer={args.optimizer}")
    print(f"pytorch_examples_per_s={args.batch * args.steps / seconds:.1f}")
    if args.device == "cpu":
        print(f"pytorch_examples_per_cpu_s={args.batch * args.steps / cpu_seconds:.1f}")


if __name__ == "__main__":
    main()
