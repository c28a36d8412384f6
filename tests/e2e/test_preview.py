"""End-to-end: `tarmac preview`, checked against geometry computed here.

The source is written with numpy/cv2: images with keypoints and a box at known source
positions, a 16-bit depth map. `convert --crop box:... --size 128` moves them; where each
keypoint lands on the sheet is computed here from the crop chosen (format.md 3's affine of the
region) and the sheet's documented layout (cli.md, "tarmac preview": margin 8, gap 8, caption
20, tiles scaled to --tile-height with pixel centres kept). The sheet's pixels there must have
the point colour, a box edge the box colour; the key's caption is not blank; the depth tile is
the stored map colour-mapped (viridis over its non-zero range, computed here with cv2).
"""
import json
import os
import sys

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

W, H = 160, 120
CROP = (20, 10, 100, 100)  # box:X,Y,W,H
OUT = 128
TILE = 256  # --tile-height: scale 2 from the stored 128
MARGIN, GAP, CAPTION = 8, 8, 20
GREEN = (0, 255, 0)  # RGB: the first points field
RED = (255, 0, 0)  # RGB: the first boxes field
KEYS = ["p/a", "p/b", "p/c"]


def keypoints(i):
    # x, y, v (COCO): the third is not labelled (v = 0) and must not be drawn.
    return [[40 + 5 * i, 50, 2], [90, 70 + 3 * i, 2], [30, 30, 0]]


BOX = [35, 25, 70, 60]  # x, y, w, h


def depth(i):
    d = fx.smooth_u16(W, H, i)
    d[:, :40] = 0  # invalid: black on the sheet, outside the normalised range
    return d


