#!/usr/bin/python3
"""Generates the benchmark workloads of docs/performance.md (photo-like content).

  W1  HMR crops: 1280x720 JPEG q92 frames + one .npz of labels each (bbox, 45 keypoints,
      SMPL parameters, a string), in .tar, .tar.gz and .tar.zst
  W2  captioned photos: 1-3 MP JPEGs of mixed aspect ratios + .txt captions + .json
  W3  depth pairs: 640x480 PNG RGB + 16-bit PNG depth
  W4  labels only at scale: N samples of small per-sample .npz labels (the seed-1 case)
  W5  img2dataset metadata at scale: N samples of KEY.json (indent=4, nulls, optional fields)
      + KEY.txt captions (some empty), converted with --no-images

W1's formats may include zip: the same members in a deflated zip (Python's zipfile).

usage: make_workloads.py OUTDIR [--w1 N] [--w1-frames N] [--w2 N] [--w3 N] [--w4 N] [--w5 N]
                         [--laion N] [--formats tar,tar.gz,tar.zst,zip]
"""
import argparse
import io
import json
import os
import subprocess
import tarfile
import zipfile

import cv2
import numpy as np


def photo(rng, h, w):
    """Photo-like: smooth structures at several scales, edges, and sensor noise."""
    img = np.zeros((h, w, 3), np.float32)
    for scale, amp in ((64, 90), (16, 45), (4, 20)):
        small = rng.uniform(-1, 1, size=(max(2, h // scale), max(2, w // scale), 3)).astype(np.float32)
        img += amp * cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    img += 128
    for _ in range(6):  # a few hard edges, like objects
        x0, y0 = rng.integers(0, w), rng.integers(0, h)
        cv2.rectangle(img, (int(x0), int(y0)), (int(x0 + rng.integers(20, w // 3)), int(y0 + rng.integers(20, h // 3))),
                      rng.uniform(0, 255, 3).tolist(), -1)
    img += rng.normal(0, 3, size=img.shape).astype(np.float32)
    return np.clip(img, 0, 255).astype(np.uint8)


FORMATS = ["tar", "tar.gz", "tar.zst"]


def add(tar, name, data):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    tar.addfile(ti, io.BytesIO(data))


def jpg(img, q):
    ok, b = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, q])
    assert ok
    return b.tobytes()


def npz(**arrays):
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def w1(out, n, rng, distinct=16):
    path = os.path.join(out, "w1.tar")
    # 16 frames reused, each with one row of its own: its bytes and pixel digest are unique, but
    # they are near duplicates of each other (convert --dedup near drops all but 16); dedup.sh
    # asks for `--w1-frames N` distinct ones.
    frames = [photo(rng, 720, 1280) for _ in range(min(n, distinct))]
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(n):
            img = frames[i % len(frames)].copy()
            img[rng.integers(0, 700), :] = rng.integers(0, 255, 3)  # make each frame's bytes unique
            bw, bh = rng.uniform(80, 220), rng.uniform(160, 420)
            bx, by = rng.uniform(0, 1280 - bw), rng.uniform(0, 720 - bh)
            kp = np.stack([rng.uniform(bx, bx + bw, 45), rng.uniform(by, by + bh, 45), np.ones(45)], -1)
            key = f"w1/{i:07d}"
            add(tar, key + ".jpg", jpg(img, 92))
            add(tar, key + ".npz", npz(bbox_xywh=np.array([bx, by, bw, bh], np.float32),
                                       keypoints2d=kp.astype(np.float32),
                                       betas=rng.normal(size=10).astype(np.float32),
                                       body_pose=rng.normal(size=69).astype(np.float32),
                                       gender=np.array("neutral")))
    if "zip" in FORMATS:
        with tarfile.open(path) as tar, zipfile.ZipFile(os.path.join(out, "w1.zip"), "w", zipfile.ZIP_DEFLATED) as z:
            for ti in tar:
                z.writestr(ti.name, tar.extractfile(ti).read())
    if "tar.gz" in FORMATS:
        subprocess.run(["gzip", "-k", "-f", "-6", path], check=True)
    if "tar.zst" in FORMATS:
        subprocess.run(["zstd", "-q", "-f", "-3", path, "-o", path + ".zst"], check=True)


def w2(out, n, rng):
    path = os.path.join(out, "w2.tar")
    sizes = [(1200, 900), (1600, 1200), (2000, 1500), (1920, 1080), (1080, 1350), (1000, 1000)]
    base = {s: photo(rng, s[1], s[0]) for s in sizes}
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(n):
            w, h = sizes[i % len(sizes)]
            img = base[(w, h)].copy()
            img[rng.integers(0, h), :] = rng.integers(0, 255, 3)
            key = f"w2/{i:07d}"
            add(tar, key + ".jpg", jpg(img, 90))
            add(tar, key + ".txt", f"a photo number {i} of something pleasant".encode())
            add(tar, key + ".json", json.dumps({"width": w, "height": h, "aesthetic": float(rng.uniform(4, 7))}).encode())


def laion(out, n, rng):
    """Web-scraped-like: whole photos of the sizes LAION's images have most (500x375 to
    1024x768, landscape and portrait), JPEG q85-95, each its own picture (no duplicates), with a
    caption; converted whole, resized (--size 256, --resize bucket)."""
    path = os.path.join(out, "laion.tar")
    sizes = [(500, 375), (640, 480), (800, 600), (1024, 768), (375, 500), (768, 1024), (640, 640)]
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(n):
            w, h = sizes[i % len(sizes)]
            key = f"laion/{i:07d}"
            add(tar, key + ".jpg", jpg(photo(rng, h, w), int(rng.integers(85, 96))))
            add(tar, key + ".txt", f"a photo number {i} of something pleasant".encode())


def w3(out, n, rng):
    path = os.path.join(out, "w3.tar")
    rgb = [photo(rng, 480, 640) for _ in range(min(n, 8))]
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(n):
            img = rgb[i % len(rgb)]
            yy, xx = np.mgrid[0:480, 0:640]
            depth = (1000 + 20 * xx + 7 * yy + (i % 97)).astype(np.uint16)
            key = f"w3/{i:07d}"
            add(tar, key + ".png", cv2.imencode(".png", img)[1].tobytes())
            add(tar, key + ".depth.png", cv2.imencode(".png", depth)[1].tobytes())


def w4(out, n, rng):
    path = os.path.join(out, "w4.tar")
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(n):
            add(tar, f"w4/{i:08d}.npz", npz(bbox_xywh=rng.uniform(0, 500, 4).astype(np.float32),
                                             keypoints2d=rng.uniform(0, 500, (45, 3)).astype(np.float32),
                                             betas=rng.normal(size=10).astype(np.float32)))


def w5(out, n, rng):
    """img2dataset's per-sample metadata, as it writes it: json.dumps(meta, indent=4)."""
    path = os.path.join(out, "w5.tar")
    licenses = [None, "?", "CC-BY", "CC-BY-SA"]
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(n):
            key = f"{i:09d}"
            ok = rng.random() > 0.1
            w, h = int(rng.integers(64, 1024)), int(rng.integers(64, 1024))
            meta = {"url": f"https://example.com/images/{i}/{rng.integers(1 << 30)}.jpg", "key": key,
                    "status": "success" if ok else "failed_to_download",
                    "error_message": None if ok else "HTTP Error 404: Not Found",
                    "width": w if ok else None, "height": h if ok else None,
                    "original_width": 2 * w if ok else None, "original_height": 2 * h if ok else None,
                    "exif": None if rng.random() < 0.7 else json.dumps({"Image Make": "Canon", "Image Model": "EOS"}),
                    "sha256": f"{rng.integers(1 << 62):064x}" if ok else None,
                    "NSFW": None if rng.random() < 0.6 else str(rng.choice(["UNLIKELY", "NSFW"])),
                    "similarity": None if rng.random() < 0.5 else float(rng.uniform(0.2, 0.4)),
                    "LICENSE": licenses[int(rng.integers(0, 4))]}
            if rng.random() < 0.2:  # optional fields absent in some samples
                del meta["exif"]
            if rng.random() < 0.1:
                del meta["LICENSE"]
            add(tar, f"w5/{key}.json", json.dumps(meta, indent=4).encode())
            add(tar, f"w5/{key}.txt", b"" if i % 7 == 0 else f"a caption for image {i}".encode())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--w1", type=int, default=0)
    ap.add_argument("--w2", type=int, default=0)
    ap.add_argument("--w3", type=int, default=0)
    ap.add_argument("--w4", type=int, default=0)
    ap.add_argument("--w5", type=int, default=0)
    ap.add_argument("--w1-frames", type=int, default=16,
                    help="W1's distinct frames, reused in turn (each sample changes one row)")
    ap.add_argument("--laion", type=int, default=0,
                    help="LAION-like: N whole JPEGs of 500x375 to 1024x768 (q85-95) + captions")
    ap.add_argument("--formats", default="tar,tar.gz,tar.zst",
                    help="W1's archive formats, comma-separated (tar is always written; zip too)")
    a = ap.parse_args()
    FORMATS[:] = a.formats.split(",")
    os.makedirs(a.outdir, exist_ok=True)
    rng = np.random.default_rng(1)
    for name, n in (("w1", a.w1), ("w2", a.w2), ("w3", a.w3), ("w4", a.w4), ("w5", a.w5), ("laion", a.laion)):
        if n:
            if name == "w1":
                w1(a.outdir, n, rng, a.w1_frames)
            else:
                globals()[name](a.outdir, n, rng)
            print(name, n)


if __name__ == "__main__":
    main()
