"""Nothing the user owns is lost or brought in: an output that holds an input, --overwrite next
to files no dataset lists, a part whose shard is a symbolic link, a merge that died while it
published (issue #25, items 1 to 3). Each test fails on the code before the fix."""
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import time
import unittest
import zlib

import fixtures as fx


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def sample_tar(path, prefix, n, seed=0):
    members = []
    for i in range(n):
        members.append((f"{prefix}/{i:03d}.png", fx.png(fx.smooth_rgb(24, 16, seed=seed + i))))
        members.append((f"{prefix}/{i:03d}.json", fx.js({"v": seed + i})))
    return fx.write_tar(path, members)


class OverwriteTest(fx.TmpCase):
    def test_output_holding_its_inputs_is_refused_and_inputs_stay(self):
        raw = self.path("raw")
        os.makedirs(raw)
        # Inputs named as tarmac names its shards, in the directory given as the output.
        a = sample_tar(os.path.join(raw, "shard-000000.tar"), "a", 3)
        b = sample_tar(os.path.join(raw, "shard-000001.tar"), "b", 3, seed=10)
        before = {p: digest(p) for p in (a, b)}
        for flags in ([], ["--overwrite"]):
            with self.subTest(flags=flags):
                p = fx.run(["convert", a, b, "-o", raw, *flags])
                self.assertEqual(p.returncode, 1, p.stderr.decode())
                self.assertIn("is inside the output directory", p.stderr.decode())
                self.assertEqual(sorted(os.listdir(raw)), ["shard-000000.tar", "shard-000001.tar"])
                self.assertEqual({q: digest(q) for q in (a, b)}, before)
        # The same through a trailing slash and a path with '..'.
        p = fx.run(["convert", a, "-o", raw + "/", "--overwrite"])
        self.assertEqual(p.returncode, 1)
        p = fx.run(["convert", os.path.join(raw, "..", "raw", "shard-000000.tar"), "-o", raw, "--overwrite"])
        self.assertEqual(p.returncode, 1)
        self.assertEqual({q: digest(q) for q in (a, b)}, before)

    def test_a_users_file_in_the_staging_folder_is_not_removed(self):
        """A .tarmac-partial/ without a checkpoint is removed by a new run, but only when it holds
        nothing a run does not write there: a user's file in it makes the run refuse, the file
        and the folder left as they were."""
        out = self.path("staged")
        staging = os.path.join(out, ".tarmac-partial")
        os.makedirs(staging)
        with open(os.path.join(staging, "notes.txt"), "w") as f:
            f.write("mine")
        with open(os.path.join(staging, "shard-000000.tar"), "wb") as f:
            f.write(b"\0" * 1024)  # a name a run writes: not what stops it
        src = sample_tar(self.path("st.tar"), "st", 2)
        for flags in ([], ["--overwrite"]):
            with self.subTest(flags=flags):
                p = fx.run(["convert", src, "-o", out, *flags])
                self.assertEqual(p.returncode, 1, p.stderr.decode())
                self.assertIn("holds 'notes.txt', which no tarmac run writes there: it is not removed",
                              p.stderr.decode())
                self.assertEqual(sorted(os.listdir(staging)), ["notes.txt", "shard-000000.tar"])
                with open(os.path.join(staging, "notes.txt")) as f:
                    self.assertEqual(f.read(), "mine")
        os.remove(os.path.join(staging, "notes.txt"))
        p = fx.run(["convert", src, "-o", out, "--overwrite"])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertEqual(fx.run(["verify", out]).returncode, 0)

    def test_table_inside_the_output_is_refused(self):
        out = self.path("table-out")
        os.makedirs(out)
        src = sample_tar(self.path("t.tar"), "t", 2)
        table = os.path.join(out, "rows.csv")
        with open(table, "w") as f:
            f.write("image,v\nt/000.png,1\nt/001.png,2\n")
        p = fx.run(["convert", src, "--table", table, "-o", out, "--overwrite"])
        self.assertEqual(p.returncode, 1, p.stderr.decode())
        self.assertIn("rows.csv", p.stderr.decode())
        self.assertTrue(os.path.exists(table))

    def test_overwrite_replaces_only_the_files_the_old_dataset_lists(self):
        big = sample_tar(self.path("big.tar"), "big", 9)
        small = sample_tar(self.path("small.tar"), "small", 2, seed=50)
        out = self.path("ow")
        self.assertEqual(fx.run(["convert", big, "-o", out, "--shard-size", "4K"]).returncode, 0)
        old = fx.Dataset(out)
        self.assertGreater(len(old.shards), 2)
        with open(os.path.join(out, "notes.txt"), "w") as f:
            f.write("mine")
        p = fx.run(["convert", small, "-o", out, "--overwrite"])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        new = fx.Dataset(out)
        self.assertEqual(new.keys, ["small/000", "small/001"])
        # Every shard of the old dataset is gone (it listed them), the user's file stays.
        self.assertEqual(sorted(os.listdir(out)),
                         sorted(["labels.safetensors", "manifest.json", "shardlist.json", "notes.txt", *new.shards]))
        self.assertEqual(fx.run(["verify", out]).returncode, 0)

    def test_overwrite_refuses_a_shard_named_file_no_dataset_lists(self):
        src = sample_tar(self.path("src.tar"), "s", 2)
        out = self.path("foreign")
        self.assertEqual(fx.run(["convert", src, "-o", out]).returncode, 0)
        labels = digest(os.path.join(out, "labels.safetensors"))
        # Named like a shard, listed by no manifest: the user's, never removed or replaced.
        foreign = os.path.join(out, "shard-000007.tar")
        shutil.copy(src, foreign)
        mine = digest(foreign)
        p = fx.run(["convert", src, "-o", out, "--overwrite"])
        self.assertEqual(p.returncode, 1, p.stderr.decode())
        self.assertIn("shard-000007.tar", p.stderr.decode())
        self.assertEqual(digest(foreign), mine)
        self.assertEqual(digest(os.path.join(out, "labels.safetensors")), labels)
        # In a directory without a dataset, the same.
        bare = self.path("bare")
        os.makedirs(bare)
        shutil.copy(src, os.path.join(bare, "shard-000000.tar"))
        p = fx.run(["convert", src, "-o", bare, "--overwrite"])
        self.assertEqual(p.returncode, 1, p.stderr.decode())
        self.assertEqual(digest(os.path.join(bare, "shard-000000.tar")), digest(src))

    def test_overwrite_refuses_a_manifest_listing_paths(self):
        src = sample_tar(self.path("m.tar"), "m", 2)
        out = self.path("evil-manifest")
        self.assertEqual(fx.run(["convert", src, "-o", out]).returncode, 0)
        victim = self.path("victim.txt")
        with open(victim, "w") as f:
            f.write("keep")
        path = os.path.join(out, "manifest.json")
        with open(path) as f:
            m = json.load(f)
        m["shards"].append({"name": "../victim.txt", "size": 4, "crc32": "00000000"})
        with open(path, "w") as f:
            json.dump(m, f)
        p = fx.run(["convert", src, "-o", out, "--overwrite"])
        self.assertEqual(p.returncode, 1, p.stderr.decode())
        self.assertIn("../victim.txt", p.stderr.decode())
        self.assertTrue(os.path.exists(victim))


class MergeTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.parts = []
        for i in range(2):
            src = sample_tar(os.path.join(cls.tmp, f"p{i}.tar"), f"p{i}", 4, seed=10 * i)
            out = os.path.join(cls.tmp, f"part{i}")
            assert fx.run(["convert", src, "-o", out, "--shard-size", "4K"]).returncode == 0
            assert len(fx.Dataset(out).shards) > 1
            cls.parts.append(out)

    def linked_part(self, name):
        """A copy of part 1 whose first shard is a symbolic link to a file outside it."""
        part = self.path(name)
        shutil.copytree(self.parts[1], part)
        secret = self.path(name + "-secret.bin")
        with open(secret, "wb") as f:
            f.write(b"outside " * 1000)
        shard = os.path.join(part, fx.Dataset(part).shards[0])
        os.remove(shard)
        os.symlink(secret, shard)
        return part, secret

    def test_a_shard_that_is_a_symbolic_link_is_refused(self):
        part, secret = self.linked_part("linked")
        for flags in ([], ["--copy"]):
            with self.subTest(flags=flags):
                out = self.path("m-link" + "".join(flags))
                p = fx.run(["merge", self.parts[0], part, "-o", out, *flags])
                self.assertEqual(p.returncode, 1, p.stderr.decode())
                self.assertIn("not a regular file", p.stderr.decode())
                self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))
                if os.path.isdir(out):  # nothing of the outside file in the output
                    for root, _, files in os.walk(out):
                        for f in files:
                            q = os.path.join(root, f)
                            self.assertFalse(os.path.islink(q), q)
                            self.assertNotEqual(digest(q), digest(secret), q)

    def test_a_truncated_shard_is_refused(self):
        part = self.path("short")
        shutil.copytree(self.parts[1], part)
        shard = os.path.join(part, fx.Dataset(part).shards[1])
        size = os.path.getsize(shard)
        with open(shard, "r+b") as f:
            f.truncate(size - 2048)
        out = self.path("m-short")
        p = fx.run(["merge", self.parts[0], part, "-o", out, "--copy"])
        self.assertEqual(p.returncode, 1, p.stderr.decode())
        self.assertIn("bytes", p.stderr.decode())
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))

    def test_a_part_with_damaged_labels_refused(self):
        """Issue #35, invariant 2 for merge: a part whose annotation file is not the one its
        manifest records (one byte flipped in its last tensor's values) was merged, exit 0, and
        the merge's new labels_crc32 vouched for the damaged labels. The CRC-32 is computed here
        with zlib."""
        part = self.path("damaged-labels")
        shutil.copytree(self.parts[1], part)
        labels = os.path.join(part, "labels.safetensors")
        fx.flip_bit(labels, 1)
        with open(labels, "rb") as f:
            crc = "%08x" % zlib.crc32(f.read())
        with open(os.path.join(part, "manifest.json")) as f:
            self.assertNotEqual(crc, json.load(f)["labels_crc32"])
        self.assertEqual(fx.run(["verify", part]).returncode, 3)
        out = self.path("m-damaged-labels")
        p = fx.run(["merge", self.parts[0], part, "-o", out])
        self.assertEqual(p.returncode, 1, p.stderr.decode())
        err = p.stderr.decode()
        self.assertIn("part '%s'" % part, err)
        self.assertIn(crc, err)
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))

    def test_a_part_whose_manifest_seal_fails_refused(self):
        """A part whose manifest.json was edited after it was written (its seal fails: verify
        reports it) is refused, naming the part and the seal."""
        part = self.path("resealed")
        shutil.copytree(self.parts[1], part)
        path = os.path.join(part, "manifest.json")
        with open(path) as f:
            text = f.read()
        m = json.loads(text)
        shard = m["shards"][0]
        with open(path, "w") as f:  # a shard's CRC-32 changed by hand, the seal left as it was
            f.write(text.replace('"%s"' % shard["crc32"], '"%08x"' % (int(shard["crc32"], 16) ^ 1), 1))
        self.assertEqual(fx.run(["verify", part]).returncode, 3)
        out = self.path("m-resealed")
        p = fx.run(["merge", self.parts[0], part, "-o", out])
        self.assertEqual(p.returncode, 1, p.stderr.decode())
        err = p.stderr.decode()
        self.assertIn("part '%s'" % part, err)
        self.assertIn("manifest_crc32", err)
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))
        # The intact parts merge, and the merge verifies.
        good = self.path("m-intact")
        self.assertEqual(fx.run(["merge", *self.parts, "-o", good]).returncode, 0)
        v = fx.run(["verify", good])
        self.assertEqual(v.returncode, 0, v.stdout.decode() + v.stderr.decode())

    def dead_merge(self, name, manifest_out):
        """The state a merge killed while publishing leaves (publish moves the shards, the
        shard list, the manifest, then the annotation file): made from a finished merge by
        moving its files back as publishing had not yet moved them."""
        out = self.path(name)
        self.assertEqual(fx.run(["merge", *self.parts, "-o", out]).returncode, 0)
        shards = fx.Dataset(out).shards
        staging = os.path.join(out, ".tarmac-partial")
        os.makedirs(staging)
        back = ["labels.safetensors"] + ([] if manifest_out else ["manifest.json", "shardlist.json"])
        back += shards[len(shards) // 2:] if not manifest_out else []
        for f in back:
            os.rename(os.path.join(out, f), os.path.join(staging, f))
        return out

    def test_a_merge_killed_while_publishing_can_be_run_again(self):
        for manifest_out in (False, True):
            with self.subTest(manifest_out=manifest_out):
                out = self.dead_merge(f"dead-{manifest_out}", manifest_out)
                with open(os.path.join(out, "notes.txt"), "w") as f:
                    f.write("mine")
                p = fx.run(["merge", *self.parts, "-o", out])
                # The user's file is not the dead merge's: the directory is not empty.
                self.assertEqual(p.returncode, 1)
                self.assertIn("not an empty directory", p.stderr.decode())
                os.remove(os.path.join(out, "notes.txt"))
                p = fx.run(["merge", *self.parts, "-o", out])
                self.assertEqual(p.returncode, 0, p.stderr.decode())
                self.assertEqual(fx.run(["verify", out]).returncode, 0)
                ds = fx.Dataset(out)
                self.assertEqual(sorted(ds.keys), sorted(sum((fx.Dataset(q).keys for q in self.parts), [])))


class MergeSplitTest(fx.TmpCase):
    """The parts of one --shard split: a merge short of one, with one twice, out of order, or
    with a part converted otherwise exits 1 with nothing written (it exited 0 with a partial or
    mixed dataset before); all of them in order equal one run."""

    @classmethod
    def build(cls):
        cls.src = sample_tar(os.path.join(cls.tmp, "all.tar"), "s", 9)
        cls.one = os.path.join(cls.tmp, "one")
        assert fx.run(["convert", cls.src, "-o", cls.one, "--size", "16"]).returncode == 0
        cls.part = []
        for i in range(3):
            out = os.path.join(cls.tmp, f"part{i}")
            assert fx.run(["convert", cls.src, "-o", out, "--size", "16", "--shard", f"{i}/3"]).returncode == 0
            cls.part.append(out)
        cls.other = os.path.join(cls.tmp, "part1-other")
        assert fx.run(["convert", cls.src, "-o", cls.other, "--size", "24", "--shard", "1/3"]).returncode == 0
        cls.whole = os.path.join(cls.tmp, "whole")
        assert fx.run(["convert", sample_tar(os.path.join(cls.tmp, "w.tar"), "w", 2), "-o", cls.whole,
                       "--size", "16"]).returncode == 0

    def refused(self, parts, why):
        out = self.path("m-%d" % len(os.listdir(self.tmp)))
        p = fx.run(["merge", *parts, "-o", out])
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 1, err)
        self.assertIn(why, err)
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))
        self.assertFalse(os.path.exists(os.path.join(out, "manifest.json")))
        return err

    def test_incomplete_twice_disordered_or_mixed_splits_refused(self):
        a, b, c = self.part
        err = self.refused([a, b], "the merge lacks part(s) 2/3 of the --shard split of 3")
        self.assertIn("--shard I/3", err)
        self.refused([a, c], "lacks part(s) 1/3")
        self.refused([a, b, b, c], "part 1/3 is given twice")
        err = self.refused([c, a, b], "the parts of a --shard split are merged in their order")
        self.assertIn(f"give them as: tarmac merge {a} {b} {c} -o OUT", err)
        err = self.refused([a, self.other, c], "was converted with other options than part")
        self.assertIn('--size [16,16] in one, [24,24] in the other', err)
        self.refused([a, b, c, self.whole], "is not a part of the --shard split")

    def test_all_parts_in_order_equal_one_run(self):
        out = self.path("m-all")
        p = fx.run(["merge", *self.part, "-o", out])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertEqual(fx.run(["verify", out]).returncode, 0)
        one, merged = fx.Dataset(self.one), fx.Dataset(out)
        self.assertEqual(sorted(merged.keys), one.keys)  # a split by samples interleaves them
        for i, k in enumerate(merged.keys):
            self.assertEqual(merged.blob(i), one.blob(one.keys.index(k)), k)
        # Whole datasets converted otherwise are still joined, with a warning naming the option.
        other_whole = self.path("whole24")
        assert fx.run(["convert", sample_tar(self.path("v.tar"), "v", 2), "-o", other_whole,
                       "--size", "24"]).returncode == 0
        p = fx.run(["merge", self.whole, other_whole, "-o", self.path("m-wholes")])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertIn("--size [16,16] in one, [24,24] in the other", p.stderr.decode())


