"""End-to-end: `tarmac bench` measures what it says on a real dataset: open time, bytes-only
reads, the codec alone (the floor) and the loader with 1..N threads as a fraction of N x floor;
a labels-only dataset gets open time only; a directory that is no dataset is an error."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402


class BenchTest(fx.TmpCase):
    @classmethod
    def build(cls):
        members = []
        for i in range(12):
            members += [("s%02d.jpg" % i, fx.jpg(fx.smooth_rgb(64, 48, seed=i))), ("s%02d.cls" % i, b"%d" % i)]
        src = fx.write_tar(os.path.join(cls.tmp, "a.tar"), members)
        cls.out = os.path.join(cls.tmp, "out")
        cls.labels = os.path.join(cls.tmp, "labels")
        for out, flags in ((cls.out, ["--crop", "center", "--size", "32"]), (cls.labels, ["--no-images"])):
            p = fx.run(["convert", "-q", src, "-o", out, *flags])
            assert p.returncode == 0, p.stderr

    def test_json_figures(self):
        p = fx.run(["bench", self.out, "--threads", "3", "--samples", "10", "--json"])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        j = json.loads(p.stdout)
        self.assertEqual(j["samples"], 12)
        self.assertGreater(j["open_ms"], 0)
        self.assertEqual(j["decode_size"], [32, 32])
        floor = j["codec_1_thread"]["samples_per_s"]
        self.assertGreater(floor, 0)
        self.assertEqual([d["threads"] for d in j["decoded"]], [1, 2, 3])
        for d in j["decoded"]:
            self.assertGreater(d["samples_per_s"], 0)
            self.assertAlmostEqual(d["of_floor"], d["samples_per_s"] / (d["threads"] * floor), places=6)
        self.assertGreater(j["bytes_only"]["samples_per_s"], 0)

    def test_text_and_labels_only(self):
        p = fx.run(["bench", self.out, "--threads", "1", "--samples", "5"])
        text = p.stdout.decode()
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertIn("codec alone, 1 thread", text)
        self.assertIn("of 1 x floor", text)
        j = json.loads(fx.run(["bench", self.labels, "--json"]).stdout)
        self.assertEqual(j["samples"], 12)
        self.assertNotIn("decoded", j)
        p = fx.run(["bench", self.tmp])
        self.assertEqual(p.returncode, 1)
        self.assertIn("labels.safetensors", p.stderr.decode())


if __name__ == "__main__":
    unittest.main()
