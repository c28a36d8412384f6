"""End-to-end: annotation tables (`--table`) and instances (`--instances`).

The users' own layouts, written here from their documented formats with Python's tarfile,
zipfile, json and numpy (never by tarmac): Marigold's Hypersim tar made with `tar -cf … .`
(every name starts with `./`) paired by a split list, a COCO keypoints JSON with its images in a
zip, and a WebDataset shard of multi-person frames. Every output is checked against an
independent computation: the crop region and affine from the box (numpy), the pixels against
cv2.warpAffine of the source, keypoints against the affine, 16-bit depth nearest-exact, and
every table value against the row it came from.
"""
import io
import json
import os
import sys
import tarfile
import unittest
import zipfile
import zlib

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402


def tar_with_names(path, members):
    """A tar whose member names are exactly as given ("./train/..."), as `tar -cf x.tar .` writes."""
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def region_affine(box, scale, out_w, out_h, fit_aspect=False, square=False):
    """The affine of `--crop field:B --crop-scale S [--square] [--fit-aspect] --size WxH`: the box
    [x, y, w, h] as the region [x, x + w] x [y, y + h], scaled about its centre, grown to the
    output's aspect (or a square), mapped onto the output."""
    x, y, w, h = (float(v) for v in box[:4])
    cx, cy = x + w / 2, y + h / 2
    w, h = w * scale, h * scale
    if square:
        w = h = max(w, h)
    if fit_aspect:
        a = out_w / out_h
        if w / h > a:
            h = w / a
        else:
            w = h * a
    return fx.affine_region(cx - w / 2, cy - h / 2, w, h, out_w, out_h)


def center_affine(w, h, out_w, out_h):
    rw = min(w, h * out_w / out_h)
    rh = rw * out_h / out_w
    return fx.affine_region((w - rw) / 2 - 0.5, (h - rh) / 2 - 0.5, rw, rh, out_w, out_h)


def nearest(a, m, out_w, out_h):
    return cv2.warpAffine(a, m, (out_w, out_h), flags=cv2.INTER_NEAREST,
                          borderMode=cv2.BORDER_CONSTANT, borderValue=0)


