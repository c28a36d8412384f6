#!/usr/bin/python3
"""The reader's first epoch over an s3:// dataset from an empty cache against a warm one (#27
item 4), and both against the same dataset in a local folder. The server is the one
scripts/s3-local.sh starts (Swift + s3api on this machine, over 127.0.0.1); the dataset,
N JPEG images (256x256, q90, --shard-size 8M) converted locally, is uploaded with boto3.

An epoch reads every sample in order through tarmac.Dataset: "bytes" touches each stored image
(the read path alone), "decode" decodes it to RGB pixels (what training does). Cold: the cache
folder is emptied and the Dataset opened afresh (downloads the annotation file at open and each
shard on first use); warm: a new Dataset on the filled cache (each shard's CRC-32 checked on
first use, nothing downloaded).

usage: scripts/bench/s3_cache.py [WORKDIR]     env: N=2000 REPEAT=3 TARMAC=build/apps/tarmac
       (TARMAC_LIB and PYTHONPATH=python as for the package; needs scripts/setup-deps.sh test)
Prints one markdown table (median of REPEAT runs).
"""
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
N = int(os.environ.get("N", 2000))
REPEAT = int(os.environ.get("REPEAT", 3))
WORK = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tarmac-bench-s3-cache")
BUCKET = "bench-cache"


def make_dataset():
    import tarfile
    import io
    local = os.path.join(WORK, f"local-{N}")
    if os.path.exists(os.path.join(local, "manifest.json")):
        return local
    tar = os.path.join(WORK, f"in-{N}.tar")
    rng = np.random.default_rng(0)
    with tarfile.open(tar, "w") as t:
        for i in range(N):
            y, x = np.mgrid[0:256, 0:256]
            img = (128 + 60 * np.sin(x / (7 + i % 13)) + 40 * np.cos(y / 9) + rng.normal(0, 12, (256, 256, 3))
                   .transpose(2, 0, 1)).transpose(1, 2, 0)
            ok, buf = cv2.imencode(".jpg", np.clip(img, 0, 255).astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 90])
            for name, data in ((f"{i:06d}.jpg", buf.tobytes()), (f"{i:06d}.cls", str(i % 10).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    subprocess.run([TARMAC, "convert", "-q", tar, "-o", local, "--format", "keep", "--shard-size", "8M"],
                   check=True)
    return local


def epoch(ds, decode):
    t = time.perf_counter()
    total = 0
    for i in range(len(ds)):
        if decode:
            total += int(ds.decode(i)[0, 0, 0])
        else:
            total += int(ds.image(i)[-1])
    return time.perf_counter() - t


def main():
    os.makedirs(WORK, exist_ok=True)
    local = make_dataset()
    server = os.path.join(WORK, "s3")
    out = subprocess.run([os.path.join(ROOT, "scripts", "s3-local.sh"), "start", server], check=True,
                         capture_output=True, text=True).stdout
    try:
        for line in out.splitlines():
            k, v = line.removeprefix("export ").split("=", 1)
            os.environ[k] = v
        import boto3
        import tarmac
        s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=os.environ["AWS_REGION"])
        try:
            s3.create_bucket(Bucket=BUCKET)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass
        files = sorted(n for n in os.listdir(local) if os.path.isfile(os.path.join(local, n)))
        for n in files:
            s3.upload_file(os.path.join(local, n), BUCKET, f"d{N}/" + n)
        url, cache = f"s3://{BUCKET}/d{N}/", os.path.join(WORK, "cache")
        stored = sum(os.path.getsize(os.path.join(local, n)) for n in files)
        rows = []
        for decode in (False, True):
            times = {"local folder": [], "s3://, empty cache": [], "s3://, warm cache": []}
            for _ in range(REPEAT):
                times["local folder"].append(epoch(tarmac.Dataset(local), decode))
                shutil.rmtree(cache, ignore_errors=True)
                t = time.perf_counter()
                ds = tarmac.Dataset(url, cache=cache)
                times["s3://, empty cache"].append(time.perf_counter() - t + epoch(ds, decode))
                t = time.perf_counter()
                ds = tarmac.Dataset(url, cache=cache)
                times["s3://, warm cache"].append(time.perf_counter() - t + epoch(ds, decode))
            base = statistics.median(times["local folder"])
            for name, ts in times.items():
                m = statistics.median(ts)
                rows.append((("decode" if decode else "bytes"), name, m, N / m, m / base))
        print(f"N={N} JPEG 256x256 q90, {stored / 1e6:.1f} MB in {len([f for f in files if f.endswith('.tar')])} "
              f"shards; median of {REPEAT}; open + one epoch\n")
        print("| epoch | dataset | s | samples/s | ÷ local folder (time) |")
        print("|---|---|---|---|---|")
        for r in rows:
            print(f"| {r[0]} | {r[1]} | {r[2]:.2f} | {r[3]:.0f} | {r[4]:.2f} |")
    finally:
        subprocess.run([os.path.join(ROOT, "scripts", "s3-local.sh"), "stop", server], check=False)


if __name__ == "__main__":
    main()
