"""End-to-end: the on-disk contract. The annotation file passes a strict safetensors reader,
shards are plain tar for every tool, the manifest tells the truth, `info` summarises."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402
import st_reader  # noqa: E402

N = 14


def st_bytes(tensors, meta=None, pad=0):
    """A safetensors file built by hand (for testing the reader): tensors = [(name, dtype, shape, bytes)]."""
    header, off, data = {}, 0, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data += raw
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8 + pad)
    return struct.pack("<Q", len(h)) + h + data


class StrictReaderSelfTest(unittest.TestCase):
    """The oracle must itself reject what the spec forbids, or the other tests prove little."""

    def load(self, raw):
        with tempfile.NamedTemporaryFile(suffix=".safetensors") as f:
            f.write(raw)
            f.flush()
            return st_reader.load(f.name)

    def test_accepts_valid(self):
        t, meta = self.load(st_bytes([("a", "F64", [2], struct.pack("<2d", 1.5, -2)),
                                      ("b", "U8", [3], b"xyz")], {"k": "v"}))
        self.assertEqual(t["a"].tolist(), [1.5, -2.0])
        self.assertEqual(bytes(t["b"]), b"xyz")
        self.assertEqual(meta, {"k": "v"})

    def test_rejects(self):
        ok = struct.pack("<2d", 1, 2)
        cases = {
            "hole": st_bytes([("a", "F64", [2], ok)]) + b"\0",
            "bad dtype": st_bytes([("a", "F128", [1], ok)]),
            "shape mismatch": st_bytes([("a", "F64", [3], ok)]),
            "misaligned": st_bytes([("b", "U8", [1], b"x"), ("a", "F64", [2], ok)]),
            "meta not str": st_bytes([("a", "F64", [2], ok)], {"n": 3}),
        }
        h = json.dumps({"a": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16], "extra": 1}}).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        cases["extra key"] = struct.pack("<Q", len(h)) + h + ok
        for name, raw in cases.items():
            with self.subTest(case=name):
                with self.assertRaises(ValueError):
                    self.load(raw)


def members(n=N):
    out = []
    for i in range(n):
        k = f"fmt/{i:04d}"
        out += [(k + ".png", fx.png(fx.smooth_rgb(72, 64, seed=i))),
                (k + ".depth.png", fx.png(fx.smooth_u16(72, 64, seed=i))),
                (k + ".json", fx.js({"id": i, "box": [1, 2, 3, 4], "name": "n" * i}))]
    return out


class DatasetFormatTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.archive = fx.write_tar(os.path.join(cls.tmp, "in.tar"), members())
        cls.args = [cls.archive, "--format", "png", "--dense", "depth.png", "--shard-size", "64K", "--json"]
        cls.proc, cls.ds = fx.convert(cls, *[cls.args[:1]], *cls.args[1:])
        cls.summary = json.loads(cls.proc.stdout)

    def test_header_and_alignment(self):
        path = os.path.join(self.ds.out, "labels.safetensors")
        with open(path, "rb") as f:
            raw = f.read()
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8:8 + n])
        self.assertEqual(raw[8:9], b"{")
        for name, t in header.items():
            if name == "__metadata__":
                continue
            size = np.dtype(st_reader.DTYPES[t["dtype"]]).itemsize
            self.assertEqual((8 + n + t["data_offsets"][0]) % size, 0, name)
        want = {"__key__.values": "U8", "__key__.offsets": "I64", "__affine__": "F64"}
        for blob in ("__image__", "__depth__"):
            want.update({blob + ".shard": "I32", blob + ".offset": "I64", blob + ".size": "I64",
                         blob + ".crc32": "U32", blob + ".width": "I32", blob + ".height": "I32"})
        for name, dt in want.items():
            self.assertEqual(header[name]["dtype"], dt, name)
        self.assertEqual(header["__key__.offsets"]["shape"], [N + 1])
        self.assertEqual(header["__affine__"]["shape"], [N, 2, 3])

    def test_metadata(self):
        meta = self.ds.meta
        self.assertEqual(meta["format"], "tarmac/1")
        self.assertEqual(meta["num_samples"], str(N))
        self.assertEqual(json.loads(meta["blobs"]), ["__image__", "__depth__"])
        self.assertEqual(self.ds.shards, ["shard-%06d.tar" % i for i in range(len(self.ds.shards))])
        self.assertEqual(self.ds.schema["id"], {"kind": "numeric", "dtype": "I64", "shape": [], "ragged": False,
                                                "source": "json"})
        self.assertEqual(self.ds.schema["name"]["shape"], [-1])
        self.assertEqual(self.ds.keys, [f"fmt/{i:04d}" for i in range(N)])
        self.assertEqual(self.ds.t["id"].tolist(), list(range(N)))

    def test_only_dataset_files(self):
        self.assertEqual(sorted(os.listdir(self.ds.out)),
                         sorted(["labels.safetensors", "manifest.json", "shardlist.json", *self.ds.shards]))

    def test_shards_bounded_and_samples_whole(self):
        self.assertGreater(len(self.ds.shards), 1)
        for s in self.ds.shards:
            self.assertLessEqual(os.path.getsize(os.path.join(self.ds.out, s)), 64 * 1024, s)
        np.testing.assert_array_equal(self.ds.t["__image__.shard"], self.ds.t["__depth__.shard"])
        self.assertTrue(np.all(np.diff(self.ds.t["__image__.shard"]) >= 0))

    def test_shards_are_plain_tar_for_every_tool(self):
        for s in self.ds.shards:
            path = os.path.join(self.ds.out, s)
            gnu = subprocess.run(["tar", "-tf", path], capture_output=True, check=True, text=True).stdout.split()
            bsd = subprocess.run(["bsdtar", "-tf", path], capture_output=True, check=True, text=True).stdout.split()
            with tarfile.open(path) as tf:
                py = tf.getnames()
                offsets = {m.name: (m.offset_data, m.size) for m in tf.getmembers()}
            self.assertEqual(gnu, py)
            self.assertEqual(bsd, py)
            idx = self.ds.shards.index(s)
            for i in np.nonzero(self.ds.t["__image__.shard"] == idx)[0]:
                k = self.ds.keys[i]
                self.assertEqual(offsets[k + ".png"], (int(self.ds.t["__image__.offset"][i]), int(self.ds.t["__image__.size"][i])))
                self.assertEqual(offsets[k + ".depth.png"], (int(self.ds.t["__depth__.offset"][i]), int(self.ds.t["__depth__.size"][i])))
        # GNU tar extracts the very bytes the annotation file points at
        dest = tempfile.mkdtemp(dir=self.tmp)
        subprocess.run(["tar", "-xf", os.path.join(self.ds.out, self.ds.shards[-1]), "-C", dest], check=True)
        i = N - 1
        with open(os.path.join(dest, self.ds.keys[i] + ".png"), "rb") as f:
            data = f.read()
        self.assertEqual(data, self.ds.blob(i))
        self.assertEqual(zlib.crc32(data), int(self.ds.t["__image__.crc32"][i]))
        np.testing.assert_array_equal(fx.decode_rgb(data), fx.smooth_rgb(72, 64, seed=i))

    def test_manifest(self):
        m = self.ds.manifest
        self.assertEqual(m["tool"]["name"], "tarmac")
        self.assertTrue(m["tool"]["version"])
        self.assertEqual(m["command_line"][1:], ["convert", self.archive, "-o", self.ds.out, *self.args[1:]])
        self.assertEqual(m["options"]["--format"], "png")
        self.assertEqual(m["options"]["--shard-size"], "64K")
        with open(self.archive, "rb") as f:
            raw = f.read()
        self.assertEqual(m["inputs"], [{"path": self.archive, "size": len(raw), "crc32": fx.crc_hex(raw),
                                        "members": 3 * N}])
        image_bytes = int(self.ds.t["__image__.size"].sum() + self.ds.t["__depth__.size"].sum())
        self.assertEqual(m["counts"], {"samples": N, "skipped_samples": 0, "skipped_members": 0, "input_errors": 0,
                                       "ignored_members": 0, "duplicates": 0, "no_instance_samples": 0,
                                       "duplicate_content_samples": 0,
                                       "unused_images": 0, "shards": len(self.ds.shards),
                                       "image_bytes": image_bytes})
        self.assertEqual(m["skipped"], [])
        self.assertEqual(m["ignored"], [])
        self.assertEqual(m["duplicates"], [])
        self.assertEqual(m["schema"], self.ds.schema)
        self.assertEqual([s["name"] for s in m["shards"]], self.ds.shards)
        for s in m["shards"]:
            self.assertEqual(s["size"], os.path.getsize(os.path.join(self.ds.out, s["name"])))

    def test_json_summary(self):
        s = self.summary
        self.assertEqual(s["samples"], N)
        self.assertEqual(s["skipped_samples"], 0)
        self.assertEqual(s["shards"], len(self.ds.shards))
        self.assertEqual(set(s["schema"]), set(self.ds.schema))
        self.assertEqual(s["image_bytes"], self.ds.manifest["counts"]["image_bytes"])
        self.assertEqual(s["annotation_bytes"], os.path.getsize(os.path.join(self.ds.out, "labels.safetensors")))

    # Regression: `convert --json` printed each field's "shape" as a string ("[4]", "[-1]");
    # it is a JSON array ([4], [-1]), as in the annotation file's schema, the manifest and
    # `info --json`.
    def test_json_summary_schema_matches_metadata(self):
        # the machine-readable summary describes fields exactly as the annotation file does
        self.assertEqual(self.summary["schema"], self.ds.schema)

    def test_info(self):
        r = fx.run(["info", self.ds.out])
        self.assertEqual(r.returncode, 0, r.stderr)
        text = r.stdout.decode()
        self.assertIn(str(N), text)
        self.assertIn("tarmac/1", text)
        r = fx.run(["info", "--json", self.ds.out])
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["samples"], N)
        self.assertEqual(j["format"], "tarmac/1")
        self.assertEqual(j["schema"], self.ds.schema)
        self.assertEqual([s["name"] for s in j["shards"]], self.ds.shards)
        self.assertTrue(all(s["present"] for s in j["shards"]))
        self.assertEqual(j["annotation_bytes"], os.path.getsize(os.path.join(self.ds.out, "labels.safetensors")))

    def test_info_on_non_dataset(self):
        empty = tempfile.mkdtemp(dir=self.tmp)
        r = fx.run(["info", empty])
        self.assertEqual(r.returncode, 1)
        self.assertIn(empty, r.stderr.decode())
        bad = tempfile.mkdtemp(dir=self.tmp)
        with open(os.path.join(bad, "labels.safetensors"), "wb") as f:
            f.write(struct.pack("<Q", 1 << 40) + b"{}")
        r = fx.run(["info", bad])
        self.assertEqual(r.returncode, 1)
        self.assertTrue(r.stderr)

    def test_info_missing_shard(self):
        copy = os.path.join(self.tmp, "copy")
        shutil.copytree(self.ds.out, copy)
        os.remove(os.path.join(copy, self.ds.shards[0]))
        r = fx.run(["info", copy])
        self.assertEqual(r.returncode, 1)
        self.assertIn("MISSING", r.stdout.decode())


class NoImagesTest(fx.TmpCase):
    def test_labels_only(self):
        p = fx.write_tar(self.path("l.tar"), members(3))
        _, ds = fx.convert(self, [p], "--no-images")
        self.assertEqual(ds.keys, ["fmt/0000", "fmt/0001", "fmt/0002"])
        self.assertEqual(json.loads(ds.meta["blobs"]), [])
        self.assertFalse([n for n in ds.t if n.startswith("__image__") or n == "__affine__"])
        self.assertEqual(ds.t["box"].tolist(), [[1, 2, 3, 4]] * 3)


if __name__ == "__main__":
    unittest.main()
