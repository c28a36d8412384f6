"""The documentation's code is code: the numpy reader printed in docs/format.md is extracted
and run against a real dataset, and its results are compared with the strict reader and the
generator's values; the README's tour runs verbatim, with `tarmac` on PATH, and its numpy
reader reads what the tour made."""
import os
import re
import subprocess
import sys
import unittest
import zlib

import numpy as np

import fixtures as fx

ROOT = os.path.join(fx.HERE, "..", "..")
DOCS = os.path.join(ROOT, "docs")


def doc_code(name, lang="python", path=None):
    """The first ```LANG block following the 'tested by' marker in a doc."""
    with open(path or os.path.join(DOCS, name), encoding="utf-8") as f:
        text = f.read()
    marker = text.index("tested by tests/e2e/test_docs.py")
    return re.search(r"```%s\n(.*?)```" % lang, text[marker:], re.S).group(1)


class FormatDocReaderTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.src = [fx.smooth_rgb(96, 64, seed=i) for i in range(5)]
        members = []
        for i, img in enumerate(cls.src):
            members += [(f"d/{i:03d}.png", fx.png(img)),
                        (f"d/{i:03d}.json", fx.js({"kp": [[10.0 + i, 20.0], [30.0, 40.0 - i]], "caption": f"c{i}"}))]
        cls.tar = os.path.join(cls.tmp, "in.tar")
        fx.write_tar(cls.tar, members)

    def test_doc_reader_reads_a_real_dataset(self):
        p, ds = fx.convert(self, [self.tar], "--crop", "center", "--size", "48", "--points", "kp", "--format", "png")
        ns = {}
        exec(compile(doc_code("format.md"), "docs/format.md", "exec"), ns)
        cols, meta = ns["load_labels"](os.path.join(ds.out, "labels.safetensors"))
        self.assertEqual(meta["format"], "tarmac/1")
        self.assertEqual(int(meta["num_samples"]), 5)
        for name, arr in ds.t.items():  # same arrays as the strict reader
            np.testing.assert_array_equal(cols[name], arr)
        for i in range(5):
            key, image, affine = ns["sample"](ds.out, cols, meta, i)
            self.assertEqual(key, f"d/{i:03d}")
            self.assertEqual(zlib.crc32(image), int(cols["__image__.crc32"][i]))
            decoded = fx.decode_rgb(image)
            self.assertEqual(decoded.shape, (48, 48, 3))
            # the printed affine maps the generator's points onto the stored ones
            src = np.array([[10.0 + i, 20.0], [30.0, 40.0 - i]])
            np.testing.assert_allclose(fx.apply_affine(affine, src), cols["kp"][i], atol=1e-9)
        o = cols["caption.offsets"]
        self.assertEqual(bytes(cols["caption.values"][o[2]:o[3]]).decode(), "c2")


class ReadmeTourTest(fx.TmpCase):
    def test_the_tour_runs_verbatim(self):
        """The README's tour, as a user would type it after installing: a bare `tarmac` on PATH,
        in a folder that has the repository's scripts/."""
        work = self.path("tour")
        os.makedirs(os.path.join(work, "bin"))
        os.symlink(os.path.abspath(fx.TARMAC), os.path.join(work, "bin", "tarmac"))
        os.symlink(os.path.abspath(os.path.join(ROOT, "scripts")), os.path.join(work, "scripts"))
        env = dict(os.environ, PATH=os.path.join(work, "bin") + os.pathsep + os.environ.get("PATH", ""))
        tour = doc_code(None, "sh", os.path.join(ROOT, "README.md"))
        p = subprocess.run(["bash", "-e", "-c", tour], cwd=work, env=env, capture_output=True, text=True,
                           timeout=600)
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
        for made in ["out/labels.safetensors", "merged/labels.safetensors", "buckets/labels.safetensors",
                     "out2/labels.safetensors", "first.jpg"]:
            self.assertTrue(os.path.exists(os.path.join(work, made)), made)
        with open(os.path.join(work, "first.jpg"), "rb") as f:
            self.assertEqual(fx.decode_rgb(f.read()).shape, (224, 224, 3))
        # the README's numpy reader, on the tour's out/
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            numpy_block = re.search(r"Read it with numpy alone.*?```python\n(.*?)```", f.read(), re.S).group(1)
        p = subprocess.run([sys.executable, "-c", numpy_block + "\nprint(keypoints.shape)"], cwd=work,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((p.returncode, p.stdout), (0, "(64, 45, 3)\n"), p.stderr)


class DemoNextStepsTest(unittest.TestCase):
    def test_the_demo_builds_what_its_next_steps_run(self):
        """scripts/demo.sh ends with commands to type next; each must work right after the demo,
        which builds only the targets it names (it once built `tarmac` alone, so the Python step
        failed: libtarmac_c.so not found). Running the demo itself is too slow for the suite."""
        with open(os.path.join(ROOT, "scripts", "demo.sh"), encoding="utf-8") as f:
            demo = f.read()
        (targets,) = re.findall(r"^cmake --build build .*--target ([^\n#]+)$", demo, re.M)
        targets = targets.split()
        steps = re.findall(r'^echo "  (.*)"$', demo, re.M)
        self.assertGreaterEqual(len(steps), 2, demo)
        for step in steps:
            if "build/apps/tarmac" in step:
                self.assertIn("tarmac", targets, step)
            if "import tarmac" in step:
                self.assertIn("tarmac_c", targets, step)  # PYTHONPATH=python loads build/lib/read/
                self.assertIn("/usr/bin/python3 ", step)  # Debian's, with numpy: not whatever is on PATH


if __name__ == "__main__":
    unittest.main()
