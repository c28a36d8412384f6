"""The documentation's code is code: the numpy reader printed in docs/format.md is extracted
and run against a real dataset, and its results are compared with the strict reader and the
generator's values."""
import os
import re
import unittest
import zlib

import numpy as np

import fixtures as fx

DOCS = os.path.join(fx.HERE, "..", "..", "docs")


def doc_code(name):
    """The first ```python block following the 'tested by' marker in a doc."""
    text = open(os.path.join(DOCS, name), encoding="utf-8").read()
    marker = text.index("tested by tests/e2e/test_docs.py")
    return re.search(r"```python\n(.*?)```", text[marker:], re.S).group(1)


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


if __name__ == "__main__":
    unittest.main()
