"""PyTorch adapters: a map-style Dataset and a deterministic distributed sampler.

    ds = tarmac.torch.TarmacDataset("out/", fields=["keypoints2d"])
    sampler = tarmac.torch.DistributedSampler(len(ds), rank=r, world=w, seed=0)
    loader = torch.utils.data.DataLoader(ds, batch_size=64, sampler=sampler, num_workers=8,
                                         pin_memory=True)
    for epoch in range(E):
        sampler.set_epoch(epoch)
        for batch in loader: ...

Fork-safe: the dataset is opened lazily in each process (by path) and the label file and
shards are memory maps, so N workers share one copy through the page cache instead of N.

A whole batch per call (less Python per sample, the images decoded straight into the shared
memory that carries them to the main process): give the loader batches of indices and no
batch_size; the dataset then returns the batch already stacked.

    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=8, pin_memory=True,
        sampler=torch.utils.data.BatchSampler(sampler, batch_size=64, drop_last=False))
"""
import os

import numpy as np
import torch
import torch.utils.data

import tarmac


class TarmacDataset(torch.utils.data.Dataset):
    """Sample i → {"image": uint8 tensor [C, H, W] (or [H, W, C] with chw=False), fields...,
    "__affine__", "__key__", "__index__"}. Only fixed-shape fields are returned (they collate);
    `fields` picks them (default: all fixed-shape fields). `threads`: native decoding threads
    for a whole batch (default: 1 in a loader worker, all cores in the main process).
    `channels`: C of every image, 3 (RGB, grey images replicated; the default) or 1 (grey,
    colour images converted), so that a dataset mixing grey and colour images collates.
    `columns`: the derived columns to include (default: all of ds.derived), each sample's
    output as a tensor (BF16 outputs as torch.bfloat16); a batch of one bucket stacks them."""

    def __init__(self, path, fields=None, decode=True, chw=True, transform=None, threads=None,
                 channels=3, columns=None):
        self.path = os.fspath(path)
        self.decode, self.chw, self.transform, self.threads = decode, chw, transform, threads
        if channels not in (1, 3):
            raise ValueError(f"channels must be 1 or 3, not {channels!r}")
        self.channels = channels
        ds = tarmac.Dataset(self.path)
        self._n = len(ds)
        self.fields = list(ds.fixed_fields() if fields is None else fields)
        self.columns = list(ds.derived if columns is None else columns)
        for name in self.columns:  # a missing or stale column fails here, not mid-epoch
            ds.derived_value(name, 0) if len(ds) else None
        self._ds, self._pid = None, None

    def _dataset(self):
        if self._pid != os.getpid():
            self._ds, self._pid = tarmac.Dataset(self.path), os.getpid()
        return self._ds

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_ds"], state["_pid"] = None, None
        return state

    def __len__(self):
        return self._n

    def __getitem__(self, i):
        if not isinstance(i, (int, np.integer)) and not (torch.is_tensor(i) and i.dim() == 0):
            return self._batch(i)
        ds = self._dataset()
        out = {"__key__": ds.key(i), "__index__": int(i)}
        if self.decode and ds.blob_kinds:
            img = torch.from_numpy(ds.decode(i, channels=self.channels))
            out["image"] = img.permute(2, 0, 1) if self.chw else img
        for name in self.fields:
            # Copies one sample's value (bytes) so the tensor owns writable memory for collate.
            # A nullable field: its stored value (zeros where none) and NAME.valid, so that
            # samples still collate.
            out[name] = torch.from_numpy(np.array(ds._stored_value(name, i)))
            if ds.fields.get(name, {}).get("nullable"):
                out[name + ".valid"] = torch.tensor(ds.value(name, i) is not None)
        for name in self.columns:
            out[name] = _column_tensor(ds, name, np.array(ds.derived_value(name, i)))
        return self.transform(out) if self.transform else out


    def _batch(self, indices):
        """Samples `indices` stacked: "image" uint8 [N, C, H, W] (a channels-last view of one
        NHWC block; [N, H, W, C] with chw=False), each field [N, ...], "__key__" a list. The
        images must share one size (a bucketed dataset: use BucketBatchSampler)."""
        ds = self._dataset()
        idx = [int(i) for i in indices]
        out = {"__key__": [ds.key(i) for i in idx], "__index__": torch.tensor(idx, dtype=torch.int64)}
        if self.decode and ds.blob_kinds:
            in_worker = torch.utils.data.get_worker_info() is not None
            w, h = ds.decoded_size(idx[0]) if idx else (1, 1)
            images = _uint8_tensor((len(idx), h, w, self.channels), shared=in_worker)
            threads = self.threads if self.threads is not None else (1 if in_worker else 0)
            _, labels = ds.batch(idx, fields=self.fields, out=images.numpy(), threads=threads,
                                 channels=self.channels)
            out["image"] = images.permute(0, 3, 1, 2) if self.chw else images
        else:
            labels = {name: np.stack([np.asarray(ds._stored_value(name, i)) for i in idx]) if idx else np.empty(0)
                      for name in self.fields}
            for name in self.fields:
                if ds.fields.get(name, {}).get("nullable"):
                    labels[name + ".valid"] = np.array([ds.value(name, i) is not None for i in idx], dtype=bool)
        for name in labels:
            out[name] = torch.from_numpy(labels[name])
        for name in self.columns:
            outputs = [ds.derived_value(name, i) for i in idx]
            if len({o.shape for o in outputs}) > 1:
                raise ValueError(f"derived column '{name}' has outputs of several shapes in one batch "
                                 f"({sorted({o.shape for o in outputs})}): batch by bucket "
                                 "(BucketBatchSampler)")
            out[name] = _column_tensor(ds, name, np.stack(outputs) if outputs else np.empty(0))
        return self.transform(out) if self.transform else out


