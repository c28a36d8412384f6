"""A strict safetensors reader written from the published spec: struct, json and numpy only.

It is the independent oracle of the e2e tests (it shares no code with tarmac), and the same
`load` goes into docs/format.md as "numpy alone can parse it in a few lines".
"""
import json
import struct

import numpy as np

DTYPES = {"BOOL": "?", "U8": "u1", "I8": "i1", "U16": "<u2", "I16": "<i2", "U32": "<u4",
          "I32": "<i4", "U64": "<u8", "I64": "<i8", "F16": "<f2", "BF16": "<u2",
          "F32": "<f4", "F64": "<f8"}


def load(path):
    """Returns ({name: np.ndarray}, {metadata str: str}); raises ValueError on any violation."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack_from("<Q", buf, 0)
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    data = memoryview(buf)[8 + n:]
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise ValueError("__metadata__ must map str to str")
    tensors, end_of_last = {}, 0
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if set(t) != {"dtype", "shape", "data_offsets"} or t["dtype"] not in DTYPES:
            raise ValueError(f"{name}: bad entry {t}")
        dt = np.dtype(DTYPES[t["dtype"]])
        begin, end = t["data_offsets"]
        if begin != end_of_last or end < begin or int(np.prod(t["shape"])) * dt.itemsize != end - begin:
            raise ValueError(f"{name}: offsets {begin}..{end} leave a hole, overlap or mismatch the shape")
        if (8 + n + begin) % dt.itemsize:
            raise ValueError(f"{name}: not aligned to its element size")
        tensors[name] = np.frombuffer(data[begin:end], dtype=dt).reshape(t["shape"])
        end_of_last = end
    if end_of_last != len(data):
        raise ValueError(f"tensors cover {end_of_last} of {len(data)} data bytes")
    return tensors, meta


def ragged(tensors, name, i):
    """Sample i of a ragged column `name` (name.values + name.offsets)."""
    off = tensors[name + ".offsets"]
    return tensors[name + ".values"][off[i]:off[i + 1]]


def string(tensors, name, i):
    return bytes(ragged(tensors, name, i)).decode("utf-8")


def keys(tensors):
    return [string(tensors, "__key__", i) for i in range(len(tensors["__key__.offsets"]) - 1)]
