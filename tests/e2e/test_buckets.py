"""End-to-end: `--resize bucket` (aspect-ratio buckets, SDXL-style). Each image goes to the
bucket of area --size² whose aspect ratio is closest to its own, centre-cropped to it; checked
against an independent enumeration of the buckets, the recorded affine, a reference warp of
the source pixels, and transformed keypoints."""
import json
import math
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402


def buckets(area, step, max_ratio):
    """docs/cli.md's rule, written independently: for each width k*step, the tallest height
    j*step with width*height <= area; the landscape pairs (width >= height) no more elongated
    than max_ratio, and their transposes."""
    out = set()
    for w in range(step, area // step + 1, step):
        h = (area // w) // step * step
        if step <= h <= w and w / h <= max_ratio + 1e-9:
            out |= {(w, h), (h, w)}
    return sorted(out)


def closest(bs, w, h):
    """Closest aspect ratio in log scale; ties: larger area, then smaller width."""
    return min(bs, key=lambda b: (round(abs(math.log(b[0] / b[1]) - math.log(w / h)), 9), -b[0] * b[1], b[0]))


SIZES = [(320, 200), (200, 320), (240, 240), (400, 100), (90, 360), (333, 250)]


class BucketTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.src = {}
        members = []
        for i, (w, h) in enumerate(SIZES):
            rgb = fx.smooth_rgb(w, h, seed=i)
            cls.src["s%d" % i] = rgb
            kp = np.array([[w * 0.5, h * 0.5, 1.0], [w * 0.25, h * 0.75, 1.0]], dtype=np.float32)
            members += [("s%d.png" % i, fx.png(rgb)), ("s%d.npz" % i, fx.npz(kp=kp))]
        cls.archive = fx.write_tar(os.path.join(cls.tmp, "mixed.tar"), members)

    def test_sdxl_buckets_at_1024(self):
        # At area 1024², step 64, every bucket is one of SDXL's published training buckets.
        sdxl = [(512, 2048), (512, 1984), (512, 1920), (512, 1856), (576, 1792), (576, 1728), (576, 1664),
                (640, 1600), (640, 1536), (704, 1472), (704, 1408), (704, 1344), (768, 1344), (768, 1280),
                (832, 1216), (832, 1152), (896, 1152), (896, 1088), (960, 1088), (960, 1024), (1024, 1024)]
        sdxl = set(sdxl) | {(h, w) for w, h in sdxl}
        bs = buckets(1024 * 1024, 64, 4.0)
        self.assertEqual(len(bs), 33)  # 17 landscape (1024..2048 wide), 16 transposed
        self.assertFalse(set(bs) - sdxl)
        self.assertEqual(closest(bs, 1280, 720), (1344, 768))

    def test_each_image_goes_to_its_closest_bucket_centre_cropped(self):
        _, ds = fx.convert(self, [self.archive], "--resize", "bucket", "--size", "128", "--bucket-step", "32",
                           "--format", "png", "--points", "kp")
        bs = buckets(128 * 128, 32, 4.0)
        self.assertEqual(len(ds.keys), len(SIZES))
        seen = set()
        for i, key in enumerate(ds.keys):
            src = self.src[key]
            h0, w0 = src.shape[:2]
            bw, bh = closest(bs, w0, h0)
            seen.add((bw, bh))
            self.assertEqual((int(ds.t["__image__.width"][i]), int(ds.t["__image__.height"][i])), (bw, bh), key)
            # the largest centred region of the bucket's aspect ratio
            a = bw / bh
            cw, ch = (h0 * a, h0) if w0 / h0 > a else (w0, w0 / a)
            m = fx.affine_region((w0 - cw) / 2 - 0.5, (h0 - ch) / 2 - 0.5, cw, ch, bw, bh)
            np.testing.assert_allclose(ds.affine(i), m, atol=1e-9, err_msg=key)
            out = fx.decode_rgb(ds.blob(i))
            self.assertEqual(out.shape, (bh, bw, 3))
            self.assertLess(fx.mean_abs(out, fx.warp_ref(src, m, bw, bh)), 3.0, key)
            kp = np.array([[w0 * 0.5, h0 * 0.5, 1.0], [w0 * 0.25, h0 * 0.75, 1.0]])
            np.testing.assert_allclose(np.asarray(ds.t["kp"][i], dtype=np.float64), fx.apply_affine(m, kp),
                                       atol=1e-3, err_msg=key)
        self.assertGreaterEqual(len(seen), 4)  # the mixed shapes really landed in different buckets

    def test_sdxl_micro_conditioning_columns(self):
        # --fields keeps them (geometry, not labels); each is I32 [2] in SDXL's (h, w) / (top, left) order.
        _, ds = fx.convert(self, [self.archive], "--resize", "bucket", "--size", "128", "--bucket-step", "32",
                           "--format", "png", "--points", "kp", "--fields", "kp")
        bs = buckets(128 * 128, 32, 4.0)
        for name in ("__original_size__", "__crop_top_left__", "__target_size__"):
            self.assertEqual(ds.schema[name]["dtype"], "I32")
            self.assertEqual(ds.schema[name]["shape"], [2])
        for i, key in enumerate(ds.keys):
            h0, w0 = self.src[key].shape[:2]  # the size the test wrote
            bw, bh = closest(bs, w0, h0)
            a = bw / bh
            cw, ch = (h0 * a, h0) if w0 / h0 > a else (w0, w0 / a)  # the largest centred region
            self.assertEqual(ds.t["__original_size__"][i].tolist(), [h0, w0], key)
            self.assertEqual(ds.t["__crop_top_left__"][i].tolist(),
                             [math.floor((h0 - ch) / 2 + 0.5), math.floor((w0 - cw) / 2 + 0.5)], key)
            out = fx.decode_rgb(ds.blob(i))
            self.assertEqual(ds.t["__target_size__"][i].tolist(), list(out.shape[:2]), key)
            # The crop's top-left maps to the output's top-left edge through the stored affine.
            top, left = ds.t["__crop_top_left__"][i]
            edge = fx.apply_affine(ds.affine(i), [[left - 0.5, top - 0.5]])[0]
            self.assertLess(abs(edge[0] + 0.5) + abs(edge[1] + 0.5), 0.5 * ds.affine(i)[0, 0] * 2 + 1e-9, key)
        # Not written without buckets.
        _, plain = fx.convert(self, [self.archive], "--crop", "center", "--size", "64")
        self.assertNotIn("__original_size__", plain.schema)

    def test_center_crop_means_the_same_and_max_ratio_limits_elongation(self):
        _, a = fx.convert(self, [self.archive], "--resize", "bucket", "--size", "128", "--bucket-step", "32",
                          "--crop", "center")
        _, b = fx.convert(self, [self.archive], "--resize", "bucket", "--size", "128", "--bucket-step", "32",
                          "--bucket-max-ratio", "1.5")
        bs = buckets(128 * 128, 32, 1.5)
        for i, key in enumerate(b.keys):
            w, h = int(b.t["__image__.width"][i]), int(b.t["__image__.height"][i])
            self.assertLessEqual(max(w, h) / min(w, h), 1.5, key)
            self.assertEqual((w, h), closest(bs, *self.src[key].shape[1::-1]), key)
        full = buckets(128 * 128, 32, 4.0)
        for i, key in enumerate(a.keys):
            self.assertEqual((int(a.t["__image__.width"][i]), int(a.t["__image__.height"][i])),
                             closest(full, *self.src[key].shape[1::-1]), key)

    def test_summary_and_info_list_the_buckets(self):
        out = self.path("listed")
        p, ds = fx.convert(self, [self.archive], "--resize", "bucket", "--size", "128", "--bucket-step", "32",
                           out=out)
        count = {}
        for i in range(len(ds.keys)):
            wh = (int(ds.t["__image__.width"][i]), int(ds.t["__image__.height"][i]))
            count[wh] = count.get(wh, 0) + 1
        line = [x for x in p.stdout.decode().splitlines() if x.strip().startswith("buckets:")]
        self.assertEqual(len(line), 1, p.stdout.decode())
        for (w, h), n in count.items():
            self.assertIn("%dx%d (%d)" % (w, h, n), line[0])
        self.assertNotIn("image_sizes", json.loads(fx.run(["info", out, "--json"]).stdout))  # O(fields) by default
        info = json.loads(fx.run(["info", out, "--sizes", "--json"]).stdout)
        self.assertEqual({(z["width"], z["height"]): z["samples"] for z in info["image_sizes"]}, count)
        self.assertEqual(info["distinct_image_sizes"], len(count))
        ns = [z["samples"] for z in info["image_sizes"]]
        self.assertEqual(ns, sorted(ns, reverse=True))

    def test_usage_errors(self):
        for flags, says in [(["--resize", "bucket"], "needs --size"),
                            (["--resize", "bucket", "--size", "16"], "holds no bucket"),
                            (["--resize", "bucket", "--size", "128", "--bucket-step", "0"], "--bucket-step"),
                            (["--resize", "bucket", "--size", "128", "--bucket-max-ratio", "0.5"], "--bucket-max-ratio")]:
            p = fx.run(["convert", self.archive, "-o", self.path("bad"), *flags])
            self.assertEqual(p.returncode, 2, flags)
            self.assertIn(says, p.stderr.decode(), flags)
            self.assertFalse(os.path.exists(self.path("bad")))


if __name__ == "__main__":
    unittest.main()
