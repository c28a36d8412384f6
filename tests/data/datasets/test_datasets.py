"""The checked-in fixture datasets (tests/data/datasets): make_datasets.py still writes exactly
these bytes, and their values are what the C++ tests expect, read back with the e2e suite's
independent safetensors reader (tests/e2e/st_reader.py), numpy, zlib and OpenCV -- no tarmac.

Run with Debian's python3 (numpy, cv2): /usr/bin/python3 test_datasets.py
"""
import filecmp
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "read"))
import make_fixture  # noqa: E402  (the reader tests' pixels: tests/read/make_fixture.py)
import st_reader  # noqa: E402

# (directory, samples, key prefix, float scores, images): what the C++ tests read.
PARTS = [("s12", 12, "s", False, True), ("s10", 10, "s", False, True), ("s6", 6, "s", False, True),
         ("s5", 5, "s", False, True), ("a", 5, "a", False, True), ("b", 4, "b", True, True),
         ("a1", 1, "a", False, True), ("b2", 2, "b", False, True), ("k1", 3, "k", False, True),
         ("k2", 3, "k", False, True), ("c", 2, "c", False, False), ("la", 2, "a", False, False),
         ("lb", 3, "b", False, False)]
DATASETS = ["read12", "raw3", "sheet2"] + ["parts/" + p[0] for p in PARTS]
SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "U16": 2, "I16": 2, "F16": 2, "BF16": 2, "U32": 4, "I32": 4,
         "F32": 4, "U64": 8, "I64": 8, "F64": 8}
KINDS = ("shard", "offset", "size", "crc32", "width", "height")


def crc(data):
    return "%08x" % (zlib.crc32(data) & 0xFFFFFFFF)


def read(path):
    with open(path, "rb") as f:
        return f.read()


class Dataset:
    def __init__(self, rel):
        self.dir = os.path.join(HERE, rel)
        self.cols, self.meta = st_reader.load(os.path.join(self.dir, "labels.safetensors"))
        self.n = int(self.meta["num_samples"])
        self.schema = json.loads(self.meta["schema"])
        self.shards = json.loads(self.meta["shards"])
        self.blobs = json.loads(self.meta["blobs"])
        with open(os.path.join(self.dir, "manifest.json"), "rb") as f:
            self.manifest_text = f.read()
        self.manifest = json.loads(self.manifest_text)

    def keys(self):
        return st_reader.keys(self.cols)

    def blob(self, kind, i):
        c = self.cols
        data = read(os.path.join(self.dir, self.shards[c[kind + ".shard"][i]]))
        o = int(c[kind + ".offset"][i])
        return data[o:o + int(c[kind + ".size"][i])]


class Bytes(unittest.TestCase):
    def test_script_writes_the_checked_in_bytes(self):
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, os.path.join(HERE, "make_datasets.py"), tmp], check=True)
            for rel in DATASETS + ["read12_columns"]:
                a, b = os.path.join(HERE, rel), os.path.join(tmp, rel)
                self.assertEqual(sorted(os.listdir(a)), sorted(os.listdir(b)), rel)
                _, mismatch, errors = filecmp.cmpfiles(a, b, os.listdir(a), shallow=False)
                self.assertEqual((mismatch, errors), ([], []),
                                 f"{rel}: make_datasets.py and the checked-in bytes differ; "
                                 "re-run it and check the diff in")
            self.assertEqual(sorted(os.listdir(os.path.join(tmp, "parts"))),
                             sorted(os.listdir(os.path.join(HERE, "parts"))))


