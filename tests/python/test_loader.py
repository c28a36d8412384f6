"""tarmac.torch.Loader (docs/reader.md, "Loader"): every batch checked against ds.batch and the
TarmacDataset / MixedDataset batched path computed separately for the same indices, seed and
epoch; held batches, resume, clean stops and bad arguments. Reads the checked-in read12/
dataset (written by tests/data/datasets/make_datasets.py, not by tarmac). Needs TARMAC_LIB and
PYTHONPATH=python/."""
import gc
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

import numpy as np

import tarmac

try:
    import torch
    import tarmac.torch as tt
except ImportError:
    tt = None

HERE = os.path.dirname(os.path.abspath(__file__))
READ12 = os.path.join(HERE, "..", "data", "datasets", "read12")


def tasks():
    return len(os.listdir("/proc/self/task"))


def same(test, got, want, where):
    """got equals want: tensors by bytes, lists element by element."""
    test.assertEqual(sorted(got), sorted(want), where)
    for k in want:
        a, b = got[k], want[k]
        if torch.is_tensor(b):
            test.assertTrue(torch.is_tensor(a), f"{where} {k}")
            test.assertEqual((a.dtype, tuple(a.shape)), (b.dtype, tuple(b.shape)), f"{where} {k}")
            test.assertTrue(torch.equal(a, b), f"{where} {k}")
        elif isinstance(b, list):
            test.assertEqual(len(a), len(b), f"{where} {k}")
            for x, y in zip(a, b):
                if torch.is_tensor(y):
                    test.assertTrue(torch.equal(x, y), f"{where} {k}")
                else:
                    test.assertEqual(x, y, f"{where} {k}")
        else:
            test.assertEqual(a, b, f"{where} {k}")


def batches(n, size, seed):
    order = np.random.default_rng(seed).permutation(n).tolist()
    return [order[i:i + size] for i in range(0, n, size)]