class MergeKindsTest(fx.TmpCase):
    """A field null in every sample of one part says nothing of its kind (item 9): the merge
    equals one run over all samples in schema and in every label value, whichever part holds
    the nulls and in whichever order the parts are given."""

    def labels_of(self, out):
        ds = fx.Dataset(out)
        order = sorted(range(len(ds.keys)), key=lambda i: ds.keys[i])
        values = {}
        for name, spec in ds.schema.items():
            if name.startswith("__"):
                continue
            valid = ds.t[name + ".valid"] if name + ".valid" in ds.t else None
            rows = []
            for i in order:
                ok = bool(valid[i]) if valid is not None else True
                if not ok:
                    rows.append(None)
                elif name + ".offsets" in ds.t:
                    rows.append(ds.ragged(name, i).tolist())
                else:
                    rows.append(ds.t[name][i].tolist())
            values[name] = rows
        return [ds.keys[i] for i in order], {k: v for k, v in ds.schema.items() if not k.startswith("__")}, values

    def part(self, name, members):
        src = fx.write_tar(self.path(name + ".tar"), members)
        out = self.path(name)
        p = fx.run(["convert", src, "-o", out])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        return src, out

    def test_a_part_with_only_nulls_merges_as_one_run(self):
        img = fx.png(fx.smooth_rgb(16, 12))
        # img2dataset-like: exif (a string) and width (a number) null in every sample of part a.
        a = [(f"a/{i}.png", img) for i in range(3)] + \
            [(f"a/{i}.json", fx.js({"exif": None, "width": None, "tags": None})) for i in range(3)]
        b = [(f"b/{i}.png", img) for i in range(3)] + \
            [(f"b/{i}.json", fx.js({"exif": f"Model {i}", "width": 640 + i, "tags": ["x"] * i}))
             for i in range(3)]
        src_a, part_a = self.part("nulls-a", a)
        src_b, part_b = self.part("nulls-b", b)
        one = self.path("nulls-one")
        p = fx.run(["convert", src_a, src_b, "-o", one])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        expected = self.labels_of(one)
        self.assertEqual(expected[2]["exif"], [None] * 3 + [list(f"Model {i}".encode()) for i in range(3)])
        self.assertEqual(expected[2]["width"], [None] * 3 + [[640], [641], [642]] if
                         expected[1]["width"].get("ragged") else [None] * 3 + [640, 641, 642])
        for order in ((part_a, part_b), (part_b, part_a)):
            with self.subTest(first=os.path.basename(order[0])):
                out = self.path("nulls-merged-" + os.path.basename(order[0]))
                p = fx.run(["merge", *order, "-o", out])
                self.assertEqual(p.returncode, 0, p.stderr.decode())
                self.assertEqual(self.labels_of(out), expected)
                self.assertEqual(fx.run(["verify", out]).returncode, 0)
        # Null in every sample of every part: as one run types it, null everywhere.
        c = [(f"c/{i}.png", img) for i in range(2)] + [(f"c/{i}.json", fx.js({"exif": None, "width": None,
                                                                               "tags": None})) for i in range(2)]
        src_c, part_c = self.part("nulls-c", c)
        one = self.path("nulls-one-ac")
        self.assertEqual(fx.run(["convert", src_a, src_c, "-o", one]).returncode, 0)
        out = self.path("nulls-merged-ac")
        p = fx.run(["merge", part_a, part_c, "-o", out])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertEqual(self.labels_of(out), self.labels_of(one))

    def test_kinds_that_differ_only_by_a_parts_values_merge_as_one_run(self):
        """Item 9, second half: a part whose field holds only empty lists, or only strings,
        has another kind there than one run over all samples gives it (JSON text, or the
        other parts' numbers); merge writes its values as one run does ("[]", quoted strings)."""
        img = fx.png(fx.smooth_rgb(16, 12))
        cases = {
            "empty-vs-json": ([[], [], []], [{"x": 1}, [1, "a"], {"y": [2]}]),
            "strings-vs-json": (["a \"q\" \u00e9", "b\\n", ""], [{"x": 1}, None, ["s", "t"]]),
            "strings-vs-string-lists": (["one", "two", None], [["x", "y"], [], ["z"]]),
            "empty-vs-numbers": ([[], [], None], [[1, 2], [3], [4, 5, 6]]),
            "empty-vs-strings": ([[], [], []], ["a", "b", "c"]),
        }
        for case, (va, vb) in cases.items():
            a = [(f"{case}-a/{i}.png", img) for i in range(3)] + \
                [(f"{case}-a/{i}.json", fx.js({"f": v, "id": i})) for i, v in enumerate(va)]
            b = [(f"{case}-b/{i}.png", img) for i in range(3)] + \
                [(f"{case}-b/{i}.json", fx.js({"f": v, "id": i})) for i, v in enumerate(vb)]
            src_a, part_a = self.part(case + "-a", a)
            src_b, part_b = self.part(case + "-b", b)
            for order in ((src_a, src_b), (src_b, src_a)):
                parts = [part_a, part_b] if order[0] == src_a else [part_b, part_a]
                with self.subTest(case=case, first=os.path.basename(parts[0])):
                    one = self.path(f"{case}-one-{os.path.basename(parts[0])}")
                    p = fx.run(["convert", *order, "-o", one])
                    self.assertEqual(p.returncode, 0, p.stderr.decode())
                    out = self.path(f"{case}-merged-{os.path.basename(parts[0])}")
                    p = fx.run(["merge", *parts, "-o", out])
                    self.assertEqual(p.returncode, 0, p.stderr.decode())
                    self.assertEqual(self.labels_of(out), self.labels_of(one))
                    self.assertEqual(fx.run(["verify", out]).returncode, 0)

    def test_random_splits_merge_as_one_run(self):
        """Property: samples whose fields are null, absent, or of one type each (a number, a
        string, a list of numbers of any length; or a string, a list of strings or an empty list,
        whose kind then differs by part), split at random into parts by input, merge into what
        one run over all inputs writes. Fixed seed; numbers in one part beside other JSON
        values in another are not generated: merge refuses those."""
        rng = random.Random(25)
        img = fx.png(fx.smooth_rgb(8, 8))
        for trial in range(6):
            n = rng.randint(4, 14)
            null_rate = rng.choice([0.0, 0.3, 0.8])

            def value(kind, i):
                if rng.random() < null_rate:
                    return rng.choice([None, "absent"])
                if kind == "num":
                    return i * 0.5 if rng.random() < 0.5 else i
                if kind == "str":
                    return "s%d" % i * rng.randint(0, 3)
                if kind == "text":  # a string, strings or []: JSON text in some parts only
                    return rng.choice(["t%d" % i, ["u", "v%d" % i], []])
                return [i] * rng.randint(0, 3)

            samples = []
            for i in range(n):
                labels = {}
                for field, kind in (("n", "num"), ("s", "str"), ("l", "list"), ("t", "text")):
                    v = value(kind, i)
                    if v != "absent":
                        labels[field] = v
                labels["id"] = i  # every sample has a label file
                samples.append([(f"k{trial}/{i:02d}.png", img), (f"k{trial}/{i:02d}.json", fx.js(labels))])
            cuts = sorted(rng.sample(range(1, n), rng.randint(1, min(3, n - 1))))
            groups = [samples[a:b] for a, b in zip([0] + cuts, cuts + [n])]
            srcs, parts = [], []
            for g, members in enumerate(groups):
                src, out = self.part(f"prop{trial}-{g}", sum(members, []))
                srcs.append(src)
                parts.append(out)
            one = self.path(f"prop{trial}-one")
            p = fx.run(["convert", *srcs, "-o", one])
            self.assertEqual(p.returncode, 0, p.stderr.decode())
            out = self.path(f"prop{trial}-merged")
            p = fx.run(["merge", *parts, "-o", out])
            with self.subTest(trial=trial, cuts=cuts, null_rate=null_rate):
                self.assertEqual(p.returncode, 0, p.stderr.decode())
                self.assertEqual(self.labels_of(out), self.labels_of(one))