class Instances(fx.TmpCase):
    """The WebDataset layout of multi-person frames: one label file per image, K persons in it."""

    # key -> (w, h, persons [(bbox xywh, 4 keypoints [x, y, v])])
    FRAMES = {
        "f/000000": (96, 72, [([10, 12, 30, 40], [[15, 20, 2], [30, 30, 1], [25, 45, 2], [36, 50, 0]]),
                              ([50, 8, 24, 50], [[55, 10, 2], [60, 30, 2], [70, 50, 1], [62, 55, 2]])]),
        "f/000001": (80, 64, [([20, 16, 40, 30], [[25, 20, 2], [40, 30, 2], [55, 40, 2], [30, 42, 1]])]),
        "f/000002": (64, 64, []),  # nobody in this frame
    }

    @classmethod
    def build(cls):
        members = []
        for i, (key, (w, h, persons)) in enumerate(cls.FRAMES.items()):
            members.append((key + ".png", fx.png(fx.smooth_rgb(w, h, seed=i))))
            members.append((key + ".json", fx.js({
                "scene": "scene-%d" % i,
                "persons": [{"bbox": b, "kp": kp, "id": 100 * i + k} for k, (b, kp) in enumerate(persons)],
            })))
            members.append((key + ".npz", fx.npz(
                bbox=np.array([b + [0.5 + k] for k, (b, _) in enumerate(persons)], np.float64).reshape(-1, 5),
                kp=np.array([kp for _, kp in persons], np.float32).reshape(-1, 4, 3),
                cam=np.array([1.0, 2.0, 3.0]))))
        cls.tar = cls.tmp + "/frames.tar"
        fx.write_tar(cls.tar, members)

    def test_json_persons_one_output_each(self):
        _, ds = fx.convert(self, [self.tar], "--instances", "persons", "--crop", "field:persons.bbox",
                           "--crop-scale", "1.25", "--fit-aspect", "--size", "24x32",
                           "--points", "persons.kp", "--format", "png", "--fields", "scene,persons.bbox,persons.kp,persons.id")
        expect = [(key, k) for key, (_, _, persons) in self.FRAMES.items() for k in range(len(persons))]
        self.assertEqual(ds.keys, ["%s/%d" % e for e in expect])
        self.assertEqual(ds.t["__row__"].tolist(), [k for _, k in expect])
        for i, (key, k) in enumerate(expect):
            w, h, persons = self.FRAMES[key]
            box, kp = persons[k]
            m = region_affine(box, 1.25, 24, 32, fit_aspect=True)
            np.testing.assert_allclose(ds.affine(i), m, atol=1e-9)
            np.testing.assert_allclose(ds.t["persons.kp"][i], fx.apply_affine(m, kp), atol=1e-9)
            self.assertEqual(int(ds.t["persons.id"][i]), 100 * list(self.FRAMES).index(key) + k)
            self.assertEqual(ds.string("scene", i), "scene-%d" % list(self.FRAMES).index(key))
            src = fx.smooth_rgb(w, h, seed=list(self.FRAMES).index(key))
            out = fx.decode_rgb(ds.blob(i))
            self.assertEqual(out.shape, (32, 24, 3))
            err = fx.mean_abs(out, fx.warp_ref(src, m, 24, 32))
            # Below half scale the source is area-reduced first (as in test_convert): looser.
            self.assertLess(err, 0.1 if m[0, 0] >= 0.5 else 3.0)
            shifted = m.copy()
            shifted[0, 2] += 0.5
            self.assertGreater(fx.mean_abs(out, fx.warp_ref(src, shifted, 24, 32)), max(2 * err, 0.3))
        # The frame with nobody: counted and listed, never silent.
        self.assertEqual(ds.manifest["counts"]["no_instance_samples"], 1)
        listed = [j for j in ds.manifest["ignored"] if j.get("code") == "no_instances"]
        self.assertEqual([j["sample"] for j in listed], ["f/000002"])
        self.assertEqual(ds.manifest["counts"]["skipped_samples"], 0)

    def test_numeric_instances_sliced_alike(self):
        _, ds = fx.convert(self, [self.tar], "--instances", "bbox", "--instance-fields", "kp",
                           "--crop", "field:bbox", "--square", "--size", "32", "--boxes", "bbox",
                           "--points", "kp", "--fields", "bbox,kp,cam")
        expect = [(key, k) for key, (_, _, persons) in self.FRAMES.items() for k in range(len(persons))]
        self.assertEqual(ds.keys, ["%s/%d" % e for e in expect])
        for i, (key, k) in enumerate(expect):
            box, kp = self.FRAMES[key][2][k]
            m = region_affine(box, 1.0, 32, 32, square=True)
            np.testing.assert_allclose(ds.affine(i), m, atol=1e-9)
            # A box with 5 numbers: x, y, w, h transformed, the confidence kept.
            x0, y0 = fx.apply_affine(m, [box[:2]])[0]
            x1, y1 = fx.apply_affine(m, [[box[0] + box[2], box[1] + box[3]]])[0]
            np.testing.assert_allclose(ds.t["bbox"][i], [x0, y0, x1 - x0, y1 - y0, 0.5 + k], atol=1e-9)
            np.testing.assert_allclose(ds.t["kp"][i], fx.apply_affine(m, np.float32(kp)), atol=1e-4)
            np.testing.assert_allclose(ds.t["cam"][i], [1.0, 2.0, 3.0])

    def test_instance_fields_of_another_length_are_a_bad_sample(self):
        bad = self.tmp + "/bad.tar"
        fx.write_tar(bad, [("a.png", fx.png(fx.smooth_rgb(32, 32))),
                           ("a.npz", fx.npz(bbox=np.zeros((2, 4)) + 4, kp=np.zeros((3, 4, 3))))])
        p, _ = fx.convert(self, [bad], "--instances", "bbox", "--instance-fields", "kp", expect=1)
        err = p.stderr.decode()
        self.assertIn("'kp'", err)
        self.assertIn("3 entries", err)
        self.assertIn("has 2", err)