def cell_origin(k, cols, cell_w):
    return MARGIN + (k % cols) * (cell_w + GAP), MARGIN + (k // cols) * (TILE + CAPTION + GAP)


def to_sheet(m, pts, ox, oy, scale):
    """Source points -> stored image (affine m) -> sheet pixel (tile scaled, pixel centres kept)."""
    p = fx.apply_affine(m, np.asarray(pts, dtype=np.float64)[:, :2])
    return np.round(ox + (p[:, 0] + 0.5) * scale - 0.5).astype(int), np.round(oy + (p[:, 1] + 0.5) * scale - 0.5).astype(int)


class PreviewTest(fx.TmpCase):
    @classmethod
    def build(cls):
        members = []
        for i, key in enumerate(KEYS):
            members.append((f"{key}.png", fx.png(fx.smooth_rgb(W, H, i))))
            members.append((f"{key}.depth.png", fx.png(depth(i))))
            # The third sample has no keypoints (null): nothing drawn for it.
            members.append((f"{key}.json", fx.js({"kp": keypoints(i) if i < 2 else None, "bbox": BOX})))
        cls.src = os.path.join(cls.tmp, "in.tar")
        fx.write_tar(cls.src, members)
        cls.out = os.path.join(cls.tmp, "out")
        p = fx.run(["convert", cls.src, "-o", cls.out, "--crop", "box:%d,%d,%d,%d" % CROP,
                    "--size", str(OUT), "--points", "kp", "--boxes", "bbox", "--dense", "depth.png",
                    "--format", "png"])
        assert p.returncode == 0, p.stderr.decode()
        cls.ds = fx.Dataset(cls.out)
        cls.sheet_path = os.path.join(cls.tmp, "sheet.png")
        p = fx.run(["preview", cls.out, "-o", cls.sheet_path, "--keys", ",".join(KEYS),
                    "--tile-height", str(TILE), "--skeleton", "1-2"])
        assert p.returncode == 0, p.stderr.decode()
        cls.sheet = cv2.cvtColor(cv2.imread(cls.sheet_path, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        cls.m = fx.edge_region(*CROP, OUT, OUT)
        cls.cell_w = TILE + GAP + TILE  # the image, then the depth map (both square)
        cls.cols = 2  # 3 cells: a 2 x 2 grid

    def origin(self, k):
        return cell_origin(k, self.cols, self.cell_w)

    def test_the_recorded_affine_is_the_crop_chosen(self):
        for i in range(len(KEYS)):
            np.testing.assert_allclose(self.ds.affine(i), self.m, atol=1e-9)

    def test_sheet_size_follows_the_layout(self):
        self.assertEqual(self.sheet.shape[1], 2 * MARGIN + 2 * self.cell_w + GAP)
        self.assertEqual(self.sheet.shape[0], 2 * MARGIN + 2 * (TILE + CAPTION) + GAP)

    def test_keypoints_land_where_the_crop_moves_them(self):
        for k in range(2):
            ox, oy = self.origin(k)
            xs, ys = to_sheet(self.m, keypoints(k), ox, oy, TILE / OUT)
            for j in range(2):
                self.assertEqual(tuple(self.sheet[ys[j], xs[j]]), GREEN, f"sample {k} joint {j}")
            # Not labelled (v = 0): no dot.
            self.assertNotEqual(tuple(self.sheet[ys[2], xs[2]]), GREEN)
            # Where the point was in the source (the crop not applied): no dot there.
            sx, sy = ox + keypoints(k)[0][0] * 2, oy + keypoints(k)[0][1] * 2
            self.assertNotEqual(tuple(self.sheet[sy, sx]), GREEN)
            # The skeleton line 1-2: its midpoint.
            self.assertEqual(tuple(self.sheet[(ys[0] + ys[1]) // 2, (xs[0] + xs[1]) // 2]), GREEN)

    def test_null_points_are_not_drawn(self):
        ox, oy = self.origin(2)
        tile = self.sheet[oy:oy + TILE, ox:ox + TILE]
        self.assertFalse(np.all(tile == GREEN, axis=-1).any())

    def test_box_edges_have_the_box_colour(self):
        x0, y0, w, h = BOX
        for k in range(3):
            ox, oy = self.origin(k)
            xs, ys = to_sheet(self.m, [[x0, y0], [x0 + w, y0 + h]], ox, oy, TILE / OUT)
            mid_x, mid_y = (xs[0] + xs[1]) // 2, (ys[0] + ys[1]) // 2
            for x, y in [(xs[0], mid_y), (xs[1], mid_y), (mid_x, ys[0]), (mid_x, ys[1])]:
                self.assertEqual(tuple(self.sheet[y, x]), RED, f"sample {k} at {x},{y}")
            # Inside the box, away from the edges and points: the image, not the box colour.
            self.assertNotEqual(tuple(self.sheet[mid_y + 3, xs[0] + 6]), RED)

    def test_key_captions_are_not_blank(self):
        for k in range(3):
            ox, oy = self.origin(k)
            strip = self.sheet[oy + TILE:oy + TILE + CAPTION, ox:ox + self.cell_w]
            self.assertGreater(int((strip.max(axis=-1) > 200).sum()), 20, KEYS[k])
        # Below the grid's last row, where there is no cell, nothing is drawn.
        ox, oy = self.origin(3)
        self.assertTrue(np.all(self.sheet[oy:oy + TILE + CAPTION, ox:ox + self.cell_w] == 24))

    def test_dense_map_tile_is_the_stored_map_colour_mapped(self):
        for k in range(3):
            stored = fx.decode_unchanged(self.ds.blob(k, "__depth__")).astype(np.float64)
            valid = stored != 0
            lo, hi = stored[valid].min(), stored[valid].max()
            grey = np.zeros(stored.shape, np.uint8)
            grey[valid] = np.floor((stored[valid] - lo) / (hi - lo) * 255 + 0.5).astype(np.uint8)
            ref = cv2.cvtColor(cv2.applyColorMap(grey, cv2.COLORMAP_VIRIDIS), cv2.COLOR_BGR2RGB)
            ref[~valid] = 0
            ref = np.repeat(np.repeat(ref, 2, axis=0), 2, axis=1)
            ox, oy = self.origin(k)
            tile = self.sheet[oy:oy + TILE, ox + TILE + GAP:ox + TILE + GAP + TILE]
            diff = np.abs(tile.astype(int) - ref.astype(int)).max(axis=-1)
            self.assertGreater(float((diff <= 4).mean()), 0.99, KEYS[k])
            self.assertGreater(int(valid.sum()), 0)

    def test_same_seed_same_sheet_and_n_samples(self):
        outs = []
        for seed in (5, 5):
            path = self.path(f"s{len(outs)}.png")
            p = fx.run(["preview", self.out, "-o", path, "--n", "2", "--seed", str(seed), "--json"])
            self.assertEqual(p.returncode, 0, p.stderr.decode())
            doc = json.loads(p.stdout)
            self.assertEqual(len(doc["keys"]), 2)
            self.assertTrue(set(doc["keys"]) <= set(KEYS))
            with open(path, "rb") as f:
                outs.append(f.read())
        self.assertEqual(outs[0], outs[1])
        p = fx.run(["preview", self.out, "-o", self.path("all.png"), "--json"])
        self.assertEqual(json.loads(p.stdout)["keys"], KEYS)  # --n 16 > 3: all, in order

    def test_a_missing_key_is_named(self):
        p = fx.run(["preview", self.out, "-o", self.path("x.png"), "--keys", "p/a,nope"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("'nope'", p.stderr.decode())
        self.assertFalse(os.path.exists(self.path("x.png")))

    def test_labels_only_datasets_are_refused(self):
        out = self.path("labels")
        p = fx.run(["convert", self.src, "-o", out, "--no-images"])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        p = fx.run(["preview", out, "-o", self.path("l.png")])
        self.assertEqual(p.returncode, 1)
        self.assertIn("nothing to draw", p.stderr.decode())

    def test_npy_dense_maps_are_drawn_nan_black(self):
        members = []
        for i, key in enumerate(KEYS[:1]):
            d = np.linspace(1, 9, W * H, dtype=np.float32).reshape(H, W)
            d[:, :60] = np.nan
            members += [(f"{key}.png", fx.png(fx.smooth_rgb(W, H, i))), (f"{key}.d.npy", fx.npy(d))]
        src = self.path("npy.tar")
        fx.write_tar(src, members)
        out = self.path("npy")
        p = fx.run(["convert", src, "-o", out, "--dense", "d.npy", "--crop", "box:%d,%d,%d,%d" % CROP,
                    "--size", str(OUT)])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        path = self.path("npy.png")
        p = fx.run(["preview", out, "-o", path, "--tile-height", str(TILE)])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        sheet = cv2.cvtColor(cv2.imread(path, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        tile = sheet[MARGIN:MARGIN + TILE, MARGIN + TILE + GAP:MARGIN + 2 * TILE + GAP]
        # Source columns < 60 are NaN: stored columns < (60 - 20) * 1.28, sheet twice that.
        nan_edge = int((60 - CROP[0]) * OUT / CROP[2] * 2)
        self.assertTrue(np.all(tile[:, :nan_edge - 4] == 0))
        right = tile[:, nan_edge + 4:]
        self.assertTrue(np.all(right.max(axis=-1) > 0))
        self.assertGreater(len(np.unique(right.reshape(-1, 3), axis=0)), 20)


class BoxColumnsAndNoneTest(fx.TmpCase):
    """A box field with more than 4 columns (mmhuman3d HumanData's bbox_xywh: x, y, w, h,
    confidence) is drawn from the first four of each row, as convert transformed it; `--boxes
    none` and `--points none` turn off the fields convert named. No crop and --tile-height =
    the image's height: a stored (x, y) is the tile's pixel (x, y)."""

    SIZE = 64
    BOXES = [[10, 12, 30, 24, 0.75], [40, 36, 16, 20, 0.5]]  # x, y, w, h, confidence
    KP = [[20, 50, 2], [8, 58, 2]]
    GREY = (128, 128, 128)

    @classmethod
    def build(cls):
        img = np.full((cls.SIZE, cls.SIZE, 3), 128, np.uint8)  # flat grey: no red, no green
        members = [("b/0.png", fx.png(img)), ("b/0.json", fx.js({"bbox_xywh": cls.BOXES, "kp": cls.KP}))]
        src = os.path.join(cls.tmp, "box5.tar")
        fx.write_tar(src, members)
        cls.out = os.path.join(cls.tmp, "box5")
        p = fx.run(["convert", src, "-o", cls.out, "--boxes", "bbox_xywh", "--points", "kp", "--format", "png"])
        assert p.returncode == 0, p.stderr.decode()

    def sheet(self, *flags):
        path = self.path("sheet-%d.png" % len(os.listdir(self.tmp)))
        p = fx.run(["preview", self.out, "-o", path, "--tile-height", str(self.SIZE), "--json", *flags])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        img = cv2.cvtColor(cv2.imread(path, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        return json.loads(p.stdout), img[MARGIN:MARGIN + self.SIZE, MARGIN:MARGIN + self.SIZE]

    def assert_boxes_drawn(self, tile):
        red = np.all(tile == RED, axis=-1)
        on_an_edge = np.zeros_like(red)
        for x, y, w, h, _ in self.BOXES:
            mid_x, mid_y = x + w // 2, y + h // 2
            for px, py in [(x, mid_y), (x + w, mid_y), (mid_x, y), (mid_x, y + h)]:
                self.assertTrue(red[py, px], f"box {x},{y},{w},{h}: no edge at {px},{py}")
            self.assertEqual(tuple(tile[mid_y, mid_x]), self.GREY)  # inside: the image
            band = np.zeros_like(red)
            band[y - 1:y + h + 2, x - 1:x + w + 2] = True
            band[y + 2:y + h - 1, x + 2:x + w - 1] = False
            on_an_edge |= band
        # every red pixel lies on one of the two boxes' 2-pixel edges: no box of other columns
        self.assertFalse((red & ~on_an_edge).any(), np.argwhere(red & ~on_an_edge)[:5])

    def assert_points_drawn(self, tile):
        for px, py, _ in self.KP:
            self.assertEqual(tuple(tile[py, px]), GREEN, f"point {px},{py}")

    def test_stored_boxes_keep_their_confidence(self):
        ds = fx.Dataset(self.out)
        self.assertEqual(ds.schema["bbox_xywh"]["shape"][-1], 5)
        stored = ds.t["bbox_xywh"] if "bbox_xywh" in ds.t else ds.t["bbox_xywh.values"]
        np.testing.assert_allclose(np.asarray(stored).reshape(-1, 5), self.BOXES)

    def test_five_column_boxes_are_drawn_from_the_first_four(self):
        doc, tile = self.sheet()
        self.assertEqual((doc["boxes"], doc["points"]), (["bbox_xywh"], ["kp"]))
        self.assert_boxes_drawn(tile)
        self.assert_points_drawn(tile)

    def test_boxes_none_draws_no_box_but_the_points(self):
        doc, tile = self.sheet("--boxes", "none")
        self.assertEqual((doc["boxes"], doc["points"]), ([], ["kp"]))
        self.assertFalse(np.all(tile == RED, axis=-1).any())
        self.assert_points_drawn(tile)

    def test_points_none_draws_no_point_but_the_boxes(self):
        doc, tile = self.sheet("--points", "none")
        self.assertEqual((doc["boxes"], doc["points"]), (["bbox_xywh"], []))
        self.assertFalse(np.all(tile == GREEN, axis=-1).any())
        self.assert_boxes_drawn(tile)

    def test_both_none_leave_the_image_as_stored(self):
        doc, tile = self.sheet("--points", "none", "--boxes", "none")
        self.assertEqual((doc["boxes"], doc["points"]), ([], []))
        self.assertTrue(np.all(tile == 128))

    def test_a_box_field_of_fewer_than_4_columns_is_refused(self):
        p = fx.run(["preview", self.out, "-o", self.path("kp.png"), "--boxes", "kp"])
        self.assertEqual(p.returncode, 2, p.stderr.decode())
        self.assertIn("at least 4", p.stderr.decode())


if __name__ == "__main__":
    import unittest
    unittest.main()
