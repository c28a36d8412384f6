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
import shutil
import signal
import subprocess
import time
import unittest

import fixtures as fx

SAMPLES = 240
BAD = {37, 100, 101, 199}  # corrupt JPEGs: skipped under --on-error skip


def kill_at_checkpoint(args, out, entries=0, timeout=120):
    """Runs `tarmac ARGS --checkpoint-every 0` (a checkpoint after every sample) and SIGKILLs it
    once a checkpoint records at least `entries` entries handled. Returns (exit code, the last
    checkpoint or None); the exit code is -SIGKILL unless the run finished first."""
    proc = subprocess.Popen([fx.TARMAC, *args, "--checkpoint-every", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cp = os.path.join(out, ".tarmac-partial", "checkpoint.json")
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with open(cp) as f:  # renamed into place whole: never half written
                if json.load(f)["entries"] >= entries:
                    break
        except OSError:
            pass
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    try:
        with open(cp) as f:
            return proc.returncode, json.load(f)
    except OSError:
        return proc.returncode, None


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

    def test_resume_from_stdin_is_refused(self):
        with open(self.archive, "rb") as f:
            data = f.read()
        p = fx.run(["convert", "-", "-o", self.path("stdin"), "--resume"], stdin=data)
        self.assertEqual(p.returncode, 1)
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
