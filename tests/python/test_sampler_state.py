"""Mid-epoch resumption of tarmac.torch's samplers (docs/reader.md, "Resuming mid-epoch"):
ranks run some steps, one rank's state is saved, and a run on the same or another number of
ranks goes on; what all ranks saw before and after is one epoch, exactly (no repeat, no skip)
when the rest divides among the ranks, padded as at any epoch's start otherwise. The epoch's
expected content is computed here (range(n), and the dataset's samples grouped by image size
read with the independent safetensors reader). Needs TARMAC_LIB, PYTHONPATH=python/, TARMAC."""
import collections
import os
import shutil
import sys
import tempfile
import unittest
import warnings


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fixtures as fx  # noqa: E402

try:
    import torch  # noqa: F401
    import tarmac.torch as tt
except ImportError:
    tt = None

TARMAC = os.environ.get("TARMAC", "tarmac")


def run_steps(samplers, steps):
    """Every rank takes `steps` items in lockstep; returns what each took."""
    its = [iter(s) for s in samplers]
    return [[next(it) for _ in range(steps)] for it in its]


@unittest.skipIf(tt is None, "torch is not installed")
class ShardedSamplerStateTest(unittest.TestCase):
    def resume(self, n, w0, w1, steps, seed=5, epoch=2, drop_last=False):
        before = [tt.ShardedSampler(n, rank=r, world=w0, seed=seed, drop_last=drop_last) for r in range(w0)]
        for s in before:
            s.set_epoch(epoch)
        seen = run_steps(before, steps)
        state = before[0].state_dict(consumed=steps)
        self.assertEqual((state["epoch"], state["position"], state["world"]), (epoch, min(steps * w0, n), w0))
        after = [tt.ShardedSampler(n, rank=r, world=w1, seed=seed, drop_last=drop_last) for r in range(w1)]
        for s in after:
            s.load_state_dict(state)
            s.set_epoch(epoch)  # a loop that calls set_epoch(epoch) again keeps the position
        rest = [list(s) for s in after]
        self.assertEqual(len({len(r) for r in rest}), 1)  # lockstep: every rank the same count
        self.assertEqual(len(after[0]), len(rest[0]))
        return [i for r in seen for i in r], [i for r in rest for i in r]

    def test_the_old_name_distributed_sampler_still_works_and_warns(self):
        # Renamed because torch's DistributedSampler takes (dataset, num_replicas, ...); the old
        # name stays one release: same order as the partition of tarmac.indices, with a warning.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            old = tt.DistributedSampler(23, rank=1, world=3, seed=7, drop_last=True)
        self.assertEqual([w.category for w in caught], [DeprecationWarning])
        self.assertIn("renamed ShardedSampler", str(caught[0].message))
        self.assertEqual(caught[0].filename, os.path.abspath(__file__))  # points at the caller
        self.assertIsInstance(old, tt.ShardedSampler)
        old.set_epoch(4)
        order = tt.tarmac.indices(23, 0, 1, 7, 4).tolist()  # the whole epoch, one rank
        self.assertEqual(list(old), order[1:21:3])  # rank 1 of 3: positions 1, 4, ..., 7 items
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tt.ShardedSampler(23, rank=1, world=3, seed=7)
        self.assertEqual(caught, [])

    def test_four_ranks_then_three_see_one_epoch_exactly(self):
        n = 4 * 5 + 3 * 9  # 5 steps on 4 ranks, then 27 left for 3 ranks
        first, second = self.resume(n, 4, 3, steps=5)
        self.assertEqual(sorted(first + second), list(range(n)))
        # What the epoch would have been: the same order, so the first part is its prefix.
        order = tt.tarmac.indices(n, 0, 1, 5, 2)
        self.assertEqual(sorted(first), sorted(order[:20].tolist()))

    def test_same_world_and_other_sizes(self):
        for n, w0, w1, steps in ((37, 3, 3, 4), (50, 2, 5, 10), (41, 4, 1, 3), (30, 3, 2, 0)):
            first, second = self.resume(n, w0, w1, steps)
            count = collections.Counter(first + second)
            self.assertEqual(set(count), set(range(n)), (n, w0, w1))
            extra = sum(c - 1 for c in count.values())
            self.assertLess(extra, w1)  # only the padding of the last step repeats
            self.assertEqual(extra, -(n - steps * w0) % w1)

    def test_drop_last_skips_at_most_the_remainder(self):
        first, second = self.resume(47, 4, 3, steps=5, drop_last=True)
        self.assertEqual(len(set(first + second)), len(first + second))
        self.assertEqual(47 - len(first + second), (47 - 20) % 3)

    def test_resume_at_the_end_and_next_epoch(self):
        s = tt.ShardedSampler(12, rank=0, world=3, seed=1)
        list(s)
        state = s.state_dict()  # the iterator's own count: all 4 items
        self.assertEqual(state["position"], 12)
        t = tt.ShardedSampler(12, rank=1, world=2, seed=1)
        t.load_state_dict(state)
        self.assertEqual(list(t), [])
        t.set_epoch(1)  # the next epoch starts from its beginning
        self.assertEqual(list(t), tt.tarmac.indices(12, 1, 2, 1, 1).tolist())

    def test_a_state_of_another_dataset_or_order_is_refused(self):
        state = tt.ShardedSampler(10, rank=0, world=2, seed=3).state_dict(consumed=2)
        for other, word in ((tt.ShardedSampler(11, rank=0, world=2, seed=3), "size"),
                            (tt.ShardedSampler(10, rank=0, world=2, seed=4), "seed"),
                            (tt.ShardedSampler(10, rank=0, world=2, seed=3, shuffle=False), "shuffle")):
            with self.assertRaises(ValueError) as e:
                other.load_state_dict(state)
            self.assertIn(word, str(e.exception))

    def test_state_dict_consumed_beyond_the_epoch_or_not_an_integer_raises(self):
        # The bug: consumed=1000 of a 120-sample epoch saved position 120 (the epoch's end), and
        # consumed=2.5 became 2; both saved a position the training never reached.
        s = tt.ShardedSampler(120, rank=0, world=1, seed=3)
        for consumed in (1000, 121, 2.5, 2.0, -1, "3", True):
            with self.assertRaises(tt.tarmac.ArgumentError, msg=consumed) as e:
                s.state_dict(consumed=consumed)
            self.assertIn("consumed", str(e.exception))
        self.assertIn("120", self.raised(lambda: s.state_dict(consumed=1000)))
        self.assertEqual(s.state_dict(consumed=120)["position"], 120)
        self.assertEqual(s.state_dict(consumed=2)["position"], 2)
        # Four ranks: each has 30 (ceil(118 / 4) = 30 with padding); 30 is the end, 31 is past it.
        r = tt.ShardedSampler(118, rank=1, world=4, seed=3)
        self.assertEqual(r.state_dict(consumed=30)["position"], 118)
        with self.assertRaises(ValueError):
            r.state_dict(consumed=31)
        # From a resumed position, this rank's share is what is left.
        r.load_state_dict(dict(r.state_dict(consumed=10)))
        self.assertEqual(len(r), 20)
        with self.assertRaises(ValueError):
            r.state_dict(consumed=21)

    def raised(self, f):
        with self.assertRaises(ValueError) as e:
            f()
        return str(e.exception)

    def test_load_state_dict_refuses_negative_or_non_integer_positions_epochs_and_worlds(self):
        # The bug: a state with position -4, epoch -1 or world -2 was taken as it was.
        s = tt.ShardedSampler(40, rank=0, world=2, seed=3)
        good = s.state_dict(consumed=5)
        for key, value in (("position", -4), ("epoch", -1), ("world", -2), ("world", 0), ("position", 2.5),
                           ("epoch", 1.0), ("world", "2"), ("position", None), ("epoch", True),
                           ("position", 41)):
            bad = dict(good, **{key: value})
            t = tt.ShardedSampler(40, rank=0, world=3, seed=3)
            with self.assertRaises(tt.tarmac.ArgumentError, msg=(key, value)) as e:
                t.load_state_dict(bad)
            self.assertIsInstance(e.exception, ValueError)
            self.assertIn(key, str(e.exception))
            self.assertIn(repr(value) if not isinstance(value, int) or isinstance(value, bool) else str(value),
                          str(e.exception))
            self.assertEqual((t.epoch, t._start), (0, 0))  # nothing taken from a refused state
        for key in ("position", "epoch", "world"):
            t = tt.ShardedSampler(40, rank=0, world=3, seed=3)
            with self.assertRaises(ValueError) as e:
                t.load_state_dict({k: v for k, v in good.items() if k != key})
            self.assertIn(key, str(e.exception))
        with self.assertRaises(ValueError):
            tt.ShardedSampler(40, rank=0, world=3, seed=3).load_state_dict([("epoch", 0)])
        # The state as saved, on another world size, is taken (resuming on another number of ranks).
        t = tt.ShardedSampler(40, rank=2, world=3, seed=3)
        t.load_state_dict(good)
        self.assertEqual((t.epoch, t._start, len(t)), (0, 10, 10))

    def test_mix_sampler_state_is_checked_alike(self):
        s = tt.MixSampler([30, 20], [1, 1], samples_per_epoch=12, rank=0, world=2, seed=1)
        with self.assertRaises(ValueError):
            s.state_dict(consumed=7)
        self.assertEqual(s.state_dict(consumed=6)["position"], 12)
        state = s.state_dict(consumed=3)
        for key, value in (("position", 13), ("position", -1), ("epoch", -3), ("world", 0)):
            with self.assertRaises(tt.tarmac.ArgumentError, msg=(key, value)):
                tt.MixSampler([30, 20], [1, 1], samples_per_epoch=12, rank=0, world=3,
                              seed=1).load_state_dict(dict(state, **{key: value}))


