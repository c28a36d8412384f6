"""`tarmac convert --resume`: a run killed after a known checkpoint goes on from there and ends
with the bytes of an uninterrupted run, every skip recorded once; a resume with other options
or changed inputs is refused and keeps the checkpoint; edge cases (nothing to resume, a
finished dataset, stdin) behave as docs/cli.md says.

The kill -9 test at random points lives in tests/reliability/test_kill.py; here the kill comes
at a chosen checkpoint, so the assertions can be exact.
"""
import filecmp
import json
import os
import re
import shutil
import signal
import subprocess
import unittest
import zipfile
import zlib

import fixtures as fx

SAMPLES = 240
BAD = {37, 100, 101, 199}  # corrupt JPEGs: skipped under --on-error skip


kill_at_checkpoint = fx.kill_at_checkpoint  # test_tables.py calls it from here


def label_5_becomes_6(path):
    """Changes one digit of sample 5's label in place (the id 5 becomes 6), same size."""
    with open(path, "r+b") as f:
        data = f.read()
        at = data.index(b'{"id": 5, ')
        f.seek(at + 7)
        f.write(b"6")

class ResumeTest(fx.TmpCase):
    @classmethod
    def build(cls):
        jpgs = [fx.jpg(fx.smooth_rgb(96, 64, seed=s), quality=90) for s in range(5)]
        members = []
        for i in range(SAMPLES):
            key = "s/%04d" % i
            data = jpgs[i % 5][:200] if i in BAD else jpgs[i % 5]
            members.append((key + ".jpg", data))
            members.append((key + ".json", fx.js({"id": i, "pt": [[i % 90, 3.5]]})))
        cls.archive = fx.write_tar(os.path.join(cls.tmp, "in.tar"), members)
        cls.ref = os.path.join(cls.tmp, "ref")
        p = fx.run(cls.args(cls.ref))
        assert p.returncode == 0, p.stderr

    @classmethod
    def args(cls, out, *extra):
        return ["convert", cls.archive, "-o", out, "--crop", "center", "--size", "48",
                "--points", "pt", "--shard-size", "64K", "--on-error", "skip", "-j", "2", *extra]

    def files(self, out):
        return sorted(n for n in os.listdir(out) if n == "labels.safetensors" or n.startswith("shard-"))

    def assert_same_as_ref(self, out):
        names = self.files(out)
        self.assertEqual(names, self.files(self.ref))
        _, mismatch, errors = filecmp.cmpfiles(out, self.ref, names, shallow=False)
        self.assertEqual((mismatch, errors), ([], []))

    def manifest(self, out):
        with open(os.path.join(out, "manifest.json")) as f:
            return json.load(f)

    def kill_after(self, out, entries):
        """Runs with a checkpoint after every sample and SIGKILLs once one records `entries`."""
        code, cp = kill_at_checkpoint(self.args(out), out, entries)
        self.assertEqual(code, -signal.SIGKILL, "finished before the kill")
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))
        return cp

    def test_resume_after_kill_equals_uninterrupted_run(self):
        out = self.path("killed")
        cp = self.kill_after(out, 150)
        done = cp["writer"]["samples"]
        self.assertGreaterEqual(cp["entries"], 150)
        p = fx.run(self.args(out, "--resume"))
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assertIn("resumed an interrupted run: %d sample(s)" % done, p.stderr.decode())
        self.assert_same_as_ref(out)
        self.assertNotIn(".tarmac-partial", os.listdir(out))
        v = fx.run(["verify", out, "--decode"])  # the resumed run's manifest is sealed and true
        self.assertEqual(v.returncode, 0, v.stderr.decode(errors="replace"))
        m, ref = self.manifest(out), self.manifest(self.ref)
        self.assertEqual(m["resumed"], {"entries": cp["entries"], "samples": done})
        # Each bad sample recorded once, whether it came before or after the checkpoint.
        self.assertEqual(m["skipped"], ref["skipped"])
        self.assertEqual(sorted(s["sample"] for s in m["skipped"]), ["s/%04d" % i for i in sorted(BAD)])
        self.assertEqual(m["counts"], ref["counts"])
        self.assertEqual(m["counts"]["samples"], SAMPLES - len(BAD))
        self.assertEqual(m["shards"], ref["shards"])
        self.assertEqual(m["inputs"], ref["inputs"])  # the input checksum covers the whole input
        # The shard list's counts (wids) carried over the checkpoint: the reference's.
        with open(os.path.join(out, "shardlist.json")) as f, open(os.path.join(self.ref, "shardlist.json")) as g:
            self.assertEqual(json.load(f)["shardlist"], json.load(g)["shardlist"])
        # The image of a sample converted after the resume is the same as the reference's.
        ds, rds = fx.Dataset(out), fx.Dataset(self.ref)
        self.assertEqual(ds.keys, rds.keys)
        self.assertEqual(ds.blob(SAMPLES - len(BAD) - 1), rds.blob(SAMPLES - len(BAD) - 1))

    def test_an_edited_or_damaged_checkpoint_is_refused(self):
        """checkpoint.json is sealed as manifest.json is (format.md): one changed after the run
        wrote it is refused, as is a staged shard that no longer holds what it covered; one
        without a seal (an earlier tarmac's) still resumes to the uninterrupted run's bytes."""
        out = self.path("sealed")
        self.kill_after(out, 120)
        staging = os.path.join(out, ".tarmac-partial")
        with open(os.path.join(staging, "checkpoint.json"), "rb") as f:
            text = f.read()
        m = re.search(rb'"checkpoint_crc32":"([0-9a-f]{8})"}$', text)
        self.assertIsNotNone(m, text[-80:])
        zeroed = text[:m.start(1)] + b"00000000" + text[m.end(1):]
        self.assertEqual(int(m.group(1), 16), zlib.crc32(zeroed))
        cp = json.loads(text)

        def attempt(name, change):
            d = self.path(name)
            shutil.copytree(out, d)
            change(os.path.join(d, ".tarmac-partial"))
            p = fx.run(self.args(d, "--resume"))
            self.assertTrue(os.path.exists(os.path.join(d, ".tarmac-partial", "checkpoint.json")))
            self.assertFalse(os.path.exists(os.path.join(d, "labels.safetensors")))
            return p

        def edit(staging):  # one count changed by hand, the JSON still valid
            path = os.path.join(staging, "checkpoint.json")
            with open(path, "rb") as f:
                t = f.read()
            n = cp["writer"]["blob_bytes"]
            t = t.replace(b'"blob_bytes":%d,' % n, b'"blob_bytes":%d,' % (n + 1), 1)
            with open(path, "wb") as f:
                f.write(t)

        p = attempt("edited", edit)
        self.assertEqual(p.returncode, 1)
        self.assertIn("checkpoint.json': it was changed or damaged since the run wrote it", p.stderr.decode())

        def unsealed(staging):  # as tarmac wrote it before the seal: version 1, unsealed
            path = os.path.join(staging, "checkpoint.json")
            with open(path) as f:
                c = json.load(f)
            del c["checkpoint_crc32"]
            self.assertEqual(c["tarmac_checkpoint"], 2)
            c["tarmac_checkpoint"] = 1  # counts a list, the schema JSON text (format/checkpoint.h)
            c["counts"] = [c["counts"][k] for k in ("skipped_samples", "ignored_members", "duplicates",
                                                    "no_instance_samples", "duplicate_content_samples")]
            c["writer"]["schema"] = json.dumps(c["writer"]["schema"])
            with open(path, "w") as f:
                json.dump(c, f, separators=(",", ":"))

        w = cp["writer"]
        if w["open_shard"] is not None:
            def flip(staging):
                unsealed(staging)  # the shard's own check, not the seal's
                with open(os.path.join(staging, w["shards"][-1]), "r+b") as f:
                    f.seek(w["open_shard"]["size"] // 2)
                    b = f.read(1)
                    f.seek(-1, 1)
                    f.write(bytes([b[0] ^ 1]))
            p = attempt("flipped", flip)
            self.assertEqual(p.returncode, 1)
            self.assertRegex(p.stderr.decode(), r"cannot resume writing '.*shard-\d+\.tar': its first "
                             r"\d+ bytes have CRC-32 [0-9a-f]{8}, not [0-9a-f]{8} as its checkpoint recorded")
        closed = [n for n in w["shards"][:len(w["shard_sizes"])]
                  if os.path.exists(os.path.join(staging, n))]
        if closed:
            def grow(staging):
                unsealed(staging)
                with open(os.path.join(staging, closed[0]), "ab") as f:
                    f.write(b"\0" * 512)
            p = attempt("grown", grow)
            self.assertEqual(p.returncode, 1)
            self.assertIn("holds %d bytes, the checkpoint recorded %d" % (w["shard_sizes"][0] + 512, w["shard_sizes"][0]),
                          p.stderr.decode())
        self.assertTrue(w["open_shard"] is not None or closed)

        old = self.path("unsealed")
        shutil.copytree(out, old)
        unsealed(os.path.join(old, ".tarmac-partial"))
        p = fx.run(self.args(old, "--resume"))
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assert_same_as_ref(old)
        self.assertEqual(fx.run(["verify", old]).returncode, 0)

    def test_a_checkpoint_of_the_previous_format_resumes(self):
        """The checkpoint an earlier tarmac left (tests/data/checkpoint_v1, its README says how it
        was made: format version 1, counts as a list, the schema as text) is resumed to the
        bytes of an uninterrupted run."""
        fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "checkpoint_v1")
        work = self.path("checkpoint_v1")
        shutil.copytree(fixture, work)
        os.utime(os.path.join(work, "in.tar"), ns=(1700000000 * 10**9, 1700000000 * 10**9))
        with open(os.path.join(work, "out", ".tarmac-partial", "checkpoint.json")) as f:
            self.assertEqual(json.load(f)["tarmac_checkpoint"], 1)
        args = ["convert", "in.tar", "--crop", "center", "--size", "16", "--points", "pt",
                "--shard-size", "4K", "-j", "1", "--on-error", "skip"]
        ref = subprocess.run([fx.TARMAC, *args, "-o", "ref"], cwd=work, capture_output=True)
        self.assertEqual(ref.returncode, 0, ref.stderr.decode())
        p = subprocess.run([fx.TARMAC, *args, "-o", "out", "--resume"], cwd=work, capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertIn("7 sample(s) were already converted", p.stderr.decode())
        out, ref = os.path.join(work, "out"), os.path.join(work, "ref")
        names = self.files(ref)
        self.assertEqual(names, self.files(out))
        self.assertGreater(len(names), 4)  # the checkpoint's 3 closed shards and more
        _, mismatch, errors = filecmp.cmpfiles(out, ref, names, shallow=False)
        self.assertEqual((mismatch, errors), ([], []))
        m = self.manifest(out)
        self.assertEqual((m["counts"]["samples"], [s["sample"] for s in m["skipped"]]), (11, ["s/07"]))
        self.assertEqual(fx.run(["verify", out]).returncode, 0)

    def test_resume_twice_in_a_row(self):
        out = self.path("killed-twice")
        first = self.kill_after(out, 60)
        # Resume, and kill the resumed run further on.
        _, cp = kill_at_checkpoint(self.args(out, "--resume"), out, 180)
        self.assertGreater(cp["entries"], first["entries"])
        p = fx.run(self.args(out, "--resume"))
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assert_same_as_ref(out)
        self.assertEqual(self.manifest(out)["skipped"], self.manifest(self.ref)["skipped"])

    def test_resume_with_other_options_is_refused_and_keeps_the_checkpoint(self):
        out = self.path("other-options")
        self.kill_after(out, 100)
        args = self.args(out, "--resume")
        args[args.index("48")] = "64"  # --size 64
        p = fx.run(args)
        self.assertEqual(p.returncode, 1)
        err = p.stderr.decode()
        self.assertIn("cannot resume", err)
        self.assertIn("--size", err)
        self.assertTrue(os.path.exists(os.path.join(out, ".tarmac-partial", "checkpoint.json")))
        # -j is not an option that changes the output: resuming with another count is fine.
        args = self.args(out, "--resume")
        args[args.index("-j") + 1] = "1"
        p = fx.run(args)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assert_same_as_ref(out)

    def test_resume_with_a_changed_input_is_refused(self):
        archive = self.path("changing.tar")
        shutil.copy(self.archive, archive)
        out = self.path("changed-input")
        args = lambda *extra: [a if a != self.archive else archive for a in self.args(out, *extra)]
        _, cp = kill_at_checkpoint(args(), out)
        self.assertIsNotNone(cp, "killed before the first checkpoint")
        with open(archive, "ab") as f:
            f.write(b"\0" * 1024)  # two more zero blocks: the same samples, another file
        p = fx.run(args("--resume"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("is not the same file", p.stderr.decode())
        # Plainly: refused, the converted work kept, both ways on named.
        p = fx.run(args())
        self.assertEqual(p.returncode, 1)
        self.assertIn("holds an interrupted conversion", p.stderr.decode())
        self.assertIn("--resume", p.stderr.decode())
        self.assertIn("--overwrite", p.stderr.decode())
        self.assertTrue(os.path.exists(os.path.join(out, ".tarmac-partial", "checkpoint.json")))
        # With --overwrite: converted again from the start.
        p = fx.run(args("--overwrite"))
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assert_same_as_ref(out)

    # ---- inputs rewritten in place, their size and modification time kept (issue #25, 13)

    def rewrite_in_place(self, path, write):
        """Calls write(path) to replace the file's bytes, then puts its times back: what
        rsync -a, tar -x and cp -p leave. Asserts the size is the same."""
        st = os.stat(path)
        write(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        after = os.stat(path)
        self.assertEqual((after.st_size, after.st_mtime_ns), (st.st_size, st.st_mtime_ns))

    def members(self, changed=None, pad=0):
        """The reference's members; `changed`: {sample number: its new id}, as many digits.
        `pad`: bytes of a member no sample uses (ignored), to make the input longer."""
        changed = changed or {}
        jpgs = [fx.jpg(fx.smooth_rgb(96, 64, seed=s), quality=90) for s in range(5)]
        out = []
        for i in range(SAMPLES):
            key = "s/%04d" % i
            out.append((key + ".jpg", jpgs[i % 5][:200] if i in BAD else jpgs[i % 5]))
            out.append((key + ".json", fx.js({"id": changed.get(i, i), "pt": [[i % 90, 3.5]]})))
            if pad:
                out.append((key + ".pad", bytes(pad)))
        return out

    def long_tar(self, name):
        """A tar of ~4 MB (the reader reads 1 MiB at a time), the samples spread over it."""
        return fx.write_tar(self.path(name), self.members(pad=12 << 10))

    def kill_past(self, inp, out, *extra, entries=150, sample=5):
        """Kills a run over `inp` (a checkpoint after every sample) once a checkpoint records
        `entries` entries, past `sample`. Returns (the command's arguments, the checkpoint)."""
        args = lambda *more: ["convert", inp, "-o", out, "--size", "48", "--on-error", "skip",
                              "-j", "2", *extra, *more]
        code, cp = kill_at_checkpoint(args(), out, entries)
        self.assertEqual(code, -signal.SIGKILL, "finished before the kill")
        self.assertGreater(cp["entries"], sample)
        return args, cp

    def refused_then_overwritten(self, args, inp, out, sample, new_id):
        """--resume is refused, naming the input and --overwrite, the checkpoint kept; then
        --overwrite converts the new bytes: `sample`'s id is `new_id`."""
        p = fx.run(args("--resume"))
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("input '%s' changed since the checkpoint" % inp, err)
        self.assertIn("--overwrite", err)
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))
        self.assertTrue(os.path.exists(os.path.join(out, ".tarmac-partial", "checkpoint.json")))
        # Refused again, the same way: nothing was written over the checkpoint.
        p = fx.run(args("--resume"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("changed since the checkpoint", p.stderr.decode(errors="replace"))
        p = fx.run(args("--overwrite"))
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        ds = fx.Dataset(out)
        k = ds.keys.index("s/%04d" % sample)
        self.assertEqual(int(ds.t["id"][k]), new_id)

    def test_resume_over_a_tar_changed_in_place_is_refused(self):
        tar = self.path("in-place.tar")
        shutil.copy(self.archive, tar)
        out = self.path("in-place")
        args, _ = self.kill_past(tar, out)

        self.rewrite_in_place(tar, label_5_becomes_6)
        self.refused_then_overwritten(args, tar, out, 5, 6)

    def test_resume_over_a_tar_changed_in_place_inside_the_input(self):
        # A small group window releases samples (and checkpoints them) while the input is still
        # being read: the position recorded lies inside the input.
        tar = self.long_tar("in-place-window.tar")
        out = self.path("in-place-window")
        args, cp = self.kill_past(tar, out, "--group-window", "16K", entries=40)
        self.assertLess(cp["entries"], 120)  # well before the input's end

        self.rewrite_in_place(tar, label_5_becomes_6)
        self.refused_then_overwritten(args, tar, out, 5, 6)

    def test_resume_over_a_tar_changed_after_the_checkpoint_goes_on(self):
        # Bytes the interrupted run never read may change: the resumed run converts them as they
        # are now, and equals a fresh run over the new file.
        tar = self.long_tar("later.tar")
        out, ref = self.path("later"), self.path("later-ref")
        args, cp = self.kill_past(tar, out, "--group-window", "16K", entries=20)
        self.assertLess(cp["entries"], 120)
        last = SAMPLES - 1

        def write(path):
            with open(path, "r+b") as f:
                data = f.read()
                at = data.index(b'{"id": %d, ' % last)
                f.seek(at + 7)
                f.write(b"%d" % (last - 100))
        self.rewrite_in_place(tar, write)
        p = fx.run(args("--resume"))
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assertIn("resumed an interrupted run", p.stderr.decode())
        ds = fx.Dataset(out)
        self.assertEqual(int(ds.t["id"][ds.keys.index("s/%04d" % last)]), last - 100)
        p = fx.run(["convert", tar, "-o", ref, "--size", "48", "--on-error", "skip", "--group-window", "16K"])
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assertTrue(filecmp.cmp(os.path.join(out, "labels.safetensors"),
                                    os.path.join(ref, "labels.safetensors"), shallow=False))

    def test_resume_over_an_earlier_tar_changed_in_place_is_refused(self):
        # The checkpoint lies in the second input; the first, read to its end, changed.
        first, second = self.path("first.tar"), self.path("second.tar")
        members = self.members()
        fx.write_tar(first, members[:200])
        fx.write_tar(second, members[200:])
        out = self.path("earlier")
        args = lambda *more: ["convert", first, second, "-o", out, "--size", "48",
                              "--on-error", "skip", "-j", "2", *more]
        code, cp = kill_at_checkpoint(args(), out, 110)
        self.assertEqual(code, -signal.SIGKILL, "finished before the kill")
        self.assertGreaterEqual(cp["entries"], 110)
        self.rewrite_in_place(first, lambda p: fx.write_tar(p, self.members({5: 6})[:200]))
        self.refused_then_overwritten(args, first, out, 5, 6)
        # Unchanged inputs resume as before.
        out2 = self.path("earlier-unchanged")
        args2 = lambda *more: [a if a != out else out2 for a in args(*more)]
        code, _ = kill_at_checkpoint(args2(), out2, 110)
        self.assertEqual(code, -signal.SIGKILL, "finished before the kill")
        p = fx.run(args2("--resume"))
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assertIn("resumed an interrupted run", p.stderr.decode())

    def test_resume_over_a_folder_changed_in_place_is_refused(self):
        root = fx.write_tree(self.path("tree"), self.members())
        out = self.path("tree-out")
        args, _ = self.kill_past(root, out)
        label = os.path.join(root, "s", "0005.json")

        def write(path):
            with open(path, "wb") as f:
                f.write(fx.js({"id": 6, "pt": [[5, 3.5]]}))
        self.rewrite_in_place(label, write)
        self.refused_then_overwritten(args, root, out, 5, 6)

    def test_resume_over_a_folder_unchanged_equals_an_uninterrupted_run(self):
        root = fx.write_tree(self.path("tree-same"), self.members())
        out, ref = self.path("tree-same-out"), self.path("tree-same-ref")
        args, _ = self.kill_past(root, out)
        p = fx.run(args("--resume"))
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assertIn("resumed an interrupted run", p.stderr.decode())
        p = fx.run(["convert", root, "-o", ref, "--size", "48", "--on-error", "skip"])
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assertTrue(filecmp.cmp(os.path.join(out, "labels.safetensors"),
                                    os.path.join(ref, "labels.safetensors"), shallow=False))

    def test_resume_over_a_zip_changed_in_place_is_refused(self):
        def write_zip(changed):
            def write(path):
                with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
                    for name, data in self.members(changed):
                        z.writestr(zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0)), data)
            return write
        zp = self.path("in-place.zip")
        write_zip({})(zp)
        out = self.path("zip-out")
        args, _ = self.kill_past(zp, out)
        self.rewrite_in_place(zp, write_zip({5: 6}))
        self.refused_then_overwritten(args, zp, out, 5, 6)

    def test_a_checkpoint_of_no_sample_does_not_block_a_plain_run(self):
        # Issue #25, 16a: a run that fails at its first sample (--on-error fail) checkpoints the
        # samples before it: none. Run again plainly once the sample is fixed, it starts over
        # rather than being refused as "an interrupted conversion: 0 sample(s) converted".
        jpg = fx.jpg(fx.smooth_rgb(64, 48), quality=90)
        good = [m for i in range(30) for m in (("z/%02d.jpg" % i, jpg), ("z/%02d.json" % i, fx.js({"i": i})))]
        tar = self.path("first-bad.tar")
        fx.write_tar(tar, [("z/00.jpg", jpg[:200])] + good[1:])
        out = self.path("first-bad")
        args = ["convert", tar, "-o", out, "--size", "32", "--on-error", "fail"]
        p = fx.run(args)
        self.assertEqual(p.returncode, 1)
        self.assertIn("z/00", p.stderr.decode(errors="replace"))
        with open(os.path.join(out, ".tarmac-partial", "checkpoint.json")) as f:
            self.assertEqual(json.load(f)["writer"]["samples"], 0)
        fx.write_tar(tar, good)
        p = fx.run(args)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assertNotIn("resumed", self.manifest(out))
        self.assertEqual(fx.Dataset(out).keys, ["z/%02d" % i for i in range(30)])

    def test_the_rate_of_a_resumed_run_counts_only_its_own_samples(self):
        # Issue #25, 16e: the samples the interrupted run had converted inflated the rate.
        out = self.path("rate")
        done = self.kill_after(out, 150)["writer"]["samples"]
        p = subprocess.run([fx.TARMAC, *self.args(out, "--resume", "--json")], capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        j = json.loads(p.stdout)
        self.assertEqual((j["samples"], j["resumed_samples"]), (SAMPLES - len(BAD), done))
        self.assertGreater(j["seconds"], 0)
        self.assertAlmostEqual(j["samples_per_second"] * j["seconds"], SAMPLES - len(BAD) - done, places=6)

    def test_resume_without_an_interrupted_run_converts_from_the_start(self):
        out = self.path("fresh")
        p = fx.run(self.args(out, "--resume"))
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assert_same_as_ref(out)
        self.assertNotIn("resumed", self.manifest(out))
        # And again: the dataset is complete, so there is nothing to do (exit 0, nothing changed).
        before = os.stat(os.path.join(out, "labels.safetensors")).st_mtime_ns
        p = fx.run(self.args(out, "--resume"))
        self.assertEqual(p.returncode, 0)
        self.assertIn("nothing to resume", p.stderr.decode())
        self.assertEqual(os.stat(os.path.join(out, "labels.safetensors")).st_mtime_ns, before)

    def test_resume_complete_dataset_other_inputs_refused(self):
        """Issue #35 item 8: --resume over a complete dataset made from other inputs said "nothing
        to resume" and exited 0, as if that dataset were this run's result. The oracle is the
        manifest's own record of its inputs, read here."""
        out = self.path("complete-other-inputs")
        shutil.copytree(self.ref, out)
        other = self.path("other-input.tar")
        shutil.copy(self.archive, other)
        self.assertEqual([i["path"] for i in self.manifest(out)["inputs"]], [self.archive])
        args = self.args(out, "--resume")
        args[args.index(self.archive)] = other
        p = fx.run(args)
        self.assertEqual(p.returncode, 1, p.stderr.decode(errors="replace"))
        err = p.stderr.decode()
        self.assertIn("cannot resume", err)
        self.assertIn("not this run's", err)
        self.assertIn(other, err)
        self.assertNotIn("nothing to resume", err)
        # Two inputs where it had one.
        p = fx.run(self.args(out, "--resume") + [self.archive])
        self.assertEqual(p.returncode, 1, p.stderr.decode(errors="replace"))
        self.assertIn("input(s)", p.stderr.decode())
        # Nothing was touched: the dataset is the reference's, and verifies.
        self.assert_same_as_ref(out)
        v = fx.run(["verify", out])
        self.assertEqual(v.returncode, 0, v.stderr.decode(errors="replace"))

    def test_resume_complete_dataset_other_options_refused(self):
        """Issue #35 item 8, options: the manifest records the output options (--size 48); a
        --resume with --size 64 over it is refused naming the option, not "nothing to resume"."""
        out = self.path("complete-other-options")
        shutil.copytree(self.ref, out)
        self.assertEqual(self.manifest(out)["output_options"]["--size"], [48, 48])
        args = self.args(out, "--resume")
        args[args.index("48")] = "64"
        p = fx.run(args)
        self.assertEqual(p.returncode, 1, p.stderr.decode(errors="replace"))
        err = p.stderr.decode()
        self.assertIn("cannot resume", err)
        self.assertIn("--size", err)
        self.assertIn("[64,64]", err)
        # What does not change the output may differ (-j), and the same run is still "nothing
        # to resume".
        args = self.args(out, "--resume")
        args[args.index("-j") + 1] = "1"
        p = fx.run(args)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assertIn("nothing to resume", p.stderr.decode())
        self.assert_same_as_ref(out)
        v = fx.run(["verify", out])
        self.assertEqual(v.returncode, 0, v.stderr.decode(errors="replace"))

    def test_resume_from_stdin_is_refused(self):
        with open(self.archive, "rb") as f:
            data = f.read()
        p = fx.run(["convert", "-", "-o", self.path("stdin"), "--resume"], stdin=data)
        self.assertEqual(p.returncode, 2)  # the options are wrong: a usage error (the library's)
        self.assertIn("standard input", p.stderr.decode())

    def test_duplicates_are_listed_once_across_a_resume(self):
        jpg = fx.jpg(fx.smooth_rgb(64, 48), quality=90)
        a = fx.write_tar(self.path("dup-a.tar"), [m for i in range(120) for m in
                         (("d/%04d.jpg" % i, jpg), ("d/%04d.json" % i, fx.js({"i": i, "from": "a"})))])
        b = fx.write_tar(self.path("dup-b.tar"), [m for i in range(60, 180) for m in
                         (("d/%04d.jpg" % i, jpg), ("d/%04d.json" % i, fx.js({"i": i, "from": "b"})))])
        ref, out = self.path("dup-ref"), self.path("dup-killed")
        args = lambda o, *extra: ["convert", a, b, "-o", o, "--on-duplicate", "first", "--size", "32",
                                  "-j", "2", *extra]
        self.assertEqual(fx.run(args(ref)).returncode, 0)
        kill_at_checkpoint(args(out), out, 150)  # past some of b's duplicates
        p = fx.run(args(out, "--resume"))
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        m, rm = self.manifest(out), self.manifest(ref)
        self.assertIn("resumed", m)
        self.assertEqual(m["duplicates"], rm["duplicates"])
        self.assertEqual(sorted(d["sample"] for d in m["duplicates"]), ["d/%04d" % i for i in range(60, 120)])
        self.assertEqual(m["counts"], rm["counts"])
        self.assertTrue(filecmp.cmp(os.path.join(out, "labels.safetensors"),
                                    os.path.join(ref, "labels.safetensors"), shallow=False))

    def test_labels_only_run_resumes(self):
        members = [("l/%04d.json" % i, fx.js({"v": [i, i * 0.5], "name": "n%d" % i})) for i in range(400)]
        archive = fx.write_tar(self.path("labels.tar"), members)
        ref, out = self.path("labels-ref"), self.path("labels-killed")
        args = lambda o, *extra: ["convert", archive, "-o", o, "--no-images", "-j", "2", *extra]
        self.assertEqual(fx.run(args(ref)).returncode, 0)
        kill_at_checkpoint(args(out), out)
        p = fx.run(args(out, "--resume"))
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assertTrue(filecmp.cmp(os.path.join(out, "labels.safetensors"),
                                    os.path.join(ref, "labels.safetensors"), shallow=False))
        ds = fx.Dataset(out)
        self.assertIn("resumed", ds.manifest)
        self.assertEqual(ds.keys, ["l/%04d" % i for i in range(400)])
        self.assertEqual(ds.t["v"][399].tolist(), [399, 199.5])


if __name__ == "__main__":
    unittest.main()
