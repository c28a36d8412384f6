"""`python -m tarmac.derive --reuse OLD_DIR[:NAME]` (issue #29 item 1): a dataset is converted,
derived and merged; a second version (10 % new images, 5 % removed, 2 captions changed) is
derived with --reuse. The oracles are independent of the code under test: FUNC appends the keys
of every sample it is called on to a file (the calls are counted, by key), and the merged column
is compared sample for sample with a from-scratch derive of the same version, both files read with
the tests' own safetensors reader (tests/e2e/st_reader.py); FUNC's outputs are also checked
against numpy on images decoded here with OpenCV from the shards' stored bytes.
Needs TARMAC_LIB, PYTHONPATH=python/ and TARMAC."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
import unittest
import unittest.mock
import zlib

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fixtures as fx  # noqa: E402
import st_reader  # noqa: E402

TARMAC = os.environ.get("TARMAC", "tarmac")

# FUNC: per sample, the image's mean of each channel and the caption's UTF-8 byte sum (float64
# [4]); every call appends the keys it got (looked up by the test through __index__) to $CALLS.
FUNCS = textwrap.dedent("""
    import os
    import numpy as np

    def stats(batch):
        img = np.asarray(batch["image"], dtype=np.float64)
        means = img.mean(axis=(1, 2))
        caps = np.array([sum(c.encode()) for c in batch["txt"]], dtype=np.float64)
        with open(os.environ["CALLS"], "a") as f:
            f.write(" ".join(str(int(i)) for i in np.asarray(batch["__index__"])) + "\\n")
        return np.concatenate([means, caps[:, None]], axis=1)
