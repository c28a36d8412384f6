#!/usr/bin/python3
"""What users write today: a Python converter over tarfile + PIL + numpy (the peer that
tarmac is measured against). Does the W1 task: crop each frame to its person box x1.2,
squared, resize to 224x224, JPEG q95, transform keypoints; all labels into one .npz.
With --bucket AREA, the W2 bucket task instead: each photo to the aspect-ratio bucket of
AREA² pixels (sides /64, the rule of docs/cli.md) closest to its own, centre-cropped, JPEG q95;
the captions into one .npz.

usage: peer_python.py IN.tar OUTDIR [--procs N] [--bucket AREA]
"""
import argparse
import io
import math
import multiprocessing as mp
import os
import tarfile

import numpy as np
from PIL import Image


def convert(item):
    key, jpg, npz_bytes = item
    labels = dict(np.load(io.BytesIO(npz_bytes)))
    x, y, w, h = labels["bbox_xywh"].astype(np.float64)
    side = max(w, h) * 1.2
    cx, cy = x + w / 2, y + h / 2
    box = (cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2)
    img = Image.open(io.BytesIO(jpg)).convert("RGB")
    # crop() pads outside the image with black, as tarmac does; then an anti-aliased resize
    crop = img.crop(tuple(int(round(v)) for v in box)).resize((224, 224), Image.BILINEAR,
                                                               reducing_gap=2.0)
    out = io.BytesIO()
    crop.save(out, "JPEG", quality=95)
    s = 224 / side
    kp = labels["keypoints2d"].copy()
    kp[:, 0] = (kp[:, 0] - box[0]) * s
    kp[:, 1] = (kp[:, 1] - box[1]) * s
    labels["keypoints2d"] = kp
    return key, out.getvalue(), labels


BUCKETS = []


def make_buckets(side, step=64, max_ratio=4.0):
    out = set()
    for w in range(step, side * side // step + 1, step):
        h = side * side // w // step * step
        if step <= h <= w and w / h <= max_ratio:
            out |= {(w, h), (h, w)}
    return sorted(out)


def convert_bucket(item):
    key, jpg, caption = item
    img = Image.open(io.BytesIO(jpg)).convert("RGB")
    w, h = img.size
    bw, bh = min(BUCKETS, key=lambda b: (abs(math.log(b[0] / b[1]) - math.log(w / h)), -b[0] * b[1], b[0]))
    a = bw / bh
    cw, ch = (h * a, h) if w / h > a else (w, w / a)
    box = ((w - cw) / 2, (h - ch) / 2, (w + cw) / 2, (h + ch) / 2)
    out = io.BytesIO()
    img.resize((bw, bh), Image.BILINEAR, box=box, reducing_gap=2.0).save(out, "JPEG", quality=95)
    return key, out.getvalue(), {"caption": np.frombuffer(caption, dtype=np.uint8)}


def samples(path, exts=("jpg", "npz")):
    pending = {}
    with tarfile.open(path) as tar:
        for m in tar:
            if not m.isfile():
                continue
            key, ext = m.name.split(".", 1)
            if ext not in exts:
                continue
            pending.setdefault(key, {})[ext] = tar.extractfile(m).read()
            if len(pending[key]) == len(exts):
                d = pending.pop(key)
                yield (key, *(d[e] for e in exts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input")
    ap.add_argument("outdir")
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--bucket", type=int, default=0)
    a = ap.parse_args()
    work, src = convert, samples(a.input)
    if a.bucket:
        BUCKETS[:] = make_buckets(a.bucket)
        work, src = convert_bucket, samples(a.input, ("jpg", "txt"))
    os.makedirs(a.outdir, exist_ok=True)
    cols = {}
    with tarfile.open(os.path.join(a.outdir, "images.tar"), "w") as out:
        results = (mp.Pool(a.procs).imap(work, src, chunksize=8) if a.procs > 1 else map(work, src))
        for key, jpg, labels in results:
            ti = tarfile.TarInfo(key + ".jpg")
            ti.size = len(jpg)
            out.addfile(ti, io.BytesIO(jpg))
            for k, v in labels.items():
                cols.setdefault(k, []).append(v)
    np.savez(os.path.join(a.outdir, "labels.npz"),
             **{k: np.stack(v) if k != "caption" else np.array(v, dtype=object) for k, v in cols.items()})


if __name__ == "__main__":
    main()
