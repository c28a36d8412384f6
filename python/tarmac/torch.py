"""PyTorch adapters: a map-style Dataset, deterministic distributed samplers, and several
datasets mixed by weight (MixedDataset, MixSampler; docs/reader.md, "Mixing datasets by weight").

    ds = tarmac.torch.TarmacDataset("out/", fields=["keypoints2d"])
    sampler = tarmac.torch.ShardedSampler(len(ds), rank=r, world=w, seed=0)
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
from __future__ import annotations

import abc
import collections.abc
import copy
import fractions
import logging
import math
import numbers
import operator
import os
import warnings
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union, cast

import numpy as np
import torch
import torch.utils.data
from numpy.typing import NDArray

import tarmac

from . import _format, _worker_pool
from .dataset import _Alloc
from .errors import ArgumentError, RangeError, WrongTypeError
from .loader import Loader  # noqa: F401  (tarmac.torch.Loader; the module imports this one lazily)

_Path = Union[str, "os.PathLike[str]"]
# What a transform= takes (a sample or a batch: a dict) and gives (anything the training loop takes).
_Transform = Callable[[Dict[str, Any]], Any]
# MixedDataset._batch's part_batch(k, local indices, alloc): dataset k's batch, a dict.
_PartBatch = Callable[[int, NDArray[np.int64], Optional[_Alloc]], Dict[str, Any]]
# A sampler's order of an epoch: sample indices, or batches of them (BucketBatchSampler).
_Order = Union[NDArray[np.int64], List[NDArray[np.int64]]]

_log = logging.getLogger("tarmac")


class TarmacDataset(torch.utils.data.Dataset[Any]):
    """Sample i → {"image": uint8 tensor [C, H, W] (or [H, W, C] with chw=False), fields...,
    "__affine__", "__key__", "__index__"}. Only fixed-shape fields are returned (they collate);
    `fields` picks them (default: all fixed-shape fields). `threads`: native decoding threads
    for a whole batch (default: 1 in a loader worker, all cores in the main process).
    `channels`: C of every image, 3 (RGB, grey images replicated; the default) or 1 (grey,
    colour images converted), so that a dataset mixing grey and colour images collates.
    `columns`: the derived columns to include (default: all of ds.derived), each sample's
    output as a tensor (BF16 outputs as torch.bfloat16); a batch of one bucket stacks them.
    `augment`: a tarmac.Augment applied in the batch decode (docs/reader.md, "Augmentation"),
    sample i's draw a pure function of (seed, epoch, i); call set_epoch(e) every epoch (before
    the DataLoader's iterator is made: workers take a copy of the dataset, so with
    persistent_workers the epoch they see does not change). Samples then also hold
    "__augment__" (float64 [2, 3]) and "__flip__", and each dense map named in `dense` (.npy
    or PNG) warped with the image. A single index is decoded as a batch of one. Values of a
    dtype torch lacks are widened: uint16 (a 16-bit depth map) to int32, uint32 to int64.
    `cache`, `cache_size`: for a dataset in object storage ("s3://bucket/prefix/"), the local
    folder its shards are downloaded into on first use, and the most bytes kept there
    (tarmac.Dataset; every worker shares the folder)."""

    def __init__(self, path: _Path, fields: Optional[Sequence[str]] = None, decode: bool = True,
                 chw: bool = True, transform: Optional[_Transform] = None, threads: Optional[int] = None,
                 channels: int = 3, columns: Optional[Sequence[str]] = None, augment: Optional[tarmac.Augment] = None,
                 seed: int = 0, dense: Optional[Sequence[str]] = None, cache: Optional[_Path] = None,
                 cache_size: int = 0) -> None:
        self.path = os.fspath(path)
        self.cache, self.cache_size = cache, cache_size
        if augment is not None and not isinstance(augment, tarmac.Augment):
            raise ArgumentError(f"augment must be a tarmac.Augment, not {type(augment).__name__}")
        if augment is None and dense:
            raise ArgumentError("dense maps are batched with an augmentation: give augment=")
        self.augment, self.seed, self.epoch, self.dense = augment, int(seed), 0, list(dense or [])
        self.decode, self.chw, self.transform, self.threads = decode, chw, transform, threads
        if channels not in (1, 3):
            raise ArgumentError(f"channels must be 1 or 3, not {channels!r}")
        self.channels = channels
        ds = tarmac.Dataset(self.path, cache=cache, cache_size=cache_size)
        self._n = len(ds)
        self.fields = list(ds.fixed_fields() if fields is None else fields)
        self.columns = list(ds.derived if columns is None else columns)
        for name in self.columns:  # a missing or stale column fails here, not mid-epoch
            ds.derived_value(name, 0) if len(ds) else None
        if augment is not None and decode and ds.blob_kinds:
            # An empty batch checks the augment against the fields (flip_pairs in range, declared
            # kinds' shapes, undeclared geometric names) before any batch, decoding nothing.
            ds.batch([], fields=self.fields, augment=augment, dense=self.dense, threads=1, channels=channels)
        self._ds: Optional[tarmac.Dataset] = None
        self._pid: Optional[int] = None

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose augmentation draws samples get (with `augment`)."""
        self.epoch = int(epoch)

    def _dataset(self) -> tarmac.Dataset:
        if self._pid != os.getpid() or self._ds is None:
            self._ds, self._pid = tarmac.Dataset(self.path, cache=self.cache, cache_size=self.cache_size), os.getpid()
        return self._ds

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state["_ds"], state["_pid"] = None, None
        return state

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if not _is_index(i):
            return self._batch(i)
        if self.augment is not None and self.decode:
            one = self._batch([i], transform=False)
            out = {k: (v[0] if k != "__index__" else int(v[0])) for k, v in one.items()}
            return self.transform(out) if self.transform else out
        ds = self._dataset()
        out = {"__key__": ds.key(i), "__index__": int(i)}
        if self.decode and ds.blob_kinds:
            img = torch.from_numpy(ds.decode(i, channels=self.channels))
            out["image"] = img.permute(2, 0, 1) if self.chw else img
        for name in self.fields:
            # Copies one sample's value (bytes) so the tensor owns writable memory for collate.
            # A nullable field: its stored value (zeros where none) and NAME.valid, so that
            # samples still collate. A string is a str, JSON its parsed value, a ragged field
            # its slice as a tensor (None where a nullable one has none): collate lists them.
            if _listed(ds, name):
                out[name] = _list_value(ds.value(name, i))
            else:
                out[name] = _label_tensor(np.array(ds.stored_value(name, i)))
            if ds.fields.get(name, {}).get("nullable"):
                out[name + ".valid"] = torch.tensor(ds.value(name, i) is not None)
        for name in self.columns:
            out[name] = _column_tensor(ds, name, np.array(ds.derived_value(name, i)))
        return self.transform(out) if self.transform else out


    def _batch(self, indices: Iterable[Any], shared: Optional[bool] = None, transform: bool = True) -> Any:
        """Samples `indices` stacked: "image" uint8 [N, C, H, W] (a channels-last view of one
        NHWC block; [N, H, W, C] with chw=False), each field [N, ...], "__key__" a list. The
        images must share one size (a bucketed dataset: use BucketBatchSampler). `shared`: the
        images in shared memory (default: in a loader worker)."""
        ds = self._dataset()
        idx = [int(i) for i in indices]
        out: Dict[str, Any] = {"__key__": [ds.key(i) for i in idx], "__index__": torch.tensor(idx, dtype=torch.int64)}
        if self.decode and ds.blob_kinds:
            in_worker = torch.utils.data.get_worker_info() is not None  # type: ignore[no-untyped-call]
            if self.augment is not None:
                h, w = self.augment.size
            else:
                w, h = ds.decoded_size(idx[0]) if idx else (1, 1)
            shared = in_worker if shared is None else shared
            images = _uint8_tensor((len(idx), h, w, self.channels), shared=shared)
            threads = self.threads if self.threads is not None else (1 if in_worker else 0)
            extra: Dict[str, Any] = {}
            if self.augment is not None:
                extra = dict(augment=self.augment, seed=self.seed, epoch=self.epoch, dense=self.dense)
            _, labels = ds.batch(idx, fields=self.fields, out=images.numpy(), threads=threads,
                                 channels=self.channels, **extra)
            out["image"] = _worker_pool.mark(images.permute(0, 3, 1, 2) if self.chw else images)
        else:
            labels = {name: [ds.value(name, i) for i in idx] if _listed(ds, name) else
                      np.stack([np.asarray(ds.stored_value(name, i)) for i in idx]) if idx else np.empty(0)
                      for name in self.fields}
            for name in self.fields:
                if ds.fields.get(name, {}).get("nullable"):
                    labels[name + ".valid"] = np.array([ds.value(name, i) is not None for i in idx], dtype=bool)
        for name in labels:  # strings, JSON and ragged fields (and ragged boxes' .valid) are lists
            v = labels[name]
            out[name] = [_list_value(x) for x in v] if isinstance(v, list) else _label_tensor(v)
        for name in self.columns:
            outputs = [ds.derived_value(name, i) for i in idx]
            if len({o.shape for o in outputs}) > 1:
                raise ArgumentError(f"derived column '{name}' has outputs of several shapes in one batch "
                                    f"({sorted({o.shape for o in outputs})}): batch by bucket "
                                    "(BucketBatchSampler)")
            out[name] = _column_tensor(ds, name, np.stack(outputs) if outputs else np.empty(0))
        return self.transform(out) if self.transform and transform else out


