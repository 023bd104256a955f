"""The Python side of test_safetensors_archive: safetensors files written and
read with torch alone (a small writer of the format here, no safetensors
package), so that vktower's files are checked against another implementation.

  safetensors_python.py write DIR   writes DIR/py.safetensors
  safetensors_python.py echo DIR    reads DIR/cpp.safetensors, writes its
                                    tensors as F32 to DIR/echo.safetensors
"""
import json
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
NAMES = {v: k for k, v in DTYPES.items()}


def write(path, tensors):
    header, data, at = {"__metadata__": {"format": "pt"}}, b"", 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = bytes(t.view(-1).view(torch.uint8).tolist())
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [at, at + len(raw)]}
        data += raw
        at += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        raw = bytearray(blob[8 + n + begin:8 + n + end])
        out[name] = torch.frombuffer(raw, dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
    return out


def main():
    mode, directory = sys.argv[1], sys.argv[2]
    if mode == "write":
        thirds = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 3
        write(directory + "/py.safetensors", {
            "f32": thirds, "f16": thirds.to(torch.float16), "bf16": thirds.to(torch.bfloat16)})
    else:
        tensors = read(directory + "/cpp.safetensors")
        write(directory + "/echo.safetensors", {k: v.float() for k, v in tensors.items()})


if __name__ == "__main__":
    main()
