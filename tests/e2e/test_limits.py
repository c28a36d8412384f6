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


if __name__ == "__main__":
    unittest.main()
