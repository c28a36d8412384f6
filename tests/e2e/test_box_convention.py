"""End-to-end: --box-convention (issue #28 item 4). With `edges`, the default and what COCO and
mmhuman3d mean by a box, [x, y, w, h] is the numpy slice image[y:y+h, x:x+w]: the output is
that slice (compared with numpy slicing, and with cv2.resize(INTER_AREA) of the slice when
shrunk 2x), the affine maps the box's corner edges onto the output's, and a --boxes field holding
the crop's own box comes out as [0, 0, W, H]. With `centers` (the reading before 2026-11-26)
the same numbers name the region half a pixel right and down (cv2.warpAffine is the oracle)."""
import os
import sys
import unittest

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

BOX = (37, 22, 64, 48)  # x, y, w, h


class BoxConventionTest(fx.TmpCase):
    @classmethod
    def build(cls):
        rng = np.random.default_rng(5)
        cls.src = rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)  # RGB, every pixel different
        cls.tar = fx.write_tar(os.path.join(cls.tmp, "in.tar"), [
            ("a/0.png", fx.png(cls.src)), ("a/0.json", fx.js({"bbox": list(BOX)}))])

    def convert(self, *flags):
        _, ds = fx.convert(self, [self.tar], "--crop", "field:bbox", "--boxes", "bbox", "--format", "png",
                           *flags)
        return ds, fx.decode_rgb(ds.blob(0))

    def test_edges_is_the_numpy_slice(self):
        x, y, w, h = BOX
        ds, out = self.convert("--resize", "none")
        np.testing.assert_array_equal(out, self.src[y:y + h, x:x + w])
        m = ds.affine(0).reshape(2, 3)
        # The box's outer pixel edges, x - 0.5 ... x + w - 0.5 in pixel centres, onto the output's.
        np.testing.assert_allclose(fx.apply_affine(m, [[x - 0.5, y - 0.5], [x + w - 0.5, y + h - 0.5]]),
                                   [[-0.5, -0.5], [w - 0.5, h - 0.5]], atol=1e-9)
        np.testing.assert_allclose(ds.t["bbox"][0], [0, 0, w, h], atol=1e-9)
        # The default is edges: the flag given or not, the same dataset.
        ds2, out2 = self.convert("--resize", "none", "--box-convention", "edges")
        np.testing.assert_array_equal(out2, out)
        np.testing.assert_array_equal(ds2.affine(0), ds.affine(0))

    def test_edges_shrunk_is_inter_area_of_the_slice(self):
        x, y, w, h = BOX
        _, out = self.convert("--size", "%dx%d" % (w // 2, h // 2))
        want = cv2.resize(self.src[y:y + h, x:x + w], (w // 2, h // 2), interpolation=cv2.INTER_AREA)
        self.assertLessEqual(int(np.abs(out.astype(int) - want).max()), 1)

    def test_centers_is_half_a_pixel_right_and_down(self):
        x, y, w, h = BOX
        ds, out = self.convert("--resize", "none", "--box-convention", "centers")
        m = fx.affine_region(x, y, w, h, w, h)
        np.testing.assert_allclose(ds.affine(0).reshape(2, 3), m, atol=1e-9)
        # Each output pixel is the mean of 2 x 2 source pixels: bilinear at half-pixel offsets.
        want = cv2.warpAffine(self.src, m, (w, h), flags=cv2.INTER_LINEAR)
        self.assertLessEqual(int(np.abs(out.astype(int) - want).max()), 1)
        quad = (self.src[y:y + h, x:x + w].astype(float) + self.src[y + 1:y + h + 1, x:x + w]
                + self.src[y:y + h, x + 1:x + w + 1] + self.src[y + 1:y + h + 1, x + 1:x + w + 1]) / 4
        self.assertLessEqual(float(np.abs(out - quad).max()), 1.0)
        self.assertFalse(np.array_equal(out, self.src[y:y + h, x:x + w]))
        np.testing.assert_allclose(ds.t["bbox"][0], fx.apply_affine(m, [[x, y]])[0].tolist() + [w, h],
                                   atol=1e-9)


if __name__ == "__main__":
    unittest.main()
