"""The whole chain of issue #15: a bucketed dataset, `python -m tarmac.derive` on 2 ranks under
torchrun (gloo, CPU), `tarmac column merge`, `tarmac verify`, the readers. The outputs are checked
against the encoder run by this test on images it decoded itself with OpenCV from the shards
(the stored PNG bytes, located with the independent safetensors reader), one sample at a time.
Needs TARMAC_LIB, PYTHONPATH=python/, TARMAC, and Debian's python3-torch (skips without it)."""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fixtures as fx  # noqa: E402

import tarmac  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

TARMAC = os.environ.get("TARMAC", "tarmac")
SIZES = [(320, 200), (200, 320), (240, 240), (330, 210), (180, 300), (250, 250), (310, 190), (260, 230)] * 3

# A small deterministic convolutional encoder (stride 8, 4 channels: an SD-VAE in miniature).
# Every call appends its batch's indices to $CALLS; with $KILL_AFTER=k the process SIGKILLs
# itself when its k-th batch is done, as a node failure would.
ENCODER = textwrap.dedent("""
    import os, signal
    import torch
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, kernel_size=8, stride=8, dtype=torch.float64)
    calls = 0
    if os.environ.get("GLOO"):  # a module that joins a process group, as training code does
        import torch.distributed as dist
        dist.init_process_group("gloo")
        one = torch.ones(1)
        dist.all_reduce(one)
        with open(os.environ["GLOO"] + "." + os.environ["RANK"], "w") as f:
            f.write("%d of %d" % (int(one.item()), dist.get_world_size()))

    def encode(batch):
        global calls
        x = batch["image"].permute(0, 3, 1, 2).to(torch.float64) / 255.0
        with torch.no_grad():
            y = conv(x).to(torch.float32)
        calls += 1
        with open(os.environ["CALLS"], "a") as f:
            f.write(" ".join(str(int(i)) for i in batch["__index__"]) + "\\n")
        if calls == int(os.environ.get("KILL_AFTER", "0")):
            os.kill(os.getpid(), signal.SIGKILL)
        return y
""")


