#!/usr/bin/python3
"""The cost of `python -m tarmac.derive --reuse` (issue #29 item 1) on a 1.26 GB latent column,
against recomputing with the benchmark encoder, side by side in one run.

The image set: N photos (make_workloads.py's generator, JPEG q90) of the three 512²-class
buckets whose latents are SDXL-shaped (512×512, 384×640, 640×384 → 4×64×64, 4×48×80, 4×80×48
float32: latents.py), each with a .txt caption, converted with `--format keep` → OLD, whose
column `latents` is derived with the benchmark encoder (latents.py: `--fn latents:encode
--fields txt`) and merged: N = 20,000 gives the 1.26 GB column. The next version, as the issue's
proof makes it: 5 % of the images removed, 10 % new ones, 2 captions changed (the caption is
passed to FUNC with --fields, so it changes the input digest) → NEW. Then, each a process of its
own (wall and CPU seconds, peak RSS from wait4):

  (a) scratch  derive NEW with the encoder, no --reuse (with --scratch-world K: only rank 0 of
               K, a measured subset, and the whole extrapolated from it, said so)
  (b) reuse    derive NEW --reuse OLD: FUNC is called for the new and changed samples only
  (c) reuse    derive OLD --reuse OLD under another name: every sample reused, FUNC never
      alone    called: reading OLD's digests, hashing the inputs, copying the whole column

and `tarmac column merge` after each. (b) and (c) are split into their phases (OLD's digests
read, the inputs hashed, the reused outputs gathered, serialised, written and fsynced), timed
by wrapping derive.py's own functions in the child process.

Checked in the same run: FUNC's calls in (b) are the new and changed samples, each once; (b)'s
merged column equals (a)'s sample for sample (np.array_equal of every tensor; with a subset, on
the subset's samples); (c)'s equals OLD's; and a few of (b)'s latents equal the encoder run here
on the stored JPEGs decoded with OpenCV.

usage: TARMAC=build/apps/tarmac TARMAC_LIB=build/lib/read/libtarmac_c.so PYTHONPATH=python \\
       scripts/bench/derive_reuse.py [--samples 20000] [--work DIR] [--scratch-world K] [--cold]
"""
import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from latents import IMAGE_SIZES, drop_caches, encode_with, encoder  # noqa: E402
from make_workloads import add, jpg, photo  # noqa: E402

FN = "latents:encode"
FIELDS = ["txt"]
BATCH = 16


def caption(i):
    return f"a photo number {i} of something pleasant"


def image_bytes(bases, i):
    """Image i: its bucket's base photo with one row recoloured (unique bytes), JPEG q90."""
    rng = np.random.default_rng(1000 + i)
    img = bases[i % len(bases)].copy()
    img[rng.integers(0, img.shape[0]), :] = rng.integers(0, 255, 3)
    return jpg(img, 90)


