#!/usr/bin/python3
"""The 3D labels' cost in augmented batches (issue #38 section 5, docs/performance.md "3D labels in
augmented batches"): ds.batch(augment=Augment(flip=0.5, flip_pairs, rotate=30, scale)) of stored
224x224 JPEG q95 crops with

  2d    24 2D keypoints alone
  3d    24 2D keypoints + 24 3D keypoints (points3d) + a 72-value SMPL pose (axis_angle smpl)
        + a [3, 3] camera, every one transformed

The dataset is written by tests/data/datasets/make_datasets.py's independent writer (the
"geometry" schema key declares the kinds). Each measurement runs in a child process that first
reads every sample once, then times one pass over a shuffled order in batches of --batch on
--threads native threads; the rounds are interleaved and the medians of --repeat shown, by wall
clock and by CPU time of the child (steadier on a shared machine).

usage: scripts/bench/augment_geometry.py WORKDIR [--samples 1200] [--threads 1] [--repeat 5]
                                          [--batch 128]
       (needs build/lib/read/libtarmac_c.so)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIB = os.path.join(ROOT, "build", "lib", "read", "libtarmac_c.so")
PAIRS = [(1, 2), (4, 5), (7, 8), (10, 11), (13, 14), (16, 17), (18, 19), (20, 21), (22, 23)]
GEOMETRY = {"kp2d": {"kind": "points"}, "kp3d": {"kind": "points3d"},
            "K": {"kind": "camera", "convention": "centers", "layout": "K"},
            "pose": {"kind": "axis_angle", "layout": "smpl", "joints": 24, "pairs": [list(p) for p in PAIRS]}}
FIELDS = {"2d": ["kp2d"], "3d": ["kp2d", "kp3d", "pose", "K"]}


def make(out, n):
    import cv2
    sys.path.insert(0, os.path.join(ROOT, "tests", "data", "datasets"))
    import make_datasets as mk
    rng = np.random.default_rng(0)
    samples = []
    y, x = np.mgrid[0:224, 0:224]
    for k in range(n):
        img = np.stack([128 + 100 * np.sin(x / (7 + k % 5) + k), 128 + 100 * np.cos(y / 5 - k),
                        128 + 90 * np.sin((x + y) / 9)], -1).clip(0, 255).astype(np.uint8)
        ok, jpg = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 95])
        assert ok
        jpg = jpg.tobytes()
        kp3 = np.stack([rng.uniform(-1, 1, 24), rng.uniform(-1, 1, 24), rng.uniform(3, 6, 24)], 1)
        K = np.array([[500.0, 0, 111.5], [0, 500.0, 111.5], [0, 0, 1]])
        uv = (kp3 @ K.T)[:, :2] / kp3[:, 2:]
        labels = [("kp2d", "json", "numeric", "F64", np.concatenate([uv, np.ones((24, 1))], 1)),
                  ("kp3d", "json", "numeric", "F64", np.concatenate([kp3, np.ones((24, 1))], 1)),
                  ("pose", "json", "numeric", "F64", rng.uniform(-1, 1, 72)),
                  ("K", "json", "numeric", "F64", K)]
        samples.append({"key": f"s/{k:05d}", "blobs": [("jpg", jpg, 224, 224)], "labels": labels,
                        "inputs": [("jpg", jpg)]})
    mk.write_dataset(out, samples, shard_size=64 << 20, blob_kinds=["__image__"], options={},
                     command_line=["bench"], input_name="bench.tar", geometry=GEOMETRY)


def child(path, which, threads, batch):
    import tarmac
    ds = tarmac.Dataset(path)
    aug = tarmac.Augment((224, 224), flip=0.5, flip_pairs=PAIRS, rotate=30, scale=(0.75, 1.25))
    order = np.random.default_rng(1).permutation(len(ds))
    fields = FIELDS[which]
    for s in range(0, len(ds), batch):  # warm-up: page cache, loaders
        ds.batch(order[s:s + batch], fields=fields, augment=aug, threads=threads, epoch=1)
    c0, t0 = time.process_time(), time.perf_counter()
    for s in range(0, len(ds), batch):
        ds.batch(order[s:s + batch], fields=fields, augment=aug, threads=threads, epoch=2)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"wall": len(ds) / wall, "cpu": len(ds) / cpu}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--samples", type=int, default=1200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child[0], a.child[1], a.threads, a.batch)
    path = os.path.join(a.workdir, f"geo{a.samples}")
    if not os.path.exists(os.path.join(path, "labels.safetensors")):
        make(path, a.samples)
    env = dict(os.environ, TARMAC_LIB=os.environ.get("TARMAC_LIB", LIB),
               PYTHONPATH=os.path.join(ROOT, "python"))
    rates = {w: [] for w in FIELDS}
    for _ in range(a.repeat):
        for which in FIELDS:
            out = subprocess.run([sys.executable, __file__, a.workdir, "--threads", str(a.threads), "--batch",
                                  str(a.batch), "--child", path, which], env=env, check=True,
                                 capture_output=True, text=True).stdout
            rates[which].append(json.loads(out.strip().splitlines()[-1]))
    med = {w: {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu")} for w, rs in rates.items()}
    for w in FIELDS:
        walls = [r["wall"] for r in rates[w]]
        print(f"{w}: {med[w]['wall']:,.0f} samples/s wall ({min(walls):,.0f}-{max(walls):,.0f}), "
              f"{med[w]['cpu']:,.0f} per CPU-second")
    print(f"3d / 2d: {med['3d']['wall'] / med['2d']['wall']:.3f} (wall), "
          f"{med['3d']['cpu'] / med['2d']['cpu']:.3f} (CPU)")


if __name__ == "__main__":
    main()
