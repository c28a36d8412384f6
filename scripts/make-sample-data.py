#!/usr/bin/python3
"""Writes a small HMR-style sample dataset: frames with one person box, 2D keypoints and
SMPL-like parameters per sample, as tar.gz archives (the seeds' first workflow).

usage: make-sample-data.py OUTDIR [--samples N] [--archives K] [--seed S]
Needs Debian's python3-numpy and python3-pil (what scripts/setup-deps.sh installs for the demo).
"""
import argparse
import io
import json
import os
import tarfile

import numpy as np
from PIL import Image


def photo_like(rng, h, w):
    """Smooth, photo-like content: low-frequency colour fields plus mild texture."""
    small = rng.uniform(0, 255, size=(max(2, h // 40), max(2, w // 40), 3)).astype(np.float32)
    img = np.stack([np.asarray(Image.fromarray(small[:, :, c], mode="F").resize((w, h), Image.BICUBIC))
                    for c in range(3)], axis=-1)
    img += rng.normal(0, 6, size=img.shape).astype(np.float32)
    return np.clip(img, 0, 255).astype(np.uint8)


def draw_box(img, x0, y0, x1, y1, colour, width=2):
    """A rectangle's outline, `width` pixels inside (x0, y0)-(x1, y1), clipped to the image."""
    h, w = img.shape[:2]
    x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, w - 1), min(y1, h - 1)
    img[y0:y0 + width, x0:x1 + 1] = colour
    img[y1 - width + 1:y1 + 1, x0:x1 + 1] = colour
    img[y0:y1 + 1, x0:x0 + width] = colour
    img[y0:y1 + 1, x1 - width + 1:x1 + 1] = colour


def add_bytes(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--archives", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=360)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.outdir, exist_ok=True)
    per = (a.samples + a.archives - 1) // a.archives
    n = 0
    for k in range(a.archives):
        path = os.path.join(a.outdir, f"part-{k:03d}.tar.gz")
        with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
            for _ in range(per):
                if n >= a.samples:
                    break
                key = f"agora/{k:02d}/frame_{n:06d}"
                img = photo_like(rng, a.height, a.width)
                bw, bh = rng.uniform(60, 160), rng.uniform(120, 300)
                bx, by = rng.uniform(0, a.width - bw), rng.uniform(0, a.height - bh)
                draw_box(img, int(bx), int(by), int(bx + bw), int(by + bh), (40, 200, 40))
                kp = np.stack([rng.uniform(bx, bx + bw, 45), rng.uniform(by, by + bh, 45),
                               rng.uniform(0.5, 1, 45)], -1)
                jpg = io.BytesIO()
                Image.fromarray(img).save(jpg, "JPEG", quality=92)
                add_bytes(tar, key + ".jpg", jpg.getvalue())
                label = {"bbox_xywh": [round(bx, 2), round(by, 2), round(bw, 2), round(bh, 2)],
                         "keypoints2d": np.round(kp, 2).tolist(),
                         "subject": f"person_{n % 7}", "gender": "neutral"}
                add_bytes(tar, key + ".json", json.dumps(label).encode())
                buf = io.BytesIO()
                np.savez(buf, betas=rng.normal(size=10).astype(np.float32),
                         body_pose=rng.normal(size=69).astype(np.float32),
                         global_orient=rng.normal(size=3).astype(np.float32))
                add_bytes(tar, key + ".smpl.npz", buf.getvalue())
                n += 1
        print(path)


if __name__ == "__main__":
    main()
