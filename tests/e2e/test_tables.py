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
import re
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
    # The box is in edge coordinates (the default --box-convention, COCO's): its region in
    # pixel-centre coordinates starts half a pixel up and left.
    return fx.affine_region(cx - w / 2 - 0.5, cy - h / 2 - 0.5, w, h, out_w, out_h)


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

    def test_progress_counts_frames_against_frames(self):
        # Issue #25 (session 13's stop note): the count was of outputs (persons), the total of
        # frames: "3 of 3 samples" here only because 3 frames hold 3 persons. Now frames of
        # frames, and the outputs beside them.
        p, ds = fx.convert(self, [self.tar], "--instances", "persons", "--fields", "scene,persons.id",
                           "--progress", "plain")
        err = p.stderr.decode(errors="replace")
        lines = re.findall(r"progress: +(\d+)% (\d+) of ~?(\d+) samples into (\d+) outputs", err)
        self.assertTrue(lines, err)
        for pct, done, total, outputs in lines:
            self.assertLessEqual(int(done), int(total), err)
        persons = sum(len(v[2]) for v in self.FRAMES.values())
        self.assertEqual(lines[-1], ("100", str(len(self.FRAMES)), str(len(self.FRAMES)), str(persons)), err)
        self.assertEqual(len(ds.keys), persons)

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
            # A box with 5 numbers: x, y, w, h transformed (edge coordinates: corners moved as
            # the pixel-centre points half a pixel inside), the confidence kept.
            x0, y0 = fx.apply_affine(m, [np.subtract(box[:2], 0.5)])[0] + 0.5
            x1, y1 = fx.apply_affine(m, [[box[0] + box[2] - 0.5, box[1] + box[3] - 0.5]])[0] + 0.5
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


COCO_KP_NAMES = ["nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
                 "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist",
                 "left_hip", "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle"]
COCO_SKELETON = [[16, 14], [14, 12], [17, 15], [15, 13], [12, 13], [6, 12], [7, 13], [6, 7],
                 [6, 8], [7, 9], [8, 10], [9, 11], [2, 3], [1, 2], [1, 3], [2, 4], [3, 5], [4, 6],
                 [5, 7]]