class MergedManifestTest(fx.TmpCase):
    """The merged manifest says what one run's says (item 10): every count (the shard count
    aside: merge keeps the parts' shards), each input, ignored member and skipped entry once
    although every part split by samples read them all, and the table's provenance."""

    def manifest(self, out):
        with open(os.path.join(out, "manifest.json")) as f:
            return json.load(f)

    def same_as_one_run(self, one, merged):
        a, b = self.manifest(one), self.manifest(merged)
        ca, cb = dict(a["counts"]), dict(b["counts"])
        ca.pop("shards"), cb.pop("shards")
        self.assertEqual(cb, ca)
        for k in ("inputs", "ignored", "skipped", "duplicates"):
            self.assertEqual(sorted(json.dumps(e, sort_keys=True) for e in b[k]),
                             sorted(json.dumps(e, sort_keys=True) for e in a[k]), k)
        self.assertEqual(b.get("table"), a.get("table"))
        self.assertEqual(fx.run(["verify", merged]).returncode, 0)

    def split_and_merge(self, name, args, n):
        parts = []
        for i in range(n):
            part = self.path(f"{name}-part{i}")
            p = fx.run(["convert", *args, "-o", part, "--shard", f"{i}/{n}", "--allow-empty"])
            self.assertEqual(p.returncode, 0, p.stderr.decode())
            parts.append(part)
        out = self.path(f"{name}-merged")
        p = fx.run(["merge", *parts, "-o", out])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        return out

    def test_counts_lists_and_table_as_one_run(self):
        img = fx.png(fx.smooth_rgb(8, 8))
        a = fx.write_tar(self.path("a.tar"), [(f"a/{i}.png", img) for i in range(6)] +
                         [(".hidden", b"h"), ("noext", b"x")] + [(f"a/{i}.json", fx.js({"v": i})) for i in range(6)])
        b = fx.write_tar(self.path("b.tar"), [(f"b/{i}.png", img) for i in range(4)] + [("__MACOSX/x", b"x")])
        for name, inputs, n in (("by-inputs", [a, b], 2), ("by-samples", [a], 3)):
            with self.subTest(name):
                one = self.path(name + "-one")
                self.assertEqual(fx.run(["convert", *inputs, "-o", one]).returncode, 0)
                self.assertGreater(self.manifest(one)["counts"]["ignored_members"], 0)
                self.same_as_one_run(one, self.split_and_merge(name, inputs, n))
        # A table naming some of the images (the rest are unused_images), split by samples.
        table = self.path("rows.jsonl")
        with open(table, "w") as f:
            for i in range(5):
                f.write(json.dumps({"image_path": f"a/{i}.png", "w": i}) + "\n")
        args = [a, "--table", table]
        one = self.path("table-one")
        p = fx.run(["convert", *args, "-o", one])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertGreater(self.manifest(one)["counts"]["unused_images"], 0)
        self.assertIn("table", self.manifest(one))
        self.same_as_one_run(one, self.split_and_merge("table", args, 2))


