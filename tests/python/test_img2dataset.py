"""An img2dataset shard, written here exactly as img2dataset's WebDataset writer writes one
(webdataset.TarWriter over Python's tarfile; per sample KEY.jpg, KEY.txt -- str(caption), ""
for none -- and KEY.json = json.dumps(meta, indent=4)), converts with only the transform flags.
Every field reads back equal to the source: with the independent safetensors reader (tests/e2e/
st_reader.py: the NAME.valid masks and the values), through the Python package (None where the
source had null or no key), and through `tarmac cat --labels` (null).

The meta dict is img2dataset's: url, key, status, error_message (None for a success), width,
height, original_width, original_height, exif (None, or a JSON string of EXIF tags), sha256,
and --save_additional_columns (here NSFW, similarity, LICENSE), often None; a column missing
from some rows' meta stands for metadata that other tools leave out.

Needs TARMAC_LIB, PYTHONPATH=python/ and TARMAC in the environment."""
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import unittest

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import st_reader  # noqa: E402

import tarmac  # noqa: E402

TARMAC = os.environ.get("TARMAC", "tarmac")
N = 14


def meta_of(i, w, h):
    m = {
        "url": f"https://example.com/img/{i}.jpg",
        "key": "%09d" % i,
        "status": "success",
        "error_message": None,
        "width": 64,
        "height": 64,
        "original_width": w,
        "original_height": h,
        "exif": None if i % 3 else json.dumps({"Image Make": "Canon", "Image Orientation": "Horizontal (normal)"}),
        "sha256": "%064x" % (i * 7919),
        "NSFW": None if i % 4 == 0 else "UNLIKELY",
        "similarity": None if i % 5 == 0 else 0.25 + i / 100,
    }
    if i % 6 != 1:  # an additional column some rows lack
        m["LICENSE"] = None if i % 2 else "?"
    return m


def write_img2dataset_shard(path):
    rng = np.random.default_rng(7)
    metas, captions = [], []
    with tarfile.open(path, "w") as tar:
        for i in range(N):
            w, h = 96 + 8 * i, 80 + 4 * i
            img = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
            ok, jpg = cv2.imencode(".jpg", img)
            caption = "" if i % 7 == 3 else f"a photo number {i}"
            m = meta_of(i, w, h)
            metas.append(m)
            captions.append(caption)
            key = m["key"]
            for ext, data in (("jpg", jpg.tobytes()), ("txt", str(caption).encode()),
                              ("json", json.dumps(m, indent=4).encode())):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size, info.mode, info.uname, info.gname = len(data), 0o444, "bigdata", "bigdata"
                tar.addfile(info, io.BytesIO(data))
    return metas, captions


