"""End-to-end: the geometric kinds of labels declared at conversion (issue #38, sections 1 and 3,
conversion side): --points3d, --axis-angle, --camera, --polygons, --masks, ragged --points and
--boxes, the schema's `geometry` key, the warning for undeclared geometric-looking fields, and
the bad inputs. Every value is checked against numpy / OpenCV applying the recorded
`__affine__` to the source labels, read back with the spec-only reader (st_reader); the masks
against a rasterisation written here from COCO's spec (cv2.fillPoly; RLE decoded by this file's
own decoder, compressed strings made by its own encoder, both from cocoapi's maskApi.c format)
warped with cv2.warpAffine(INTER_NEAREST)."""
import json
import os
import subprocess
import sys
import unittest
import zipfile

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

W, H = 160, 120
# mmhuman3d's _flip_smpl_pose index array (data/datasets/pipelines/transforms.py), as joints:
# the permutation a flip applies to SMPL's 24 joints. The pairs are read off it here.
SMPL_FLIP = [0, 2, 1, 3, 5, 4, 6, 8, 7, 9, 11, 10, 12, 14, 13, 15, 17, 16, 19, 18, 21, 20, 23, 22]
# _flip_smplx_pose's array (of values, minus 3) / 3: SMPL-X body_pose's 21 joints.
SMPLX_FLIP = [1, 0, 2, 4, 3, 5, 7, 6, 8, 10, 9, 11, 13, 12, 14, 16, 15, 18, 17, 20, 19]


def pairs_of(perm):
    return [[i, j] for i, j in enumerate(perm) if i < j]


def rle_decode(counts, h, w):
    """COCO RLE -> h x w 0/1 mask: runs of 0s then 1s alternately, column-major."""
    if isinstance(counts, str):  # maskApi's rleFrString
        cnts, p = [], 0
        while p < len(counts):
            x, k, more = 0, 0, True
            while more:
                c = ord(counts[p]) - 48
                x |= (c & 0x1F) << (5 * k)
                more = bool(c & 0x20)
                p, k = p + 1, k + 1
                if not more and c & 0x10:
                    x |= -1 << (5 * k)
            if len(cnts) > 2:
                x += cnts[-2]
            cnts.append(x)
        counts = cnts
    flat = np.zeros(h * w, np.uint8)
    at = 0
    for i, c in enumerate(counts):
        flat[at:at + c] = i % 2
        at += c
    assert at == h * w
    return flat.reshape(w, h).T


def rle_encode_string(counts):
    """maskApi's rleToString."""
    s = []
    for i, x in enumerate(counts):
        if i > 2:
            x -= counts[i - 2]
        more = True
        while more:
            c = x & 0x1F
            x >>= 5
            more = (x != -1) if (c & 0x10) else (x != 0)
            s.append(chr((c | (0x20 if more else 0)) + 48))
    return "".join(s)


def rle_counts(mask):
    flat = mask.T.reshape(-1)
    counts, value, run = [], 0, 0
    for v in flat:
        if v != value:
            counts.append(run)
            value, run = v, 0
        run += 1
    counts.append(run)
    return counts


def fill_polygons(polys, w, h):
    m = np.zeros((h, w), np.uint8)
    for p in polys:
        pts = np.floor(np.asarray(p, np.float64).reshape(-1, 2) + 0.5).astype(np.int32)
        cv2.fillPoly(m, [pts], 1, lineType=cv2.LINE_8)
    return m