def _column_tensor(ds, name, array):
    """A derived column's outputs as a tensor: BF16 (numpy holds its raw uint16 bits) as
    torch.bfloat16; unsigned types torch lacks widened (U16 to int32, U32 to int64)."""
    array = np.ascontiguousarray(array)
    if array.dtype == np.uint16 and ds._derived_dtype(name) == "BF16":
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    widen = {np.dtype(np.uint16): np.int32, np.dtype(np.uint32): np.int64}
    if array.dtype in widen:
        array = array.astype(widen[array.dtype])
    return torch.from_numpy(array)


def _uint8_tensor(shape, shared):
    """An uninitialised uint8 tensor; in shared memory when `shared` (a loader worker's batch,
    which then reaches the main process without a copy, as torch's own collate does)."""
    if not shared:
        return torch.empty(shape, dtype=torch.uint8)
    n = int(np.prod(shape))
    try:
        storage = torch.UntypedStorage._new_shared(n)
    except AttributeError:  # a torch without it: share (and copy) after allocating
        return torch.empty(shape, dtype=torch.uint8).share_memory_()
    return torch.empty(0, dtype=torch.uint8).set_(storage).view(shape)


def _deal(order, rank, world, drop_last):
    """Positions rank, rank + world, ... of `order`, padded cyclically from the order's start
    to ceil(len / world) items (cut to floor with drop_last): tarmac.indices' rule."""
    count = len(order) // world if drop_last else -(-len(order) // world)
    if not len(order):
        return order[:0]
    positions = (rank + np.arange(count, dtype=np.int64) * world) % len(order)
    if isinstance(order, np.ndarray):
        return order[positions]
    return [order[p] for p in positions.tolist()]


def _rank_world(rank, world):
    """rank and world, each defaulting to torch.distributed's (0 and 1 when it is not initialised)."""
    if rank is None or world is None:
        dist = torch.distributed
        ready = dist.is_available() and dist.is_initialized()
        rank = rank if rank is not None else (dist.get_rank() if ready else 0)
        world = world if world is not None else (dist.get_world_size() if ready else 1)
    return rank, world


