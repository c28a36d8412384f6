"""End-to-end: geometry, pixels, dense maps, points/boxes and label columns of `tarmac convert`,
each checked against an independent computation (numpy / OpenCV / PIL)."""
import io
import json
import os
import sys
import tarfile
import unittest
import zlib

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

# (key, width, height, bbox_xywh): keys deliberately out of sorted order; one region leaves the
# image (padding), one is a >=2x downscale (the anti-aliased path), the others upscale.
HMR = [
    ("train/b/0003", 320, 240, [100.0, 60.0, 80.0, 120.0]),
    ("train/a/0001", 300, 200, [10.5, 20.25, 150.0, 90.0]),
    ("train/c/0002", 640, 480, [50.0, 40.0, 420.0, 400.0]),
    ("train/a/0000", 256, 256, [30.0, 30.0, 60.0, 60.0]),
]
SIZE = 224


def expected_field_affine(b, scale=1.2, size=SIZE):
    # The box in edge coordinates (the default --box-convention): its centre in pixel-centre
    # coordinates is half a pixel up and left of x + w / 2.
    cx, cy = b[0] + b[2] / 2 - 0.5, b[1] + b[3] / 2 - 0.5
    w, h = b[2] * scale, b[3] * scale
    side = max(w, h)
    return fx.affine_region(cx - side / 2, cy - side / 2, side, side, size, size)


def hmr_members(i, key, w, h, box):
    rng = np.random.default_rng(100 + i)
    kp = np.stack([rng.uniform(0, w, 5), rng.uniform(0, h, 5), rng.integers(0, 2, 5)], axis=1)
    joints = rng.uniform(0, 100, (i + 1, 2)).round(3)
    label = {
        "bbox_xywh": box,
        "keypoints2d": kp.tolist(),
        "meta": {"id": 1000 + i, "ok": i % 2 == 0, "score": 0.25 * i},
        "caption": f"person n°{i} — ü",
        "tags": ["a", "b" * i],
        "joints": joints.tolist(),
        "extra": None,
    }
    pose = (np.arange(12, dtype=np.float32).reshape(3, 4) * (i + 1)).astype(np.float32)
    return [
        (key + ".png", fx.png(fx.smooth_rgb(w, h, seed=i))),
        (key + ".json", fx.js(label)),
        (key + ".pose.npy", fx.npy(pose)),
        (key + ".depth.png", fx.png(fx.smooth_u16(w, h, seed=i))),
        (key + ".txt", f"caption {i}\n".encode()),
        (key + ".cls", f"{i + 7}\n".encode()),
        (key + ".aux.npz", fx.npz(a=np.array([i, -i], np.int16), b=np.full((2, 2), i / 3.0))),
    ]