class StopTest(fx.TmpCase):
    """SIGTERM ends a run blocked where the run cannot poll for it (item 4): within the
    watchdog's 10 s, with the signal's status and a message saying what is kept."""

    def stop(self, p):
        time.sleep(2)
        self.assertIsNone(p.poll(), "the run ended before the signal")
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            self.fail("still running 20 s after SIGTERM")
        took = time.monotonic() - t0
        self.assertEqual(p.returncode, 128 + signal.SIGTERM)
        self.assertLess(took, 13)
        err = p.stderr.read().decode()
        p.stderr.close()
        return took, err

    def test_sigterm_ends_a_run_whose_standard_input_stalls(self):
        src = sample_tar(self.path("stall.tar"), "s", 60)
        with open(src, "rb") as f:
            head = f.read(os.path.getsize(src) // 2)
        out = self.path("stall-out")
        p = subprocess.Popen([fx.TARMAC, "convert", "-", "-o", out], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        p.stdin.write(head)  # and nothing more: the pipe stays open, as a stalled download's
        p.stdin.flush()
        _, err = self.stop(p)
        p.stdin.close()
        self.assertIn("stopped by SIGTERM", err)
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))

    def test_sigterm_ends_a_run_waiting_for_a_table_fifo_without_writer(self):
        src = sample_tar(self.path("fifo.tar"), "f", 2)
        fifo = self.path("rows.csv")
        os.mkfifo(fifo)
        p = subprocess.Popen([fx.TARMAC, "convert", src, "--table", fifo, "-o", self.path("fifo-out")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, err = self.stop(p)
        self.assertIn("did not stop in time", err)


if __name__ == "__main__":
    unittest.main()
