"""End-to-end: a PNG cropped to one output is decoded only as far as the crop needs
(lib/transform/png_region.h), and its pixels are those of the whole image decoded by OpenCV
and warped: checked against cv2.imdecode + cv2.warpAffine (the oracle, independent of tarmac)
for PNGs of every kind PIL and OpenCV write (palettes with transparency among them), a PNG
with an EXIF orientation (left to the full decoder) and 16-bit depth maps (--dense)."""
import io
import os
import sys
import unittest

import cv2
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

W, H = 160, 120
# Box 100x90 from (30.5, 17.25) to 80x72: a scale of 0.8, resampled by area averaging; the
# oracle is OpenCV's decode and fixtures.warp_ref (area averaging from its definition).
BOX = (30.5, 17.25, 100, 90)
OUT = (80, 72)


def pil_png(img, **kw):
    b = io.BytesIO()
    img.save(b, format="PNG", **kw)
    return b.getvalue()


def noisy_rgb(seed):
    rgb = fx.smooth_rgb(W, H, seed=seed).astype(np.int16)
    rng = np.random.default_rng(seed)
    return np.clip(rgb + rng.integers(-20, 20, rgb.shape), 0, 255).astype(np.uint8)


def images():
    """(name, PNG bytes) of many kinds."""
    rgb = noisy_rgb(1)
    grey = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    alpha = (np.arange(W * H).reshape(H, W) % 251).astype(np.uint8)
    out = [("rgb8", fx.png(rgb)), ("grey8", fx.png(grey)),
           ("rgba8", fx.png(np.dstack([rgb, alpha]))),
           ("rgb16", fx.png(rgb.astype(np.uint16) * 257 + 3)),
           ("grey16", fx.png(fx.smooth_u16(W, H))),
           ("greyalpha8", pil_png(Image.fromarray(np.dstack([grey, alpha]), "LA"))),
           ("bilevel", pil_png(Image.fromarray(grey).convert("1")))]
    for colours in (2, 4, 16, 256):  # PIL writes 1-, 2-, 4- and 8-bit palettes
        p = Image.fromarray(rgb).quantize(colours)
        out.append(("palette%d" % colours, pil_png(p)))
        out.append(("palette%d_trns" % colours, pil_png(p, transparency=bytes(range(0, 250, 50)))))
    rgb_key = rgb.copy()
    rgb_key[10:40, 10:60] = (7, 8, 9)
    out.append(("rgb8_key", pil_png(Image.fromarray(rgb_key), transparency=(7, 8, 9))))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    out.append(("exif6", pil_png(Image.fromarray(rgb), exif=exif)))
    return out


class PngRegionTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.members = images()
        cls.images, cls.depths = dict(cls.members), {}
        members = []
        for name, data in cls.members:
            cls.depths[name] = fx.png(fx.smooth_u16(W, H, seed=len(members)))
            members += [(name + ".png", data), (name + ".depth.png", cls.depths[name])]
        cls.tar = fx.write_tar(os.path.join(cls.tmp, "png.tar"), members)

    def test_box_crop_equals_the_whole_image_warped(self):
        box = "box:%s,%s,%s,%s" % BOX
        _, ds = fx.convert(self, [self.tar], "--crop", box, "--size", "%dx%d" % OUT, "--format", "png",
                           "--dense", "depth.png")
        self.assertEqual(len(ds.keys), len(self.members))
        for i, key in enumerate(ds.keys):
            m = ds.affine(i).reshape(2, 3)
            src = cv2.imdecode(np.frombuffer(self.images[key], np.uint8), cv2.IMREAD_COLOR)
            want = fx.warp_ref(src, m, *OUT)
            got = cv2.imdecode(np.frombuffer(ds.blob(i), np.uint8), cv2.IMREAD_UNCHANGED)
            if got.ndim == 2:  # a grey source stays grey
                want = cv2.cvtColor(want, cv2.COLOR_BGR2GRAY)
            self.assertTrue(np.array_equal(got, want), key)
            # The depth map, by nearest neighbour; its own size mapped onto the image's.
            depth = cv2.imdecode(np.frombuffer(self.depths[key], np.uint8), cv2.IMREAD_UNCHANGED)
            sx, sy = src.shape[1] / depth.shape[1], src.shape[0] / depth.shape[0]
            to_image = np.array([[sx, 0, 0.5 * sx - 0.5], [0, sy, 0.5 * sy - 0.5], [0, 0, 1]])
            want_d = fx.warp_ref(depth, m @ to_image, *OUT, flags=cv2.INTER_NEAREST)
            got_d = cv2.imdecode(np.frombuffer(ds.blob(i, "__depth__"), np.uint8), cv2.IMREAD_UNCHANGED)
            self.assertEqual(got_d.dtype, np.uint16, key)
            self.assertTrue(np.array_equal(got_d, want_d), key)
        # exif6's oracle is the turned image (imdecode applies the orientation): its equality
        # above says the geometry saw the turned size.
        self.assertIn("exif6", ds.keys)


if __name__ == "__main__":
    unittest.main()
