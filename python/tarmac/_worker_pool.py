"""Shared-memory image buffers that a DataLoader worker reuses across batches (docs/reader.md,
"DataLoader workers or Loader"), instead of a fresh shared-memory tensor per batch whose pages
are then faulted in cold by the decode.

torch hands a worker's tensor to the main process as a file descriptor of its shared memory,
and the receiver keeps that descriptor open for as long as the storage lives (torch's
multiprocessing docs, "file_descriptor" strategy). So a buffer is reused only when both hold:
  1. the main process received it: when the batch is unpickled there, `_received` writes the
     receiving process's pid into the buffer's 8-byte trailer, after its storage was rebuilt
     and once that process checked it keeps the descriptor (else it writes -1: never reused);
  2. that process holds it no longer: no descriptor in /proc/PID/fd names the buffer's file.
A buffer that never reaches a main process (a transform replaced the image, the batch was
dropped) is never reused; past the bound, a batch gets a fresh buffer as before. Used only
with torch's "file_descriptor" sharing strategy (the default on Linux): with "file_system"
torch moves the tensor into a segment of its own, and nothing here applies."""
from __future__ import annotations

import os
import threading
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np
import torch

# torch 1.13's hints: Tensor.storage, UntypedStorage._new_shared, _share_fd_cpu_ and
# get_sharing_strategy have none, and Tensor.set_ is declared without the UntypedStorage it
# takes; those calls (here and in tarmac.torch) carry a `type: ignore` of that one code.

_TRAILER = 8  # int64: the pid of the process that received the buffer; 0 while it is the worker's, -1: never reused
_BOUND = 8  # pooled buffers per worker process; more held at once: fresh ones, not pooled
ENABLED = True  # scripts/bench/loader.py turns it off to measure a fresh buffer per batch
_pool: Optional[_Pool] = None
_pool_lock = threading.Lock()


class _Pooled(torch.Tensor):
    """A batch's tensor viewing a pooled buffer (mark()): pickled (to the main process) as a
    plain tensor that, once rebuilt there, marks the buffer received. Operations on it give
    plain tensors."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __reduce_ex__(self, protocol: Any) -> Tuple[Callable[[torch.Tensor], torch.Tensor], Tuple[torch.Tensor]]:
        plain = self.as_subclass(torch.Tensor)
        pool = _pool
        if pool is None or pool.owner != os.getpid() or _storage(plain).data_ptr() not in pool.by_ptr:
            return (_plain, (plain,))
        return (_received, (plain,))


def _storage(t: torch.Tensor) -> torch.UntypedStorage:
    """t's untyped storage (torch 1.13 has no Tensor.untyped_storage)."""
    return (t.untyped_storage() if hasattr(t, "untyped_storage")  # type: ignore[no-any-return]
            else t.storage().untyped())  # type: ignore[no-untyped-call]


def _plain(t: torch.Tensor) -> torch.Tensor:
    return t


_keeps_fd: Optional[bool] = None  # in a receiving process: whether its received storages keep their descriptor


def _received(t: torch.Tensor) -> torch.Tensor:
    """Runs in the receiving process: the buffer's trailer says who holds it now (-1: a
    process whose hold cannot be seen, the buffer is not reused)."""
    global _keeps_fd
    storage = _storage(t)
    if _keeps_fd is None:  # checked once, on this process's torch
        fd, _ = storage._share_fd_cpu_()  # type: ignore[no-untyped-call]  # the descriptor it keeps, -1 if none
        try:
            _keeps_fd = fd >= 0 and os.fstat(fd).st_size >= storage.nbytes()
        except OSError:
            _keeps_fd = False
    whole = torch.empty(0, dtype=torch.uint8).set_(storage)  # type: ignore[call-overload]
    whole[-_TRAILER:].view(torch.int64).fill_(os.getpid() if _keeps_fd else -1)
    return t


class _Buffer:
    def __init__(self, nbytes: int) -> None:
        self.storage = torch.UntypedStorage._new_shared(nbytes + _TRAILER)  # type: ignore[no-untyped-call]
        fd, _ = self.storage._share_fd_cpu_()
        st = os.fstat(fd)
        self.file = (st.st_dev, st.st_ino)
        self.nbytes = nbytes
        whole = torch.empty(0, dtype=torch.uint8).set_(self.storage)
        self.holder = whole[-_TRAILER:].view(torch.int64)
        self.data = whole[:nbytes]
        self.holder.fill_(0)


class _Pool:
    def __init__(self) -> None:
        self.owner = os.getpid()
        self.buffers: List[_Buffer] = []
        self.by_ptr: Set[int] = set()
        self.broken = False  # /proc of the main process unreadable: no reuse

    def _released(self, candidates: List[_Buffer]) -> Optional[_Buffer]:
        """The first candidate (received by some process) that the receiving process no longer
        holds, or None."""
        holders: Dict[int, Set[Tuple[int, int]]] = {}
        try:
            for buf in candidates:
                pid = int(buf.holder.item())
                if pid not in holders:
                    holders[pid] = _open_files(pid)
                if buf.file not in holders[pid]:
                    return buf
        except OSError:  # the receiving process's /proc is unreadable (or it is gone): no reuse
            self.broken = True
        return None

    def take(self, shape: Tuple[int, ...]) -> Optional[torch.Tensor]:
        """A uint8 tensor of `shape` viewing a free pooled buffer of its size (a new one up to
        the bound, or in place of a free one of another size), or None when none is free."""
        nbytes = int(np.prod(shape, dtype=np.int64))
        if self.broken or nbytes == 0:
            return None
        received = [b for b in self.buffers if b.nbytes == nbytes and b.holder.item() > 0]
        buf = self._released(received) if received else None
        if buf is None:
            if len(self.buffers) >= _BOUND:  # a released buffer of another size (another bucket) makes room
                other = [b for b in self.buffers if b.nbytes != nbytes and b.holder.item() > 0]
                old = self._released(other) if other else None
                if old is None:
                    return None
                self.buffers.remove(old)
                self.by_ptr.discard(old.storage.data_ptr())
            buf = _Buffer(nbytes)
            self.buffers.append(buf)
            self.by_ptr.add(buf.storage.data_ptr())
        buf.holder.fill_(0)
        return buf.data.view(shape)


def _open_files(pid: int) -> Set[Tuple[int, int]]:
    """(device, inode) of every file process `pid` has open."""
    files: Set[Tuple[int, int]] = set()
    fd_dir = f"/proc/{pid}/fd"
    for name in os.listdir(fd_dir):
        try:
            st = os.stat(os.path.join(fd_dir, name))
        except FileNotFoundError:  # closed while listed
            continue
        files.add((st.st_dev, st.st_ino))
    return files


def mark(t: torch.Tensor) -> torch.Tensor:
    """`t` ready to leave the worker: a _Pooled view when it views a pooled buffer, else `t`."""
    pool = _pool
    if pool is None or pool.owner != os.getpid() or _storage(t).data_ptr() not in pool.by_ptr:
        return t
    return t.as_subclass(_Pooled)


def shared_uint8(shape: Tuple[int, ...]) -> Optional[torch.Tensor]:
    """A uint8 tensor of `shape` for a loader worker's batch: a pooled buffer when one is free,
    else None (the caller allocates a fresh one)."""
    global _pool
    if (not ENABLED
            or torch.multiprocessing.get_sharing_strategy() != "file_descriptor"):  # type: ignore[no-untyped-call]
        return None
    with _pool_lock:
        if _pool is None or _pool.owner != os.getpid():
            _pool = _Pool()
        return _pool.take(shape)