def _is_index(i: Any) -> bool:
    """True for one sample's index, False for a batch of them (a list, array or 1-d tensor)."""
    return isinstance(i, (int, np.integer)) or (isinstance(i, torch.Tensor) and i.dim() == 0)


_WIDEN = {np.dtype(np.uint16): np.int32, np.dtype(np.uint32): np.int64}


def _label_tensor(array: NDArray[Any]) -> torch.Tensor:
    """A label array as a tensor; unsigned types torch lacks widened (U16 to int32, U32 to int64:
    a 16-bit depth map's values are kept), and U64 (a --dedup __phash__) its bits reinterpreted
    as int64, as torch users keep hashes: values >= 2^63 read negative, `.view(np.uint64)` of
    the tensor's numpy gives them back, and equality (what a hash is for) is kept."""
    if array.dtype in _WIDEN:
        array = array.astype(_WIDEN[array.dtype])
    elif array.dtype == np.uint64:
        array = np.ascontiguousarray(array).view(np.int64)
    return torch.from_numpy(array)


def _listed(ds: tarmac.Dataset, name: str) -> bool:
    """A string, JSON or ragged field: one value per sample, batched as a list."""
    f = ds.fields.get(name)
    return f is not None and (f["ragged"] or f["kind"] != _format.NUMERIC)


def _list_value(v: Any) -> Any:
    """One sample's value of a listed field: a ragged slice (read-only, zero-copy) as a tensor
    of its own; str, parsed JSON and None as they are."""
    return _label_tensor(np.array(v)) if isinstance(v, np.ndarray) else v


def _column_tensor(ds: tarmac.Dataset, name: str, array: NDArray[Any]) -> torch.Tensor:
    """A derived column's outputs as a tensor: BF16 (numpy holds its raw uint16 bits) as
    torch.bfloat16; unsigned types torch lacks widened (U16 to int32, U32 to int64)."""
    array = np.ascontiguousarray(array)
    if array.dtype == np.uint16 and ds.derived_dtype(name) == _format.BF16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return _label_tensor(array)


def _uint8_tensor(shape: Tuple[int, ...], shared: bool) -> torch.Tensor:
    """An uninitialised uint8 tensor; in shared memory when `shared` (a loader worker's batch,
    which then reaches the main process without a copy, as torch's own collate does): one of
    the worker's reused buffers when one is free (tarmac._worker_pool)."""
    if not shared:
        return torch.empty(shape, dtype=torch.uint8)
    pooled = _worker_pool.shared_uint8(shape)
    if pooled is not None:
        return pooled
    n = int(np.prod(shape))
    try:
        storage = torch.UntypedStorage._new_shared(n)  # type: ignore[no-untyped-call]  # (see tarmac._worker_pool)
    except AttributeError:  # a torch without it: share (and copy) after allocating
        return torch.empty(shape, dtype=torch.uint8).share_memory_()  # type: ignore[no-untyped-call,no-any-return]
    return torch.empty(0, dtype=torch.uint8).set_(storage).view(shape)


