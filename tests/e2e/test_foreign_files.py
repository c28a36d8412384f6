"""Only what tarmac wrote is ever replaced or deleted, locally and in a bucket (issue #35,
invariant 3, items 1, 2, 9 and 17).

The property test places random files (seeded: names like shards, labels.safetensors,
manifest.json, shardlist.json, checkpoint.json, random names, nested folders) in and around the
output before each kind of run: a new run with and without --overwrite, --overwrite over an old
dataset, --resume after a SIGKILL at a checkpoint, `tarmac merge`, and -o s3:// (the real Swift
server of tests/e2e/s3_local.py; those cases skip as test_s3_output.py does without it). After
every run every foreign byte is still there (compared with the bytes written, read back with
open() or boto3's get_object); a refused run (exit 1, the code of a refused output in
docs/cli.md) leaves the output exactly as it was; an accepted one gives the dataset of a run into
an empty output (its shards and annotation file byte for byte) and `tarmac verify` passes. What
the test expects is its own rule, not tarmac's: a run into an output holding anything else needs
--overwrite (or --resume); a top-level name a dataset file could have (shard-NNNNNN.tar,
labels.safetensors, manifest.json, shardlist.json) that no dataset or checkpoint there names is
refused even then.

Then one regression test per bug, each failing on cc3b195."""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402
import s3_local as s3l  # noqa: E402
from test_s3 import noise_png  # noqa: E402

OPTIONS = ["--format", "keep", "--shard-size", "12K"]
DATASET_NAMES = ("labels.safetensors", "manifest.json", "shardlist.json")
BUCKET = "tarmac-foreign"


def sample_tar(path, prefix, n, seed):
    members = []
    for i in range(n):
        members.append((f"{prefix}/{i:03d}.png", fx.png(fx.smooth_rgb(24, 16, seed=seed + i))))
        members.append((f"{prefix}/{i:03d}.json", fx.js({"v": seed + i, "name": f"{prefix}{i}"})))
    return fx.write_tar(path, members)


def collides(name):
    """A name a dataset file may be written under (our rule, not tarmac's names.cpp)."""
    return "/" not in name and (re.fullmatch(r"shard-\d{6,}\.tar", name) is not None or name in DATASET_NAMES)


def foreign_set(rng, colliding):
    """{relative name: bytes} of foreign files for the inside of an output; with at least one
    colliding name when `colliding`, with none when not."""
    shard = lambda: "shard-%06d.tar" % rng.randrange(0, 12)  # noqa: E731
    pool = [shard(), shard(), *DATASET_NAMES]
    other = ["checkpoint.json", "notes-%d.txt" % rng.randrange(1000), "shard-%05d.tgz" % rng.randrange(100),
             "shard-000001.tar.bak", "sub/" + shard(), "sub/labels.safetensors",
             "deep/%d/manifest.json" % rng.randrange(100), "deep/checkpoint.json", "README"]
    names = set(rng.sample(other, rng.randrange(1, 5)))
    if colliding:
        names |= set(rng.sample(pool, rng.randrange(1, 3)))
    return {n: rng.randbytes(rng.randrange(1, 3000)) for n in sorted(names)}


def around_set(rng):
    """Names beside the output, sharing its name's start (relative to the output's parent, the
    output being "out")."""
    names = ["out-sibling/shard-000000.tar", "out-sibling/manifest.json", "outshard-000000.tar", "out.bak"]
    return {n: rng.randbytes(rng.randrange(1, 2000)) for n in rng.sample(names, 3)}


def tree(root):
    """{relative path: bytes} of every file under `root` but the lock file (tarmac's)."""
    got = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            if f != ".tarmac-lock":
                got[os.path.relpath(p, root)] = fx.read_bytes(p)
    return got


def place(root, files):
    for name, data in files.items():
        p = os.path.join(root, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)


