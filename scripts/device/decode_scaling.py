#!/usr/bin/env python3
"""Batch decoding with 1..N native threads (tarmac.Dataset.batch), each as a fraction of
threads x the 1-thread rate: the reader's scaling on a many-core machine (issue #4/#7).

usage: decode_scaling.py DATASET [--threads 1 2 4 8 16] [--samples 2048] [--batch 256] [--passes 3]
"""
import argparse
import os
import statistics
import time

import tarmac


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--samples", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--passes", type=int, default=3, help="passes per thread count; the median is shown")
    a = ap.parse_args()
    ds = tarmac.Dataset(a.dataset)
    order = tarmac.indices(len(ds), seed=3)
    order = [int(i) for i in order[:a.samples]] or [0]
    print(f"{a.dataset}: {len(ds)} samples; {len(order)} decoded per run; {os.cpu_count()} CPUs")
    base = None
    for t in a.threads:
        ds.batch(order[:a.batch], threads=t)  # warm up: threads started, pages cached
        rates = []
        for _ in range(a.passes):
            t0 = time.perf_counter()
            for s in range(0, len(order), a.batch):
                ds.batch(order[s:s + a.batch], threads=t)
            rates.append(len(order) / (time.perf_counter() - t0))
        rate = statistics.median(rates)
        base = base or rate / t
        print(f"threads {t:3d}  {rate:10.0f} samples/s  {rate / (t * base):6.1%} of {t} x the 1-thread rate",
              flush=True)


if __name__ == "__main__":
    main()