def versions(n):
    """(OLD's image numbers, NEW's, the numbers whose caption NEW changes): NEW drops every 20th
    of OLD (5 %), puts a new image after every 10th (10 %), changes 2 captions."""
    old = list(range(n))
    new, extra = [], n
    for i in old:
        if i % 20 != 7:
            new.append(i)
        if i % 10 == 9:
            new.append(extra)
            extra += 1
    return old, new, {1, n // 2 + 1}


def write_sets(work, n):
    old, new, changed = versions(n)
    rng = np.random.default_rng(1)
    bases = [photo(rng, h, w) for h, w in IMAGE_SIZES]
    for name, numbers in (("old", old), ("new", new)):
        with tarfile.open(os.path.join(work, name + ".tar"), "w", format=tarfile.GNU_FORMAT) as tar:
            for i in numbers:
                key = f"r/{i:07d}"
                add(tar, key + ".jpg", image_bytes(bases, i))
                text = caption(i) + (" (fixed)" if name == "new" and i in changed else "")
                add(tar, key + ".txt", text.encode())
    return old, new, changed


# ---- the child: one derive run, its phases timed -------------------------------------------

def child(spec):
    """Runs tarmac.derive.run as spec says; writes its result and phase times to spec["out"]."""
    import tarmac.derive as d
    spans = []  # (what, start, end)

    def timing(what, f):
        def wrapped(*args, **kwargs):
            t0 = time.monotonic()
            try:
                return f(*args, **kwargs)
            finally:
                spans.append((what, t0, time.monotonic()))
        return wrapped

    class TimedOld(d._OldColumn):
        __init__ = timing("old_digests", d._OldColumn.__init__)

    d._OldColumn = TimedOld
    d._input_digests = timing("hash_inputs", d._input_digests)
    d._write_reused = timing("copy_reused", d._write_reused)
    d._Part.write_chunk = timing("write_chunk", d._Part.write_chunk)
    d._write_atomic = timing("write_fsync", d._write_atomic)
    reuse_done = []

    def log(msg):
        if msg.startswith("--reuse "):
            reuse_done.append(time.monotonic())

    importlib.import_module("torch")  # run() imports it: not part of the reuse phase
    t0 = time.monotonic()
    r = d.run(spec["dir"], spec["name"], FN, batch_size=BATCH, fields=FIELDS, rank=spec.get("rank", 0),
              world=spec.get("world", 1), reuse=spec.get("reuse"), log=log)
    t1 = time.monotonic()
    end = reuse_done[0] if reuse_done else t0
    phases = {}
    for what, a, b in spans:
        if a < end:  # the reuse phase: everything before FUNC's first batch
            phases[what] = phases.get(what, 0.0) + (b - a)
    r.update(wall_in=t1 - t0, reuse_phase=end - t0 if reuse_done else 0.0, phases=phases)
    with open(spec["out"], "w") as f:
        json.dump(r, f)


def measured(cmd, env=None):
    """Runs cmd; (wall s, CPU s, peak RSS MiB) of that process (and its waited-for children)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def derive(work, spec, calls):
    """One derive run in a child process: (its result dict with wall, cpu, rss; FUNC's calls)."""
    spec = dict(spec, out=os.path.join(work, "result.json"))
    if os.path.exists(calls):
        os.remove(calls)
    env = dict(os.environ, TARMAC_BENCH_CALLS=calls)
    env["PYTHONPATH"] = os.pathsep.join([HERE] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    for k in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        env.pop(k, None)
    wall, cpu, rss = measured([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)], env)
    with open(spec["out"]) as f:
        r = json.load(f)
    r.update(wall=wall, cpu=cpu, rss=rss)
    called = []
    if os.path.exists(calls):
        with open(calls) as f:
            called = [int(i) for line in f for i in line.split()]
    return r, called


def merge(tarmac_bin, ds_dir, name):
    os.sync()  # the parts on disk, as they are when the ranks have finished
    wall, cpu, rss = measured([tarmac_bin, "column", "merge", "-q", ds_dir, name])
    return {"wall": wall, "cpu": cpu, "rss": rss}


# ---- reading columns back (the merged file and a part's chunks) ------------------------------

def read_st(path):
    """{name: array} of a safetensors file, through a read-only memory map."""
    from tarmac import _format
    with open(path, "rb") as f:
        head = f.read(8)
        header, start = _format.safetensors_header(head + f.read(int.from_bytes(head, "little")))
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    dtypes = dict(_format.DTYPES)
    out = {}
    for k, t in header.items():
        if k != "__metadata__":
            b, e = t["data_offsets"]
            out[k] = mm[start + b:start + e].view(dtypes[t["dtype"]]).reshape(t["shape"])
    return out


def merged(ds_dir, name):
    return read_st(os.path.join(ds_dir, "columns", name + ".safetensors"))


def part_samples(ds_dir, name, rank, world):
    """{sample: (latent, digest)} of one rank's part, read from its chunks."""
    from tarmac import _format
    parts = _format.parts_dir(ds_dir, name)
    with open(os.path.join(parts, _format.part_record(rank, world))) as f:
        record = json.load(f)
    out = {}
    for c in record["chunks"]:
        t = read_st(os.path.join(parts, c["file"]))
        at = 0
        for i, shape, digest in zip(t["index"], t["shape"], t["digest"]):
            size = int(np.prod(shape))
            out[int(i)] = (t["values"][at:at + size].reshape(tuple(shape)), digest)
            at += size
    return out


def sample(col, i):
    return col["values"][col["offsets"][i]:col["offsets"][i + 1]].reshape(tuple(col["shapes"][i]))


# ---- the run -----------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=20000, help="OLD's images (20000: the 1.26 GB column)")
    ap.add_argument("--work", default=None, help="keep the data here (made once, reused by later runs)")
    ap.add_argument("--scratch-world", type=int, default=1, metavar="K",
                    help="(a) computes rank 0 of K only (a measured subset) and extrapolates (default 1: all; "
                         "0: (a) is not run, (b) is compared with an earlier run's)")
    ap.add_argument("--fresh", action="store_true", help="derive OLD's column again in a --work folder")
    ap.add_argument("--cold", action="store_true", help="(c) again after dropping the page cache (root)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(json.loads(a.child))
        return
    import tarmac
    tarmac_bin = os.environ.get("TARMAC", "tarmac")
    work = a.work or tempfile.mkdtemp(prefix="tarmac-reuse-bench-")
    os.makedirs(work, exist_ok=True)
    old_dir, new_dir = os.path.join(work, "old"), os.path.join(work, "new")
    calls = os.path.join(work, "calls.txt")
    uptime = lambda: open("/proc/loadavg").read().split()[:3]  # noqa: E731
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load {uptime()}")

    old, new, changed = versions(a.samples)
    print(f"OLD {len(old)} images, NEW {len(new)} ({len(set(old) - set(new))} removed, {len(set(new) - set(old))} "
          f"new, {len(changed)} captions changed)")
    stamp = os.path.join(work, "sets-%d" % a.samples)
    if not os.path.exists(stamp):  # made once for a --work folder
        t = time.perf_counter()
        write_sets(work, a.samples)
        print(f"image sets written in {time.perf_counter() - t:.0f} s")
        for name, d in (("old", old_dir), ("new", new_dir)):
            shutil.rmtree(d, ignore_errors=True)
            t = time.perf_counter()
            subprocess.run([tarmac_bin, "convert", "-q", os.path.join(work, name + ".tar"), "-o", d, "--format",
                            "keep"], check=True)
            print(f"converted {name} in {time.perf_counter() - t:.1f} s")
        open(stamp, "w").close()
    ds_old, ds_new = tarmac.Dataset(old_dir), tarmac.Dataset(new_dir)
    number = lambda key: int(key.split("/")[1])  # noqa: E731
    new_numbers = [number(ds_new.key(i)) for i in range(len(ds_new))]
    want_calls = sorted(i for i, k in enumerate(new_numbers) if k not in set(old) or k in changed)

    rows = []

    def row(label, r, samples, computed, reused):
        rows.append((label, samples, computed, reused, r["wall"], r["cpu"], r["rss"]))
        print(f"{label}: {r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU, {samples / r['wall']:,.0f} samples/s, "
              f"peak RSS {r['rss']:,.0f} MiB", flush=True)

    def rm(ds_dir, name):
        if os.path.exists(os.path.join(ds_dir, "columns")):
            subprocess.run([tarmac_bin, "column", "rm", "-q", ds_dir, name], stderr=subprocess.DEVNULL)

    # OLD's column, with the encoder (kept in a --work folder: --fresh makes it again).
    if a.fresh or not os.path.exists(os.path.join(old_dir, "columns", "latents.safetensors")):
        rm(old_dir, "latents")
        r, called = derive(work, {"dir": old_dir, "name": "latents"}, calls)
        assert sorted(called) == list(range(len(ds_old))), "OLD: FUNC called on every sample once"
        row("OLD: derive with the encoder", r, len(ds_old), r["computed"], 0)
        row("OLD: merge", merge(tarmac_bin, old_dir, "latents"), len(ds_old), 0, 0)
    else:
        print("OLD's column: made by an earlier run in this --work folder")
    col_old = merged(old_dir, "latents")
    old_bytes = col_old["values"].nbytes
    print(f"OLD's column: {os.path.getsize(os.path.join(old_dir, 'columns', 'latents.safetensors')) / 1e9:.3f} GB "
          f"({old_bytes / 1e9:.3f} GB of latents)")

    # (a) from scratch.
    k, scratch, share = a.scratch_world, None, len(ds_new)
    if k:
        rm(new_dir, "scratch")
        r, called = derive(work, {"dir": new_dir, "name": "scratch", "rank": 0, "world": k}, calls)
        share = len(ds_new) // k
        assert sorted(called) == list(range(share)), "(a): FUNC called on its share's samples once"
        if k == 1:
            row("(a) NEW from scratch: derive", r, len(ds_new), r["computed"], 0)
            row("(a) NEW from scratch: merge", merge(tarmac_bin, new_dir, "scratch"), len(ds_new), 0, 0)
        else:
            row(f"(a) NEW from scratch, measured on rank 0 of {k}", r, share, r["computed"], 0)
            per = r["wall"] / share
            print(f"(a) extrapolated to all {len(ds_new)} samples: {per * len(ds_new):.0f} s wall "
                  f"({per * 1000:.1f} ms a sample measured on {share}), {r['cpu'] / share * len(ds_new):.0f} s CPU")
        scratch = r
    else:
        print("(a) not run: (b) is compared with the column 'scratch' of an earlier run in this --work folder")

    # (b) with --reuse.
    rm(new_dir, "latents")
    r, called = derive(work, {"dir": new_dir, "name": "latents", "reuse": old_dir}, calls)
    assert sorted(called) == want_calls, f"(b): FUNC called on {len(called)} samples, want {len(want_calls)}"
    reused_b = r["reused"]
    assert reused_b == len(ds_new) - len(want_calls), r
    row("(b) NEW --reuse OLD: derive", r, len(ds_new), r["computed"], reused_b)
    row("(b) NEW --reuse OLD: merge", merge(tarmac_bin, new_dir, "latents"), len(ds_new), 0, 0)
    b_phases = r
    col_b = merged(new_dir, "latents")
    if k <= 1:
        col_a = merged(new_dir, "scratch")
        for t in ("values", "offsets", "shapes", "digest"):
            assert np.array_equal(col_a[t], col_b[t]), f"(b) differs from (a) in {t}"
        print(f"checked: (b)'s merged column equals (a)'s, all {len(ds_new)} samples (values, offsets, shapes, "
              "digests)")
    else:
        part = part_samples(new_dir, "scratch", 0, k)
        for i, (value, digest) in part.items():
            assert np.array_equal(value, sample(col_b, i)) and np.array_equal(digest, col_b["digest"][i]), i
        print(f"checked: (b)'s merged column equals (a)'s on (a)'s {len(part)} samples (values, shapes, digests)")
    print(f"checked: FUNC called in (b) on exactly the {len(want_calls)} new and changed samples, each once")
    reused_bytes = sum(sample(col_b, i).nbytes for i in set(range(len(ds_new))) - set(want_calls))

    # The encoder run here on the stored JPEGs, decoded by OpenCV, for a few samples.
    import cv2
    import torch
    net, exact = encoder(), 0
    for i in np.linspace(0, len(ds_new) - 1, 12).astype(int):
        rgb = cv2.cvtColor(cv2.imdecode(np.frombuffer(ds_new.blob(int(i)), np.uint8), cv2.IMREAD_COLOR),
                           cv2.COLOR_BGR2RGB)
        want = encode_with(net, {"image": torch.from_numpy(rgb[None])})[0].numpy()
        np.testing.assert_allclose(sample(col_b, int(i)), want, rtol=1e-4, atol=1e-4)
        exact += np.array_equal(sample(col_b, int(i)), want)
    print(f"checked: 12 of (b)'s latents equal the encoder on OpenCV's decoding of the stored JPEGs "
          f"({exact} bit for bit, the others within 1e-4)")

    # (c) the reuse machinery alone: every sample of OLD reused, FUNC never called.
    cs = []
    for cold in (False, True) if a.cold else (False,):
        rm(old_dir, "again")
        if cold and not drop_caches():
            print("(not root: no cold-cache figures)")
            break
        r, called = derive(work, {"dir": old_dir, "name": "again", "reuse": old_dir + ":latents"}, calls)
        assert called == [] and r["reused"] == len(ds_old), (len(called), r["reused"])
        state = "page cache dropped" if cold else "page cache warm"
        row(f"(c) OLD --reuse OLD, all reused ({state}): derive", r, len(ds_old), 0, len(ds_old))
        cs.append((state, r))
    row("(c) merge", merge(tarmac_bin, old_dir, "again"), len(ds_old), 0, 0)
    col_c = merged(old_dir, "again")
    for t in ("values", "offsets", "shapes", "digest"):
        assert np.array_equal(col_old[t], col_c[t]), f"(c) differs from OLD in {t}"
    print("checked: (c)'s merged column equals OLD's")

    print(f"\nload {uptime()}\n")
    print("| run | samples | computed by FUNC | reused | wall (s) | CPU (s) | samples/s | peak RSS (MiB) |")
    print("|---|---|---|---|---|---|---|---|")
    for label, samples, computed, reused, wall, cpu, rss in rows:
        print(f"| {label} | {samples:,} | {computed:,} | {reused:,} | {wall:.2f} | {cpu:.2f} | "
              f"{samples / wall:,.0f} | {rss:,.0f} |")
    if k > 1:
        per = scratch["wall"] / share
        print(f"| (a) NEW from scratch, **extrapolated** from the {share:,} measured | {len(ds_new):,} | "
              f"{len(ds_new):,} | 0 | {per * len(ds_new):.0f} | {scratch['cpu'] / share * len(ds_new):.0f} | "
              f"{1 / per:,.0f} | – |")
    print("\nThe reuse phase (everything before FUNC's first batch), by what it does:\n")
    print("| run | reused | GB copied | reuse phase (s) | OLD's digests read | inputs hashed | outputs gathered |"
          " serialised | written + fsynced | µs a sample | s a GB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, r, nbytes in [("(b)", b_phases, reused_bytes)] + [(f"(c), {s}", r, old_bytes) for s, r in cs]:
        p = r["phases"]
        copy, chunk, fsync = p.get("copy_reused", 0), p.get("write_chunk", 0), p.get("write_fsync", 0)
        print(f"| {label} | {r['reused']:,} | {nbytes / 1e9:.3f} | {r['reuse_phase']:.2f} | "
              f"{p.get('old_digests', 0):.2f} | {p.get('hash_inputs', 0):.2f} | {copy - chunk:.2f} | "
              f"{chunk - fsync:.2f} | {fsync:.2f} | {r['reuse_phase'] / r['reused'] * 1e6:.0f} | "
              f"{r['reuse_phase'] / (nbytes / 1e9):.2f} |")
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