class Coco(fx.TmpCase):
    """COCO keypoints: person_keypoints_*.json (as the COCO API documents it) with its images in
    train2017.zip (members train2017/NNNNNNNNNNNN.jpg); top-down crops of each person."""

    IMAGES = [(391895, 96, 72), (522418, 80, 64), (184613, 64, 80)]
    # (image id, bbox); rows deliberately not grouped by image.
    PERSONS = [(391895, [10.5, 8, 30, 40]), (522418, [20, 10, 36, 30]), (391895, [50, 12.25, 24, 50]),
               (184613, [8, 20, 40, 44]), (391895, [30, 30, 20, 20])]

    @classmethod
    def build(cls):
        rng = np.random.default_rng(3)
        cls.src = {}
        cls.zip = cls.tmp + "/train2017.zip"
        with zipfile.ZipFile(cls.zip, "w", zipfile.ZIP_DEFLATED) as z:
            for n, (iid, w, h) in enumerate(cls.IMAGES):
                data = fx.jpg(fx.smooth_rgb(w, h, seed=30 + n), quality=95)
                cls.src[iid] = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)[:, :, ::-1]
                z.writestr("train2017/%012d.jpg" % iid, data)
            z.writestr("train2017/000000000999.jpg", fx.jpg(fx.smooth_rgb(16, 16)))  # no person
        anns = []
        for k, (iid, box) in enumerate(cls.PERSONS):
            x, y, w, h = box
            kp = np.zeros((17, 3))
            kp[:, 0] = rng.uniform(x, x + w, 17).round(1)
            kp[:, 1] = rng.uniform(y, y + h, 17).round(1)
            kp[:, 2] = rng.integers(0, 3, 17)
            kp[kp[:, 2] == 0, :2] = 0  # COCO writes unlabelled joints as 0, 0, 0
            crowd = k == 3
            seg = ({"counts": [int(v) for v in rng.integers(1, 50, 6)], "size": [80, 64]} if crowd
                   else [[x, y, x + w, y, x + w, y + h, x, y + h]])
            anns.append({"segmentation": seg, "num_keypoints": int((kp[:, 2] > 0).sum()),
                         "area": round(w * h * 0.7, 3), "iscrowd": int(crowd),
                         "keypoints": [float(v) if v % 1 else int(v) for v in kp.ravel()],
                         "image_id": iid, "bbox": box, "category_id": 1, "id": 900100 + k})
        cls.coco = {
            "info": {"description": "COCO 2017 Dataset", "version": "1.0", "year": 2017},
            "licenses": [{"url": "http://creativecommons.org/licenses/by-nc-sa/2.0/", "id": 1, "name": "x"}],
            "images": [{"license": 1, "file_name": "%012d.jpg" % iid, "coco_url": "http://x/%d.jpg" % iid,
                        "height": h, "width": w, "date_captured": "2013-11-14 11:18:45",
                        "flickr_url": "http://y", "id": iid} for iid, w, h in cls.IMAGES],
            "annotations": anns,
            "categories": [{"supercategory": "person", "id": 1, "name": "person",
                            "keypoints": COCO_KP_NAMES, "skeleton": COCO_SKELETON}],
        }
        cls.json = cls.tmp + "/person_keypoints_train2017.json"
        with open(cls.json, "w") as f:
            json.dump(cls.coco, f)

    def test_top_down_crops(self):
        _, ds = fx.convert(self, [self.zip], "--table", self.json, "--table-prefix", "train2017/",
                           "--crop", "field:bbox", "--crop-scale", "1.25", "--fit-aspect",
                           "--size", "24x32", "--points", "keypoints", "--format", "png")
        # Images in the zip's order, each image's rows in table order.
        order = [row for iid, _, _ in self.IMAGES for row, (i, _) in enumerate(self.PERSONS) if i == iid]
        self.assertEqual(ds.keys, ["train2017/%012d/%d" % (self.PERSONS[r][0], r) for r in order])
        self.assertEqual(ds.t["__row__"].tolist(), order)
        for i, row in enumerate(order):
            ann = self.coco["annotations"][row]
            m = region_affine(ann["bbox"], 1.25, 24, 32, fit_aspect=True)
            np.testing.assert_allclose(ds.affine(i), m, atol=1e-9)
            kp = np.array(ann["keypoints"], np.float64).reshape(17, 3)
            np.testing.assert_allclose(ds.t["keypoints"][i], fx.apply_affine(m, kp), atol=1e-9)
            # Every other value of the row, as the table has it.
            np.testing.assert_array_equal(ds.t["bbox"][i], ann["bbox"])
            for name in ("id", "image_id", "category_id", "iscrowd", "num_keypoints"):
                self.assertEqual(int(ds.t[name][i]), ann[name], name)
            self.assertEqual(float(ds.t["area"][i]), ann["area"])
            self.assertEqual(json.loads(ds.string("segmentation", i)), ann["segmentation"])
            img = next(im for im in self.coco["images"] if im["id"] == ann["image_id"])
            self.assertEqual(int(ds.t["image.width"][i]), img["width"])
            self.assertEqual(int(ds.t["image.height"][i]), img["height"])
            out = fx.decode_rgb(ds.blob(i))
            ref = fx.warp_ref(self.src[ann["image_id"]], m, 24, 32)
            err = fx.mean_abs(out, ref)
            self.assertLess(err, 1.0 if m[0, 0] >= 0.5 else 3.0)
            shifted = m.copy()
            shifted[1, 2] += 0.5
            self.assertGreater(fx.mean_abs(out, fx.warp_ref(self.src[ann["image_id"]], shifted, 24, 32)),
                               max(2 * err, 0.3))
        table = json.loads(ds.meta["table"])
        self.assertEqual(table["format"], "coco")
        self.assertEqual(table["metadata"]["categories"], self.coco["categories"])
        with open(self.json, "rb") as f:
            self.assertEqual(ds.manifest["table"]["crc32"], fx.crc_hex(f.read()))
        self.assertEqual(ds.manifest["counts"]["unused_images"], 1)
        info = fx.run(["info", ds.out])
        self.assertIn("person with 17 keypoints, a skeleton of 19 links", info.stdout.decode())
        info = json.loads(fx.run(["info", ds.out, "--json"]).stdout)
        self.assertEqual(info["table"]["metadata"]["categories"][0]["skeleton"], COCO_SKELETON)
        # preview draws the table's skeleton without being told: the same sheet as --skeleton coco.
        sheets = []
        for extra in ([], ["--skeleton", "coco"], ["--skeleton", "1-2"]):
            out = self.path("sheet%d.png" % len(sheets))
            p = fx.run(["preview", ds.out, "-o", out, "--tile-height", "64", *extra])
            self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
            with open(out, "rb") as f:
                sheets.append(f.read())
        self.assertEqual(sheets[0], sheets[1])
        self.assertNotEqual(sheets[0], sheets[2])

    def test_without_the_prefix_the_message_says_so(self):
        p, _ = fx.convert(self, [self.zip], "--table", self.json, expect=1)
        err = p.stderr.decode()
        self.assertIn("'%012d.jpg'" % self.PERSONS[0][0], err)
        self.assertIn("--table-prefix", err)


