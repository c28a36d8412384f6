"""End-to-end: scale-out and checking. `verify` finds any changed byte and every missing or
extra file; `cat`/`ls` read single samples; `convert --shard I/N` + `merge` give the samples,
labels and image bytes of a single run; scripts/convert-parallel.sh and convert-slurm.sbatch."""
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

SCRIPTS = os.path.join(fx.HERE, "..", "..", "scripts")
LONG = "d" * 120  # a directory name that needs a pax 'path' header in the shards


def make_inputs(tmp, n_archives=4, per=6, float_from=None):
    """Archives of samples with an image, a 16-bit depth map and JSON labels (a ragged field
    `pts`, a string). Archive a >= float_from stores `score` as floats (dtype promotion)."""
    paths = []
    for a in range(n_archives):
        members = []
        for i in range(per):
            k = f"{LONG if i == 0 else 'arc'}/{a}/s{i:02d}"
            score = float(i) + 0.5 if float_from is not None and a >= float_from else i
            members.append((k + ".png", fx.png(fx.smooth_rgb(24 + i, 20 + a, seed=a * 10 + i))))
            members.append((k + ".depth.png", fx.png(fx.smooth_u16(24 + i, 20 + a, seed=i))))
            members.append((k + ".json", fx.js({"score": score, "pts": [[i, 1.5]] * (1 + i % 3), "name": f"n{a}-{i}"})))
        paths.append(fx.write_tar(os.path.join(tmp, f"in{a}.tar"), members))
    return paths


def manifest(d):
    with open(os.path.join(d, "manifest.json")) as f:
        return json.load(f)


def verify(out, *flags):
    return fx.run(["verify", out, *flags])


def same_samples(test, a, b, same_order):
    """Datasets a and b hold the same samples: keys, labels and stored bytes (by key)."""
    if same_order:
        test.assertEqual(a.keys, b.keys)
    test.assertEqual(sorted(a.keys), sorted(b.keys))
    test.assertEqual(a.schema, b.schema)
    ib = {k: i for i, k in enumerate(b.keys)}
    for i, k in enumerate(a.keys):
        j = ib[k]
        test.assertEqual(a.blob(i), b.blob(j), k)
        test.assertEqual(a.blob(i, "__depth__"), b.blob(j, "__depth__"), k)
        for name, f in a.schema.items():
            if f["ragged"]:
                test.assertEqual(a.ragged(name, i).tolist(), b.ragged(name, j).tolist(), (k, name))
            else:
                test.assertEqual(a.t[name][i].tolist(), b.t[name][j].tolist(), (k, name))
        np.testing.assert_array_equal(a.affine(i), b.affine(j))


class VerifyTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.inputs = make_inputs(cls.tmp, n_archives=2, per=5)
        cls.out = os.path.join(cls.tmp, "ds")
        p = fx.run(["convert", *cls.inputs, "-o", cls.out, "--format", "png", "--dense", "depth.png",
                    "--shard-size", "8K", "-q"])
        assert p.returncode == 0, p.stderr.decode()

    def test_intact_dataset_passes(self):
        for flags in ([], ["--decode"], ["--threads", "1"]):
            p = verify(self.out, "--json", *flags)
            self.assertEqual(p.returncode, 0, p.stdout.decode())
            r = json.loads(p.stdout)
            self.assertTrue(r["ok"])
            self.assertEqual(r["samples"], 10)
            self.assertEqual(r["blobs"], 20)
            self.assertGreater(r["shards"], 1)

    def flip_each(self, targets, seed):
        """Flips one byte at each (file, position) in turn; verify must exit 3 (damage found) every time."""
        rng = random.Random(seed)
        for name, pos in targets:
            path = os.path.join(self.out, name)
            with open(path, "r+b") as f:
                f.seek(pos)
                old = f.read(1)
                f.seek(pos)
                f.write(bytes([old[0] ^ rng.randrange(1, 256)]))
            try:
                p = verify(self.out)
            finally:
                with open(path, "r+b") as f:
                    f.seek(pos)
                    f.write(old)
            self.assertEqual(p.returncode, 3, f"flip of byte {pos} of {name} not found:\n{p.stdout.decode(errors='replace')}")

    def test_any_flipped_byte_is_found(self):
        # Through the CLI (exit code 3); tests/check/verify_test.cpp flips 300 more in-process.
        rng = random.Random(1)
        files = sorted(f for f in os.listdir(self.out) if not f.startswith("."))
        sizes = {f: os.path.getsize(os.path.join(self.out, f)) for f in files}
        targets = [(f, rng.randrange(sizes[f])) for f in (rng.choice(files) for _ in range(40))]
        self.flip_each(targets, seed=2)
        self.assertEqual(verify(self.out).returncode, 0)

    def test_flips_in_padding_and_end_blocks_are_found(self):
        labels = os.path.join(self.out, "labels.safetensors")
        with open(labels, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = f.read(n)
        pad = [8 + i for i in range(len(header)) if i > header.rindex(b"}")]
        shard = "shard-000000.tar"
        size = os.path.getsize(os.path.join(self.out, shard))
        targets = [("labels.safetensors", p) for p in pad]
        targets += [(shard, size - 1), (shard, size - 700), (shard, 300), (shard, 150), (shard, 155), (shard, 154)]
        self.assertTrue(pad, "the header has padding spaces")
        self.flip_each(targets, seed=3)

    def broken_copy(self, name):
        d = os.path.join(self.tmp, name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(self.out, d)
        return d

    def expect_failure(self, d, *words, code=3):
        p = verify(d)
        text = p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, code, text)
        for w in words:
            self.assertIn(w, text)
        self.assertNotIn("Traceback", text)

    def test_missing_truncated_extra_files(self):
        d = self.broken_copy("missing_shard")
        os.remove(os.path.join(d, "shard-000001.tar"))
        self.expect_failure(d, "shard-000001.tar", "cannot be read")
        d = self.broken_copy("truncated_shard")
        with open(os.path.join(d, "shard-000000.tar"), "r+b") as f:
            f.truncate(os.path.getsize(f.name) // 2)
        self.expect_failure(d, "truncated")
        d = self.broken_copy("extra_shard")
        shutil.copy(os.path.join(d, "shard-000000.tar"), os.path.join(d, "shard-000099.tar"))
        self.expect_failure(d, "shard-000099.tar", "extra shard")
        d = self.broken_copy("truncated_labels")
        with open(os.path.join(d, "labels.safetensors"), "r+b") as f:
            f.truncate(os.path.getsize(f.name) - 3)
        self.expect_failure(d, "labels.safetensors")
        for cut in (0, 5):
            with open(os.path.join(d, "labels.safetensors"), "r+b") as f:
                f.truncate(cut)
            self.expect_failure(d, "labels.safetensors")
        d = self.broken_copy("no_manifest")
        os.remove(os.path.join(d, "manifest.json"))
        self.expect_failure(d, "manifest.json")
        d = self.broken_copy("no_labels")
        os.remove(os.path.join(d, "labels.safetensors"))  # its manifest is there: damaged
        self.expect_failure(d, "labels.safetensors: is missing", "manifest.json is there")

    def test_not_a_dataset(self):
        empty = tempfile.mkdtemp(dir=self.tmp)
        self.expect_failure(empty, "not a tarmac dataset", code=1)  # no dataset: 1, not 3
        self.expect_failure(os.path.join(self.tmp, "nonexistent"), "not a directory", code=1)
        self.expect_failure(self.inputs[0], "not a directory", code=1)

    def test_reports_sample_key(self):
        d = self.broken_copy("bad_image")
        ds = fx.Dataset(d)
        off = int(ds.t["__image__.offset"][3])
        with open(os.path.join(d, ds.shards[int(ds.t["__image__.shard"][3])]), "r+b") as f:
            f.seek(off + 40)
            b = f.read(1)
            f.seek(off + 40)
            f.write(bytes([b[0] ^ 0xFF]))
        p = verify(d, "--json")
        self.assertEqual(p.returncode, 3)
        r = json.loads(p.stdout)
        self.assertFalse(r["ok"])
        self.assertIn(ds.keys[3], [x["sample"] for x in r["problems"]])


class CatLsTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.out = os.path.join(cls.tmp, "ds")
        p = fx.run(["convert", *make_inputs(cls.tmp, 2, 3), "-o", cls.out, "--dense", "depth.png", "-q"])
        assert p.returncode == 0, p.stderr.decode()
        cls.ds = fx.Dataset(cls.out)

    def test_ls(self):
        p = fx.run(["ls", self.out])
        self.assertEqual(p.returncode, 0)
        self.assertEqual(p.stdout.decode().splitlines(), self.ds.keys)
        rows = [line.split() for line in fx.run(["ls", self.out, "-l"]).stdout.decode().splitlines()]
        self.assertEqual([r[0] for r in rows], [str(i) for i in range(len(self.ds.keys))])
        self.assertEqual([int(r[1]) for r in rows], self.ds.t["__image__.size"].tolist())
        w, h = self.ds.t["__image__.width"][1], self.ds.t["__image__.height"][1]
        self.assertEqual(rows[1][2], f"{w}x{h}")

    def test_cat(self):
        for i in (0, 4):
            key = self.ds.keys[i]
            self.assertEqual(fx.run(["cat", self.out, key]).stdout, self.ds.blob(i))
            self.assertEqual(fx.run(["cat", self.out, f"#{i}", "--dense", "depth"]).stdout, self.ds.blob(i, "__depth__"))
            j = json.loads(fx.run(["cat", self.out, key, "--labels"]).stdout)
            self.assertEqual(j["key"], key)
            self.assertEqual(j["labels"]["name"], self.ds.string("name", i))
            self.assertEqual(j["labels"]["pts"], self.ds.ragged("pts", i).tolist())
            self.assertEqual(j["labels"]["score"], int(self.ds.t["score"][i]))

    def test_cat_errors(self):
        for args in (["nope"], ["#99"], ["#0", "--dense", "mask"]):
            p = fx.run(["cat", self.out, *args])
            self.assertEqual(p.returncode, 1, args)
            self.assertIn(b"error", p.stderr)
        self.assertEqual(fx.run(["cat", self.tmp, "#0"]).returncode, 1)


class ShardMergeTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.inputs = make_inputs(cls.tmp, n_archives=4, per=5, float_from=2)
        cls.flags = ["--dense", "depth.png", "--format", "png", "-q"]
        cls.single = os.path.join(cls.tmp, "single")
        p = fx.run(["convert", *cls.inputs, "-o", cls.single, *cls.flags])
        assert p.returncode == 0, p.stderr.decode()

    def parts(self, name, n, inputs=None, *extra):
        dirs = []
        for i in range(n):
            d = os.path.join(self.tmp, f"{name}-{i}")
            p = fx.run(["convert", *(inputs or self.inputs), "-o", d, "--shard", f"{i}/{n}", *self.flags,
                        *extra])
            self.assertEqual(p.returncode, 0, p.stderr.decode())
            dirs.append(d)
        return dirs

    def merge(self, dirs, name, *flags, expect=0):
        out = os.path.join(self.tmp, name)
        p = fx.run(["merge", *dirs, "-o", out, *flags])
        self.assertEqual(p.returncode, expect, p.stderr.decode())
        return out, p

    def test_split_by_inputs_keeps_order(self):
        dirs = self.parts("byin", 2)
        # Parts differ in schema: archives 0-1 have integer scores, 2-3 float ones.
        self.assertEqual(fx.Dataset(dirs[0]).schema["score"]["dtype"], "I64")
        self.assertEqual(fx.Dataset(dirs[1]).schema["score"]["dtype"], "F64")
        self.assertEqual(manifest(dirs[1])["part"],
                         {"index": 1, "count": 2, "split": "inputs", "all_inputs": 4})
        out, _ = self.merge(dirs, "byin-merged")
        same_samples(self, fx.Dataset(out), fx.Dataset(self.single), same_order=True)
        self.assertEqual(verify(out).returncode, 0, verify(out).stdout.decode())
        m = manifest(out)
        self.assertEqual([x["path"] for x in m["merged_from"]], dirs)
        self.assertEqual([i["path"] for i in m["inputs"]], self.inputs)
        # Shards are hard links of the parts' shards, renumbered in order.
        src = os.stat(os.path.join(dirs[1], "shard-000000.tar"))
        dst = os.stat(os.path.join(out, "shard-000001.tar"))
        self.assertEqual((src.st_dev, src.st_ino), (dst.st_dev, dst.st_ino))

    def test_split_by_samples_same_set(self):
        dirs = self.parts("bysample", 3, self.inputs[:2])
        counts = [fx.Dataset(d).t["__key__.offsets"].shape[0] - 1 for d in dirs]
        self.assertEqual(counts, [4, 3, 3])
        out, _ = self.merge(dirs, "bysample-merged", "--copy")
        one = os.path.join(self.tmp, "single2")
        self.assertEqual(fx.run(["convert", *self.inputs[:2], "-o", one, *self.flags]).returncode, 0)
        same_samples(self, fx.Dataset(out), fx.Dataset(one), same_order=False)
        self.assertEqual(verify(out).returncode, 0)
        a, b = os.stat(os.path.join(dirs[0], "shard-000000.tar")), os.stat(os.path.join(out, "shard-000000.tar"))
        self.assertNotEqual(a.st_ino, b.st_ino)

    def test_more_parts_than_samples(self):
        # Parts 5..7 get no sample: an empty part fails unless --allow-empty (#16).
        p = fx.run(["convert", self.inputs[0], "-o", os.path.join(self.tmp, "many-empty"), "--shard", "7/8",
                    *self.flags])
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"part 7/8 of the input holds no sample", p.stderr)
        dirs = self.parts("many", 8, self.inputs[:1], "--allow-empty")
        self.assertEqual(sum(len(fx.Dataset(d).keys) for d in dirs), 5)
        out, _ = self.merge(dirs, "many-merged")
        self.assertEqual(sorted(fx.Dataset(out).keys), sorted(fx.Dataset(dirs[0]).keys + fx.Dataset(dirs[4]).keys +
                                                              sum((fx.Dataset(d).keys for d in dirs[1:4]), [])))
        self.assertEqual(verify(out).returncode, 0)

    def test_merge_errors(self):
        dirs = self.parts("err", 2)
        _, p = self.merge([dirs[0], dirs[0]], "dup", expect=1)
        self.assertIn(b"part 0/2 is given twice", p.stderr)  # before any key is compared
        self.assertIn(os.path.basename(dirs[0]).encode(), p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "dup", "labels.safetensors")))
        other = os.path.join(self.tmp, "other")
        fx.write_tar(os.path.join(self.tmp, "other.tar"), [("o/x.png", fx.png(fx.smooth_rgb(8, 8))),
                                                            ("o/x.depth.png", fx.png(fx.smooth_u16(8, 8))),
                                                            ("o/x.json", fx.js({"other": 1}))])
        self.assertEqual(fx.run(["convert", os.path.join(self.tmp, "other.tar"), "-o", other, *self.flags]).returncode, 0)
        # Datasets with different fields merge into their union; each field is nullable, without
        # a value in the samples of the datasets that lack it. (Whole ones: a part of a split is
        # merged only with the rest of its split.)
        whole = os.path.join(self.tmp, "whole0")
        self.assertEqual(fx.run(["convert", *self.inputs, "-o", whole, *self.flags]).returncode, 0)
        _, p = self.merge([dirs[0], other], "part-and-other", expect=1)
        self.assertIn(b"is not a part of the --shard split", p.stderr)
        out, p = self.merge([whole, other], "union", expect=0)
        ds, first = fx.Dataset(out), fx.Dataset(whole)
        n0 = len(first.keys)
        self.assertEqual(ds.t["other.valid"].tolist(), [False] * n0 + [True])
        self.assertEqual(ds.t["other"].tolist(), [0] * n0 + [1])
        schema = json.loads(ds.meta["schema"])
        for name in json.loads(first.meta["schema"]):
            self.assertTrue(schema[name]["nullable"], name)
            self.assertEqual(ds.t[name + ".valid"].tolist(), [True] * n0 + [False], name)
        self.assertEqual(fx.run(["verify", out]).returncode, 0)
        # A field of another kind in another part cannot be merged.
        kind = os.path.join(self.tmp, "kind")
        fx.write_tar(os.path.join(self.tmp, "kind.tar"), [("k/x.png", fx.png(fx.smooth_rgb(8, 8))),
                                                         ("k/x.depth.png", fx.png(fx.smooth_u16(8, 8))),
                                                         ("k/x.json", fx.js({"other": "text"}))])
        self.assertEqual(fx.run(["convert", os.path.join(self.tmp, "kind.tar"), "-o", kind, *self.flags]).returncode, 0)
        _, p = self.merge([other, kind], "incompatible", expect=1)
        self.assertIn(b"field 'other'", p.stderr)
        self.assertIn(b"of kind", p.stderr)
        _, p = self.merge([dirs[0], self.tmp], "notds", expect=1)
        self.assertIn(b"not a tarmac dataset", p.stderr)
        self.assertEqual(fx.run(["convert", *self.inputs, "-o", os.path.join(self.tmp, "x"), "--shard", "2/2"]).returncode, 2)


class ScriptsTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.inputs = make_inputs(cls.tmp, n_archives=3, per=3)
        cls.single = os.path.join(cls.tmp, "single")
        assert fx.run(["convert", *cls.inputs, "-o", cls.single, "--format", "png", "-q"]).returncode == 0
        cls.env = dict(os.environ, TARMAC=fx.TARMAC)

    @unittest.skipUnless(shutil.which("parallel"), "GNU parallel is not installed")
    def test_convert_parallel(self):
        out = os.path.join(self.tmp, "par")
        p = subprocess.run([os.path.join(SCRIPTS, "convert-parallel.sh"), "-n", "2", "-o", out, *self.inputs,
                            "--", "--format", "png"], env=self.env, capture_output=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertFalse(os.path.exists(out + ".parts"))
        a, b = fx.Dataset(out), fx.Dataset(self.single)
        self.assertEqual(a.keys, b.keys)
        self.assertEqual([a.blob(i) for i in range(len(a.keys))], [b.blob(i) for i in range(len(b.keys))])

    def test_convert_slurm_with_a_fake_sbatch(self):
        """No Slurm in CI: a stand-in `sbatch` runs each array task (and then the dependent
        merge job) at once, with the environment Slurm would give it."""
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir, exist_ok=True)
        fake = os.path.join(bindir, "sbatch")
        with open(fake, "w") as f:
            f.write("""#!/usr/bin/env bash
set -e
ARRAY=""; DEP=""
while [[ $1 == --* ]]; do
  case $1 in --array=*) ARRAY=${1#--array=} ;; --dependency=*) DEP=${1#--dependency=} ;; esac; shift
done
echo "$DEP $ARRAY $*" >> "$(dirname "$0")/calls"
if [ -n "$ARRAY" ]; then
  for i in $(seq ${ARRAY%-*} ${ARRAY#*-}); do SLURM_ARRAY_TASK_ID=$i bash "$@" > /dev/null; done
else
  bash "$@" > /dev/null
fi
echo $RANDOM
""")
        os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
        out = os.path.join(self.tmp, "slurm")
        env = dict(self.env, PATH=bindir + os.pathsep + os.environ["PATH"])
        p = subprocess.run(["bash", os.path.join(SCRIPTS, "convert-slurm.sbatch"), "submit", "3", out, *self.inputs,
                            "--", "--format", "png", "-q"], env=env, capture_output=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        with open(os.path.join(bindir, "calls")) as f:
            calls = f.read().splitlines()
        self.assertIn(" 0-2 ", calls[0])
        self.assertTrue(calls[1].startswith("afterok:"))
        self.assertEqual(fx.Dataset(out).keys, fx.Dataset(self.single).keys)
        self.assertEqual(verify(out).returncode, 0)


if __name__ == "__main__":
    unittest.main()
