"""Invariant 1 of issue #35: a run reads everything its inputs hold, or fails. Every input kind
(a tar, a tar.gz and a zip file, a folder's members, `pipe:`, `http://` (Python's http.server,
whose HEAD says the whole object while its GET gives a cut one, or which answers no HEAD at
all), `s3://` (the real Swift server of scripts/s3-local.sh; skipped without it) and a remote
`--table`) is cut at every member boundary and at seeded random offsets: each run exits non-zero
or records the input's error in the manifest; none exits 0 with fewer samples. The fixtures are
written by Python's tarfile, zipfile and gzip, the samples counted by st_reader.py.

Also the regression tests of items 4, 11 and 17 (FIFO part): a tar cut exactly at a member
boundary, `./d/./x` and `d/x` as one key, and a FIFO in an input folder listed as a tar's is.
"""
import concurrent.futures
import gzip
import http.server
import io
import json
import os
import random
import re
import struct
import subprocess
import sys
import tarfile
import threading
import unittest
import zipfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402
import s3_local as s3l  # noqa: E402
import st_reader  # noqa: E402
from test_s3 import ThreadingServer  # noqa: E402

SAMPLES = 3  # of two members each: six members
KEYS = [f"d/{i:04d}" for i in range(SAMPLES)]
OPTIONS = ["-q", "--format", "keep"]
BUCKET = "tarmac-truncation"
SEED = 35


def tiny_png(seed):
    return fx.png(np.random.RandomState(seed).randint(0, 256, (8, 8, 3), dtype=np.uint8))


MEMBERS = []
for _i, _key in enumerate(KEYS):
    MEMBERS += [(_key + ".png", tiny_png(_i)), (_key + ".json", fx.js({"label": _i, "name": "sample %d" % _i}))]


def tar_bytes(members=MEMBERS):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1700000000
            t.addfile(info, io.BytesIO(data))
    return b.getvalue()


def tar_layout(data):
    """(member header offsets, the offset after the last member, the offset after the two
    end-of-archive blocks), by tarfile."""
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        infos = t.getmembers()
    heads = [m.offset for m in infos]
    last = infos[-1]
    after = last.offset_data + (last.size + 511) // 512 * 512
    return heads, after, after + 1024


def zip_bytes():
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        for i, (name, data) in enumerate(MEMBERS):
            z.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED if i % 2 else zipfile.ZIP_STORED)
    return b.getvalue()


