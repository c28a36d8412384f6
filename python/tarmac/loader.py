"""tarmac.torch.Loader: batches decoded on native threads ahead of the training step into a ring
of reused buffers, in the training process (no worker process, no fork, no pickling;
docs/reader.md, "Loader: batches prefetched on native threads").

    loader = tarmac.torch.Loader("out/", BatchSampler(ShardedSampler(n), 64, False), prefetch=2)
    for epoch in range(E):
        loader.set_epoch(epoch)
        for batch in loader: ...

One background Python thread walks the batch sampler and calls the native loader (which
releases the GIL and decodes on the library's threads) into a free buffer slot, up to
`prefetch` batches ahead. A yielded batch's tensors view its slot; the slot is reused only
once every tensor (and every view of one) of that batch is gone."""
from __future__ import annotations

import logging
import numbers
import os
import queue
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union, cast

import numpy as np
import numpy.typing as npt
import torch
from numpy.typing import NDArray

from .augment import Augment
from .dataset import Dataset, _Alloc
from .errors import ArgumentError, RangeError, TarmacError, _rebuild

if TYPE_CHECKING:  # tarmac.torch imports this module
    from .torch import MixedDataset, TarmacDataset

_Batch = Dict[str, Any]  # a batch as TarmacDataset's (MixedDataset's) batched path gives it

__all__ = ["Loader"]

_log = logging.getLogger("tarmac")
_POLL = 0.05  # seconds between checks of the stop flag in every wait
_EXTRA_SLOTS = 8  # slots allocated beyond the ring when the caller holds batches (then it waits)