class MixedDataset(torch.utils.data.Dataset[Any]):
    """Several datasets as one: index i is position i of their concatenation, and each sample
    carries "__dataset__" (int64: which dataset) besides what TarmacDataset gives. `datasets`:
    paths, or TarmacDatasets used as they are (their fields, columns, channels; no transform).

    The fields are the union over the datasets (or `fields`). A field that a dataset lacks is
    zeros of the field's shape and dtype there, with NAME.valid False (format.md 1.4); such a
    field, and one nullable in some dataset, has NAME.valid in every sample (True where the
    dataset has a value). The derived columns are those every dataset has (or `columns`).
    A list of indices gives the batch stacked, in that order (one ds.batch per dataset). The
    images of all the datasets must share one size (an ArgumentError, a ValueError, at construction otherwise),
    unless `augment` (a tarmac.Augment) warps every sample to its size: then every dataset's
    samples are augmented, on the per-sample and the batched path, with "__augment__",
    "__flip__" and each dense map named in `dense` (every dataset must have it) as
    TarmacDataset gives them. Sample `local` of dataset k draws as ds.batch(seed=
    dataset_seed(k), epoch, index local) of that dataset alone; call set_epoch(e) every epoch.
    The other arguments are TarmacDataset's."""

    def __init__(self, datasets: Iterable[Union[_Path, TarmacDataset]], fields: Optional[Sequence[str]] = None,
                 decode: bool = True, chw: bool = True, transform: Optional[_Transform] = None,
                 threads: Optional[int] = None, channels: int = 3, columns: Optional[Sequence[str]] = None,
                 augment: Optional[tarmac.Augment] = None, seed: int = 0,
                 dense: Optional[Sequence[str]] = None) -> None:
        datasets = list(datasets)
        if not datasets:
            raise ArgumentError("datasets: the list is empty; MixedDataset needs at least one dataset")
        if augment is not None and not isinstance(augment, tarmac.Augment):
            raise ArgumentError(f"augment must be a tarmac.Augment, not {type(augment).__name__}")
        if augment is None and dense:
            raise ArgumentError("dense maps are batched with an augmentation: give augment=")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**64:
            raise ArgumentError(f"seed must be an integer in 0 .. 2^64 - 1, not {seed!r}")
        self.augment, self.seed, self.epoch, self.dense = augment, int(seed), 0, list(dense or [])
        given = [d if isinstance(d, TarmacDataset) else None for d in datasets]
        opened = [tarmac.Dataset(d.path, cache=d.cache, cache_size=d.cache_size) if isinstance(d, TarmacDataset)
                  else tarmac.Dataset(os.fspath(d)) for d in datasets]
        self.paths = [ds.path for ds in opened]
        self.sizes = [len(ds) for ds in opened]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.transform = transform
        names = [f"dataset {k} ({p})" for k, p in enumerate(self.paths)]
        for k, d in enumerate(given):
            if d is not None and d.transform is not None:
                raise ArgumentError(f"datasets: {names[k]} is a TarmacDataset with a transform; give the transform "
                                    "to MixedDataset, which applies it to the mixed samples")
            if d is not None and (d.augment is not None or d.dense):
                raise ArgumentError(f"datasets: {names[k]} is a TarmacDataset with an augment; give augment= (and "
                                    "dense=) to MixedDataset, which applies it to every dataset")

        fixed = [set(ds.fixed_fields()) for ds in opened]
        own = [fixed[k] if d is None else set(d.fields) for k, d in enumerate(given)]
        if fields is None:
            fields = list(dict.fromkeys(f for k, d in enumerate(given)
                                        for f in (opened[k].fixed_fields() if d is None else d.fields)))
        self.fields = list(fields)
        # Strings, JSON and ragged fields: a list per batch, None where a dataset has no value.
        self._listed = {name for name in self.fields if any(_listed(ds, name) for ds in opened)}
        for name in self.fields:
            if not any(name in f for f in fixed) and name not in self._listed:
                raise ArgumentError(f"fields: '{name}' is not a field of any of the datasets")
            for k, ds in enumerate(opened):
                if name in self._listed and name in fixed[k]:
                    raise ArgumentError(f"fields: '{name}' is ragged (or a string) in one dataset and fixed-shape in "
                                        f"{names[k]}; it cannot be batched across them")
                if given[k] is not None and name in fixed[k] and name not in own[k]:
                    raise ArgumentError(f"fields: {names[k]} has '{name}' but its TarmacDataset leaves it out (its "
                                        "fields=); it would read as absent")
        self._has = [{name for name in self.fields if name in own[k] or (
            name in self._listed and name in opened[k].fields and (d is None or name in d.fields))}
            for k, d in enumerate(given)]
        self._template: Dict[str, Tuple[Tuple[int, ...], str]] = {}  # a fixed field's (shape, dtype)
        self._nullable: Dict[str, bool] = {}
        for name in self.fields:
            if name in self._listed:
                self._nullable[name] = False  # None in the list marks a missing value
                continue
            kinds: Dict[Tuple[Tuple[int, ...], str], List[str]] = {}
            for k, ds in enumerate(opened):
                if name in self._has[k]:
                    column = ds.column(name)  # [N, *shape], its dtype (N may be 0)
                    kinds.setdefault((column.shape[1:], np.dtype(column.dtype).name), []).append(names[k])
            if len(kinds) > 1:
                raise ArgumentError(f"fields: '{name}' differs between the datasets: " + "; ".join(
                    f"{dtype} {shape} in {', '.join(where)}" for (shape, dtype), where in kinds.items()))
            self._template[name] = next(iter(kinds))
            self._nullable[name] = any(name not in has for has in self._has) or any(
                ds.fields.get(name, {}).get("nullable") for k, ds in enumerate(opened) if name in self._has[k])

        if columns is None:
            columns = sorted(set.intersection(*[set(ds.derived if d is None else d.columns)
                                                for ds, d in zip(opened, given)]))
        self.columns = list(columns)
        settings: Dict[str, Any] = {"decode": decode, "chw": chw, "channels": channels, "threads": threads}
        self.datasets = [TarmacDataset(ds.path, fields=[f for f in self.fields if f in self._has[k]],
                                       columns=self.columns, **settings) if d is None else copy.copy(d)
                         for k, (ds, d) in enumerate(zip(opened, given))]
        if augment is not None:  # copies of the given ones: the caller's objects are left as they were
            for k, d in enumerate(self.datasets):
                d.augment, d.seed, d.dense = augment, self.dataset_seed(k), list(self.dense)
        for k, d in enumerate(self.datasets):
            theirs = {"decode": d.decode, "chw": d.chw, "channels": d.channels}
            if any(theirs[key] != settings[key] for key in theirs) or set(d.columns) != set(self.columns):
                raise ArgumentError(f"datasets: {names[k]} is a TarmacDataset with decode={d.decode}, chw={d.chw}, "
                                    f"channels={d.channels}, columns={d.columns}; the mix has decode={decode}, "
                                    f"chw={chw}, channels={channels}, columns={self.columns}")
        with_images = [bool(ds.blob_kinds) for ds in opened]
        if decode and any(with_images) and not all(with_images):
            raise ArgumentError("datasets: some have images and some do not (" + ", ".join(
                n for n, w in zip(names, with_images) if not w) + "); mix them with decode=False (labels only)")
        self._names = names
        if augment is not None:
            self._check_augment(opened)
        elif decode and len(opened) > 1 and all(with_images):
            self._check_one_size(opened)

    def _check_one_size(self, opened: List[tarmac.Dataset]) -> None:
        """Without augment: the images of all the datasets have one size (the annotation files'
        width and height columns), or an ArgumentError (a ValueError) names each dataset's sizes."""
        sizes: Dict[Tuple[int, int], List[str]] = {}
        for k, ds in enumerate(opened):
            wh = (np.stack([ds.column(_format.IMAGE + ".width"), ds.column(_format.IMAGE + ".height")], 1)
                  if len(ds) else [])
            for w, h in (np.unique(wh, axis=0).tolist() if len(ds) else []):
                sizes.setdefault((w, h), []).append(self._names[k])
        if len(sizes) > 1:
            raise ArgumentError("datasets: their images have several sizes, so their samples cannot batch together: "
                                + "; ".join(f"{w}x{h} in {', '.join(where)}" for (w, h), where in sorted(sizes.items()))
                                + ". Give augment=tarmac.Augment(size=(H, W), ...) to warp every sample to one size, "
                                "or convert the datasets with one --size")

    def _check_augment(self, opened: List[tarmac.Dataset]) -> None:
        """With augment, before any batch: each dataset takes it (flip_pairs fit its points
        fields), has every map of `dense`, and the maps have one dtype and shape across them."""
        layouts: Dict[str, Dict[Tuple[str, Tuple[int, ...]], List[str]]] = {name: {} for name in self.dense}
        for k, (ds, d) in enumerate(zip(opened, self.datasets)):
            if not d.decode or not ds.blob_kinds:
                continue
            for name in self.dense:
                kind = name if name.startswith("__") else f"__{name}__"
                if kind not in ds.blob_kinds[1:]:
                    raise ArgumentError(f"dense: '{name}' is not a dense map of {self._names[k]} (it has: "
                                        f"{', '.join(ds.blob_kinds[1:]) or 'none'}); every dataset of the mix needs it")
            try:  # an empty batch: the native loader checks the augment against the fields, decodes no sample
                _, labels = ds.batch([], fields=d.fields, augment=self.augment, dense=self.dense, threads=1,
                                     channels=d.channels)
            except tarmac.TarmacError as e:
                raise ArgumentError(f"augment: {self._names[k]}: {e}") from e
            for name in self.dense if len(ds) else ():  # an empty dataset's maps have no dtype to compare
                layouts[name].setdefault((labels[name].dtype.name, labels[name].shape[1:]), []).append(self._names[k])
        for name, kinds in layouts.items():
            if len(kinds) > 1:
                raise ArgumentError(f"dense: '{name}' differs between the datasets: " + "; ".join(
                    f"{dtype} {shape} in {', '.join(where)}" for (dtype, shape), where in kinds.items()))

    def dataset_seed(self, k: int) -> int:
        """The augmentation seed of dataset k: seed XOR (k * 0x9E3779B97F4A7C15 mod 2^64), so
        dataset 0 draws as TarmacDataset(seed=seed) would, and the others draw apart from it."""
        return self.seed ^ ((int(k) * 0x9E3779B97F4A7C15) & (2**64 - 1))

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose augmentation draws samples get (with `augment`): call it every epoch,
        before the DataLoader's iterator is made, as for TarmacDataset."""
        self.epoch = int(epoch)
        for d in self.datasets:
            d.set_epoch(epoch)

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def _locate(self, indices: Iterable[Any]
                ) -> Tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """(global indices, their datasets, their indices within them), each an int64 array."""
        asked = np.asarray([int(i) for i in indices], dtype=np.int64).reshape(-1)
        glob = np.where(asked < 0, asked + len(self), asked)
        bad = (glob < 0) | (glob >= len(self))
        if bad.any():
            raise RangeError(f"sample index {asked[bad][0]} out of range for {len(self)} samples of "
                             f"{len(self.datasets)} datasets")
        which = np.searchsorted(self.offsets, glob, side="right") - 1  # an empty dataset owns no index
        return glob, which, glob - self.offsets[which]

    def _zeros(self, name: str, n: Optional[int] = None) -> torch.Tensor:
        shape, dtype = self._template[name]
        return torch.from_numpy(np.zeros(shape if n is None else (n,) + shape, dtype=dtype))

    def __getitem__(self, i: Any) -> Any:
        if not _is_index(i):
            return self._batch(i)
        (g,), (k,), (local,) = self._locate([i])
        sample = self.datasets[k][int(local)]
        out = {"__key__": sample["__key__"], "__index__": int(g), "__dataset__": torch.tensor(k, dtype=torch.int64)}
        for name in ("image", "__augment__", "__flip__", *self.dense):
            if name in sample:
                out[name] = sample[name]
        for name in self.fields:
            has = name in self._has[k]
            if name in self._listed:
                out[name] = sample[name] if has else None
                if has and name + ".valid" in sample:
                    out[name + ".valid"] = sample[name + ".valid"]
                continue
            out[name] = sample[name] if has else self._zeros(name)
            if self._nullable[name]:
                out[name + ".valid"] = sample.get(name + ".valid", torch.tensor(has))
        for name in self.columns:
            out[name] = sample[name]
        return self.transform(out) if self.transform else out

    def _batch(self, indices: Iterable[Any], alloc: Optional[_Alloc] = None, part_batch: Optional[_PartBatch] = None,
               transform: bool = True) -> Any:
        """The samples stacked in the order asked: one TarmacDataset batch per dataset, each
        value put at its samples' positions; "image" a channels-last view of one NHWC block.
        alloc(name, shape, dtype): where the arrays go, as in tarmac.Dataset.batch (a batch of
        one dataset in place, else dataset k's as "k/NAME" and the gathered images as "image";
        default: fresh ones, in shared memory in a loader worker). part_batch(k, local, alloc):
        dataset k's batch of `local` (default: its TarmacDataset's; tarmac.torch.Loader gives
        its own, decoded into its ring)."""
        glob, which, local = self._locate(indices)
        n = len(glob)
        parts = [(k, np.flatnonzero(which == k)) for k in np.unique(which).tolist()]
        one = len(parts) == 1
        if part_batch is None:
            # One dataset: its batch already is in order (and in shared memory in a loader worker).
            def own_batch(k: int, idx: NDArray[np.int64], _: Optional[_Alloc]) -> Dict[str, Any]:
                batch: Dict[str, Any] = self.datasets[k]._batch(idx, shared=None if one else False, transform=False)
                return batch
            part_batch = own_batch

        def part_alloc(k: int) -> Optional[_Alloc]:
            if alloc is None or one:
                return alloc
            whole: _Alloc = alloc
            return lambda name, shape, dtype: whole(f"{k}/{name}", shape, dtype)

        batches = [part_batch(k, local[pos], part_alloc(k)) for k, pos in parts]
        out: Dict[str, Any] = {"__key__": [None] * n, "__index__": torch.from_numpy(glob),
               "__dataset__": torch.from_numpy(which.astype(np.int64))}
        for (k, pos), b in zip(parts, batches):
            for p, key in zip(pos.tolist(), b["__key__"]):
                out["__key__"][p] = key
        places = [torch.from_numpy(pos) for _, pos in parts]
        if self.datasets[0].decode and any("image" in b for b in batches):
            out["image"] = _worker_pool.mark(self._images(n, parts, places, batches, alloc))
        for name in ("__augment__", "__flip__", *self.dense):
            if batches and name in batches[0]:
                first = batches[0][name]
                out[name] = _place(first.new_empty((n,) + first.shape[1:]), places, [b[name] for b in batches])
        for name in self.fields:
            if name in self._listed:  # lists: each part's values at its positions
                for key in (name, name + ".valid"):
                    if key == name or any(key in b for b in batches):
                        values: List[Any] = [None] * n
                        for (_, pos), b in zip(parts, batches):
                            part = b.get(key, [None] * len(pos))
                            for p, v in zip(pos.tolist(), part.tolist() if isinstance(part, torch.Tensor) else part):
                                values[p] = v
                        out[key] = values
                continue
            out[name] = _place(self._zeros(name, n), places, [b.get(name) for b in batches])
            if self._nullable[name]:
                valid = [b.get(name + ".valid", torch.full((len(pos),), name in self._has[k]))
                         for (k, pos), b in zip(parts, batches)]
                out[name + ".valid"] = _place(torch.zeros(n, dtype=torch.bool), places, valid)
        for name in self.columns:
            shapes = {tuple(b[name].shape[1:]) for b in batches}
            if len(shapes) > 1:
                raise ArgumentError(f"derived column '{name}' has outputs of several shapes in one batch of the mix "
                                    f"({sorted(shapes)})")
            first = batches[0][name] if batches else torch.empty(0)
            out[name] = _place(first.new_empty((n,) + first.shape[1:]), places, [b[name] for b in batches])
        return self.transform(out) if self.transform and transform else out

    def _images(self, n: int, parts: List[Tuple[int, NDArray[np.int64]]], places: List[torch.Tensor],
                batches: List[Dict[str, Any]], alloc: Optional[_Alloc] = None) -> torch.Tensor:
        """The parts' images in one uint8 block: alloc's "image", else a fresh one (in shared
        memory in a loader worker)."""
        chw = self.datasets[0].chw
        nhwc: List[torch.Tensor] = [b["image"].permute(0, 2, 3, 1) if chw else b["image"] for b in batches]
        sizes: Dict[Tuple[int, ...], List[str]] = {}
        for (k, _), images in zip(parts, nhwc):
            sizes.setdefault(tuple(images.shape[1:3]), []).append(self._names[k])
        if len(sizes) > 1:
            raise ArgumentError("a batch of the mix holds images of several sizes: " + "; ".join(
                f"{w}x{h} from {', '.join(where)}" for (h, w), where in sizes.items()) +
                ": convert the datasets to one --size")
        if len(parts) == 1:
            block = nhwc[0]
        else:
            shape = (n,) + tuple(nhwc[0].shape[1:])
            if alloc is not None:
                block = torch.from_numpy(alloc("image", shape, np.dtype(np.uint8)))
            else:
                in_worker = torch.utils.data.get_worker_info() is not None  # type: ignore[no-untyped-call]
                block = _uint8_tensor(shape, shared=in_worker)
            block = _place(block, places, nhwc)
        return block.permute(0, 3, 1, 2) if chw else block