class Inputs(fx.TmpCase):
    @classmethod
    def build(cls):
        raw = os.path.join(cls.tmp, "raw")
        os.makedirs(raw)
        cls.inputs = [sample_tar(os.path.join(raw, "in-%d.tar" % k), "s%d" % k, 20, seed=100 * k) for k in range(4)]
        cls.reference = os.path.join(cls.tmp, "reference")
        p = fx.run(["convert", "-q", *cls.inputs, "-o", cls.reference, *OPTIONS])
        assert p.returncode == 0, p.stderr.decode()
        cls.ref_files = {n: fx.read_bytes(os.path.join(cls.reference, n))
                         for n in os.listdir(cls.reference) if n != "manifest.json"}
        assert len([n for n in cls.ref_files if n.endswith(".tar")]) >= 4

    def assert_dataset(self, files, verify_target, env=None):
        """`files` ({name: bytes}, the output's top level) hold the reference's shards and
        annotation file byte for byte, and `tarmac verify` passes."""
        for name, data in self.ref_files.items():
            self.assertEqual(files.get(name), data, name)
        p = subprocess.run([fx.TARMAC, "verify", verify_target], capture_output=True, text=True, env=env,
                           timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


class LocalForeignFiles(Inputs):
    def run_case(self, seed, kind):
        rng = random.Random(seed)
        base = self.path("case-%s-%d" % (kind, seed))
        out = os.path.join(base, "out")
        os.makedirs(out)
        around = around_set(rng)
        place(base, around)
        colliding = rng.random() < 0.5
        owned = set()  # names tarmac's own record gives: not placed (they are its to replace)
        if kind == "old-dataset":
            p = fx.run(["convert", "-q", *self.inputs[:2], "-o", out, *OPTIONS])
            self.assertEqual(p.returncode, 0, p.stderr.decode())
            owned = set(os.listdir(out))
        flags = {"plain": [], "overwrite": ["--overwrite"], "old-dataset": ["--overwrite"],
                 "resume": ["--resume"]}[kind]
        if kind == "resume":
            rc, cp = fx.kill_at_checkpoint(["convert", *self.inputs, "-o", out, *OPTIONS], out, entries=25)
            if rc == 0 or cp is None:
                self.skipTest("the run ended before the kill")  # pragma: no cover (too fast a disk)
            owned = set(cp["writer"]["shards"])  # the checkpoint's: tarmac's to replace
        foreign = {n: d for n, d in foreign_set(rng, colliding).items() if n not in owned}
        colliding = any(collides(n) for n in foreign)
        place(out, foreign)
        before = tree(out)
        p = fx.run(["convert", *self.inputs, "-o", out, *OPTIONS, *flags])
        refused = colliding or kind == "plain"
        msg = "seed %d %s, foreign %s: %s" % (seed, kind, sorted(foreign), p.stderr.decode())
        self.assertEqual(p.returncode, 1 if refused else 0, msg)
        after = tree(out)
        if refused:
            self.assertEqual(after, before, "a refused run changes nothing: " + msg)
        else:
            self.assert_dataset({n: d for n, d in after.items() if "/" not in n}, out)
        for name, data in foreign.items():
            self.assertEqual(after.get(name), data, name + ": " + msg)
        self.assertEqual({n: fx.read_bytes(os.path.join(base, n)) for n in around}, around, msg)

    def test_random_foreign_files_survive_every_run(self):
        for seed in range(5):
            for kind in ("plain", "overwrite", "old-dataset", "resume"):
                with self.subTest(seed=seed, kind=kind):
                    self.run_case(seed, kind)

    def test_merge_into_output_with_foreign_files_refused(self):
        parts = []
        for i in range(2):
            part = self.path("part%d" % i)
            p = fx.run(["convert", "-q", *self.inputs, "-o", part, *OPTIONS, "--shard", "%d/2" % i])
            self.assertEqual(p.returncode, 0, p.stderr.decode())
            parts.append(part)
        for seed in range(4):
            with self.subTest(seed=seed):
                rng = random.Random(1000 + seed)
                out = self.path("merged-%d" % seed)
                os.makedirs(out)
                foreign = foreign_set(rng, rng.random() < 0.5)
                place(out, foreign)
                p = fx.run(["merge", *parts, "-o", out])
                self.assertEqual(p.returncode, 1, p.stderr.decode())
                self.assertEqual(tree(out), foreign)
        # and into an empty one it is whole
        out = self.path("merged")
        p = fx.run(["merge", *parts, "-o", out])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertEqual(fx.run(["verify", out]).returncode, 0)


    def killed_run(self, name):
        out = self.path(name)
        rc, cp = fx.kill_at_checkpoint(["convert", *self.inputs, "-o", out, *OPTIONS], out, entries=25)
        if rc == 0 or cp is None:
            self.skipTest("the run ended before the kill")  # pragma: no cover
        return out, cp

    def test_resume_keeps_foreign_shard_named_file(self):
        for foreign in ({"shard-000099.tar": b"the user's"}, {"labels.safetensors": b"the user's"},
                        {"manifest.json": b"{}"}):
            with self.subTest(foreign=sorted(foreign)):
                out, cp = self.killed_run("resume-foreign-%s" % sorted(foreign)[0])
                place(out, foreign)
                before = tree(out)
                p = fx.run(["convert", *self.inputs, "-o", out, *OPTIONS, "--resume"])
                self.assertEqual(p.returncode, 1, p.stderr.decode())
                self.assertIn("no dataset there lists as its own", p.stderr.decode())
                self.assertEqual(tree(out), before)
                os.remove(os.path.join(out, sorted(foreign)[0]))  # moved away: it goes on
                p = fx.run(["convert", *self.inputs, "-o", out, *OPTIONS, "--resume"])
                self.assertEqual(p.returncode, 0, p.stderr.decode())
                self.assert_dataset(tree(out), out)

    def test_killed_run_leftovers_keep_user_files(self):
        # a file named as a shard of the killed run's checkpoint, still in its staging folder
        # (never published): the user's, not removed with the killed run's leftovers
        out, cp = self.killed_run("leftovers")
        name = cp["writer"]["shards"][0]
        place(out, {name: b"the user's"})
        p = fx.run(["convert", *self.inputs, "-o", out, *OPTIONS, "--overwrite"])
        self.assertEqual(p.returncode, 1, p.stderr.decode())
        self.assertEqual(fx.read_bytes(os.path.join(out, name)), b"the user's")


class S3ForeignObjects(Inputs):
    @classmethod
    def build(cls):
        s3l.start_server(cls)
        cls.s3.create_bucket(Bucket=BUCKET)
        super().build()

    counter = 0

    def prefix(self):
        S3ForeignObjects.counter += 1
        return "p%d/" % S3ForeignObjects.counter

    def objects(self, prefix=""):
        """{key: bytes} under `prefix` (every key of the bucket by default), by boto3."""
        got, token = {}, None
        while True:
            kw = {"ContinuationToken": token} if token else {}
            page = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix, **kw)
            for o in page.get("Contents", []):
                if o["Key"].endswith("/.tarmac-lock"):  # tarmac's (a killed run's, released)
                    continue
                got[o["Key"]] = self.s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
            if not page.get("IsTruncated"):
                return got
            token = page["NextContinuationToken"]

    def put(self, prefix, files):
        for name, data in files.items():
            self.s3.put_object(Bucket=BUCKET, Key=prefix + name, Body=data)

    def tarmac(self, *args):
        return subprocess.run([fx.TARMAC, *args], capture_output=True, text=True, env=self.env, timeout=180,
                              cwd=self.tmp)

    def convert(self, prefix, *flags, inputs=None):
        return self.tarmac("convert", *(inputs or self.inputs), "-o", "s3://%s/%s" % (BUCKET, prefix), *OPTIONS,
                           "--no-lock", *flags)

    def assert_s3_dataset(self, prefix):
        objs = self.objects(prefix)
        self.assert_dataset({k[len(prefix):]: v for k, v in objs.items()}, "s3://%s/%s" % (BUCKET, prefix),
                            env=self.env)

    def run_case(self, seed, kind):
        rng = random.Random(seed)
        prefix = self.prefix()
        # around the prefix: sharing its start, and the key the prefix names without its slash
        around = {prefix[:-1] + "-sibling/shard-000000.tar": b"s", prefix[:-1] + "shard-000000.tar": b"t",
                  prefix[:-1]: rng.randbytes(100)}
        self.put("", around)
        cp = self.path("cp-%s-%d" % (kind, seed))
        owned = set()  # names tarmac's own record gives: not placed (they are its to replace)
        if kind == "old-dataset":
            p = self.convert(prefix, inputs=self.inputs[:2])
            self.assertEqual(p.returncode, 0, p.stderr)
            owned = {k[len(prefix):] for k in self.objects(prefix)}
        flags = {"plain": [], "overwrite": ["--overwrite"], "old-dataset": ["--overwrite"],
                 "resume": ["--resume"]}[kind]
        if kind == "resume":
            args = ["convert", *self.inputs, "-o", "s3://%s/%s" % (BUCKET, prefix), *OPTIONS, "--no-lock",
                    "--checkpoint-dir", cp]
            rc, last = fx.kill_at_checkpoint(args, cp, entries=25, env=self.env)
            if rc == 0 or last is None:
                self.skipTest("the run ended before the kill")  # pragma: no cover
            owned = set(last["writer"]["shards"])
        foreign = {n: d for n, d in foreign_set(rng, rng.random() < 0.5).items() if n not in owned}
        colliding = any(collides(n) for n in foreign)
        self.put(prefix, foreign)
        before = self.objects()
        p = self.convert(prefix, "--checkpoint-dir", cp, *flags)
        refused = colliding or kind == "plain"
        msg = "seed %d %s, foreign %s: %s" % (seed, kind, sorted(foreign), p.stderr)
        self.assertEqual(p.returncode, 1 if refused else 0, msg)
        after = self.objects()
        if refused:
            self.assertEqual(after, before, "a refused run changes nothing: " + msg)
        else:
            self.assert_s3_dataset(prefix)
        for name, data in foreign.items():
            self.assertEqual(after.get(prefix + name), data, name + ": " + msg)
        for key, data in around.items():
            self.assertEqual(after.get(key), data, key + ": " + msg)

    def test_random_foreign_objects_survive_every_run(self):
        for seed in range(3):
            for kind in ("plain", "overwrite", "old-dataset", "resume"):
                with self.subTest(seed=seed, kind=kind):
                    self.run_case(seed, kind)

    def test_overwrite_keeps_foreign_shard_named_object(self):
        prefix = self.prefix()
        p = self.convert(prefix, inputs=self.inputs[:1])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn(prefix + "shard-000007.tar", self.objects(prefix), "the old dataset is shorter")
        self.put(prefix, {"shard-000007.tar": b"the user's own", "notes.txt": b"mine"})
        before = self.objects()
        p = self.convert(prefix, "--overwrite")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("s3://%s/%sshard-000007.tar" % (BUCKET, prefix), p.stderr)
        self.assertIn("no dataset there lists as its own", p.stderr)
        self.assertEqual(self.objects(), before, "nothing replaced or removed")
        # moved away, the run goes on and keeps the other foreign object
        self.s3.delete_object(Bucket=BUCKET, Key=prefix + "shard-000007.tar")
        p = self.convert(prefix, "--overwrite")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.objects(prefix)[prefix + "notes.txt"], b"mine")
        self.assert_s3_dataset(prefix)

    def test_no_manifest_prefix_with_foreign_objects_refused(self):
        prefix = self.prefix()
        self.put(prefix, {"shard-000000.tar": b"user shard", "labels.safetensors": b"user labels"})
        before = self.objects()
        p = self.convert(prefix)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("2 object(s) tarmac did not write", p.stderr)
        self.assertIn("s3://%s/%slabels.safetensors" % (BUCKET, prefix), p.stderr)
        self.assertIn("--overwrite", p.stderr)
        self.assertEqual(self.objects(), before)
        p = self.convert(prefix, "--overwrite")  # named like dataset files: refused even so
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(self.objects(), before)

    def test_input_inside_output_refused(self):
        prefix = self.prefix()
        p = self.convert(prefix)
        self.assertEqual(p.returncode, 0, p.stderr)
        before = self.objects()
        url = "s3://%s/%s" % (BUCKET, prefix)
        cases = [([url + "shard-000000.tar"], url, "is inside the output prefix"),
                 ([url], url + "out2/", "is inside the input prefix"),
                 (["s3://%s/" % BUCKET], url, "is inside the input prefix"),
                 ([url + "shard-{000000..000001}.tar"], "s3://%s/" % BUCKET, "is inside the output prefix")]
        for inputs, out, words in cases:
            with self.subTest(inputs=inputs, out=out):
                for flags in ([], ["--overwrite"]):
                    p = self.tarmac("convert", *inputs, "-o", out, *OPTIONS, "--no-lock", *flags)
                    self.assertEqual(p.returncode, 1, p.stderr)
                    self.assertIn(words, p.stderr)
                    self.assertIn(inputs[0], p.stderr)
                    self.assertEqual(self.objects(), before, "nothing written or deleted")
        # beside the output, not in it: converted
        p = self.tarmac("convert", url + "shard-000000.tar", "-o", url[:-1] + "-beside/", *OPTIONS, "--no-lock")
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_dot_segments_refused(self):
        url = "s3://%s/" % BUCKET
        before = self.objects()
        for out in ("p3/../p3b", "p3/./x/", "p3/..", "./p3/", "p3//x/"):
            with self.subTest(out=out):
                p = self.tarmac("convert", *self.inputs, "-o", url + out, *OPTIONS, "--no-lock")
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("'%s'" % (url + out), p.stderr)
                self.assertIn("empty, '.' or '..' part", p.stderr)
        self.assertEqual(self.objects(), before, "nothing written (under p3b/ or anywhere)")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, ".tarmac-checkpoint")))
        # an input and a table the same way
        p = self.tarmac("convert", url + "a/../in.tar", "-o", self.path("dots-out"), *OPTIONS)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("empty, '.' or '..' part", p.stderr)
        p = self.tarmac("convert", *self.inputs, "--table", url + "./t.csv", "-o", self.path("dots-out"), *OPTIONS)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertFalse(os.path.exists(self.path("dots-out")))

    def test_double_slash_advice_is_accepted(self):
        prefix = self.prefix()
        bad = "s3://%s//%s" % (BUCKET, prefix[:-1])
        p = self.tarmac("convert", *self.inputs, "-o", bad, *OPTIONS, "--no-lock")
        self.assertEqual(p.returncode, 2, p.stderr)
        m = re.search(r"\(e\.g\. (s3://\S+)\)", p.stderr)
        self.assertIsNotNone(m, p.stderr)
        advised = m.group(1)
        self.assertEqual(advised, "s3://%s/%s" % (BUCKET, prefix[:-1]))
        p = self.tarmac("convert", *self.inputs, "-o", advised, *OPTIONS, "--no-lock")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_s3_dataset(prefix)

    def test_content_type(self):
        prefix = self.prefix()
        # one shard over --multipart-size: CreateMultipartUpload names the type too
        big = self.path("big.tar")
        fx.write_tar(big, [m for i in range(9) for m in (("%03d.png" % i, noise_png(7000 + i, side=512)),
                                                         ("%03d.json" % i, fx.js({"i": i})))])
        p = self.tarmac("convert", big, "-o", "s3://%s/%s" % (BUCKET, prefix), "--format", "keep",
                        "--shard-size", "6M", "--multipart-size", "5M", "--no-lock", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        uploads = json.loads(p.stdout)["uploads"]
        self.assertGreaterEqual(uploads["multipart"], 1)
        want = {".tar": "application/x-tar", ".json": "application/json", ".safetensors": "application/octet-stream"}
        keys = sorted(self.objects(prefix))
        self.assertIn(prefix + "labels.safetensors", keys)
        self.assertGreater(len([k for k in keys if k.endswith(".tar")]), uploads["multipart"], "single PUTs too")
        for key in keys:
            with self.subTest(key=key):
                head = self.s3.head_object(Bucket=BUCKET, Key=key)
                self.assertEqual(head["ContentType"], want[os.path.splitext(key)[1]])
        self.assertEqual(self.tarmac("verify", "s3://%s/%s" % (BUCKET, prefix)).returncode, 0)


if __name__ == "__main__":
    unittest.main()
