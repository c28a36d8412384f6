#!/usr/bin/python3
"""Latent caches two ways (issue #15), side by side in one run:

  kohya     what kohya-ss sd-scripts writes today: one .npz per image (np.savez: `latents`
            float32 [4, h/8, w/8], `original_size`, `crop_ltrb`), read with np.load
  tarmac    one derived column: `python -m tarmac.derive` parts, `tarmac column merge`,
            read with Dataset.derived_value (a zero-copy view, copied out here as a trainer would)

The latents are SDXL-shaped for three 512²-class buckets (4×64×64, 4×48×80, 4×80×48, float32;
values from a fixed seed), over a labels-only dataset of N samples (W4's labels, converted with
--no-images, so that both caches hold exactly the same samples). Measures writing each cache,
`tarmac column merge` (the parts synced to disk first; the merged file is fsynced) and
`tarmac verify` (GB/s), the bytes on disk, and reading every
latent in a random order (one process, page cache warm; then, as root, after dropping the page
cache) — samples/s and the ratio.

usage: TARMAC=build/apps/tarmac TARMAC_LIB=build/lib/read/libtarmac_c.so PYTHONPATH=python \\
       scripts/bench/column_read.py [--samples 20000] [--work DIR] [--repeat 3]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

import tarmac
import tarmac.derive

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from latents import SHAPES, drop_caches, du, latent, timed  # noqa: E402


def encode(batch):  # FUNC for derive, one sample a batch (without images there are no buckets)
    return np.stack([latent(int(i)) for i in batch["__index__"]])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--work", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    tarmac_bin = os.environ.get("TARMAC", "tarmac")
    work = a.work or tempfile.mkdtemp(prefix="tarmac-column-bench-")
    ds_dir, npz_dir = os.path.join(work, "ds"), os.path.join(work, "kohya")
    if not os.path.exists(os.path.join(ds_dir, "labels.safetensors")):
        subprocess.run([sys.executable, os.path.join(HERE, "make_workloads.py"), work, "--w4", str(a.samples)],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([tarmac_bin, "convert", "-q", os.path.join(work, "w4.tar"), "-o", ds_dir, "--no-images"],
                       check=True)
    ds = tarmac.Dataset(ds_dir)
    n = len(ds)
    keys = [ds.key(i) for i in range(n)]

    # Writing: kohya's per-image .npz files; derive's parts + merge.
    shutil.rmtree(npz_dir, ignore_errors=True)
    os.makedirs(npz_dir)

    def write_npz():
        for i, key in enumerate(keys):
            lat = latent(i)
            np.savez(os.path.join(npz_dir, key.replace("/", "_") + ".npz"), latents=lat,
                     original_size=np.array([lat.shape[2] * 8, lat.shape[1] * 8]), crop_ltrb=np.array([0, 0, 0, 0]))
    t_npz = timed(write_npz)
    shutil.rmtree(os.path.join(ds_dir, "columns"), ignore_errors=True)
    t_derive = timed(lambda: [tarmac.derive.run(ds_dir, "latents", encode, batch_size=1, rank=r, world=3,
                                                log=lambda m: None) for r in range(3)])
    os.sync()  # the parts on disk, as they are when ranks on other nodes have finished
    t_merge = timed(lambda: subprocess.run([tarmac_bin, "column", "merge", "-q", ds_dir, "latents"], check=True))
    t_verify = timed(lambda: subprocess.run([tarmac_bin, "verify", "-q", ds_dir], check=True))
    ds = tarmac.Dataset(ds_dir)  # opened again: it lists the columns merged since
    col_bytes = os.path.getsize(os.path.join(ds_dir, "columns", "latents.safetensors"))
    npz_bytes = du(npz_dir)
    print(f"{n} samples; latents {', '.join('x'.join(map(str, s)) for s in SHAPES)} float32")
    print(f"kohya .npz cache: written in {t_npz:.1f} s, {npz_bytes / 1e6:.0f} MB in {n} files")
    print(f"tarmac column: derive (3 ranks, no model) {t_derive:.1f} s, merge {t_merge:.2f} s "
          f"({col_bytes / t_merge / 1e9:.2f} GB/s), verify {t_verify:.2f} s ({col_bytes / t_verify / 1e9:.2f} GB/s), "
          f"{col_bytes / 1e6:.0f} MB in 1 file")

    # Every value read back equals what was written (both ways), then the timed random-order reads.
    for i in range(0, n, max(1, n // 50)):
        np.testing.assert_array_equal(ds.derived_value("latents", i), latent(i))
        with np.load(os.path.join(npz_dir, keys[i].replace("/", "_") + ".npz")) as z:
            np.testing.assert_array_equal(z["latents"], latent(i))
    order = np.random.default_rng(1).permutation(n)
    paths = [os.path.join(npz_dir, k.replace("/", "_") + ".npz") for k in keys]

    def read_npz():
        for i in order:
            with np.load(paths[i]) as z:
                z["latents"], z["original_size"], z["crop_ltrb"]

    def read_tarmac():
        for i in order:
            np.array(ds.derived_value("latents", int(i)))

    rows = []
    for label, cold in (("page cache warm", False), ("after dropping the page cache", True)):
        if cold and not drop_caches():
            print("(not root: no cold-cache figures)")
            break
        t_k, t_t = [], []
        for _ in range(1 if cold else a.repeat):
            if cold:
                drop_caches()
            t_k.append(timed(read_npz))
            if cold:
                drop_caches()
                ds = tarmac.Dataset(ds_dir)
            t_t.append(timed(read_tarmac))
        k, t = statistics.median(t_k), statistics.median(t_t)
        rows.append((label, n / k, n / t, k / t))
        print(f"read every latent, random order, {label}: kohya .npz {n / k:,.0f} samples/s, "
              f"tarmac {n / t:,.0f} samples/s: tarmac {k / t:.1f}x")
    print("\n| read every latent, random order | kohya .npz (samples/s) | tarmac column (samples/s) | tarmac ÷ kohya |")
    print("|---|---|---|---|")
    for label, k, t, r in rows:
        print(f"| {label} | {k:,.0f} | {t:,.0f} | {r:.1f}× |")
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
