#!/usr/bin/python3
"""Augmentation in the batch decode (issue #26, docs/performance.md "Augmentation"): tarmac's
augmented ds.batch against plain ds.batch, against the per-sample Python pipeline users run
today, and a random resized crop against torchvision's, on the same samples and threads.

  A  1,200 stored 224x224 JPEG q95 crops (photo-like, 45 keypoints each, convert --points):
       plain        ds.batch, no augmentation
       augmented    ds.batch(augment=Augment(flip=0.5, flip_pairs, rotate=30, scale=(0.75, 1.25)))
       python       per sample: ds.decode(i), cv2.getRotationMatrix2D + flip, cv2.warpAffine,
                    the keypoints through the same map in numpy, pairs swapped, then stacked
  B  512x512 JPEG q90 photos, FFCV's ImageNet recipe to 224x224:
       rrc          ds.batch(augment=Augment(size=(224, 224), crop=(0.08, 1), flip=0.5))
       torchvision  per sample: torchvision.io.decode_jpeg, RandomResizedCrop(224) (bilinear,
                    antialias) + RandomHorizontalFlip, then stacked

Every measurement runs in a child process (so that builds' libtarmac_c.so can be compared: each
--baseline-lib names another, e.g. main=/work/main/build/lib/read/libtarmac_c.so) that first
reads every sample once (page cache, lazy structures), then times one pass over a shuffled order in batches of --batch. The rounds are
interleaved (each round runs every measurement once) and the medians of --repeat rounds are
shown, by wall clock and by CPU time of the child (steadier on a shared machine).

usage: scripts/bench/augment.py WORKDIR [--samples 1200] [--rrc-samples 600] [--threads 1]
                                [--repeat 3] [--batch 128] [--baseline-lib [NAME=]PATH ...]
       (needs a built tarmac: build/apps/tarmac and build/lib/read/libtarmac_c.so; torchvision
       for the torchvision row)
"""
import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIB = os.path.join(ROOT, "build", "lib", "read", "libtarmac_c.so")
K = 45  # keypoints per sample
PAIRS = [(2 * k + 1, 2 * k + 2) for k in range(8)]  # left/right joints
FLIP, ROTATE, SCALE = 0.5, 30.0, (0.75, 1.25)


def make(work, n, n_rrc, tarmac_bin):
    """a/ (224² crops with keypoints) and b/ (512² photos), converted with --format keep."""
    sys.path.insert(0, os.path.join(ROOT, "scripts", "bench"))
    from make_workloads import jpg, npz, photo

    mark = os.path.join(work, f".made-{n}-{n_rrc}")
    if os.path.exists(mark):
        return
    rng = np.random.default_rng(26)
    for name, count, side, q in (("a", n, 224, 95), ("b", n_rrc, 512, 90)):
        src = os.path.join(work, name + ".tar")
        images = [jpg(photo(rng, side, side), q) for _ in range(min(count, 200))]  # generation is slow
        with tarfile.open(src, "w", format=tarfile.GNU_FORMAT) as tar:
            for i in range(count):
                members = [(f"{name}/{i:07d}.jpg", images[i % len(images)])]
                if name == "a":
                    kp = np.stack([rng.uniform(0, side, K), rng.uniform(0, side, K), np.ones(K)], -1)
                    members.append((f"{name}/{i:07d}.npz", npz(keypoints2d=kp.astype(np.float32))))
                for member, data in members:
                    ti = tarfile.TarInfo(member)
                    ti.size = len(data)
                    tar.addfile(ti, io.BytesIO(data))
        args = [tarmac_bin, "convert", "-q", src, "-o", os.path.join(work, name), "--format", "keep", "--overwrite"]
        if name == "a":
            args += ["--points", "keypoints2d"]
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    open(mark, "w").close()


# ---- the child: one measurement, printed as JSON ----

def batches(order, size):
    return [order[k:k + size] for k in range(0, len(order), size)]


