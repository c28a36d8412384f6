"""DataLoader workers reuse their shared-memory image buffers (tarmac._worker_pool; docs/reader.md,
"DataLoader workers"): every batch a worker sends equals ds.batch's bytes for the same indices,
computed in the main process; batches held to the end of the epoch are intact then (a buffer is
never written while the main process holds it); and the buffers are in fact reused, so that the
check is not vacuous. Reads the checked-in read12/ dataset. Needs TARMAC_LIB and PYTHONPATH=python/."""
import multiprocessing
import os
import unittest

import numpy as np

import tarmac

try:
    import torch
    import tarmac.torch as tt
except ImportError:
    tt = None
if tt is not None:
    from tarmac import _worker_pool

HERE = os.path.dirname(os.path.abspath(__file__))
READ12 = os.path.join(HERE, "..", "data", "datasets", "read12")
FIELDS = ["id", "vec", "cls"]


def batches(count, size, seed):
    rng = np.random.default_rng(seed)
    return [rng.choice(12, size, replace=False).tolist() for _ in range(count)]


def inode(t):
    """The shared-memory file under tensor t (what the worker sent)."""
    fd, _ = t.storage()._share_fd_cpu_()
    return os.fstat(fd).st_ino


@unittest.skipIf(tt is None, "torch is not installed")
class WorkerPoolTest(unittest.TestCase):
    def setUp(self):
        self.ds = tarmac.Dataset(READ12)

    def expect(self, batch, idx, where):
        images, labels = self.ds.batch(idx, fields=FIELDS)  # the oracle: ds.batch in the main process
        self.assertIs(type(batch["image"]), torch.Tensor, where)
        np.testing.assert_array_equal(batch["image"].permute(0, 2, 3, 1).numpy(), images, err_msg=where)
        for name in FIELDS:
            np.testing.assert_array_equal(batch[name].numpy(), labels[name], err_msg=f"{where} {name}")
        self.assertEqual(batch["__index__"].tolist(), idx, where)

    def loader(self, bs, workers=2, dataset=None):
        dataset = dataset or tt.TarmacDataset(READ12, fields=FIELDS)
        return torch.utils.data.DataLoader(dataset, batch_size=None, sampler=bs, num_workers=workers)

    def test_worker_batches_equal_ds_batch_and_buffers_are_reused(self):
        bs = batches(60, 4, 1)
        files = []
        for workers in (1, 2):
            for k, (b, idx) in enumerate(zip(self.loader(bs, workers), bs)):
                self.expect(b, idx, f"{workers} workers, batch {k}")
                files.append(inode(b["image"]))
        self.assertLess(len(set(files)), len(files) // 4, "the workers allocated a buffer per batch")

    def test_batches_held_to_the_end_of_the_epoch_are_not_overwritten(self):
        bs = batches(120, 4, 2)
        held = [(k, b) for k, b in enumerate(self.loader(bs)) if k % 10 == 0]
        self.assertEqual(len(held), 12)
        for k, b in held:
            self.expect(b, bs[k], f"held batch {k}")

    def test_batches_of_more_sizes_than_pooled_buffers(self):
        # Ten batch sizes cycling, more than a worker's 8 buffers: free buffers of another size
        # make room; every batch, and every tenth one held to the end, still equals ds.batch.
        rng = np.random.default_rng(5)
        bs = [rng.choice(12, 1 + k % 10, replace=False).tolist() for k in range(100)]
        held = []
        for k, b in enumerate(self.loader(bs)):
            self.expect(b, bs[k], f"batch {k}")
            if k % 10 == 0:
                held.append((k, b))
        for k, b in held:
            self.expect(b, bs[k], f"held batch {k}")

    def test_mixed_batches_from_workers_equal_ds_batch(self):
        mixed = tt.MixedDataset([READ12, READ12], fields=FIELDS)
        rng = np.random.default_rng(3)
        bs = [rng.choice(24, 5, replace=False).tolist() for _ in range(40)] + [[0, 1, 2], [13, 14, 15]] * 10
        held = []
        for k, b in enumerate(self.loader(bs, dataset=mixed)):
            self.expect(dict(b, __index__=b["__index__"] % 12), [i % 12 for i in bs[k]], f"mixed batch {k}")
            if k % 10 == 0:
                held.append((k, b))
        for k, b in held:
            self.expect(dict(b, __index__=b["__index__"] % 12), [i % 12 for i in bs[k]], f"held mixed batch {k}")

    def test_the_held_check_fails_for_a_pool_that_ignores_the_main_process(self):
        # The same test against a pool that reuses every buffer the main process received, held or
        # not: the held batches are overwritten, so the check above can fail.
        if multiprocessing.get_start_method() != "fork":
            # The patched method reaches the workers only by fork (the ASan phase starts them from
            # a fork server: scripts/sanitize/sitecustomize.py); the other phases run this.
            self.skipTest("the workers inherit the patched pool only when forked")
        released = _worker_pool._Pool._released
        _worker_pool._Pool._released = lambda self, candidates: candidates[0]  # forked workers inherit it
        try:
            bs = batches(120, 4, 2)
            held = [(k, b) for k, b in enumerate(self.loader(bs)) if k % 10 == 0]
        finally:
            _worker_pool._Pool._released = released
        with self.assertRaises(AssertionError):
            for k, b in held:
                self.expect(b, bs[k], f"held batch {k}")

    def test_a_receiver_that_keeps_no_descriptor_gets_no_reused_buffer(self):
        # A main process whose torch would not keep the received descriptor (so its hold could
        # not be seen) marks every buffer -1: each batch then has a file of its own.
        _worker_pool._keeps_fd = False
        try:
            bs = batches(30, 4, 6)
            got = list(self.loader(bs))
        finally:
            _worker_pool._keeps_fd = None
        self.assertEqual(len({inode(b["image"]) for b in got}), len(bs))
        for k, b in enumerate(got):
            self.expect(b, bs[k], f"batch {k}")

    def test_file_system_sharing_strategy_allocates_per_batch(self):
        strategy = torch.multiprocessing.get_sharing_strategy()
        torch.multiprocessing.set_sharing_strategy("file_system")
        try:
            bs = batches(30, 4, 4)
            held = [(k, b) for k, b in enumerate(self.loader(bs)) if k % 10 == 0]
        finally:
            torch.multiprocessing.set_sharing_strategy(strategy)
        for k, b in held:
            self.expect(b, bs[k], f"file_system held batch {k}")


if __name__ == "__main__":
    unittest.main()
