"""The summary's `stages` (where a conversion's time went, and which stage limits it) on runs
whose limit is known by construction: an input smaller than the group window with members
spread (the workers wait for the whole input to be read) or adjacent (converted ahead while it
is read), and one slow worker behind a fast reader."""
import json
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

KEYS = {"threads", "reader_seconds", "reader_blocked_seconds", "worker_seconds", "worker_idle_seconds",
        "writer_seconds", "writer_idle_seconds", "finish_seconds", "first_release_seconds", "ahead_samples",
        "reader_busy",
        "worker_busy", "writer_busy", "limit"}


class StagesTest(fx.TmpCase):
    def stages(self, inputs, *flags):
        p, _ = fx.convert(self, inputs, "--json", *flags)
        summary = json.loads(p.stdout)
        st = summary["stages"]
        self.assertEqual(set(st), KEYS)
        # Each stage's blocked time lies within its own time, which lies within the run's.
        slack = 0.05
        for stage, waiting in (("reader", "reader_blocked_seconds"), ("worker", "worker_idle_seconds"),
                               ("writer", "writer_idle_seconds")):
            total = st[stage + "_seconds"]
            self.assertGreaterEqual(st[waiting], 0)
            self.assertLessEqual(st[waiting], total + 1e-6)
            self.assertAlmostEqual(st[stage + "_busy"], max(0.0, 1 - st[waiting] / total) if total > 0 else 0.0,
                                   places=6)
        self.assertLessEqual(st["reader_seconds"], summary["seconds"] + slack)
        self.assertLessEqual(st["writer_seconds"] + st["finish_seconds"], summary["seconds"] + slack)
        self.assertLessEqual(st["worker_seconds"], st["threads"] * summary["seconds"] + slack)
        self.assertLessEqual(st["first_release_seconds"], st["reader_seconds"] + 1e-6)
        return st

    def window_input(self, spread):
        # 12 samples, each with a 2 MB member that no stage uses (ignored, but read and
        # checksummed): reading takes far longer than the workers' trivial work.
        members = []
        for i in range(12):
            members += [(f"s/{i:03d}.jpg", fx.jpg(fx.smooth_rgb(64, 48, seed=i))), (f"s/{i:03d}.cls", b"%d" % i),
                        (f"s/{i:03d}.bin", os.urandom(2 << 20))]
        if spread:  # all .bin, then all images, then all labels: no sample complete before the end
            members = members[2::3] + members[0::3] + members[1::3]
        src = os.path.join(self.tmp, "spread.tar" if spread else "adjacent.tar")
        fx.write_tar(src, members)
        return src

    def test_spread_members_inside_the_group_window_leave_the_workers_waiting(self):
        src = self.window_input(spread=True)
        st = self.stages([src], "--threads", "2")
        self.assertEqual(st["threads"], 2)
        # Nothing leaves the 64 MB window before the input ends and nothing could be converted
        # ahead: the reader never waits, and the workers' first samples come at the end.
        self.assertLess(st["reader_blocked_seconds"], 0.001)
        self.assertGreater(st["reader_busy"], 0.99)
        self.assertEqual(st["ahead_samples"], 0)
        self.assertGreaterEqual(st["first_release_seconds"], 0.5 * st["reader_seconds"])
        self.assertEqual(st["limit"], "window")
        p, _ = fx.convert(self, [src], "--threads", "2")
        text = p.stdout.decode()
        self.assertIn("stages: reader busy 100%", text)
        self.assertIn("(2 threads)", text)
        self.assertIn("the limit: the group window", text)

    def test_adjacent_members_are_converted_while_the_window_fills(self):
        st = self.stages([self.window_input(spread=False)], "--threads", "2")
        # Every sample but the last is followed by another key before the input ends: converted
        # ahead of the release; what is left is reading the input.
        self.assertEqual(st["ahead_samples"], 11)
        self.assertGreater(st["reader_busy"], 0.99)
        self.assertEqual(st["limit"], "reader")

    def test_one_slow_worker_behind_a_fast_reader_is_the_limit(self):
        # 40 large, busy JPEGs downscaled on one worker thread; with a 1-byte group window each
        # sample is released as soon as the next begins, so the reader fills the bounded queue
        # at once and then waits for the worker.
        rng = np.random.default_rng(3)
        members = []
        for i in range(40):
            img = np.clip(fx.smooth_rgb(1600, 1200, seed=i).astype(np.int16)
                          + rng.integers(-20, 20, (1200, 1600, 3)), 0, 255).astype(np.uint8)
            members += [(f"b/{i:03d}.jpg", fx.jpg(img, 95)), (f"b/{i:03d}.cls", b"1")]
        src = os.path.join(self.tmp, "big.tar")
        fx.write_tar(src, members)
        st = self.stages([src], "--threads", "1", "--group-window", "1", "--crop", "center", "--size", "256")
        self.assertEqual(st["threads"], 1)
        self.assertLess(st["first_release_seconds"], 0.2 * st["reader_seconds"] + 0.01)
        self.assertGreater(st["worker_busy"], 0.85)
        self.assertLess(st["reader_busy"], 0.5)
        self.assertEqual(st["limit"], "workers")
        p, _ = fx.convert(self, [src], "--threads", "1", "--group-window", "1", "--crop", "center", "--size", "256")
        self.assertIn("the limit: the transform workers", p.stdout.decode())


if __name__ == "__main__":
    unittest.main()