@unittest.skipIf(tt is None, "torch is not installed")
class BucketBatchSamplerStateTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-sampler-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        sizes = [(320, 200), (200, 320), (240, 240), (330, 210)] * 6 + [(180, 300)] * 5
        cls.out = fx.bucketed_photos(cls.tmp, sizes)
        ref = fx.Dataset(cls.out)
        cls.n = len(ref.keys)
        cls.size_of = {i: (int(ref.t["__image__.width"][i]), int(ref.t["__image__.height"][i])) for i in range(cls.n)}

    def test_four_ranks_then_three_see_the_epochs_batches(self):
        bs = 2
        before = [tt.BucketBatchSampler(self.out, bs, rank=r, world=4, seed=9, drop_last=False) for r in range(4)]
        whole = tt.BucketBatchSampler(self.out, bs, rank=0, world=1, seed=9, drop_last=False)
        epoch = [tuple(b) for b in whole]  # the epoch's batches on one rank
        seen = run_steps(before, 2)
        state = before[2].state_dict(consumed=2)
        self.assertEqual(state["position"], 8)
        after = [tt.BucketBatchSampler(self.out, bs, rank=r, world=3, seed=9, drop_last=False) for r in range(3)]
        for s in after:
            s.load_state_dict(state)
        rest = [list(s) for s in after]
        self.assertEqual(len({len(r) for r in rest}), 1)
        got = [tuple(b) for r in seen for b in r] + [tuple(b) for r in rest for b in r]
        count = collections.Counter(got)
        self.assertEqual(set(count), set(epoch))
        self.assertEqual(sum(count.values()) - len(epoch), -(len(epoch) - 8) % 3)
        samples = sorted(i for b in set(got) for i in b)
        self.assertEqual(samples, list(range(self.n)))  # every sample, in one batch each
        for b in got:
            self.assertEqual(len({self.size_of[i] for i in b}), 1)  # one bucket per batch
        with self.assertRaises(ValueError):
            tt.BucketBatchSampler(self.out, 3, rank=0, world=3, seed=9).load_state_dict(state)


if __name__ == "__main__":
    unittest.main()
