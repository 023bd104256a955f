"""What the PyTorch reference scripts (bench/pytorch_*.py) share: timing a
training step, and the facts of the run (which OpenBLAS kernel set torch
loaded, the threads, the GPU) printed as key=value lines, so that a ratio
names what it was against."""

import ctypes
import os
import time


def openblas_core():
    """The OpenBLAS kernel set that this process loaded (torch's BLAS), or why not."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode()
        except (OSError, AttributeError):
            continue
    return "none loaded (torch uses another BLAS)"


def autocast_dtype(torch, precision, device):
    """The dtype the step autocasts to (None: no autocast, plain fp32) and the
    precision the reference actually runs. fp32 never enters autocast: torch
    1.13's CPU autocast rejects any dtype but bf16, even when disabled. fp16 on
    the CPU has no autocast at all, so its reference is fp32, named as such."""
    if precision == "bf16":
        return torch.bfloat16, "bf16"
    if precision == "fp16" and device != "cpu":
        return torch.float16, "fp16"
    return None, "fp32"


def timed_steps(torch, device, step, warmup, steps):
    """Wall-clock and CPU seconds (every thread of this process) that `steps`
    calls of `step` take after `warmup` untimed ones, waiting for the GPU at
    both ends on CUDA."""
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()
    for _ in range(warmup):
        step()
    sync()
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    sync()
    return time.perf_counter() - start, time.process_time() - cpu_start


def print_run_facts(torch, device):
    """torch's version, the device (and GPU), threads and BLAS, as key=value lines."""
    print(f"torch_version={torch.__version__}")
    print(f"torch_device={device}")
    if device == "cuda":
        print(f"torch_gpu={torch.cuda.get_device_name(0)}")
    print(f"torch_threads={torch.get_num_threads()}")
    print(f"omp_wait_policy={os.environ.get('OMP_WAIT_POLICY', 'unset')}")
    print(f"openblas_coretype_env={os.environ.get('OPENBLAS_CORETYPE', 'unset')}")
    print(f"openblas_core={openblas_core()}")
