"""End-to-end: memory bounds against hostile inputs (issue #25, item 12).

A JSON label deflated into a tiny zip (a DOM costs ~25-40x its text), a CSV table with one huge
cell, a JSON Lines row and a COCO value over the limit, and a source sample that would make
more outputs than a run holds at once (COCO annotations on one image, --instances entries).
Each is refused naming the member, row or field, the size, the limit and the flag that raises
it, at limits scaled down by those flags; the peak RSS of the tarmac process, above that of a
run on one small sample (so that a sanitizer's overhead cancels), shows that a refused input was
not inflated, copied or parsed first.

Run: TARMAC=build/apps/tarmac /usr/bin/python3 tests/e2e/test_limits.py
"""
import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
import zipfile

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

MIB = 1 << 20


# Runs argv[2:] and writes its peak RSS (KiB) to the fd argv[1]. A small Python without site
# packages forks it, not this test: a fork's RSS counts the parent's pages before the exec.
RSS_WRAPPER = """
import os, resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
os.write(int(sys.argv[1]), b"%d" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(code)
"""


def rss_run(args, timeout=300):
    """Runs tarmac: (exit code, stdout, stderr, its peak RSS in MiB)."""
    r, w = os.pipe()
    try:
        p = subprocess.run([sys.executable, "-S", "-c", RSS_WRAPPER, str(w), fx.TARMAC, *args],
                           capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL,
                           pass_fds=(w,))
        os.close(w)
        w = -1
        kib = int(os.read(r, 64) or b"0")
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
    return (p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"),
            kib / 1024)


