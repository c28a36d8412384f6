"""Mixing datasets by weight (docs/reader.md, "Mixing datasets by weight"): tarmac.torch's
MixedDataset checked against the datasets read with the independent safetensors reader and the
images they were made from, and MixSampler against counts computed here in fractions and the
properties the document promises (no repeat before a dataset is exhausted, draws that go on
across epochs, one order whatever the ranks, resuming on another number of ranks). Needs
TARMAC_LIB, PYTHONPATH=python/, TARMAC."""
import collections
import fractions
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fixtures as fx  # noqa: E402

import tarmac
from draw_oracle import dataset_seed, uniform  # noqa: E402

try:
    import torch
    import tarmac.torch as tt
except ImportError:
    tt = None

TARMAC = os.environ.get("TARMAC", "tarmac")


def hand_counts(weights, total):
    """Largest remainder, written out: integer parts, then +1 by largest remainder, ties to the earlier."""
    quotas = [fractions.Fraction(w) * total / sum(map(fractions.Fraction, weights)) for w in weights]
    counts = [q.numerator // q.denominator for q in quotas]
    left = total - sum(counts)
    remainders = sorted(((q - c, -k) for k, (q, c) in enumerate(zip(quotas, counts))), reverse=True)
    for _, minus_k in remainders[:left]:
        counts[-minus_k] += 1
    return counts


def epoch_order(sizes, weights, epoch, seed=3, samples_per_epoch=None, shuffle=True):
    s = tt.MixSampler(sizes, weights, samples_per_epoch, rank=0, world=1, seed=seed, shuffle=shuffle)
    s.set_epoch(epoch)
    return list(s)


def per_dataset(order, sizes):
    """The epoch's global indices split by dataset, as indices within each, in epoch order."""
    offsets = np.cumsum([0] + list(sizes))
    out = [[] for _ in sizes]
    for g in order:
        k = int(np.searchsorted(offsets, g, side="right") - 1)
        out[k].append(g - int(offsets[k]))
    return out


@unittest.skipIf(tt is None, "torch is not installed")
class MixSamplerTest(unittest.TestCase):
    def test_counts_are_the_largest_remainder_of_the_weights(self):
        cases = [([54000, 21000], [0.9, 0.1], None), ([10, 3, 7], [1, 1, 1], 11), ([5, 5, 5, 5], [1, 1, 1, 1], 6),
                 ([100, 100, 100], [0.2, 0.3, 0.5], 7), ([8, 9], [2, 0], 13), ([3, 4, 5], [1 / 3, 1 / 3, 1 / 3], 10)]
        for sizes, weights, per_epoch in cases:
            s = tt.MixSampler(sizes, weights, per_epoch, rank=0, world=1)
            total = sum(sizes) if per_epoch is None else per_epoch
            self.assertEqual(s.counts(), hand_counts(weights, total), (sizes, weights, per_epoch))
            self.assertEqual(sum(s.counts()), total)
            order = list(s)
            self.assertEqual(len(order), total)
            self.assertEqual([len(d) for d in per_dataset(order, sizes)], s.counts())
        self.assertEqual(tt.MixSampler([54000, 21000], [0.9, 0.1], rank=0, world=1).counts(), [67500, 7500])
        self.assertEqual(tt.MixSampler([5, 5, 5, 5], [1, 1, 1, 1], 6, rank=0, world=1).counts(), [2, 2, 1, 1])

    def test_no_repeat_before_a_dataset_is_exhausted_and_draws_go_on_across_epochs(self):
        # A small set with a large weight (3 samples, 8 a epoch) and a large set with a small one
        # (50 samples, 12 a epoch, traversed in a little over 4 epochs).
        sizes, weights = [3, 50], [0.4, 0.6]
        streams = [[], []]
        for epoch in range(9):
            for k, drawn in enumerate(per_dataset(epoch_order(sizes, weights, epoch, samples_per_epoch=20), sizes)):
                streams[k] += drawn
        self.assertEqual([len(s) for s in streams], [8 * 9, 12 * 9])
        for k, stream in enumerate(streams):
            n = sizes[k]
            for start in range(0, len(stream) - n + 1, n):  # every whole pass is a permutation
                self.assertEqual(sorted(stream[start:start + n]), list(range(n)), (k, start))
            passes = [stream[start:start + n] for start in range(0, len(stream) - n + 1, n)]
            self.assertGreater(len({tuple(p) for p in passes}), 1)  # a new permutation each pass
        big = [per_dataset(epoch_order(sizes, weights, e, samples_per_epoch=20), sizes)[1] for e in range(4)]
        self.assertEqual(len(set().union(*map(set, big))), 48)  # epochs 0-3 take 48 distinct of 50

    def test_a_pure_function_of_seed_and_epoch_whatever_the_ranks(self):
        sizes, weights = [30, 7, 12], [0.5, 0.2, 0.3]
        one = epoch_order(sizes, weights, 4)
        self.assertEqual(one, epoch_order(sizes, weights, 4))
        self.assertNotEqual(one, epoch_order(sizes, weights, 5))
        self.assertNotEqual(one, epoch_order(sizes, weights, 4, seed=4))
        for world in (2, 4, 7):  # rank r of W takes positions r, r + W, ... of the one order
            shares = []
            for r in range(world):
                s = tt.MixSampler(sizes, weights, rank=r, world=world, seed=3)
                s.set_epoch(4)
                shares.append(list(s))
                self.assertEqual(len(s), math.ceil(len(one) / world))
            for r, share in enumerate(shares):
                self.assertEqual(share, [one[(r + k * world) % len(one)] for k in range(len(share))])
            union = collections.Counter(i for share in shares for i in share)
            self.assertEqual(set(union), set(one))
            self.assertEqual(sum(union.values()) - len(one), -len(one) % world)  # only the padding repeats

    def test_without_shuffle_draws_in_order_and_spreads_the_datasets(self):
        order = epoch_order([6, 4], [0.5, 0.5], 0, samples_per_epoch=8, shuffle=False)
        self.assertEqual(order, [0, 6, 1, 7, 2, 8, 3, 9])
        order = epoch_order([6, 4], [0.5, 0.5], 1, samples_per_epoch=8, shuffle=False)
        self.assertEqual(order, [4, 6, 5, 7, 0, 8, 1, 9])

    def test_four_ranks_resumed_on_three_see_exactly_the_rest_of_the_epoch(self):
        sizes, weights, per_epoch, steps = [40, 9, 25], [0.6, 0.3, 0.1], 4 * 5 + 3 * 9, 5
        whole = epoch_order(sizes, weights, 2, samples_per_epoch=per_epoch, seed=8)
        before = [tt.MixSampler(sizes, weights, per_epoch, rank=r, world=4, seed=8) for r in range(4)]
        for s in before:
            s.set_epoch(2)
        its = [iter(s) for s in before]
        seen = [[next(it) for _ in range(steps)] for it in its]
        state = before[1].state_dict(consumed=steps)
        self.assertEqual((state["epoch"], state["position"], state["world"]), (2, 20, 4))
        after = [tt.MixSampler(sizes, weights, per_epoch, rank=r, world=3, seed=8) for r in range(3)]
        for s in after:
            s.load_state_dict(state)
            s.set_epoch(2)  # the saved epoch again: the position is kept
        rest = [list(s) for s in after]
        self.assertEqual([len(r) for r in rest], [9, 9, 9])
        self.assertEqual([len(s) for s in after], [9, 9, 9])
        self.assertEqual(sorted(i for r in seen for i in r), sorted(whole[:20]))
        self.assertEqual(sorted(i for r in rest for i in r), sorted(whole[20:]))
        self.assertEqual(collections.Counter(i for r in seen + rest for i in r), collections.Counter(whole))
        for other, word in ((tt.MixSampler(sizes, [0.5, 0.4, 0.1], per_epoch, rank=0, world=3, seed=8), "weights"),
                            (tt.MixSampler(sizes, weights, per_epoch + 1, rank=0, world=3, seed=8),
                             "samples_per_epoch"),
                            (tt.MixSampler([40, 9, 26], weights, per_epoch, rank=0, world=3, seed=8), "size"),
                            (tt.MixSampler(sizes, weights, per_epoch, rank=0, world=3, seed=9), "seed")):
            with self.assertRaises(ValueError) as e:
                other.load_state_dict(state)
            self.assertIn(word, str(e.exception))

    def test_the_counts_are_logged_when_an_epoch_starts(self):
        s = tt.MixSampler([12, 5], [3, 1], 8, rank=0, world=1)
        with self.assertLogs("tarmac", "INFO") as logs:
            s.set_epoch(1)
            list(s)  # the same epoch: not again
        self.assertEqual(len(logs.output), 1)
        self.assertIn("epoch 1", logs.output[0])
        self.assertIn("6 of dataset 0", logs.output[0])
        self.assertIn("2 of dataset 1", logs.output[0])
        with self.assertLogs("tarmac", "INFO") as logs:
            list(tt.MixSampler([12, 5], [3, 1], 8, rank=0, world=1))  # no set_epoch: the first iter
        self.assertIn("epoch 0", logs.output[0])

    def test_bad_input_is_refused_naming_the_argument(self):
        for args, word in ((([10, 5], [1]), "weights"), (([10, 5], [1, -1]), "weights"),
                           (([10, 5], [1, float("nan")]), "weights"), (([10, 5], [0, 0]), "weights"),
                           (([10, 0], [1, 1]), "weights"), (([10, 5], [1, 1], 0), "samples_per_epoch"),
                           (([10, 5], [1, 1], -3), "samples_per_epoch"), (([10, 5], [1, 1], 2.5), "samples_per_epoch"),
                           (([], []), "mixed_or_sizes"), (([4, -1], [1, 1]), "mixed_or_sizes")):
            with self.assertRaises(ValueError, msg=args) as e:
                tt.MixSampler(*args)
            self.assertIn(word, str(e.exception))
        with self.assertRaises(ValueError) as e:
            tt.MixedDataset([])
        self.assertIn("datasets", str(e.exception))

    def test_weights_as_a_dict_is_a_type_error_not_its_keys(self):
        # The bug: iterating a dict gives its keys, so {0: 0.9, 1: 0.1} mixed with weights 0, 1.
        for weights in ({0: 0.9, 1: 0.1}, {"a/": 0.9, "b/": 0.1}, {0.9, 0.1}):
            with self.assertRaises(TypeError, msg=weights) as e:
                tt.MixSampler([10, 5], weights, 6, rank=0, world=1)
            self.assertIn("weights", str(e.exception))
            self.assertIn("one number per dataset", str(e.exception))
        for weights in (["0.9", "0.1"], [True, False]):
            with self.assertRaises(TypeError, msg=weights):
                tt.MixSampler([10, 5], weights, 6, rank=0, world=1)
        self.assertEqual(tt.MixSampler([10, 5], np.array([0.9, 0.1]), 10, rank=0, world=1).counts(), [9, 1])

    def test_mix_sampler_costs_the_epoch_not_the_datasets(self):
        # The bug: every epoch built a permutation of each whole dataset (N = 1e8: 22-47 s, 1.5 GB;
        # N = 1e9: 16 GB). Now each draw is computed alone: two datasets of 10^9 samples, 1000 a
        # epoch, cost the 1000 (the bounds are generous: the draws take milliseconds and < 1 MB).
        import resource
        import time
        import tracemalloc
        n = 10**9
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tracemalloc.start()
        t0 = time.monotonic()
        s = tt.MixSampler([n, n], [1, 3], samples_per_epoch=1000, rank=0, world=1, seed=7)
        epochs = []
        for epoch in (0, 1, 10**6):
            s.set_epoch(epoch)
            epochs.append(list(s))
        elapsed = time.monotonic() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024
        self.assertLess(elapsed, 1.0)
        self.assertLess(peak, 100 << 20)
        self.assertLess(rss, 100 << 20)
        for order in epochs:
            self.assertEqual(len(order), 1000)
            local = per_dataset(order, [n, n])
            self.assertEqual([len(d) for d in local], [250, 750])
            for d in local:
                self.assertTrue(all(0 <= i < n for i in d))
        # Without replacement across epochs: epochs 0 and 1 draw 2 x 750 distinct samples of dataset 1.
        drawn = per_dataset(epochs[0], [n, n])[1] + per_dataset(epochs[1], [n, n])[1]
        self.assertEqual(len(set(drawn)), 1500)
        # Far epochs too: items 10^6 x 750 ... of dataset 1's sequence, the permutation it falls in.
        expected = tarmac.sampling.permutation(n, 7 ^ (0x6D6978 << 40) ^ 1, (10**6 * 750) // n,
                                               np.arange(750) + (10**6 * 750) % n)
        self.assertEqual(sorted(per_dataset(epochs[2], [n, n])[1]), sorted(expected.tolist()))


class PermutationTest(unittest.TestCase):
    """tarmac.sampling.permutation: a keyed bijection of [0, n), item by item."""

    def test_it_is_a_permutation(self):
        for n in (1, 2, 3, 4, 5, 7, 8, 9, 10, 31, 32, 33, 100, 1000, 1023, 1024, 1025, 4097, 65537):
            for seed, epoch in ((0, 0), (3, 1), (2**64 - 1, 12345)):
                p = tarmac.sampling.permutation(n, seed, epoch, np.arange(n))
                self.assertEqual(p.dtype, np.int64)
                self.assertEqual(sorted(p.tolist()), list(range(n)), (n, seed, epoch))

    def test_seeds_and_epochs_differ_and_calls_agree(self):
        n = 1000
        a = tarmac.sampling.permutation(n, 3, 0, np.arange(n))
        np.testing.assert_array_equal(a, tarmac.sampling.permutation(n, 3, 0, np.arange(n)))
        self.assertFalse(np.array_equal(a, tarmac.sampling.permutation(n, 3, 1, np.arange(n))))
        self.assertFalse(np.array_equal(a, tarmac.sampling.permutation(n, 4, 0, np.arange(n))))
        self.assertFalse(np.array_equal(a, np.arange(n)))
        # Item by item: any positions, in any order, give the same items as the whole.
        at = np.array([999, 0, 17, 17, 500])
        np.testing.assert_array_equal(tarmac.sampling.permutation(n, 3, 0, at), a[at])
        # An epoch per position: each as its own epoch's permutation.
        epochs = np.array([0, 1, 0, 2, 1])
        got = tarmac.sampling.permutation(n, 3, epochs, at)
        for e, p, g in zip(epochs, at, got):
            self.assertEqual(g, tarmac.sampling.permutation(n, 3, int(e), np.arange(n))[p])

    def test_a_huge_n_costs_the_items_asked_for(self):
        import tracemalloc
        tracemalloc.start()
        p = tarmac.sampling.permutation(10**9, 5, 2, np.arange(10**4))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        self.assertLess(peak, 100 << 20)
        self.assertEqual(len(set(p.tolist())), 10**4)
        self.assertTrue(((p >= 0) & (p < 10**9)).all())
        p = tarmac.sampling.permutation(2**62 + 3, 1, 0, np.arange(100))
        self.assertEqual(len(set(p.tolist())), 100)

    def test_bad_arguments(self):
        for args in ((0, 0, 0, [0]), (5, 0, 0, [5]), (5, 0, 0, [-1]), (5, 0, -1, [0]), (5, 0, 0, [0.5])):
            with self.assertRaises(tarmac.ArgumentError, msg=args):
                tarmac.sampling.permutation(*args)


def image_seed(name, k):
    return 1000 * sum(map(ord, name)) + k


def convert(tmp, name, samples):
    """A dataset of PNG images (kept as PNG, so decoding gives the same pixels) and JSON labels:
    samples is a list of (width, height, labels)."""
    members = []
    for k, (w, h, labels) in enumerate(samples):
        members += [(f"{name}/{k:04d}.png", fx.png(fx.smooth_rgb(w, h, seed=image_seed(name, k)))),
                    (f"{name}/{k:04d}.json", fx.js(labels))]
    archive = fx.write_tar(os.path.join(tmp, name + ".tar"), members)
    out = os.path.join(tmp, name)
    subprocess.run([TARMAC, "convert", "-q", archive, "-o", out, "--format", "png"], check=True,
                   stdout=subprocess.DEVNULL)
    return out


@unittest.skipIf(tt is None, "torch is not installed")
class MixedDatasetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-mix-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        # "hyper" has scale and a nullable score, "kitti" has cam: each lacks the other's fields.
        cls.hyper = convert(cls.tmp, "hyper", [(32, 24, {"id": k, "scale": [k * 0.5, -k], "name": f"h{k}",
                                                          "score": None if k % 3 == 0 else k / 4})
                                                for k in range(10)])
        cls.kitti = convert(cls.tmp, "kitti", [(32, 24, {"id": 100 + k, "cam": [[k + 0.5, 0, 1], [0, k, 2]]})
                                                for k in range(4)])
        cls.big = convert(cls.tmp, "big", [(40, 30, {"id": 200 + k}) for k in range(3)])
        cls.odd = convert(cls.tmp, "odd", [(32, 24, {"id": k + 0.5}) for k in range(2)])  # id F64, not I64
        cls.ref = [fx.Dataset(p) for p in (cls.hyper, cls.kitti)]
        cls.mix = tt.MixedDataset([cls.hyper, cls.kitti])

    def expected(self, k, local):
        """Sample `local` of dataset k as the independent reader and the source images give it."""
        t, name = self.ref[k].t, ("hyper", "kitti")[k]
        image = fx.smooth_rgb(32, 24, seed=image_seed(name, int(self.ref[k].keys[local].split("/")[1])))
        out = {"__key__": self.ref[k].keys[local], "id": t["id"][local], "__affine__": t["__affine__"][local],
               "image": image.transpose(2, 0, 1)}
        for field, shape in (("scale", (2,)), ("score", ()), ("cam", (2, 3))):
            if field in t:
                out[field] = t[field][local]
                out[field + ".valid"] = bool(t[field + ".valid"][local]) if field + ".valid" in t else True
            else:
                out[field], out[field + ".valid"] = np.zeros(shape), False
        return out

    def test_values_are_the_datasets_values(self):
        mix = self.mix
        self.assertEqual(len(mix), 14)
        self.assertEqual(set(mix.fields), {"id", "scale", "score", "cam", "__affine__"})  # "name" is ragged
        for g in range(len(mix)):
            k, local = (0, g) if g < 10 else (1, g - 10)
            s, want = mix[g], self.expected(k, local)
            self.assertEqual(int(s["__dataset__"]), k)
            self.assertEqual(s["__dataset__"].dtype, torch.int64)
            self.assertEqual(s["__index__"], g)
            self.assertEqual(s["__key__"], want["__key__"])
            np.testing.assert_array_equal(s["image"].numpy(), want["image"])
            for field in ("id", "__affine__", "scale", "score", "cam"):
                np.testing.assert_array_equal(s[field].numpy(), want[field], err_msg=f"{field} of {g}")
            for field in ("scale", "score", "cam"):
                self.assertEqual(bool(s[field + ".valid"]), want[field + ".valid"], (field, g))
            self.assertEqual(s["cam"].dtype, torch.float64)
            self.assertNotIn("id.valid", s)  # present and non-nullable everywhere: no mask
        self.assertEqual(int(mix[-1]["__dataset__"]), 1)
        self.assertFalse(bool(mix[3]["score.valid"]))  # hyper's own null
        self.assertTrue(bool(mix[4]["score.valid"]))
        with self.assertRaises(IndexError):
            mix[14]

    def test_a_batch_equals_the_samples_in_its_order(self):
        mix = self.mix
        for idx in ([12, 3, 10, 0, 13, 3, 9], [2, 7, 1], [11, 10], torch.tensor([5, 13])):
            batch = mix[idx]
            samples = [mix[int(i)] for i in idx]
            self.assertEqual(batch["__key__"], [s["__key__"] for s in samples])
            self.assertEqual(batch["__index__"].tolist(), [int(i) for i in idx])
            self.assertEqual(batch["__dataset__"].dtype, torch.int64)
            collated = torch.utils.data.default_collate(samples)
            self.assertEqual(set(batch), set(collated))
            for name in batch:
                if name != "__key__":
                    self.assertTrue(torch.equal(batch[name], collated[name].to(batch[name].dtype)), name)
            self.assertEqual(batch["image"].shape, (len(idx), 3, 24, 32))

    def test_a_loader_with_the_sampler(self):
        mix = self.mix
        sampler = tt.MixSampler(mix, [0.9, 0.1], 12, rank=0, world=1, seed=2)
        self.assertEqual(sampler.counts(), [11, 1])
        loader = torch.utils.data.DataLoader(mix, batch_size=None, num_workers=1,
                                             sampler=torch.utils.data.BatchSampler(sampler, 4, drop_last=False))
        with self.assertLogs("tarmac", "INFO") as logs:
            batches = list(loader)
        self.assertIn(self.hyper, logs.output[0])
        self.assertEqual([int(i) for b in batches for i in b["__index__"]], list(sampler))
        self.assertEqual(sum(int((b["__dataset__"] == 1).sum()) for b in batches), 1)

    def test_images_of_several_sizes_are_refused_at_construction_naming_the_datasets(self):
        with self.assertRaises(ValueError) as e:
            tt.MixedDataset([self.hyper, self.big])
        for word in (self.hyper, self.big, "32x24", "40x30", "augment", "datasets"):
            self.assertIn(word, str(e.exception))
        self.assertEqual(len(tt.MixedDataset([self.big])), 3)  # one dataset: nothing to share
        labels_only = tt.MixedDataset([self.hyper, self.big], decode=False)  # no images: no size
        self.assertNotIn("image", labels_only[[0, 10]])

    def test_fields_and_given_datasets(self):
        mix = tt.MixedDataset([tt.TarmacDataset(self.kitti), self.hyper], fields=["id", "score"])
        self.assertEqual(mix.fields, ["id", "score"])
        s = mix[0]
        self.assertEqual((int(s["id"]), bool(s["score.valid"]), int(s["__dataset__"])), (100, False, 0))
        self.assertNotIn("cam", s)
        with self.assertRaises(ValueError) as e:
            tt.MixedDataset([self.hyper, self.kitti], fields=["nope"])
        self.assertIn("nope", str(e.exception))
        with self.assertRaises(ValueError) as e:
            tt.MixedDataset([tt.TarmacDataset(self.hyper, fields=["id"]), self.kitti], fields=["id", "scale"])
        self.assertIn("scale", str(e.exception))  # hyper has it, but the TarmacDataset given leaves it out
        with self.assertRaises(ValueError) as e:
            tt.MixedDataset([self.hyper, self.odd])
        for word in ("'id'", "int64", "float64", self.hyper, self.odd):
            self.assertIn(word, str(e.exception))


PAIRS = [(1, 2), (3, 4)]


def convert_dense(tmp, name, w, h, n, joints=5, depth=True, points="kp"):
    """PNG images of w x h, a points field (`points`) [joints, 3] and (with depth) a 16-bit depth PNG."""
    members = []
    for k in range(n):
        kp = [[2.5 + (3 * j + k) % (w - 4), 1.5 + (5 * j + 2 * k) % (h - 3), float(j % 2)] for j in range(joints)]
        members += [(f"{name}/{k:04d}.png", fx.png(fx.smooth_rgb(w, h, seed=image_seed(name, k)))),
                    (f"{name}/{k:04d}.json", fx.js({points: kp, "id": k}))]
        if depth:
            members.append((f"{name}/{k:04d}.depth.png", fx.png(fx.smooth_u16(w, h, seed=k) + 2000 * k)))
    archive = fx.write_tar(os.path.join(tmp, name + ".tar"), members)
    out = os.path.join(tmp, name)
    subprocess.run([TARMAC, "convert", "-q", archive, "-o", out, "--format", "png", "--points", points]
                   + (["--dense", "depth.png"] if depth else []), check=True, stdout=subprocess.DEVNULL)
    return out


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


@unittest.skipIf(tt is None, "torch is not installed")
class MixedAugmentTest(unittest.TestCase):
    """MixedDataset(augment=...): datasets of two stored sizes warped to one, with 16-bit PNG depth,
    checked against OpenCV on the stored bytes and the documented draws."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-mixaug-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.small = convert_dense(cls.tmp, "small", 32, 24, 7)
        cls.wide = convert_dense(cls.tmp, "wide", 48, 20, 5)
        cls.ref = [fx.Dataset(p) for p in (cls.small, cls.wide)]
        cls.aug = tarmac.Augment(size=(16, 20), flip=0.5, flip_pairs=PAIRS, rotate=25, scale=(0.8, 1.2),
                                 translate=0.1, fill=7)
        cls.seed = 2**63 + 5

    def mixed(self, **kw):
        kw.setdefault("fields", ["kp", "id"])
        return tt.MixedDataset([self.small, self.wide], augment=self.aug, seed=self.seed, dense=["depth"], **kw)

    def check_sample(self, g, epoch, get):
        """Sample g's image, kp, depth, __augment__ and __flip__ (get(name) -> its value as numpy)
        against OpenCV and numpy on the stored bytes, and its flip against the documented draw."""
        k = 0 if g < 7 else 1
        local = g - (0, 7)[k]
        ref = self.ref[k]
        m = get("__augment__")
        self.assertEqual(int(get("__dataset__")), k)
        seed_k = dataset_seed(self.seed, k)  # the seed the documentation gives
        flip = uniform(seed_k, epoch, local, 0) < 0.5
        self.assertEqual(bool(get("__flip__")), flip, g)
        self.assertEqual(np.linalg.det(m[:, :2]) < 0, flip)
        stored = fx.decode_rgb(ref.blob(local))
        want = cv2.warpAffine(stored, m, (20, 16), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                              borderValue=(7, 7, 7))
        self.assertGreaterEqual(psnr(get("image").transpose(1, 2, 0), want), 40, g)
        kp = fx.apply_affine(m, ref.t["kp"][local])
        if flip:
            for a, b in PAIRS:
                kp[[a, b]] = kp[[b, a]]
        np.testing.assert_allclose(get("kp"), kp, rtol=0, atol=1e-9)
        depth = fx.decode_unchanged(ref.blob(local, "__depth__"))
        self.assertEqual(depth.dtype, np.uint16)
        want = cv2.warpAffine(depth, m, (20, 16), flags=cv2.INTER_NEAREST, borderMode=cv2.BORDER_CONSTANT,
                              borderValue=0)
        np.testing.assert_array_equal(get("depth"), want)  # int32 in torch, the uint16 values
        self.assertEqual(int(get("id")), int(ref.t["id"][local]))

    def test_batches_and_samples_follow_the_stored_bytes_and_the_draws(self):
        mix = self.mixed()
        mix.set_epoch(3)
        idx = [8, 0, 11, 6, 7, 3, 8]
        batch = mix[idx]
        self.assertEqual(tuple(batch["image"].shape), (7, 3, 16, 20))
        self.assertEqual(tuple(batch["depth"].shape), (7, 16, 20))
        self.assertEqual(batch["depth"].dtype, torch.int32)
        self.assertEqual(batch["__augment__"].dtype, torch.float64)
        self.assertEqual(batch["__flip__"].dtype, torch.bool)
        for j, g in enumerate(idx):
            self.check_sample(g, 3, lambda name: batch[name][j].numpy())
            one = mix[g]  # the per-sample path: the same bytes
            for name in ("image", "kp", "depth", "__augment__", "__flip__", "__dataset__"):
                self.assertEqual(one[name].numpy().tobytes(), batch[name][j].numpy().tobytes(), (name, g))
        flips = [bool(mix[g]["__flip__"]) for g in range(12)]
        self.assertTrue(any(flips) and not all(flips))
        mix.set_epoch(4)
        self.assertFalse(torch.equal(mix[idx]["__augment__"], batch["__augment__"]))

    def test_dataset_zero_draws_as_its_tarmac_dataset(self):
        alone = tt.TarmacDataset(self.small, fields=["kp"], augment=self.aug, seed=self.seed, dense=["depth"])
        one = tt.MixedDataset([self.small], fields=["kp"], augment=self.aug, seed=self.seed, dense=["depth"])
        alone.set_epoch(1)
        one.set_epoch(1)
        a, b = alone[[2, 5]], one[[2, 5]]
        for name in ("image", "kp", "depth", "__augment__", "__flip__"):
            self.assertTrue(torch.equal(a[name], b[name]), name)

    def test_same_bytes_whatever_threads_workers_batches_and_resume(self):
        def run(threads, workers, world=1, resume=None):
            """Every sample the epoch's loader gives, by global index: {g: bytes of each value}."""
            mix = self.mixed(threads=threads)
            got = {}
            for rank in range(world):
                sampler = tt.MixSampler(mix, [0.7, 0.3], 10, rank=rank, world=world, seed=4)
                sampler.set_epoch(2)
                if resume:
                    sampler.load_state_dict(resume)
                mix.set_epoch(2)
                loader = torch.utils.data.DataLoader(mix, batch_size=None, num_workers=workers,
                                                     sampler=torch.utils.data.BatchSampler(sampler, 3, False))
                for b in loader:
                    for j, g in enumerate(b["__index__"].tolist()):
                        got[g] = tuple(b[n][j].numpy().tobytes() for n in ("image", "kp", "depth", "__augment__"))
            return got

        base = run(threads=1, workers=0)
        self.assertGreater(len(base), 5)
        self.assertEqual(run(threads=2, workers=2), base)
        # 4 ranks stopped after 1 sample each, resumed on 3 ranks: the rest of the epoch, same bytes.
        state = tt.MixSampler([7, 5], [0.7, 0.3], 10, rank=0, world=4, seed=4)
        state.set_epoch(2)
        resumed = run(threads=1, workers=1, world=3, resume=state.state_dict(consumed=1))
        self.assertTrue(resumed)
        for g, values in resumed.items():
            self.assertEqual(values, base[g], g)
        mix = self.mixed()  # another batch composition: each sample alone
        mix.set_epoch(2)
        for g in base:
            s = mix[g]
            self.assertEqual(tuple(s[n].numpy().tobytes() for n in ("image", "kp", "depth", "__augment__")), base[g])

    def test_bad_input_names_the_dataset_and_the_argument_at_construction(self):
        few = convert_dense(self.tmp, "few", 24, 24, 2, joints=3, points="hand")  # pair (3, 4) does not fit 3
        with self.assertRaises(ValueError) as e:
            tt.MixedDataset([self.small, few], augment=self.aug)
        for word in ("augment", "flip_pairs", few, "dataset 1", "'hand'"):
            self.assertIn(word, str(e.exception))
        flat = convert_dense(self.tmp, "flat", 24, 24, 2, depth=False)
        with self.assertRaises(ValueError) as e:
            tt.MixedDataset([self.small, flat], augment=self.aug, dense=["depth"])
        for word in ("dense", "'depth'", flat):
            self.assertIn(word, str(e.exception))
        with self.assertRaises(ValueError) as e:
            tt.MixedDataset([tt.TarmacDataset(self.small, augment=self.aug), self.wide], augment=self.aug)
        self.assertIn("augment", str(e.exception))
        with self.assertRaises(ValueError) as e:
            tt.MixedDataset([self.small, self.wide], dense=["depth"])
        self.assertIn("augment", str(e.exception))
        with self.assertRaises(ValueError) as e:
            tt.MixedDataset([self.small, self.wide], augment="flip")
        self.assertIn("augment", str(e.exception))
        given = tt.TarmacDataset(self.wide, fields=["kp", "id"])
        mix = tt.MixedDataset([self.small, given], fields=["kp", "id"], augment=self.aug, dense=["depth"])  # a copy
        self.assertIsNone(given.augment)
        self.assertEqual(tuple(mix[[0, 8]]["image"].shape), (2, 3, 16, 20))


if __name__ == "__main__":
    unittest.main()
