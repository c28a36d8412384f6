"""The deterministic per-epoch order of samples and its share per rank (docs/reader.md,
"Deterministic distributed order"), batches of one image size for bucketed datasets, and
permutations computed item by item (a keyed bijection, for samplers that draw a few items of a
large dataset)."""
from __future__ import annotations

import ctypes
import operator
from typing import List, TypeVar

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

from . import _format
from ._library import check, load_library
from .errors import ArgumentError
from .dataset import Dataset

__all__ = ["indices", "bucket_batches", "permutation"]


def indices(n: int, rank: int = 0, world: int = 1, seed: int = 0, epoch: int = 0, shuffle: bool = True,
            drop_last: bool = False) -> NDArray[np.int64]:
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
                   shuffle: bool = True, drop_last: bool = True) -> List[NDArray[np.int64]]:
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
        raise ArgumentError("need batch_size >= 1 and 0 <= rank < world")
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


_U64 = np.uint64
_ROUNDS = 6
_State = TypeVar("_State", NDArray[np.uint64], np.uint64)


def _mix(z: _State) -> _State:
    """splitmix64's step on state z (a uint64 array, or a numpy uint64): add 0x9E3779B97F4A7C15,
    then its finaliser. In place where z is an array."""
    z = z + _U64(0x9E3779B97F4A7C15)
    z ^= z >> _U64(30)
    z *= _U64(0xBF58476D1CE4E5B9)
    z ^= z >> _U64(27)
    z *= _U64(0x94D049BB133111EB)
    z ^= z >> _U64(31)
    return z


def permutation(n: int, seed: int, epoch: npt.ArrayLike, positions: npt.ArrayLike) -> NDArray[np.int64]:
    """Items `positions` of a permutation of [0, n) keyed by (seed, epoch), computed item by
    item: the cost is O(len(positions)) in time and memory, whatever n (docs/reader.md,
    "Permutations item by item"). `epoch` is an integer >= 0 or an array of them, one per
    position. Returns int64 in the shape of `positions`.

    A Feistel network over [0, 2^b), b = max(2, bits of n - 1), L of floor(b/2) bits and R of
    the rest, 6 rounds, walked until it falls below n (cycle walking: a bijection of [0, 2^b)
    restricted to [0, n) by following each value's cycle; fewer than 2 steps on average since
    2^b < 2n). Round r maps (L, R) to (R, L XOR (mix(key_r XOR R) mod 2^bits(L))), key_r =
    mix(key + r), key = mix(mix(seed) XOR epoch), mix splitmix64's step, all modulo 2^64. A pure
    function of its arguments, the same on every machine."""
    n = operator.index(n)
    if n < 1:
        raise ArgumentError(f"permutation: n must be >= 1, not {n}")
    pos = np.asarray(positions)
    if pos.size and (pos.dtype.kind not in "iu" or int(pos.min()) < 0 or int(pos.max()) >= n):
        raise ArgumentError(f"permutation: positions must be integers in [0, {n})")
    ep = np.asarray(epoch)
    if ep.dtype.kind not in "iu" or (ep.size and int(ep.min()) < 0):
        raise ArgumentError(f"permutation: epoch must be an integer >= 0, not {epoch!r}")
    if n == 1 or not pos.size:
        return np.zeros(pos.shape, dtype=np.int64)
    # The round keys of each distinct epoch (one, mostly: then they are scalars).
    epochs, which = np.unique(np.broadcast_to(ep, pos.shape).astype(_U64), return_inverse=True)
    key = _mix(_mix(np.full(epochs.shape, seed & (2**64 - 1), dtype=_U64)) ^ epochs)
    keys = [_mix(key + _U64(r)) for r in range(_ROUNDS)]
    keys = [k[0] for k in keys] if len(epochs) == 1 else [k[which.reshape(pos.shape)] for k in keys]
    bits = max(2, (n - 1).bit_length())
    x = pos.astype(_U64)
    todo = np.ones(x.shape, dtype=bool)  # cycle walking: the step again where the value is >= n
    ks = keys
    while True:
        y = x if todo.all() else x[todo]
        left = bits // 2  # bits of L; R has the rest
        for k in ks:
            right = bits - left
            low = y & _U64((1 << right) - 1)
            f = _mix(k ^ low)
            f &= _U64((1 << left) - 1)
            f ^= y >> _U64(right)
            low <<= _U64(left)
            low |= f
            y, left = low, right
        if todo.all():
            x = y
        else:
            x[todo] = y
        walk = x >= _U64(n)
        if not walk.any():
            return x.astype(np.int64)
        todo = walk
        ks = [k if np.ndim(k) == 0 else k[todo] for k in keys]