def _place(out: torch.Tensor, places: Sequence[torch.Tensor], parts: Sequence[Optional[torch.Tensor]]) -> torch.Tensor:
    """`out` with each part written at its positions (a part of None: left as it is); a single
    part covering every position is returned as it is."""
    if len(parts) == 1 and parts[0] is not None and len(places[0]) == len(out):
        return parts[0]
    for where, part in zip(places, parts):
        if part is not None:
            out[where] = part
    return out


def _deal(order: _Order, rank: int, world: int, drop_last: bool) -> _Order:
    """Positions rank, rank + world, ... of `order`, padded cyclically from the order's start
    to ceil(len / world) items (cut to floor with drop_last): tarmac.indices' rule."""
    count = len(order) // world if drop_last else -(-len(order) // world)
    if not len(order):
        return order[:0]
    positions = (rank + np.arange(count, dtype=np.int64) * world) % len(order)
    if isinstance(order, np.ndarray):
        picked: NDArray[np.int64] = order[positions]
        return picked
    return [order[p] for p in positions.tolist()]


def _rank_world(rank: Optional[int], world: Optional[int]) -> Tuple[int, int]:
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
    # Set by the samplers: their arguments (rank, world: _rank_world's) and the epoch's position.
    seed: int
    shuffle: bool
    drop_last: bool
    rank: int
    world: int
    epoch: int
    _start: int
    _start_epoch: Optional[int]
    _yielded: int

    # Each sampler's own (abstract for type checkers only: the class is no abc.ABC).
    @abc.abstractmethod
    def _size(self) -> Any:
        """What the epoch's order is of (a state is refused for another)."""

    @abc.abstractmethod
    def _order(self) -> _Order:
        """The epoch's global order of items, a pure function of (seed, epoch)."""

    @abc.abstractmethod
    def _item(self, item: Any) -> Any:
        """What iterating yields for one item of the order."""

    def _init_state(self) -> None:
        self.epoch, self._start, self._start_epoch, self._yielded = 0, 0, None, 0

    def set_epoch(self, epoch: int) -> None:
        if epoch != self._start_epoch:  # a new epoch starts from its beginning
            self._start, self._start_epoch = 0, None
        self.epoch = epoch

    def _identity(self) -> Dict[str, Any]:
        return {"seed": self.seed, "shuffle": self.shuffle, "drop_last": self.drop_last, "size": self._size()}

    def _total(self) -> int:
        """How many items an epoch's order holds (the same every epoch)."""
        return len(self._order())

    def state_dict(self, consumed: Optional[int] = None) -> Dict[str, Any]:
        """{"epoch", "position", "world", "seed", "shuffle", "drop_last", "size"}. `consumed`: how
        many of this rank's items of the epoch the training loop has consumed (samples for
        ShardedSampler, batches for BucketBatchSampler: its steps); by default how many the
        iterator has yielded, which runs ahead of training when a DataLoader prefetches. A count
        that is not an integer, or more than this rank's items of the epoch (len(self)), is an
        ArgumentError: rounding or clamping it would save a position the training never reached."""
        if consumed is None:
            consumed = self._yielded
        else:
            consumed = _count("state_dict: consumed", consumed)
            share = self._share_len(self._total())
            if consumed > share:
                raise tarmac.ArgumentError(
                    f"state_dict: consumed={consumed} is more than this rank's {share} {self._unit} of epoch "
                    f"{self.epoch} (from position {self._start}, {self.world} rank(s)); pass the number of this "
                    f"rank's {self._unit} the training loop consumed in this epoch")
        position = min(self._start + consumed * self.world, self._total())
        return dict(self._identity(), epoch=self.epoch, position=position, world=self.world)

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Goes on from `state` (another world size allowed): the epoch's items before its
        position are not yielded again. Refuses (tarmac.ArgumentError, a ValueError) a state of
        another dataset size or order, and one whose epoch, position or world is not an integer,
        negative, a world below 1 or a position past the epoch's end."""
        if not isinstance(state, collections.abc.Mapping):
            raise tarmac.ArgumentError(f"load_state_dict: a state is a dict (from state_dict()), not "
                                       f"{type(state).__name__}")
        mine = self._identity()
        for key, value in mine.items():
            if state.get(key) != value:
                raise tarmac.ArgumentError(
                    f"cannot resume from this sampler state: its {key} is {state.get(key)!r}, this "
                    f"sampler's is {value!r} (a state of another dataset or another order)")
        for key in ("epoch", "position", "world"):
            if key not in state:
                raise tarmac.ArgumentError(f"cannot resume from this sampler state: it has no {key!r}")
        epoch = _count("load_state_dict: the state's epoch", state["epoch"])
        position = _count("load_state_dict: the state's position", state["position"])
        world = _count("load_state_dict: the state's world", state["world"])
        if world < 1:
            raise tarmac.ArgumentError(f"load_state_dict: the state's world is {world}; a world size is >= 1")
        total = self._total()
        if position > total:
            raise tarmac.ArgumentError(f"load_state_dict: the state's position is {position}, past the end of "
                                       f"the epoch's {total} {self._unit}")
        self.epoch = epoch
        self._start, self._start_epoch = position, self.epoch

    def _mine(self) -> _Order:
        order = self._order()
        return _deal(order[self._start:], self.rank, self.world, self.drop_last)

    def _share_len(self, total: int) -> int:
        """How many of the `total` items of the epoch this rank yields from the current position."""
        left = total - min(self._start, total)
        return left // self.world if self.drop_last else -(-left // self.world)

    def __iter__(self) -> Iterator[Any]:
        self._yielded = 0
        for item in self._mine():
            self._yielded += 1
            yield self._item(item)


