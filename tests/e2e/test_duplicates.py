"""End-to-end: --on-duplicate error|first|last. A key in two inputs, or a member name twice in
one archive, is an error naming both places, or one occurrence is kept and every other is left
out and listed in the manifest. The kept sample is checked by its label values and its stored
image bytes against what the fixtures put in."""
import json
import os
import sys
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402


def image(seed):
    return fx.png(fx.smooth_rgb(24, 16, seed=seed))


def sample(key, value):
    """A sample whose label `id` and image seed are both `value`: what ends up in the output
    says which occurrence was kept."""
    return [(key + ".png", image(value)), (key + ".json", fx.js({"id": value}))]


class DuplicatesTest(fx.TmpCase):
    @classmethod
    def build(cls):
        p = lambda n: os.path.join(cls.tmp, n)  # noqa: E731
        cls.a = fx.write_tar(p("a.tar"), sample("k/0", 10) + sample("k/1", 11) + sample("k/2", 12))
        cls.b = fx.write_tar(p("b.tar"), sample("k/1", 21) + sample("k/3", 23))
        cls.c = fx.write_tar(p("c.tar"), sample("k/1", 31) + sample("k/2", 32) + sample("k/4", 34))
        # m/0.png and m/0.json each appear twice in one archive.
        cls.d = fx.write_tar(p("d.tar"), [("m/0.png", image(40)), ("m/0.json", fx.js({"id": 40})),
                                          ("m/0.json", fx.js({"id": 41})), ("m/0.png", image(42))])
        cls.inputs = [cls.a, cls.b, cls.c, cls.d]

    def out(self):
        return self.path("out-%d" % time.monotonic_ns())

    def convert(self, mode, *flags, inputs=None):
        return fx.convert(self, inputs or self.inputs, "--on-duplicate", mode, "--format", "keep", *flags)

    def assert_kept(self, ds, expect):
        """expect: [(key, label id, image seed)] in dataset order."""
        self.assertEqual(ds.keys, [k for k, _, _ in expect])
        self.assertEqual(ds.t["id"].tolist(), [v for _, v, _ in expect])
        for i, (_, _, v) in enumerate(expect):
            self.assertEqual(ds.blob(i), image(v))  # --format keep: the source bytes
            np.testing.assert_array_equal(fx.decode_rgb(ds.blob(i)), fx.smooth_rgb(24, 16, seed=v))

    def assert_nothing_published(self, out):
        left = os.listdir(out) if os.path.isdir(out) else []
        self.assertEqual([n for n in left if n in ("labels.safetensors", "manifest.json", ".tarmac-lock")
                          or n.startswith("shard-")], [])
        if ".tarmac-partial" in left:  # kept for --resume only with a checkpoint
            self.assertIn("checkpoint.json", os.listdir(os.path.join(out, ".tarmac-partial")))

    def duplicates(self, ds):
        return [(d["input"], d["sample"], d.get("member"), d["kept"]) for d in ds.manifest["duplicates"]]

    # ------------------------------------------------ error (the default)

    def test_error_names_both_archives(self):
        for flags in ([], ["--on-duplicate", "error"], ["--on-duplicate", "error", "--on-error", "skip"]):
            with self.subTest(flags=flags):
                out = self.out()
                r = fx.run(["convert", self.a, self.b, "-o", out, *flags])
                err = r.stderr.decode()
                if "skip" in flags:  # a duplicate is a bad sample: skipped and listed
                    self.assertEqual(r.returncode, 0, err)
                    ds = fx.Dataset(out)
                    self.assertEqual(ds.keys, ["k/0", "k/1", "k/2", "k/3"])
                    self.assertEqual(ds.t["id"].tolist(), [10, 11, 12, 23])
                    (sk,) = ds.manifest["skipped"]
                    self.assertEqual((sk["input"], sk["sample"]), (self.b, "k/1"))
                    self.assertIn(f"'{self.a}'", sk["reason"])
                    continue
                self.assertEqual(r.returncode, 1, err)
                self.assertIn(f"'{self.b}', sample 'k/1'", err)
                self.assertIn(f"already read from '{self.a}'", err)
                self.assertIn("--on-duplicate", err)
                self.assert_nothing_published(out)

    def test_error_member_twice(self):
        out = self.out()
        r = fx.run(["convert", self.d, "-o", out])
        self.assertEqual(r.returncode, 1)
        err = r.stderr.decode()
        self.assertIn(f"'{self.d}', sample 'm/0'", err)
        self.assertIn("appears twice", err)
        self.assert_nothing_published(out)

    # ------------------------------------------------ first

    def test_first(self):
        p, ds = self.convert("first", "--json")
        self.assert_kept(ds, [("k/0", 10, 10), ("k/1", 11, 11), ("k/2", 12, 12), ("k/3", 23, 23),
                              ("k/4", 34, 34), ("m/0", 40, 40)])
        a, b, c, d = self.inputs
        self.assertEqual(self.duplicates(ds), [(b, "k/1", None, a), (c, "k/1", None, a), (c, "k/2", None, a),
                                               (d, "m/0", "m/0.json", d), (d, "m/0", "m/0.png", d)])
        by_key = {(x["input"], x["sample"], x.get("member")): x["reason"] for x in ds.manifest["duplicates"]}
        self.assertEqual(by_key[(c, "k/2", None)], f"duplicate key 'k/2': kept the one from '{a}' (--on-duplicate first)")
        self.assertIn("kept the first", by_key[(d, "m/0", "m/0.json")])
        counts = ds.manifest["counts"]
        self.assertEqual((counts["samples"], counts["duplicates"], counts["skipped_samples"]), (6, 5, 0))
        summary = json.loads(p.stdout)
        self.assertEqual((summary["samples"], summary["duplicates"]), (6, 5))
        self.assertEqual(ds.manifest["skipped"], [])
        p, _ = self.convert("first")
        self.assertIn("left out 5 duplicate", p.stdout.decode())

    # ------------------------------------------------ last

    def test_last(self):
        p, ds = self.convert("last", "--json")
        # Dataset order is the order the kept samples are read in.
        self.assert_kept(ds, [("k/0", 10, 10), ("k/3", 23, 23), ("k/1", 31, 31), ("k/2", 32, 32),
                              ("k/4", 34, 34), ("m/0", 41, 42)])
        a, b, c, d = self.inputs
        self.assertEqual(self.duplicates(ds), [(a, "k/1", None, c), (a, "k/2", None, c), (b, "k/1", None, c),
                                               (d, "m/0", "m/0.json", d), (d, "m/0", "m/0.png", d)])
        reasons = [x["reason"] for x in ds.manifest["duplicates"]]
        self.assertEqual(reasons[2], f"duplicate key 'k/1': kept the one from '{c}' (--on-duplicate last)")
        self.assertIn("kept the last", reasons[3])
        self.assertEqual(ds.manifest["counts"]["duplicates"], 5)
        self.assertEqual(json.loads(p.stdout)["samples"], 6)

    def test_last_member_twice_keeps_later_label(self):
        _, ds = self.convert("last", inputs=[self.d])
        self.assertEqual(ds.keys, ["m/0"])
        self.assertEqual(ds.t["id"].tolist(), [41])
        self.assertEqual(ds.blob(0), image(42))

    def test_last_refuses_stdin(self):
        out = self.out()
        with open(self.a, "rb") as f:
            r = fx.run(["convert", "-", self.b, "-o", out, "--on-duplicate", "last"], stdin=f.read())
        self.assertEqual(r.returncode, 2)
        self.assertIn("standard input", r.stderr.decode())
        self.assert_nothing_published(out)
        # first needs no second pass: stdin is fine
        with open(self.a, "rb") as f:
            _, ds = fx.convert(self, ["-", self.b], "--on-duplicate", "first", "--format", "keep", stdin=f.read())
        self.assertEqual(ds.t["id"].tolist(), [10, 11, 12, 23])

    def test_bad_value_is_usage_error(self):
        r = fx.run(["convert", self.a, "-o", self.out(), "--on-duplicate", "newest"])
        self.assertEqual(r.returncode, 2)

    # ------------------------------------------------ determinism and --shard

    def test_byte_identical_for_any_threads(self):
        for mode in ("first", "last"):
            with self.subTest(mode=mode):
                outs = []
                for j in ("1", "2", "3"):
                    _, ds = self.convert(mode, "-j", j, "--shard-size", "2K")
                    outs.append(ds)
                for ds in outs[1:]:
                    for name in ["labels.safetensors", *outs[0].shards]:
                        with open(os.path.join(outs[0].out, name), "rb") as x, open(os.path.join(ds.out, name), "rb") as y:
                            self.assertEqual(x.read(), y.read(), name)
                    self.assertEqual(ds.manifest["duplicates"], outs[0].manifest["duplicates"])

    def merged(self, mode, n):
        parts = [self.convert(mode, "--shard", f"{i}/{n}")[1] for i in range(n)]
        out = self.out()
        r = fx.run(["merge", *[p.out for p in parts], "-o", out])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        return parts, fx.Dataset(out)

    def test_shard_parts_keep_what_one_run_keeps(self):
        for mode in ("first", "last"):
            _, whole = self.convert(mode)
            for n in (2, 5):  # 2: split by inputs; 5 (more parts than inputs): split by sample
                with self.subTest(mode=mode, parts=n):
                    parts, merged = self.merged(mode, n)
                    self.assertEqual(sorted(merged.keys), sorted(whole.keys))
                    got = dict(zip(merged.keys, merged.t["id"].tolist()))
                    self.assertEqual(got, dict(zip(whole.keys, whole.t["id"].tolist())))
                    if n == 2:
                        self.assertEqual(merged.keys, whole.keys)
                    # every duplicate is listed by exactly one part
                    listed = sorted(json.dumps(d, sort_keys=True) for p in parts for d in p.manifest["duplicates"])
                    self.assertEqual(listed, sorted(json.dumps(d, sort_keys=True) for d in whole.manifest["duplicates"]))
                    # and merge carries them over
                    self.assertEqual(sorted(json.dumps(d, sort_keys=True) for d in merged.manifest["duplicates"]), listed)
                    self.assertEqual(merged.manifest["counts"]["duplicates"], whole.manifest["counts"]["duplicates"])


if __name__ == "__main__":
    unittest.main()
