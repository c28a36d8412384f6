#!/usr/bin/env python3
"""Conversion scaling over 1..N threads on a many-core machine (issue #7): the W1 task
(HMR person crops -> 224x224 JPEG q95) on a generated W1 archive, with tarmac at each thread
count, the single-thread decode floor, and the Python tarfile+PIL converter with 1 and N
processes, as one markdown table (samples/s = median wall clock of --repeat runs).

usage: convert_scaling.py W1.tar --tarmac PATH [--threads 1 2 4 8 12 16] [--repeat 3]
                          [--work DIR] [--no-peers]
Make W1.tar with scripts/bench/make_workloads.py DIR --w1 N --formats tar.
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
W1ARGS = ["--crop", "field:bbox_xywh", "--crop-scale", "1.2", "--square", "--size", "224",
          "--points", "keypoints2d", "--boxes", "bbox_xywh", "--quality", "95"]


def timed(cmd, clean, repeat):
    """Median wall seconds, median CPU seconds (user + sys of the child) of `repeat` runs, and
    the standard output of the run with the median wall time."""
    runs = []
    for _ in range(repeat):
        shutil.rmtree(clean, ignore_errors=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        runs.append((wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, out))
    runs.sort(key=lambda r: r[0])
    return runs[len(runs) // 2][0], statistics.median(r[1] for r in runs), runs[len(runs) // 2][2]


def decode_floor(archive):
    """Source images decoded per CPU-second, one thread (scripts/bench/decode_floor.py)."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench", "decode_floor.py"), archive],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return float(out.split()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("archive")
    ap.add_argument("--tarmac", required=True)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8, 12, 16])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", default="/tmp/convert-scaling")
    ap.add_argument("--no-peers", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    with tarfile.open(a.archive) as tar:
        n = sum(1 for m in tar if m.name.endswith(".jpg"))
    out = os.path.join(a.work, "out")
    floor = decode_floor(a.archive)
    print(f"{a.archive}: {n} samples, {os.path.getsize(a.archive) / 1e6:.0f} MB; {os.cpu_count()} CPUs; "
          f"decode floor {floor:.1f} images/s per core (libjpeg-turbo via OpenCV, scripts/bench/decode_floor.py)")
    print()
    print("| pipeline | threads | samples/s | speed-up vs 1 thread | ÷ (threads × 1-thread rate) "
          "| ÷ (threads × decode floor) | CPU s | busy: reader / workers / writer | finishing s |")
    print("|---|---|---|---|---|---|---|---|---|")
    base = None
    for t in a.threads:
        wall, cpu, text = timed([a.tarmac, "convert", "--json", a.archive, "-o", out, *W1ARGS, "--threads", str(t)],
                                out, a.repeat)
        st = json.loads(text)["stages"]
        rate = n / wall
        base = base or rate
        print(f"| tarmac | {t} | {rate:.0f} | {rate / base:.2f}× | {rate / (t * base):.0%} "
              f"| {rate / (t * floor):.0%} | {cpu:.2f} | {st['reader_busy']:.0%} / {st['worker_busy']:.0%} / "
              f"{st['writer_busy']:.0%} | {st['finish_seconds']:.2f} |", flush=True)
    if a.no_peers:
        return
    peer = os.path.join(ROOT, "scripts", "bench", "peer_python.py")
    for procs in (1, max(a.threads)):
        wall, cpu, _ = timed([sys.executable, peer, a.archive, out, "--procs", str(procs)], out, 1)
        rate = n / wall
        print(f"| Python tarfile+PIL | {procs} processes | {rate:.0f} | - | - | {rate / (procs * floor):.0%} "
              f"| {cpu:.2f} | - | - |", flush=True)


if __name__ == "__main__":
    main()
