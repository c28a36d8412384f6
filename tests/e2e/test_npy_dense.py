"""End-to-end: .npy dense maps (`--dense depth.npy seg.npy`). The input is written with tarfile
and numpy; every stored map is read back with numpy alone (np.load of the shard's bytes, at the
place the independent safetensors reader gives) and compared bit for bit with a
nearest-neighbour warp computed here with cv2.warpAffine(INTER_NEAREST) from the crop geometry.
The Python package (ds.dense), `tarmac cat` and `tarmac verify --decode` are checked on the same
datasets."""
import io
import json
import os
import sys
import unittest

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

# (key, width, height): landscape, portrait, square.
SAMPLES = [("w/000000", 80, 60), ("w/000001", 50, 70), ("w/000002", 64, 64)]


def center_affine(w, h, out_w, out_h):
    """--crop center: the largest centred region with the output's aspect ratio, centred on the
    image's centre, (w - 1) / 2 in pixel-centre coordinates."""
    rw = min(w, h * out_w / out_h)
    rh = rw * out_h / out_w
    return fx.affine_region((w - rw) / 2 - 0.5, (h - rh) / 2 - 0.5, rw, rh, out_w, out_h)


def nearest(a, m, out_w, out_h):
    """cv2.warpAffine(INTER_NEAREST, zeros outside) of any dtype: types OpenCV cannot warp
    go through an integer view of their bytes of the same width (values are only moved)."""
    views = {np.dtype(np.float16): np.uint16, np.dtype(np.uint64): np.int32, np.dtype(np.int64): np.int32,
             np.dtype(np.uint32): np.int32, np.dtype(np.bool_): np.uint8}
    a = np.ascontiguousarray(a.astype(a.dtype.newbyteorder("=")))
    h, w = a.shape[:2]
    via = views.get(a.dtype)
    if via is None:
        planes = [a] if a.ndim == 2 else [a[:, :, c] for c in range(a.shape[2])]
    else:  # each element as 1 or 2 integers of its own bytes
        b = a.reshape(h, w, -1).view(via)
        planes = [b[:, :, c] for c in range(b.shape[2])]
    out = [cv2.warpAffine(np.ascontiguousarray(p), m, (out_w, out_h), flags=cv2.INTER_NEAREST,
                          borderMode=cv2.BORDER_CONSTANT, borderValue=0) for p in planes]
    o = np.stack(out, axis=2)
    if via is not None:
        o = np.ascontiguousarray(o).view(a.dtype)
    return o.reshape((out_h, out_w) + a.shape[2:])


