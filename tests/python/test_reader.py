"""The Python reader checked against an independent numpy parse of the annotation file
(tests/e2e/st_reader.py), OpenCV, and the generator's values. Run with /usr/bin/python3;
needs TARMAC_LIB, PYTHONPATH=python/ and TARMAC (the converter) in the environment."""
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import unittest

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "read"))
import make_fixture  # noqa: E402
import st_reader  # noqa: E402

import tarmac  # noqa: E402

TARMAC = os.environ.get("TARMAC", "tarmac")
N = 12


def convert(tmp, name, *flags, samples=N):
    src = os.path.join(tmp, name + ".tar")
    subprocess.run([sys.executable, os.path.join(HERE, "..", "read", "make_fixture.py"), src,
                    "--samples", str(samples)], check=True)
    out = os.path.join(tmp, name)
    subprocess.run([TARMAC, "convert", "-q", src, "-o", out, *flags], check=True, stdout=subprocess.DEVNULL)
    return out


def owner(a):
    """The object at the end of an array's .base chain."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


class ReaderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-py-")
        cls.png = convert(cls.tmp, "png", "--format", "png", "--dense", "depth.png", "--shard-size", "8K")
        cls.jpg = convert(cls.tmp, "jpg", "--format", "jpg", "--size", "40")
        cls.ds = tarmac.Dataset(cls.png)
        cls.cols, cls.meta = st_reader.load(os.path.join(cls.png, "labels.safetensors"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_values_match_independent_parse(self):
        ds, cols = self.ds, self.cols
        self.assertEqual(len(ds), N)
        self.assertEqual(ds.metadata["format"], "tarmac/1")
        for i in range(N):
            s = ds[i]
            self.assertEqual(s["__key__"], st_reader.string(cols, "__key__", i))
            self.assertEqual(s["__key__"], f"s/{i:04d}")
            self.assertEqual(s["name"], st_reader.string(cols, "name", i))
            np.testing.assert_array_equal(s["vec"], cols["vec"][i])
            np.testing.assert_array_equal(s["pts"], st_reader.ragged(cols, "pts", i))
            self.assertEqual(s["pts"].shape, (i % 3 + 1, 2))
            self.assertEqual(int(s["id"]), i)
            self.assertEqual(int(s["cls"]), i % 5)
            np.testing.assert_array_equal(s["__affine__"], cols["__affine__"][i])
            shard = self.meta["shards"].split('"')[1::2][cols["__image__.shard"][i]]
            with open(os.path.join(self.png, shard), "rb") as f:
                f.seek(int(cols["__image__.offset"][i]))
                self.assertEqual(s["image"].tobytes(), f.read(int(cols["__image__.size"][i])))
        np.testing.assert_array_equal(ds[-1]["id"], N - 1)
        with self.assertRaises(IndexError):
            ds[N]

    def test_public_accessors_that_tarmac_torch_uses(self):
        # stored_value, column("__image__.width") and closed replace Dataset's private members
        # that torch.py and loader.py called; checked against the independent safetensors reader.
        ds, cols = self.ds, self.cols
        for i in (0, 4, N - 1):
            np.testing.assert_array_equal(ds.stored_value("vec", i), cols["vec"][i])
            np.testing.assert_array_equal(ds.stored_value("pts", i), st_reader.ragged(cols, "pts", i))
            self.assertEqual(ds.stored_value("name", i), st_reader.string(cols, "name", i))
        np.testing.assert_array_equal(ds.column("__image__.width"), cols["__image__.width"])
        other = tarmac.Dataset(self.png)
        self.assertFalse(other.closed)
        other.close()
        self.assertTrue(other.closed)

    def test_zero_copy(self):
        ds = self.ds
        col = ds.column("vec")
        self.assertTrue(np.shares_memory(col, ds[3]["vec"]))
        self.assertEqual(col.ctypes.data + 3 * 24, ds.value("vec", 3).ctypes.data)
        values, offsets = ds.column("pts")
        self.assertTrue(np.shares_memory(values, ds.value("pts", 4)))
        np.testing.assert_array_equal(offsets, self.cols["pts.offsets"])
        img = ds.image(2)
        self.assertTrue(np.shares_memory(img, ds.image(2)))
        self.assertFalse(img.flags.writeable)
        self.assertTrue(hasattr(owner(img), "_tarmac_handle"))
        # A view outlives the Dataset object that made it: the base chain holds the maps.
        other = tarmac.Dataset(self.png)
        v = other.column("id")
        del other
        np.testing.assert_array_equal(v, np.arange(N))

    def test_decode_matches_generator_and_cv2(self):
        for i in (0, 5, 11):
            np.testing.assert_array_equal(self.ds.decode(i), make_fixture.expected_pixel(i))
        jds = tarmac.Dataset(self.jpg)
        for i in (0, 7):
            ref = cv2.cvtColor(cv2.imdecode(jds.image(i), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
            got = jds.decode(i)
            self.assertEqual(got.shape, ref.shape)
            self.assertLessEqual(int(np.abs(got.astype(int) - ref).max()), 1)

    def test_batch_equals_stacked_decode(self):
        idx = [4, 0, 9, 4]
        images, labels = self.ds.batch(idx)
        np.testing.assert_array_equal(images, np.stack([self.ds.decode(i) for i in idx]))
        self.assertEqual(set(labels), {"id", "vec", "cls", "__affine__"})
        np.testing.assert_array_equal(labels["vec"], self.cols["vec"][idx])
        np.testing.assert_array_equal(labels["__affine__"], self.cols["__affine__"][idx])
        # A ragged field comes as a list of its samples' slices (#38: strings and ragged fields in batches).
        _, ragged = self.ds.batch([2, 0], fields=["pts", "name"])
        self.assertEqual(len(ragged["pts"]), 2)
        for got, i in zip(ragged["pts"], (2, 0)):
            np.testing.assert_array_equal(got, self.ds.value("pts", i))
        self.assertEqual(ragged["name"], [self.ds.value("name", 2), self.ds.value("name", 0)])
        with self.assertRaises(tarmac.TarmacError):
            self.ds.batch([0, 1], size=(16, 16))
        small, _ = self.ds.batch([0, 1], size=(16, 16), resize=True, fields=[])
        self.assertEqual(small.shape, (2, 16, 16, 3))

    def test_errors(self):
        with self.assertRaises(tarmac.TarmacError) as e:
            tarmac.Dataset(os.path.join(self.tmp, "nope"))
        self.assertIn("nope", str(e.exception))
        with self.assertRaises(tarmac.TarmacError):
            self.ds.value("missing_field", 0)

    def test_sample_access_checks_what_the_library_checks(self):
        """ds[i] slices whole-column views in Python; a blob beyond its shard or ragged offsets
        out of range must still be a TarmacError (TARMAC_E_DATA, code 5) naming the sample,
        exactly where the library's own per-sample access raises it."""
        import json as js
        import struct
        bad = os.path.join(self.tmp, "patched")
        shutil.copytree(self.jpg, bad)
        path = os.path.join(bad, "labels.safetensors")
        with open(path, "r+b") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = js.loads(f.read(n))
            def patch(name, row, value):
                f.seek(8 + n + header[name]["data_offsets"][0] + 8 * row)
                f.write(struct.pack("<q", value))
            patch("__image__.offset", 2, 1 << 40)       # sample 2's image beyond its shard
            patch("__key__.offsets", 5, 1 << 40)        # sample 4 ends, sample 5 starts, past the keys
        ds = tarmac.Dataset(bad)
        for i, what in ((2, "beyond shard"), (4, "offsets"), (5, "offsets")):
            with self.assertRaises(tarmac.TarmacError) as e:
                ds[i]
            self.assertEqual(e.exception.code, 5, str(e.exception))
            self.assertIn("sample %d" % i, str(e.exception))
            self.assertIn(what, str(e.exception))
        with self.assertRaises(tarmac.TarmacError) as e:
            ds.blob(2)  # the library's own check says the same
        self.assertEqual(e.exception.code, 5)
        self.assertEqual(ds[3]["__key__"], self.cols_key(3))  # the others still read

    def test_text_that_is_not_utf8_is_a_tarmac_error(self):
        """A key or string value whose bytes are not UTF-8 (a folder input once let such a name
        through) is TarmacError(TARMAC_E_DATA) naming the sample, from every way of reading it,
        never a UnicodeDecodeError; the other samples still read."""
        import json as js
        import struct
        bad = os.path.join(self.tmp, "not-utf8")
        shutil.copytree(self.jpg, bad)
        path = os.path.join(bad, "labels.safetensors")
        with open(path, "r+b") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = js.loads(f.read(n))

            def first_byte(field, row):  # where sample `row`'s text starts, from its offsets
                f.seek(8 + n + header[field + ".offsets"]["data_offsets"][0] + 8 * row)
                return 8 + n + header[field + ".values"]["data_offsets"][0] + struct.unpack("<q", f.read(8))[0]
            for field, row in (("__key__", 3), ("name", 7)):
                f.seek(first_byte(field, row))
                f.write(b"\xff")
        ds = tarmac.Dataset(bad)
        for i, field, read in ((3, "__key__", lambda: ds.key(3)), (3, "__key__", lambda: ds.key(-9)),
                               (3, "__key__", lambda: ds[3]), (7, "name", lambda: ds.value("name", 7)),
                               (7, "name", lambda: ds[7])):
            with self.subTest(sample=i, field=field):
                with self.assertRaises(tarmac.TarmacError) as e:
                    read()
                self.assertEqual(e.exception.code, 5, str(e.exception))
                self.assertIn("sample %d " % i, str(e.exception))
                self.assertIn("'%s'" % field, str(e.exception))
                self.assertIn("UTF-8", str(e.exception))
        self.assertEqual(ds.key(4), "s/0004")
        self.assertEqual((ds[4]["__key__"], ds[4]["name"]), ("s/0004", "name-4"))
        self.assertEqual(ds.value("name", 3), "name-3")

    def cols_key(self, i):
        cols, _ = st_reader.load(os.path.join(self.jpg, "labels.safetensors"))
        return st_reader.keys(cols)[i]

    def test_indices(self):
        n = 101
        for world in (1, 4):
            for drop in (False, True):
                shares = [tarmac.indices(n, r, world, seed=3, epoch=1, drop_last=drop) for r in range(world)]
                self.assertEqual(len({len(s) for s in shares}), 1)
                allidx = np.concatenate(shares)
                if drop:
                    self.assertEqual(len(set(allidx.tolist())), len(allidx))
                    self.assertEqual(len(allidx), n // world * world)
                else:
                    self.assertEqual(set(allidx.tolist()), set(range(n)))
        a = tarmac.indices(n, 0, 1, seed=3, epoch=0)
        np.testing.assert_array_equal(a, tarmac.indices(n, 0, 1, seed=3, epoch=0))
        self.assertFalse(np.array_equal(a, tarmac.indices(n, 0, 1, seed=3, epoch=1)))
        np.testing.assert_array_equal(tarmac.indices(10, 0, 1, seed=0, epoch=0), [2, 3, 9, 0, 4, 1, 6, 5, 7, 8])
        self.assertEqual(len(self.ds.indices(rank=1, world=5)), 3)

    def test_pickle_reopens(self):
        ds2 = pickle.loads(pickle.dumps(self.ds))
        self.assertEqual(ds2[3]["__key__"], "s/0003")


class TorchTest(unittest.TestCase):
    def test_dataloader_with_workers(self):
        try:
            import torch
            import tarmac.torch as tt
        except ImportError:
            self.skipTest("torch is not installed")
        tmp = tempfile.mkdtemp(prefix="tarmac-torch-")
        try:
            path = convert(tmp, "ds", "--format", "png")
            ds = tt.TarmacDataset(path, fields=["id", "vec"])
            sampler = tt.ShardedSampler(len(ds), rank=0, world=2, seed=1)
            loader = torch.utils.data.DataLoader(ds, batch_size=3, sampler=sampler, num_workers=2)
            seen = []
            for b in loader:
                self.assertEqual(tuple(b["image"].shape[1:]), (3, 24, 32))
                torch.testing.assert_close(b["vec"][:, 0], b["id"].double() * 1.5)
                seen += b["id"].tolist()
            self.assertEqual(seen, tarmac.indices(N, 0, 2, seed=1).tolist())
            sampler.set_epoch(1)
            self.assertNotEqual(list(sampler), seen)
            self.assertEqual(len(sampler), N // 2)
        finally:
            shutil.rmtree(tmp)


    def test_batched_loader_matches_per_sample_loader_and_opencv(self):
        try:
            import torch
            import tarmac.torch as tt
        except ImportError:
            self.skipTest("torch is not installed")
        tmp = tempfile.mkdtemp(prefix="tarmac-torch-")
        try:
            path = convert(tmp, "ds", "--format", "jpg", "--quality", "90")
            ds = tt.TarmacDataset(path, fields=["id", "vec", "__affine__"])
            raw = tarmac.Dataset(path)
            for workers in (0, 2):
                sampler = tt.ShardedSampler(len(ds), rank=1, world=2, seed=4)
                batches = torch.utils.data.BatchSampler(sampler, batch_size=4, drop_last=False)
                loader = torch.utils.data.DataLoader(ds, batch_size=None, sampler=batches, num_workers=workers)
                per_sample = torch.utils.data.DataLoader(ds, batch_size=4, sampler=sampler, num_workers=0)
                count = 0
                for b, p in zip(loader, per_sample):
                    self.assertEqual(b["image"].dtype, torch.uint8)
                    self.assertEqual(tuple(b["image"].shape[1:]), (3, 24, 32))
                    self.assertTrue(torch.equal(b["image"], p["image"]))
                    for name in ("id", "vec", "__affine__", "__index__"):
                        self.assertTrue(torch.equal(b[name], p[name]), name)
                    self.assertEqual(b["__key__"], list(p["__key__"]))
                    for k, i in enumerate(b["__index__"].tolist()):  # pixels: OpenCV's decoder
                        bgr = cv2.imdecode(np.frombuffer(bytes(raw.image(i)), np.uint8), cv2.IMREAD_COLOR)
                        np.testing.assert_array_equal(b["image"][k].permute(1, 2, 0).numpy(), bgr[:, :, ::-1])
                    count += len(b["__key__"])
                self.assertEqual(count, len(sampler))
        finally:
            shutil.rmtree(tmp)

    def test_batch_into_caller_array(self):
        tmp = tempfile.mkdtemp(prefix="tarmac-out-")
        try:
            ds = tarmac.Dataset(convert(tmp, "ds", "--format", "jpg"))
            want, labels = ds.batch([3, 1, 2], fields=["id"])
            out = np.full((3, 24, 32, 3), 7, np.uint8)
            got, got_labels = ds.batch([3, 1, 2], fields=["id"], out=out)
            self.assertIs(got, out)
            np.testing.assert_array_equal(out, want)
            np.testing.assert_array_equal(got_labels["id"], labels["id"])
            for bad in (np.zeros((2, 24, 32, 3), np.uint8), np.zeros((3, 24, 32, 3), np.float32),
                        np.zeros((3, 32, 24, 3), np.uint8)[:, ::2], np.zeros((3, 24, 32, 3), np.uint8).T):
                with self.assertRaises(ValueError):
                    ds.batch([3, 1, 2], out=bad)
            with self.assertRaises(tarmac.TarmacError):  # a size the images do not have
                ds.batch([3, 1, 2], out=np.zeros((3, 20, 30, 3), np.uint8))
        finally:
            shutil.rmtree(tmp)


class BucketBatchesTest(unittest.TestCase):
    """tarmac.bucket_batches and tarmac.torch.BucketBatchSampler on a --resize bucket dataset."""

    SIZES = [(320, 200)] * 7 + [(200, 320)] * 5 + [(240, 240)] * 9 + [(400, 100)] * 3

    @classmethod
    def setUpClass(cls):
        import fixtures as fx
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-bucket-")
        members = []
        for i, (w, h) in enumerate(cls.SIZES):
            members += [("s%02d.png" % i, fx.png(fx.smooth_rgb(w, h, seed=i))), ("s%02d.cls" % i, str(i).encode())]
        src = fx.write_tar(os.path.join(cls.tmp, "mixed.tar"), members)
        cls.out = os.path.join(cls.tmp, "out")
        subprocess.run([TARMAC, "convert", "-q", src, "-o", cls.out, "--resize", "bucket", "--size", "128",
                        "--bucket-step", "32"], check=True, stdout=subprocess.DEVNULL)
        cls.ds = tarmac.Dataset(cls.out)
        t, _ = st_reader.load(os.path.join(cls.out, "labels.safetensors"))
        cls.size = {i: (int(t["__image__.width"][i]), int(t["__image__.height"][i])) for i in range(len(cls.SIZES))}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_batches_hold_one_size_and_cover_every_full_batch_once(self):
        per_size = {}
        for i, wh in self.size.items():
            per_size.setdefault(wh, []).append(i)
        self.assertEqual(len(per_size), 4)
        full = sum(len(v) // 4 * 4 for v in per_size.values())  # 4 + 4 + 8 + 0 = 16
        for world in (1, 2, 3):
            got = [tarmac.bucket_batches(self.ds, 4, r, world, seed=5, epoch=1) for r in range(world)]
            self.assertEqual(len({len(g) for g in got}), 1, "ranks must step in lockstep")
            flat = [int(i) for g in got for b in g for i in b]
            for b in (b for g in got for b in g):
                self.assertEqual(len(b), 4)
                self.assertEqual(len({self.size[int(i)] for i in b}), 1)
            self.assertEqual(len(flat), len(set(flat)))  # disjoint between ranks
            self.assertEqual(len(flat), full // 4 // world * world * 4)
        # one rank: every sample of a full batch exactly once
        self.assertEqual(sum(len(b) for b in tarmac.bucket_batches(self.ds, 4, seed=5)), full)
        # without drop_last: every sample at least once, small last batches allowed
        every = tarmac.bucket_batches(self.ds, 4, drop_last=False)
        self.assertEqual(sorted(int(i) for b in every for i in b), list(range(len(self.SIZES))))
        for b in every:
            self.assertEqual(len({self.size[int(i)] for i in b}), 1)

    def test_deterministic_per_epoch_and_stackable(self):
        a = tarmac.bucket_batches(self.ds, 4, seed=3, epoch=0)
        b = tarmac.bucket_batches(tarmac.Dataset(self.out), 4, seed=3, epoch=0)
        c = tarmac.bucket_batches(self.ds, 4, seed=3, epoch=1)
        self.assertEqual([x.tolist() for x in a], [x.tolist() for x in b])
        self.assertNotEqual([x.tolist() for x in a], [x.tolist() for x in c])
        for batch in a:
            images, _ = self.ds.batch(batch)
            w, h = self.size[int(batch[0])]
            self.assertEqual(images.shape, (4, h, w, 3))

    def test_torch_batch_sampler(self):
        try:
            import torch
            import tarmac.torch as tt
        except ImportError:
            self.skipTest("torch is not installed")
        sampler = tt.BucketBatchSampler(self.out, 4, rank=0, world=1, seed=1)
        loader = torch.utils.data.DataLoader(tt.TarmacDataset(self.out), batch_sampler=sampler, num_workers=2)
        seen = 0
        for batch in loader:
            self.assertEqual(batch["image"].shape[0], 4)
            seen += 4
        self.assertEqual(seen, 16)
        self.assertEqual(len(sampler), 4)


class CodecsPluginTest(unittest.TestCase):
    def test_jpeg_decodes_without_the_plugin_and_bmp_names_it(self):
        """libtarmac_c.so does not link OpenCV's imgcodecs: a JPEG dataset decodes with the plugin
        unreachable (a PNG one too: png_region.h); a BMP one (kept as it came) raises a
        TarmacError naming it (a fresh process, so that no earlier test has loaded the plugin
        already)."""
        import cv2
        import fixtures as fx
        tmp = tempfile.mkdtemp(prefix="tarmac-codecs-")
        try:
            rgb = fx.smooth_rgb(48, 36)
            outs = []
            for fmt, member in (("jpg", ("a.jpg", fx.jpg(rgb))),
                                ("keep", ("a.bmp", cv2.imencode(".bmp", rgb)[1].tobytes()))):
                src = fx.write_tar(os.path.join(tmp, fmt + ".tar"), [member, ("a.cls", b"1")])
                out = os.path.join(tmp, fmt)
                subprocess.run([TARMAC, "convert", "-q", src, "-o", out, "--format", fmt], check=True,
                               stdout=subprocess.DEVNULL)
                outs.append(out)
            code = ("import sys, tarmac\n"
                    "print(tarmac.Dataset(sys.argv[1]).decode(0).shape)\n"
                    "try:\n"
                    "    tarmac.Dataset(sys.argv[2]).decode(0)\n"
                    "except tarmac.TarmacError as e:\n"
                    "    print('ERROR', e.code, e)\n")
            env = dict(os.environ, TARMAC_OPENCV_CODECS=os.path.join(tmp, "none", "libtarmac_opencv_codecs.so"))
            p = subprocess.run([sys.executable, "-c", code, *outs], capture_output=True, text=True, env=env,
                               timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            lines = p.stdout.splitlines()
            self.assertEqual(lines[0], "(36, 48, 3)")
            self.assertTrue(lines[1].startswith("ERROR 3 "), lines)
            self.assertIn("cannot load libtarmac_opencv_codecs.so", lines[1])
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    unittest.main()