class HmrCropTest(fx.TmpCase):
    """--crop field:bbox_xywh --crop-scale 1.2 --square --size 224 with points, boxes, a dense map."""

    FLAGS = ["--crop", "field:bbox_xywh", "--crop-scale", "1.2", "--square", "--size", str(SIZE),
             "--points", "keypoints2d", "--boxes", "bbox_xywh", "--dense", "depth.png", "--format", "png"]

    @classmethod
    def build(cls):
        cls.members = []
        cls.labels = []
        for i, (key, w, h, box) in enumerate(HMR):
            m = hmr_members(i, key, w, h, box)
            cls.members += m
            cls.labels.append(json.loads(m[1][1]))
        cls.archive = fx.write_tar(os.path.join(cls.tmp, "hmr.tar"), cls.members)
        cls.proc, cls.ds = fx.convert(cls, [cls.archive], *cls.FLAGS, "--threads", "2")

    def test_keys_in_order_of_appearance(self):
        self.assertEqual(self.ds.keys, [k for k, *_ in HMR])
        self.assertEqual(self.ds.meta["num_samples"], str(len(HMR)))
        self.assertEqual(self.ds.meta["format"], "tarmac/1")

    def test_affine_matches_region(self):
        self.assertEqual(self.ds.t["__affine__"].shape, (len(HMR), 2, 3))
        self.assertEqual(self.ds.t["__affine__"].dtype, np.float64)
        for i, (_, _, _, box) in enumerate(HMR):
            np.testing.assert_allclose(self.ds.affine(i), expected_field_affine(box), atol=1e-9)

    def test_pixels_match_reference_warp(self):
        for i, (key, w, h, box) in enumerate(HMR):
            with self.subTest(key=key):
                src = fx.smooth_rgb(w, h, seed=i)
                out = fx.decode_rgb(self.ds.blob(i))
                self.assertEqual(out.shape, (SIZE, SIZE, 3))
                m = expected_field_affine(box)
                ref = fx.warp_ref(src, m, SIZE, SIZE)
                err = fx.mean_abs(out, ref)
                self.assertLess(err, 0.1)
                self.assertLessEqual(int(np.abs(out.astype(int) - ref).max()), 1)
                # The comparison can fail: half a pixel off is clearly worse.
                for dx, dy in ((0.5, 0), (0, 0.5), (1, 0)):
                    shifted = m.copy()
                    shifted[0, 2] += dx
                    shifted[1, 2] += dy
                    bad = fx.mean_abs(out, fx.warp_ref(src, shifted, SIZE, SIZE))
                    self.assertGreater(bad, max(3 * err, 0.3), f"shift {dx},{dy}")

    def test_image_blob_columns(self):
        t = self.ds.t
        for col, dt in (("shard", np.int32), ("offset", np.int64), ("size", np.int64), ("crc32", np.uint32),
                        ("width", np.int32), ("height", np.int32)):
            self.assertEqual(t["__image__." + col].dtype, dt, col)
            self.assertEqual(t["__image__." + col].shape, (len(HMR),), col)
        for i, (key, *_) in enumerate(HMR):
            data = self.ds.blob(i)
            self.assertEqual(int(t["__image__.crc32"][i]), zlib.crc32(data))
            self.assertEqual(int(t["__image__.width"][i]), SIZE)
            self.assertEqual(int(t["__image__.height"][i]), SIZE)
            self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n")

    def test_shard_members_hold_the_blobs(self):
        names = {}
        for shard in self.ds.shards:
            with tarfile.open(os.path.join(self.ds.out, shard)) as tf:
                for m in tf.getmembers():
                    names[m.name] = (shard, m.offset_data, m.size)
        for i, (key, *_) in enumerate(HMR):
            for blob, suffix in (("__image__", ".png"), ("__depth__", ".depth.png")):
                shard, off, size = names[key + suffix]
                self.assertEqual(self.ds.shards[int(self.ds.t[blob + ".shard"][i])], shard)
                self.assertEqual(int(self.ds.t[blob + ".offset"][i]), off)
                self.assertEqual(int(self.ds.t[blob + ".size"][i]), size)

    def test_keypoints_follow_the_affine(self):
        kp = self.ds.t["keypoints2d"]
        self.assertEqual(kp.shape, (len(HMR), 5, 3))
        for i, lab in enumerate(self.labels):
            want = fx.apply_affine(expected_field_affine(HMR[i][3]), lab["keypoints2d"])
            np.testing.assert_allclose(kp[i], want, rtol=0, atol=1e-9)

    def test_boxes_follow_the_affine(self):
        bx = self.ds.t["bbox_xywh"]
        self.assertEqual(bx.shape, (len(HMR), 4))
        for i, (_, _, _, b) in enumerate(HMR):
            m = expected_field_affine(b)
            # Edge coordinates in and out: a corner moves as the pixel-centre point half a
            # pixel inside it, then back out by half an output pixel.
            c0 = m @ [b[0] - 0.5, b[1] - 0.5, 1] + 0.5
            c1 = m @ [b[0] + b[2] - 0.5, b[1] + b[3] - 0.5, 1] + 0.5
            np.testing.assert_allclose(bx[i], [c0[0], c0[1], *(c1 - c0)], atol=1e-9)
            # ... which leaves the crop's own box centred in the output's edges [0, SIZE].
            self.assertAlmostEqual(bx[i][0] + bx[i][2] / 2, SIZE / 2, places=6)
            self.assertAlmostEqual(bx[i][1] + bx[i][3] / 2, SIZE / 2, places=6)
            # the box was scaled 1.2 about its centre: it sits centred, at 224/1.2 on its longer side
            self.assertAlmostEqual(max(bx[i][2], bx[i][3]), SIZE / 1.2, places=6)

    def test_dense_map_nearest_and_16_bit(self):
        for i, (key, w, h, box) in enumerate(HMR):
            with self.subTest(key=key):
                depth = fx.smooth_u16(w, h, seed=i)
                out = fx.decode_unchanged(self.ds.blob(i, "__depth__"))
                self.assertEqual(out.dtype, np.uint16)
                self.assertEqual(out.shape, (SIZE, SIZE))
                ref = fx.warp_ref(depth, expected_field_affine(box), SIZE, SIZE, cv2.INTER_NEAREST)
                self.assertLess(np.mean(out != ref), 0.01)
                self.assertTrue(np.isin(out, np.append(depth.ravel(), 0)).all(), "values not from the source")
                self.assertEqual(zlib.crc32(self.ds.blob(i, "__depth__")), int(self.ds.t["__depth__.crc32"][i]))

    def test_json_scalars_nested_and_strings(self):
        t, n = self.ds.t, len(HMR)
        self.assertEqual(t["meta.id"].dtype, np.int64)
        self.assertEqual(t["meta.id"].tolist(), [lab["meta"]["id"] for lab in self.labels])
        self.assertEqual(t["meta.ok"].dtype, np.bool_)
        self.assertEqual(t["meta.ok"].tolist(), [lab["meta"]["ok"] for lab in self.labels])
        self.assertEqual(t["meta.score"].dtype, np.float64)
        self.assertEqual(t["meta.score"].tolist(), [lab["meta"]["score"] for lab in self.labels])
        for i, lab in enumerate(self.labels):
            self.assertEqual(self.ds.string("caption", i), lab["caption"])
            self.assertEqual(self.ds.string("tags", i), json.dumps(lab["tags"], separators=(",", ":")))
            self.assertEqual(self.ds.string("extra", i), "")  # null: no value
        self.assertEqual(json.loads(self.ds.meta["schema"])["extra"]["kind"], "json")  # never typed
        self.assertTrue(json.loads(self.ds.meta["schema"])["extra"]["nullable"])
        self.assertEqual(t["extra.valid"].tolist(), [False] * n)
        self.assertEqual(t["caption.offsets"].dtype, np.int64)
        self.assertEqual(t["caption.offsets"].shape, (n + 1,))
        self.assertEqual(t["caption.values"].dtype, np.uint8)

    def test_json_array_of_varying_length_is_ragged(self):
        self.assertEqual(self.ds.t["joints.values"].dtype, np.float64)
        self.assertEqual(self.ds.t["joints.values"].shape[1:], (2,))
        for i, lab in enumerate(self.labels):
            np.testing.assert_array_equal(self.ds.ragged("joints", i), np.array(lab["joints"]))

    def test_npy_npz_txt_cls(self):
        t = self.ds.t
        self.assertEqual(t["pose"].dtype, np.float32)
        self.assertEqual(t["pose"].shape, (len(HMR), 3, 4))
        self.assertEqual(t["aux.a"].dtype, np.int16)
        self.assertEqual(t["cls"].dtype, np.int64)
        for i in range(len(HMR)):
            np.testing.assert_array_equal(t["pose"][i], np.arange(12, dtype=np.float32).reshape(3, 4) * (i + 1))
            np.testing.assert_array_equal(t["aux.a"][i], [i, -i])
            np.testing.assert_array_equal(t["aux.b"][i], np.full((2, 2), i / 3.0))
            self.assertEqual(self.ds.string("txt", i), f"caption {i}\n")
            self.assertEqual(int(t["cls"][i]), i + 7)

    def test_schema(self):
        s = self.ds.schema
        want = {
            "bbox_xywh": ("numeric", "F64", [4], False, "json"),
            "keypoints2d": ("numeric", "F64", [5, 3], False, "json"),
            "meta.id": ("numeric", "I64", [], False, "json"),
            "meta.ok": ("numeric", "BOOL", [], False, "json"),
            "caption": ("string", "U8", [-1], True, "json"),
            "tags": ("json", "U8", [-1], True, "json"),
            "joints": ("numeric", "F64", [-1, 2], True, "json"),
            "pose": ("numeric", "F32", [3, 4], False, "pose.npy"),
            "aux.a": ("numeric", "I16", [2], False, "aux.npz"),
            "txt": ("string", "U8", [-1], True, "txt"),
            "cls": ("numeric", "I64", [], False, "cls"),
        }
        for name, (kind, dtype, shape, ragged, source) in want.items():
            with self.subTest(field=name):
                self.assertEqual(s[name]["kind"], kind)
                self.assertEqual(s[name]["dtype"], dtype)
                self.assertEqual(s[name]["shape"], shape)
                self.assertEqual(s[name]["ragged"], ragged)
                self.assertEqual(s[name]["source"], source)
        self.assertEqual(json.loads(self.ds.meta["blobs"]), ["__image__", "__depth__"])
        self.assertEqual(self.ds.manifest["schema"], s)

    def test_threads_are_deterministic(self):
        _, one = fx.convert(self, [self.archive], *self.FLAGS, "--threads", "1")
        for name in ["labels.safetensors", *self.ds.shards]:
            with open(os.path.join(one.out, name), "rb") as a, open(os.path.join(self.ds.out, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)
        self.assertEqual(sorted(os.listdir(one.out)), sorted(os.listdir(self.ds.out)))


class ResizeModesTest(fx.TmpCase):
    """Centre crop, fixed box, shorter-side resize: the recorded affine and the pixels."""

    @classmethod
    def build(cls):
        cls.src = fx.smooth_rgb(320, 240, seed=7)
        cls.archive = fx.write_tar(os.path.join(cls.tmp, "one.tar"), [("img/x.png", fx.png(cls.src))])

    def check(self, flags, m, w, h, tight):
        _, ds = fx.convert(self, [self.archive], *flags, "--format", "png")
        np.testing.assert_allclose(ds.affine(0), m, atol=1e-9)
        out = fx.decode_rgb(ds.blob(0))
        self.assertEqual(out.shape, (h, w, 3))
        self.assertEqual((int(ds.t["__image__.width"][0]), int(ds.t["__image__.height"][0])), (w, h))
        ref = fx.warp_ref(self.src, m, w, h)
        err = fx.mean_abs(out, ref)
        self.assertLess(err, 0.1 if tight else 3.0)
        for dx in (0.5, -0.5):
            shifted = m.copy()
            shifted[0, 2] += dx
            self.assertGreater(fx.mean_abs(out, fx.warp_ref(self.src, shifted, w, h)), max(3 * err, 0.3))
        return ds

    def test_center_crop_downscale(self):
        # largest centred square within [-0.5, 319.5] x [-0.5, 239.5]: x from 39.5, side 240
        self.check(["--crop", "center", "--size", "64"], fx.affine_region(39.5, -0.5, 240, 240, 64, 64), 64, 64, True)

    def test_center_crop_wxh(self):
        # 320/240 = 1.333 < 1.5: the full width and a 213.33-high band; a 2.13x downscale
        ch = 320 / 1.5
        m = fx.affine_region(-0.5, (240 - ch) / 2 - 0.5, 320, ch, 150, 100)
        self.check(["--crop", "center", "--size", "150x100"], m, 150, 100, True)

    def test_box_upscale(self):
        self.check(["--crop", "box:10,20,40,30", "--size", "120x90"], fx.edge_region(10, 20, 40, 30, 120, 90),
                   120, 90, True)

    def test_box_centers_convention(self):
        # Today's pixel-centre reading of the same box, half a pixel down and right.
        self.check(["--crop", "box:10,20,40,30", "--size", "120x90", "--box-convention", "centers"],
                   fx.affine_region(10, 20, 40, 30, 120, 90), 120, 90, True)

    def test_shorter_side_without_crop(self):
        # OpenCV's resize convention: x_src = (x_dst + 0.5) / s - 0.5
        m = np.array([[0.5, 0, -0.25], [0, 0.5, -0.25]])
        self.check(["--size", "120"], m, 160, 120, True)

    def test_no_geometry_is_identity(self):
        _, ds = fx.convert(self, [self.archive], "--format", "png")
        np.testing.assert_array_equal(ds.affine(0), [[1, 0, 0], [0, 1, 0]])
        np.testing.assert_array_equal(fx.decode_rgb(ds.blob(0)), self.src)


class DenseHalfResolutionTest(fx.TmpCase):
    """A dense map at half the image's resolution is warped onto the output grid of the image."""

    @classmethod
    def build(cls):
        cls.src = fx.smooth_rgb(200, 160, seed=3)
        cls.depth = fx.smooth_u16(100, 80, seed=3)
        cls.archive = fx.write_tar(os.path.join(cls.tmp, "d.tar"), [
            ("s/0.png", fx.png(cls.src)), ("s/0.depth.png", fx.png(cls.depth))])

    def test_dense_half_resolution(self):
        _, ds = fx.convert(self, [self.archive], "--crop", "box:20,10,100,100", "--size", "128",
                           "--dense", "depth.png", "--format", "png")
        m = fx.edge_region(20, 10, 100, 100, 128, 128)
        # depth pixel centre u maps to image coordinate 2u + 0.5
        s = np.array([[2, 0, 0.5], [0, 2, 0.5], [0, 0, 1]])
        md = m @ s
        out = fx.decode_unchanged(ds.blob(0, "__depth__"))
        self.assertEqual(out.shape, (128, 128))
        self.assertEqual(out.dtype, np.uint16)
        ref = fx.warp_ref(self.depth, md, 128, 128, cv2.INTER_NEAREST)
        self.assertLess(np.mean(out != ref), 0.02)


class ColourAndFormatsTest(fx.TmpCase):
    """Red stays red in every output format; grey and RGBA sources become 3 channels."""

    @classmethod
    def build(cls):
        rgb = np.zeros((48, 96, 3), np.uint8)
        rgb[:, :32] = (220, 20, 30)
        rgb[:, 32:64] = (20, 200, 40)
        rgb[:, 64:] = (30, 40, 210)
        cls.rgb = rgb
        grey = fx.smooth_rgb(64, 48, seed=2)[..., 1]
        rgba = np.dstack([fx.smooth_rgb(64, 48, seed=4), np.full((48, 64), 128, np.uint8)])
        cls.grey, cls.rgba = grey, rgba
        cls.archive = fx.write_tar(os.path.join(cls.tmp, "c.tar"), [("flags.png", fx.png(rgb))])
        cls.jpg_archive = fx.write_tar(os.path.join(cls.tmp, "cj.tar"), [("flags.jpg", fx.jpg(rgb, 100))])
        cls.odd = fx.write_tar(os.path.join(cls.tmp, "odd.tar"), [
            ("grey.png", fx.png(grey)), ("rgba.png", fx.png(rgba))])

    def centres(self, img):
        return [img[24, 16].astype(int), img[24, 48].astype(int), img[24, 80].astype(int)]

    def test_formats_keep_channels(self):
        for fmt, tol in (("png", 0), ("jpg", 12), ("webp", 12)):
            with self.subTest(format=fmt):
                _, ds = fx.convert(self, [self.archive], "--format", fmt)
                out = fx.decode_rgb(ds.blob(0))
                for got, want in zip(self.centres(out), self.centres(self.rgb)):
                    self.assertLessEqual(int(np.abs(got - want).max()), tol, (got, want))

    def test_raw_is_rgb_bytes(self):
        _, ds = fx.convert(self, [self.archive], "--format", "raw")
        data = ds.blob(0)
        self.assertEqual(len(data), 48 * 96 * 3)
        np.testing.assert_array_equal(np.frombuffer(data, np.uint8).reshape(48, 96, 3), self.rgb)

    def test_jpeg_source_resized_stays_red(self):
        _, ds = fx.convert(self, [self.jpg_archive], "--size", "24", "--format", "png")
        out = fx.decode_rgb(ds.blob(0))
        self.assertEqual(out.shape, (24, 48, 3))
        for got, want in zip([out[12, 8], out[12, 24], out[12, 40]], self.centres(self.rgb)):
            self.assertLessEqual(int(np.abs(got.astype(int) - want).max()), 12, (got, want))

    def test_keep_stores_source_bytes(self):
        _, ds = fx.convert(self, [self.jpg_archive], "--format", "keep")
        with tarfile.open(self.jpg_archive) as tf:
            src = tf.extractfile("flags.jpg").read()
        self.assertEqual(ds.blob(0), src)
        with tarfile.open(os.path.join(ds.out, ds.shards[0])) as tf:
            self.assertEqual(tf.getnames(), ["flags.jpg"])

    def test_grey_and_rgba_become_rgb(self):
        _, ds = fx.convert(self, [self.odd], "--format", "png")
        self.assertEqual(ds.keys, ["grey", "rgba"])
        g = fx.decode_unchanged(ds.blob(0))
        self.assertEqual(g.shape, (48, 64, 3))
        for c in range(3):
            np.testing.assert_array_equal(g[..., c], self.grey)
        a = fx.decode_unchanged(ds.blob(1))
        self.assertEqual(a.shape, (48, 64, 3))
        np.testing.assert_array_equal(cv2.cvtColor(a, cv2.COLOR_BGR2RGB), self.rgba[..., :3])


class ExifOrientationTest(fx.TmpCase):
    @classmethod
    def build(cls):
        from PIL import Image
        cls.src = fx.smooth_rgb(80, 48, seed=9)
        im = Image.fromarray(cls.src)
        exif = Image.Exif()
        exif[0x0112] = 6
        b = io.BytesIO()
        im.save(b, "JPEG", quality=98, exif=exif.tobytes())
        cls.jpeg = b.getvalue()
        cls.archive = fx.write_tar(os.path.join(cls.tmp, "e.tar"), [("rot.jpg", cls.jpeg)])

    def test_exif_orientation_applied(self):
        from PIL import Image, ImageOps
        ref = np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(self.jpeg))).convert("RGB"))
        self.assertEqual(ref.shape, (80, 48, 3))
        _, ds = fx.convert(self, [self.archive], "--format", "png")
        out = fx.decode_rgb(ds.blob(0))
        self.assertEqual(out.shape, ref.shape)
        self.assertEqual((int(ds.t["__image__.width"][0]), int(ds.t["__image__.height"][0])), (48, 80))
        err = fx.mean_abs(out, ref)
        self.assertLess(err, 2.0)
        self.assertGreater(fx.mean_abs(out, np.rot90(ref, 2)), 5 * max(err, 1.0))