@unittest.skipIf(tt is None, "torch is not installed")
class LoaderTest(unittest.TestCase):
    aug = tarmac.Augment(size=(16, 20), flip=0.5, rotate=20, scale=(0.8, 1.2), fill=3) if tt else None

    def test_same_bytes_as_ds_batch_for_threads_and_prefetch(self):
        ds = tarmac.Dataset(READ12)
        bs = batches(12, 5, 1)
        for threads in (1, 2):
            for prefetch in range(5):
                got = list(tt.Loader(READ12, bs, threads=threads, prefetch=prefetch))
                self.assertEqual(len(got), len(bs))
                for b, idx in zip(got, bs):
                    images, labels = ds.batch(idx)  # the oracle: ds.batch alone
                    np.testing.assert_array_equal(b["image"].permute(0, 2, 3, 1).numpy(), images)
                    for name in ("id", "vec", "cls"):
                        np.testing.assert_array_equal(b[name].numpy(), labels[name])
                    self.assertEqual(b["__key__"], [f"s/{i:04d}" for i in idx])
                    self.assertEqual(b["__index__"].tolist(), idx)

    def test_ragged_strings_dense_augmented_chw_equal_the_batched_path(self):
        cases = [dict(fields=["id", "pts", "name", "cls"]),
                 dict(fields=["id", "pts"], augment=self.aug, seed=7, dense=["depth"]),
                 dict(fields=["vec"], chw=False), dict(decode=False, fields=["id", "pts", "name"])]
        bs = batches(12, 4, 2)
        for kw in cases:
            ref = tt.TarmacDataset(READ12, **kw)
            for epoch in (0, 3):
                ref.set_epoch(epoch)
                given = {k: v for k, v in kw.items() if k != "decode"}
                loader = tt.Loader(ref if "decode" in kw else READ12, bs, threads=2, prefetch=2, **given)
                loader.set_epoch(epoch)
                for k, (b, idx) in enumerate(zip(loader, bs)):
                    same(self, b, ref[idx], f"{kw} epoch {epoch} batch {k}")
                if "augment" in kw:  # and by ds.batch directly, the dense map too
                    _, labels = tarmac.Dataset(READ12).batch(bs[-1], fields=["id"], augment=self.aug, seed=7,
                                                             epoch=epoch, dense=["depth"])
                    np.testing.assert_array_equal(b["depth"].numpy(), labels["depth"].astype(np.int32))
        # a TarmacDataset given: its settings are the loader's
        ref = tt.TarmacDataset(READ12, fields=["id", "pts"], augment=self.aug, seed=7, dense=["depth"])
        ref.set_epoch(2)
        for b, idx in zip(tt.Loader(ref, bs), bs):
            same(self, b, ref[idx], "TarmacDataset given")

    def test_mixed_equals_the_mixed_batched_path(self):
        for kw in ({}, dict(augment=self.aug, seed=5, dense=["depth"])):
            mixed = tt.MixedDataset([READ12, READ12], fields=["id", "pts", "name"], **kw)
            mixed.set_epoch(1)
            bs = batches(24, 7, 3) + [[0, 1, 2], [13, 14]]  # mixed batches and single-dataset ones
            for prefetch in (0, 3):
                for k, (b, idx) in enumerate(zip(tt.Loader(mixed, bs, prefetch=prefetch, threads=2), bs)):
                    same(self, b, mixed[idx], f"{kw} prefetch {prefetch} batch {k}")

    def test_ds_batch_alloc_is_where_the_loader_writes_and_a_wrong_array_is_refused(self):
        ds = tarmac.Dataset(READ12)
        given = {}

        def alloc(name, shape, dtype):
            given[name] = np.full(shape, 77, dtype=dtype)
            return given[name]

        images, labels = ds.batch([2, 7], fields=["id", "vec"], alloc=alloc)
        want_images, want = ds.batch([2, 7], fields=["id", "vec"])
        self.assertIs(images, given["image"])
        self.assertIs(labels["vec"], given["vec"])
        np.testing.assert_array_equal(images, want_images)
        np.testing.assert_array_equal(labels["vec"], want["vec"])
        with self.assertRaises(ValueError) as e:
            ds.batch([2, 7], fields=["id"], alloc=lambda name, shape, dtype: np.empty(1, dtype=dtype))
        self.assertIn("alloc('image')", str(e.exception))

    def test_held_batches_are_not_overwritten(self):
        ds = tarmac.Dataset(READ12)
        bs = [[i % 12, (i * 5) % 12, (i * 7 + 3) % 12] for i in range(60)]
        loader = tt.Loader(READ12, bs, prefetch=3, threads=2)
        kept = []
        for k, b in enumerate(loader):
            if k % 10 == 0:
                kept.append((k, b))
        self.assertEqual(len(kept), 6)
        for k, b in kept:  # checked only now, after every later batch was decoded
            images, labels = ds.batch(bs[k])
            np.testing.assert_array_equal(b["image"].permute(0, 2, 3, 1).numpy(), images, f"batch {k}")
            np.testing.assert_array_equal(b["id"].numpy(), labels["id"])
        # the ring was reused: far fewer slots than batches
        self.assertLessEqual(len(loader._ring.slots), loader._ring.bound)

    def test_resume_mid_epoch_equals_the_uninterrupted_tail(self):
        def loader():
            sampler = tt.BucketBatchSampler(READ12, 2, seed=4, drop_last=False)
            return tt.Loader(READ12, sampler, fields=["id"], augment=self.aug, seed=9, prefetch=3)

        full = loader()
        full.set_epoch(1)
        whole = list(full)
        first = loader()
        first.set_epoch(1)
        it = iter(first)
        for _ in range(2):
            next(it)
        state = first.state_dict()  # 2 consumed, whatever was prefetched
        self.assertEqual(state["position"], 2)
        second = loader()
        second.load_state_dict(state)
        tail = list(second)
        self.assertEqual(len(tail), len(whole) - 2)
        for k, (a, b) in enumerate(zip(tail, whole[2:])):
            same(self, a, b, f"resumed batch {k}")
        # a torch BatchSampler over a sampler with state: counted in samples
        sampler = torch.utils.data.BatchSampler(tt.ShardedSampler(12, rank=0, world=1, seed=2), 5, False)
        lo = tt.Loader(READ12, sampler)
        it = iter(lo)
        next(it)
        self.assertEqual(lo.state_dict()["position"], 5)

    def test_errors_are_raised_in_the_callers_thread_at_next(self):
        it = iter(tt.Loader(READ12, [[0, 1], [3, 99]], prefetch=2))
        self.assertEqual(next(it)["__index__"].tolist(), [0, 1])
        with self.assertRaises(tarmac.RangeError) as e:
            next(it)
        self.assertIn("batch 1", str(e.exception))
        self.assertIn("99", str(e.exception))
        ds = tarmac.Dataset(READ12)
        it = iter(tt.Loader(ds, [[0], [1], [2], [3]], prefetch=1))
        next(it)
        ds.close()
        with self.assertRaises(tarmac.ArgumentError) as e:
            for _ in range(3):
                next(it)
        self.assertIn("closed", str(e.exception))

    def test_a_tarmac_error_of_a_code_the_package_does_not_know_keeps_its_class_and_code(self):
        # error_for_code gives a bare TarmacError for a newer library's code; its __init__ takes
        # (code, message), and the loader's "batch N" prefix once raised a TypeError in its place.
        original = tarmac.Dataset.batch

        def newer(ds, *args, **kwargs):
            raise tarmac.TarmacError(99, "a failure of a newer library")
        tarmac.Dataset.batch = newer
        try:
            for prefetch in (0, 1):
                with self.assertRaises(tarmac.TarmacError) as e:
                    next(iter(tt.Loader(READ12, [[0, 1]], prefetch=prefetch)))
                self.assertIs(type(e.exception), tarmac.TarmacError)
                self.assertEqual(e.exception.code, 99)
                self.assertEqual(str(e.exception), "Loader: batch 0: a failure of a newer library")
        finally:
            tarmac.Dataset.batch = original
        with self.assertRaises(tarmac.RangeError) as e:  # a subclass: its class and code as before
            next(iter(tt.Loader(READ12, [[99]], prefetch=0)))
        self.assertEqual(e.exception.code, tarmac.RangeError("").code)

    def test_chw_of_a_mixed_dataset_is_its_datasets(self):
        # A MixedDataset has no .chw of its own (its TarmacDatasets do): chw=False once raised an
        # AttributeError here, for a mix of either layout.
        with self.assertRaises(tarmac.ArgumentError) as e:
            tt.Loader(tt.MixedDataset([READ12, READ12]), [[0]], chw=False)
        self.assertIn("chw=False but the MixedDataset has chw=True", str(e.exception))
        mixed = tt.MixedDataset([READ12, READ12], chw=False)
        bs = [[0, 13, 2], [20]]
        for b, idx in zip(tt.Loader(mixed, bs, chw=False), bs):
            self.assertEqual(tuple(b["image"].shape), (len(idx), 24, 32, 3))  # channels last
            same(self, b, mixed[idx], f"chw=False batch {idx}")

    def test_bad_arguments_name_the_argument(self):
        for kw, word in ((dict(prefetch=-1), "prefetch"), (dict(prefetch=1.5), "prefetch"),
                         (dict(threads=-2), "threads"), (dict(fields=["nope"]), "nope"),
                         (dict(pin_memory="yes"), "pin_memory"), (dict(device="tpu"), "device")):
            with self.assertRaises(tarmac.ArgumentError) as e:
                tt.Loader(READ12, [[0]], **kw)
            self.assertIn(word, str(e.exception))
        if not torch.cuda.is_available():
            with self.assertRaises(tarmac.ArgumentError) as e:
                tt.Loader(READ12, [[0]], device="cuda")
            self.assertIn("device", str(e.exception))
        if not torch.cuda.is_available():  # pin_memory=True asks for page-locked buffers only with CUDA
            loader = tt.Loader(READ12, [[0, 1]], pin_memory=True)
            self.assertFalse(loader.pin_memory)
            self.assertEqual(next(iter(loader))["image"].shape, (2, 3, 24, 32))
        ref = tt.TarmacDataset(READ12, fields=["id"])
        with self.assertRaises(tarmac.ArgumentError) as e:
            tt.Loader(ref, [[0]], fields=["vec"])
        self.assertIn("fields", str(e.exception))
        with self.assertRaises(tarmac.ArgumentError):
            tt.Loader(42, [[0]])

    def test_del_break_and_an_exception_leave_no_thread(self):
        gc.collect()
        before_threads, before_tasks = len(threading.enumerate()), tasks()
        bs = [[i % 12] * 4 for i in range(200)]

        def body(how):
            loader = tt.Loader(READ12, bs, prefetch=4, threads=2)
            it = iter(loader)
            next(it)
            if how == "break":
                for k, _ in enumerate(it):
                    if k == 3:
                        break
            elif how == "exception":
                try:
                    for _ in it:
                        raise RuntimeError("in the loop")
                except RuntimeError:
                    pass
            return loader

        for how in ("break", "exception", "del"):
            start = time.monotonic()
            loader = body(how)
            if how != "del":  # the iterator is gone: its thread ends while the loader lives
                self.assertEqual(len(threading.enumerate()), before_threads, how)
            del loader
            gc.collect()
            self.assertLess(time.monotonic() - start, 2.0, how)
            self.assertEqual(len(threading.enumerate()), before_threads, how)
            self.assertEqual(tasks(), before_tasks, how)  # the native decoding threads too

    def test_sigint_stops_within_a_second(self):
        child = r"""
import os, sys, threading, time
import tarmac.torch as tt
loader = tt.Loader(sys.argv[1], [[i % 12] * 8 for i in range(100000)], prefetch=4, threads=2)
try:
    for k, b in enumerate(loader):
        if k == 5:
            print("ready", flush=True)
        time.sleep(0.002)
except KeyboardInterrupt:
    t0 = time.monotonic()
    while len(threading.enumerate()) > 1 and time.monotonic() - t0 < 5:
        time.sleep(0.01)
    print("stopped", len(threading.enumerate()), round(time.monotonic() - t0, 3), flush=True)
"""
        p = subprocess.Popen([sys.executable, "-c", child, READ12], stdout=subprocess.PIPE, text=True)
        self.assertEqual(p.stdout.readline().strip(), "ready")
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        line = p.stdout.readline().split()
        p.wait(timeout=10)
        p.stdout.close()
        self.assertLess(time.monotonic() - sent, 3.0)  # including the interpreter's exit
        self.assertEqual(line[:2], ["stopped", "1"])
        self.assertLess(float(line[2]), 1.0)


if __name__ == "__main__":
    unittest.main()
