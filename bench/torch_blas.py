"""What the PyTorch reference scripts (bench/pytorch_*.py) share: which
OpenBLAS kernel set torch loaded, so that a ratio names what it was against."""

import ctypes


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