class GeometryKindsTest(fx.TmpCase):
    @classmethod
    def build(cls):
        rng = np.random.default_rng(38)
        cls.src = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
        cls.labels = []
        members = []
        for i in range(3):
            n_dets, n_kp = [2, 0, 3][i], [3, 0, 5][i]
            lab = {
                "bbox": [20 + 7 * i, 15 + 3 * i, 90, 70],
                "keypoints": rng.uniform(0, W, (n_kp, 2)).round(3).tolist(),
                "dets": [[*rng.uniform(0, 120, 2).round(2), *rng.uniform(5, 30, 2).round(2)] for _ in range(n_dets)],
                "kp3d": rng.uniform(-1, 1, (4, 3)).round(4).tolist(),
                "K": [[500.0 + i, 0.0, 81.5], [0.0, 480.0, 58.25], [0.0, 0.0, 1.0]],
                "cam4": [300.0, 310.0 + i, 79.0, 61.5],
                "global_orient": rng.uniform(-1, 1, 3).round(4).tolist(),
                "body_pose": rng.uniform(-1, 1, 69).round(4).tolist(),
                "seg": [rng.uniform(10, 150, 8).round(2).tolist(), rng.uniform(10, 110, 6 + 2 * i).round(2).tolist()],
            }
            cls.labels.append(lab)
            members += [("a/%d.png" % i, fx.png(cls.src)), ("a/%d.json" % i, fx.js(lab))]
        cls.tar = fx.write_tar(os.path.join(cls.tmp, "in.tar"), members)
        cls.flags = ["--crop", "field:bbox", "--crop-scale", "1.2", "--size", "64x48", "--format", "png",
                     "--points", "keypoints", "--boxes", "dets", "--points3d", "kp3d", "--camera", "K",
                     "cam4:edges", "--axis-angle", "global_orient", "body_pose:smpl-body",
                     "--polygons", "seg"]
        cls.proc, cls.ds = fx.convert(cls, [cls.tar], *cls.flags)

    def value(self, name, i):
        spec = self.ds.schema[name]
        if spec["kind"] == "json":
            return json.loads(self.ds.string(name, i))
        return self.ds.ragged(name, i) if spec["ragged"] else self.ds.t[name][i]

    def test_camera_projects_as_the_transformed_point(self):
        for i, lab in enumerate(self.labels):
            m = self.ds.affine(i).reshape(2, 3)
            K, K2 = np.array(lab["K"]), np.asarray(self.value("K", i), np.float64)
            fx_, fy, cx, cy = lab["cam4"]
            C = np.array([[fx_, 0, cx], [0, fy, cy], [0, 0, 1]])
            f4 = np.asarray(self.value("cam4", i), np.float64)
            C2 = np.array([[f4[0], 0, f4[2]], [0, f4[1], f4[3]], [0, 0, 1]])
            for P in np.asarray(lab["kp3d"]) + [0, 0, 3]:
                p = (K @ P)[:2] / P[2]
                np.testing.assert_allclose((K2 @ P)[:2] / P[2], fx.apply_affine(m, [p])[0], atol=1e-3)
                # edges: the principal point's pixel is (0.5, 0.5) off OpenCV's.
                q = (C @ P)[:2] / P[2]
                want = fx.apply_affine(m, [q - 0.5])[0] + 0.5
                np.testing.assert_allclose((C2 @ P)[:2] / P[2], want, atol=1e-3)

    def test_points3d_and_poses_are_unchanged(self):
        for i, lab in enumerate(self.labels):
            np.testing.assert_array_equal(self.value("kp3d", i), lab["kp3d"])
            np.testing.assert_array_equal(self.value("global_orient", i), lab["global_orient"])
            np.testing.assert_array_equal(self.value("body_pose", i), lab["body_pose"])

    def test_schema_records_the_kinds(self):
        g = {name: e.get("geometry") for name, e in self.ds.schema.items()}
        self.assertEqual(g["keypoints"], {"kind": "points"})
        self.assertEqual(g["dets"], {"kind": "boxes", "box_format": "xywh", "convention": "edges"})
        self.assertEqual(g["kp3d"], {"kind": "points3d"})
        self.assertEqual(g["K"], {"kind": "camera", "convention": "centers", "layout": "K"})
        self.assertEqual(g["cam4"], {"kind": "camera", "convention": "edges", "layout": "fxfycxcy"})
        self.assertEqual(g["global_orient"], {"kind": "axis_angle", "layout": "root", "joints": 1, "pairs": []})
        body = [[a - 1, b - 1] for a, b in pairs_of(SMPL_FLIP) if a >= 1]
        self.assertEqual(g["body_pose"], {"kind": "axis_angle", "layout": "smpl-body", "joints": 23, "pairs": body})
        self.assertEqual(g["seg"], {"kind": "polygons"})
        self.assertIsNone(g["bbox"])
        oo = self.ds.manifest["output_options"]
        self.assertEqual(oo["--points3d"], ["kp3d"])
        self.assertEqual(oo["--camera"], ["K:centers", "cam4:edges"])
        self.assertEqual(oo["--axis-angle"], ["global_orient:root", "body_pose:smpl-body"])
        self.assertEqual(oo["--polygons"], ["seg"])

    def test_layout_pairs_are_mmhuman3ds(self):
        for layout, flags, want in [
                ("smpl", 72, pairs_of(SMPL_FLIP)),
                ("smplx-body", 63, pairs_of(SMPLX_FLIP)),
                ("mano-left", 45, [])]:
            members = [("a/0.png", fx.png(self.src)),
                       ("a/0.json", fx.js({"p": [0.1] * flags, "q": [0.2] * 45}))]
            tar = fx.write_tar(self.path("layout-%s.tar" % layout), members)
            extra = ["q:mano-right"] if layout == "mano-left" else []
            _, ds = fx.convert(self, [tar], "--axis-angle", "p:" + layout, *extra, "--format", "png")
            geo = json.loads(ds.meta["schema"])["p"]["geometry"]
            self.assertEqual(geo["pairs"], want, layout)
            self.assertEqual(geo["joints"], flags // 3)
            if extra:
                self.assertEqual(geo["partner"], "q")
                self.assertEqual(json.loads(ds.meta["schema"])["q"]["geometry"]["partner"], "p")
        _, ds = fx.convert(self, [fx.write_tar(self.path("pairs.tar"), [
            ("a/0.png", fx.png(self.src)), ("a/0.json", fx.js({"p": [[0.5, 0, 0]] * 5}))])],
            "--axis-angle", "p:pairs:1-2,3-4", "--format", "png")
        self.assertEqual(json.loads(ds.meta["schema"])["p"]["geometry"],
                         {"kind": "axis_angle", "layout": "pairs", "joints": 5, "pairs": [[1, 2], [3, 4]]})

    def test_polygons_follow_the_affine(self):
        for i, lab in enumerate(self.labels):
            m = self.ds.affine(i).reshape(2, 3)
            got = self.value("seg", i)
            self.assertEqual(len(got), len(lab["seg"]))
            for g, p in zip(got, lab["seg"]):
                want = fx.apply_affine(m, np.reshape(p, (-1, 2))).reshape(-1)
                np.testing.assert_allclose(g, want, atol=1e-9)

    def test_ragged_boxes_and_points_follow_element_by_element(self):
        """A sample with no boxes or points (an empty list) was refused before #38."""
        # An empty list after a non-empty one made the field JSON text before #38.
        for name in ("dets", "keypoints"):
            self.assertEqual(self.ds.schema[name]["kind"], "numeric", name)
            self.assertTrue(self.ds.schema[name]["ragged"], name)
        for i, lab in enumerate(self.labels):
            m = self.ds.affine(i).reshape(2, 3)
            got = np.asarray(self.value("dets", i), np.float64).reshape(-1, 4)
            self.assertEqual(len(got), len(lab["dets"]))
            for g, (x, y, w, h) in zip(got, lab["dets"]):
                (x0, y0), (x1, y1) = fx.apply_affine(m, [[x - 0.5, y - 0.5], [x + w - 0.5, y + h - 0.5]]) + 0.5
                np.testing.assert_allclose(g, [x0, y0, x1 - x0, y1 - y0], atol=1e-9)
            kp = np.asarray(self.value("keypoints", i), np.float64).reshape(-1, 2)
            self.assertEqual(len(kp), len(lab["keypoints"]))
            if len(kp):
                np.testing.assert_allclose(kp, fx.apply_affine(m, lab["keypoints"]), atol=1e-9)

    # ------------------------------------------------ masks

    def mask_dataset(self, anns, *flags, name="masks"):
        members = []
        for i, a in enumerate(anns):
            members += [("m/%d.png" % i, fx.png(self.src)), ("m/%d.json" % i, fx.js({"anns": a}))]
        tar = fx.write_tar(self.path(name + ".tar"), members)
        return fx.convert(self, [tar], "--instances", "anns", "--crop", "field:anns.bbox", "--square",
                          "--size", "48", "--format", "png", "--masks", "anns.segmentation", *flags)

    def test_masks_match_fillpoly_and_rle_warped_nearest(self):
        rng = np.random.default_rng(7)
        blob = np.zeros((H, W), np.uint8)
        cv2.circle(blob, (70, 50), 25, 1, -1)
        blob[80:100, 20:60] = 1
        counts = rle_counts(blob)
        poly = [rng.uniform(5, 150, 10).round(2).tolist(), [100.5, 10.0, 150.0, 10.0, 150.0, 60.0]]
        anns = [[{"bbox": [30, 20, 80, 70], "segmentation": poly},
                 {"bbox": [10, 30, 90, 80], "segmentation": {"counts": counts, "size": [H, W]}}],
                [{"bbox": [40, 25, 60, 60], "segmentation": {"counts": rle_encode_string(counts), "size": [H, W]}}]]
        _, ds = self.mask_dataset(anns)
        self.assertEqual(json.loads(ds.meta["blob_geometry"]), {"__anns.segmentation__": {"kind": "mask"}})
        self.assertIn("__anns.segmentation__", json.loads(ds.meta["blobs"]))
        self.assertNotIn("anns.segmentation", ds.schema)  # the mask replaces it
        self.assertNotIn("anns.segmentation.counts", ds.schema)
        self.assertEqual(ds.keys, ["m/0/0", "m/0/1", "m/1/0"])
        np.testing.assert_array_equal(rle_decode(rle_encode_string(counts), H, W), blob)
        wants = [fill_polygons(poly, W, H), rle_decode(counts, H, W), blob]
        for i, src in enumerate(wants):
            m = ds.affine(i).reshape(2, 3)
            want = cv2.warpAffine(src, m, (48, 48), flags=cv2.INTER_NEAREST, borderValue=0)
            got = fx.decode_unchanged(ds.blob(i, "__anns.segmentation__"))
            self.assertEqual(got.dtype, np.uint8)
            np.testing.assert_array_equal(got, want, "sample %d" % i)
            self.assertGreater(int(got.sum()), 0)

    def test_a_field_both_masks_and_polygons_name_is_rasterised_from_its_source_vertices(self):
        """--masks F --polygons F: the mask is F's source polygons filled, warped once, and F's
        vertices are kept, moved. (Before the sample processor's split the vertices were moved
        first and the moved ones filled in the source frame, then warped again.)"""
        poly = [[30.0, 25.0, 100.0, 30.0, 90.0, 85.0, 35.0, 80.0]]
        anns = [[{"bbox": [20, 15, 100, 80], "segmentation": poly}]]
        _, ds = self.mask_dataset(anns, "--polygons", "anns.segmentation", name="masks-polygons")
        m = ds.affine(0).reshape(2, 3)
        self.assertFalse(np.allclose(m, [[1, 0, 0], [0, 1, 0]]))  # the crop moves the vertices
        want = cv2.warpAffine(fill_polygons(poly, W, H), m, (48, 48), flags=cv2.INTER_NEAREST,
                              borderValue=0)
        got = fx.decode_unchanged(ds.blob(0, "__anns.segmentation__"))
        self.assertGreater(int(want.sum()), 0)
        np.testing.assert_array_equal(got, want)
        spec = ds.schema["anns.segmentation"]
        kept = (json.loads(ds.string("anns.segmentation", 0)) if spec["kind"] == "json" else
                ds.ragged("anns.segmentation", 0) if spec["ragged"] else ds.t["anns.segmentation"][0])
        self.assertEqual(len(kept), 1)
        np.testing.assert_allclose(np.reshape(kept[0], -1),
                                   fx.apply_affine(m, np.reshape(poly[0], (-1, 2))).reshape(-1), atol=1e-9)

    def test_cookbook_coco_instance_masks(self):
        """docs/cookbook.md's COCO instance-segmentation recipe, run as a user copies it, on a
        small input of COCO's layout: persons with polygons, and a crowd with an RLE."""
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "cookbook.md")) as f:
            text = f.read()
        marker = "<!-- run by tests/e2e/test_geometry_kinds.py (coco-masks)"
        block = text[text.index(marker):].split("```sh\n", 1)[1].split("```", 1)[0]
        work = self.path("cookbook")
        os.makedirs(os.path.join(work, "annotations"))
        os.makedirs(os.path.join(work, "bin"))
        os.symlink(os.path.abspath(fx.TARMAC), os.path.join(work, "bin", "tarmac"))
        sizes = {1: (160, 120), 2: (200, 150)}
        crowd = np.zeros((150, 200), np.uint8)
        crowd[30:90, 40:75] = 1
        anns = [
            (1, [20.5, 10, 60, 70], [[25.0, 12.5, 78.2, 15.0, 70.4, 78.9, 22.0, 60.0]]),
            (2, [100, 40, 80, 90], [[110.0, 45.0, 170.0, 50.0, 150.0, 120.0], [120, 100, 160, 100, 140, 128]]),
            (2, [40, 30, 35, 60], {"counts": rle_counts(crowd), "size": [150, 200]}),
        ]
        coco = {"images": [{"id": i, "file_name": "%012d.jpg" % i, "width": w, "height": h}
                           for i, (w, h) in sizes.items()],
                "annotations": [{"id": k + 1, "image_id": img, "category_id": 1, "bbox": box,
                                 "iscrowd": int(isinstance(seg, dict)), "area": 1.0,
                                 "num_keypoints": 1, "keypoints": [box[0] + 5, box[1] + 5, 2] + [0] * 48,
                                 "segmentation": seg} for k, (img, box, seg) in enumerate(anns)],
                "categories": [{"id": 1, "name": "person", "keypoints": ["nose"] * 17, "skeleton": []}]}
        with open(os.path.join(work, "annotations", "person_keypoints_train2017.json"), "w") as f:
            json.dump(coco, f)
        with zipfile.ZipFile(os.path.join(work, "train2017.zip"), "w") as z:
            for i, (w, h) in sizes.items():
                z.writestr("train2017/%012d.jpg" % i, fx.jpg(self.src if (w, h) == (W, H) else
                                                              cv2.resize(self.src, (w, h))))
        env = dict(os.environ, PATH=os.path.join(work, "bin") + os.pathsep + os.environ["PATH"])
        p = subprocess.run(["bash", "-ec", block], cwd=work, env=env, capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        ds = fx.Dataset(os.path.join(work, "coco-masks"))
        self.assertNotIn("segmentation", ds.schema)
        self.assertEqual(ds.schema["bbox"]["geometry"]["kind"], "boxes")
        self.assertEqual(ds.schema["keypoints"]["geometry"], {"kind": "points"})
        self.assertEqual(len(ds.keys), 3)
        for i, (img, _, seg) in enumerate(anns):
            w, h = sizes[img]
            src = rle_decode(seg["counts"], h, w) if isinstance(seg, dict) else fill_polygons(seg, w, h)
            m = ds.affine(i).reshape(2, 3)
            want = cv2.warpAffine(src, m, (256, 256), flags=cv2.INTER_NEAREST, borderValue=0)
            got = fx.decode_unchanged(ds.blob(i, "__segmentation__"))
            np.testing.assert_array_equal(got, want, "row %d" % i)
            self.assertGreater(int(got.sum()), 100)

    # ------------------------------------------------ the warning

    def test_undeclared_geometric_fields_warn_once(self):
        members = []
        for i in range(2):
            members += [("w/%d.png" % i, fx.png(self.src)),
                        ("w/%d.json" % i, fx.js({"Joints2D": [[1, 2]], "person": {"intrinsics": [1, 2, 3, 4]},
                                                 "score": 0.5, "keypoints": [[3, 4]]}))]
        tar = fx.write_tar(self.path("warn.tar"), members)
        p, _ = fx.convert(self, [tar], "--crop", "center", "--size", "32", "--points", "keypoints")
        err = p.stderr.decode()
        self.assertEqual(err.count("field 'Joints2D'"), 1, err)
        self.assertIn("--points Joints2D", err)
        self.assertEqual(err.count("field 'person.intrinsics'"), 1, err)
        self.assertIn("--camera person.intrinsics", err)
        self.assertNotIn("'score'", err)
        self.assertNotIn("field 'keypoints'", err)
        p, _ = fx.convert(self, [tar], "--format", "png")  # no crop, no resize: nothing moved
        self.assertNotIn("Joints2D", p.stderr.decode())

    # ------------------------------------------------ bad input

    def refuse(self, members, *flags, expect=1, says=()):
        tar = fx.write_tar(self.path("bad-%d.tar" % len(os.listdir(self.tmp))), members)
        out = self.path("bad-out-%d" % len(os.listdir(self.tmp)))
        p = fx.run(["convert", tar, "-o", out, "--crop", "center", "--size", "32", *flags])
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, expect, err)
        for s in says:
            self.assertIn(s, err)
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))
        return err

    def test_bad_inputs_name_sample_field_and_reason(self):
        img = ("b/0.png", fx.png(self.src))
        self.refuse([img, ("b/0.json", fx.js({"pose": [0.1] * 60}))], "--axis-angle", "pose:smpl-body",
                    says=["b/0", "'pose'", "23 joints", "69 values, not 60"])
        self.refuse([img, ("b/0.json", fx.js({"K": [[1, 0], [0, 1]]}))], "--camera", "K",
                    says=["b/0", "'K'", "[2, 2]", "[3, 3]"])
        self.refuse([img, ("b/0.json", fx.js({"seg": [[1, 2, 3, 4, 5]]}))], "--polygons", "seg",
                    says=["b/0", "'seg'", "odd"])
        self.refuse([img, ("b/0.json", fx.js({"seg": {"counts": [5, 3], "size": [H, W]}}))], "--masks", "seg",
                    says=["b/0", "'seg'", "sum to 8"])
        self.refuse([img, ("b/0.json", fx.js({"seg": {"counts": [50, 50], "size": [10, 10]}}))], "--masks", "seg",
                    says=["b/0", "'seg'", "another image's"])
        self.refuse([img, ("b/0.json", fx.js({"seg": {"counts": "0!", "size": [H, W]}}))], "--masks", "seg",
                    says=["b/0", "'seg'", "compressed RLE"])

    def test_bad_declarations_are_usage_errors(self):
        img = ("b/0.png", fx.png(self.src))
        lab = ("b/0.json", fx.js({"p": [0.1] * 15, "q": [0.1] * 45}))
        self.refuse([img, lab], "--axis-angle", "p:pairs:1-2,2-3", expect=2, says=["pair 2-3", "joint 2"])
        self.refuse([img, lab], "--axis-angle", "p:pairs:1-x", expect=2, says=["'x'"])
        self.refuse([img, lab], "--axis-angle", "q:mano-left", expect=2, says=["mano-right"])
        self.refuse([img, lab], "--axis-angle", "p:smpl-hands", expect=2, says=["unknown layout 'smpl-hands'"])
        self.refuse([img, lab], "--camera", "p:pixels", expect=2, says=["'pixels'"])
        self.refuse([img, lab], "--points", "p", "--points3d", "p", expect=2, says=["--points and --points3d"])

    def test_table_columns_that_cannot_fit_are_usage_errors(self):
        """A table shows its columns' shapes before any sample: refused then, naming the column."""
        root = self.path("table-root")
        os.makedirs(os.path.join(root, "a"))
        with open(os.path.join(root, "a", "0.png"), "wb") as f:
            f.write(fx.png(self.src))
        npz = self.path("poses.npz")
        np.savez(npz, image_path=np.array(["a/0.png"]), pose=np.zeros((1, 60)), K=np.zeros((1, 2, 2)))
        for flags, says in [(["--axis-angle", "pose:smpl-body"], ["column 'pose'", "[60]", "69 values"]),
                            (["--camera", "K"], ["column 'K'", "[2, 2]", "[3, 3]"])]:
            out = self.path("table-out-%d" % len(os.listdir(self.tmp)))
            p = fx.run(["convert", root, "--table", npz, "-o", out, "--size", "32", *flags])
            err = p.stderr.decode()
            self.assertEqual(p.returncode, 2, err)
            for w in says:
                self.assertIn(w, err)
            self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))


if __name__ == "__main__":
    unittest.main()