def humandata_npz(path, image_paths, rng):
    """An mmhuman3d HumanData file as HumanData.dump writes it: np.savez_compressed of the
    N-long arrays, 0-d flags, a <U5 config and the pickled dicts smplx and meta."""
    n = len(image_paths)
    bbox = np.zeros((n, 5))
    bbox[:, 0] = rng.uniform(2, 20, n)
    bbox[:, 1] = rng.uniform(2, 16, n)
    bbox[:, 2] = rng.uniform(16, 30, n)
    bbox[:, 3] = rng.uniform(16, 30, n)
    bbox[:, 4] = 1.0
    kp2d = np.concatenate([rng.uniform(0, 48, (n, 127, 2)), rng.integers(0, 2, (n, 127, 1))], axis=2)
    smplx = {"body_pose": rng.standard_normal((n, 21, 3)).astype(np.float32),
             "global_orient": rng.standard_normal((n, 3)).astype(np.float32),
             "betas": rng.standard_normal((n, 10)).astype(np.float32),
             "transl": rng.standard_normal((n, 3)).astype(np.float32),
             "left_hand_pose": rng.standard_normal((n, 15, 3)).astype(np.float32),
             "right_hand_pose": rng.standard_normal((n, 15, 3)).astype(np.float32),
             "expression": rng.standard_normal((n, 10)).astype(np.float32),
             "jaw_pose": rng.standard_normal((n, 3)).astype(np.float32),
             "leye_pose": rng.standard_normal((n, 3)).astype(np.float32),
             "reye_pose": rng.standard_normal((n, 3)).astype(np.float32)}
    meta = {"gender": np.array(rng.choice(["male", "female"], n)),
            "age": np.array(rng.choice(["31-50", "kid", "18-30"], n)),
            "kid": rng.random(n) < 0.3,
            "occlusion": rng.uniform(0, 80, n),
            "ethnicity": np.array(rng.choice(["asian", "black", "white", "hispanic"], n))}
    arrays = dict(image_path=np.array(image_paths), bbox_xywh=bbox, keypoints2d=kp2d,
                  keypoints3d=rng.standard_normal((n, 127, 4)),
                  keypoints2d_mask=np.ones(190, np.uint8), keypoints3d_mask=np.ones(190, np.uint8),
                  config=np.array("agora"), __data_len__=np.array(n),
                  __key_strict__=np.array(False), __keypoints_compressed__=np.array(False),
                  smplx=np.array(smplx, dtype=object), meta=np.array(meta, dtype=object))
    np.savez_compressed(path, **arrays)
    return arrays, smplx, meta


