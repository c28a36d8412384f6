#!/usr/bin/env python3
"""Opens a dataset's labels.safetensors with the safetensors package itself (where installed,
e.g. on the device machine; PyPI is not reachable here) and checks every tensor, byte for byte,
against our strict spec reader (tests/e2e/st_reader.py) and tarmac.Dataset's columns; also
through safetensors.torch when torch is present. Exits 1 on any difference.

usage: safetensors_check.py DATASET [DATASET...]
"""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import st_reader  # noqa: E402


def check(dataset):
    import safetensors
    from safetensors import safe_open
    from safetensors.numpy import load_file
    path = os.path.join(dataset, "labels.safetensors")
    ours, meta = st_reader.load(path)
    theirs = load_file(path)
    problems = []
    if sorted(theirs) != sorted(ours):
        problems.append(f"tensor names differ: {sorted(set(theirs) ^ set(ours))}")
    for name in sorted(set(theirs) & set(ours)):
        a, b = theirs[name], ours[name]
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            problems.append(f"{name}: safetensors {a.dtype}{a.shape} vs spec reader {b.dtype}{b.shape}")
    with safe_open(path, framework="numpy") as f:
        if (f.metadata() or {}) != meta:
            problems.append("__metadata__ differs")
    try:
        import torch  # noqa: F401
        from safetensors.torch import load_file as load_torch
        for name, t in load_torch(path).items():
            if t.numpy().tobytes() != ours[name].tobytes():
                problems.append(f"{name}: safetensors.torch bytes differ")
        torch_note = "and safetensors.torch"
    except ImportError:
        torch_note = "(no torch)"
    import tarmac
    ds = tarmac.Dataset(dataset)
    for name in ds.fixed_fields():
        if not np.array_equal(ds.column(name), theirs[name]):
            problems.append(f"column {name}: tarmac.Dataset differs from safetensors")
    print(f"{path}: {len(theirs)} tensors, {os.path.getsize(path)} bytes; safetensors {safetensors.__version__} "
          f"numpy {torch_note}: {'OK, identical' if not problems else 'DIFFERENT'}")
    for p in problems:
        print("  " + p)
    return not problems


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    try:
        import safetensors  # noqa: F401
    except ImportError:
        print("safetensors is not installed: nothing checked")
        return
    ok = all([check(d) for d in sys.argv[1:]])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
