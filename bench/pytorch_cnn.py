#!/usr/bin/env python3
"""vkt-bench-cnn's reference: the CNN of vkt-mnist (samples/vkt_mnist/mnist_model.h)
trained by PyTorch on the CPU (or, with `--device cuda`, the GPU), on random batches, timed over `--steps` steps after
a warm-up. vkt-bench-cnn runs it with OMP_WAIT_POLICY=PASSIVE (so that PyTorch's
OpenMP pool and OpenBLAS's threads do not spin against each other on 2 cores)
and reads the `key=value` lines it prints."""

import argparse
import sys

from torch_blas import print_run_facts, timed_steps


def model(torch, args, classes):
    nn = torch.nn
    # "Same" padding for odd kernels: the output sizes of vkt-mnist's Padding::Same
    # (at stride 2 TensorFlow pads one row less on top: the same work).
    side = (28 + args.stride - 1) // args.stride
    layers = [nn.Conv2d(1, args.conv1, args.kernel1, stride=args.stride,
                        padding=(args.kernel1 - 1) // 2), nn.ReLU()]
    if args.first_pool:
        layers.append(nn.MaxPool2d(2))
        side //= 2
    layers += [nn.Conv2d(args.conv1, args.conv2, args.kernel2, padding=(args.kernel2 - 1) // 2),
               nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
               nn.Linear(side // 2 * side // 2 * args.conv2, args.dense), nn.ReLU(),
               nn.Linear(args.dense, classes)]
    return nn.Sequential(*layers)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--filters", default="32,32", help="the two convolutions' filters")
    parser.add_argument("--kernels", default="5,3", help="their filter sizes (odd)")
    parser.add_argument("--stride", type=int, default=2, help="the first convolution's stride")
    parser.add_argument("--first-pool", action="store_true", help="a max pool after the first")
    parser.add_argument("--dense", type=int, default=128)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args()
    args.conv1, args.conv2 = (int(v) for v in args.filters.split(","))
    args.kernel1, args.kernel2 = (int(v) for v in args.kernels.split(","))

    import torch  # after argparse: --help works without torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("pytorch_cnn.py: --device cuda, but torch.cuda.is_available() is false "
              "(a CPU-only torch build, or no GPU here)", file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    device = torch.device(args.device)
    net = model(torch, args, 10).to(device)
    adam = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.rand(args.batch, 1, 28, 28, device=device)
    y = torch.randint(0, 10, (args.batch,), device=device)

    def step():
        adam.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        adam.step()
        return loss

    seconds, _ = timed_steps(torch, args.device, step, args.warmup, args.steps)
    print_run_facts(torch, args.device)
    print(f"mkldnn={torch.backends.mkldnn.is_available()}")
    print(f"pytorch_examples_per_s={args.batch * args.steps / seconds:.1f}")


if __name__ == "__main__":
    main()