class HumanData(fx.TmpCase):
    """HMR on AGORA with mmhuman3d: one npz, one row per person, several persons per frame."""

    @classmethod
    def build(cls):
        rng = np.random.default_rng(11)
        cls.root = cls.tmp + "/agora"
        frames = ["images/train/ag_trainset_renderpeople_bfh_archviz_5_10_cam02_%05d_1280x720.png" % i
                  for i in range(3)]
        cls.src = {}
        for i, f in enumerate(frames):
            os.makedirs(os.path.dirname(os.path.join(cls.root, f)), exist_ok=True)
            cls.src[f] = fx.smooth_rgb(64, 48, seed=50 + i)
            with open(os.path.join(cls.root, f), "wb") as out:
                out.write(fx.png(cls.src[f]))
        # 7 persons: consecutive rows share a frame, as in AGORA's files.
        cls.paths = [frames[0]] * 3 + [frames[1]] * 2 + [frames[2]] * 2
        cls.npz = cls.tmp + "/agora_train_smplx.npz"
        cls.arrays, cls.smplx, cls.meta = humandata_npz(cls.npz, cls.paths, rng)

    def test_one_crop_per_person(self):
        _, ds = fx.convert(self, [self.root], "--table", self.npz, "--crop", "field:bbox_xywh",
                           "--square", "--size", "32", "--points", "keypoints2d", "--format", "png")
        n = len(self.paths)
        self.assertEqual(ds.keys, [p[:-4] + "/%d" % r for r, p in enumerate(self.paths)])
        for r in range(n):
            m = region_affine(self.arrays["bbox_xywh"][r], 1.0, 32, 32, square=True)
            np.testing.assert_allclose(ds.affine(r), m, atol=1e-9)
            np.testing.assert_allclose(ds.t["keypoints2d"][r], fx.apply_affine(m, self.arrays["keypoints2d"][r]),
                                       atol=1e-9)
            np.testing.assert_array_equal(ds.t["bbox_xywh"][r], self.arrays["bbox_xywh"][r])
            np.testing.assert_array_equal(ds.t["keypoints3d"][r], self.arrays["keypoints3d"][r])
            for k, v in self.smplx.items():
                np.testing.assert_array_equal(ds.t["smplx." + k][r], v[r], k)
                self.assertEqual(ds.t["smplx." + k].dtype, v.dtype)
            for k in ("gender", "age", "ethnicity"):
                self.assertEqual(ds.string("meta." + k, r), str(self.meta[k][r]))
            self.assertEqual(bool(ds.t["meta.kid"][r]), bool(self.meta["kid"][r]))
            self.assertEqual(float(ds.t["meta.occlusion"][r]), float(self.meta["occlusion"][r]))
            out = fx.decode_rgb(ds.blob(r))
            ref = fx.warp_ref(self.src[self.paths[r]], m, 32, 32)
            self.assertLess(fx.mean_abs(out, ref), 0.1 if m[0, 0] >= 0.5 else 3.0)
        table = json.loads(ds.meta["table"])
        self.assertEqual(table["format"], "npz")
        self.assertEqual(table["metadata"]["config"], "agora")
        self.assertEqual(ds.manifest["table"]["rows"], n)
        self.assertEqual(ds.manifest["table"]["images"], 3)


    def test_arrays_not_n_long_are_said_and_kept_or_warned(self):
        """A HumanData array whose first axis is not N (a row short, as a broken export leaves
        it) is no column: said on stderr, kept in the table metadata when small, a warning when
        its values are left out; recorded in the manifest's table entry either way."""
        with np.load(self.npz, allow_pickle=True) as z:
            members = {k: z[k] for k in z.files}
        n = len(self.paths)
        members["keypoints2d"] = members["keypoints2d"][:n - 1]  # one row short, small
        members["big"] = np.zeros((n - 1, 4097), np.float32)  # one row short, over the bound
        bad = self.path("short_rows.npz")
        np.savez(bad, **members)
        p, ds = fx.convert(self, [self.root], "--table", bad, "--format", "png")
        err = p.stderr.decode()
        self.assertIn(f"info: table '{bad}': not a label column: 'keypoints2d': shape ({n - 1}, ", err)
        self.assertIn("rows long (kept in the annotation file's table metadata)", err)
        self.assertIn(f"warning: table '{bad}': not a label column: 'big': shape ({n - 1}, 4097), not N = {n} "
                      "rows long (left out: over 4096 elements for the metadata)", err)
        self.assertNotIn("keypoints2d", ds.t)
        np.testing.assert_array_equal(np.asarray(json.loads(ds.meta["table"])["metadata"]["keypoints2d"]),
                                      members["keypoints2d"])
        self.assertEqual(sum("not N = %d rows long" % n in w and w.split("'")[1] in ("keypoints2d", "big")
                             for w in ds.manifest["table"]["ignored"]), 2)