class ShardedSampler(_Resumable, torch.utils.data.Sampler[int]):
    """Deals the samples to the ranks as torch's DistributedSampler does, but takes a number of
    samples (not a dataset) and rank/world (not num_replicas), and the order comes from
    tarmac.indices: a fixed algorithm, identical on every machine and in C++. Call set_epoch()
    before each epoch.
    state_dict()/load_state_dict() resume mid-epoch, on the same or another number of ranks."""

    def __init__(self, num_samples: int, rank: Optional[int] = None, world: Optional[int] = None, seed: int = 0,
                 shuffle: bool = True, drop_last: bool = False) -> None:
        self.n = num_samples
        self.rank, self.world = _rank_world(rank, world)
        self.seed, self.shuffle, self.drop_last = seed, shuffle, drop_last
        self._init_state()

    def _size(self) -> int:
        return self.n

    def _total(self) -> int:
        return self.n

    def _order(self) -> NDArray[np.int64]:
        # The whole epoch's order: tarmac.indices for one rank (no padding).
        return tarmac.indices(self.n, 0, 1, self.seed, self.epoch, self.shuffle, False) if self.n else \
            np.empty(0, dtype=np.int64)

    def _indices(self) -> NDArray[np.int64]:
        if self._start == 0:  # the epoch from its start: exactly tarmac.indices' share
            return tarmac.indices(self.n, self.rank, self.world, self.seed, self.epoch, self.shuffle,
                                  self.drop_last)
        return np.asarray(self._mine(), dtype=np.int64)

    def _item(self, i: Any) -> int:
        return int(i)

    def __iter__(self) -> Iterator[int]:
        self._yielded = 0
        for i in self._indices().tolist():
            self._yielded += 1
            yield i

    def __len__(self) -> int:
        return self._share_len(self.n)