class Img2DatasetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-img2dataset-")
        shard = os.path.join(cls.tmp, "00000.tar")
        cls.metas, cls.captions = write_img2dataset_shard(shard)
        cls.out = os.path.join(cls.tmp, "out")
        p = subprocess.run([TARMAC, "convert", shard, "-o", cls.out, "--crop", "center", "--size", "64",
                            "--json"], capture_output=True)
        if p.returncode != 0:
            raise AssertionError(p.stderr.decode())
        cls.result = json.loads(p.stdout)
        cls.stderr = p.stderr.decode()
        cls.t, cls.meta = st_reader.load(os.path.join(cls.out, "labels.safetensors"))
        cls.schema = json.loads(cls.meta["schema"])
        cls.keys = st_reader.keys(cls.t)

    def source(self, name):
        """[(value or None)] per converted sample, in the dataset's order."""
        by_key = {m["key"]: m for m in self.metas}
        return [by_key[k].get(name) for k in self.keys]

    def test_every_sample_converts(self):
        self.assertEqual(self.keys, ["%09d" % i for i in range(N)])
        self.assertEqual(self.result["skipped_samples"], 0)
        self.assertEqual(self.result["field_warnings"], [])

    def test_fields_equal_the_source_with_an_independent_reader(self):
        for name in ("url", "key", "status", "sha256", "exif", "NSFW", "LICENSE", "error_message"):
            src = self.source(name)
            nullable = any(v is None for v in src)
            self.assertEqual(self.schema[name].get("nullable", False), nullable, name)
            valid = self.t[name + ".valid"].tolist() if nullable else [True] * N
            self.assertEqual(valid, [v is not None for v in src], name)
            for i, v in enumerate(src):
                if v is not None:
                    self.assertEqual(st_reader.string(self.t, name, i), v, name)
                else:  # no rows
                    self.assertEqual(st_reader.string(self.t, name, i), "", name)
        # error_message is null in every sample: named, nullable, never typed, no values.
        self.assertEqual(self.schema["error_message"]["kind"], "json")
        self.assertEqual(self.result["missing_values"]["error_message"], N)
        for name in ("width", "height", "original_width", "original_height"):
            self.assertEqual(self.schema[name]["dtype"], "I64")
            self.assertEqual(self.t[name].tolist(), self.source(name), name)
        sim = self.source("similarity")
        self.assertEqual(self.t["similarity"].dtype, np.float64)
        self.assertEqual(self.t["similarity.valid"].tolist(), [v is not None for v in sim])
        self.assertEqual([float(x) for x, v in zip(self.t["similarity"], sim) if v is not None],
                         [v for v in sim if v is not None])
        self.assertEqual(self.result["missing_values"]["LICENSE"],
                         sum(1 for v in self.source("LICENSE") if v is None))
        for i in range(N):  # captions, the empty ones included
            self.assertEqual(st_reader.string(self.t, "txt", i), self.captions[i])

    def test_python_package_gives_none_and_masks(self):
        ds = tarmac.Dataset(self.out)
        for name in ("exif", "NSFW", "LICENSE", "similarity", "error_message"):
            self.assertTrue(ds.fields[name]["nullable"], name)
        for i in range(N):
            s = ds[i]
            src = self.metas[i]
            for name in ("exif", "NSFW", "LICENSE", "error_message"):
                self.assertEqual(s[name], src.get(name), (i, name))
                self.assertEqual(ds.value(name, i), src.get(name), (i, name))
            if src["similarity"] is None:
                self.assertIsNone(s["similarity"])
            else:
                self.assertEqual(float(s["similarity"]), src["similarity"])
            self.assertEqual(int(s["width"]), 64)
            self.assertEqual(s["txt"], self.captions[i])
        col = ds.column("similarity")
        self.assertIsInstance(col, np.ma.MaskedArray)
        self.assertEqual(col.mask.tolist(), [m["similarity"] is None for m in self.metas])
        self.assertEqual(col.compressed().tolist(), [m["similarity"] for m in self.metas if m["similarity"] is not None])
        values, offsets, valid = ds.column("NSFW")
        self.assertEqual(valid.tolist(), [m["NSFW"] is not None for m in self.metas])
        self.assertEqual(bytes(values[offsets[1]:offsets[2]]).decode(), self.metas[1]["NSFW"])
        _, labels = ds.batch([0, 5, 6], fields=["similarity"], size=(64, 64))
        self.assertEqual(labels["similarity.valid"].tolist(), [False, False, True])

    def test_cat_labels_prints_null(self):
        p = subprocess.run([TARMAC, "cat", self.out, "%09d" % 0, "--labels"], capture_output=True, check=True)
        labels = json.loads(p.stdout)["labels"]
        src = self.metas[0]
        self.assertIsNone(labels["NSFW"])
        self.assertIsNone(labels["similarity"])
        self.assertIsNone(labels["error_message"])
        self.assertEqual(labels["exif"], src["exif"])
        self.assertEqual(labels["LICENSE"], "?")

    def test_verify_and_info(self):
        self.assertEqual(subprocess.run([TARMAC, "verify", self.out], capture_output=True).returncode, 0)


if __name__ == "__main__":
    unittest.main()
