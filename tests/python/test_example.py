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


class DeviceScriptTest(unittest.TestCase):
    def test_gpu_figures_script_runs_on_cpu_from_a_bundle(self):
        """scripts/device/gpu_figures.sh, the one run planned for the GPU machine, on CPU with 2
        steps: it must work from a reader bundle alone, so that the device run is not its test."""
        if importlib.util.find_spec("torch") is None:
            self.skipTest("torch is not installed")
        tmp = tempfile.mkdtemp(prefix="tarmac-device-")
        try:
            raw, data, bundle, out = (os.path.join(tmp, d) for d in ("raw", "hmr", "bundle", "out"))
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make-sample-data.py"), raw,
                            "--samples", "16", "--archives", "1"], check=True, stdout=subprocess.DEVNULL)
            archives = sorted(os.path.join(raw, f) for f in os.listdir(raw))
            subprocess.run([TARMAC, "convert", "-q", *archives, "-o", data, "--crop", "field:bbox_xywh",
                            "--crop-scale", "1.2", "--square", "--size", "224", "--points", "keypoints2d"],
                           check=True, stdout=subprocess.DEVNULL)
            subprocess.run(["bash", os.path.join(ROOT, "scripts", "bundle-reader.sh"), bundle], check=True)
            runs = ["synthetic:small:batched:0:8", "train:small:batched:0:8", "train:small:batched:2:8",
                    "train:small:per-sample:2:8", "loader:small:batched:2:8"]
            env = dict(os.environ, STEPS="3", RUNS=" ".join(runs), THREADS="1 2", DEVICE="cpu",
                       DECODE_SAMPLES="16", PYTHON=sys.executable)
            env.pop("TARMAC_LIB", None)
            r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "device", "gpu_figures.sh"), bundle, data, out],
                               capture_output=True, text=True, env=env, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            for run in runs:
                mode, model, loader, w, batch = run.split(":")
                with open(os.path.join(out, f"train_{mode}_{model}_{loader}_w{w}_b{batch}.log")) as f:
                    text = f.read()
                self.assertIn(f"{mode}, model {model}, {loader} loader, {w} workers, batch {batch}", text)
                self.assertIn("steady state (steps 3-3)", text)
                self.assertIn("samples/s", text)
            with open(os.path.join(out, "decode_scaling.txt")) as f:
                lines = [x for x in f.read().splitlines() if x.startswith("threads")]
            self.assertEqual(len(lines), 2)
            self.assertIn("torch", open(os.path.join(out, "env.txt")).read())
            with open(os.path.join(out, "gpu_decode.txt")) as f:
                text = f.read()
            if importlib.util.find_spec("torchvision") is not None:
                # torchvision's decoder (here on CPU) and tarmac's agree on every pixel to within
                # rounding: both are libjpeg-turbo with the same IDCT and upsampling.
                self.assertIn("torchvision decode_jpeg (cpu)", text)
                diff = float(text.split("pixels:")[1].split()[0])
                self.assertLess(diff, 1.0, text)
            else:
                self.assertIn("torchvision not installed", text)
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    unittest.main()
