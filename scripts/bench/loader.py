#!/usr/bin/python3
"""tarmac.torch.Loader against torch's DataLoader(num_workers=1, 2) and the floor (ds.batch back
to back into one reused buffer), on the same batches, with a training step simulated by a fixed
CPU busy-wait per batch. Prints samples/s and samples per CPU-second (process + children).
The DataLoader rows come twice: "fresh" (a new shared-memory buffer per batch, as before
tarmac._worker_pool) and "reused" (the worker's pooled buffers, the default).

usage: loader.py [--n 1536] [--batch 32] [--size 224] [--step-ms 10] [--threads 2] [--dir DIR] [--repeat 1]
Makes DIR/src.tar (JPEG q95, smooth noise) and converts it with $TARMAC (default `tarmac`)."""
import argparse
import io
import os
import resource
import statistics
import subprocess
import tarfile
import tempfile
import time

import cv2
import numpy as np
import torch

import tarmac
import tarmac.torch as tt
from tarmac import _worker_pool


def cpu_seconds():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def make(folder, n, size):
    out = os.path.join(folder, "ds")
    if os.path.exists(out):
        return out
    rng = np.random.default_rng(0)
    src = os.path.join(folder, "src.tar")
    with tarfile.open(src, "w") as tar:
        for k in range(n):
            img = cv2.GaussianBlur(rng.integers(0, 256, (size, size, 3), dtype=np.uint8), (7, 7), 2)
            data = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
            info = tarfile.TarInfo(f"s/{k:06d}.jpg")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    subprocess.run([os.environ.get("TARMAC", "tarmac"), "convert", "-q", src, "-o", out], check=True,
                   stdout=subprocess.DEVNULL)
    return out


def busy(ms):
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def run(name, batches, n, step_ms):
    t0, c0 = time.perf_counter(), cpu_seconds()
    wait = 0.0
    it = iter(batches)
    while True:
        w0 = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            break
        wait += time.perf_counter() - w0
        assert batch["image"].dtype == torch.uint8
        busy(step_ms)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    return n / wall, n / cpu, 100 * wait / wall


def report(name, runs):
    """The median of each figure over the repeats."""
    rate, per_cpu, wait = (statistics.median(r[k] for r in runs) for k in range(3))
    print(f"{name:36s} {rate:9.0f} samples/s {per_cpu:9.0f} samples/CPU-s  data wait {wait:5.1f} %", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1536)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--step-ms", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    folder = a.dir or tempfile.mkdtemp(prefix="tarmac-bench-loader-")
    os.makedirs(folder, exist_ok=True)
    path = make(folder, a.n, a.size)
    order = np.random.default_rng(1).permutation(a.n).tolist()
    bs = [order[i:i + a.batch] for i in range(0, a.n, a.batch)]
    n = sum(map(len, bs))
    ds = tarmac.Dataset(path)
    buf = np.empty((a.batch, a.size, a.size, 3), dtype=np.uint8)

    def floor():
        for idx in bs:
            ds.batch(idx, out=buf[:len(idx)], threads=a.threads, fields=[])
            yield {"image": torch.from_numpy(buf)}

    print(f"{a.n} JPEG q95 {a.size}x{a.size}, batch {a.batch}, step {a.step_ms} ms busy-wait, "
          f"{a.threads} native threads, {os.cpu_count()} cores", flush=True)
    cases = [("floor (ds.batch, one buffer)", floor)]
    cases.append(("Loader(prefetch=2)", lambda: tt.Loader(path, bs, threads=a.threads, prefetch=2, fields=[])))
    for workers in (1, 2):
        for pooled in (False, True):  # a fresh shared-memory buffer per batch, or the worker's reused ones

            def dataloader(workers=workers, pooled=pooled):
                _worker_pool.ENABLED = pooled  # read in the worker, which forks after this
                return torch.utils.data.DataLoader(tt.TarmacDataset(path, fields=[], threads=a.threads // workers or 1),
                                                   batch_size=None, sampler=bs, num_workers=workers)
            cases.append((f"DataLoader(num_workers={workers}) {'reused' if pooled else 'fresh'}", dataloader))
    for step in (0.0, a.step_ms):
        print(f"-- step {step} ms (median of {a.repeat})")
        runs = {name: [] for name, _ in cases}
        for _ in range(a.repeat):  # the cases interleaved, so that the machine's noise falls on all of them
            for name, make_batches in cases:
                runs[name].append(run(name, make_batches(), n, step))
        for name, _ in cases:
            report(name, runs[name])
    _worker_pool.ENABLED = True

if __name__ == "__main__":
    main()
