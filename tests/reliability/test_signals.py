"""A signal is a stop, named as one (docs/reliability.md):

- a file size limit (`ulimit -f`, RLIMIT_FSIZE) reached while a shard is written: SIGXFSZ is
  ignored, the write's EFBIG is an error naming the file and the limit, exit 1, the checkpoint
  kept; --resume once the limit is raised gives the bytes of a run without it;
- SIGTERM while a worker is inside a long encode (a large image written as WebP, seconds of
  work that polls no stop request): exit 143 within a few seconds (the old code waited 10 s
  for its watchdog, blaming "input that does not come"), saying what it did not wait for,
  nothing that looks like a dataset, a checkpoint of the samples before it;
- SIGTERM or SIGINT during `verify --decode`: exit 143/130 at once, saying the result is
  unknown, neither "OK" nor "FAILED" (it died by the signal's default action, silently).
"""
import json
import os
import resource
import signal
import subprocess
import sys
import time
import unittest

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, HERE)
import fixtures as fx  # noqa: E402
import conversion as conv  # noqa: E402

FSIZE_LIMIT = 1 << 20
SMALL = 120  # small samples, then the one over the file size limit, then a few more
BIG_AT = 80


def noise_png(w, h, seed):
    """PNG bytes of uniform noise: incompressible, about 3 * w * h bytes."""
    return fx.png(np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8))


