"""Augmentation in the batch decode (tarmac.Augment, ds.batch(augment=...), tarmac.torch) against
independent oracles: OpenCV's own decode and warpAffine of the stored bytes under the returned
__augment__, numpy for points and boxes. Run with /usr/bin/python3; needs TARMAC_LIB,
PYTHONPATH=python/ and TARMAC (the converter) in the environment."""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

import cv2
import numpy as np

import tarmac
from draw_oracle import uniform

TARMAC = os.environ.get("TARMAC", "tarmac")
N = 24
K = 5  # points per sample
PAIRS = [(1, 2), (3, 4)]  # left/right joints


def image(k):
    """Sample k's RGB image: smooth, with some structure; 48x40 or 56x40."""
    w, h = (48 if k % 2 else 56), 40
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 128 + 100 * np.sin(x / 7 + k)
    g = 128 + 100 * np.cos(y / 5 - k)
    b = 128 + 90 * np.sin((x + y) / 9)
    return np.clip(np.stack([r, g, b], -1), 0, 255).astype(np.uint8)


def labels(k):
    w = 48 if k % 2 else 56
    kp = [[3.25 + 7 * j + k % 3, 4.5 + 6 * j, float(j % 3 != 0)] for j in range(K)]
    return {"kp": kp, "box": [5.5 + k % 4, 6.0, w / 2, 17.25], "score": 0.5 + k}


def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def npy(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def make_dataset(tmp, *extra, name="aug"):
    """The test's dataset; `extra`: more convert flags (a second dataset gets another `name`)."""
    src = os.path.join(tmp, name + ".tar")
    rng = np.random.default_rng(0)
    with tarfile.open(src, "w", format=tarfile.PAX_FORMAT) as tar:
        for k in range(N):
            img = image(k)
            h, w = img.shape[:2]
            ok, jpg = cv2.imencode(".jpg", cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 98])
            assert ok
            key = f"s/{k:04d}"
            add(tar, key + ".jpg", jpg.tobytes())
            add(tar, key + ".json", json.dumps(labels(k)).encode())
            add(tar, key + ".seg.npy", npy(rng.integers(0, 255, (h, w), dtype=np.uint8)))
            add(tar, key + ".flow.npy", npy(rng.standard_normal((h, w, 2)).astype(np.float32)))
    out = os.path.join(tmp, name)
    subprocess.run([TARMAC, "convert", "-q", src, "-o", out, "--format", "jpg", "--quality", "98",
                    "--points", "kp", "--boxes", "box", "--dense", "seg.npy", "flow.npy", *extra],
                   check=True, stdout=subprocess.DEVNULL)
    return out


def png(a):
    """PNG bytes of a (H, W) map (8 or 16 bits) or an (H, W, 3) RGB one."""
    ok, data = cv2.imencode(".png", a if a.ndim == 2 else cv2.cvtColor(a, cv2.COLOR_RGB2BGR))
    assert ok
    return data.tobytes()


def make_png_dense_dataset(tmp, name="pngdense", depth8=()):
    """JPEG images with two PNG dense maps: a 16-bit depth (8-bit for the samples in `depth8`)
    and an 8-bit RGB "normal" map, at the image's size (48x40 or 56x40)."""
    src = os.path.join(tmp, name + ".tar")
    rng = np.random.default_rng(1)
    with tarfile.open(src, "w", format=tarfile.PAX_FORMAT) as tar:
        for k in range(N):
            img = image(k)
            h, w = img.shape[:2]
            ok, jpg = cv2.imencode(".jpg", cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 98])
            key = f"s/{k:04d}"
            add(tar, key + ".jpg", jpg.tobytes())
            add(tar, key + ".json", json.dumps(labels(k)).encode())
            depth = rng.integers(1, 65535, (h, w), dtype=np.uint16)  # values no 8-bit map could hold
            add(tar, key + ".depth.png", png(depth.astype(np.uint8) if k in depth8 else depth))
            add(tar, key + ".normal.png", png(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)))
    out = os.path.join(tmp, name)
    subprocess.run([TARMAC, "convert", "-q", src, "-o", out, "--format", "jpg", "--quality", "98",
                    "--points", "kp", "--dense", "depth.png", "normal.png"], check=True, stdout=subprocess.DEVNULL)
    return out


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def apply(m, xy):
    return xy @ m[:, :2].T + m[:, 2]


