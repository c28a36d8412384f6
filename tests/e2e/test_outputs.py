"""End-to-end: every JSON document tarmac prints is JSON (issue #25, item 7).

`tarmac cat KEY --labels` printed `"tags": <discarded>` for an empty list in a field of string
lists. Here a dataset holds a field of every kind (numbers, nullable with null and absent,
ragged with an empty row, strings, string lists with empty lists before and after, JSON text of
objects and of mixed types, non-finite floats from .npy), and every command with --json (and
cat --labels) runs on it; each output is parsed strictly (no NaN or Infinity, which JSON does
not have: tarmac writes null for non-finite floats) and its values are compared with the input."""
import json
import math
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402
from test_columns import write_part  # noqa: E402

NAN, INF = float("nan"), float("inf")
ABSENT = object()  # the field is not in the sample's JSON at all

# Per sample: the JSON labels (ABSENT leaves the field out) and the .npy member "stats".
LABELS = [
    {"count": 3, "flag": True, "score": 0.5, "caption": "a cat", "tags": ["a", "b"], "tags2": [],
     "kp": [[1.5, 2.0], [3.0, 4.0]], "vec": [0.25, -1.0, 8.0], "boxes": [{"x": 1}], "mixed": 5,
     "info": {"w": 3, "h": 4}, "note": "first", "empty_obj": {}},
    {"count": -7, "flag": False, "score": None, "caption": "", "tags": [], "tags2": ["x"],
     "kp": [[5.0, 6.0]], "vec": [1.0, 2.0, 3.0], "boxes": [], "mixed": "five", "info": {"w": 5, "h": 6},
     "note": ABSENT, "empty_obj": {}},
    {"count": 2**62, "flag": True, "score": ABSENT, "caption": "é ü 日本", "tags": ["c"],
     "tags2": [], "kp": [], "vec": [0.0, 0.0, 0.0], "boxes": [{"y": [1, 2]}, {"z": None}],
     "mixed": "two", "info": {"w": 7, "h": 8}, "note": None, "empty_obj": {}},
    {"count": 0, "flag": False, "score": -2.25, "caption": "quote \" and \\ and \n newline",
     "tags": [], "tags2": ["y", "z"], "kp": [[7.0, 8.0], [9.0, 10.0], [11.0, 12.0]],
     "vec": [1e300, -1e-300, 3.5], "boxes": [{"x": 2}], "mixed": [1, 2], "info": {"w": 9, "h": 10},
     "note": "last", "empty_obj": {}},
]
STATS = [np.array([1.5, NAN, INF, -INF], np.float32), np.array([0, 1, 2, 3], np.float32),
         np.array([NAN, NAN, NAN, NAN], np.float32), np.array([-INF, 0.5, 1e-3, 2], np.float32)]
TXT = ["plain text", "", "two\nlines", "tab\there"]


def strict(text):
    """json.loads refusing NaN, Infinity and -Infinity (Python accepts them by default)."""
    def refuse(name):
        raise ValueError("not JSON: " + name)
    return json.loads(text, parse_constant=refuse)


def expected_labels(i):
    """Sample i's labels as `cat --labels` should print them."""
    want = {}
    for k, v in LABELS[i].items():
        if k == "info":
            want["info.w"], want["info.h"] = v["w"], v["h"]
        else:
            want[k] = None if v is ABSENT else v
    want["stats"] = [None if not math.isfinite(x) else float(x) for x in STATS[i]]
    want["txt"] = TXT[i]
    return want