class FileSizeLimitTest(fx.TmpCase):
    @classmethod
    def build(cls):
        jpgs = [fx.jpg(fx.smooth_rgb(256, 192, seed=s), quality=90) for s in range(17)]
        big = noise_png(700, 700, 1)  # ~1.4 MiB: the shard holding it passes 1 MiB
        assert len(big) > FSIZE_LIMIT
        members = []
        for i in range(SMALL):
            key = "k/%05d" % i
            members.append((key + (".png" if i == BIG_AT else ".jpg"), big if i == BIG_AT else jpgs[i % 17]))
            members.append((key + ".json", fx.js({"id": i})))
        cls.archive = fx.write_tar(os.path.join(cls.tmp, "in.tar"), members)
        cls.ref = os.path.join(cls.tmp, "ref")
        subprocess.run(cls.command(cls.archive, cls.ref), check=True)

    @staticmethod
    def command(archive, out, *extra):
        return [fx.TARMAC, "convert", archive, "-o", out, "--format", "keep", "--shard-size", "256K",
                "--threads", "2", "-q", *extra]

    def test_sigxfsz_is_an_error(self):
        out = self.path("out")

        def limit():
            resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_LIMIT, FSIZE_LIMIT))

        p = subprocess.run(self.command(self.archive, out), capture_output=True, timeout=120, preexec_fn=limit)
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 1, "killed by signal %d? %s" % (-p.returncode, err))
        self.assertRegex(err, r"cannot write \d+ bytes to '[^']*shard-\d{6}\.tar'")
        self.assertIn("file size limit (ulimit -f) of %d bytes reached; resume with --resume after raising it"
                      % FSIZE_LIMIT, err)
        self.assertNotIn("labels.safetensors", os.listdir(out))
        self.assertNotIn("manifest.json", os.listdir(out))
        kept = conv.checkpoint(out)["writer"]["samples"]
        self.assertGreater(kept, 0)
        self.assertIn("%d converted sample(s) are kept" % kept, err)
        self.assertIn("--resume", err)
        # The limit raised (none here): --resume finishes it as a run that never met it.
        p = subprocess.run(self.command(self.archive, out, "--resume"), capture_output=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        conv.assert_same_dataset(self, out, self.ref)
        self.assertEqual(conv.resumed_samples(out), kept)


class SlowEncodeTest(fx.TmpCase):
    SMALL = 64  # one batch of small samples, written first; then the big one
    SIDE = 8000  # its WebP encode: 20 s or more on one core (a minute on a busy one)

    @classmethod
    def build(cls):
        members = []
        small = fx.jpg(fx.smooth_rgb(64, 48, seed=1), quality=90)
        for i in range(cls.SMALL):
            members.append(("k/%05d.jpg" % i, small))
        # Noise blown up (cheaper to make than smooth_rgb at this size): hard to encode.
        noise = np.random.default_rng(2).integers(0, 256, (60, 60, 3), dtype=np.uint8)
        big = cv2.resize(noise, (cls.SIDE, cls.SIDE), interpolation=cv2.INTER_CUBIC)
        members.append(("k/%05d.jpg" % cls.SMALL, fx.jpg(big, quality=80)))
        del big
        cls.archive = fx.write_tar(os.path.join(cls.tmp, "slow.tar"), members)

    def test_sigterm_during_slow_encode(self):
        out = self.path("slow")
        proc = subprocess.Popen([fx.TARMAC, "convert", self.archive, "-o", out, "--format", "webp", "--quality", "100",
                                 "--threads", "1", "--shard-size", "1M", "-q"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # The big sample's decode and encode take most of the run: a second after the output
        # is opened, the worker is inside them.
        staging = os.path.join(out, ".tarmac-partial")
        deadline = time.monotonic() + 60
        while proc.poll() is None and not os.path.isdir(staging) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(1.0)
        self.assertIsNone(proc.poll(), "the run ended before the signal: make the image larger")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
        err = err.decode(errors="replace")
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
        # A correctness bound, not a benchmark: the old code took its watchdog's 10 s.
        self.assertLess(took, 6.0, err)
        self.assertIn("stopped by SIGTERM", err)
        self.assertNotIn("input that does not come", err)
        if "not waiting for" in err:  # the watchdog ended it: it names the sample it cut short
            self.assertIn("the conversion of sample 'k/%05d' (a %dx%d JPG" % (self.SMALL, self.SIDE, self.SIDE), err)
        self.assertNotIn("labels.safetensors", os.listdir(out))
        self.assertNotIn("manifest.json", os.listdir(out))
        cp = conv.checkpoint(out)
        self.assertIsNotNone(cp, err)
        self.assertLessEqual(cp["writer"]["samples"], self.SMALL)


class VerifyStopTest(fx.TmpCase):
    IMAGES = 48  # 3000x3000 JPEGs of blocky noise: verify --decode -j 1 takes seconds on them

    @classmethod
    def build(cls):
        members = []
        noise = np.random.default_rng(3).integers(0, 256, (300, 300, 3), dtype=np.uint8)
        for i in range(cls.IMAGES):
            img = cv2.resize(np.roll(noise, i, axis=0), (3000, 3000), interpolation=cv2.INTER_NEAREST)
            members.append(("v/%03d.jpg" % i, fx.jpg(img, quality=95)))
        src = fx.write_tar(os.path.join(cls.tmp, "big.tar"), members)
        cls.out = os.path.join(cls.tmp, "big")
        p = fx.run(["convert", src, "-o", cls.out, "--format", "keep", "--max-pixels", "10000000"])
        assert p.returncode == 0, p.stderr

    def test_signal_during_verify_is_a_named_stop(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            with self.subTest(signal=sig):
                proc = subprocess.Popen([fx.TARMAC, "verify", self.out, "--decode", "-j", "1"],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                time.sleep(0.5)
                self.assertIsNone(proc.poll(), "verify ended before the signal: make the images larger")
                t0 = time.monotonic()
                proc.send_signal(sig)
                out, err = proc.communicate(timeout=60)
                took = time.monotonic() - t0
                err = err.decode(errors="replace")
                self.assertEqual(proc.returncode, 128 + sig, err)
                self.assertLess(took, 5.0, err)  # one image's decode at most, not the rest
                self.assertIn(f"verify of '{self.out}' stopped by {signal.Signals(sig).name} before it "
                              "finished: its result is unknown", err)
                self.assertNotIn(b"OK", out)
                self.assertNotIn(b"FAILED", out)
        # Uninterrupted, the same dataset passes.
        self.assertEqual(fx.run(["verify", self.out, "--decode"]).returncode, 0)


if __name__ == "__main__":
    unittest.main()