AUG = dict(size=(32, 40), flip=0.5, flip_pairs=PAIRS, rotate=30, scale=(0.8, 1.25), translate=0.1, fill=17)


class AugmentTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-aug-")
        cls.path = make_dataset(cls.tmp)
        cls.ds = tarmac.Dataset(cls.path)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def batch(self, idx, aug=None, **kw):
        kw.setdefault("fields", ["kp", "box", "score"])
        return self.ds.batch(idx, augment=aug or tarmac.Augment(**AUG), **kw)

    def stored_rgb(self, i):
        return cv2.cvtColor(cv2.imdecode(np.asarray(self.ds.image(i)), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)

    def check_image(self, images, labels, idx, fill):
        for j, i in enumerate(idx):
            m = labels["__augment__"][j]
            h, w = images.shape[1:3]
            want = cv2.warpAffine(self.stored_rgb(i), m, (w, h), flags=cv2.INTER_LINEAR,
                                  borderMode=cv2.BORDER_CONSTANT, borderValue=(fill,) * 3)
            self.assertGreaterEqual(psnr(images[j], want), 40, f"sample {i}")

    def test_image_is_the_stored_image_warped_by_the_returned_map(self):
        idx = list(range(N))
        images, labels = self.batch(idx, seed=5, epoch=1)
        self.assertEqual(images.shape, (N, 32, 40, 3))
        self.assertEqual(labels["__augment__"].shape, (N, 2, 3))
        self.assertEqual(labels["__augment__"].dtype, np.float64)
        self.assertEqual(labels["__flip__"].dtype, np.bool_)
        self.check_image(images, labels, idx, 17)
        # The flip is in the map: its 2x2 part has a negative determinant exactly when flipped.
        det = np.linalg.det(labels["__augment__"][:, :, :2])
        np.testing.assert_array_equal(det < 0, labels["__flip__"])
        self.assertTrue(labels["__flip__"].any() and not labels["__flip__"].all())

    def test_points_follow_the_map_with_pairs_swapped_after_a_flip(self):
        idx = list(range(N))
        _, labels = self.batch(idx, seed=2)
        for j, i in enumerate(idx):
            m = labels["__augment__"][j]
            kp = np.array(self.ds.value("kp", i))
            want = kp.copy()
            want[:, :2] = apply(m, kp[:, :2])  # not clamped: points may leave the output
            if labels["__flip__"][j]:
                for a, b in PAIRS:
                    want[[a, b]] = want[[b, a]]
            np.testing.assert_allclose(labels["kp"][j], want, rtol=0, atol=1e-9)
            np.testing.assert_array_equal(labels["score"][j], self.ds.value("score", i))

    def test_boxes_are_the_box_of_the_mapped_corners(self):
        # convert's default --box-convention edges: a box's corners are pixel edges, which are
        # pixel centres + 0.5 (format.md 3), so a corner c maps to M (c - 0.5) + 0.5.
        idx = list(range(N))
        _, labels = self.batch(idx, seed=3, epoch=4)
        for j, i in enumerate(idx):
            x, y, w, h = np.array(self.ds.value("box", i))[:4]
            corners = np.array([[x, y], [x + w, y], [x, y + h], [x + w, y + h]])
            corners = apply(labels["__augment__"][j], corners - 0.5) + 0.5
            lo, hi = corners.min(0), corners.max(0)
            np.testing.assert_allclose(labels["box"][j], [lo[0], lo[1], hi[0] - lo[0], hi[1] - lo[1]], atol=1e-9)
            self.assertTrue((labels["box"][j][2:] >= 0).all())

    def test_boxes_of_a_centers_dataset_map_as_points(self):
        path = make_dataset(self.tmp, "--box-convention", "centers", name="centers")
        ds = tarmac.Dataset(path)
        idx = list(range(N))
        _, labels = ds.batch(idx, augment=tarmac.Augment(**AUG), fields=["box"], seed=3, epoch=4)
        for j, i in enumerate(idx):
            x, y, w, h = np.array(ds.value("box", i))[:4]
            corners = apply(labels["__augment__"][j], np.array([[x, y], [x + w, y], [x, y + h], [x + w, y + h]]))
            lo, hi = corners.min(0), corners.max(0)
            np.testing.assert_allclose(labels["box"][j], [lo[0], lo[1], hi[0] - lo[0], hi[1] - lo[1]], atol=1e-9)

    def test_dense_maps_are_warped_nearest_byte_for_byte(self):
        idx = [4, 9, 0, 17]
        images, labels = self.batch(idx, seed=8, dense=["seg", "__flow__"])
        self.assertEqual(labels["seg"].shape, (4, 32, 40))
        self.assertEqual(labels["seg"].dtype, np.uint8)
        self.assertEqual(labels["__flow__"].shape, (4, 32, 40, 2))
        self.assertEqual(labels["__flow__"].dtype, np.float32)
        for j, i in enumerate(idx):
            m = labels["__augment__"][j]
            for name, kind in (("seg", "seg"), ("__flow__", "flow")):
                want = cv2.warpAffine(np.ascontiguousarray(self.ds.dense(i, kind)), m, (40, 32),
                                      flags=cv2.INTER_NEAREST, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
                self.assertEqual(labels[name][j].tobytes(), want.tobytes(), f"{name} of sample {i}")

    def test_png_dense_maps_are_decoded_in_their_dtype_and_warped_nearest_byte_for_byte(self):
        path = make_png_dense_dataset(self.tmp)
        ds = tarmac.Dataset(path)
        idx = [3, 0, 11, 22, 7]
        for aug in (tarmac.Augment(**AUG), tarmac.Augment(size=(24, 24), crop=(0.3, 0.9), flip=0.5)):
            images, labels = ds.batch(idx, fields=["kp"], augment=aug, seed=6, epoch=2, dense=["depth", "normal"])
            h, w = aug.size
            self.assertEqual(labels["depth"].shape, (5, h, w))
            self.assertEqual(labels["depth"].dtype, np.uint16)
            self.assertEqual(labels["normal"].shape, (5, h, w, 3))
            self.assertEqual(labels["normal"].dtype, np.uint8)
            for j, i in enumerate(idx):
                m = labels["__augment__"][j]
                # The stored maps decoded by OpenCV from the shard's bytes (BGR order for RGB).
                depth = cv2.imdecode(np.asarray(ds.blob(i, "__depth__")), cv2.IMREAD_UNCHANGED)
                normal = cv2.imdecode(np.asarray(ds.blob(i, "__normal__")), cv2.IMREAD_UNCHANGED)[:, :, ::-1]
                self.assertEqual(depth.dtype, np.uint16)
                for name, stored in (("depth", depth), ("normal", np.ascontiguousarray(normal))):
                    want = cv2.warpAffine(stored, m, (w, h), flags=cv2.INTER_NEAREST,
                                          borderMode=cv2.BORDER_CONSTANT, borderValue=0)
                    self.assertEqual(labels[name][j].tobytes(), want.tobytes(), f"{name} of sample {i}")
                self.assertGreater(int(labels["depth"][j].max()), 255)
            # The same draws as without dense maps, and the same bytes on 1 and 2 threads.
            plain, plain_labels = ds.batch(idx, fields=["kp"], augment=aug, seed=6, epoch=2, threads=1)
            np.testing.assert_array_equal(plain, images)
            np.testing.assert_array_equal(plain_labels["__augment__"], labels["__augment__"])
            _, again = ds.batch(idx, fields=[], augment=aug, seed=6, epoch=2, threads=2, dense=["depth"])
            self.assertEqual(again["depth"].tobytes(), labels["depth"].tobytes())

    def test_png_dense_maps_of_two_bit_depths_in_one_batch_name_the_sample(self):
        ds = tarmac.Dataset(make_png_dense_dataset(self.tmp, "mixeddepth", depth8=(5,)))
        _, labels = ds.batch([0, 1], fields=[], augment=tarmac.Augment(size=(8, 8)), dense=["depth"])
        self.assertEqual(labels["depth"].dtype, np.uint16)
        with self.assertRaises(tarmac.TarmacError) as e:
            ds.batch([0, 5], fields=[], augment=tarmac.Augment(size=(8, 8)), dense=["depth"])
        self.assertIn("sample 5", str(e.exception))
        self.assertIn("U8", str(e.exception))
        self.assertIn("U16", str(e.exception))

    def test_one_channel_batches_are_the_warped_rgb_converted(self):
        rgb, _ = self.batch([0, 5], seed=4)
        grey, _ = self.batch([0, 5], seed=4, channels=1)
        self.assertEqual(grey.shape, (2, 32, 40, 1))
        for j in range(2):
            np.testing.assert_array_equal(grey[j, :, :, 0], cv2.cvtColor(rgb[j], cv2.COLOR_RGB2GRAY))

    def test_flip_rate_is_the_probability(self):
        aug = tarmac.Augment(size=(8, 8), flip=0.3)
        flips = np.concatenate([self.ds.batch(range(N), fields=[], augment=aug, seed=11, epoch=e)[1]["__flip__"]
                                for e in range(60)])
        n = flips.size
        self.assertLess(abs(flips.mean() - 0.3), 3 * np.sqrt(0.3 * 0.7 / n))

    def test_same_seed_epoch_index_same_bytes_whatever_threads_and_batch(self):
        a_img, a_lab = self.batch(list(range(N)), seed=7, epoch=3, threads=1, dense=["seg"])
        b_img, b_lab = self.batch(list(range(N)), seed=7, epoch=3, threads=2, dense=["seg"])
        self.assertEqual(a_img.tobytes(), b_img.tobytes())
        for name in a_lab:
            self.assertEqual(a_lab[name].tobytes(), b_lab[name].tobytes(), name)
        idx = [13, 2, 13, 20]  # another composition, a repeat included
        c_img, c_lab = self.batch(idx, seed=7, epoch=3, threads=2, dense=["seg"])
        for j, i in enumerate(idx):
            self.assertEqual(c_img[j].tobytes(), a_img[i].tobytes())
            for name in a_lab:
                self.assertEqual(c_lab[name][j].tobytes(), a_lab[name][i].tobytes(), name)
        _, d_lab = self.batch(list(range(N)), seed=7, epoch=4)
        self.assertFalse(np.array_equal(d_lab["__augment__"], a_lab["__augment__"]))
        _, e_lab = self.batch(list(range(N)), seed=8, epoch=3)
        self.assertFalse(np.array_equal(e_lab["__augment__"], a_lab["__augment__"]))

    def test_draws_follow_the_documented_formula(self):
        seed, epoch = 2**64 - 3, 12
        _, labels = self.ds.batch(range(N), fields=[], augment=tarmac.Augment(size=(8, 8), flip=0.5, rotate=40),
                                  seed=seed, epoch=epoch)
        for i in range(N):
            self.assertEqual(bool(labels["__flip__"][i]), uniform(seed, epoch, i, 0) < 0.5)
            m = labels["__augment__"][i]
            # M = A F C: C scales x by 8 / w and y by 8 / h, the flip negates the first column.
            w, h = self.ds.decoded_size(i)
            sign = -1 if labels["__flip__"][i] else 1
            angle = np.degrees(np.arctan2(m[0, 1] * h / 8, sign * m[0, 0] * w / 8))
            self.assertAlmostEqual(angle, 40 * (2 * uniform(seed, epoch, i, 1) - 1), places=9)

    def test_random_resized_crop(self):
        aug = tarmac.Augment(size=(24, 24), crop=(0.3, 0.6), ratio=(0.75, 1.333), fill=0)
        idx = list(range(N))
        images, labels = self.ds.batch(idx, fields=["kp"], augment=aug, seed=1)
        self.check_image(images, labels, idx, 0)
        for j, i in enumerate(idx):
            m = labels["__augment__"][j]
            self.assertEqual(m[0, 1], 0)
            cw, ch = 24 / m[0, 0], 24 / m[1, 1]
            x0, y0 = (-0.5 - m[0, 2]) / m[0, 0], (-0.5 - m[1, 2]) / m[1, 1]
            w, h = self.ds.decoded_size(i)
            area = cw * ch / (w * h)
            self.assertTrue(0.25 < area < 0.7, (i, area))
            self.assertTrue(0.7 < cw / ch < 1.4, (i, cw / ch))
            self.assertGreaterEqual(x0, -0.5 - 1e-9)
            self.assertGreaterEqual(y0, -0.5 - 1e-9)
            self.assertLessEqual(x0 + cw, w - 0.5 + 1e-9)
            self.assertLessEqual(y0 + ch, h - 0.5 + 1e-9)
            self.assertAlmostEqual(x0 + 0.5, round(x0 + 0.5), places=6)  # whole pixels, as torchvision

    def test_points_and_boxes_arguments_name_the_fields(self):
        _, labels = self.batch([1, 2], seed=0, points=[], boxes=[])
        np.testing.assert_array_equal(labels["kp"][0], self.ds.value("kp", 1))
        np.testing.assert_array_equal(labels["box"][1], self.ds.value("box", 2))
        _, labels = self.batch([1], seed=0, points=["kp"], boxes=["box:xyxy"])
        x0, y0, x1, y1 = self.ds.value("box", 1)[:4]
        corners = apply(labels["__augment__"][0], np.array([[x0, y0], [x1, y1], [x0, y1], [x1, y0]]) - 0.5) + 0.5
        np.testing.assert_allclose(labels["box"][0], np.r_[corners.min(0), corners.max(0)], atol=1e-9)

    def test_bad_input_names_the_argument_before_any_batch(self):
        for kw, name in [(dict(size=(0, 8)), "size"), (dict(size=(8, 8), scale=(2, 1)), "scale"),
                         (dict(size=(8, 8), scale=(0, 1)), "scale"), (dict(size=(8, 8), flip=1.5), "flip"),
                         (dict(size=(8, 8), flip=-0.1), "flip"), (dict(size=(8, 8), crop=(0, 0.5)), "crop"),
                         (dict(size=(8, 8), crop=(0.5, 1.5)), "crop"), (dict(size=(8, 8), rotate=float("nan")), "rotate"),
                         (dict(size=(8, 8), flip_pairs=[(0, -1)]), "flip_pairs"),
                         (dict(size=(8, 8), ratio=(2, 1)), "ratio")]:
            with self.assertRaises(ValueError) as e:
                tarmac.Augment(**kw)
            self.assertIn(name, str(e.exception))
        with self.assertRaises(tarmac.TarmacError) as e:
            self.ds.batch([0], fields=["kp"], augment=tarmac.Augment(size=(8, 8), flip_pairs=[(0, K)]))
        self.assertIn("flip_pairs", str(e.exception))
        self.assertEqual(e.exception.code, 1)
        with self.assertRaises(ValueError):
            self.ds.batch([0], augment=tarmac.Augment(size=(8, 8)), dense=["nope"])
        with self.assertRaises(ValueError):
            self.ds.batch([0], augment=tarmac.Augment(size=(8, 8)), size=(9, 8))

    def test_torch_dataset_uses_the_batched_augmentation(self):
        try:
            import torch
            import torch.utils.data
            import tarmac.torch as tt
        except ImportError:
            self.skipTest("no torch")
        aug = tarmac.Augment(**AUG)
        tds = tt.TarmacDataset(self.path, fields=["kp"], augment=aug, seed=5)
        tds.set_epoch(2)
        b = tds[[3, 1, 8]]
        images, labels = self.ds.batch([3, 1, 8], fields=["kp"], augment=aug, seed=5, epoch=2)
        self.assertEqual(tuple(b["image"].shape), (3, 3, 32, 40))
        np.testing.assert_array_equal(b["image"].permute(0, 2, 3, 1).numpy(), images)
        np.testing.assert_array_equal(b["kp"].numpy(), labels["kp"])
        np.testing.assert_array_equal(b["__augment__"].numpy(), labels["__augment__"])
        one = tds[1]  # the per-sample path: a batch of one
        np.testing.assert_array_equal(one["image"].numpy(), b["image"][1].numpy())
        np.testing.assert_array_equal(one["__flip__"].numpy(), b["__flip__"][1].numpy())
        loader = torch.utils.data.DataLoader(tds, batch_size=None, num_workers=1,
                                             sampler=torch.utils.data.BatchSampler([3, 1, 8], 3, False))
        (w,) = list(loader)  # a worker: the dataset pickled with its augment, seed and epoch
        np.testing.assert_array_equal(w["image"].numpy(), b["image"].numpy())
        np.testing.assert_array_equal(w["kp"].numpy(), labels["kp"])
        tds.set_epoch(3)
        self.assertFalse(np.array_equal(tds[[3, 1, 8]]["__augment__"].numpy(), labels["__augment__"]))


def photo(rng, h, w):
    """Photo-like: smooth structure at a few scales, hard edges, sensor noise."""
    img = np.full((h, w, 3), 128, np.float32)
    for scale, amp in ((64, 90), (16, 45), (4, 20)):
        small = rng.uniform(-1, 1, (h // scale, w // scale, 3)).astype(np.float32)
        img += amp * cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    for _ in range(6):
        x0, y0 = (int(v) for v in rng.integers(0, w - 40, 2))
        cv2.rectangle(img, (x0, y0), (x0 + int(rng.integers(20, w // 3)), y0 + int(rng.integers(20, h // 3))),
                      rng.uniform(0, 255, 3).tolist(), -1)
    img += rng.normal(0, 3, img.shape).astype(np.float32)
    return np.clip(img, 0, 255).astype(np.uint8)


COLOUR, GREY = 12, 4  # samples 0..11 colour, 12..15 one-component JPEGs


def dct_denom(m):
    """The scale the decode may take: the largest 1/d (d = 1, 2, 4, 8) after which the warp
    still does not enlarge, d times the map's largest singular value <= 1 (docs/reader.md)."""
    sigma = np.linalg.svd(m[:, :2], compute_uv=False).max()
    d = 1
    while d < 8 and 2 * d * sigma <= 1 + 1e-9:
        d *= 2
    return d


class ReducedScaleTest(unittest.TestCase):
    """Large stored JPEGs to small outputs: the decode reads only the region the warp needs, at
    1/2, 1/4 or 1/8 DCT scale. Such a decode averages each d x d block, which a bilinear warp of
    the full-resolution image does not (it skips pixels and aliases: 26 dB apart at 1/8 on these
    images), so the oracle is OpenCV's full decode, reduced by d with INTER_AREA (the block
    mean, cv2.resize), then warped with the returned map composed with that reduction. Measured
    minimum PSNR against it: 42.1 dB at 1/2, 46.8 dB at 1/4, 51.2 dB at 1/8 (the bound is 40)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-aug-scale-")
        src = os.path.join(cls.tmp, "big.tar")
        rng = np.random.default_rng(4)
        with tarfile.open(src, "w", format=tarfile.PAX_FORMAT) as tar:
            for k in range(COLOUR + GREY):
                img = photo(rng, 512, 512)
                if k >= COLOUR:
                    img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
                ok, jpg = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])
                assert ok
                add(tar, f"b/{k:04d}.jpg", jpg.tobytes())
        out = os.path.join(cls.tmp, "big")
        subprocess.run([TARMAC, "convert", "-q", src, "-o", out, "--format", "keep"], check=True,
                       stdout=subprocess.DEVNULL)
        cls.ds = tarmac.Dataset(out)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def decoded(self, i):
        """OpenCV's decode of the stored bytes: RGB, or grey for a grey JPEG."""
        buf = np.asarray(self.ds.image(i))
        if i >= COLOUR:
            return cv2.imdecode(buf, cv2.IMREAD_GRAYSCALE)
        return cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)

    def references(self, i, m, size, fill):
        """(block-mean reference, full-resolution warp, d) for sample i under map m."""
        full = self.decoded(i)
        h, w = full.shape[:2]
        d = dct_denom(m)
        kw = dict(flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=(fill,) * 3)
        plain = cv2.warpAffine(full, m, size, **kw)
        reduced = cv2.resize(full, (w // d, h // d), interpolation=cv2.INTER_AREA)
        to_full = np.array([[d, 0, (d - 1) / 2], [0, d, (d - 1) / 2], [0, 0, 1]])
        return cv2.warpAffine(reduced, m @ to_full, size, **kw), plain, d

    def check(self, aug, idx, seeds, want_denoms):
        seen = set()
        for seed in seeds:
            images, labels = self.ds.batch(idx, fields=[], augment=aug, seed=seed, threads=2)
            h, w = images.shape[1:3]
            for j, i in enumerate(idx):
                area, plain, d = self.references(i, labels["__augment__"][j], (w, h), aug.fill)
                seen.add(d)
                got = images[j]
                self.assertGreaterEqual(psnr(got, area), 40, f"sample {i} at 1/{d}, seed {seed}")
                if d >= 4:  # the reduced decode, not a full-resolution warp, made these pixels
                    self.assertGreater(psnr(got, area), psnr(got, plain) + 5, f"sample {i} at 1/{d}")
                if d == 1:  # a region at full scale: the pixels of the whole decode's warp
                    self.assertGreaterEqual(psnr(got, plain), 40, f"sample {i}")
        self.assertTrue(want_denoms <= seen, seen)

    def test_random_resized_crops_to_a_small_output_decode_at_reduced_scale(self):
        aug = tarmac.Augment(size=(64, 64), scale=(0.5, 1.0), rotate=30, flip=0.5, crop=(0.08, 1), fill=9)
        self.check(aug, list(range(COLOUR)), [0, 1], {2, 4, 8})

    def test_whole_image_rotated_and_shrunk_decodes_at_an_eighth(self):
        aug = tarmac.Augment(size=(64, 64), scale=(0.5, 1.0), rotate=30, translate=0.1)
        self.check(aug, list(range(COLOUR)), [2], {8})

    def test_crops_at_full_scale_and_half(self):
        aug = tarmac.Augment(size=(224, 224), crop=(0.08, 1), flip=0.5)
        self.check(aug, list(range(COLOUR)), [0, 3], {1, 2})

    def test_an_output_outside_its_image_is_the_fill(self):
        aug = tarmac.Augment(size=(32, 32), scale=(0.1, 0.1), translate=2, fill=77)
        idx = list(range(COLOUR))
        images, labels = self.ds.batch(idx, fields=[], augment=aug, seed=1)
        outside = 0
        for j, i in enumerate(idx):
            m = labels["__augment__"][j]
            corners = apply(m, np.array([[-0.5, -0.5], [511.5, -0.5], [-0.5, 511.5], [511.5, 511.5]]))
            area, _, d = self.references(i, m, (32, 32), 77)
            self.assertEqual(d, 8)
            self.assertGreaterEqual(psnr(images[j], area), 40, f"sample {i}")
            if (corners.max(0) < -1).any() or (corners.min(0) > 32).any():
                outside += 1
                self.assertTrue((images[j] == 77).all(), f"sample {i}")
        self.assertGreater(outside, 0)

    def test_grey_jpegs_stay_grey_and_replicate(self):
        aug = tarmac.Augment(size=(48, 64), scale=(0.5, 1.0), rotate=30, crop=(0.08, 1), fill=200)
        idx = list(range(COLOUR, COLOUR + GREY))
        grey, labels = self.ds.batch(idx, fields=[], augment=aug, seed=6, channels=1)
        rgb, _ = self.ds.batch(idx, fields=[], augment=aug, seed=6, channels=3)
        self.assertEqual(grey.shape, (GREY, 48, 64, 1))
        np.testing.assert_array_equal(rgb, np.repeat(grey, 3, axis=3))
        for j, i in enumerate(idx):
            area, _, d = self.references(i, labels["__augment__"][j], (64, 48), 200)
            self.assertGreater(d, 1)
            self.assertGreaterEqual(psnr(grey[j, :, :, 0], area), 40, f"sample {i} at 1/{d}")


if __name__ == "__main__":
    unittest.main()