""")


def caption(i):
    return "a photo number %d of a café" % i


class DeriveReuseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-reuse-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        with open(os.path.join(cls.tmp, "funcs.py"), "w") as f:
            f.write(FUNCS)
        # Version 1: 40 images; version 2 drops 2 (5 %), adds 4 (10 %), changes 2 captions.
        sizes = [(48 + 8 * (i % 3), 40 + 8 * (i % 2)) for i in range(44)]
        cls.images = {"img%03d" % i: fx.png(fx.smooth_rgb(w, h, seed=i)) for i, (w, h) in enumerate(sizes)}
        v1 = ["img%03d" % i for i in range(40)]
        cls.removed = {"img007", "img023"}
        cls.added = {"img%03d" % i for i in range(40, 44)}
        cls.changed = {"img011", "img030"}
        v2 = [k for k in v1 if k not in cls.removed] + sorted(cls.added)
        cls.v1 = cls.convert("v1", {k: caption(int(k[3:])) for k in v1})
        cls.v2 = cls.convert("v2", {k: caption(int(k[3:])) + (" (fixed)" if k in cls.changed else "")
                                    for k in v2})

    @classmethod
    def convert(cls, name, captions):
        members = []
        for key, text in captions.items():
            members += [(key + ".png", cls.images[key]), (key + ".txt", text.encode())]
        archive = fx.write_tar(os.path.join(cls.tmp, name + ".tar"), members)
        out = os.path.join(cls.tmp, name)
        subprocess.run([TARMAC, "convert", "-q", archive, "-o", out, "--format", "png"], check=True)
        return out

    def derive(self, out, *args, expect=0):
        """Runs derive with $CALLS; returns (stderr, the keys FUNC was called on in order)."""
        calls = os.path.join(self.tmp, "calls.txt")
        if os.path.exists(calls):
            os.remove(calls)
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS")}
        env["CALLS"] = calls
        p = subprocess.run([sys.executable, "-m", "tarmac.derive", out, "--fn", "funcs:stats", "--fields", "txt",
                            "--batch-size", "4", *args], cwd=self.tmp, env=env, capture_output=True, timeout=120)
        self.assertEqual(p.returncode, expect, p.stderr.decode())
        keys = fx.Dataset(out).keys
        called = []
        if os.path.exists(calls):
            with open(calls) as f:
                called = [keys[int(i)] for line in f for i in line.split()]
        return p.stderr.decode(), called

    def merge(self, out, name):
        p = fx.run(["column", "merge", out, name])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        return st_reader.load(os.path.join(out, "columns", name + ".safetensors"))

    def derived(self, out, name, *args):
        """A fresh column: derived (all its samples), merged; returns its tensors and metadata."""
        _, called = self.derive(out, "--name", name, *args)
        self.assertEqual(sorted(called), sorted(fx.Dataset(out).keys))
        return self.merge(out, name)

    def test_reuse_calls_fn_only_for_new_and_changed_samples(self):
        old, old_meta = self.derived(self.v1, "stats")
        self.assertEqual(old["digest"].shape, (40, 16))
        self.assertEqual(old_meta["digest"], "blake2b-128/tarmac-derive-input-1")
        self.assertEqual(old_meta["reused"], "0")
        # FUNC's outputs, against numpy on the stored PNGs decoded by OpenCV.
        ds1 = fx.Dataset(self.v1)
        for i, key in enumerate(ds1.keys):
            rgb = cv2.cvtColor(cv2.imdecode(np.frombuffer(ds1.blob(i), np.uint8), cv2.IMREAD_COLOR),
                               cv2.COLOR_BGR2RGB)
            want = list(rgb.astype(np.float64).mean(axis=(0, 1))) + [float(sum(ds1.string("txt", i).encode()))]
            np.testing.assert_allclose(old["values"][i], want, rtol=1e-12)

        err, called = self.derive(self.v2, "--name", "stats", "--reuse", self.v1)
        self.assertEqual(sorted(called), sorted(self.added | self.changed))  # each exactly once
        self.assertIn("36 reused", err)
        got, got_meta = self.merge(self.v2, "stats")
        self.assertEqual(got_meta["reused"], "36")
        p = fx.run(["verify", self.v2])
        self.assertEqual(p.returncode, 0, p.stdout.decode() + p.stderr.decode())

        want, _ = self.derived(self.v2, "scratch")
        for t in ("values", "offsets", "shapes", "digest"):
            np.testing.assert_array_equal(got[t], want[t], err_msg=t)
        # The reused outputs are the old column's, by key.
        old_row = {k: i for i, k in enumerate(ds1.keys)}
        for i, key in enumerate(fx.Dataset(self.v2).keys):
            if key not in self.added | self.changed:
                np.testing.assert_array_equal(got["values"][i], old["values"][old_row[key]])
                np.testing.assert_array_equal(got["digest"][i], old["digest"][old_row[key]])

    def test_fn_version_changes_every_digest(self):
        self.derived(self.v1, "versioned", "--fn-version", "1")
        err, called = self.derive(self.v2, "--name", "versioned", "--fn-version", "2",
                                  "--reuse", self.v1 + ":versioned")
        self.assertEqual(sorted(called), sorted(fx.Dataset(self.v2).keys))
        self.assertIn("0 reused", err)
        _, meta = self.merge(self.v2, "versioned")
        self.assertEqual((meta["fn_version"], meta["reused"]), ("2", "0"))
        # verify checks the digests' CRC-32 like the other tensors': one flipped bit is named.
        path = os.path.join(self.v2, "columns", "versioned.safetensors")
        p = fx.run(["verify", self.v2])
        self.assertEqual(p.returncode, 0, p.stdout.decode() + p.stderr.decode())
        fx.flip_bit(path, 1)  # the digest tensor is the file's last
        p = fx.run(["verify", self.v2])
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("'digest' tensor", p.stdout.decode() + p.stderr.decode())
        fx.flip_bit(path, 1)

    def test_reuse_under_another_name_and_in_python(self):
        import tarmac.derive
        self.derived(self.v1, "named")
        calls = os.path.join(self.tmp, "calls_py.txt")
        os.environ["CALLS"] = calls
        sys.path.insert(0, self.tmp)
        r = tarmac.derive.run(self.v2, "renamed", "funcs:stats", batch_size=4, fields=["txt"], log=lambda m: None,
                              reuse=self.v1 + ":named")
        self.assertEqual((r["reused"], r["computed"], r["complete"]), (36, 6, True))
        keys = fx.Dataset(self.v2).keys
        with open(calls) as f:
            called = sorted(keys[int(i)] for line in f for i in line.split())
        self.assertEqual(called, sorted(self.added | self.changed))

    def test_reused_outputs_over_several_chunks(self):
        """The reused outputs are gathered from OLD's column a chunk at a time (a chunk ends with the
        output that brings it to _CHUNK_BYTES): with chunks of 4 outputs of 32 bytes, the 36 reused
        samples take 9 chunks; every chunk's size and CRC-32 in the part record are the file's, and
        every value is FUNC's, computed here with numpy on the PNGs decoded by OpenCV."""
        import tarmac.derive
        self.derived(self.v1, "small")
        os.environ["CALLS"] = os.path.join(self.tmp, "calls_chunks.txt")
        sys.path.insert(0, self.tmp)
        with unittest.mock.patch.object(tarmac.derive, "_CHUNK_BYTES", 3 * 32 + 1):
            r = tarmac.derive.run(self.v2, "chunked", "funcs:stats", batch_size=4, fields=["txt"],
                                  log=lambda m: None, reuse=self.v1 + ":small")
        self.assertEqual((r["reused"], r["computed"]), (36, 6))
        parts = os.path.join(self.v2, "columns", "chunked.parts")
        with open(os.path.join(parts, "part-00000-of-00001.json")) as f:
            record = json.load(f)
        self.assertEqual([c["samples"] for c in record["chunks"][:9]], [4] * 9)
        for c in record["chunks"]:
            with open(os.path.join(parts, c["file"]), "rb") as f:
                data = f.read()
            self.assertEqual((len(data), "%08x" % zlib.crc32(data)), (c["bytes"], c["crc32"]), c["file"])
        got, _ = self.merge(self.v2, "chunked")
        ds2 = fx.Dataset(self.v2)
        for i in range(len(ds2.keys)):
            rgb = cv2.cvtColor(cv2.imdecode(np.frombuffer(ds2.blob(i), np.uint8), cv2.IMREAD_COLOR),
                               cv2.COLOR_BGR2RGB)
            want = list(rgb.astype(np.float64).mean(axis=(0, 1))) + [float(sum(ds2.string("txt", i).encode()))]
            np.testing.assert_allclose(got["values"][i], want, rtol=1e-12, err_msg=ds2.keys[i])
            self.assertEqual(list(got["shapes"][i]), [4])

    def test_old_column_without_digests_and_unmerged_column(self):
        self.derived(self.v1, "plain")
        path = os.path.join(self.v1, "columns", "plain.safetensors")
        t, meta = st_reader.load(path)
        # A column as a tarmac from before --reuse wrote it: three tensors, no digest metadata.
        del meta["digest"], meta["digest_crc32"]
        old_dir = os.path.join(self.tmp, "old-format")
        shutil.copytree(self.v1, old_dir)
        with open(os.path.join(old_dir, "columns", "plain.safetensors"), "wb") as f:
            f.write(st_bytes([(k, t[k]) for k in ("values", "offsets", "shapes")], meta))
        err, called = self.derive(self.v2, "--name", "plain", "--reuse", old_dir, expect=1)
        self.assertIn("holds no input digests", err)
        self.assertIn("derive without --reuse", err)
        self.assertEqual(called, [])
        # It still opens in the reader.
        import tarmac
        np.testing.assert_array_equal(tarmac.Dataset(old_dir).column("plain"), t["values"])

        self.derive(self.v1, "--name", "unmerged")
        err, _ = self.derive(self.v2, "--name", "unmerged", "--reuse", self.v1, expect=1)
        self.assertIn("is not merged", err)
        self.assertIn("tarmac column merge", err)

    def test_reuse_of_damaged_column_refused(self):
        """Issue #35 item 5: --reuse copied OLD's outputs without checking them, so a byte flipped in
        OLD's column values (which `tarmac verify OLD` reports) reached NEW's column, which verify
        then passed. The oracle is the CRC-32 computed here with zlib over the tensor's bytes."""
        self.derived(self.v1, "tocheck")
        old_dir = os.path.join(self.tmp, "damaged-values")
        shutil.copytree(self.v1, old_dir)
        path = os.path.join(old_dir, "columns", "tocheck.safetensors")
        with open(path, "rb") as f:
            data = bytearray(f.read())
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
        b, e = header["values"]["data_offsets"]
        at = 8 + n + b + (e - b) // 2
        data[at] ^= 0x10
        with open(path, "wb") as f:
            f.write(data)
        crc = "%08x" % zlib.crc32(bytes(data[8 + n + b:8 + n + e]))
        self.assertNotEqual(crc, header["__metadata__"]["values_crc32"])
        self.assertNotEqual(fx.run(["verify", old_dir]).returncode, 0)

        err, called = self.derive(self.v2, "--name", "fromdamaged", "--reuse", old_dir + ":tocheck", expect=1)
        self.assertIn("column 'tocheck'", err)
        self.assertIn(path, err)
        self.assertIn(crc, err)
        self.assertIn("'values' tensor", err)
        self.assertEqual(called, [])
        self.assertFalse(os.path.exists(os.path.join(self.v2, "columns", "fromdamaged.parts")), err)
        p = fx.run(["verify", self.v2])
        self.assertEqual(p.returncode, 0, p.stdout.decode() + p.stderr.decode())

    def test_reuse_from_damaged_dataset_refused(self):
        """Item 5, the dataset half: OLD's annotation file no longer the one its manifest (and the
        column) records is refused; nothing is reused from a dataset verify fails."""
        self.derived(self.v1, "labelcheck")
        old_dir = os.path.join(self.tmp, "damaged-labels")
        shutil.copytree(self.v1, old_dir)
        labels = os.path.join(old_dir, "labels.safetensors")
        fx.flip_bit(labels, 1)
        with open(labels, "rb") as f:
            crc = "%08x" % zlib.crc32(f.read())
        with open(os.path.join(old_dir, "manifest.json")) as f:
            self.assertNotEqual(crc, json.load(f)["labels_crc32"])
        err, called = self.derive(self.v2, "--name", "fromdamaged2", "--reuse", old_dir + ":labelcheck", expect=1)
        self.assertIn(labels, err)
        self.assertIn(crc, err)
        self.assertEqual(called, [])


def st_bytes(tensors, metadata):
    """A safetensors file of [(name, array)] (F64 or I64), written here rather than by the package."""
    names = {np.dtype("<f8"): "F64", np.dtype("<i8"): "I64"}
    header, offset, data = {"__metadata__": metadata}, 0, b""
    for name, a in tensors:
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        data += a.tobytes()
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


if __name__ == "__main__":
    unittest.main()