class SplitList(fx.TmpCase):
    """Marigold's Hypersim layout: `./`-prefixed tar, RGB and 16-bit depth paired by a list."""

    FRAMES = [("train/ai_001_001", 0, 64, 48), ("train/ai_001_001", 1, 64, 48), ("train/ai_002_003", 0, 48, 64)]

    @classmethod
    def build(cls):
        members, lines = [], ["# Hypersim split (Marigold's filename_list_train.txt)"]
        cls.rgb, cls.depth = [], []
        for i, (scene, fr, w, h) in enumerate(cls.FRAMES):
            rgb = fx.smooth_rgb(w, h, seed=10 + i)
            depth = fx.smooth_u16(w, h, seed=20 + i)
            depth[::7, ::5] = 0  # 0 = invalid, as Hypersim's millimetres
            cls.rgb.append(rgb)
            cls.depth.append(depth)
            r = "%s/rgb_cam_00_fr%04d.png" % (scene, fr)
            d = "%s/depth_plane_cam_00_fr%04d.png" % (scene, fr)
            lines.append(r + "   " + d)
            # Depth maps first: a pair's members are not adjacent in the tar.
            members.insert(0, ("./" + d, fx.png(depth)))
            members.append(("./" + r, fx.png(rgb)))
        members.append(("./train/ai_002_003/rgb_cam_00_fr0099.png", fx.png(fx.smooth_rgb(8, 8))))
        cls.tar = cls.tmp + "/hypersim.tar"
        tar_with_names(cls.tar, members)
        cls.list = cls.tmp + "/filename_list_train.txt"
        with open(cls.list, "w") as f:
            f.write("\n".join(lines) + "\n")

    def test_pairs_by_the_list(self):
        _, ds = fx.convert(self, [self.tar], "--table", self.list, "--table-columns", "image,depth",
                           "--dense", "depth", "--crop", "center", "--size", "32x24", "--format", "png")
        self.assertEqual(ds.keys, ["%s/rgb_cam_00_fr%04d/%d" % (s, fr, row)
                                   for row, (s, fr, _, _) in enumerate(self.FRAMES)])
        self.assertEqual(ds.t["__row__"].tolist(), [0, 1, 2])
        for i, (_, _, w, h) in enumerate(self.FRAMES):
            m = center_affine(w, h, 32, 24)
            np.testing.assert_allclose(ds.affine(i), m, atol=1e-9)
            out = fx.decode_rgb(ds.blob(i))
            self.assertLess(fx.mean_abs(out, fx.warp_ref(self.rgb[i], m, 32, 24)), 1.0)
            depth = fx.decode_unchanged(ds.blob(i, "__depth__"))
            self.assertEqual(depth.dtype, np.uint16)
            np.testing.assert_array_equal(depth, nearest(self.depth[i], m, 32, 24))
        with open(self.list, "rb") as f:
            data = f.read()
        table = ds.manifest["table"]
        self.assertEqual(table["format"], "list")
        self.assertEqual(table["rows"], 3)
        self.assertEqual(table["crc32"], fx.crc_hex(data))
        self.assertEqual(ds.manifest["counts"]["unused_images"], 1)
        unused = [j["member"] for j in ds.manifest["ignored"] if j.get("code") == "unused_image"]
        self.assertEqual(unused, ["train/ai_002_003/rgb_cam_00_fr0099.png"])

    def test_a_row_naming_a_missing_member(self):
        lst = self.tmp + "/missing.txt"
        with open(lst, "w") as f:
            f.write("train/ai_001_001/rgb_cam_00_fr0000.png train/ai_001_001/depth_plane_cam_00_fr0000.png\n"
                    "./train/nowhere/rgb.png train/nowhere/depth.png\n")
        p, _ = fx.convert(self, [self.tar], "--table", lst, "--table-columns", "image,depth",
                          "--dense", "depth", expect=1)
        err = p.stderr.decode()
        self.assertIn("train/nowhere/rgb.png", err)
        self.assertIn("no input holds", err)
        _, ds = fx.convert(self, [self.tar], "--table", lst, "--table-columns", "image,depth",
                           "--dense", "depth", "--on-error", "skip")
        self.assertEqual(ds.keys, ["train/ai_001_001/rgb_cam_00_fr0000/0"])
        skipped = [j for j in ds.manifest["skipped"] if "sample" in j]
        self.assertEqual([(j["sample"], j["code"]) for j in skipped], [("train/nowhere/rgb/1", "missing_member")])

    def test_dense_names_a_column(self):
        p, _ = fx.convert(self, [self.tar], "--table", self.list, "--table-columns", "image,depth",
                          "--dense", "depth.png", expect=1)
        err = p.stderr.decode()
        self.assertIn("--dense depth.png", err)
        self.assertIn("'depth'", err)


if __name__ == "__main__":
    unittest.main()