def python_pipeline(ds, idx, rng):
    """The per-sample loop of mmhuman3d-style loaders: decode, one cv2 affine (flip, rotation,
    scale about the centre), keypoints through the same map, flip pairs swapped; stacked."""
    import cv2

    images, kps = [], []
    for i in idx:
        img = ds.decode(i)
        h, w = img.shape[:2]
        angle = rng.uniform(-ROTATE, ROTATE)
        m = cv2.getRotationMatrix2D(((w - 1) / 2, (h - 1) / 2), angle, rng.uniform(*SCALE))
        flip = rng.uniform() < FLIP
        if flip:
            m = np.array([[-1, 0, w - 1], [0, 1, 0]]) @ np.vstack([m, [0, 0, 1]])
        images.append(cv2.warpAffine(img, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT))
        kp = np.array(ds.value("keypoints2d", i))
        kp[:, :2] = kp[:, :2] @ m[:, :2].T + m[:, 2]
        if flip:
            for a, b in PAIRS:
                kp[[a, b]] = kp[[b, a]]
        kps.append(kp)
    return np.stack(images), np.stack(kps)


def torchvision_pipeline(ds, idx, rrc, flip):
    import torch
    import torchvision.io

    out = []
    for i in idx:
        data = torch.frombuffer(bytearray(ds.image(i)), dtype=torch.uint8)
        out.append(flip(rrc(torchvision.io.decode_jpeg(data))))
    return torch.stack(out)


def child(work, mode, threads, batch):
    import tarmac

    ds = tarmac.Dataset(os.path.join(work, "b" if mode in ("rrc", "torchvision") else "a"))
    order = tarmac.indices(len(ds), seed=1).tolist()
    aug = tarmac.Augment(size=(224, 224), flip=FLIP, flip_pairs=PAIRS, rotate=ROTATE, scale=SCALE)
    rrc = tarmac.Augment(size=(224, 224), crop=(0.08, 1), flip=0.5)
    if mode == "plain":
        run = lambda idx, e: ds.batch(idx, fields=["keypoints2d"], threads=threads)  # noqa: E731
    elif mode == "augmented":
        run = lambda idx, e: ds.batch(idx, fields=["keypoints2d"], augment=aug, seed=0, epoch=e,  # noqa: E731
                                      threads=threads)
    elif mode == "python":
        import cv2

        cv2.setNumThreads(1)  # one thread, as users run it in a loader worker
        rng = np.random.default_rng(0)
        run = lambda idx, e: python_pipeline(ds, idx, rng)  # noqa: E731
    elif mode == "rrc":
        run = lambda idx, e: ds.batch(idx, fields=[], augment=rrc, seed=0, epoch=e, threads=threads)  # noqa: E731
    elif mode == "torchvision":
        import torch
        import torchvision.transforms as T

        torch.set_num_threads(threads)
        tv_rrc, tv_flip = T.RandomResizedCrop(224, antialias=True), T.RandomHorizontalFlip(0.5)
        run = lambda idx, e: torchvision_pipeline(ds, idx, tv_rrc, tv_flip)  # noqa: E731
    else:
        raise SystemExit(f"unknown mode {mode}")
    for b in batches(order, batch):  # warm: page cache, lazy structures, the loader's threads
        run(b, 0)
    w0, c0 = time.perf_counter(), time.process_time()
    for b in batches(order, batch):
        run(b, 1)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(json.dumps({"wall": len(order) / wall, "cpu": len(order) / cpu}))