def zip_layout(data):
    """Offsets of each local header, the central directory and its end record, by zipfile."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        heads = [i.header_offset for i in z.infolist()]
    end = data.rfind(b"PK\x05\x06")
    directory = struct.unpack_from("<I", data, end + 16)[0]
    return heads + [directory, end]


def table_bytes(rows):
    return ("image_path,label\n" + "".join(f"{KEYS[i]}.png,{i}\n" for i in rows)).encode()


def random_offsets(n, size, rng):
    return sorted(rng.sample(range(1, size), min(n, size - 1)))


class CutHandler(http.server.BaseHTTPRequestHandler):
    """Serves FILES[name] under three paths: /full/NAME (the object), /cut/N/NAME (its first N
    bytes, with a Content-Length of N, while HEAD says its whole size: the object changed
    between the two, or a proxy cut it) and /nohead/N/NAME (its first N bytes, HEAD refused
    with 405 as a presigned URL does: nothing says the size but the GET). Ranges are served."""

    FILES = {}

    def log_message(self, *args):
        pass

    def parse(self):
        m = re.fullmatch(r"/(full|cut/(\d+)|nohead/(\d+))/(.+)", self.path)
        if not m or m.group(4) not in self.FILES:
            return None
        whole = self.FILES[m.group(4)]
        n = m.group(2) or m.group(3)
        return m.group(1).split("/")[0], whole, whole[:int(n)] if n else whole

    def do_HEAD(self):
        got = self.parse()
        if got is None or got[0] == "nohead":
            self.send_response(404 if got is None else 405)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(got[1])))
        self.end_headers()

    def do_GET(self):
        got = self.parse()
        if got is None:
            self.send_error(404)
            return
        body = got[2]
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if m:
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else len(body) - 1, len(body) - 1)
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(body)}")
            body = body[start:end + 1]
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


RUNS = iter(range(1, 1 << 30))
RUN_LOCK = threading.Lock()


def next_run():
    with RUN_LOCK:
        return next(RUNS)


class Case:
    """One run: `inputs` (and `flags`) of `kind`, cut at `cut`; `strict`: the cut left the input
    incomplete, so it may not end as a complete dataset either."""

    def __init__(self, kind, cut, inputs, strict, flags=(), env=None, keys=KEYS):
        self.kind, self.cut, self.inputs, self.strict = kind, cut, list(inputs), strict
        self.flags, self.env, self.keys = list(flags), env, keys

    def __repr__(self):
        return f"{self.kind} cut at {self.cut}"


class SweepCase(fx.TmpCase):
    """The fixtures, the server of cut objects, and how a run is judged (no tests of its own)."""

    @classmethod
    def build(cls):
        cls.rng = random.Random(SEED)
        cls.tar = tar_bytes()
        cls.tar_heads, cls.tar_after, cls.tar_end = tar_layout(cls.tar)
        cls.tgz = gzip.compress(cls.tar, mtime=0)
        cls.zip = zip_bytes()
        cls.zip_cuts = zip_layout(cls.zip)
        cls.table = table_bytes(range(SAMPLES))
        cls.table_rows = [m.start() + 1 for m in re.finditer(b"\n", cls.table)][:-1]
        for name, data in (("full.tar", cls.tar), ("full.tar.gz", cls.tgz), ("full.zip", cls.zip),
                           ("t.csv", cls.table)):
            with open(cls.file(name), "wb") as f:
                f.write(data)
        CutHandler.FILES = {"x.tar": cls.tar, "x.tar.gz": cls.tgz, "x.zip": cls.zip, "t.csv": cls.table}
        cls.http = ThreadingServer(("127.0.0.1", 0), CutHandler)
        threading.Thread(target=cls.http.serve_forever, daemon=True).start()
        cls.addClassCleanup(cls.http.server_close)
        cls.addClassCleanup(cls.http.shutdown)
        cls.url = f"http://127.0.0.1:{cls.http.server_address[1]}"

    @classmethod
    def file(cls, name):
        return os.path.join(cls.tmp, name)

    # ------------------------------------------------------------ running and judging

    def convert(self, inputs, *flags, env=None):
        out = self.path("out%d" % next_run())
        p = subprocess.run([fx.TARMAC, "convert", *inputs, "-o", out, *OPTIONS, *flags],
                           capture_output=True, text=True, timeout=120, env=env)
        return p, out

    def outcome(self, p, out):
        """'failed' (exit non-zero), 'recorded' (exit 0, the manifest lists an input error or
        a skipped sample or member) or the keys of the dataset (exit 0, nothing recorded)."""
        if p.returncode != 0:
            self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")), p.stderr)
            return "failed"
        with open(os.path.join(out, "manifest.json")) as f:
            manifest = json.load(f)
        if manifest["skipped"]:
            return "recorded"
        tensors, _ = st_reader.load(os.path.join(out, "labels.safetensors"))
        return sorted(st_reader.keys(tensors))

    def sweep(self, cases):
        """Runs every case (a few at a time) and fails listing each that exited 0 with fewer
        samples than the whole input holds, or complete though its input was cut."""
        def one(i, case):
            flags = case.flags + (["--on-error", "skip"] if i % 2 else [])
            p, out = self.convert(case.inputs, *flags, env=case.env)
            got = self.outcome(p, out)
            if got in ("failed", "recorded"):
                return None
            if got != case.keys:
                return f"{case} ({' '.join(flags)}): exit 0 with {len(got)} of {len(case.keys)} samples, nothing recorded"
            if case.strict:
                return f"{case} ({' '.join(flags)}): exit 0, complete, though the input was cut"
            return None
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            problems = [r for r in pool.map(lambda a: one(*a), enumerate(cases)) if r]
        self.assertEqual(problems, [])

    def cut_files(self, kind, data, cuts, end):
        """Cases of the local file `data` cut at each offset of `cuts` (strict below `end`)."""
        cases = []
        for cut in cuts:
            path = self.file(f"{kind}-{cut}.{kind}")
            with open(path, "wb") as f:
                f.write(data[:cut])
            cases.append(Case(kind, cut, [path], cut < end))
        return cases

    def tar_cuts(self, random_count):
        return sorted(set(self.tar_heads + [self.tar_after, self.tar_end - 512, self.tar_end]
                          + random_offsets(random_count, self.tar_end, self.rng)))



class Truncation(SweepCase):
    # ------------------------------------------------------------ the sweep, by kind

    def test_local_files_cut_anywhere(self):
        cases = self.cut_files("tar", self.tar, self.tar_cuts(20), self.tar_end)
        # the tar cut at its boundaries, each cut compressed whole: only the tar's end tells
        for cut in self.tar_heads + [self.tar_after, self.tar_end]:
            path = self.file(f"cut-{cut}.tar.gz")
            with open(path, "wb") as f:
                f.write(gzip.compress(self.tar[:cut], mtime=0))
            cases.append(Case("tar cut, then gzipped", cut, [path], cut < self.tar_end))
        cases += self.cut_files("tgz", self.tgz, random_offsets(20, len(self.tgz), self.rng), len(self.tgz))
        zip_cuts = sorted(set(self.zip_cuts + random_offsets(20, len(self.zip), self.rng)))
        cases += self.cut_files("zip", self.zip, zip_cuts, len(self.zip))
        cases.append(Case("whole tar", len(self.tar), [self.file("full.tar")], False))
        cases.append(Case("whole zip", len(self.zip), [self.file("full.zip")], False))
        self.sweep(cases)

    def test_folder_members_cut_anywhere(self):
        # A folder's files are its members: a label file cut anywhere does not parse, and an
        # image cut anywhere does not decode (the default format decodes it).
        cases = []
        name, label = MEMBERS[-1]
        for cut in range(len(label)):
            root = self.file(f"folder-json-{cut}")
            fx.write_tree(root, MEMBERS[:-1] + [(name, label[:cut])])
            cases.append(Case("folder, its last label cut", cut, [root], True))
        name, image = MEMBERS[0]
        for cut in random_offsets(10, len(image), self.rng):
            root = self.file(f"folder-png-{cut}")
            fx.write_tree(root, [(name, image[:cut])] + MEMBERS[1:])
            cases.append(Case("folder, its first image cut", cut, [root], True, flags=["--format", "png"]))
        root = self.file("folder-whole")
        fx.write_tree(root, MEMBERS)
        cases.append(Case("whole folder", 0, [root], False))
        self.sweep(cases)

    def test_pipes_cut_anywhere(self):
        cases = []
        for kind, name, cuts, end in (
                ("pipe: tar", "full.tar", self.tar_cuts(10), self.tar_end),
                ("pipe: tar.gz", "full.tar.gz", random_offsets(6, len(self.tgz), self.rng) + [len(self.tgz)], len(self.tgz)),
                ("pipe: zip", "full.zip", sorted(set(self.zip_cuts + random_offsets(8, len(self.zip), self.rng))) + [len(self.zip)], len(self.zip))):
            for cut in cuts:
                cases.append(Case(kind, cut, [f"pipe:head -c {cut} {self.file(name)}"], cut < end))
        self.sweep(cases)

    def test_http_cut_anywhere(self):
        cases = []
        for mode in ("cut", "nohead"):
            for cut in self.tar_cuts(8):
                # without HEAD the tar's own end is all that tells
                cases.append(Case(f"http {mode} tar", cut, [f"{self.url}/{mode}/{cut}/x.tar"], cut < self.tar_end))
            for cut in sorted(set(self.zip_cuts + random_offsets(6, len(self.zip), self.rng))):
                cases.append(Case(f"http {mode} zip", cut, [f"{self.url}/{mode}/{cut}/x.zip"], True))
        for cut in random_offsets(6, len(self.tgz), self.rng):
            cases.append(Case("http cut tar.gz", cut, [f"{self.url}/cut/{cut}/x.tar.gz"], True))
        cases.append(Case("http whole tar", 0, [f"{self.url}/full/x.tar"], False))
        cases.append(Case("http whole zip", 0, [f"{self.url}/full/x.zip"], False))
        self.sweep(cases)

    def test_remote_table_cut_anywhere(self):
        # A table whose GET gives less than its HEAD said: rows would be missing.
        cases = []
        keys = [f"{k}/{i}" for i, k in enumerate(KEYS)]  # an image's path and its row
        for cut in sorted(set(self.table_rows + random_offsets(10, len(self.table), self.rng))):
            cases.append(Case("http cut table", cut, [self.file("full.tar")], True,
                              flags=["--table", f"{self.url}/cut/{cut}/t.csv"], keys=keys))
        cases.append(Case("http whole table", 0, [self.file("full.tar")], False,
                          flags=["--table", f"{self.url}/full/t.csv"], keys=keys))
        self.sweep(cases)

    # ------------------------------------------------------------ the regression tests

    def test_tar_cut_at_member_boundary_fails(self):
        # Cut after the fourth member's data (what `head -c`, an interrupted download or copy
        # leaves): libarchive takes the end of the bytes for the archive's end.
        cut = self.tar_heads[4]
        path = self.file("boundary.tar")
        with open(path, "wb") as f:
            f.write(self.tar[:cut])
        p, out = self.convert([path])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"archive '{path}': truncated: the tar ends after member 'd/0001.json' "
                      f"at byte {cut} without its end-of-archive blocks", p.stderr)
        self.assertIn(f"{cut} byte(s) read", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))
        # under --on-error skip: the two samples read, and the input's error in the manifest
        p, out = self.convert([path], "--on-error", "skip")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(out, "manifest.json")) as f:
            skipped = json.load(f)["skipped"]
        self.assertEqual([(s["archive"], s["code"]) for s in skipped], [(path, "input_error")])
        self.assertIn("without its end-of-archive blocks", skipped[0]["reason"])
        tensors, _ = st_reader.load(os.path.join(out, "labels.safetensors"))
        self.assertEqual(sorted(st_reader.keys(tensors)), KEYS[:2])
        # the same cut through a pipe, and over http with a HEAD that says the whole tar
        p, _ = self.convert([f"pipe:head -c {cut} {self.file('full.tar')}"])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("without its end-of-archive blocks", p.stderr)
        url = f"{self.url}/cut/{cut}/x.tar"
        p, _ = self.convert([url])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"cannot read '{url}': its GET answers {cut} byte(s), its listing or HEAD "
                      f"said {len(self.tar)}", p.stderr)

    def test_remote_table_shorter_than_its_head_fails(self):
        cut = self.table_rows[1]
        url = f"{self.url}/cut/{cut}/t.csv"
        p, out = self.convert([self.file("full.tar")], "--table", url)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"--table: cannot read '{url}': its GET answers {cut} byte(s), its listing "
                      f"or HEAD said {len(self.table)}", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))

    def test_dot_segments_one_key(self):
        # `./d/./x.png` and `d/x.png` extract to one path: one key, so the duplicate rule holds
        png, label = tiny_png(7), fx.js({"label": 7})
        members = [("./d/./x.png", png), ("d//x.json", label), ("d/x.png", png)]
        path = self.file("dots.tar")
        fx.write_tar(path, members)
        p, _ = self.convert([path])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("d/x.png", p.stderr)
        p, out = self.convert([path], "--on-duplicate", "last")
        self.assertEqual(p.returncode, 0, p.stderr)
        tensors, _ = st_reader.load(os.path.join(out, "labels.safetensors"))
        self.assertEqual(st_reader.keys(tensors), ["d/x"])
        names = []
        for shard in sorted(n for n in os.listdir(out) if n.endswith(".tar")):
            with tarfile.open(os.path.join(out, shard)) as t:
                names += t.getnames()
        self.assertEqual(names, ["d/x.png"])  # one image (the label is in the annotation file)
        # the same names in a zip
        zpath = self.file("dots.zip")
        with zipfile.ZipFile(zpath, "w") as z:
            for name, data in members:
                z.writestr(name, data)
        p, _ = self.convert([zpath])
        self.assertEqual(p.returncode, 1, p.stderr)
        p, out = self.convert([zpath], "--on-duplicate", "last")
        self.assertEqual(p.returncode, 0, p.stderr)
        tensors, _ = st_reader.load(os.path.join(out, "labels.safetensors"))
        self.assertEqual(st_reader.keys(tensors), ["d/x"])

    def test_fifo_in_folder_listed(self):
        root = self.file("with-fifo")
        fx.write_tree(root, MEMBERS)
        os.mkfifo(os.path.join(root, "d", "0003.png"))
        p, out = self.convert([root])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(out, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual([(i["input"], i["member"], i["code"]) for i in manifest["ignored"]],
                         [(root, "d/0003.png", "not_regular_file")])
        self.assertEqual(manifest["counts"]["ignored_members"], 1)
        # as a tar lists it
        tpath = self.file("with-fifo.tar")
        subprocess.run(["tar", "-c", "-f", tpath, "-C", root, "d"], check=True)
        p, out = self.convert([tpath])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(out, "manifest.json")) as f:
            ignored = json.load(f)["ignored"]
        self.assertEqual([(i["member"], i["code"]) for i in ignored], [("d/0003.png", "not_regular_file")])


class S3Truncation(SweepCase):
    """The sweep of s3:// objects: cut objects uploaded to the real server (the listing and
    HEAD say the cut size, so the archive's own end is all that tells)."""

    @classmethod
    def build(cls):
        super().build()
        s3l.start_server(cls)
        cls.s3.create_bucket(Bucket=BUCKET)

    def test_s3_cut_anywhere(self):
        cases = []
        for kind, data, cuts, end in (
                ("tar", self.tar, self.tar_cuts(5), self.tar_end),
                ("zip", self.zip, sorted(set(self.zip_cuts + random_offsets(4, len(self.zip), self.rng))), len(self.zip))):
            for cut in cuts + [len(data)]:
                key = f"cut/{kind}-{cut}.{kind}"
                self.s3.put_object(Bucket=BUCKET, Key=key, Body=data[:cut])
                cases.append(Case(f"s3 {kind}", cut, [f"s3://{BUCKET}/{key}"], cut < end, env=self.env))
        self.sweep(cases)


if __name__ == "__main__":
    unittest.main()