class DistributedSampler(ShardedSampler):
    """Deprecated: the former name of ShardedSampler (same arguments, same order). Renamed because
    torch.utils.data.DistributedSampler takes (dataset, num_replicas, rank, ...) and code written
    for it broke here; this name goes away in the next release."""

    def __init__(self, num_samples: int, rank: Optional[int] = None, world: Optional[int] = None, seed: int = 0,
                 shuffle: bool = True, drop_last: bool = False) -> None:
        warnings.warn("tarmac.torch.DistributedSampler is renamed ShardedSampler; the old name goes away in the "
                      "next release (same arguments: num_samples, rank, world, seed, shuffle, drop_last)",
                      DeprecationWarning, stacklevel=2)
        super().__init__(num_samples, rank, world, seed, shuffle, drop_last)


class BucketBatchSampler(_Resumable, torch.utils.data.Sampler[List[int]]):
    """A batch_sampler for a dataset converted with --resize bucket: each batch holds images of
    one size, so the default collate stacks them (tarmac.bucket_batches has the rules). Every
    rank yields the same number of batches. Call set_epoch() before each epoch.
    state_dict()/load_state_dict() resume mid-epoch (positions count batches).

        loader = DataLoader(TarmacDataset(path), batch_sampler=BucketBatchSampler(path, 16))"""

    _cached: List[NDArray[np.int64]]  # the order of epoch _cached_epoch (_order)

    def __init__(self, dataset: Union[_Path, tarmac.Dataset, TarmacDataset], batch_size: int,
                 rank: Optional[int] = None, world: Optional[int] = None, seed: int = 0, shuffle: bool = True,
                 drop_last: bool = True) -> None:
        path = cast(_Path, getattr(dataset, "path", dataset))  # a dataset's, or the path given
        self.dataset = dataset if isinstance(dataset, tarmac.Dataset) else tarmac.Dataset(
            path, cache=getattr(dataset, "cache", None), cache_size=getattr(dataset, "cache_size", 0))
        self.batch_size = batch_size
        self.rank, self.world = _rank_world(rank, world)
        self.seed, self.shuffle, self.drop_last = seed, shuffle, drop_last
        self._init_state()

    def _size(self) -> List[int]:
        return [len(self.dataset), self.batch_size]

    def _order(self) -> List[NDArray[np.int64]]:
        # The epoch's batches in their global order (bucket_batches for one rank deals them all);
        # the DataLoader asks for len() and iter() each epoch: computed once per epoch.
        if getattr(self, "_cached_epoch", None) != self.epoch:
            self._cached = tarmac.bucket_batches(self.dataset, self.batch_size, 0, 1, self.seed, self.epoch,
                                                 self.shuffle, self.drop_last)
            self._cached_epoch = self.epoch
        return self._cached

    def _batches(self) -> _Order:
        return self._mine()

    def _item(self, b: NDArray[np.int64]) -> List[int]:
        batch: List[int] = b.tolist()
        return batch

    def __len__(self) -> int:
        return len(self._batches())


