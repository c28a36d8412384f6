"""Interrupted runs: `tarmac convert` killed with SIGKILL at many points never leaves a
dataset that looks complete; running the same command again with --resume goes on from the
last checkpoint and gives the same bytes as a run that was never interrupted; so does running
it again from the start (plainly when nothing was checkpointed; once a checkpoint exists a plain
run is refused, naming --resume and --overwrite, and --overwrite starts again).

A dataset is complete exactly when labels.safetensors exists (docs/format.md), so after a kill
the output directory may hold a .tarmac-partial/ and even published shards, but no
labels.safetensors -- unless the kill came after the final rename, when the dataset must then be
byte-identical to the reference.
"""
import ctypes
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, HERE)
import fixtures as fx  # noqa: E402
import conversion as conv  # noqa: E402

RANDOM_KILLS = 20   # kills after a random delay, anywhere in the run
SEED = 20240607     # fixed, so that a failure replays with the same delays
SAMPLES = 2400      # about 2 s of conversion on two cores, without a sanitizer
# Kills the moment a file appears in the output directory: inside the publishing renames,
# a window of milliseconds that random delays rarely hit.
PUBLISH_KILLS = ["shard-000000.tar", "shard-000003.tar", "manifest.json", "manifest.json"]


def _inotify():
    """libc's inotify_init1 and inotify_add_watch, or None where there are none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.inotify_init1, libc.inotify_add_watch
    except (OSError, AttributeError):
        return None


IN_CREATE, IN_MOVED_TO, IN_NONBLOCK, IN_CLOEXEC = 0x100, 0x80, os.O_NONBLOCK, os.O_CLOEXEC


def wait_for_file(proc, target, near_end):
    """Returns as soon as the file `target` exists or `proc` has exited. The window to hit can
    be shorter than a wake-up from sleep on a loaded machine, so the wait has two phases: it
    sleeps (woken by inotify as entries appear in target's directory, its parent and its
    subdirectories in `near_end`) until one of the paths `near_end` exists, which the run
    creates shortly before `target`; then it polls without sleeping, for that short while only.
    Without inotify the first phase polls every millisecond."""
    def near():
        return proc.poll() is not None or any(os.path.exists(p) for p in near_end + [target])

    dirs = sorted({os.path.dirname(os.path.dirname(target)), os.path.dirname(target)} |
                  {os.path.dirname(p) for p in near_end})
    calls = _inotify()
    fd = calls[0](IN_NONBLOCK | IN_CLOEXEC) if calls else -1
    if fd < 0:
        while not near():
            time.sleep(0.001)
    else:
        try:
            watched = set()
            while True:
                for d in dirs:
                    if d not in watched and os.path.isdir(d):
                        if calls[1](fd, os.fsencode(d), IN_CREATE | IN_MOVED_TO) >= 0:
                            watched.add(d)
                if near():  # checked after adding the watches: no event is missed
                    break
                # the timeout only bounds how late the exit of proc is noticed
                if select.select([fd], [], [], 0.05)[0]:
                    try:
                        while os.read(fd, 65536):
                            pass
                    except BlockingIOError:
                        pass
        finally:
            os.close(fd)
    while proc.poll() is None and not os.path.exists(target):
        pass  # near the end: a wake-up could come after the window


class KillTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.archive = conv.write_archive(os.path.join(cls.tmp, "in.tar"), SAMPLES)

    def command(self, out, *extra):
        return conv.command(self.archive, out, *extra)

    def resumed_samples(self, out):
        return conv.resumed_samples(out)

    def outputs(self, out):
        return conv.outputs(out)

    def assert_same_dataset(self, out, ref):
        conv.assert_same_dataset(self, out, ref)

    def run_and_kill(self, out, when):
        """Starts a conversion and SIGKILLs it after `when` seconds, or as soon as the file
        `when` appears in `out`. Returns False when it finished first."""
        proc = subprocess.Popen(self.command(out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if isinstance(when, str):
            # The window is a few milliseconds. Rather than spin on one of CI's two cores
            # beside the whole conversion, sleep until it writes its last shard (named as
            # the reference run's) or its annotation file into the staging directory.
            staging = os.path.join(out, ".tarmac-partial")
            wait_for_file(proc, os.path.join(out, when),
                          [os.path.join(staging, self.last_shard),
                           os.path.join(staging, "labels.safetensors")])
        else:
            time.sleep(when)
        if proc.poll() is not None:
            self.assertEqual(proc.returncode, 0)
            return False
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return True

    def test_killed_runs_leave_nothing_complete_and_rerun_matches(self):
        ref = os.path.join(self.tmp, "ref")
        subprocess.run(self.command(ref), check=True, timeout=600, stdout=subprocess.DEVNULL)
        self.assertGreater(len(self.outputs(ref)), 4, "the reference should have several shards")
        self.last_shard = [n for n in self.outputs(ref) if n.startswith("shard-")][-1]

        rng = random.Random(SEED)
        durations = []  # of every complete run, so the delays follow this machine's speed
        kills, finished, plan, resumed = [], 0, list(PUBLISH_KILLS), []
        for attempt in range(4 * (RANDOM_KILLS + len(PUBLISH_KILLS))):
            if not plan and len(kills) >= RANDOM_KILLS + len(PUBLISH_KILLS):
                break
            if not durations:  # the first complete timing comes from a plain run
                t0 = time.monotonic()
                subprocess.run(self.command(ref + "-timing"), check=True, stdout=subprocess.DEVNULL)
                durations.append(time.monotonic() - t0)
            when = plan.pop(0) if plan else rng.uniform(0.0, 1.0) * sorted(durations)[len(durations) // 2]
            out = os.path.join(self.tmp, "out-%d" % attempt)
            if not self.run_and_kill(out, when):
                finished += 1  # done before the kill: not a kill point
                shutil.rmtree(out)
                continue
            kills.append(when)
            left = os.listdir(out) if os.path.isdir(out) else []
            if "labels.safetensors" in left:
                # Killed after the final rename: then it must be the whole dataset (a
                # .tarmac-partial/ may be left beside it, which no reader looks at).
                self.assert_same_dataset(out, ref)
            # Every fourth kill: the same command again, from the start. The others: --resume.
            plain = len(kills) % 4 == 0
            # A checkpoint of no sample holds no converted work: a plain run starts over.
            checkpointed = (conv.checkpoint(out) or {}).get("writer", {}).get("samples", 0) > 0
            if plain and checkpointed and "labels.safetensors" not in left:
                # Converted work is never discarded unasked: refused, both ways on named; then
                # --overwrite starts again.
                p = subprocess.run(self.command(out), capture_output=True, timeout=600)
                self.assertEqual(p.returncode, 1, p.stderr.decode(errors="replace"))
                self.assertIn(b"--resume", p.stderr)
                self.assertIn(b"--overwrite", p.stderr)
            t0 = time.monotonic()
            again = ["--overwrite"] if plain and checkpointed else [] if plain else ["--resume"]
            p = subprocess.run(self.command(out, *again), capture_output=True, timeout=600)
            if "labels.safetensors" in left:
                if plain:
                    if not again:
                        self.assertEqual(p.returncode, 1, "a complete dataset must not be overwritten silently")
                    else:
                        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
                        self.assert_same_dataset(out, ref)
                else:
                    self.assertEqual(p.returncode, 0, "--resume of a complete dataset has nothing to do")
                    self.assert_same_dataset(out, ref)
            else:
                self.assertEqual(p.returncode, 0, "re-run (%s) after a kill at %r (left: %s) failed:\n%s"
                                 % ("plain" if plain else "--resume", when, sorted(left),
                                    p.stderr.decode(errors="replace")))
                if plain:
                    durations.append(time.monotonic() - t0)
                self.assert_same_dataset(out, ref)
                self.assertNotIn(".tarmac-partial", os.listdir(out))
                if not plain:
                    resumed.append(self.resumed_samples(out) or 0)
            shutil.rmtree(out)
        print("%d kill points survived (%d runs finished before their kill; median run %.2f s); "
              "%d resumed with --resume, from sample %s"
              % (len(kills), finished, sorted(durations)[len(durations) // 2], len(resumed),
                 sorted(resumed)), file=sys.stderr)
        # Most kills come after the first checkpoint: those resumes must skip converted work.
        self.assertGreaterEqual(sum(1 for r in resumed if r > 0), len(resumed) // 2)
        self.assertGreaterEqual(len(kills), RANDOM_KILLS + len(PUBLISH_KILLS))

    def test_rerun_after_kill_while_publishing(self):
        """Bug: a run killed between publishing its shards and its annotation file left
        shard-*.tar and manifest.json beside .tarmac-partial/, and the re-run refused the
        directory as not empty. The leftovers are the killed run's, so the re-run removes them
        (here without a checkpoint: nothing converted to keep). Which files are its own, its
        manifest says (still in .tarmac-partial/, or already moved out), never a name pattern:
        a shard-named file no manifest lists stays, and the re-run refuses the directory."""
        small = fx.write_tar(os.path.join(self.tmp, "small.tar"),
                             [("a/0.jpg", fx.jpg(fx.smooth_rgb(32, 24))), ("a/0.json", fx.js({"id": 0}))])
        manifest = fx.js({"shards": [{"name": "shard-000000.tar"}, {"name": "shard-000001.tar"}]})
        for manifest_out in (True, False):
            out = os.path.join(self.tmp, "publish-killed-%s" % manifest_out)
            os.makedirs(os.path.join(out, ".tarmac-partial"))
            moved = ("shard-000000.tar", "shard-000001.tar") if manifest_out else ("shard-000000.tar",)
            for name in moved:
                with open(os.path.join(out, name), "wb") as f:
                    f.write(b"left by the killed run")
            where = out if manifest_out else os.path.join(out, ".tarmac-partial")
            with open(os.path.join(where, "manifest.json"), "wb") as f:
                f.write(manifest)
            p = fx.run(["convert", small, "-o", out])
            self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
            self.assertEqual(sorted(os.listdir(out)),
                             ["labels.safetensors", "manifest.json", "shard-000000.tar", "shardlist.json"])
        out = os.path.join(self.tmp, "publish-killed-foreign")
        os.makedirs(os.path.join(out, ".tarmac-partial"))
        with open(os.path.join(out, "shard-000003.tar"), "wb") as f:
            f.write(b"listed by no manifest")
        p = fx.run(["convert", small, "-o", out])
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"not empty", p.stderr)
        self.assertTrue(os.path.exists(os.path.join(out, "shard-000003.tar")))


if __name__ == "__main__":
    unittest.main()
