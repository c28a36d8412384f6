#!/usr/bin/python3
"""The derive loop's overhead (issue #15): a small convolutional encoder (an SD-VAE encoder in
miniature: 3 stride-2 convolutions to a 4-channel latent at 1/8 the size, float32, random
weights with a fixed seed) run over a bucketed dataset two ways, side by side in one run:

  fn alone  the encoder called on batches decoded beforehand (held in memory): FUNC's own time
  derive    tarmac.derive.run over the same dataset: decoding ahead on native threads, the
            calls, and the chunks written to DIR/columns/NAME.parts/

overhead = derive / fn alone - 1 (target: at most 10 %). Both use the same batches (the rank's
share grouped by bucket). Prints one line per repeat and the median.

usage: TARMAC=build/apps/tarmac TARMAC_LIB=build/lib/read/libtarmac_c.so PYTHONPATH=python \\
       scripts/bench/derive_overhead.py [--photos 200] [--size 512] [--batch-size 8] [--repeat 3]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import tarmac
import tarmac.derive

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from latents import encode_with, encoder  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", type=int, default=200)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", default=None)
    ap.add_argument("--torch-threads", type=int, default=0, help="torch's CPU threads (0: its default)")
    a = ap.parse_args()
    tarmac_bin = os.environ.get("TARMAC", "tarmac")
    work = a.work or tempfile.mkdtemp(prefix="tarmac-derive-bench-")
    if not os.path.exists(os.path.join(work, "w2.tar")):
        subprocess.run([sys.executable, os.path.join(HERE, "make_workloads.py"), work, "--w2", str(a.photos)],
                       check=True, stdout=subprocess.DEVNULL)
    ds_dir = os.path.join(work, "buckets")
    if not os.path.exists(os.path.join(ds_dir, "labels.safetensors")):
        subprocess.run([tarmac_bin, "convert", "-q", os.path.join(work, "w2.tar"), "-o", ds_dir, "--resize",
                        "bucket", "--size", str(a.size), "--quality", "90", "--on-error", "skip"], check=True)
    if a.torch_threads:
        torch.set_num_threads(a.torch_threads)
    net = encoder()

    def encode(batch):
        return encode_with(net, batch)

    ds = tarmac.Dataset(ds_dir)
    batches = tarmac.derive._batches(ds, np.arange(len(ds), dtype=np.int64), a.batch_size)
    decoded = []
    for idx in batches:
        images, _ = ds.batch(idx, fields=[])
        decoded.append({"image": torch.from_numpy(images), "__index__": torch.from_numpy(idx)})
    print(f"{len(ds)} samples, {len(batches)} batches of up to {a.batch_size}, torch threads "
          f"{torch.get_num_threads()}, {os.cpu_count()} cores")
    alone, through = [], []
    for r in range(a.repeat):
        t0 = time.perf_counter()
        for b in decoded:
            encode(b)
        alone.append(time.perf_counter() - t0)
        shutil.rmtree(os.path.join(ds_dir, "columns"), ignore_errors=True)
        t0 = time.perf_counter()
        tarmac.derive.run(ds_dir, "latents", encode, batch_size=a.batch_size, rank=0, world=1,
                          log=lambda msg: None)
        through.append(time.perf_counter() - t0)
        print(f"repeat {r}: fn alone {alone[-1]:.2f} s, derive {through[-1]:.2f} s, "
              f"overhead {through[-1] / alone[-1] - 1:+.1%}")
    ma, mt = statistics.median(alone), statistics.median(through)
    print(f"median: fn alone {ma:.2f} s ({len(ds) / ma:.1f} samples/s), derive {mt:.2f} s "
          f"({len(ds) / mt:.1f} samples/s), overhead {mt / ma - 1:+.1%}")
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
