#!/usr/bin/python3
"""Reading a converted dataset against the three ways users read training data today (issue #7):

  tarmac        tarmac.Dataset over the converted dataset (memory-mapped labels, tar shards)
  tar on the fly  the source tar opened with Python's tarfile, members extracted per sample
                (the Marigold case: index built with getmembers() in __init__)
  files         one .jpg and one .npz per sample on disk, read per sample
  npz in init   the same files, but every sample's labels loaded into a list in __init__ and
                indexed in __getitem__ (the HMR case: forked workers copy what they touch)

Each reads the same N samples (a 224x224 JPEG q95 + an .npz of bbox, 45x3 keypoints, betas and
body pose, like the W1 output) and returns the image bytes and the labels as numpy arrays.
Measured: the time to construct the dataset object, random-access samples/s in one process (page
cache warm), and with torch, a DataLoader with W forked workers reading every sample's labels:
samples/s and the total PSS of the main process and its workers (a page shared by k processes
counts 1/k in each, so the sum is what the loader really costs).

usage: scripts/bench/reader_peers.py WORKDIR [--samples 20000] [--workers 8]
       (needs a built tarmac: build/apps/tarmac and build/lib/read/libtarmac_c.so)
"""
import argparse
import io
import os
import subprocess
import sys
import tarfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "scripts", "bench"))
os.environ.setdefault("TARMAC_LIB", os.path.join(ROOT, "build", "lib", "read", "libtarmac_c.so"))
import tarmac  # noqa: E402
from make_workloads import jpg, npz, photo  # noqa: E402

FIELDS = ("bbox_xywh", "keypoints2d", "betas", "body_pose")