def sample_maps(i, w, h):
    rng = np.random.default_rng(40 + i)
    depth = rng.uniform(0.5, 80, (h, w)).astype(np.float32)
    depth[rng.random((h, w)) < 0.1] = np.nan
    depth[h // 2, w // 2 - 3:w // 2 + 3] = np.inf
    depth[-1, -3:] = -np.inf
    seg = (rng.integers(-3, 200, (h, w))).astype(np.int32 if i != 1 else np.uint8)
    # H x W x 3 float16 in big-endian Fortran order: dtype, channels and values kept.
    normal = np.asfortranarray(rng.uniform(-1, 1, (h, w, 3)).astype(">f2"))
    # 64-bit ids above 2^53 (no double holds them).
    ids = (np.uint64(1) << np.uint64(60)) + np.arange(h * w, dtype=np.uint64).reshape(h, w) * np.uint64(3)
    mask = rng.random((h, w)) < 0.5
    return {"depth": depth, "seg": seg, "normal": normal, "ids": ids, "mask": mask}


def npy_of(a):
    b = io.BytesIO()
    np.save(b, a, allow_pickle=False)
    return b.getvalue()


class NpyDenseTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.maps, members = [], []
        for i, (key, w, h) in enumerate(SAMPLES):
            maps = sample_maps(i, w, h)
            cls.maps.append(maps)
            members += [(key + ".rgb.png", fx.png(fx.smooth_rgb(w, h, seed=i))),
                        (key + ".depth.npy", npy_of(maps["depth"])),
                        (key + ".seg.npy", npy_of(maps["seg"])),
                        (key + ".normal.npy", npy_of(maps["normal"])),
                        (key + ".ids.npy", npy_of(maps["ids"])),
                        (key + ".mask.npy", npy_of(maps["mask"])),
                        (key + ".pose.npy", npy_of(np.arange(6, dtype=np.float32) * i)),
                        (key + ".json", fx.js({"id": i}))]
        cls.archive = fx.write_tar(os.path.join(cls.tmp, "maps.tar"), members)
        cls.dense = ["depth.npy", "seg.npy", "normal.npy", "ids.npy", "mask.npy"]

    def convert(self, *flags):
        return fx.convert(self, [self.archive], "--image", "rgb.png", "--dense", *self.dense, *flags)

    def check_maps(self, ds, out_w, out_h):
        self.assertEqual(json.loads(ds.meta["blob_encodings"]),
                         {"__image__": "jpg", "__depth__": "npy", "__seg__": "npy", "__normal__": "npy",
                          "__ids__": "npy", "__mask__": "npy"})
        for i, (key, w, h) in enumerate(SAMPLES):
            m = center_affine(w, h, out_w, out_h)
            np.testing.assert_allclose(ds.affine(i), m, atol=1e-9)
            for name, src in self.maps[i].items():
                with self.subTest(key=key, map=name):
                    blob = ds.blob(i, f"__{name}__")
                    got = np.load(io.BytesIO(blob), allow_pickle=False)
                    want = nearest(src, m, out_w, out_h)
                    self.assertEqual(got.shape, want.shape)
                    self.assertEqual(got.dtype.newbyteorder("="), src.dtype.newbyteorder("="))
                    self.assertEqual(got.tobytes(), want.astype(got.dtype).tobytes())  # NaNs included
                    self.assertEqual((int(ds.t[f"__{name}__.width"][i]), int(ds.t[f"__{name}__.height"][i])),
                                     (out_w, out_h))
            self.assertEqual(ds.keys[i], key)
            np.testing.assert_array_equal(ds.t["pose"][i], np.arange(6, dtype=np.float32) * i)

    def test_center_square(self):
        _, ds = self.convert("--crop", "center", "--size", "64")
        self.check_maps(ds, 64, 64)
        # NaN and inf survive: the stored depth has NaNs where the warp put them.
        d = np.load(io.BytesIO(ds.blob(0, "__depth__")))
        self.assertTrue(np.isnan(d).any() and np.isinf(d).any())

    def test_non_square_resize(self):
        # 48x32 from 80x60 / 50x70 / 64x64: upscaled in one axis, downscaled in the other.
        _, ds = self.convert("--crop", "center", "--size", "48x32")
        self.check_maps(ds, 48, 32)

    def test_box_leaving_the_image_pads_with_zero(self):
        _, ds = self.convert("--crop", "box:-10,-6,40,30", "--size", "36x27")
        for i, (key, w, h) in enumerate(SAMPLES):
            m = fx.edge_region(-10, -6, 40, 30, 36, 27)
            for name, src in self.maps[i].items():
                got = np.load(io.BytesIO(ds.blob(i, f"__{name}__")))
                self.assertEqual(got.tobytes(), nearest(src, m, 36, 27).astype(got.dtype).tobytes())
                self.assertTrue((got[0].view(np.uint8) == 0).all(), "outside the source: zero bytes")

    def test_an_image_sized_npy_without_dense_is_warned_of_once(self):
        # Issue #25, 16f: without --dense, depth.npy is a label: stored uncropped beside a
        # cropped image, silently. One warning per field names it and the --dense flag.
        members = []
        for i in range(3):
            maps = sample_maps(i, 80, 60)
            members += [("u/%d.rgb.png" % i, fx.png(fx.smooth_rgb(80, 60, seed=i))),
                        ("u/%d.depth.npy" % i, npy_of(maps["depth"])),
                        ("u/%d.seg.npy" % i, npy_of(maps["seg"].astype(np.int32))),
                        ("u/%d.pose.npy" % i, npy_of(np.arange(6, dtype=np.float32) * i))]
        archive = fx.write_tar(os.path.join(self.tmp, "undense.tar"), members)
        p, ds = fx.convert(self, [archive], "--image", "rgb.png", "--dense", "seg.npy",
                           "--crop", "center", "--size", "32")
        err = p.stderr.decode(errors="replace")
        self.assertEqual(err.count("field 'depth'"), 1, err)  # three samples, one warning
        self.assertIn("--dense depth.npy", err)
        # A .npy of another shape is a label (its name warns as geometric-looking: #38).
        self.assertNotIn("field 'pose' (from", err)
        self.assertNotIn("field 'seg'", err)   # stored as a dense map
        # The label is the array as it was, uncropped (what the warning says).
        np.testing.assert_array_equal(np.asarray(ds.t["depth"][0]), sample_maps(0, 80, 60)["depth"])
        # Without a crop or resize nothing is out of step: no warning.
        p, _ = fx.convert(self, [archive], "--image", "rgb.png", "--dense", "seg.npy", "--format", "keep")
        self.assertNotIn("has the image's height and width", p.stderr.decode(errors="replace"))

    def test_no_transform_stores_the_array(self):
        _, ds = self.convert()
        for i, (key, w, h) in enumerate(SAMPLES):
            for name, src in self.maps[i].items():
                got = np.load(io.BytesIO(ds.blob(i, f"__{name}__")))
                self.assertEqual(got.tobytes(), np.ascontiguousarray(src).astype(got.dtype).tobytes())
                self.assertTrue(got.dtype.byteorder in "<|=" and got.flags.c_contiguous)

    def test_reader_cat_verify(self):
        p, ds = self.convert("--crop", "center", "--size", "40")
        out = ds.out
        self.assertEqual(fx.run(["verify", out, "--decode"]).returncode, 0)
        cat = fx.run(["cat", out, SAMPLES[1][0], "--dense", "depth"])
        self.assertEqual(cat.returncode, 0)
        self.assertEqual(cat.stdout, ds.blob(1, "__depth__"))
        sys.path.insert(0, os.path.join(fx.HERE, "..", "..", "python"))
        import tarmac
        with tarmac.Dataset(out) as tds:
            self.assertEqual(json.loads(tds.metadata["blob_encodings"])["__seg__"], "npy")
            for i in range(len(SAMPLES)):
                for name in self.maps[i]:
                    a = tds.dense(i, name)
                    ref = np.load(io.BytesIO(ds.blob(i, f"__{name}__")))
                    self.assertEqual(a.dtype, ref.dtype)
                    self.assertEqual(a.shape, ref.shape)
                    self.assertEqual(a.tobytes(), ref.tobytes())
                    self.assertEqual(a.ctypes.data % 64, 0, "zero-copy and aligned")
            with self.assertRaises(tarmac.TarmacError) as e:
                tds.dense(0, "image")
            self.assertIn("not stored as .npy", str(e.exception))

    def test_verify_finds_a_bad_array(self):
        _, ds = self.convert("--crop", "center", "--size", "16")
        # Overwrite the first map's header descr in its shard: verify --decode must object.
        shard = os.path.join(ds.out, ds.shards[int(ds.t["__seg__.shard"][0])])
        off = int(ds.t["__seg__.offset"][0])
        with open(shard, "r+b") as f:
            f.seek(off + 10)
            f.write(b"{'descr': '>i4'")
        p = fx.run(["verify", ds.out, "--decode"])
        self.assertEqual(p.returncode, 3)
        self.assertIn("dtype '>i4'", p.stdout.decode() + p.stderr.decode())


class NpyDenseRefusalTest(fx.TmpCase):
    @classmethod
    def build(cls):
        img = fx.png(fx.smooth_rgb(40, 30))
        cls.wrong = fx.write_tar(os.path.join(cls.tmp, "wrong.tar"), [
            ("s/0.png", img), ("s/0.depth.npy", npy_of(np.zeros((30, 40), np.float32))),
            ("s/1.png", img), ("s/1.depth.npy", npy_of(np.zeros((15, 20), np.float32)))])
        cls.strings = fx.write_tar(os.path.join(cls.tmp, "strings.tar"), [
            ("s/0.png", img), ("s/0.depth.npy", npy_of(np.array([["a"] * 40] * 30)))])
        cls.flat = fx.write_tar(os.path.join(cls.tmp, "flat.tar"), [
            ("s/0.png", img), ("s/0.depth.npy", npy_of(np.zeros(1200, np.float32)))])
        cls.truncated = fx.write_tar(os.path.join(cls.tmp, "truncated.tar"), [
            ("s/0.png", img), ("s/0.depth.npy", npy_of(np.zeros((30, 40), np.int8))[:-5])])

    def test_size_differs_from_the_image(self):
        p, _ = fx.convert(self, [self.wrong], "--dense", "depth.npy", "--size", "16", expect=1)
        err = p.stderr.decode()
        for s in ("s/1.depth.npy", "20x15", "40x30"):
            self.assertIn(s, err)
        p, ds = fx.convert(self, [self.wrong], "--dense", "depth.npy", "--size", "16", "--on-error", "skip")
        self.assertEqual(ds.keys, ["s/0"])
        self.assertEqual(ds.manifest["skipped"][0]["code"], "bad_dense_map")

    def test_not_a_map(self):
        for archive, says in ((self.strings, "numeric"), (self.flat, "H x W"), (self.truncated, "truncated")):
            with self.subTest(says=says):
                p, _ = fx.convert(self, [archive], "--dense", "depth.npy", expect=1)
                self.assertIn("s/0.depth.npy", p.stderr.decode())
                self.assertIn(says, p.stderr.decode())


if __name__ == "__main__":
    unittest.main()