class LabelEdgeCasesTest(fx.TmpCase):
    """Dtype promotion across samples, late raggedness, point dtypes, npz, xyxy, odd names."""

    @classmethod
    def build(cls):
        cls.jpeg = fx.jpg(fx.smooth_rgb(40, 30, seed=5))

    def one(self, name, members, *flags):
        return fx.convert(self, [fx.write_tar(self.path(name + ".tar"), members)], *flags)[1]

    def test_int_then_float_promotes_to_f64(self):
        ds = self.one("promo", [("a/0.jpg", self.jpeg), ("a/0.json", fx.js({"v": 1, "e": []})),
                                ("a/1.jpg", self.jpeg), ("a/1.json", fx.js({"v": 2.5, "e": [7, 8]}))])
        self.assertEqual(ds.t["v"].dtype, np.float64)
        self.assertEqual(ds.t["v"].tolist(), [1.0, 2.5])
        self.assertEqual(ds.t["e.offsets"].tolist(), [0, 0, 2])
        self.assertEqual(ds.t["e.values"].tolist(), [7, 8])
        self.assertEqual(ds.schema["e"]["shape"], [-1])

    def test_integer_points_become_f64_and_f32_points_stay_f32(self):
        ds = self.one("pts", [("a/0.jpg", self.jpeg), ("a/0.json", fx.js({"kp": [[1, 2], [3, 4]]})),
                              ("a/0.q.npy", fx.npy(np.array([[1, 2, 9]], np.float32)))],
                      "--size", "60", "--points", "kp", "--points", "q")
        m = np.array([[2, 0, 0.5], [0, 2, 0.5]])  # shorter side 30 -> 60
        np.testing.assert_allclose(ds.affine(0), m, atol=1e-12)
        self.assertEqual(ds.t["kp"].dtype, np.float64)
        np.testing.assert_allclose(ds.t["kp"][0], fx.apply_affine(m, [[1, 2], [3, 4]]))
        self.assertEqual(ds.t["q"].dtype, np.float32)
        np.testing.assert_allclose(ds.t["q"][0], fx.apply_affine(m, [[1, 2, 9]]))

    def test_xyxy_crop_and_boxes(self):
        ds = self.one("xyxy", [("a/0.jpg", self.jpeg), ("a/0.json", fx.js({"b": [5, 6, 25, 16]}))],
                      "--crop", "field:b:xyxy", "--size", "10x5", "--boxes", "b:xyxy")
        m = fx.edge_region(5, 6, 20, 10, 10, 5)
        np.testing.assert_allclose(ds.affine(0), m, atol=1e-12)
        # The crop's own box, in edge coordinates, is the whole output: [0, 0] to [10, 5].
        np.testing.assert_allclose(ds.t["b"][0], [0, 0, 10, 5], atol=1e-12)

    def test_npz_deflated_and_stored(self):
        ds = self.one("npz", [("a/0.jpg", self.jpeg), ("a/0.npz", fx.npz(True, x=np.arange(3, dtype=np.uint16))),
                              ("a/0.s.npz", fx.npz(False, y=np.eye(2, dtype=np.float32)))])
        self.assertEqual(ds.t["x"].dtype, np.uint16)
        self.assertEqual(ds.t["x"].tolist(), [[0, 1, 2]])
        self.assertEqual(ds.schema["s.y"]["source"], "s.npz")
        np.testing.assert_array_equal(ds.t["s.y"][0], np.eye(2))

    def test_dotted_dirs_uppercase_ext_and_second_image(self):
        ds = self.one("names", [("v1.2/0001.JPG", self.jpeg), ("v1.2/0001.Json", fx.js({"v": 1})),
                                ("v1.2/0001.png", fx.png(fx.smooth_rgb(8, 8)))])
        self.assertEqual(ds.keys, ["v1.2/0001"])
        self.assertEqual(ds.t["v"].tolist(), [1])
        self.assertEqual(fx.decode_rgb(ds.blob(0)).shape, (30, 40, 3))  # the jpg, preferred over png
        (ig,) = ds.manifest["ignored"]
        self.assertEqual(ig["member"], "v1.2/0001.png")

    def test_grey_jpeg_and_region_outside_image(self):
        grey = fx.smooth_rgb(40, 30, seed=6)[..., 0]
        ok, g = cv2.imencode(".jpg", grey, [cv2.IMWRITE_JPEG_QUALITY, 100])
        ds = self.one("grey", [("a/0.jpg", g.tobytes()), ("a/0.json", fx.js({"b": [100, 100, 10, 10]})),
                               ("a/1.jpg", g.tobytes()), ("a/1.json", fx.js({"b": [0, 0, 40, 30]}))],
                      "--crop", "field:b", "--size", "8", "--format", "png")
        np.testing.assert_array_equal(fx.decode_rgb(ds.blob(0)), np.zeros((8, 8, 3), np.uint8))
        out = fx.decode_unchanged(ds.blob(1))
        self.assertEqual(out.shape, (8, 8, 3))
        np.testing.assert_array_equal(out[..., 0], out[..., 2])


if __name__ == "__main__":
    unittest.main()
