#!/usr/bin/python3
"""The AGORA-like table benchmark of issue #14: FRAMES 1280x720 PNG frames with PERSONS persons
each, labelled by ONE HumanData npz (np.savez_compressed, pickled smplx/meta dicts, one row per
person). Side by side in one run, crops per second of:

  - tarmac convert ROOT --table agora_train_smplx.npz --crop field:bbox_xywh --square --size 224
    --points keypoints2d (every crop encoded as JPEG q95 into shards, every label column kept);
  - what mmhuman3d's pipeline does per row (HumanImageDataset + LoadImageFromFile + MeshAffine):
    read the row's frame with OpenCV, take the square box about the bbox centre, cv2.warpAffine
    it to 224x224 and transform the row's keypoints; in 1 process and in THREADS processes
    (a Pool over the rows, as a DataLoader's workers would). It encodes nothing and writes
    nothing, so it does less work than tarmac.

usage: scripts/bench/agora_table.py [WORKDIR]   env: FRAMES=1000 PERSONS=8 THREADS=$(nproc)
                                                     REPEAT=3 TARMAC=build/apps/tarmac
Prints one markdown table (median of REPEAT runs).
"""
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import time

import cv2
import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TARMAC = os.environ.get("TARMAC", os.path.join(ROOT, "build", "apps", "tarmac"))
FRAMES = int(os.environ.get("FRAMES", 1000))
PERSONS = int(os.environ.get("PERSONS", 8))
THREADS = int(os.environ.get("THREADS", os.cpu_count()))
REPEAT = int(os.environ.get("REPEAT", 3))
W, H, OUT = 1280, 720, 224


def frame(i):
    """A frame that compresses like a photograph: smooth structure plus fine texture."""
    rng = np.random.default_rng(i)
    base = cv2.resize(rng.integers(0, 256, (45, 80, 3), dtype=np.uint8), (W, H), interpolation=cv2.INTER_CUBIC)
    return cv2.add(base, rng.integers(0, 12, (H, W, 3), dtype=np.uint8))


def make(work):
    done = os.path.join(work, ".made-%d-%d" % (FRAMES, PERSONS))
    if os.path.exists(done):
        return
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "agora", "images", "train"))
    rng = np.random.default_rng(0)
    paths = []
    for i in range(FRAMES):
        p = "images/train/ag_trainset_renderpeople_bfh_archviz_5_10_cam02_%05d_1280x720.png" % i
        cv2.imwrite(os.path.join(work, "agora", p), frame(i))
        paths += [p] * PERSONS
    n = len(paths)
    w = rng.uniform(80, 300, n)
    bbox = np.stack([rng.uniform(0, W - 300, n), rng.uniform(0, H - 300, n), w, w * rng.uniform(1.2, 2.2, n),
                     np.ones(n)], axis=1)
    kp2d = np.concatenate([bbox[:, None, :2] + rng.uniform(0, 1, (n, 127, 2)) * bbox[:, None, 2:4],
                           np.ones((n, 127, 1))], axis=2)
    smplx = {k: rng.standard_normal((n,) + s).astype(np.float32) for k, s in
             [("body_pose", (21, 3)), ("global_orient", (3,)), ("betas", (10,)), ("transl", (3,)),
              ("left_hand_pose", (15, 3)), ("right_hand_pose", (15, 3)), ("expression", (10,)),
              ("jaw_pose", (3,)), ("leye_pose", (3,)), ("reye_pose", (3,))]}
    meta = {"gender": np.array(rng.choice(["male", "female"], n)), "kid": rng.random(n) < 0.2,
            "occlusion": rng.uniform(0, 80, n), "age": np.array(rng.choice(["18-30", "31-50"], n)),
            "ethnicity": np.array(rng.choice(["asian", "black", "white"], n))}
    np.savez_compressed(os.path.join(work, "agora_train_smplx.npz"), image_path=np.array(paths),
                        bbox_xywh=bbox, keypoints2d=kp2d, keypoints3d=rng.standard_normal((n, 127, 4)),
                        keypoints2d_mask=np.ones(190, np.uint8), keypoints3d_mask=np.ones(190, np.uint8),
                        config=np.array("agora"), __data_len__=np.array(n),
                        __key_strict__=np.array(False), __keypoints_compressed__=np.array(False),
                        smplx=np.array(smplx, dtype=object), meta=np.array(meta, dtype=object))
    open(done, "w").close()


# ---------------------------------------------------------------- mmhuman3d's per-row work

_rows = None


def _init(npz):
    global _rows
    d = np.load(npz, allow_pickle=True)  # what every mmhuman3d worker holds
    _rows = (d["image_path"], d["bbox_xywh"], d["keypoints2d"], os.path.dirname(npz) + "/agora")


def _row(i):
    paths, bbox, kp, root = _rows
    img = cv2.imread(os.path.join(root, str(paths[i])))  # LoadImageFromFile
    x, y, w, h = bbox[i, :4]
    side = max(w, h)
    cx, cy = x + w / 2, y + h / 2
    s = OUT / side  # MeshAffine: the box about its centre onto img_res x img_res
    m = np.array([[s, 0, OUT / 2 - s * cx], [0, s, OUT / 2 - s * cy]])
    crop = cv2.warpAffine(img, m, (OUT, OUT), flags=cv2.INTER_LINEAR)
    pts = kp[i, :, :2] @ m[:, :2].T + m[:, 2]
    return crop.shape[0] + int(pts.shape[0])


def python_run(npz, procs):
    n = FRAMES * PERSONS
    t0 = time.perf_counter()
    if procs == 1:
        _init(npz)
        for i in range(n):
            _row(i)
    else:
        with mp.Pool(procs, initializer=_init, initargs=(npz,)) as pool:
            for _ in pool.imap_unordered(_row, range(n), chunksize=16):
                pass
    return time.perf_counter() - t0


def tarmac_run(work, threads):
    out = os.path.join(work, "out")
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    subprocess.run([TARMAC, "convert", os.path.join(work, "agora"), "-o", out, "--table",
                    os.path.join(work, "agora_train_smplx.npz"), "--crop", "field:bbox_xywh", "--square",
                    "--size", str(OUT), "--points", "keypoints2d", "-j", str(threads), "-q"],
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main():
    work = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tarmac-bench-agora")
    make(work)
    npz = os.path.join(work, "agora_train_smplx.npz")
    n = FRAMES * PERSONS
    rows = []
    t = statistics.median(tarmac_run(work, THREADS) for _ in range(REPEAT))
    rows.append(("tarmac convert --table, %d threads (decode once per frame, JPEG out)" % THREADS, t))
    for procs in sorted({1, THREADS}):
        t = statistics.median(python_run(npz, procs) for _ in range(REPEAT))
        rows.append(("Python, mmhuman3d's per-row load+crop+warp, %d process%s" % (procs, "es" if procs > 1 else ""), t))
    base = rows[0][1]
    print("%d frames %dx%d PNG x %d persons = %d crops at %dx%d; median of %d\n" % (FRAMES, W, H, PERSONS, n, OUT, OUT, REPEAT))
    print("| pipeline | seconds | crops/s | tarmac's advantage |")
    print("|---|---:|---:|---:|")
    for name, t in rows:
        print("| %s | %.2f | %.0f | %.2fx |" % (name, t, n / t, t / base))


if __name__ == "__main__":
    main()
