#!/usr/bin/python3
"""Measures the total PSS (proportional set size) of a PyTorch DataLoader over a tarmac dataset
with W worker processes, after every worker has read every sample's labels once.

usage: examples/measure_pss.py --make-archive big.tar 20000   # labels-only input: KEY.npy + KEY.cls
       tarmac convert big.tar -o big/ --no-images
       PYTHONPATH=python examples/measure_pss.py big/ npy --workers 1 8
PSS counts a page shared by k processes as 1/k in each, so the sum over the main process and
its workers is the memory the whole loader really costs.
"""
import argparse
import io
import os
import sys
import tarfile

import numpy as np


def pss_kb(pid, path_part=None):
    """Total PSS of a process in kB (smaps_rollup), or of its mappings whose path contains path_part."""
    if path_part is None:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return sum(int(line.split()[1]) for line in f if line.startswith("Pss:"))
    total, inside = 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            first = line.split()[0]
            if "-" in first and not first.endswith(":"):
                inside = path_part in line
            elif inside and first == "Pss:":
                total += int(line.split()[1])
    return total


def make_archive(path, n):
    """A labels-only tar: s/NNNNNN.npy (1024 float32) and s/NNNNNN.cls per sample."""
    rng = np.random.default_rng(0)
    with tarfile.open(path, "w") as tar:
        for k in range(n):
            b = io.BytesIO()
            np.save(b, rng.standard_normal(1024).astype(np.float32))
            for name, data in ((f"s/{k:06d}.npy", b.getvalue()), (f"s/{k:06d}.cls", str(k % 10).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def measure(path, field, workers):
    import torch
    import tarmac.torch as tt

    ds = tt.TarmacDataset(path, fields=[field], decode=False)
    sampler = tt.ShardedSampler(len(ds), rank=0, world=1)
    loader = torch.utils.data.DataLoader(ds, batch_size=256, num_workers=workers, persistent_workers=True,
                                         sampler=sampler)
    for epoch in range(workers):  # new orders, so that every worker reads most samples
        sampler.set_epoch(epoch)
        for _ in loader:
            pass
    pids = [os.getpid()] + [w.pid for w in loader._iterator._workers]
    total = sum(pss_kb(p) for p in pids)
    labels = sum(pss_kb(p, "labels.safetensors") for p in pids)
    del loader
    return total, labels


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--make-archive":
        make_archive(sys.argv[2], int(sys.argv[3]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("field")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 8])
    a = ap.parse_args()
    size = os.path.getsize(os.path.join(a.dataset, "labels.safetensors"))
    print(f"labels.safetensors: {size / 2**20:.1f} MiB")
    for w in a.workers:
        total, labels = measure(a.dataset, a.field, w)
        print(f"{w} worker(s): total PSS {total / 1024:.1f} MiB, of which labels.safetensors {labels / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
