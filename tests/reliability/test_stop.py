"""Stopping a run on purpose, and two writers at once (docs/reliability.md):

- SIGTERM at 20 points of a run (and a second SIGTERM at some): exit 143 within a bounded
  time, a checkpoint that covers everything written before the signal, and a --resume that
  gives the same bytes as an uninterrupted run while redoing strictly fewer samples than after a
  SIGKILL at the same point;
- SIGINT: exit 130, and the command it prints to go on, run as printed, finishes the dataset;
- a bad sample under --on-error fail: the samples before it are kept, and the printed command
  (--resume --on-error skip) gives the same bytes as a run with --on-error skip from the start;
- two converts into one directory at once: exactly one runs, the other fails at once naming it;
  two --resume of one interrupted run at once: one goes on, the checkpoint survives;
- a lock held by another process (here Python's flock) stops convert and merge alike.

A "point" is an amount of image bytes in the staging directory's shards, so that the SIGTERM and
the SIGKILL run are stopped at the same place whatever the machine's speed.
"""
import fcntl
import io
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tarfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, HERE)
import fixtures as fx  # noqa: E402
import conversion as conv  # noqa: E402

SAMPLES = 1200  # about a second of conversion on two cores, ten shards
POINTS = 20
URGENT_EVERY = 5  # every fifth SIGTERM point gets a second SIGTERM at once: in-flight dropped
STOP_BOUND = 10.0  # seconds from the signal to the exit (kStopDrainSeconds is 5)


def staged_shard_bytes(out):
    staging = os.path.join(out, ".tarmac-partial")
    total = 0
    try:
        for e in os.scandir(staging):
            if e.name.startswith("shard-"):
                try:
                    total += e.stat().st_size
                except FileNotFoundError:
                    pass
    except FileNotFoundError:
        pass
    return total


class StopTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.archive = conv.write_archive(os.path.join(cls.tmp, "in.tar"), SAMPLES)
        cls.ref = os.path.join(cls.tmp, "ref")
        subprocess.run(conv.command(cls.archive, cls.ref), check=True, stdout=subprocess.DEVNULL)
        cls.ref_bytes = sum(os.path.getsize(os.path.join(cls.ref, n))
                            for n in conv.outputs(cls.ref) if n.startswith("shard-"))

    def start(self, out, *extra):
        return subprocess.Popen(conv.command(self.archive, out, *extra),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def run_until(self, proc, out, threshold):
        """Waits until the run has `threshold` shard bytes staged; returns how many it had, or
        None if it ended first."""
        while proc.poll() is None:
            seen = staged_shard_bytes(out)
            if seen >= threshold:
                return seen
            time.sleep(0.002)
        return None

    def resume(self, out):
        p = subprocess.run(conv.command(self.archive, out, "--resume"), capture_output=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        conv.assert_same_dataset(self, out, self.ref)
        self.assertNotIn(".tarmac-partial", os.listdir(out))
        self.assertNotIn(".tarmac-lock", os.listdir(out))
        return conv.resumed_samples(out) or 0

    def test_sigterm_checkpoints_what_sigkill_loses(self):
        latencies, rows = [], []
        for i in range(POINTS):
            # up to 80 % of the shard bytes: past that, a loaded machine can finish the run (the
            # last shard flushed and published) between two polls, and the point is missed
            threshold = self.ref_bytes * (0.05 + 0.75 * i / (POINTS - 1))
            urgent = i % URGENT_EVERY == URGENT_EVERY - 1
            # SIGTERM
            out = self.path("term-%d" % i)
            proc = self.start(out)
            seen = self.run_until(proc, out, threshold)
            self.assertIsNotNone(seen, "the run ended before point %d" % i)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            if urgent:
                proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
            latencies.append(time.monotonic() - t0)
            err = err.decode(errors="replace")
            self.assertEqual(proc.returncode, 143, err)
            self.assertIn("stopped by SIGTERM", err)
            self.assertIn("--resume", err)
            cp = conv.checkpoint(out)
            self.assertIsNotNone(cp, err)
            w = cp["writer"]
            covered = sum(w["shard_sizes"]) + (w["open_shard"] or {}).get("size", 0)
            self.assertGreaterEqual(covered, seen, "work written before SIGTERM is not in its checkpoint")
            self.assertIn("%d converted sample(s) are kept" % w["samples"], err)
            term_from = self.resume(out)
            self.assertEqual(term_from, w["samples"])
            # SIGKILL at the same point
            out = self.path("kill-%d" % i)
            proc = self.start(out)
            self.assertIsNotNone(self.run_until(proc, out, threshold))
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
            kill_from = self.resume(out)
            self.assertGreater(term_from, kill_from,
                               "point %d: SIGTERM must leave less to redo than SIGKILL" % i)
            rows.append((i, term_from, kill_from))
        print("%d points: resumed after SIGTERM / SIGKILL from samples %s of %d; SIGTERM to exit: "
              "median %.3f s, max %.3f s"
              % (POINTS, ", ".join("%d/%d" % (t, k) for _, t, k in rows), SAMPLES,
                 statistics.median(latencies), max(latencies)), file=sys.stderr)
        self.assertLess(max(latencies), STOP_BOUND)

    def test_sigint_prints_the_command_that_goes_on(self):
        out = self.path("sigint")
        proc = self.start(out)
        self.assertIsNotNone(self.run_until(proc, out, self.ref_bytes / 2))
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        err = err.decode(errors="replace")
        self.assertEqual(proc.returncode, 130, err)
        self.assertIn("stopped by SIGINT", err)
        m = re.search(r"to go on from there: (.*)", err)
        self.assertIsNotNone(m, err)
        p = subprocess.run(m.group(1), shell=True, capture_output=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        conv.assert_same_dataset(self, out, self.ref)
        self.assertGreater(conv.resumed_samples(out), 0)
        # A plain run over an interrupted one is refused rather than discarding its work.
        out = self.path("sigint-plain")
        proc = self.start(out)
        self.run_until(proc, out, self.ref_bytes / 2)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        p = subprocess.run(conv.command(self.archive, out), capture_output=True, timeout=600)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"holds an interrupted conversion", p.stderr)
        self.assertIsNotNone(conv.checkpoint(out))

    def test_the_last_progress_line_after_sigint_says_stopped(self):
        # Issue #25, 16d: the last line said 99 % (the samples kept of those the stopped reader
        # had met), and nothing of the stop. A 1 MB group window keeps the reader within the
        # samples in flight (12 batches of 64 here) of the writer, so it stops mid-input.
        out = self.path("sigint-progress")
        cmd = [a for a in conv.command(self.archive, out) if a != "-q"]
        cmd += ["--progress", "plain", "--group-window", "1M"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.assertIsNotNone(self.run_until(proc, out, self.ref_bytes / 10))
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        err = err.decode(errors="replace")
        self.assertEqual(proc.returncode, 130, err)
        kept = conv.checkpoint(out)["writer"]["samples"]
        lines = [l for l in err.splitlines() if l.startswith("tarmac: progress:")]
        m = re.match(r"tarmac: progress: +(\d+)% (\d+) of ~?(\d+) samples", lines[-1])
        self.assertIsNotNone(m, lines[-1])
        self.assertIn("stopped", lines[-1])
        self.assertNotIn("ETA", lines[-1])
        self.assertEqual(int(m.group(2)), kept, lines[-1])
        self.assertLess(kept, SAMPLES, "the reader was not stopped mid-input")
        # The total is the input's, estimated; not the samples met when reading stopped.
        self.assertGreater(int(m.group(3)), SAMPLES * 0.8, lines[-1])
        self.assertAlmostEqual(int(m.group(1)), 100 * kept / int(m.group(3)), delta=0.51, msg=lines[-1])

    def test_bad_sample_keeps_the_work_before_it(self):
        bad = self.path("bad.tar")
        with tarfile.open(self.archive) as src, tarfile.open(bad, "w") as dst:
            for m in src.getmembers():
                data = src.extractfile(m).read()
                if m.name == "k/00700.jpg":
                    data = data[:200]  # truncated: a bad sample
                m.size = len(data)
                dst.addfile(m, io.BytesIO(data))
        ref = self.path("bad-ref")
        subprocess.run(conv.command(bad, ref, "--on-error", "skip"), check=True, stdout=subprocess.DEVNULL)
        out = self.path("bad-out")
        p = subprocess.run(conv.command(bad, out), capture_output=True, timeout=600)
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("k/00700", err)
        self.assertEqual(conv.checkpoint(out)["writer"]["samples"], 700)
        m = re.search(r"go on past it, leaving it out: (.*)", err)
        self.assertIsNotNone(m, err)
        self.assertIn("--on-error skip", m.group(1))
        p = subprocess.run(m.group(1), shell=True, capture_output=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        conv.assert_same_dataset(self, out, ref)
        self.assertEqual(conv.resumed_samples(out), 700)
        with open(os.path.join(out, "manifest.json")) as f, open(os.path.join(ref, "manifest.json")) as g:
            self.assertEqual(json.load(f)["skipped"], json.load(g)["skipped"])

    def test_two_converts_at_once(self):
        out = self.path("two")
        a, b = self.start(out), self.start(out)
        ends = {}
        while len(ends) < 2:
            for name, p in (("a", a), ("b", b)):
                if name not in ends and p.poll() is not None:
                    ends[name] = time.monotonic()
            time.sleep(0.002)
        errs = {"a": a.communicate()[1].decode(), "b": b.communicate()[1].decode()}
        codes = {"a": a.returncode, "b": b.returncode}
        self.assertEqual(sorted(codes.values()), [0, 1], errs)
        loser = "a" if codes["a"] == 1 else "b"
        winner = "b" if loser == "a" else "a"
        self.assertIn("is in use by another tarmac (pid %d" % (a if winner == "a" else b).pid, errs[loser])
        self.assertLess(ends[loser], ends[winner], "the second writer must fail at once")
        conv.assert_same_dataset(self, out, self.ref)
        self.assertEqual(sorted(os.listdir(out)), sorted(["manifest.json", "shardlist.json", *conv.outputs(self.ref)]))

    def test_two_resumes_at_once(self):
        out = self.path("two-resumes")
        proc = self.start(out)
        self.run_until(proc, out, self.ref_bytes / 2)
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        kept = conv.checkpoint(out)["writer"]["samples"]
        self.assertGreater(kept, 0)
        a, b = self.start(out, "--resume"), self.start(out, "--resume")
        ea, eb = a.communicate(timeout=600)[1].decode(), b.communicate(timeout=600)[1].decode()
        self.assertEqual(sorted([a.returncode, b.returncode]), [0, 1], ea + eb)
        self.assertIn("is in use by another tarmac", ea if a.returncode else eb)
        conv.assert_same_dataset(self, out, self.ref)
        self.assertEqual(conv.resumed_samples(out), kept)

    def test_a_lock_held_elsewhere_stops_convert_and_merge(self):
        out = self.path("held")
        os.makedirs(out)
        fd = os.open(os.path.join(out, ".tarmac-lock"), os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, json.dumps({"pid": 4242, "host": "node17", "started": "2026-11-23T01:02:03Z",
                                     "command": "tarmac convert x -o held"}).encode())
            for args in (conv.command(self.archive, out)[1:], ["merge", self.ref, "-o", out]):
                t0 = time.monotonic()
                p = fx.run(args)
                err = p.stderr.decode()
                self.assertEqual(p.returncode, 1, err)
                self.assertIn("pid 4242 on host node17, since 2026-11-23T01:02:03Z, running: "
                              "tarmac convert x -o held", err)
                self.assertLess(time.monotonic() - t0, 5)
            self.assertEqual(os.listdir(out), [".tarmac-lock"])
        finally:
            os.close(fd)  # the holder ends: its lock goes with it
        p = fx.run(["merge", self.ref, "-o", out])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        conv.assert_same_dataset(self, out, self.ref)


if __name__ == "__main__":
    unittest.main()