def compressible_json(size):
    """A JSON object of about `size` bytes that deflates ~1000x: one long list of zeros."""
    n = max(1, (size - 16) // 2)
    return ('{"x": [' + ",".join(["0"] * n) + "]}").encode()


class LimitsTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.jpg = fx.jpg(fx.smooth_rgb(64, 48, seed=1), 90)
        # A 24 MiB JSON label that deflates to < 64 KiB; its DOM would cost ~0.6 GiB.
        cls.big_json = compressible_json(24 * MIB)
        with zipfile.ZipFile(cls.tmp + "/bomb.zip", "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("s/000.jpg", cls.jpg)
            z.writestr("s/000.json", b'{"x": [1, 2]}')
            z.writestr("s/001.jpg", cls.jpg)
            z.writestr("s/001.json", cls.big_json)
        fx.write_tar(cls.tmp + "/big.tar", [("s/000.jpg", cls.jpg), ("s/000.json", b'{"x": [1]}'),
                                            ("s/001.jpg", cls.jpg), ("s/001.json", cls.big_json)])
        small = fx.write_tar(cls.tmp + "/small.tar", [("s/000.jpg", cls.jpg),
                                                      ("s/000.json", b'{"x": [1]}')])
        code, _, err, cls.base_rss = rss_run(["convert", small, "-o", cls.tmp + "/base", "-q",
                                              "--threads", "2"])
        assert code == 0, err

    def refuse(self, args, says, rss_below_mib=None):
        out = self.path("refused-%d" % time.monotonic_ns())
        code, _, err, rss = rss_run(["convert", *args, "-o", out, "--threads", "2", "-q"])
        self.assertEqual(code, 1, err)
        for s in says:
            self.assertIn(s, err)
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))
        if rss_below_mib is not None:
            self.assertLess(rss, self.base_rss + rss_below_mib, err)
        return err, rss

    # ------------------------------------------------------------ label members

    def test_a_json_label_in_a_zip_is_refused_before_it_is_inflated(self):
        size = len(self.big_json)
        self.assertLess(os.path.getsize(self.path("bomb.zip")), 64 << 10)
        err, rss = self.refuse(
            [self.path("bomb.zip"), "--max-label-size", "1M"],
            ["'s/001'", "member 's/001.json'", "%.1f MiB" % (size / MIB),
             "over --max-label-size 1.0 MiB", "raise --max-label-size"],
            rss_below_mib=12)  # not inflated: less than half the text above a small run
        print(f"\n  zip, 24 MiB JSON refused at --max-label-size 1M: peak RSS {rss:.0f} MiB",
              file=sys.stderr)

    def test_a_json_label_over_the_limit_is_skipped_as_member_too_large(self):
        out = self.path("skip-%d" % time.monotonic_ns())
        code, stdout, err, _ = rss_run(["convert", self.path("big.tar"), "-o", out, "-q",
                                        "--max-label-size", "1M", "--on-error", "skip"])
        self.assertEqual(code, 0, err)
        ds = fx.Dataset(out)
        self.assertEqual(ds.keys, ["s/000"])
        (sk,) = ds.manifest["skipped"]
        self.assertEqual((sk["sample"], sk["code"]), ("s/001", "member_too_large"))
        self.assertIn("--max-label-size", sk["reason"])

    def test_a_label_at_the_limit_converts(self):
        # The limit is the member's size: exactly at it is read, one byte more is not.
        label = compressible_json(MIB)
        tar = fx.write_tar(self.path("one.tar"), [("s/000.jpg", self.jpg), ("s/000.json", label)])
        _, ds = fx.convert(self, [tar], "--max-label-size", str(len(label)), "-q")
        self.assertEqual(ds.keys, ["s/000"])
        self.refuse([tar, "--max-label-size", str(len(label) - 1)],
                    ["member 's/000.json': the label member is 1.0 MiB, over --max-label-size"])

    def test_a_member_inflating_past_max_member_size_is_not_held(self):
        # A gzip bomb: a .tar.gz whose member inflates to 48 MiB, refused at 1 MiB while
        # inflating (an existing bound, checked here for its memory).
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            for name, data in [("g/000.jpg", self.jpg), ("g/000.json", b"0" * (48 * MIB))]:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        path = self.path("bomb.tar.gz")
        with open(path, "wb") as f:
            f.write(gzip.compress(buf.getvalue(), 9))
        out = self.path("gz-%d" % time.monotonic_ns())
        code, _, err, rss = rss_run(["convert", path, "-o", out, "-q", "--on-error", "skip",
                                     "--max-member-size", "1M"])
        self.assertEqual(code, 0, err)
        ignored = fx.Dataset(out).manifest.get("ignored", []) + fx.Dataset(out).manifest["skipped"]
        self.assertIn("member_too_large", [e["code"] for e in ignored])
        self.assertLess(rss, self.base_rss + 24, err)  # not held: less than half of it

    # ------------------------------------------------------------ tables

    def test_a_huge_csv_cell_is_refused_naming_row_and_column(self):
        size = 16 * MIB
        path = self.path("cell.csv")
        with open(path, "w") as f:
            f.write("image_path,caption\ns/000.jpg,short\ns/001.jpg,\"" + "a" * size + "\"\n")
        err, rss = self.refuse(
            [self.path("big.tar"), "--table", path, "--max-label-size", "1M"],
            ["cell.csv, line 3 (row 1), column 'caption': a cell of 16.0 MiB",
             "over --max-label-size 1.0 MiB", "raise --max-label-size"],
            rss_below_mib=16 + 8)  # the file, read whole, but not its cell copied
        print(f"\n  CSV, 16 MiB cell refused at --max-label-size 1M: peak RSS {rss:.0f} MiB",
              file=sys.stderr)

    def test_a_long_json_lines_row_is_refused_before_it_is_parsed(self):
        path = self.path("rows.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps({"image_path": "s/000.jpg", "n": 1}) + "\n")
            f.write(json.dumps({"image_path": "s/001.jpg", "v": [0] * (2 * MIB)}) + "\n")
        self.refuse([self.path("big.tar"), "--table", path, "--max-label-size", "1M"],
                    ["rows.jsonl, line 2 (row 1): a line of 6.0 MiB",
                     "over --max-label-size 1.0 MiB", "raise --max-label-size"])

    def coco(self, name, per_image):
        """A COCO table: `per_image` annotations on s/000.jpg, one on s/001.jpg."""
        anns = [{"id": i, "image_id": 1, "bbox": [i % 40, i % 30, 8, 8], "category_id": 1}
                for i in range(per_image)]
        anns.append({"id": per_image, "image_id": 2, "bbox": [1, 1, 8, 8], "category_id": 1})
        doc = {"images": [{"id": 1, "file_name": "s/000.jpg", "width": 64, "height": 48},
                          {"id": 2, "file_name": "s/001.jpg", "width": 64, "height": 48}],
               "annotations": anns, "categories": [{"id": 1, "name": "thing"}]}
        path = self.path(name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    def test_a_coco_value_over_the_limit_is_refused(self):
        path = self.path("seg.json")
        doc = {"images": [{"id": 1, "file_name": "s/000.jpg"}],
               "annotations": [{"id": 1, "image_id": 1, "segmentation": [[1.5] * 500000]}]}
        with open(path, "w") as f:
            json.dump(doc, f)
        self.refuse([self.path("big.tar"), "--table", path, "--max-label-size", "1M"],
                    ["annotations[0], key 'segmentation': a value of at least 1.0 MiB",
                     "over --max-label-size 1.0 MiB", "raise --max-label-size"])

    def test_an_image_with_too_many_table_rows_is_refused(self):
        table = self.coco("many.json", 3000)
        tar = self.path("big.tar")
        err, _ = self.refuse([tar, "--table", table, "--crop", "field:bbox", "--size", "16",
                              "--max-outputs-per-sample", "1000"],
                             ["'s/000/0'", "image 's/000.jpg' is named by 3000 table rows",
                              "more than --max-outputs-per-sample 1000",
                              "raise --max-outputs-per-sample"])
        # Under skip every row of that image is listed, the other image converts.
        _, ds = fx.convert(self, [tar], "--table", table, "--crop", "field:bbox", "--size", "16",
                           "--max-outputs-per-sample", "1000", "--on-error", "skip", "-q")
        self.assertEqual(ds.keys, ["s/001/3000"])
        self.assertEqual(len(ds.manifest["skipped"]), 3000)
        self.assertEqual({s["code"] for s in ds.manifest["skipped"]}, {"bad_sample"})
        # At the limit the image converts.
        _, ds = fx.convert(self, [tar], "--table", table, "--crop", "field:bbox", "--size", "16",
                           "--max-outputs-per-sample", "3000", "-q")
        self.assertEqual(len(ds.keys), 3001)

    def test_a_sample_with_too_many_instances_is_refused(self):
        persons = [{"bbox": [i % 40, i % 30, 8, 8]} for i in range(500)]
        tar = fx.write_tar(self.path("inst.tar"), [
            ("f/000.jpg", self.jpg), ("f/000.json", json.dumps({"persons": persons}).encode())])
        self.refuse([tar, "--instances", "persons", "--crop", "field:persons.bbox", "--size", "16",
                     "--max-outputs-per-sample", "100"],
                    ["'f/000'", "instances field 'persons' (--instances) has 500 entries",
                     "more than --max-outputs-per-sample 100", "raise --max-outputs-per-sample"])
        _, ds = fx.convert(self, [tar], "--instances", "persons", "--crop", "field:persons.bbox",
                           "--size", "16", "--max-outputs-per-sample", "500", "-q")
        self.assertEqual(len(ds.keys), 500)



# Address space for a run that must be refused before it allocates: if the bound ever stopped
# holding, the run fails to allocate (and the test with it) instead of taking the machine's memory.
# Not under ASan, whose shadow memory alone is over any such limit (the refusal is still checked).
_ASAN = fx.asan_build()


def _limit_memory():
    import resource
    if not _ASAN:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


class OutputSizeTest(fx.TmpCase):
    """Issue #35 item 12: --size, --resize bucket, --max-pixels and --format bound the output
    image before the run starts (docs/cli.md, "Limits"); what the flags leave to the source
    (--resize shorter) is bounded per sample."""

    @classmethod
    def build(cls):
        cls.rgb = fx.smooth_rgb(64, 48, seed=4)
        cls.tar = fx.write_tar(cls.tmp + "/one.tar", [("s/000.png", fx.png(cls.rgb))])

    def refused(self, *flags, threads="2"):
        out = self.path("refused-%d" % time.monotonic_ns())
        p = subprocess.run([fx.TARMAC, "convert", self.tar, "-o", out, "--threads", threads, *flags],
                           capture_output=True, timeout=60, preexec_fn=_limit_memory)
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 2, err)  # a usage error
        self.assertFalse(os.path.exists(out) and os.listdir(out), err)  # before any output
        return err

    def image(self, ds, i=0):
        return cv2.imdecode(np.frombuffer(ds.blob(i), np.uint8), cv2.IMREAD_UNCHANGED)

    def test_huge_size_refused_before_work(self):
        # The bug: 12.9 GB per thread for the warp output, OOM-killed after a minute.
        err = self.refused("--size", "65535", "--crop", "center")
        for s in ("--size 65535 with --crop center", "12.0 GiB per thread for the output image (65535x65535x3)",
                  "24.0 GiB with 2 threads", "over the bound of 768.0 MiB (--max-pixels 268435456 x 3 channels",
                  "choose a smaller --size", "raise --max-pixels"):
            self.assertIn(s, err)
        # --resize shorter: every output is at least NxN; --channels 1: one byte a pixel.
        err = self.refused("--size", "20000", "--channels", "1", "--format", "png")
        self.assertIn("--size 20000 with --resize shorter needs 381.5 MiB per thread for the output image "
                      "(20000x20000x1)", err)
        self.assertIn("over the bound of 256.0 MiB", err)

    def test_max_pixels_bounds_the_output_exactly(self):
        # At the bound the run converts (the output checked against OpenCV's resize of the same
        # crop); one pixel side more is refused, naming both flags and the numbers.
        _, ds = fx.convert(self, [self.tar], "--size", "64", "--crop", "center", "--max-pixels", "4096",
                           "--format", "png", "-q")
        got = self.image(ds)
        self.assertEqual(got.shape, (64, 64, 3))
        err = self.refused("--size", "65", "--crop", "center", "--max-pixels", "4096")
        self.assertIn("--size 65 with --crop center needs 12.4 KiB per thread for the output image (65x65x3)", err)
        self.assertIn("--max-pixels 4096", err)
        err = self.refused("--size", "100x41", "--resize", "fit", "--max-pixels", "4096")
        self.assertIn("--size 100x41 with --resize fit", err)
        _, ds = fx.convert(self, [self.tar], "--size", "100x40", "--resize", "fit", "--max-pixels", "4096", "-q")
        self.assertEqual(self.image(ds).shape, (40, 53, 3))

    def test_jpeg_side_limit_names_flag(self):
        # The bug: --size 65535x1 failed at the first sample with OpenCV's "Maximum supported
        # image dimension is 65500", naming no flag.
        err = self.refused("--size", "65535x1", "--crop", "center")
        self.assertIn("--size 65535x1 with --crop center: JPEG images are at most 65500 pixels a side, "
                      "and every output is 65535x1; use --format png or a smaller --size", err)
        _, ds = fx.convert(self, [self.tar], "--size", "65500x1", "--crop", "center", "-q")
        self.assertEqual(self.image(ds).shape, (1, 65500, 3))
        _, ds = fx.convert(self, [self.tar], "--size", "65535x1", "--crop", "center", "--format", "png", "-q")
        self.assertEqual(self.image(ds).shape, (1, 65535, 3))

    def test_webp_side_limit_names_flag(self):
        err = self.refused("--size", "1x16384", "--resize", "exact", "--format", "webp")
        self.assertIn("--size 1x16384 (--resize exact): WebP images are at most 16383 pixels a side", err)
        self.assertIn("use --format jpg or png", err)
        _, ds = fx.convert(self, [self.tar], "--size", "1x16383", "--resize", "exact", "--format", "webp", "-q")
        self.assertEqual(self.image(ds).shape[:2], (16383, 1))

    def test_the_largest_bucket_is_bounded(self):
        # --size 8192 holds a 16384x4096 bucket (ratio 4): over WebP's side, within JPEG's.
        err = self.refused("--resize", "bucket", "--size", "8192", "--format", "webp")
        self.assertIn("--size 8192 with --resize bucket (--bucket-step 64, --bucket-max-ratio 4; its largest "
                      "bucket 8192x8192): WebP images are at most 16383 pixels a side, and an output may be "
                      "4096x16384", err)
        err = self.refused("--resize", "bucket", "--size", "20000")
        self.assertIn("its largest bucket", err)
        self.assertIn("over the bound of 768.0 MiB (--max-pixels 268435456", err)
        err = self.refused("--resize", "bucket", "--size", "64", "--bucket-step", "16", "--max-pixels", "4000")
        self.assertIn("(64x64x3)", err)
        _, ds = fx.convert(self, [self.tar], "--resize", "bucket", "--size", "64", "--bucket-step", "16",
                           "--max-pixels", "4096", "-q")
        self.assertEqual(self.image(ds).shape, (48, 80, 3))  # the 4:3 source's bucket: 80x48

    def test_an_output_over_max_pixels_from_the_source_is_a_bad_sample(self):
        # --resize shorter --size 60 of a 64x48 source: 80x60 = 4800 pixels; the flags alone
        # promise only 60x60 = 3600 (the longer side follows the source), so the output is
        # checked per sample, before it is made.
        _, ds = fx.convert(self, [self.tar], "--size", "60", "--max-pixels", "4800", "-q")
        self.assertEqual(self.image(ds).shape, (60, 80, 3))
        out = self.path("shorter-%d" % time.monotonic_ns())
        p = fx.run(["convert", self.tar, "-o", out, "--size", "60", "--max-pixels", "4799", "-q"])
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("the output image would be 80x60 = 4800 pixels, over --max-pixels 4799", err)
        self.assertIn("s/000", err)
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))
        _, ds = fx.convert(self, [self.tar], "--size", "60", "--max-pixels", "4799", "--on-error", "skip",
                           "--allow-empty", "-q")
        (skipped,) = ds.manifest["skipped"]
        self.assertEqual((skipped["sample"], skipped["code"]), ("s/000", "bad_image"))
        self.assertIn("--max-pixels 4799", skipped["reason"])

if __name__ == "__main__":
    unittest.main()
