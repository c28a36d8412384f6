#!/usr/bin/python3
"""What users write today: a Python converter over tarfile + PIL + numpy (the peer that
tarmac is measured against). Does the W1 task: crop each frame to its person box x1.2,
squared, resize to 224x224, JPEG q95, transform keypoints; all labels into one .npz.

usage: peer_python.py IN.tar OUTDIR [--procs N]
"""
import argparse
import io
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


def samples(path):
    pending = {}
    with tarfile.open(path) as tar:
        for m in tar:
            if not m.isfile():
                continue
            key, ext = m.name.split(".", 1)
            pending.setdefault(key, {})[ext] = tar.extractfile(m).read()
            if len(pending[key]) == 2:
                d = pending.pop(key)
                yield key, d["jpg"], d["npz"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input")
    ap.add_argument("outdir")
    ap.add_argument("--procs", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    cols = {}
    with tarfile.open(os.path.join(a.outdir, "images.tar"), "w") as out:
        results = (mp.Pool(a.procs).imap(convert, samples(a.input), chunksize=8)
                   if a.procs > 1 else map(convert, samples(a.input)))
        for key, jpg, labels in results:
            ti = tarfile.TarInfo(key + ".jpg")
            ti.size = len(jpg)
            out.addfile(ti, io.BytesIO(jpg))
            for k, v in labels.items():
                cols.setdefault(k, []).append(v)
    np.savez(os.path.join(a.outdir, "labels.npz"), **{k: np.stack(v) for k, v in cols.items()})


if __name__ == "__main__":
    main()
