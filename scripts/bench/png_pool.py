#!/usr/bin/python3
"""PNG frames x person crops against OpenCV in a Python pool on the same cores (#28, Proof).

AGORA-like data (agora_table.py's frames and HumanData npz) at 1280x720 and at 1920x1080:
FRAMES PNG frames x PERSONS persons, each person's box grown to a square about its centre and
cropped to 224x224 JPEG (q95). Side by side, interleaved, REPEAT runs each:

  - tarmac convert ROOT --table npz --crop field:bbox_xywh --square --size 224 --quality 95,
    THREADS threads (one decode per frame; shards, annotation file and label columns written);
  - OpenCV in a multiprocessing.Pool of THREADS processes, one task per frame: cv2.imread, then
    per person the same map (the box's edges onto the output's, as tarmac's default
    --box-convention edges reads it), cv2.warpAffine (INTER_LINEAR, what mmhuman3d's
    MeshAffine calls) and cv2.imencode(".jpg", q95); the parent writes every JPEG into one tar.

usage: scripts/bench/png_pool.py [WORKDIR]   env: FRAMES=200 PERSONS=8 THREADS=2 REPEAT=3
                                                  TARMAC=build/apps/tarmac
Prints one markdown table: medians of wall and CPU seconds (user + sys, the process and its
children: on a shared machine the steadier figure), crops/s, tarmac's advantage.
"""
import io
import multiprocessing as mp
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import time

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agora_table  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TARMAC = os.environ.get("TARMAC", os.path.join(ROOT, "build", "apps", "tarmac"))
FRAMES = int(os.environ.get("FRAMES", 200))
PERSONS = int(os.environ.get("PERSONS", 8))
THREADS = int(os.environ.get("THREADS", 2))
REPEAT = int(os.environ.get("REPEAT", 3))
OUT = 224


def cpu_seconds():
    """User + sys seconds of this process and its reaped children so far."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def tarmac_run(work):
    out = os.path.join(work, "out-tarmac")
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([TARMAC, "convert", os.path.join(work, "agora"), "-o", out, "--table",
                    os.path.join(work, "agora_train_smplx.npz"), "--crop", "field:bbox_xywh",
                    "--square", "--size", str(OUT), "--quality", "95", "-j", str(THREADS), "-q"],
                   check=True, stdout=subprocess.DEVNULL)


_root = None


def _init(root):
    global _root
    _root = root


def _frame(task):
    """One frame's crops: (path, [(row, box)]) -> [(row, JPEG bytes)]."""
    path, rows = task
    img = cv2.imread(os.path.join(_root, path))
    out = []
    for row, (x, y, w, h) in rows:
        side = max(w, h)
        x0, y0 = x + w / 2 - side / 2, y + h / 2 - side / 2  # edges of the square box
        s = OUT / side
        # Pixel centres: output pixel c covers source edges [x0 + c / s, x0 + (c + 1) / s].
        m = np.array([[s, 0, s * (0.5 - x0) - 0.5], [0, s, s * (0.5 - y0) - 0.5]])
        crop = cv2.warpAffine(img, m, (OUT, OUT), flags=cv2.INTER_LINEAR)
        out.append((row, cv2.imencode(".jpg", crop, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()))
    return out


def pool_run(work, tasks):
    out = os.path.join(work, "out-opencv.tar")
    pool = mp.Pool(THREADS, initializer=_init, initargs=(os.path.join(work, "agora"),))
    with tarfile.open(out, "w") as tar:
        for crops in pool.imap_unordered(_frame, tasks, chunksize=2):
            for row, jpg in crops:
                ti = tarfile.TarInfo("%07d.jpg" % row)
                ti.size = len(jpg)
                tar.addfile(ti, io.BytesIO(jpg))
    pool.close()
    pool.join()  # reaped, so their CPU time is counted


def timed(fn, *args):
    c0, t0 = cpu_seconds(), time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0, cpu_seconds() - c0


def frame_tasks(npz):
    d = np.load(npz, allow_pickle=True)
    paths, bbox = d["image_path"], d["bbox_xywh"]
    tasks = {}
    for row in range(len(paths)):
        tasks.setdefault(str(paths[row]), []).append((row, tuple(float(v) for v in bbox[row, :4])))
    return list(tasks.items())


def main():
    base = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tarmac-bench-png-pool")
    agora_table.FRAMES, agora_table.PERSONS = FRAMES, PERSONS
    n = FRAMES * PERSONS
    print("%d frames x %d persons = %d crops to %dx%d JPEG q95; %d threads / processes; "
          "medians of %d interleaved runs\n" % (FRAMES, PERSONS, n, OUT, OUT, THREADS, REPEAT))
    print("| frames | pipeline | wall s | CPU s | crops/s | tarmac's advantage (crops/s) | (CPU) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for w, h in ((1280, 720), (1920, 1080)):
        agora_table.W, agora_table.H = w, h
        work = os.path.join(base, "%dx%d" % (w, h))
        agora_table.make(work)
        tasks = frame_tasks(os.path.join(work, "agora_train_smplx.npz"))
        runs = {"tarmac": [], "opencv": []}
        for _ in range(REPEAT):
            runs["tarmac"].append(timed(tarmac_run, work))
            runs["opencv"].append(timed(pool_run, work, tasks))
        med = {k: (statistics.median(t for t, _ in v), statistics.median(c for _, c in v))
               for k, v in runs.items()}
        names = {"tarmac": "tarmac convert --table, %d threads" % THREADS,
                 "opencv": "OpenCV imread + warpAffine + imencode, Pool(%d)" % THREADS}
        for k in ("tarmac", "opencv"):
            wall, cpu = med[k]
            print("| %dx%d | %s | %.2f | %.2f | %.0f | %.2fx | %.2fx |" % (
                w, h, names[k], wall, cpu, n / wall, med["opencv"][0] / med["tarmac"][0] if k == "tarmac" else 1.0,
                med["opencv"][1] / med["tarmac"][1] if k == "tarmac" else 1.0))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
