"""End-to-end: --channels 3|1|keep. Grey (MNIST-like 28x28 u8) and colour sources are written
with cv2 and tarfile; each stored image is decoded with cv2 (IMREAD_UNCHANGED, so its channel
count shows) and compared with a warp computed here with cv2.warpAffine from the crop
geometry; then read back through the Python package (decode, batch with mixed channels)."""
import json
import os
import sys
import unittest

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

N = 6
SIZE = 40  # 28 -> 40: an upscale, bilinear in tarmac and in the reference alike


def mnist_like(seed):
    """A 28x28 uint8 digit-like picture: a smooth blob and strokes on black."""
    y, x = np.mgrid[0:28, 0:28].astype(np.float64)
    d = 255 * np.exp(-((x - 14 - seed) ** 2 + (y - 13) ** 2) / 40.0)
    d += 120 * (np.abs(x - y - seed) < 2)
    return np.clip(d, 0, 255).astype(np.uint8)


def encode(ext, a, quality=95):
    ok, buf = cv2.imencode("." + ext, a, [cv2.IMWRITE_JPEG_QUALITY, quality] if ext == "jpg" else [])
    assert ok
    return buf.tobytes()


def stored(ds, i):
    m = cv2.imdecode(np.frombuffer(ds.blob(i), np.uint8), cv2.IMREAD_UNCHANGED)
    assert m is not None
    return m


def ref_warp(src, size=SIZE):
    """--size N without a crop: the whole image resized to N x N (resize exact)."""
    h, w = src.shape[:2]
    return fx.warp_ref(src, fx.affine_region(-0.5, -0.5, w, h, size, size), size, size)


class ChannelsTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.grey = [mnist_like(k) for k in range(N)]
        cls.rgb = [fx.smooth_rgb(28, 28, seed=k) for k in range(N)]
        png, jpg, mixed = [], [], []
        for k in range(N):
            png += [(f"g/{k:03d}.png", encode("png", cls.grey[k])), (f"g/{k:03d}.cls", b"%d\n" % k)]
            jpg += [(f"g/{k:03d}.jpg", encode("jpg", cls.grey[k])), (f"g/{k:03d}.cls", b"%d\n" % k)]
            # even samples grey, odd ones colour
            img = encode("png", cls.grey[k]) if k % 2 == 0 else fx.png(cls.rgb[k])
            mixed += [(f"m/{k:03d}.png", img)]
        cls.png_tar = fx.write_tar(os.path.join(cls.tmp, "grey_png.tar"), png)
        cls.jpg_tar = fx.write_tar(os.path.join(cls.tmp, "grey_jpg.tar"), jpg)
        cls.mixed_tar = fx.write_tar(os.path.join(cls.tmp, "mixed.tar"), mixed)

    def test_keep_grey_png_is_one_channel_and_exact(self):
        _, ds = fx.convert(self, [self.png_tar], "--channels", "keep", "--format", "png", "--size", str(SIZE))
        self.assertEqual(ds.manifest["output_options"]["--channels"], "keep")
        for i in range(N):
            m = stored(ds, i)
            self.assertEqual(m.shape, (SIZE, SIZE), "stored as a 1-channel PNG")
            ref = ref_warp(self.grey[i])
            self.assertLessEqual(int(np.abs(m.astype(int) - ref).max()), 1)
            self.assertLess(np.mean(m != ref), 0.02)

    def test_keep_grey_jpeg_is_one_channel(self):
        _, ds = fx.convert(self, [self.jpg_tar], "--channels", "keep", "--size", str(SIZE))
        for i in range(N):
            m = stored(ds, i)
            self.assertEqual(m.shape, (SIZE, SIZE), "stored as a 1-component JPEG")
            src = cv2.imdecode(np.frombuffer(encode("jpg", self.grey[i]), np.uint8), cv2.IMREAD_UNCHANGED)
            self.assertLess(fx.mean_abs(m, ref_warp(src)), 2.0)

    def test_three_is_the_default_and_replicates(self):
        _, ds = fx.convert(self, [self.png_tar], "--format", "png", "--size", str(SIZE))
        self.assertEqual(ds.manifest["output_options"]["--channels"], "3")
        for i in range(N):
            m = stored(ds, i)
            self.assertEqual(m.shape, (SIZE, SIZE, 3))
            self.assertTrue((m[:, :, 0] == m[:, :, 1]).all() and (m[:, :, 1] == m[:, :, 2]).all())
            self.assertLessEqual(int(np.abs(m[:, :, 0].astype(int) - ref_warp(self.grey[i])).max()), 1)

    def test_one_converts_colour_with_opencv_weights(self):
        _, ds = fx.convert(self, [self.mixed_tar], "--channels", "1", "--format", "png", "--size", str(SIZE))
        for i in range(N):
            m = stored(ds, i)
            self.assertEqual(m.shape, (SIZE, SIZE))
            src = self.grey[i] if i % 2 == 0 else cv2.cvtColor(self.rgb[i], cv2.COLOR_RGB2GRAY)
            ref = ref_warp(self.grey[i]) if i % 2 == 0 else cv2.cvtColor(ref_warp(self.rgb[i]), cv2.COLOR_RGB2GRAY)
            self.assertLessEqual(int(np.abs(m.astype(int) - ref).max()), 1, f"sample {i}")
            del src

    def test_keep_mixed_and_the_reader(self):
        _, ds = fx.convert(self, [self.mixed_tar], "--channels", "keep", "--format", "png", "--size", str(SIZE))
        for i in range(N):
            self.assertEqual(stored(ds, i).ndim, 2 if i % 2 == 0 else 3)
        sys.path.insert(0, os.path.join(fx.HERE, "..", "..", "python"))
        import tarmac
        with tarmac.Dataset(ds.out) as t:
            for i in range(N):
                want_c = 1 if i % 2 == 0 else 3
                self.assertEqual(t.decoded_channels(i), want_c)
                a = t.decode(i)
                self.assertEqual(a.shape, (SIZE, SIZE, want_c))
                m = stored(ds, i)
                if want_c == 1:
                    np.testing.assert_array_equal(a[:, :, 0], m)
                    np.testing.assert_array_equal(t.decode(i, channels=3), np.repeat(m[:, :, None], 3, axis=2))
                else:
                    np.testing.assert_array_equal(a, cv2.cvtColor(m, cv2.COLOR_BGR2RGB))
                    np.testing.assert_array_equal(t.decode(i, channels=1)[:, :, 0], cv2.cvtColor(m, cv2.COLOR_BGR2GRAY))
            # A batch of mixed samples has one channel count: 3 by default, 1 when asked.
            imgs, _ = t.batch(range(N))
            self.assertEqual(imgs.shape, (N, SIZE, SIZE, 3))
            for i in range(N):
                np.testing.assert_array_equal(imgs[i], t.decode(i, channels=3))
            imgs1, _ = t.batch(range(N), channels=1, threads=2)
            self.assertEqual(imgs1.shape, (N, SIZE, SIZE, 1))
            for i in range(N):
                np.testing.assert_array_equal(imgs1[i], t.decode(i, channels=1))

    def test_torch_dataset_channels(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            self.skipTest("no torch")
        sys.path.insert(0, os.path.join(fx.HERE, "..", "..", "python"))
        import tarmac
        import tarmac.torch as tt
        _, ds = fx.convert(self, [self.mixed_tar], "--channels", "keep", "--format", "png", "--size", str(SIZE))
        with tarmac.Dataset(ds.out) as t:
            for c in (1, 3):
                d = tt.TarmacDataset(ds.out, channels=c)
                self.assertEqual(tuple(d[1]["image"].shape), (c, SIZE, SIZE))
                b = d[list(range(N))]["image"]
                self.assertEqual(tuple(b.shape), (N, c, SIZE, SIZE))
                for i in range(N):
                    np.testing.assert_array_equal(b[i].permute(1, 2, 0).numpy(), t.decode(i, channels=c))

    def test_stored_bytes_shrink(self):
        _, keep = fx.convert(self, [self.jpg_tar], "--channels", "keep", "--size", str(SIZE))
        _, three = fx.convert(self, [self.jpg_tar], "--channels", "3", "--size", str(SIZE))
        k = sum(int(s) for s in keep.t["__image__.size"])
        t = sum(int(s) for s in three.t["__image__.size"])
        self.assertLess(k, t)

    def test_webp_and_raw_refused(self):
        for fmt in ("webp", "raw"):
            p = fx.run(["convert", self.png_tar, "-o", self.path("no-" + fmt), "--channels", "keep", "--format", fmt])
            self.assertEqual(p.returncode, 2)
            self.assertIn("3-channel", p.stderr.decode())
        p = fx.run(["convert", self.png_tar, "-o", self.path("no-keep"), "--channels", "1", "--format", "keep"])
        self.assertEqual(p.returncode, 2)
        # --format keep with --channels keep stores the source bytes: grey stays grey.
        _, ds = fx.convert(self, [self.png_tar], "--channels", "keep", "--format", "keep")
        self.assertEqual(ds.blob(0), encode("png", self.grey[0]))


if __name__ == "__main__":
    unittest.main()
