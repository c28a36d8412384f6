"""End-to-end: OpenCV's imgcodecs is a plugin loaded on first use (lib/transform/opencv_codecs.h).
Neither the tarmac binary nor libtarmac_c.so links it; JPEG work never loads it; PNG work
that needs OpenCV (encoding; a PNG crop is decoded without it) loads it, or stops with a
message that says what is missing and how to point at it. (The Python
reader's side is in tests/python/test_reader.py, which the sanitizer run preloads.)"""
import os
import shutil
import subprocess
import sys
import unittest

import cv2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

TARMAC_LIB = os.environ.get("TARMAC_LIB", "")
PLUGIN = "libtarmac_opencv_codecs.so"


def needed(path):
    """The DT_NEEDED entries of an ELF file, read with binutils' readelf."""
    out = subprocess.run(["readelf", "-d", path], check=True, capture_output=True, text=True).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


def run(args, env_extra):
    env = dict(os.environ, **env_extra)
    return subprocess.run([fx.TARMAC, *args], capture_output=True, env=env, timeout=120)


class CodecsPluginTest(fx.TmpCase):
    @classmethod
    def build(cls):
        members_jpg, members_png, members_bmp = [], [], []
        for i in range(4):
            rgb = fx.smooth_rgb(48, 36, seed=i)
            members_jpg += [("s%d.jpg" % i, fx.jpg(rgb)), ("s%d.json" % i, fx.js({"id": i}))]
            members_png += [("s%d.png" % i, fx.png(rgb)), ("s%d.json" % i, fx.js({"id": i}))]
            members_bmp += [("s%d.bmp" % i, cv2.imencode(".bmp", rgb)[1].tobytes())]
        cls.jpg_tar = fx.write_tar(os.path.join(cls.tmp, "jpg.tar"), members_jpg)
        cls.png_tar = fx.write_tar(os.path.join(cls.tmp, "png.tar"), members_png)
        cls.bmp_tar = fx.write_tar(os.path.join(cls.tmp, "bmp.tar"), members_bmp)
        cls.missing = {"TARMAC_OPENCV_CODECS": os.path.join(cls.tmp, "no-such-dir", PLUGIN)}

    def test_binaries_do_not_link_imgcodecs(self):
        for path in [fx.TARMAC] + ([TARMAC_LIB] if TARMAC_LIB else []):
            libs = needed(path)
            self.assertTrue(libs, path)
            self.assertFalse([n for n in libs if "imgcodecs" in n], (path, libs))

    def test_jpeg_conversion_and_verify_never_load_the_plugin(self):
        out = self.path("jpg-out")
        p = run(["convert", self.jpg_tar, "-o", out, "--crop", "center", "--size", "32", "--format", "jpg"], self.missing)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        p = run(["verify", out, "--decode"], self.missing)
        self.assertEqual(p.returncode, 0, p.stderr.decode())

    def test_png_without_the_plugin_stops_and_says_why(self):
        out = self.path("png-missing")
        # A PNG crop is decoded without OpenCV (png_region.h); PNG output is encoded with it.
        p = run(["convert", self.png_tar, "-o", out, "--crop", "center", "--size", "32", "--format", "png"],
                self.missing)
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("cannot load " + PLUGIN, err)
        self.assertIn("TARMAC_OPENCV_CODECS", err)
        self.assertIn(self.missing["TARMAC_OPENCV_CODECS"], err)
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))
        self.assertFalse(os.path.exists(os.path.join(out, ".tarmac-partial")))

    def test_verify_decode_without_the_plugin_is_not_called_corruption(self):
        # BMPs kept as they are: PNGs are decoded without OpenCV now (png_region.h), BMPs are not.
        out = self.path("bmp-verify")
        p = run(["convert", self.bmp_tar, "-o", out, "--format", "keep"], {})
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        p = run(["verify", out, "--decode"], self.missing)
        err = p.stderr.decode() + p.stdout.decode()
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("cannot load " + PLUGIN, err)
        self.assertNotIn("does not decode", err)
        p = run(["verify", out, "--decode"], {})
        self.assertEqual(p.returncode, 0, p.stderr.decode())

    def test_png_with_the_plugin_named_by_the_environment(self):
        # A copy elsewhere, so that the variable, not the build tree's path, is what finds it.
        built = os.environ.get("TARMAC_PLUGIN_BUILT") or os.path.join(
            os.path.dirname(os.path.dirname(fx.TARMAC)), "lib", "transform", PLUGIN)
        copy = self.path(PLUGIN)
        shutil.copy(built, copy)
        out = self.path("png-env")
        p = run(["convert", self.png_tar, "-o", out, "--crop", "center", "--size", "32", "--format", "png"],
                {"TARMAC_OPENCV_CODECS": copy})
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        ds = fx.Dataset(out)
        self.assertEqual(sorted(ds.keys), ["s0", "s1", "s2", "s3"])
        for i, key in enumerate(ds.keys):
            got = fx.decode_rgb(ds.blob(i))
            src = fx.smooth_rgb(48, 36, seed=int(key[1:]))
            self.assertEqual(got.shape, (32, 32, 3))
            # a centre crop of a smooth picture: close to the source's centre, resampled
            self.assertLess(abs(float(got.mean()) - float(src[2:34, 8:40].mean())), 8.0)


if __name__ == "__main__":
    unittest.main()