class Format(unittest.TestCase):
    """What docs/format.md promises, on every dataset."""

    def test_layout_metadata_blobs_and_manifest(self):
        for rel in DATASETS:
            with self.subTest(rel):
                ds = Dataset(rel)
                path = os.path.join(ds.dir, "labels.safetensors")
                buf = read(path)
                (n,) = struct.unpack_from("<Q", buf, 0)
                self.assertEqual((8 + n) % 8, 0)
                header = json.loads(buf[8:8 + n])
                text = buf[8:8 + n].rstrip(b" ")  # the JSON, then fewer than 8 spaces
                self.assertTrue(text.endswith(b"}") and n - len(text) < 8)
                self.assertEqual(next(iter(header)), "__metadata__")
                names = [k for k in header if k != "__metadata__"]
                # in file order: largest element size first, then by name
                self.assertEqual(names, sorted(names, key=lambda k: (-SIZES[header[k]["dtype"]], k)))
                self.assertEqual([header[k]["data_offsets"][0] for k in names],
                                 sorted(header[k]["data_offsets"][0] for k in names))
                expected_meta = {"format", "num_samples", "schema", "shards", "blobs", "tool"}
                if rel == "raw3":
                    expected_meta.add("blob_encodings")
                self.assertEqual(set(ds.meta), expected_meta)
                self.assertEqual(ds.meta["format"], "tarmac/1")
                self.assertEqual(len(ds.keys()), ds.n)
                self.assertEqual(len(set(ds.keys())), ds.n)
                # shards: exactly the listed tar files, each a plain tar
                self.assertEqual(sorted(f for f in os.listdir(ds.dir) if f.endswith(".tar")),
                                 ds.shards)
                for s in ds.shards:
                    data = read(os.path.join(ds.dir, s))
                    self.assertEqual(data[-1024:], bytes(1024))
                    self.assertEqual(len(data) % 512, 0)
                # blobs: each is its tar member's data, with its CRC-32
                image_bytes = 0
                for kind in ds.blobs:
                    for i in range(ds.n):
                        b = ds.blob(kind, i)
                        self.assertEqual(zlib.crc32(b), int(ds.cols[kind + ".crc32"][i]))
                        image_bytes += len(b)
                        data = read(os.path.join(ds.dir, ds.shards[ds.cols[kind + ".shard"][i]]))
                        head = data[int(ds.cols[kind + ".offset"][i]) - 512:][:512]
                        name = head[:100].rstrip(b"\0").decode()
                        self.assertTrue(name.startswith(ds.keys()[i] + "."), name)
                        self.assertEqual(int(head[124:135], 8), len(b))
                if ds.blobs:
                    self.assertEqual(ds.cols["__affine__"].shape, (ds.n, 2, 3))
                    np.testing.assert_array_equal(ds.cols["__affine__"],
                                                  np.tile([[1.0, 0, 0], [0, 1.0, 0]], (ds.n, 1, 1)))
                else:
                    self.assertFalse([k for k in ds.cols if k.startswith("__image__") or k == "__affine__"])
                    self.assertEqual(ds.shards, [])
                # manifest: counts, checksums, schema, and its seal
                m = ds.manifest
                self.assertEqual(m["counts"]["samples"], ds.n)
                self.assertEqual(m["counts"]["shards"], len(ds.shards))
                self.assertEqual(m["counts"]["image_bytes"], image_bytes)
                self.assertEqual(m["labels_crc32"], crc(buf))
                self.assertEqual(m["annotation"], {"name": "labels.safetensors", "size": len(buf)})
                self.assertEqual(m["shards"], [{"name": s, "size": os.path.getsize(os.path.join(ds.dir, s)),
                                                "crc32": crc(read(os.path.join(ds.dir, s)))}
                                               for s in ds.shards])
                self.assertEqual(m["schema"], ds.schema)
                self.assertEqual(list(m)[-1], "manifest_crc32")
                text = ds.manifest_text.decode()
                field = '"manifest_crc32": "%s"' % m["manifest_crc32"]
                at = text.rindex(field) + len(field) - 9
                self.assertEqual(crc((text[:at] + "00000000" + text[at + 8:]).encode()),
                                 m["manifest_crc32"])