class MixSampler(_Resumable, torch.utils.data.Sampler[int]):
    """Mixes datasets by weight: each epoch holds counts() samples of each dataset (weight /
    sum(weights) of samples_per_epoch, default every dataset's size summed; largest-remainder
    rounding), as global indices of a MixedDataset (its concatenation of the datasets).

    Within a dataset the samples come WITHOUT replacement from an endless sequence of seeded
    permutations that goes on across epochs: a small dataset with a large weight repeats only
    once all its samples were drawn, a large one is traversed over several epochs. The epoch's
    order (the draws interleaved, shuffled with shuffle=True) is a pure function of (seed,
    epoch), dealt to the ranks as ShardedSampler does; state_dict()/load_state_dict()
    resume mid-epoch on the same or another number of ranks. Logs the counts (logger
    "tarmac") when an epoch starts. `mixed_or_sizes`: a MixedDataset or the datasets' sizes."""

    _cached: NDArray[np.int64]  # the order of epoch _cached_epoch (_order)

    def __init__(self, mixed_or_sizes: Union[MixedDataset, Sequence[int]], weights: Sequence[float],
                 samples_per_epoch: Optional[int] = None, rank: Optional[int] = None, world: Optional[int] = None,
                 seed: int = 0, shuffle: bool = True, drop_last: bool = False) -> None:
        self.sizes = _sizes(getattr(mixed_or_sizes, "sizes", mixed_or_sizes))
        self._paths = getattr(mixed_or_sizes, "paths", None)
        self.names = [f"dataset {k}" + (f" ({self._paths[k]})" if self._paths else "") for k in range(len(self.sizes))]
        self.weights = _weights(weights, self.sizes, self.names)
        if samples_per_epoch is None:
            samples_per_epoch = sum(self.sizes)
        if isinstance(samples_per_epoch, bool) or not isinstance(samples_per_epoch, (int, np.integer)) \
                or samples_per_epoch <= 0:
            raise tarmac.ArgumentError(f"samples_per_epoch must be an integer > 0, not {samples_per_epoch!r}")
        self.samples_per_epoch = int(samples_per_epoch)
        self._counts = _largest_remainder(self.weights, self.samples_per_epoch)
        self.rank, self.world = _rank_world(rank, world)
        self.seed, self.shuffle, self.drop_last = seed, shuffle, drop_last
        self._init_state()
        self._logged_epoch: Optional[int] = None

    def counts(self) -> List[int]:
        """How many samples of each dataset every epoch holds."""
        return list(self._counts)

    def _size(self) -> List[int]:
        return list(self.sizes)

    def _total(self) -> int:
        return self.samples_per_epoch

    def _identity(self) -> Dict[str, Any]:
        return dict(super()._identity(), weights=list(self.weights), samples_per_epoch=self.samples_per_epoch)

    def _draws(self, k: int) -> NDArray[np.int64]:
        """Dataset k's samples of this epoch (indices within it): items epoch × c ... of its endless
        sequence of permutations (permutation j: tarmac.sampling.permutation over its size, epoch j,
        its own seed), each item computed alone: O(c) whatever the dataset's size."""
        n, c = self.sizes[k], self._counts[k]
        q, r = divmod(self.epoch * c, n)  # Python ints: epoch × c may pass int64
        at = r + np.arange(c, dtype=np.int64)
        j, i = q + at // n, at % n
        if not self.shuffle:
            return i
        seed = (self.seed & (2**64 - 1)) ^ (0x6D6978 << 40) ^ k  # "mix": a stream per dataset
        return tarmac.sampling.permutation(n, seed, j, i)

    def _order(self) -> NDArray[np.int64]:
        # Computed once per epoch: the DataLoader asks for len() and iter() each epoch.
        if getattr(self, "_cached_epoch", None) == self.epoch:
            return self._cached
        # Which dataset each position of the epoch holds; a dataset's positions then take its
        # draws in the order drawn, so that its samples repeat only after all were yielded.
        ks = np.flatnonzero(self._counts)
        counts = np.asarray(self._counts, dtype=np.int64)[ks]
        if self.shuffle:
            which = np.repeat(ks, counts)[tarmac.indices(self.samples_per_epoch, 0, 1, self.seed, self.epoch, True)]
        else:  # spread evenly: dataset k's j-th draw at (j + 1/2) / c_k of the epoch
            at = np.concatenate([(np.arange(c) + 0.5) / c for c in counts])
            which = np.repeat(ks, counts)[np.lexsort((np.repeat(ks, counts), at))]
        order = np.empty(self.samples_per_epoch, dtype=np.int64)
        for k in ks.tolist():
            order[which == k] = self.offsets[k] + self._draws(k)
        self._cached, self._cached_epoch = order, self.epoch
        return order

    @property
    def offsets(self) -> NDArray[np.int64]:
        return np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)

    def _item(self, i: Any) -> int:
        return int(i)

    def _log_epoch(self) -> None:
        if self._logged_epoch != self.epoch:
            self._logged_epoch = self.epoch
            _log.info("mixing epoch %d: %d samples: %s", self.epoch, self.samples_per_epoch, ", ".join(
                f"{c} of dataset {k} ({self._paths[k] + ', ' if self._paths else ''}{n} samples, weight {w:g})"
                for k, (c, n, w) in enumerate(zip(self._counts, self.sizes, self.weights))))

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        self._log_epoch()

    def __iter__(self) -> Iterator[int]:
        self._log_epoch()
        return super().__iter__()

    def __len__(self) -> int:
        return self._share_len(self.samples_per_epoch)


