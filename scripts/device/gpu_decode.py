#!/usr/bin/env python3
"""JPEG decoding on the GPU with torchvision.io.decode_jpeg from tarmac's zero-copy byte views,
against tarmac's own CPU decoding (ds.batch on native threads) of the same samples: samples/s
of each and how far their pixels differ (issue #4, optional item).

usage: gpu_decode.py DATASET [--device cuda] [--samples 2048] [--batch 128] [--threads 0]
Needs torch and torchvision; --device cpu runs torchvision's CPU decoder instead (for tests).
"""
import argparse
import time
import warnings

import numpy as np
import torch
from torchvision.io import decode_jpeg

import tarmac


def decode_batch(tensors, device):
    """torchvision >= 0.19 decodes a list in one call (batched on the GPU); older versions one
    tensor at a time."""
    try:
        return decode_jpeg(tensors, device=device)
    except (TypeError, RuntimeError):
        return [decode_jpeg(t, device=device) for t in tensors]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--samples", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    ds = tarmac.Dataset(a.dataset)
    order = [int(i) for i in tarmac.indices(len(ds), seed=5)[:a.samples]]
    batches = [order[s:s + a.batch] for s in range(0, len(order), a.batch)]
    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    with warnings.catch_warnings():  # the byte views are read-only, and torch says so
        warnings.simplefilter("ignore", UserWarning)
        views = {i: torch.from_numpy(ds[i]["image"]) for i in order}

    ours, _ = ds.batch(batches[0], threads=a.threads)  # warm-up, and the reference pixels
    theirs = decode_batch([views[i] for i in batches[0]], a.device)
    sync()
    diff = max(float(np.abs(ours[k].astype(np.int16) - t.permute(1, 2, 0).cpu().numpy().astype(np.int16)).mean())
               for k, t in enumerate(theirs))

    t0 = time.perf_counter()
    for b in batches:
        ds.batch(b, threads=a.threads)
    cpu_rate = len(order) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for b in batches:
        decode_batch([views[i] for i in b], a.device)
    sync()
    tv_rate = len(order) / (time.perf_counter() - t0)
    print(f"tarmac ds.batch (CPU, threads={a.threads or 'all'}): {cpu_rate:10.0f} samples/s")
    print(f"torchvision decode_jpeg ({a.device}):{' ' * max(0, 14 - len(a.device))} {tv_rate:10.0f} samples/s")
    print(f"largest mean |difference| of a sample's pixels: {diff:.3f} (0-255 scale)")


if __name__ == "__main__":
    main()