class _Resumable:
    """state_dict()/load_state_dict() for the samplers (docs/reader.md, "Resuming mid-epoch").

    An epoch is one global order of items (samples, or bucket batches), a pure function of
    (seed, epoch); rank r of W takes positions r, r + W, r + 2W, ... of what is left of it. After
    every rank consumed c items in lockstep, the first `position` = start + c * W items of the
    order are done, whatever W was; a run resumed on W' ranks deals the rest of the order among
    them. So the union of what was seen before and after equals one epoch."""

    _unit = "items"

    def _init_state(self):
        self.epoch, self._start, self._start_epoch, self._yielded = 0, 0, None, 0

    def set_epoch(self, epoch):
        if epoch != self._start_epoch:  # a new epoch starts from its beginning
            self._start, self._start_epoch = 0, None
        self.epoch = epoch

    def _identity(self):
        return {"seed": self.seed, "shuffle": self.shuffle, "drop_last": self.drop_last, "size": self._size()}

    def state_dict(self, consumed=None):
        """{"epoch", "position", "world", "seed", "shuffle", "drop_last", "size"}. `consumed`: how
        many of this rank's items of the epoch the training loop has consumed (samples for
        DistributedSampler, batches for BucketBatchSampler: its steps); by default how many the
        iterator has yielded, which runs ahead of training when a DataLoader prefetches."""
        consumed = self._yielded if consumed is None else int(consumed)
        if consumed < 0:
            raise ValueError(f"consumed must be >= 0, not {consumed}")
        position = min(self._start + consumed * self.world, len(self._order()))
        return dict(self._identity(), epoch=self.epoch, position=position, world=self.world)

    def load_state_dict(self, state):
        """Goes on from `state` (another world size allowed): the epoch's items before its
        position are not yielded again. Refuses a state of another dataset size or order."""
        mine = self._identity()
        for key, value in mine.items():
            if state.get(key) != value:
                raise ValueError(f"cannot resume from this sampler state: its {key} is {state.get(key)!r}, this "
                                 f"sampler's is {value!r} (a state of another dataset or another order)")
        self.epoch = int(state["epoch"])
        self._start, self._start_epoch = int(state["position"]), self.epoch

    def _mine(self):
        order = self._order()
        return _deal(order[self._start:], self.rank, self.world, self.drop_last)

    def _share_len(self, total):
        """How many of the `total` items of the epoch this rank yields from the current position."""
        left = total - min(self._start, total)
        return left // self.world if self.drop_last else -(-left // self.world)

    def __iter__(self):
        self._yielded = 0
        for item in self._mine():
            self._yielded += 1
            yield self._item(item)


class DistributedSampler(_Resumable, torch.utils.data.Sampler):
    """Like torch's DistributedSampler, but the order comes from tarmac.indices: a fixed
    algorithm, identical on every machine and in C++. Call set_epoch() before each epoch.
    state_dict()/load_state_dict() resume mid-epoch, on the same or another number of ranks."""

    def __init__(self, num_samples, rank=None, world=None, seed=0, shuffle=True, drop_last=False):
        self.n = num_samples
        self.rank, self.world = _rank_world(rank, world)
        self.seed, self.shuffle, self.drop_last = seed, shuffle, drop_last
        self._init_state()

    def _size(self):
        return self.n

    def _order(self):
        # The whole epoch's order: tarmac.indices for one rank (no padding).
        return tarmac.indices(self.n, 0, 1, self.seed, self.epoch, self.shuffle, False) if self.n else \
            np.empty(0, dtype=np.int64)

    def _indices(self):
        if self._start == 0:  # the epoch from its start: exactly tarmac.indices' share
            return tarmac.indices(self.n, self.rank, self.world, self.seed, self.epoch, self.shuffle,
                                  self.drop_last)
        return np.asarray(self._mine(), dtype=np.int64)

    def _item(self, i):
        return int(i)

    def __iter__(self):
        self._yielded = 0
        for i in self._indices().tolist():
            self._yielded += 1
            yield i

    def __len__(self):
        return self._share_len(self.n)


class BucketBatchSampler(_Resumable, torch.utils.data.Sampler):
    """A batch_sampler for a dataset converted with --resize bucket: each batch holds images of
    one size, so the default collate stacks them (tarmac.bucket_batches has the rules). Every
    rank yields the same number of batches. Call set_epoch() before each epoch.
    state_dict()/load_state_dict() resume mid-epoch (positions count batches).

        loader = DataLoader(TarmacDataset(path), batch_sampler=BucketBatchSampler(path, 16))"""

    def __init__(self, dataset, batch_size, rank=None, world=None, seed=0, shuffle=True, drop_last=True):
        path = getattr(dataset, "path", dataset)
        self.dataset = dataset if isinstance(dataset, tarmac.Dataset) else tarmac.Dataset(path)
        self.batch_size = batch_size
        self.rank, self.world = _rank_world(rank, world)
        self.seed, self.shuffle, self.drop_last = seed, shuffle, drop_last
        self._init_state()

    def _size(self):
        return [len(self.dataset), self.batch_size]

    def _order(self):
        # The epoch's batches in their global order (bucket_batches for one rank deals them all);
        # the DataLoader asks for len() and iter() each epoch: computed once per epoch.
        if getattr(self, "_cached_epoch", None) != self.epoch:
            self._cached = tarmac.bucket_batches(self.dataset, self.batch_size, 0, 1, self.seed, self.epoch,
                                                 self.shuffle, self.drop_last)
            self._cached_epoch = self.epoch
        return self._cached

    def _batches(self):
        return self._mine()

    def _item(self, b):
        return b.tolist()

    def __len__(self):
        return len(self._batches())
