"""The readers of derived columns (Python over the C ABI, and tarmac.torch) checked against the
arrays the test wrote into the parts (tests/e2e/test_columns.py writes them from the documented
format); merged by the tarmac binary. Needs TARMAC_LIB, PYTHONPATH=python/ and TARMAC."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fixtures as fx  # noqa: E402
from test_columns import SIZES, write_part  # noqa: E402

import tarmac  # noqa: E402

TARMAC = os.environ.get("TARMAC", "tarmac")

try:
    import torch
    import tarmac.torch as tt
except ImportError:  # torch is optional
    torch = None


class DerivedColumnReaderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-columns-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.out = fx.bucketed_photos(cls.tmp, SIZES)
        ds = tarmac.Dataset(cls.out)
        cls.n = len(ds)
        rng = np.random.default_rng(3)
        w, h = ds.column("__image__.width"), ds.column("__image__.height")
        cls.latents = {i: rng.standard_normal((4, int(h[i]) // 16, int(w[i]) // 16)).astype(np.float32)
                       for i in range(cls.n)}
        cls.emb = {i: rng.integers(0, 1 << 16, size=(8,), dtype=np.uint16) for i in range(cls.n)}
        for r in range(2):
            write_part(cls.out, "latents", r, 2, cls.latents, n=cls.n)
            write_part(cls.out, "emb", r, 2, cls.emb, n=cls.n, bf16=True)
        for name in ("latents", "emb"):
            subprocess.run([TARMAC, "column", "merge", "-q", cls.out, name], check=True)

    def test_dataset_lists_and_reads_columns(self):
        ds = tarmac.Dataset(self.out)
        self.assertEqual(ds.derived, ["emb", "latents"])
        for i in range(self.n):
            np.testing.assert_array_equal(ds.derived_value("latents", i), self.latents[i])
            np.testing.assert_array_equal(ds.value("latents", i), self.latents[i])
            s = ds[i]
            np.testing.assert_array_equal(s["latents"], self.latents[i])
            np.testing.assert_array_equal(s["emb"], self.emb[i])
        emb = ds.column("emb")
        self.assertEqual(emb.shape, (self.n, 8))
        np.testing.assert_array_equal(emb, np.stack([self.emb[i] for i in range(self.n)]))
        values, offsets, shapes = ds.column("latents")
        for i in range(self.n):
            np.testing.assert_array_equal(values[offsets[i]:offsets[i + 1]].reshape(shapes[i]), self.latents[i])
        with self.assertRaises(tarmac.TarmacError) as e:
            ds.derived_value("nope", 0)
        self.assertIn("it has: emb, latents", str(e.exception))

    def test_a_column_merged_after_opening_says_to_open_again(self):
        late = os.path.join(self.tmp, "late")
        shutil.copytree(self.out, late)
        shutil.rmtree(os.path.join(late, "columns"))
        ds = tarmac.Dataset(late)
        for r in range(2):
            write_part(late, "latents", r, 2, self.latents, n=self.n)
        subprocess.run([TARMAC, "column", "merge", "-q", late, "latents"], check=True)
        with self.assertRaises(tarmac.TarmacError) as e:
            ds.derived_value("latents", 0)
        self.assertIn("merged after the dataset was opened: open it again", str(e.exception))
        np.testing.assert_array_equal(tarmac.Dataset(late).derived_value("latents", 3), self.latents[3])

    def test_a_column_of_another_dataset_version_is_refused(self):
        other = os.path.join(self.tmp, "other")
        shutil.copytree(self.out, other)
        # Converted again with another size: same samples, another annotation file.
        os.rename(os.path.join(other, "columns"), os.path.join(self.tmp, "cols"))
        shutil.rmtree(other)
        subprocess.run([TARMAC, "convert", "-q", os.path.join(self.tmp, "ds.tar"), "-o", other, "--resize",
                        "bucket", "--size", "48", "--bucket-step", "16", "--format", "png"], check=True)
        os.rename(os.path.join(self.tmp, "cols"), os.path.join(other, "columns"))
        ds = tarmac.Dataset(other)  # opening works: the label data is fine
        with self.assertRaises(tarmac.TarmacError) as e:
            ds[0]
        self.assertIn("another version of the dataset", str(e.exception))
        self.assertEqual(e.exception.code, 5)
        with self.assertRaises(tarmac.TarmacError):
            ds.column("latents")
        if torch is not None:
            with self.assertRaises(tarmac.TarmacError):
                tt.TarmacDataset(other)

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_torch_batches_include_columns(self):
        tds = tt.TarmacDataset(self.out)
        sampler = tt.BucketBatchSampler(self.out, 3, shuffle=True, drop_last=False)
        loader = torch.utils.data.DataLoader(tds, batch_size=None, sampler=sampler, num_workers=2)
        seen = 0
        for batch in loader:
            idx = batch["__index__"].tolist()
            np.testing.assert_array_equal(batch["latents"].numpy(), np.stack([self.latents[i] for i in idx]))
            self.assertEqual(batch["emb"].dtype, torch.bfloat16)
            raw = batch["emb"].view(torch.int16).numpy().view(np.uint16)
            np.testing.assert_array_equal(raw, np.stack([self.emb[i] for i in idx]))
            self.assertEqual(batch["image"].shape[0], len(idx))
            seen += len(idx)
        self.assertEqual(seen, self.n)
        one = tds[5]
        np.testing.assert_array_equal(one["latents"].numpy(), self.latents[5])


if __name__ == "__main__":
    unittest.main()