def make(work, n, tarmac_bin):
    """src.tar (KEY.jpg + KEY.npz), its extraction files/, and tarmac's conversion conv/."""
    src = os.path.join(work, "src.tar")
    if os.path.exists(os.path.join(work, f".made-{n}")):
        return
    rng = np.random.default_rng(3)
    images = [jpg(photo(rng, 224, 224), 95) for _ in range(64)]  # reused: generation is slow
    with tarfile.open(src, "w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(n):
            key = f"s/{i:07d}"
            labels = npz(bbox_xywh=rng.uniform(0, 200, 4).astype(np.float32),
                         keypoints2d=rng.uniform(0, 224, (45, 3)).astype(np.float32),
                         betas=rng.normal(size=10).astype(np.float32),
                         body_pose=rng.normal(size=69).astype(np.float32))
            for name, data in ((key + ".jpg", images[i % 64]), (key + ".npz", labels)):
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                tar.addfile(ti, io.BytesIO(data))
    with tarfile.open(src) as tar:
        tar.extractall(os.path.join(work, "files"))
    subprocess.run([tarmac_bin, "convert", "-q", src, "-o", os.path.join(work, "conv"), "--format", "keep",
                    "--overwrite"], check=True, stdout=subprocess.DEVNULL)
    open(os.path.join(work, f".made-{n}"), "w").close()


class TarmacReader:
    def __init__(self, work):
        self.ds = tarmac.Dataset(os.path.join(work, "conv"))

    def __len__(self):
        return len(self.ds)

    def get(self, i):
        s = self.ds[i]
        return s["image"], {k: s[k] for k in FIELDS}

    def __getstate__(self):
        return {"ds": self.ds}


class TarOnTheFly:
    def __init__(self, work):
        self.path = os.path.join(work, "src.tar")
        with tarfile.open(self.path) as tar:
            members = {m.name: m for m in tar.getmembers()}
        self.keys = sorted(k[:-4] for k in members if k.endswith(".jpg"))
        self.members = members
        self.tar, self.pid = None, None

    def __len__(self):
        return len(self.keys)

    def get(self, i):
        if self.pid != os.getpid():  # one handle per process
            self.tar, self.pid = tarfile.open(self.path), os.getpid()
        key = self.keys[i]
        image = self.tar.extractfile(self.members[key + ".jpg"]).read()
        labels = np.load(io.BytesIO(self.tar.extractfile(self.members[key + ".npz"]).read()))
        return image, {k: labels[k] for k in FIELDS}

    def __getstate__(self):
        state = self.__dict__.copy()
        state["tar"], state["pid"] = None, None
        return state


class Files:
    def __init__(self, work):
        self.dir = os.path.join(work, "files", "s")
        self.keys = sorted(n[:-4] for n in os.listdir(self.dir) if n.endswith(".jpg"))

    def __len__(self):
        return len(self.keys)

    def get(self, i):
        base = os.path.join(self.dir, self.keys[i])
        with open(base + ".jpg", "rb") as f:
            image = f.read()
        with np.load(base + ".npz") as labels:
            return image, {k: labels[k] for k in FIELDS}


class NpzInInit(Files):
    def __init__(self, work):
        super().__init__(work)
        self.labels = []
        for key in self.keys:
            with np.load(os.path.join(self.dir, key + ".npz")) as z:
                self.labels.append({k: z[k] for k in FIELDS})

    def get(self, i):
        with open(os.path.join(self.dir, self.keys[i] + ".jpg"), "rb") as f:
            return f.read(), self.labels[i]


READERS = [("tarmac", TarmacReader), ("tar on the fly (tarfile)", TarOnTheFly), ("one file per sample", Files),
           ("npz labels loaded in __init__", NpzInInit)]


def pss_kb(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return sum(int(line.split()[1]) for line in f if line.startswith("Pss:"))


def loader_run(reader, workers):
    """One epoch of a DataLoader over every sample's labels (and image length): samples/s and
    the total PSS of the main process and its workers at the end."""
    import torch

    class TorchDataset(torch.utils.data.Dataset):
        def __len__(self):
            return len(reader)

        def __getitem__(self, i):
            image, labels = reader.get(i)
            return {"image_bytes": len(image), **{k: np.array(v) for k, v in labels.items()}}

    order = tarmac.indices(len(reader), seed=1).tolist()
    loader = torch.utils.data.DataLoader(TorchDataset(), batch_size=64, sampler=order, num_workers=workers,
                                         persistent_workers=workers > 0)
    t0 = time.perf_counter()
    n = sum(len(b["image_bytes"]) for b in loader)
    rate = n / (time.perf_counter() - t0)
    pids = [os.getpid()] + ([w.pid for w in loader._iterator._workers] if workers else [])
    total = sum(pss_kb(p) for p in pids)
    del loader
    return rate, total / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--tarmac", default=os.path.join(ROOT, "build", "apps", "tarmac"))
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    make(a.workdir, a.samples, a.tarmac)
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False

    rows = []
    order = tarmac.indices(a.samples, seed=7).tolist()
    for name, cls in READERS:
        t0 = time.perf_counter()
        r = cls(a.workdir)
        init_s = time.perf_counter() - t0
        for i in order:  # warm the page cache and every lazy structure
            r.get(i)
        t0 = time.perf_counter()
        for i in order:
            r.get(i)
        rate = len(order) / (time.perf_counter() - t0)
        row = {"name": name, "init_s": init_s, "rate": rate}
        if have_torch:
            row["loader_rate"], row["pss_mib"] = loader_run(r, a.workers)
        rows.append(row)
        del r

    base = rows[0]
    print(f"| reader ({a.samples} samples) | construct (s) | random access, 1 process (samples/s) | tarmac ÷ this |"
          + (f" DataLoader, {a.workers} workers: samples/s | total PSS (MiB) |" if have_torch else ""))
    print("|---|---|---|---|" + ("---|---|" if have_torch else ""))
    for row in rows:
        line = (f"| {row['name']} | {row['init_s']:.3f} | {row['rate']:,.0f} | "
                f"{base['rate'] / row['rate']:.2f} |")
        if have_torch:
            line += f" {row['loader_rate']:,.0f} | {row['pss_mib']:.0f} |"
        print(line)
    print(f"\nmachine: {os.cpu_count()} cores; {time.strftime('%Y-%m-%d', time.gmtime())}")


if __name__ == "__main__":
    main()