class Values(unittest.TestCase):
    def test_read12(self):
        ds = Dataset("read12")
        self.assertEqual(ds.n, 12)
        self.assertEqual(ds.keys(), ["s/%04d" % k for k in range(12)])
        self.assertEqual(list(ds.schema), ["id", "vec", "name", "pts", "cls"])
        self.assertEqual(ds.schema["pts"], {"kind": "numeric", "dtype": "I64", "shape": [-1, 2],
                                            "ragged": True, "source": "json"})
        self.assertEqual(ds.schema["cls"]["source"], "cls")
        self.assertEqual(ds.blobs, ["__image__", "__depth__"])
        self.assertEqual(len(ds.shards), 4)
        c = ds.cols
        for k in range(12):
            lab = make_fixture.labels(k)
            self.assertEqual(c["id"][k], k)
            np.testing.assert_array_equal(c["vec"][k], lab["vec"])
            self.assertEqual(c["vec"].dtype, np.float64)
            self.assertEqual(st_reader.string(c, "name", k), lab["name"])
            np.testing.assert_array_equal(st_reader.ragged(c, "pts", k), lab["pts"])
            self.assertEqual(c["cls"][k], k % 5)
            img = cv2.imdecode(np.frombuffer(ds.blob("__image__", k), np.uint8), cv2.IMREAD_UNCHANGED)
            np.testing.assert_array_equal(cv2.cvtColor(img, cv2.COLOR_BGR2RGB), make_fixture.expected_pixel(k))
            depth = cv2.imdecode(np.frombuffer(ds.blob("__depth__", k), np.uint8), cv2.IMREAD_UNCHANGED)
            self.assertEqual(depth.dtype, np.uint16)
            np.testing.assert_array_equal(depth, make_fixture.depth(k))
            for kind in ds.blobs:
                self.assertEqual((c[kind + ".width"][k], c[kind + ".height"][k]), (32, 24))
        self.assertEqual(c["__image__.shard"].tolist(), [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3])

    def test_read12_columns(self):
        """format.md 9, read as its numpy example reads it."""
        with open(os.path.join(HERE, "read12", "manifest.json")) as f:
            labels_crc = json.load(f)["labels_crc32"]
        for name, want, uniform in (("emb", lambda k: np.array([k, 2 * k, -k], np.float32), True),
                                    ("lat", lambda k: (100 * k + np.arange(2 * (1 + k % 3))).reshape(2, -1), False),
                                    ("old", lambda k: np.array([k, 2 * k, -k], np.float32), True)):
            t, meta = st_reader.load(os.path.join(HERE, "read12_columns", name + ".safetensors"))
            self.assertEqual(sorted(t), ["offsets", "shapes", "values"])
            self.assertEqual((meta["format"], meta["column"], meta["num_samples"]), ("tarmac-column/1", name, "12"))
            self.assertEqual(meta["labels_crc32"] == labels_crc, name != "old")
            for tensor in ("values", "offsets", "shapes"):
                self.assertEqual(meta[tensor + "_crc32"], "%08x" % zlib.crc32(t[tensor].tobytes()))
            v, o, sh = t["values"], t["offsets"], t["shapes"]
            self.assertEqual(v.ndim == 2, uniform)
            for k in range(12):
                np.testing.assert_array_equal(v.reshape(-1)[o[k]:o[k + 1]].reshape(sh[k]), want(k))

    def test_parts(self):
        for name, n, prefix, float_scores, images in PARTS:
            with self.subTest(name):
                ds = Dataset("parts/" + name)
                c = ds.cols
                self.assertEqual(ds.keys(), ["%s/%03d" % (prefix, i) for i in range(n)])
                self.assertEqual(list(ds.schema), ["cls", "score", "pts", "name"])
                self.assertEqual(ds.schema["score"]["dtype"], "F64" if float_scores else "I64")
                self.assertEqual(ds.schema["pts"]["ragged"], n > 1)
                self.assertEqual(ds.blobs, ["__image__"] if images else [])
                for i in range(n):
                    self.assertEqual(c["cls"][i], i)
                    self.assertEqual(c["score"][i], i + 0.5 if float_scores else i)
                    self.assertEqual(st_reader.string(c, "name", i), "n%d" % i)
                    pts = st_reader.ragged(c, "pts", i) if n > 1 else c["pts"][i]
                    np.testing.assert_array_equal(pts, [[1.5, 2]] * (i % 3 + 1))
                    if images:
                        img = cv2.imdecode(np.frombuffer(ds.blob("__image__", i), np.uint8),
                                           cv2.IMREAD_UNCHANGED)
                        want = np.empty((12 + i % 5, 16, 3), np.uint8)
                        want[...] = (i * 7 % 255, 40, 200 - i)  # BGR, as make_dataset drew it
                        np.testing.assert_array_equal(img, want)
                        self.assertEqual((c["__image__.width"][i], c["__image__.height"][i]),
                                         (16, 12 + i % 5))
                if images:  # shard_size 4096: several shards of at most 4 KiB
                    self.assertEqual(len(ds.shards), (n + 2) // 3)
                    for s in ds.shards:
                        self.assertLessEqual(os.path.getsize(os.path.join(ds.dir, s)), 4096)

    def test_raw3(self):
        ds = Dataset("raw3")
        self.assertEqual(json.loads(ds.meta["blob_encodings"]), {"__image__": "rgb"})
        self.assertEqual(ds.keys(), ["r/0", "r/1", "r/2"])
        self.assertEqual(len(ds.shards), 1)
        self.assertEqual(ds.schema, {"v": {"kind": "numeric", "dtype": "F32", "shape": [2],
                                           "ragged": False, "source": "v.npy"}})
        for k in range(3):
            w, h = int(ds.cols["__image__.width"][k]), int(ds.cols["__image__.height"][k])
            self.assertEqual((w, h), (4, 3))
            want = (np.arange(36).reshape(3, 4, 3) * 5 + 50 * k).astype(np.uint8)
            self.assertEqual(ds.blob("__image__", k), want.tobytes())
            data = read(os.path.join(ds.dir, ds.shards[0]))
            head = data[int(ds.cols["__image__.offset"][k]) - 512:][:100]
            self.assertEqual(head.rstrip(b"\0"), b"r/%d.rgb" % k)
            self.assertEqual(ds.cols["v"].dtype, np.float32)
            np.testing.assert_array_equal(ds.cols["v"][k], [k + 0.25, -k])

    def test_sheet2(self):
        """What tests/preview/contact_sheet_test.cpp draws: uniform PNGs, a box and a point."""
        ds = Dataset("sheet2")
        self.assertEqual(ds.keys(), ["a", "b"])
        self.assertEqual(ds.schema, {
            "bb": {"kind": "numeric", "dtype": "F32", "shape": [4], "ragged": False, "source": "json"},
            "kp": {"kind": "numeric", "dtype": "F32", "shape": [1, 2], "ragged": False, "source": "json"}})
        for k, (w, rgb, bb, kp) in enumerate([(30, (10, 20, 30), [5, 4, 10, 8], [[22, 15]]),
                                              (10, (200, 100, 50), [100, 100, 1, 1], [[-50, -50]])]):
            png = np.frombuffer(ds.blob("__image__", k), np.uint8)
            bgr = cv2.imdecode(png, cv2.IMREAD_UNCHANGED)
            self.assertEqual(bgr.shape, (20, w, 3))
            self.assertTrue((bgr[..., ::-1] == rgb).all())
            self.assertEqual((int(ds.cols["__image__.width"][k]), int(ds.cols["__image__.height"][k])), (w, 20))
            np.testing.assert_array_equal(ds.cols["bb"][k], bb)
            np.testing.assert_array_equal(ds.cols["kp"][k], kp)


if __name__ == "__main__":
    unittest.main()