class OutputsTest(fx.TmpCase):
    @classmethod
    def build(cls):
        members = []
        for i, labels in enumerate(LABELS):
            key = "s/%02d" % i
            members += [(key + ".png", fx.png(fx.smooth_rgb(40, 32, seed=i))),
                        (key + ".json", fx.js({k: v for k, v in labels.items() if v is not ABSENT})),
                        (key + ".stats.npy", fx.npy(STATS[i])),
                        (key + ".txt", TXT[i].encode())]
        # Two archives, so that --shard I/N splits by archive: each part sees two samples, and in
        # each a field of string lists gets an empty list after a non-empty one.
        half = len(members) // 2
        cls.archives = [fx.write_tar(os.path.join(cls.tmp, "kinds-a.tar"), members[:half]),
                        fx.write_tar(os.path.join(cls.tmp, "kinds-b.tar"), members[half:])]
        cls.ds = os.path.join(cls.tmp, "ds")
        p = fx.run(["convert", *cls.archives, "-o", cls.ds, "--format", "png", "--json"])
        assert p.returncode == 0, p.stderr.decode()
        cls.convert_doc = strict(p.stdout)

    def run_json(self, args, expect=0):
        p = fx.run(args)
        self.assertEqual(p.returncode, expect, (args, p.stderr.decode()))
        self.assertNotIn(b"<discarded>", p.stdout, args)
        return strict(p.stdout)

    def check_labels(self, ds):
        for i in range(len(LABELS)):
            for flag in ("--labels", "--json"):
                doc = self.run_json(["cat", ds, "s/%02d" % i, flag])
                self.assertEqual(doc["key"], "s/%02d" % i)
                self.assertEqual(doc["index"], i)
                self.assertEqual(doc["labels"], expected_labels(i), (i, flag))
            # The same sample by index.
            self.assertEqual(self.run_json(["cat", ds, "#%d" % i, "--labels"])["labels"],
                             expected_labels(i))

    def test_the_fields_have_the_kinds_meant(self):
        schema = self.run_json(["info", self.ds, "--json"])["schema"]
        kinds = {name: (f["kind"], f.get("ragged", False), f.get("nullable", False))
                 for name, f in schema.items()}
        self.assertEqual(kinds["count"][0], "numeric")
        self.assertEqual(kinds["score"], ("numeric", False, True))
        self.assertEqual(kinds["caption"][0], "string")
        self.assertEqual(kinds["tags"][0], "json")
        self.assertEqual(kinds["tags2"][0], "json")
        self.assertEqual(kinds["kp"][:2], ("numeric", True))
        self.assertEqual(kinds["mixed"], ("json", True, False))
        self.assertEqual(kinds["note"], ("string", True, True))
        self.assertEqual(kinds["stats"][0], "numeric")
        self.assertEqual(schema["stats"]["dtype"], "F32")

    def test_cat_labels_of_every_kind(self):
        self.check_labels(self.ds)

    def test_convert_info_ls_verify(self):
        self.assertEqual(self.convert_doc["samples"], len(LABELS))
        info = self.run_json(["info", self.ds, "--json", "--sizes"])
        self.assertEqual(info["samples"], len(LABELS))
        self.assertEqual(info["image_sizes"], [{"width": 40, "height": 32, "samples": 4}])
        ls = self.run_json(["ls", self.ds, "--json"])
        self.assertEqual([(e["index"], e["key"]) for e in ls],
                         [(i, "s/%02d" % i) for i in range(len(LABELS))])
        v = self.run_json(["verify", self.ds, "--json", "--decode"])
        self.assertTrue(v["ok"], v)
        self.assertEqual(v["samples"], len(LABELS))

    def test_bench_and_preview(self):
        b = self.run_json(["bench", self.ds, "--json", "--samples", "4", "--threads", "2"])
        self.assertEqual(b["samples"], len(LABELS))
        p = self.run_json(["preview", self.ds, "-o", self.path("sheet.png"), "--json"])
        self.assertEqual(sorted(p["keys"]), ["s/%02d" % i for i in range(len(LABELS))])

    def test_labels_only_dataset(self):
        out = self.path("labels-only")
        self.run_json(["convert", *self.archives, "-o", out, "--no-images", "--json"])
        self.check_labels(out)
        self.assertEqual(len(self.run_json(["ls", out, "--json"])), len(LABELS))
        self.assertTrue(self.run_json(["verify", out, "--json"])["ok"])

    def test_merged_parts(self):
        """--shard 0/2 and 1/2 (one archive each), then merge --json: the same labels."""
        parts = []
        for i in range(2):
            part = self.path("part%d" % i)
            doc = self.run_json(["convert", *self.archives, "-o", part, "--format", "png",
                                 "--shard", "%d/2" % i, "--json"])
            self.assertEqual(doc["samples"], 2)
            parts.append(part)
        merged = self.path("merged")
        doc = self.run_json(["merge", *parts, "-o", merged, "--json"])
        self.assertEqual(doc["samples"], len(LABELS))
        self.check_labels(merged)

    def test_derived_column_outputs(self):
        out = self.path("with-column")
        self.run_json(["convert", *self.archives, "-o", out, "--format", "png", "--json"])
        n = len(LABELS)
        outputs = {i: np.array([[i, NAN], [INF, -1.5]], np.float32) for i in range(n)}
        for r in range(2):
            write_part(out, "emb", r, 2, outputs, n=n)
        ls = self.run_json(["column", "ls", out, "--json"], expect=1)  # parts only: not merged yet
        self.assertEqual([(c["name"], c["merged"]) for c in ls], [("emb", False)])
        merged = self.run_json(["column", "merge", out, "emb", "--json"])
        self.assertEqual(merged["column"], "emb")
        ls = self.run_json(["column", "ls", out, "--json"])
        self.assertEqual([(c["name"], c["merged"], c["samples"]) for c in ls], [("emb", True, n)])
        info = self.run_json(["info", out, "--json"])
        self.assertEqual([c["name"] for c in info["columns"]], ["emb"])
        self.assertTrue(self.run_json(["verify", out, "--json"])["ok"])

    def test_json_text_that_is_not_json_is_refused(self):
        """A JSON field whose stored text does not parse (here: changed on disk) is an error of
        cat naming the field, and a problem of verify; never a "<discarded>" in a document."""
        out = self.path("broken")
        self.run_json(["convert", *self.archives, "-o", out, "--format", "png", "--json"])
        path = os.path.join(out, "labels.safetensors")
        with open(path, "rb") as f:
            data = f.read()
        self.assertEqual(data.count(b'["c"]'), 1)  # sample 2's tags
        with open(path, "wb") as f:
            f.write(data.replace(b'["c"]', b'{"c"]'))
        p = fx.run(["cat", out, "s/02", "--labels"])
        self.assertEqual((p.returncode, p.stdout), (1, b""))
        self.assertIn("field 'tags' of sample 's/02' holds text that is not JSON", p.stderr.decode())
        doc = self.run_json(["cat", out, "s/02", "--json"], expect=1)
        self.assertIn("is not JSON", doc["error"]["message"])
        self.assertEqual(self.run_json(["cat", out, "s/01", "--labels"])["labels"], expected_labels(1))
        v = self.run_json(["verify", out, "--json"], expect=3)
        self.assertFalse(v["ok"])
        self.assertIn({"file": "labels.safetensors", "sample": "s/02",
                       "problem": "field 'tags' (kind json) holds text that is not JSON"}, v["problems"])

    def test_error_documents(self):
        p = fx.run(["cat", self.ds, "no/such", "--labels"])
        self.assertEqual((p.returncode, p.stdout), (1, b""))  # --labels alone: no error document
        doc = self.run_json(["cat", self.ds, "no/such", "--json"], expect=1)
        self.assertEqual(doc["error"]["code"], "data_error")


if __name__ == "__main__":
    unittest.main()
