"""examples/train_keypoints.py runs one step on CPU on a converted HMR-style dataset.
Skips when torch is not installed."""
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TARMAC = os.environ.get("TARMAC", "tarmac")


class ExampleTest(unittest.TestCase):
    def test_train_keypoints_one_step(self):
        if importlib.util.find_spec("torch") is None:
            self.skipTest("torch is not installed")
        tmp = tempfile.mkdtemp(prefix="tarmac-example-")
        try:
            raw, out = os.path.join(tmp, "raw"), os.path.join(tmp, "hmr")
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make-sample-data.py"), raw,
                            "--samples", "16", "--archives", "2"], check=True, stdout=subprocess.DEVNULL)
            archives = sorted(os.path.join(raw, f) for f in os.listdir(raw))
            subprocess.run([TARMAC, "convert", "-q", *archives, "-o", out, "--crop", "field:bbox_xywh",
                            "--crop-scale", "1.2", "--square", "--size", "224", "--points", "keypoints2d",
                            "--boxes", "bbox_xywh"], check=True, stdout=subprocess.DEVNULL)
            r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_keypoints.py"), out,
                                "--steps", "1", "--device", "cpu", "--batch-size", "8", "--workers", "0"],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("samples/s", r.stdout)
            self.assertIn("data-wait", r.stdout)
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    unittest.main()