class TableRunGuarantees(fx.TmpCase):
    """Resume and --shard I/N + merge with a table (JSON Lines, rows in another order than the
    images in the tar, two rows per image, a nullable column)."""

    IMAGES = 60

    @classmethod
    def build(cls):
        rng = np.random.default_rng(5)
        jpgs = [fx.jpg(fx.smooth_rgb(64, 48, seed=s), quality=90) for s in range(4)]
        cls.tar = fx.write_tar(cls.tmp + "/img.tar", [("img/%03d.jpg" % i, jpgs[i % 4]) for i in range(cls.IMAGES)])
        rows = []
        for i in rng.permutation(cls.IMAGES).tolist() * 2:
            x, y = rng.uniform(0, 30, 2).round(2).tolist()
            rows.append({"image_path": "./img/%03d.jpg" % i, "bbox": [x, y, 20, 16],
                         "kp": [[x + 2, y + 3], [x + 10, y + 8]], "note": None if len(rows) % 3 else "n%d" % len(rows)})
        cls.rows = rows
        cls.table = cls.tmp + "/rows.jsonl"
        with open(cls.table, "w") as f:
            f.write("\n".join(json.dumps(r) for r in rows) + "\n")
        cls.ref = cls.tmp + "/ref"
        p = fx.run(cls.args(cls.ref))
        assert p.returncode == 0, p.stderr

    @classmethod
    def args(cls, out, *extra):
        return ["convert", cls.tar, "-o", out, "--table", cls.table, "--crop", "field:bbox", "--size", "16",
                "--points", "kp", "--shard-size", "16K", "-j", "2", *extra]

    def test_values_and_nulls(self):
        ds = fx.Dataset(self.ref)
        self.assertEqual(len(ds.keys), len(self.rows))
        for i, key in enumerate(ds.keys):
            r = int(key.rsplit("/", 1)[1])
            self.assertEqual(int(ds.t["__row__"][i]), r)
            row = self.rows[r]
            m = region_affine(row["bbox"], 1.0, 16, 16)
            np.testing.assert_allclose(ds.t["kp"][i], fx.apply_affine(m, row["kp"]), atol=1e-9)
            self.assertEqual(bool(ds.t["note.valid"][i]), row["note"] is not None)
            if row["note"] is not None:
                self.assertEqual(ds.string("note", i), row["note"])

    def test_progress_counts_rows_against_rows(self):
        # Issue #25, 16c: the count was of rows written, the total of images ("120 of 60").
        p = fx.run(self.args(self.path("progress"), "--progress", "plain"))
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 0, err)
        lines = re.findall(r"progress: +(\d+)% (\d+) of ~?(\d+) samples", err)
        self.assertTrue(lines, err)
        for pct, done, total in lines:
            self.assertLessEqual(int(done), int(total), err)
        self.assertEqual(lines[-1], ("100", str(len(self.rows)), str(len(self.rows))), err)

    def test_resume_after_kill_is_byte_identical(self):
        import test_resume  # the kill-at-checkpoint helper
        out = self.path("killed")
        code, cp = test_resume.kill_at_checkpoint(self.args(out), out, 30)
        self.assertEqual(code, -9, "finished before the kill")
        self.assertGreaterEqual(cp["entries"], 30)
        p = fx.run(self.args(out, "--resume"))
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        names = sorted(n for n in os.listdir(self.ref) if n == "labels.safetensors" or n.startswith("shard-"))
        for n in names:
            with open(os.path.join(out, n), "rb") as a, open(os.path.join(self.ref, n), "rb") as b:
                self.assertEqual(a.read(), b.read(), n)

    def test_shards_merge_to_the_whole(self):
        parts = []
        for i in range(2):
            part = self.path("part%d" % i)
            p = fx.run(self.args(part, "--shard", "%d/2" % i))
            self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
            parts.append(part)
        merged = self.path("merged")
        p = fx.run(["merge", *parts, "-o", merged])
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        ds, ref = fx.Dataset(merged), fx.Dataset(self.ref)
        self.assertEqual(sorted(ds.keys), sorted(ref.keys))
        where = {k: i for i, k in enumerate(ref.keys)}
        for i, k in enumerate(ds.keys):
            np.testing.assert_array_equal(ds.t["kp"][i], ref.t["kp"][where[k]])
            np.testing.assert_array_equal(ds.affine(i), ref.affine(where[k]))
            self.assertEqual(ds.blob(i), ref.blob(where[k]))
        self.assertEqual(json.loads(ds.meta["table"]), json.loads(ref.meta["table"]))


if __name__ == "__main__":
    unittest.main()