class _Slot:
    """One batch's buffers, by name (flat bytes, viewed per batch), and how many views of them
    the caller still holds."""

    def __init__(self, number: int, pinned: bool) -> None:
        self.number, self.pinned = number, pinned
        self.buffers: Dict[str, NDArray[np.uint8]] = {}
        self.held = 0

    def view(self, name: str, shape: Tuple[int, ...], dtype: npt.DTypeLike, released: queue.SimpleQueue[int]
             ) -> NDArray[Any]:
        """A fresh view of this slot's buffer `name` as `shape` and `dtype` (grown if too small);
        counted until the last reference to it goes."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        buf = self.buffers.get(name)
        if buf is None or buf.nbytes < nbytes:
            size = max(nbytes, 1)
            if self.pinned:  # page-locked through torch: the tensor stays alive as the array's base
                buf = cast("NDArray[np.uint8]", torch.empty(size, dtype=torch.uint8, pin_memory=True).numpy())
            else:
                buf = np.empty(size, dtype=np.uint8)
            self.buffers[name] = buf
        v: NDArray[Any] = buf[:nbytes].view(dtype).reshape(shape)
        self.held += 1
        weakref.finalize(v, released.put, self.number)  # SimpleQueue.put: safe in any thread, in GC
        return v


class _Ring:
    """The slots, reused across batches and epochs. Only the producer (the background thread, or
    the caller with prefetch=0) takes slots and counts releases; finalizers only enqueue."""

    def __init__(self, base: int, pinned: bool) -> None:
        self.base, self.bound, self.pinned = base, base + _EXTRA_SLOTS, pinned
        self.slots: List[_Slot] = []
        self.released: queue.SimpleQueue[int] = queue.SimpleQueue()
        self.lock = threading.Lock()  # one producer at a time (an iteration ending, the next starting)

    def _drain(self) -> None:
        while True:
            try:
                k = self.released.get_nowait()
            except queue.Empty:
                return
            self.slots[k].held -= 1

    def take(self, stop: threading.Event) -> Optional[_Slot]:
        """A slot none of whose views is held: a free one, else a new one up to the bound, else
        waits for a release. None once `stop` is set."""
        warned_at = time.monotonic() + 5
        while not stop.is_set():
            self._drain()
            for slot in self.slots:
                if slot.held == 0:
                    return slot
            if len(self.slots) < self.bound:
                self.slots.append(_Slot(len(self.slots), self.pinned))
                return self.slots[-1]
            try:
                self.slots[self.released.get(timeout=_POLL)].held -= 1
            except queue.Empty:
                if time.monotonic() > warned_at:
                    _log.warning("Loader: the caller holds all %d batch buffers; it waits until one batch is "
                                 "dropped (copy what you keep: .clone())", len(self.slots))
                    warned_at = float("inf")
        return None


def _is_count(v: object) -> bool:
    return not isinstance(v, bool) and isinstance(v, numbers.Integral)


class _Part:
    """One dataset read by the Loader: its own tarmac.Dataset (so the native loader it drives is
    never shared with the caller's ds.batch calls), and the settings of a TarmacDataset."""

    def __init__(self, spec: TarmacDataset, given: Optional[Dataset]) -> None:
        self.spec = spec  # a TarmacDataset: fields, augment, seed, dense, channels, columns, decode, chw
        self.given = given  # the caller's tarmac.Dataset, watched for close()
        self.ds = Dataset(spec.path, cache=spec.cache, cache_size=spec.cache_size)


class Loader:
    """Batches of `dataset` in `batch_sampler`'s order, decoded on native threads `prefetch`
    batches ahead into reused buffers (docs/reader.md, "Loader").

    dataset: a path, tarmac.Dataset, TarmacDataset or MixedDataset (whose fields, augment,
    seed, dense, chw, channels, columns and transform are used; an argument given here that
    differs is an ArgumentError). batch_sampler: any iterable of index lists. threads: native
    decoding threads (default: the dataset's, else all cores). prefetch: batches decoded ahead
    (0: each batch when next() asks). A batch is the dict TarmacDataset's (MixedDataset's)
    batched path gives, with the same bytes; its tensors view one of at most prefetch + 2 + 8
    buffer slots, which is reused only once the batch is dropped. pin_memory (default: when
    CUDA is available) allocates the slots page-locked; device: None or "cpu" (the GPU copy is
    not built yet; "cuda" without CUDA is an ArgumentError)."""

    def __init__(self, dataset: Union[str, os.PathLike[str], Dataset, TarmacDataset, MixedDataset],
                 batch_sampler: Iterable[Sequence[int]], *, threads: Optional[int] = None, prefetch: int = 2,
                 pin_memory: Optional[bool] = None, device: Optional[Union[str, torch.device]] = None,
                 augment: Optional[Augment] = None, seed: int = 0, fields: Optional[Sequence[str]] = None,
                 dense: Optional[Sequence[str]] = None, chw: bool = True) -> None:
        from . import torch as tt  # tarmac.torch imports this module

        if not _is_count(prefetch) or prefetch < 0:
            raise ArgumentError(f"Loader: prefetch must be an integer >= 0 (batches decoded ahead), not {prefetch!r}")
        if threads is not None and (not _is_count(threads) or threads < 0):
            raise ArgumentError(f"Loader: threads must be an integer >= 0 (0: all cores) or None, not {threads!r}")
        if pin_memory not in (None, True, False):
            raise ArgumentError(f"Loader: pin_memory must be True, False or None, not {pin_memory!r}")
        if not _is_count(seed) or not 0 <= seed < 2**64:
            raise ArgumentError(f"Loader: seed must be an integer in 0 .. 2^64 - 1, not {seed!r}")
        if chw not in (True, False):
            raise ArgumentError(f"Loader: chw must be True or False, not {chw!r}")
        if device is not None:
            try:
                dev = torch.device(device)
            except (RuntimeError, TypeError) as e:
                raise ArgumentError(f"Loader: device {device!r} is not a torch device ({e})") from None
            if dev.type == "cuda" and not torch.cuda.is_available():
                raise ArgumentError(f"Loader: device={device!r} but CUDA is not available here "
                                    "(torch.cuda.is_available() is False); leave device=None")
            if dev.type not in ("cpu", "cuda"):
                raise ArgumentError(f"Loader: device must be None, 'cpu' or 'cuda', not {device!r}")
            if dev.type == "cuda":
                raise ArgumentError("Loader: device='cuda' (the copy to the GPU on a side stream) is not built "
                                    "yet; leave device=None and call .to('cuda', non_blocking=True)")
        if not hasattr(batch_sampler, "__iter__"):
            raise ArgumentError(f"Loader: batch_sampler must be an iterable of index lists, not "
                                f"{type(batch_sampler).__name__}")
        self.batch_sampler = batch_sampler
        self.prefetch = int(prefetch)
        self.mixed = dataset if isinstance(dataset, tt.MixedDataset) else None
        asked: Dict[str, Any] = {"fields": fields, "augment": augment, "dense": dense}
        given: List[Optional[Dataset]]
        if isinstance(dataset, (tt.MixedDataset, tt.TarmacDataset)):  # self.mixed, or a TarmacDataset
            spec = dataset
            theirs = {"fields": list(spec.fields), "augment": spec.augment, "dense": list(spec.dense)}
            for name, v in asked.items():
                if v is not None and (v is not theirs[name] if name == "augment" else list(v) != theirs[name]):
                    raise ArgumentError(f"Loader: {name}={v!r} differs from the {type(dataset).__name__}'s "
                                        f"{theirs[name]!r}; give it to one of them")
            if seed != 0 and seed != spec.seed:
                raise ArgumentError(f"Loader: seed={seed} differs from the {type(dataset).__name__}'s {spec.seed}")
            spec_chw = spec.datasets[0].chw if isinstance(spec, tt.MixedDataset) else spec.chw  # a mix's: its parts'
            if not chw and spec_chw:
                raise ArgumentError(f"Loader: chw=False but the {type(dataset).__name__} has chw=True")
            specs = list(dataset.datasets) if isinstance(dataset, tt.MixedDataset) else [dataset]
            given = [None] * len(specs)
            self.epoch = int(spec.epoch)
            self.transform = spec.transform
        else:
            kw: Dict[str, Any]
            if isinstance(dataset, Dataset):
                given = [dataset]
                kw = {"cache": dataset.cache, "cache_size": dataset.cache_size}
                path = dataset.path
            elif isinstance(dataset, (str, os.PathLike)):
                given, path, kw = [None], os.fspath(dataset), {}
            else:
                raise ArgumentError(f"Loader: dataset must be a path, tarmac.Dataset, TarmacDataset or "
                                    f"MixedDataset, not {type(dataset).__name__}")
            try:
                specs = [tt.TarmacDataset(path, fields=fields, chw=chw, augment=augment, seed=seed, dense=dense,
                                          threads=threads, **kw)]
            except TarmacError:
                raise
            except ValueError as e:
                raise ArgumentError(f"Loader: {e}") from None
            self.epoch, self.transform = 0, None
        self.parts = [_Part(s, g) for s, g in zip(specs, given)]
        for part in self.parts:
            known = set(part.ds.fields) | set(part.ds.fixed_fields())
            for name in part.spec.fields:
                if name not in known:
                    raise ArgumentError(f"Loader: fields: '{name}' is not a field of '{part.ds.path}' (it has: "
                                        f"{', '.join(sorted(known)) or 'none'})")
        self.threads = threads
        self.chw = self.parts[0].spec.chw
        if pin_memory is None:
            pin_memory = torch.cuda.is_available()
        self.pin_memory = bool(pin_memory) and torch.cuda.is_available()
        self._ring = _Ring(self.prefetch + 2, self.pin_memory)
        self._consumed = 0  # batches the caller took in the current iteration
        self._consumed_samples = 0
        self._worker: Optional[_Worker] = None
        self._finalizer = weakref.finalize(self, _stop_worker, [None])

    # -- the sampler's protocol, forwarded

    def __len__(self) -> int:
        return len(self.batch_sampler)  # type: ignore[arg-type]

    def _samplers(self) -> List[Any]:
        inner = getattr(self.batch_sampler, "sampler", None)
        return [s for s in (self.batch_sampler, inner) if s is not None]

    def set_epoch(self, epoch: int) -> None:
        """The epoch of the augmentation draws; forwarded to the batch sampler (or the sampler it
        wraps) when it has set_epoch."""
        if not _is_count(epoch) or epoch < 0:
            raise ArgumentError(f"Loader.set_epoch: epoch must be an integer >= 0, not {epoch!r}")
        self.epoch = int(epoch)
        for s in self._samplers():
            if hasattr(s, "set_epoch"):
                s.set_epoch(epoch)
                break

    def _stateful(self) -> Any:
        for s in self._samplers():
            if hasattr(s, "state_dict") and hasattr(s, "load_state_dict"):
                return s
        raise ArgumentError(f"Loader: the batch sampler ({type(self.batch_sampler).__name__}) has no state_dict(), "
                            "nor has the sampler it wraps; use tarmac.torch's samplers to resume mid-epoch")

    def state_dict(self) -> Dict[str, Any]:
        """The sampler's state_dict after the batches the caller took (not those prefetched):
        counted in batches for a batch sampler with state_dict, else in samples of its sampler."""
        s = self._stateful()
        consumed = self._consumed if s is self.batch_sampler else self._consumed_samples
        state: Dict[str, Any] = s.state_dict(consumed=consumed)
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resumes from `state` (state_dict's): the sampler's, and the epoch of the draws."""
        self._stateful().load_state_dict(state)
        self.epoch = int(state["epoch"])

    # -- iteration

    def __iter__(self) -> "_Iterator":
        self.close()
        self._consumed = self._consumed_samples = 0
        worker = _Worker(self, iter(self.batch_sampler))
        self._worker = worker
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _stop_worker, [worker])
        return _Iterator(self, worker)

    def close(self) -> None:
        """Stops the current iteration's background thread (joined within about a second)."""
        if self._worker is not None:
            self._worker.stop()
            self._worker = None


def _stop_worker(box: List[Optional[_Worker]]) -> None:
    if box[0] is not None:
        box[0].stop()


class _Iterator:
    """One pass over the batch sampler. Dropping it (break, an exception in the loop) stops the
    background thread."""

    def __init__(self, loader: Loader, worker: "_Worker") -> None:
        self._loader = loader
        self._worker = worker
        weakref.finalize(self, worker.stop)

    def __iter__(self) -> _Iterator:
        return self

    def __next__(self) -> Any:
        batch, n = self._worker.next()
        loader = self._loader
        if loader._worker is self._worker:
            loader._consumed += 1
            loader._consumed_samples += n
        transform = loader.transform
        return transform(batch) if transform else batch


class _Worker:
    """The producer of one iteration: a background thread (prefetch > 0) or next() itself."""

    def __init__(self, loader: Loader, batches: Iterator[Sequence[int]]) -> None:
        # Copies of what the thread needs, never the Loader or the iterator (their finalizers stop it).
        self.parts, self.mixed, self.ring = loader.parts, loader.mixed, loader._ring
        self.threads, self.epoch, self.prefetch = loader.threads, loader.epoch, loader.prefetch
        self.batches = batches
        self.stopped = threading.Event()
        self.done = False
        self.number = 0
        self.thread: Optional[threading.Thread] = None
        if self.prefetch:
            self.ready: queue.Queue[Tuple[str, Any]] = queue.Queue()
            self.credit = threading.Semaphore(self.prefetch)
            self.thread = threading.Thread(target=self._run, name="tarmac-loader", daemon=True)
            self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        t = self.thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=1.0)
        if self.prefetch:  # the batches made ahead release their slots
            while True:
                try:
                    self.ready.get_nowait()
                except queue.Empty:
                    break

    def _produce(self) -> Optional[Tuple[_Batch, int]]:
        """(batch, samples) of the sampler's next batch; StopIteration at its end, None if stopped."""
        idx = next(self.batches)
        number = self.number
        self.number += 1
        with self.ring.lock:
            slot = self.ring.take(self.stopped)
            if slot is None:
                return None
            try:
                return _load(self, slot, idx), len(idx)
            except TarmacError as e:
                # e's class, code and attributes with the message prefixed (a bare TarmacError's __init__
                # takes the code first, so type(e)(message) would fail)
                raise _rebuild(type(e), e.code, f"Loader: batch {number}: {e}", dict(e.__dict__)) from e
            except IndexError as e:
                raise RangeError(f"Loader: batch {number} (indices {_short(idx)}): {e}") from e
            except (ValueError, KeyError, TypeError) as e:
                raise ArgumentError(f"Loader: batch {number} (indices {_short(idx)}): {e}") from e

    def _run(self) -> None:
        try:
            while not self.stopped.is_set():
                if not self.credit.acquire(timeout=_POLL):
                    continue
                try:
                    item = self._produce()
                except StopIteration:
                    self.ready.put(("end", None))
                    return
                if item is None:
                    return
                self.ready.put(("batch", item))
        except BaseException as e:  # re-raised in the caller's thread at its next next()
            self.ready.put(("error", e))

    def next(self) -> Tuple[_Batch, int]:
        if self.done:
            raise StopIteration
        if self.thread is None:
            try:
                item = self._produce()
            except StopIteration:
                self.done = True
                raise
            if item is None:
                raise StopIteration
            return item
        while True:
            try:
                kind, value = self.ready.get(timeout=_POLL)
                break
            except queue.Empty:
                if not self.thread.is_alive() and self.ready.empty():
                    self.done = True
                    raise StopIteration from None
        if kind == "batch":
            self.credit.release()
            batch: Tuple[_Batch, int] = value
            return batch
        self.done = True
        if kind == "error":
            raise value
        raise StopIteration


def _short(indices: Iterable[int]) -> str:
    idx = list(indices)
    return str(idx) if len(idx) <= 8 else f"[{', '.join(map(str, idx[:8]))}, ... ({len(idx)} in all)]"


def _load(worker: _Worker, slot: _Slot, idx: Sequence[int]) -> _Batch:
    """The batch of `idx` (a dict as TarmacDataset's or MixedDataset's batched path gives it),
    its images and stacked labels decoded into views of `slot`."""
    for part in worker.parts:
        if part.given is not None and part.given.closed:
            raise ArgumentError(f"dataset: '{part.given.path}' was closed under a running Loader; close it after "
                                "the loader's last batch (or give the Loader its path)")
    released = worker.ring.released
    if worker.mixed is None:
        return _part_batch(worker, 0, idx, lambda n, s, d: slot.view(n, s, d, released))
    return _mixed_batch(worker, idx, slot, released)


def _part_batch(worker: _Worker, k: int, indices: Iterable[Any], alloc: Optional[_Alloc]) -> _Batch:
    """TarmacDataset._batch of part k, with the arrays the native loader fills from `alloc`."""
    from . import torch as tt

    part = worker.parts[k]
    spec, ds = part.spec, part.ds
    idx = [int(i) for i in indices]
    out: Dict[str, Any] = {"__key__": [ds.key(i) for i in idx], "__index__": torch.tensor(idx, dtype=torch.int64)}
    if spec.decode and ds.blob_kinds:
        threads = worker.threads if worker.threads is not None else (spec.threads if spec.threads is not None else 0)
        extra: Dict[str, Any] = {}
        if spec.augment is not None:
            extra = dict(augment=spec.augment, seed=spec.seed, epoch=worker.epoch, dense=spec.dense)
        images, labels = ds.batch(idx, fields=spec.fields, threads=threads, channels=spec.channels, alloc=alloc,
                                  **extra)
        assert images is not None  # ds.blob_kinds: the batch has images
        pixels = torch.from_numpy(images)
        out["image"] = pixels.permute(0, 3, 1, 2) if spec.chw else pixels
    else:
        labels = {name: [ds.value(name, i) for i in idx] if tt._listed(ds, name) else
                  np.stack([np.asarray(ds.stored_value(name, i)) for i in idx]) if idx else np.empty(0)
                  for name in spec.fields}
        for name in spec.fields:
            if ds.fields.get(name, {}).get("nullable"):
                labels[name + ".valid"] = np.array([ds.value(name, i) is not None for i in idx], dtype=bool)
    for name in labels:
        v = labels[name]
        out[name] = [tt._list_value(x) for x in v] if isinstance(v, list) else tt._label_tensor(v)
    for name in spec.columns:
        outputs = [ds.derived_value(name, i) for i in idx]
        if len({o.shape for o in outputs}) > 1:
            raise ArgumentError(f"derived column '{name}' has outputs of several shapes in one batch "
                             f"({sorted({o.shape for o in outputs})}): batch by bucket (BucketBatchSampler)")
        out[name] = tt._column_tensor(ds, name, np.stack(outputs) if outputs else np.empty(0))
    return out


def _mixed_batch(worker: _Worker, indices: Sequence[int], slot: _Slot, released: queue.SimpleQueue[int]) -> _Batch:
    """MixedDataset._batch with each dataset's part decoded into the slot (the whole batch in
    place when it comes from one dataset, else each part into its own buffer of the slot and
    the images gathered into the slot's "image" buffer: one copy)."""
    assert worker.mixed is not None  # _load's caller: a MixedDataset's batch
    batch: _Batch = worker.mixed._batch(
        indices, alloc=lambda name, shape, dtype: slot.view(name, shape, dtype, released),
        part_batch=lambda k, local, alloc: _part_batch(worker, k, local, alloc), transform=False)
    return batch