def measure(work, mode, lib, threads, batch):
    env = dict(os.environ, TARMAC_LIB=lib, PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, os.path.abspath(__file__), work, "--child", mode, "--threads", str(threads),
                          "--batch", str(batch)], env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--samples", type=int, default=1200)
    ap.add_argument("--rrc-samples", type=int, default=600)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--baseline-lib", action="append", default=[],
                    help="[NAME=]PATH of another build's libtarmac_c.so, for the augmented rows (repeatable)")
    ap.add_argument("--tarmac", default=os.path.join(ROOT, "build", "apps", "tarmac"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.workdir, a.child, a.threads, a.batch)
    os.makedirs(a.workdir, exist_ok=True)
    make(a.workdir, a.samples, a.rrc_samples, a.tarmac)
    try:
        import torchvision  # noqa: F401
        have_tv = True
    except ImportError:
        have_tv = False

    runs = [("plain", LIB), ("augmented", LIB), ("python", LIB), ("rrc", LIB)]
    if have_tv:
        runs.append(("torchvision", LIB))
    baselines = []  # (name, path)
    for spec in a.baseline_lib:
        name, _, path = spec.rpartition("=")
        baselines.append((name or "baseline build", path))
    for _, path in baselines:
        runs += [("augmented", path), ("rrc", path)]
    got = {r: [] for r in runs}
    for _ in range(a.repeat):  # interleaved rounds
        for r in runs:
            got[r].append(measure(a.workdir, r[0], r[1], a.threads, a.batch))
    med = {r: {k: statistics.median(x[k] for x in v) for k in ("wall", "cpu")} for r, v in got.items()}

    def row(label, r, num, den, what):
        m, n, d = med[r], med[num], med[den]
        lo, hi = min(x["wall"] for x in got[r]), max(x["wall"] for x in got[r])
        print(f"| {label} | {m['wall']:,.0f} ({lo:,.0f}–{hi:,.0f}) | {m['cpu']:,.0f} | "
              f"{what}: {n['wall'] / d['wall']:.2f} | {n['cpu'] / d['cpu']:.2f} |")

    print(f"threads {a.threads}, batches of {a.batch}, median of {a.repeat} interleaved rounds "
          f"(min–max in brackets)\n")
    print("| pipeline | samples/s (wall) | samples per CPU-second | ratio (wall) | ratio (CPU) |")
    print("|---|---|---|---|---|")
    A, B = f"{a.samples} stored 224² JPEG", f"{a.rrc_samples} stored 512² JPEG q90 → 224²"
    plain, aug, py, rrc = ("plain", LIB), ("augmented", LIB), ("python", LIB), ("rrc", LIB)
    row(f"{A}: plain `ds.batch`", plain, plain, plain, "itself")
    row(f"{A}: augmented `ds.batch` (flip + rotate 30 + scale 0.75–1.25)", aug, aug, plain, "augmented ÷ plain")
    row(f"{A}: per-sample Python (decode + cv2 affine + flip + keypoints)", py, aug, py, "augmented ÷ this")
    for name, path in baselines:
        base = ("augmented", path)
        row(f"{A}: augmented `ds.batch`, {name}", base, aug, base, "this build ÷ this")
    row(f"{B}: `ds.batch`, Augment(crop=(0.08, 1), flip=0.5)", rrc, rrc, rrc, "itself")
    if have_tv:
        tv = ("torchvision", LIB)
        row(f"{B}: torchvision decode_jpeg + RandomResizedCrop + flip", tv, rrc, tv, "tarmac ÷ this")
    for name, path in baselines:
        base = ("rrc", path)
        row(f"{B}: `ds.batch` random resized crop, {name}", base, rrc, base, "this build ÷ this")
    for name, path in baselines:
        b = med[("augmented", path)]
        print(f"\n{name}: augmented ÷ plain {b['wall'] / med[plain]['wall']:.2f} (wall), "
              f"{b['cpu'] / med[plain]['cpu']:.2f} (CPU); augmented ÷ per-sample Python "
              f"{b['wall'] / med[py]['wall']:.2f} (wall), {b['cpu'] / med[py]['cpu']:.2f} (CPU)")
    ffcv = 31278 / 96
    print(f"\nFFCV's published ImageNet figure, 31,278 img/s on 96 vCPUs = {ffcv:.0f} per vCPU; tarmac's random "
          f"resized crop here: {med[('rrc', LIB)]['wall'] / a.threads:,.0f} per thread (wall), "
          f"{med[('rrc', LIB)]['cpu']:,.0f} per CPU-second")
    print(f"machine: {os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
