#!/usr/bin/python3
"""Writes the reader tests' input archive: N samples whose labels and pixels are functions of
the sample number k, so that tests can check every value the reader returns.

usage: make_fixture.py OUT.tar [--samples N]
  KEY = s/{k:04d}; image KEY.png 32x24 RGB, pixel(x, y) = expected_pixel(k, x, y);
  KEY.json = {"id": k, "vec": [1.5k, -k, 2], "name": "name-k", "pts": (k%3+1) rows [k, r]};
  KEY.depth.png 16-bit 32x24, value 1000k + 32y + x; KEY.cls = k % 5.
"""
import argparse
import io
import json
import tarfile

import cv2
import numpy as np

W, H = 32, 24


def expected_pixel(k):
    """The RGB image of sample k, H x W x 3 uint8."""
    y, x = np.mgrid[0:H, 0:W]
    return np.stack([(x * 7 + k * 13) % 256, (y * 11 + k) % 256, (x + y + k * 5) % 256], -1).astype(np.uint8)


def depth(k):
    y, x = np.mgrid[0:H, 0:W]
    return (1000 * k + 32 * y + x).astype(np.uint16)


def labels(k):
    return {"id": k, "vec": [1.5 * k, -k, 2.0], "name": f"name-{k}",
            "pts": [[k, r] for r in range(k % 3 + 1)]}


def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--samples", type=int, default=12)
    a = ap.parse_args()
    with tarfile.open(a.out, "w", format=tarfile.PAX_FORMAT) as tar:
        for k in range(a.samples):
            key = f"s/{k:04d}"
            ok, png = cv2.imencode(".png", cv2.cvtColor(expected_pixel(k), cv2.COLOR_RGB2BGR))
            assert ok
            add(tar, key + ".png", png.tobytes())
            add(tar, key + ".json", json.dumps(labels(k)).encode())
            ok, d = cv2.imencode(".png", depth(k))
            assert ok
            add(tar, key + ".depth.png", d.tobytes())
            add(tar, key + ".cls", str(k % 5).encode())


if __name__ == "__main__":
    main()
