"""The deterministic per-epoch order of samples and its share per rank (docs/reader.md,
"Deterministic distributed order"), and batches of one image size for bucketed datasets."""
from __future__ import annotations

import ctypes
from typing import List

import numpy as np

from . import _format
from ._library import check, load_library
from .dataset import Dataset

__all__ = ["indices", "bucket_batches"]


def indices(n: int, rank: int = 0, world: int = 1, seed: int = 0, epoch: int = 0, shuffle: bool = True,
            drop_last: bool = False) -> np.ndarray:
    """Rank's share of the deterministic per-epoch order of n samples (int64 array).

    Every rank gets ceil(n / world) indices (floor with drop_last), disjoint between ranks up to
    the padding that repeats the order's start; identical on every machine (splitmix64 +
    Fisher-Yates, see docs/reader.md)."""
    lib = load_library()
    count = ctypes.c_uint64()
    check(lib.tarmac_partition_size(n, rank, world, int(drop_last), ctypes.byref(count)))
    out = np.empty(count.value, dtype=np.int64)
    check(lib.tarmac_indices(n, rank, world, seed & (2**64 - 1), epoch, int(shuffle), int(drop_last),
                             out.ctypes.data, out.size))
    return out


def bucket_batches(dataset: Dataset, batch_size: int, rank: int = 0, world: int = 1, seed: int = 0, epoch: int = 0,
                   shuffle: bool = True, drop_last: bool = True) -> List[np.ndarray]:
    """Rank's batches of epoch `epoch` for a dataset converted with --resize bucket: every batch
    holds images of one size (one aspect bucket), so it stacks into one array.

    The epoch's order (tarmac.indices over all samples) is grouped by image size, keeping that
    order within a bucket, and cut into batches of batch_size; a bucket's incomplete last batch
    is dropped (drop_last) or kept smaller. The batches are then put in a second deterministic
    order and dealt to the ranks in turn; every rank gets the same number of batches (the
    remainder is dropped with drop_last, else the first batches are dealt again), so
    distributed training steps in lockstep. Identical on every machine. Returns a list of
    int64 arrays."""
    if batch_size < 1 or world < 1 or not 0 <= rank < world:
        raise ValueError("need batch_size >= 1 and 0 <= rank < world")
    n = len(dataset)
    w = np.asarray(dataset.column(_format.IMAGE + ".width"), dtype=np.int64)
    h = np.asarray(dataset.column(_format.IMAGE + ".height"), dtype=np.int64)
    order = indices(n, 0, 1, seed, epoch, shuffle) if n else np.empty(0, dtype=np.int64)
    size_key = (w[order] << 32) | h[order]
    by_size = np.argsort(size_key, kind="stable")
    grouped = order[by_size]
    bounds = np.flatnonzero(np.diff(size_key[by_size])) + 1
    batches = []
    for group in np.split(grouped, bounds) if n else []:
        for start in range(0, len(group), batch_size):
            b = group[start:start + batch_size]
            if len(b) == batch_size or not drop_last:
                batches.append(b)
    if not batches:
        return []
    # The batches' own order: a second permutation (another seed stream), the same everywhere.
    perm = indices(len(batches), 0, 1, seed ^ 0x6275636B6574, epoch, shuffle)
    batches = [batches[int(i)] for i in perm]
    per_rank = len(batches) // world if drop_last else -(-len(batches) // world)
    return [batches[(rank + k * world) % len(batches)] for k in range(per_rank)]