def _sizes(sizes: Any) -> List[int]:
    """The datasets' sizes as ints, refusing what is not a list of sizes >= 0 of one dataset or more."""
    try:
        counts = [operator.index(n) for n in sizes]
    except TypeError:
        raise ArgumentError(f"mixed_or_sizes must be a MixedDataset or a list of dataset sizes, "
                            f"not {sizes!r}") from None
    if not counts or any(n < 0 for n in counts):
        raise ArgumentError(f"mixed_or_sizes: need one dataset or more, each of size >= 0, not {counts!r}")
    return counts


def _count(what: str, value: Any) -> int:
    """`value` as an int >= 0: an integer (not a bool, not a float such as 2.5 or 2.0), or an
    ArgumentError naming `what` and the value."""
    if isinstance(value, (bool, np.bool_)):
        raise tarmac.ArgumentError(f"{what} must be an integer >= 0, not {value!r}")
    try:
        count = operator.index(value)
    except TypeError:
        raise tarmac.ArgumentError(f"{what} must be an integer >= 0, not {value!r}") from None
    if count < 0:
        raise tarmac.ArgumentError(f"{what} must be an integer >= 0, not {count}")
    return count


def _weights(weights: Any, sizes: Sequence[int], names: Sequence[str]) -> List[float]:
    """The weights as floats: one per dataset in the datasets' order, finite, >= 0, not all zero,
    zero for an empty dataset. A dict or set is a WrongTypeError (a TypeError): iterating it gives its keys (or an
    arbitrary order), which would be taken as the weights."""
    if isinstance(weights, (collections.abc.Mapping, collections.abc.Set, str, bytes)):
        raise WrongTypeError(f"weights must be a list with one number per dataset, in the datasets' order, not a "
                             f"{type(weights).__name__} ({weights!r}); for weights by path, give "
                             f"[weights[p] for p in mixed.paths]")
    try:
        weights = list(weights)
    except TypeError:
        raise WrongTypeError(f"weights must be a list of numbers, one per dataset, not {weights!r}") from None
    for w in weights:
        if isinstance(w, (bool, np.bool_)) or not isinstance(w, numbers.Real):
            raise WrongTypeError(f"weights must be numbers, one per dataset; {w!r} is a {type(w).__name__}")
    floats = [float(w) for w in weights]
    if len(floats) != len(sizes):
        raise tarmac.ArgumentError(f"weights: {len(floats)} given for {len(sizes)} datasets")
    for name, n, w in zip(names, sizes, floats):
        if not math.isfinite(w) or w < 0:
            raise tarmac.ArgumentError(f"weights: {w} for {name}; a weight is a finite number >= 0")
        if w > 0 and n == 0:
            raise tarmac.ArgumentError(f"weights: {w} for {name}, which is empty; give it weight 0")
    if not any(floats):
        raise tarmac.ArgumentError("weights: all zero; at least one dataset needs a weight > 0")
    return floats


def _largest_remainder(weights: Sequence[float], total: int) -> List[int]:
    """`total` split in proportion to `weights` (exactly, in fractions): each share's integer part,
    then one more for the largest fractional parts (ties: the earlier dataset) until the sum is total."""
    shares = [fractions.Fraction(w) for w in weights]
    exact = [w * total / sum(shares) for w in shares]
    counts = [math.floor(q) for q in exact]
    by_remainder = sorted(range(len(shares)), key=lambda k: (-(exact[k] - counts[k]), k))
    for k in by_remainder[:total - sum(counts)]:
        counts[k] += 1
    return counts