@unittest.skipIf(torch is None, "torch is not installed")
class DeriveChainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-derive-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        members = [("p%02d.png" % i, fx.png(fx.smooth_rgb(w, h, seed=i))) for i, (w, h) in enumerate(SIZES)]
        cls.archive = fx.write_tar(os.path.join(cls.tmp, "photos.tar"), members)
        with open(os.path.join(cls.tmp, "enc.py"), "w") as f:
            f.write(ENCODER)
        cls.base = cls.convert("base", 64)
        cls.expected = cls.reference(cls.base)

    @classmethod
    def convert(cls, name, size):
        out = os.path.join(cls.tmp, name)
        subprocess.run([TARMAC, "convert", "-q", cls.archive, "-o", out, "--resize", "bucket", "--size", str(size),
                        "--bucket-step", "16", "--format", "png"], check=True)
        return out

    @classmethod
    def reference(cls, out):
        """The encoder over each sample alone, on pixels decoded here from the stored bytes."""
        ds = fx.Dataset(out)
        spec = {}
        exec(compile(ENCODER, "enc", "exec"), spec)  # defines the conv; encode() is not called
        ref = []
        for i in range(len(ds.keys)):
            rgb = cv2.cvtColor(cv2.imdecode(np.frombuffer(ds.blob(i), np.uint8), cv2.IMREAD_COLOR),
                               cv2.COLOR_BGR2RGB)
            x = torch.from_numpy(rgb)[None].permute(0, 3, 1, 2).to(torch.float64) / 255.0
            with torch.no_grad():
                ref.append(spec["conv"](x).to(torch.float32)[0].numpy())
        return ref

    def env(self, calls, **extra):
        e = dict(os.environ, CALLS=calls, PYTHONPATH=os.pathsep.join([self.tmp, os.environ.get("PYTHONPATH", "")]))
        e.update({k: str(v) for k, v in extra.items()})
        for k in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "LOCAL_RANK"):
            if k not in extra:
                e.pop(k, None)
        return e

    def dataset(self, name):
        out = os.path.join(self.tmp, name)
        shutil.copytree(self.base, out)
        return out

    def derive(self, out, name, *flags, calls, expect=0, **env):
        p = subprocess.run([sys.executable, "-m", "tarmac.derive", out, "--name", name, "--fn", "enc:encode",
                            "--batch-size", "3", *flags], env=self.env(calls, **env), cwd=self.tmp,
                           capture_output=True)
        self.assertEqual(p.returncode, expect, p.stderr.decode())
        return p

    def check_column(self, out, name):
        ds = tarmac.Dataset(out)
        self.assertIn(name, ds.derived)
        for i, ref in enumerate(self.expected):
            got = ds.derived_value(name, i)
            self.assertEqual(got.shape, ref.shape)
            np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)

    def test_torchrun_two_ranks_equals_one_process(self):
        out = self.dataset("torchrun")
        logs = os.path.join(self.tmp, "torchrun-logs")
        calls = os.path.join(self.tmp, "torchrun.calls")
        p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--tee", "1",
                            "--redirects", "2", "--log_dir", logs, "-m", "tarmac.derive", out, "--name", "latents",
                            "--fn", "enc:encode", "--batch-size", "3"],
                           env=self.env(calls, GLOO=os.path.join(self.tmp, "gloo")), cwd=self.tmp,
                           capture_output=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout.decode()[-3000:] + p.stderr.decode()[-3000:])
        for r in range(2):  # both ranks were in one gloo group while they computed their shares
            with open(os.path.join(self.tmp, "gloo.%d" % r)) as f:
                self.assertEqual(f.read(), "2 of 2")
        parts = sorted(os.listdir(os.path.join(out, "columns", "latents.parts")))
        self.assertIn("part-00000-of-00002.json", parts)
        self.assertIn("part-00001-of-00002.json", parts)
        m = subprocess.run([TARMAC, "column", "merge", out, "latents"], capture_output=True)
        self.assertEqual(m.returncode, 0, m.stderr.decode())
        self.check_column(out, "latents")
        # One process over the same dataset gives the same column, sample for sample.
        self.derive(out, "single", "--rank", "0", "--world", "1", calls=os.path.join(self.tmp, "single.calls"))
        self.assertEqual(subprocess.run([TARMAC, "column", "merge", "-q", out, "single"]).returncode, 0)
        ds = tarmac.Dataset(out)
        for i in range(len(ds)):
            np.testing.assert_array_equal(ds.derived_value("latents", i), ds.derived_value("single", i))
        v = subprocess.run([TARMAC, "verify", out], capture_output=True)
        self.assertEqual(v.returncode, 0, v.stdout.decode() + v.stderr.decode())

    def test_killed_rank_resumes_and_merge_refuses_until_then(self):
        out = self.dataset("killed")
        calls0 = os.path.join(self.tmp, "killed0.calls")
        self.derive(out, "latents", "--rank", "0", "--world", "2", calls=calls0)
        calls1 = os.path.join(self.tmp, "killed1.calls")
        self.derive(out, "latents", "--rank", "1", "--world", "2", "--checkpoint-every", "1", calls=calls1,
                    expect=-9, KILL_AFTER=2)
        m = subprocess.run([TARMAC, "column", "merge", out, "latents"], capture_output=True)
        self.assertEqual(m.returncode, 1)
        err = m.stderr.decode()
        n = len(SIZES)
        self.assertIn("rank 1 of 2", err)
        self.assertIn("unfinished", err)
        self.assertFalse(os.path.exists(os.path.join(out, "columns", "latents.safetensors")))
        with open(calls1) as f:
            first = [list(map(int, line.split())) for line in f]
        self.assertEqual(len(first), 2)
        # Re-run alone: it goes on where it stopped (the killed run's 2nd batch was checkpointed
        # after the 1st; at most the batch in flight is computed again).
        os.remove(calls1)
        self.derive(out, "latents", "--rank", "1", "--world", "2", calls=calls1)
        with open(calls1) as f:
            second = [list(map(int, line.split())) for line in f]
        share = n - n // 2
        fresh_batches = -(-share // 3) + 3  # an upper bound: one partial batch per bucket
        self.assertLess(sum(map(len, second)), share)
        self.assertFalse(set(i for b in first[:1] for i in b) & set(i for b in second for i in b))
        self.assertLess(len(second), fresh_batches)
        self.assertEqual(subprocess.run([TARMAC, "column", "merge", "-q", out, "latents"]).returncode, 0)
        self.check_column(out, "latents")
        self.assertEqual(subprocess.run([TARMAC, "verify", "-q", out]).returncode, 0)
        # One flipped byte in the column is found.
        path = os.path.join(out, "columns", "latents.safetensors")
        fx.flip_bit(path, 40, 0x40)
        v = subprocess.run([TARMAC, "verify", out], capture_output=True)
        self.assertEqual(v.returncode, 3)
        self.assertIn("latents.safetensors", v.stdout.decode() + v.stderr.decode())

    def test_reconverted_dataset_refuses_the_old_column(self):
        out = self.dataset("reconvert")
        calls = os.path.join(self.tmp, "reconvert.calls")
        self.derive(out, "latents", "--rank", "0", "--world", "2", calls=calls)
        self.derive(out, "latents", "--rank", "1", "--world", "2", calls=calls)
        self.assertEqual(subprocess.run([TARMAC, "column", "merge", "-q", out, "latents", "--keep-parts"]).returncode,
                         0)
        # Converted again (another size), the old columns moved over.
        again = self.convert("reconverted", 48)
        shutil.copytree(os.path.join(out, "columns"), os.path.join(again, "columns"))
        os.remove(os.path.join(again, "columns", "latents.safetensors"))
        m = subprocess.run([TARMAC, "column", "merge", again, "latents"], capture_output=True)
        self.assertEqual(m.returncode, 1)
        self.assertIn("another version of the dataset", m.stderr.decode())
        shutil.copy(os.path.join(out, "columns", "latents.safetensors"), os.path.join(again, "columns"))
        v = subprocess.run([TARMAC, "verify", again], capture_output=True)
        self.assertEqual(v.returncode, 3)
        self.assertIn("another version of the dataset", v.stdout.decode() + v.stderr.decode())
        with self.assertRaises(tarmac.TarmacError) as e:
            tarmac.Dataset(again).derived_value("latents", 0)
        self.assertIn("another version of the dataset", str(e.exception))


if __name__ == "__main__":
    unittest.main()
