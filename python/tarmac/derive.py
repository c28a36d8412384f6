"""Run a model over a converted dataset once, on every rank, and keep its outputs as a column.

    python -m tarmac.derive DIR --name latents --fn vae_encode:encode [--batch-size 16]
    torchrun --nproc_per_node 8 -m tarmac.derive DIR --name latents --fn vae_encode:encode
    tarmac column merge DIR latents && tarmac verify DIR

FUNC receives a batch of images of one size (a dict: "image" uint8 tensor [B, H, W, 3],
"__index__" int64 [B], and the label fields asked for with --fields: fixed-shape ones stacked
[B, ...], strings and ragged ones as lists of B values) and returns one output per sample: a
torch tensor (on any device) or numpy array [B, ...]. A dataset converted with --no-images
gives no "image": FUNC works on the labels (text embeddings of captions, say). Where it runs is FUNC's
business. Rank and world come from --rank/--world, torchrun's RANK/WORLD_SIZE or Slurm's
SLURM_PROCID/SLURM_NTASKS; ranks never talk to each other. Rank r of W computes samples
[r*N//W, (r+1)*N//W) and writes them to DIR/columns/NAME.parts/ (docs/format.md 8), in chunks:
a rank killed or stopped, run again with the same command, goes on where it stopped. `tarmac
column merge` joins the parts, and refuses while any sample lacks an output.

--reuse OLD_DIR[:NAME] takes a sample's output from OLD_DIR's merged column NAME (default: this
--name) instead of calling FUNC when the sample's input digest is found there: a BLAKE2b-128 of
--fn, --fn-version, the sample's stored image bytes and the --fields values passed to FUNC
(_input_digest says the exact bytes). Only the other samples are batched to FUNC.

The same as a function: tarmac.derive.run(DIR, NAME, fn, batch_size=16, ...), which raises
DeriveError (a TarmacError) where the command prints one line and exits 1, and DeriveStopped
where a signal stopped it (the command exits 128 + the signal).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import errno
import hashlib
import importlib
import json
import os
import re
import signal
import struct
import sys
import time
import traceback
import zlib
from types import FrameType, ModuleType, TracebackType
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Tuple, Type, Union

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

import tarmac

from . import _format
from .errors import FormatError, TarmacError

_Func = Callable[[Dict[str, Any]], Any]  # FUNC: a batch -> one output per sample
_Log = Callable[[str], None]
_Record = Dict[str, Any]  # a part's record (docs/format.md 8)
_Item = Tuple[int, NDArray[Any], NDArray[np.uint8]]  # (sample, its output, its input digest)

__all__ = ["run", "main", "DeriveError", "DeriveStopped"]

_CHUNK_BYTES = 256 << 20  # a chunk is written when this much is buffered ...
_CHUNK_SECONDS = 60.0     # ... or this long after the last one


class DeriveError(TarmacError):
    """What stops a derive run: the message says what and how to go on. `.code` is None."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


class DeriveStopped(DeriveError):
    """A SIGINT or SIGTERM stopped the run once its batch in flight was checkpointed: the same
    run goes on where it stopped. `.signal`: the signal's number; `.exit_code`: 128 + it, what
    `python -m tarmac.derive` exits with."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.signal = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signal


def _rank_world(rank: Optional[int], world: Optional[int]) -> Tuple[int, int]:
    """Explicit values, else torchrun's, else Slurm's, else 0 of 1."""
    env = os.environ
    for r_name, w_name in (("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
        if rank is None and world is None and r_name in env and w_name in env:
            try:
                rank, world = int(env[r_name]), int(env[w_name])
            except ValueError:
                raise DeriveError(f"${r_name}={env[r_name]!r} and ${w_name}={env[w_name]!r} are not a rank and a "
                                  "world size (integers): set them right, or give --rank and --world") from None
    if (rank is None) != (world is None):
        raise DeriveError("give both --rank and --world, or neither")
    rank, world = (0, 1) if rank is None or world is None else (int(rank), int(world))
    if world < 1 or not 0 <= rank < world:
        raise DeriveError(f"rank {rank} of world {world}: need 0 <= rank < world")
    return rank, world


def _load_fn(fn: Union[_Func, str]) -> Tuple[_Func, str]:
    """(callable, its MODULE:FUNC name)."""
    if callable(fn):
        return fn, f"{fn.__module__}:{getattr(fn, '__qualname__', fn.__class__.__name__)}"
    if not isinstance(fn, str) or fn.count(":") != 1:
        raise DeriveError(f"--fn must be MODULE:FUNC (e.g. vae_encode:encode), not {fn!r}")
    module, func = fn.split(":")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does: the current folder's modules
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as e:
        raise DeriveError(f"--fn {fn}: cannot import module '{module}': {e} (run from its folder or set "
                          "PYTHONPATH)") from e
    for part in func.split("."):
        if not hasattr(obj, part):
            raise DeriveError(f"--fn {fn}: module '{module}' has no '{func}'")
        obj = getattr(obj, part)
    if not callable(obj):
        raise DeriveError(f"--fn {fn}: '{func}' is not callable")
    return obj, fn


def _labels_crc32(path: str) -> str:
    """The dataset's identity: the manifest's labels_crc32, or the annotation file's CRC-32."""
    try:
        with open(os.path.join(path, _format.MANIFEST)) as f:
            crc = json.load(f).get("labels_crc32")
        if isinstance(crc, str) and re.fullmatch(r"[0-9a-f]{8}", crc):
            return crc
    except (OSError, ValueError, AttributeError):
        pass
    return _file_crc32(os.path.join(path, _format.LABELS))


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: str, data: Union[bytes, List[memoryview]]) -> None:
    """data: bytes, or a list of buffers written one after the other."""
    tmp = path + ".tmp"
    buffers: Sequence[Union[bytes, memoryview]]
    if isinstance(data, list):
        buffers = data
    else:
        buffers = [data]
    try:
        with open(tmp, "wb") as f:
            for buffer in buffers:
                f.write(buffer)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:  # a full disk: the half-written file goes, and with it the space it took
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    os.replace(tmp, path)
    _fsync_dir(os.path.dirname(path))


def _chunk_index(path: str) -> NDArray[np.int64]:
    """The sample indices a chunk holds (its `index` tensor), read without trusting the rest."""
    with open(path, "rb") as f:
        data = f.read()
    header, start = _format.safetensors_header(data)
    t = header["index"]
    b, e = t["data_offsets"]
    if t["dtype"] != _format.I64 or e - b != 8 * t["shape"][0]:
        raise FormatError("its index is not I64")
    return np.frombuffer(data[start + b:start + e], dtype="<i8")


def _as_numpy(out: Any, batch_len: int, first: int) -> Tuple[NDArray[Any], str]:
    """FUNC's result as (numpy array [B, ...], safetensors dtype name)."""
    arr: NDArray[Any]
    dtype: Optional[str]
    where = f"--fn's output for the batch starting at sample {first}"
    if hasattr(out, "detach") and hasattr(out, "cpu"):  # a torch tensor, on any device
        t = out.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            import torch
            arr, dtype = t.contiguous().view(torch.int16).numpy().view("<u2"), _format.BF16
        else:
            arr = t.contiguous().numpy()
            dtype = None
    elif isinstance(out, np.ndarray):
        arr, dtype = out, None
    else:
        raise DeriveError(f"{where} is a {type(out).__name__}; return a torch tensor or numpy array with one "
                          "output per sample along the first axis")
    if arr.ndim == 0 or arr.shape[0] != batch_len:
        raise DeriveError(f"{where} has shape {tuple(arr.shape)}; its first axis must be the batch's "
                          f"{batch_len} samples")
    if dtype is None:
        arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        dtype = _format.dtype_name(arr.dtype)
        if dtype is None:
            raise DeriveError(f"{where} has dtype {arr.dtype}, which a column cannot hold (numbers and bools)")
    return np.ascontiguousarray(arr), dtype


def _stack_fields(ds: tarmac.Dataset, fields: Sequence[str], idx: NDArray[np.int64]) -> Dict[str, NDArray[Any]]:
    """Fixed-shape fields of samples idx stacked as ds.batch stacks them (a nullable field's
    missing values as zeros, NAME.valid beside it), without decoding any image."""
    labels: Dict[str, NDArray[Any]] = {}
    for f in fields:
        values = [ds.value(f, int(i)) for i in idx]
        if ds.fields.get(f, {}).get("nullable"):
            valid = np.array([v is not None for v in values])
            probe = ds.stored_value(f, 0)
            values = [np.zeros_like(probe) if v is None else v for v in values]
            labels[f + ".valid"] = valid
        labels[f] = np.stack(values) if values else np.empty((0,))
    return labels


def _batches(ds: tarmac.Dataset, todo: NDArray[np.int64], batch_size: int) -> List[NDArray[np.int64]]:
    """The remaining samples grouped by image size ((width, height) ascending), in index order
    within a size, cut into batches of batch_size."""
    if not ds.blob_kinds:
        groups = [todo]
    else:
        w = np.asarray(ds.column(_format.IMAGE + ".width"))[todo]
        h = np.asarray(ds.column(_format.IMAGE + ".height"))[todo]
        key = (w.astype(np.int64) << 32) | h.astype(np.int64)
        order = np.lexsort((todo, key))
        todo, key = todo[order], key[order]
        groups = np.split(todo, np.flatnonzero(np.diff(key)) + 1) if len(todo) else []
    return [g[s:s + batch_size] for g in groups for s in range(0, len(g), batch_size)]


class _Stop:
    """The first SIGINT/SIGTERM asks the loop to stop after its batch; a second one exits."""

    def __init__(self) -> None:
        self.signal: Optional[int] = None
        self._old: Dict[int, Any] = {}  # signal -> its handler before

    def __enter__(self) -> _Stop:
        import threading
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                self._old[s] = signal.signal(s, self._handle)
        return self

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        if self.signal is not None:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        self.signal = signum

    def __exit__(self, *exc: Any) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)


class _Part:
    """One rank's part: its record and chunks in DIR/columns/NAME.parts/."""

    def __init__(self, parts_dir: str, record: _Record) -> None:
        self.dir, self.record = parts_dir, record
        self.path = os.path.join(parts_dir, _format.part_record(record["rank"], record["world"]))

    def save(self) -> None:
        _write_atomic(self.path, json.dumps(self.record, indent=1).encode())

    def write_chunk(self, idx: NDArray[np.int64], digests: NDArray[np.uint8], shapes: NDArray[np.int64],
                    values: NDArray[Any], dtype: str, reused: int = 0) -> None:
        """Samples idx (I64 [k]) with their input digests (U8 [k, 16]), output shapes (I64 [k, ndim])
        and outputs one after the other (`values`, flat) → the next chunk file, written from the
        arrays without joining them, then the record that lists it; `reused` of them were taken
        from an older column."""
        r = self.record
        buffers = _format.safetensors_buffers(
            [("index", idx, _format.I64), (_format.DIGEST, digests, _format.U8), ("shape", shapes, _format.I64),
             ("values", values, dtype)], {"format": _format.CHUNK_FORMAT})
        crc, size = 0, 0
        for b in buffers:
            crc, size = zlib.crc32(b, crc), size + b.nbytes
        name = _format.part_chunk(r["rank"], r["world"], len(r["chunks"]))
        _write_atomic(os.path.join(self.dir, name), buffers)
        r["chunks"].append(_format.part_chunk_entry(name, len(idx), size, crc))
        r["done"] += len(idx)
        r["reused"] = r.get("reused", 0) + reused
        self.save()


def _chunk_arrays(items: Sequence[_Item]
                  ) -> Tuple[NDArray[np.int64], NDArray[np.uint8], NDArray[np.int64], NDArray[Any]]:
    """[(index, output array, input digest)] → write_chunk's (idx, digests, shapes, values)."""
    idx = np.array([i for i, _, _ in items], dtype=np.int64)
    ndim = items[0][1].ndim
    shapes = np.array([a.shape for _, a, _ in items], dtype=np.int64).reshape(len(items), ndim)
    values = np.concatenate([a.reshape(-1) for _, a, _ in items])
    digests = np.stack([d for _, _, d in items]).astype(np.uint8).reshape(len(items), _format.DIGEST_BYTES)
    return idx, digests, shapes, values


def _open_part(parts_dir: str, record: _Record, restart: bool, log: _Log) -> Tuple[_Part, NDArray[np.int64]]:
    """The part to go on with: a new one, or the one a previous run of this rank left."""
    part = _Part(parts_dir, record)
    rank, world = record["rank"], record["world"]
    if restart:
        for entry in os.listdir(parts_dir):
            if entry.startswith(_format.part_prefix(rank, world)):
                os.remove(os.path.join(parts_dir, entry))
    if not os.path.exists(part.path):
        part.save()
        return part, np.empty(0, dtype=np.int64)
    try:
        with open(part.path) as f:
            old = json.load(f)
    except (OSError, ValueError) as e:
        raise DeriveError(f"{part.path} is unreadable ({e}): run this rank again with --restart") from e
    old.setdefault("fn_version", "")  # a record from before --fn-version
    for key, what in (("dataset", "dataset (it was converted again since)"), ("world", "world size"),
                      ("fn", "--fn"), ("fn_version", "--fn-version"), ("column", "column"), ("begin", "share"),
                      ("end", "share")):
        if old.get(key) != record[key]:
            raise DeriveError(
                f"{part.path} was computed with another {what}: {old.get(key)!r}, now {record[key]!r}. "
                f"Remove the column's parts (tarmac column rm {os.path.dirname(os.path.dirname(parts_dir))} "
                f"{record['column']}) and derive again, or run this rank with --restart")
    chunks: List[NDArray[np.int64]] = []
    for c in old.get("chunks", []):
        path = os.path.join(parts_dir, c["file"])
        try:
            if os.path.getsize(path) != c["bytes"]:
                raise FormatError(f"it is {os.path.getsize(path)} bytes, the record says {c['bytes']}")
            chunks.append(_chunk_index(path))
        except (OSError, ValueError, KeyError) as e:
            raise DeriveError(f"{path} is damaged or missing ({e}): run this rank again with --restart") from e
    record.update(chunks=old["chunks"], done=int(old.get("done", 0)), complete=bool(old.get("complete")),
                  reused=int(old.get("reused", 0)))
    done = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.int64)
    if len(done):
        log(f"going on from {len(done)} of {record['end'] - record['begin']} samples already computed")
    return part, done


def run(path: Union[str, os.PathLike[str]], name: str, fn: Union[_Func, str],
        batch_size: int = 16, fields: Optional[Sequence[str]] = None, rank: Optional[int] = None,
        world: Optional[int] = None, threads: Optional[int] = None, checkpoint_every: Optional[int] = None,
        restart: bool = False, log: Optional[Callable[[str], None]] = None, images: bool = True,
        fn_version: str = "", reuse: Optional[Union[str, os.PathLike[str]]] = None) -> Dict[str, Any]:
    """Computes this rank's share of column `name` of the dataset at `path` with `fn` (a callable
    or "MODULE:FUNC"). images=False gives FUNC no "image" and decodes nothing; threads (decoding)
    defaults to the cores this process may use divided among torchrun's ranks on the node.
    fn_version: a string naming FUNC's version (bump it when FUNC or its weights change);
    reuse: "OLD_DIR[:NAME]", a merged column whose outputs are taken for the samples whose input
    digest (fn, fn_version, stored image bytes, fields) it holds.
    Returns {"rank", "world", "samples", "computed", "reused", "batches", "seconds", "wait_seconds"
    (blocked on the next batch's decoding), "fn_seconds" (in FUNC, until its output is on the
    host), "data_wait" (wait_seconds / seconds), "threads", "complete"}. Raises DeriveError (a
    TarmacError) saying what to do, and DeriveStopped when a SIGINT or SIGTERM stopped the run
    after checkpointing its batch in flight (a second signal kills the process)."""
    path = os.fspath(path)
    r, w = _rank_world(rank, world)
    func, fn_name = _load_fn(fn)
    log = log or (lambda msg: print(f"tarmac.derive: rank {r}/{w}: {msg}", file=sys.stderr, flush=True))
    if batch_size < 1:
        raise DeriveError("--batch-size must be at least 1")
    if not _format.COLUMN_NAME.fullmatch(name or ""):
        raise DeriveError(f"{name!r} is not a column name: use 1-128 of A-Z a-z 0-9 _ . -, starting with a letter "
                          "or digit")
    try:
        ds = tarmac.Dataset(path)
    except (tarmac.TarmacError, OSError) as e:
        raise DeriveError(f"cannot open the dataset '{path}': {e}") from e
    if name in ds.fields or name == "image":
        raise DeriveError(f"'{name}' is the name of {'the image' if name == 'image' else 'a label field'} of the "
                          "dataset; choose another --name")
    fields = list(fields or [])
    fixed = ds.fixed_fields()
    for f in fields:
        if f not in fixed and f not in ds.fields:
            known = fixed + [k for k in ds.fields if k not in fixed]
            raise DeriveError(f"--fields: '{f}' is not a field of the dataset (it has: {', '.join(known) or 'none'})")
    n = len(ds)
    begin, end = r * n // w, (r + 1) * n // w
    old = _OldColumn(os.fspath(reuse), name) if reuse is not None else None  # verified before anything is written
    parts_dir = _format.parts_dir(path, name)
    os.makedirs(parts_dir, exist_ok=True)
    record = _format.new_part_record(name, r, w, begin, end, _labels_crc32(path), n, fn_name,
                                     f"tarmac {tarmac.__version__} (python)", batch_size, fields,
                                     str(fn_version or ""), _format.DIGEST_SCHEME)
    torch = _torch()  # before the part exists: a signal from then on is a checkpoint, not a kill
    with _Stop() as stop:
        return _compute(ds, path, name, func, record, parts_dir, restart, batch_size, fields,
                        threads or _default_threads(), images, checkpoint_every, torch, stop, log, old)


def _default_threads() -> int:
    """The cores this process may use (its CPU affinity: under Slurm, the task's share already)
    divided among torchrun's ranks on this node (LOCAL_WORLD_SIZE), at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        local = 1
    return max(1, cores // local)


def _compute(ds: tarmac.Dataset, path: str, name: str, func: _Func, record: _Record, parts_dir: str, restart: bool,
             batch_size: int, fields: List[str], threads: int, images: bool, checkpoint_every: Optional[int],
             torch: Optional[ModuleType], stop: _Stop, log: _Log, old: Optional[_OldColumn] = None) -> Dict[str, Any]:
    """images False: FUNC gets the labels alone and nothing is decoded. old: the _OldColumn of
    --reuse, or None."""
    rank, world, begin, end = record["rank"], record["world"], record["begin"], record["end"]
    part, done = _open_part(parts_dir, record, restart, log)
    result: Dict[str, Any] = {
        "rank": rank, "world": world, "samples": end - begin, "computed": 0, "reused": 0, "batches": 0, "seconds": 0.0,
        "wait_seconds": 0.0, "fn_seconds": 0.0, "data_wait": 0.0, "threads": threads, "complete": False}
    if record["complete"]:
        log(f"already complete ({end - begin} samples); nothing to do")
        result["complete"] = True
        return result
    todo = np.setdiff1d(np.arange(begin, end, dtype=np.int64), done)
    hash_image = images and bool(ds.blob_kinds)
    fn_id = (record["fn"], record["fn_version"])
    digest_of: Dict[int, NDArray[np.uint8]] = {}  # sample → its input digest, computed ahead for --reuse
    if old is not None and len(todo):
        digests = _input_digests(ds, todo, fields, fn_id, hash_image)
        rows = [old.rows.get(d.tobytes()) for d in digests]
        taken = np.array([row is not None for row in rows], dtype=bool)
        _write_reused(part, parts_dir, record, old, todo[taken], [row for row in rows if row is not None],
                      digests[taken], stop, log)
        result["reused"] = int(taken.sum())
        digest_of = {int(i): d for i, d in zip(todo[~taken], digests[~taken])}
        todo = todo[~taken]
        log(f"--reuse {old.file}: {result['reused']} samples reused, {len(todo)} to compute")
    decode = images and bool(ds.blob_kinds)
    batches = _batches(ds, todo, batch_size) if decode else \
        [todo[s:s + batch_size] for s in range(0, len(todo), batch_size)]
    fixed = set(ds.fixed_fields())
    stacked = [f for f in fields if f in fixed]
    listed = [f for f in fields if f not in fixed]  # strings and ragged fields: one value per sample

    def load(idx: NDArray[np.int64]
             ) -> Tuple[NDArray[np.int64], Optional[NDArray[np.uint8]], Dict[str, Any], NDArray[np.uint8]]:
        if decode or not ds.blob_kinds:  # without images, ds.batch only stacks the fields
            pixels, labels = ds.batch(idx, fields=stacked, threads=threads)
        else:
            pixels, labels = None, _stack_fields(ds, stacked, idx)
        for f in listed:
            labels[f] = [ds.value(f, int(i)) for i in idx]  # str, array, or None where null
        if digest_of:
            digests = np.stack([digest_of[int(i)] for i in idx])
        else:
            digests = _input_digests(ds, idx, fields, fn_id, hash_image)
        return idx, pixels, labels, digests

    t0 = last_chunk = last_log = time.monotonic()
    pending: List[_Item] = []
    pending_bytes, pending_batches = 0, 0
    dtype: Optional[str] = None
    kind: Optional[Tuple[str, int]] = None  # (dtype, ndim) of the outputs: one for the whole column
    if old is not None and result["reused"]:
        kind, dtype = (old.dtype, old.ndim), old.dtype

    def flush() -> None:
        nonlocal pending, pending_bytes, pending_batches, last_chunk
        if pending:
            assert dtype is not None  # set with the first output pending
            with _writing_part(parts_dir, record):
                part.write_chunk(*_chunk_arrays(pending), dtype)
        pending, pending_bytes, pending_batches, last_chunk = [], 0, 0, time.monotonic()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        ahead = pool.submit(load, batches[0]) if batches else None
        for k in range(len(batches)):
            t_wait = time.monotonic()
            assert ahead is not None  # batch k's, submitted before
            idx, pixels, labels, digests = ahead.result()
            t_fn = time.monotonic()
            result["wait_seconds"] += t_fn - t_wait
            ahead = pool.submit(load, batches[k + 1]) if k + 1 < len(batches) else None
            batch: Dict[str, Any] = {"__index__": idx} if pixels is None else {"image": pixels, "__index__": idx}
            batch.update(labels)
            if torch is not None:
                batch = {key: torch.from_numpy(np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v
                         for key, v in batch.items()}
            try:
                produced = func(batch)
            except Exception as e:  # FUNC's own error: keep what it computed before, say where it failed
                if ahead is not None:
                    ahead.cancel()
                flush()
                samples = (", ".join(str(int(i)) for i in idx[:8])
                           + (f" and {len(idx) - 8} more" if len(idx) > 8 else ""))
                raise DeriveError(f"--fn raised {_where(e)} on the batch of samples {samples}; "
                                  f"{record['done']} of this rank's {end - begin} samples are kept in its part: "
                                  f"fix FUNC (or that sample) and run the same command again to go on") from e
            out, out_dtype = _as_numpy(produced, len(idx), int(idx[0]))  # on the host: FUNC has finished
            result["fn_seconds"] += time.monotonic() - t_fn
            if kind is None and record["chunks"]:
                kind = _recorded_kind(parts_dir, record)
            if kind is not None and kind != (out_dtype, out.ndim - 1):
                raise DeriveError(f"--fn's output for the batch starting at sample {int(idx[0])} is {out_dtype} "
                                  f"with {out.ndim - 1} dimensions per sample; earlier outputs of this column are "
                                  f"{kind[0]} with {kind[1]}: a column has one dtype and one number of dimensions")
            kind, dtype = (out_dtype, out.ndim - 1), out_dtype
            pending += [(int(i), out[j], digests[j]) for j, i in enumerate(idx)]
            pending_bytes += out.nbytes
            pending_batches += 1
            result["computed"] += len(idx)
            result["batches"] += 1
            now = time.monotonic()
            if (checkpoint_every and pending_batches >= checkpoint_every) or pending_bytes >= _CHUNK_BYTES \
                    or now - last_chunk >= _CHUNK_SECONDS:
                flush()
            if now - last_log >= 10:
                last_log = now
                rate = result["computed"] / (now - t0)
                log(f"{record['done'] + len(pending)} of {end - begin} samples, {rate:.1f} samples/s, "
                    f"waiting for data {result['wait_seconds'] / (now - t0):.0%} of the time")
            if stop.signal is not None:
                if ahead is not None:
                    ahead.cancel()
                flush()
                message = (f"stopped by {signal.Signals(stop.signal).name} after {record['done']} of "
                           f"{end - begin} samples (checkpoint written); run the same command again to go on")
                log(message)
                raise DeriveStopped(stop.signal, message)
    flush()
    record["complete"] = True
    with _writing_part(parts_dir, record):
        part.save()
    result["seconds"] = time.monotonic() - t0
    result["data_wait"] = result["wait_seconds"] / result["seconds"] if result["seconds"] > 0 else 0.0
    result["complete"] = True
    reused = f", {result['reused']} reused from {old.file}" if old is not None else ""
    log(f"done: {result['computed']} samples computed in {result['batches']} batches{reused}, "
        f"{result['seconds']:.1f} s, waiting for data {result['data_wait']:.0%} of it "
        f"({end - begin} in this rank's share, samples {begin}..{end - 1 if end > begin else begin}); merge with "
        f"`tarmac column merge {path} {name}` once every rank is done")
    return result


def _item(data: bytes) -> bytes:
    """One item of the digest's input: its length (u64 little-endian), then its bytes."""
    return struct.pack("<Q", len(data)) + data


def _value_bytes(v: Any) -> bytes:
    """A field's value in the digest's canonical form: null, a string (UTF-8), a JSON value
    (sorted keys, no spaces), or an array (numpy dtype string, shape as I64s, C-order bytes)."""
    if v is None:
        return _item(b"null")
    if isinstance(v, str):
        return _item(b"str") + _item(v.encode())
    if isinstance(v, np.ndarray):
        a = np.ascontiguousarray(v)
        return (_item(b"array") + _item(a.dtype.str.encode()) + _item(struct.pack(f"<{a.ndim}q", *a.shape))
                + _item(a.tobytes()))
    return _item(b"json") + _item(json.dumps(v, sort_keys=True, separators=(",", ":")).encode())


def _input_digest(ds: tarmac.Dataset, i: int, fields: Sequence[str], fn_id: Tuple[str, str], image: bool) -> bytes:
    """Sample i's input digest (format.md 9): BLAKE2b with a 16-byte digest over, each as
    _item: "tarmac-derive-input/1", --fn, --fn-version, then (image) "image" and the sample's
    stored image bytes exactly as stored, then for each of --fields in the order given its name
    and _value_bytes of its value."""
    h = hashlib.blake2b(digest_size=_format.DIGEST_BYTES)
    h.update(_item(b"tarmac-derive-input/1") + _item(fn_id[0].encode()) + _item(fn_id[1].encode()))
    if image:
        blob = ds.blob(i)
        h.update(_item(b"image"))
        h.update(struct.pack("<Q", blob.nbytes))
        h.update(blob.data)
    for f in fields:
        h.update(_item(f.encode()) + _value_bytes(ds.value(f, i)))
    return h.digest()


def _input_digests(ds: tarmac.Dataset, idx: NDArray[np.int64], fields: Sequence[str], fn_id: Tuple[str, str],
                   image: bool) -> NDArray[np.uint8]:
    """U8 [len(idx), 16]: the input digests of samples idx."""
    out = np.empty((len(idx), _format.DIGEST_BYTES), dtype=np.uint8)
    for j, i in enumerate(idx):
        out[j] = np.frombuffer(_input_digest(ds, int(i), fields, fn_id, image), dtype=np.uint8)
    return out


class _OldColumn:
    """The merged column --reuse takes outputs from: its input digests (rows: digest bytes → row)
    and its outputs, read through a read-only memory map."""

    def __init__(self, spec: str, name: str) -> None:
        where, _, col = spec.rpartition(":")
        if not where or os.path.isdir(spec) or not _format.COLUMN_NAME.fullmatch(col):
            where, col = spec, name
        self.file = os.path.join(where, _format.COLUMNS, col + ".safetensors")
        if not os.path.isfile(self.file):
            parts = _format.parts_dir(where, col)
            if os.path.isdir(parts):
                raise DeriveError(f"--reuse {spec}: column '{col}' of '{where}' is not merged ({parts} holds its "
                                  f"parts): merge it first with `tarmac column merge {where} {col}`")
            raise DeriveError(f"--reuse {spec}: '{where}' has no merged column '{col}' (no {self.file}); give "
                              "OLD_DIR:NAME of a column computed by derive and merged")
        try:
            with open(self.file, "rb") as f:
                head = f.read(8)
                (n,) = struct.unpack("<Q", head) if len(head) == 8 else (0,)
                header, start = _format.safetensors_header(head + f.read(n))
            meta = header.get("__metadata__", {})
            if _format.DIGEST not in header:
                raise DeriveError(f"--reuse {spec}: {self.file} holds no input digests (it was derived by a "
                                  "tarmac from before --reuse), so none of its outputs can be reused: derive "
                                  "without --reuse (the new column holds digests, and can be reused next time)")
            if meta.get("digest") != _format.DIGEST_SCHEME:
                raise DeriveError(f"--reuse {spec}: {self.file}'s digests are '{meta.get('digest')}', this derive "
                                  f"computes '{_format.DIGEST_SCHEME}': derive without --reuse")
            mm = np.memmap(self.file, dtype=np.uint8, mode="r")
            _check_reused_column(spec, where, self.file, header, meta, mm, start)

            def tensor(key: str, np_dtype: npt.DTypeLike) -> NDArray[Any]:
                b, e = header[key]["data_offsets"]
                return mm[start + b:start + e].view(np_dtype)

            count = int(meta["num_samples"])
            digests = tensor(_format.DIGEST, np.uint8).reshape(count, _format.DIGEST_BYTES)
            self.offsets = tensor("offsets", "<i8")
            self.dtype = header["values"]["dtype"]
            self.values = tensor("values", dict(_format.DTYPES)[self.dtype]).reshape(-1)
            self.shapes = tensor("shapes", "<i8").reshape(count, -1)
            self.ndim = self.shapes.shape[1]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise DeriveError(f"--reuse {spec}: cannot read {self.file} ({e}): check it with `tarmac verify "
                              f"{where}`") from e
        self.rows: Dict[bytes, int] = {}
        for row in range(count):  # the first sample of a digest wins: equal inputs, equal outputs
            self.rows.setdefault(digests[row].tobytes(), row)

    def output(self, row: int) -> NDArray[Any]:
        out: NDArray[Any] = self.values[self.offsets[row]:self.offsets[row + 1]].reshape(tuple(self.shapes[row]))
        return out


def _file_crc32(path: str) -> str:
    crc = 0
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 24)
            if not block:
                break
            crc = zlib.crc32(block, crc)
    return "%08x" % crc


def _check_reused_column(spec: str, where: str, file: str, header: Dict[str, Any], meta: Dict[str, Any],
                         mm: NDArray[np.uint8], start: int) -> None:
    """Whatever is reused is verified first (docs/reliability.md): the old column's tensors against
    the CRC-32s its metadata states, and the column against its dataset (the annotation file's
    CRC-32, the manifest's labels_crc32), as `tarmac verify OLD_DIR` checks them. A damaged old
    column is refused rather than recomputed: it says the old dataset needs attention, and the
    user chooses (derive without --reuse, or repair OLD_DIR)."""
    fix = f"check it with `tarmac verify {where}`, or derive without --reuse"
    sums = [("values", "values_crc32"), ("offsets", "offsets_crc32"), ("shapes", "shapes_crc32"),
            (_format.DIGEST, "digest_crc32")]
    for key, said_key in sums:
        said = meta.get(said_key)
        if not isinstance(said, str):
            raise DeriveError(f"--reuse {spec}: {file} states no {said_key}: it is not a column tarmac merged; {fix}")
        b, e = header[key]["data_offsets"]
        crc = "%08x" % zlib.crc32(mm[start + b:start + e].data)
        if crc != said:
            raise DeriveError(f"--reuse {spec}: column '{meta.get('column', '?')}' in {file} is damaged: the CRC-32 "
                              f"of its '{key}' tensor is {crc}, its {said_key} says {said}; nothing was reused "
                              f"({fix})")
    labels = os.path.join(where, _format.LABELS)
    actual = _file_crc32(labels)
    recorded = None
    try:
        with open(os.path.join(where, _format.MANIFEST)) as f:
            recorded = json.load(f).get("labels_crc32")
    except FileNotFoundError:
        pass
    except (OSError, ValueError, AttributeError) as e:
        raise DeriveError(f"--reuse {spec}: cannot read {os.path.join(where, _format.MANIFEST)} ({e}); {fix}") from e
    if recorded is not None and recorded != actual:
        raise DeriveError(f"--reuse {spec}: {labels} is damaged: its CRC-32 is {actual}, the manifest's labels_crc32 "
                          f"says {recorded}; nothing was reused ({fix})")
    if meta.get("labels_crc32") != actual:
        raise DeriveError(f"--reuse {spec}: column '{meta.get('column', '?')}' in {file} was computed from another "
                          f"version of '{where}' (annotation file CRC-32 {meta.get('labels_crc32')}, now {actual}); "
                          f"nothing was reused ({fix})")


def _write_reused(part: _Part, parts_dir: str, record: _Record, old: _OldColumn, idx: NDArray[np.int64],
                  rows: npt.ArrayLike, digests: NDArray[np.uint8], stop: _Stop, log: _Log) -> None:
    """Samples idx take rows `rows` of the old column, written as chunks of this part."""
    if len(idx) and record["chunks"]:
        kind = _recorded_kind(parts_dir, record)
        if kind != (old.dtype, old.ndim):
            raise DeriveError(f"--reuse {old.file} holds {old.dtype} outputs of {old.ndim} dimensions, this part's "
                              f"earlier outputs are {kind[0]} of {kind[1]}: a column has one dtype and one number "
                              "of dimensions")
    rows = np.asarray(rows, dtype=np.int64)
    begin, end = np.asarray(old.offsets[rows]), np.asarray(old.offsets[rows + 1])
    cum = np.cumsum((end - begin) * old.values.itemsize)  # bytes of outputs up to and with each sample
    # One buffer for every chunk, each gathered into it in one copy from the old column's map: a
    # fresh 256 MiB a chunk cost more in page faults than the copy itself (docs/performance.md).
    buffer, s = np.empty(0, dtype=old.values.dtype), 0
    while s < len(idx):  # a chunk ends with the output that brings it to _CHUNK_BYTES, or the last
        before = int(cum[s - 1]) if s else 0
        e = min(len(idx), 1 + int(np.searchsorted(cum, before + _CHUNK_BYTES)))
        size = int((end[s:e] - begin[s:e]).sum())
        if buffer.size < size:
            buffer = np.empty(size, dtype=old.values.dtype)
        values = np.concatenate([old.values[b:f] for b, f in zip(begin[s:e].tolist(), end[s:e].tolist())],
                                out=buffer[:size])
        with _writing_part(parts_dir, record):
            part.write_chunk(np.asarray(idx[s:e], dtype=np.int64), np.asarray(digests[s:e], dtype=np.uint8),
                             np.array(old.shapes[rows[s:e]]), values, old.dtype, reused=e - s)
        s = e
        if stop.signal is not None:
            message = (f"stopped by {signal.Signals(stop.signal).name} after {record['done']} samples "
                       "(checkpoint written); run the same command again to go on")
            log(message)
            raise DeriveStopped(stop.signal, message)


def _where(e: BaseException) -> str:
    """`Type: message (at FILE:LINE)`, the innermost frame of e's traceback: FUNC's own line."""
    frames = traceback.extract_tb(e.__traceback__)
    at = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(e).__name__}: {e}{at}"


class _writing_part:
    """A failed write of this rank's part (a full disk, a quota) as one DeriveError that says what
    is kept (the chunk being written is removed: _write_atomic)."""

    def __init__(self, parts_dir: str, record: Dict[str, Any]) -> None:
        self.parts_dir, self.record = parts_dir, record

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Optional[Type[BaseException]], e: Optional[BaseException],
                 tb: Optional[TracebackType]) -> Literal[False]:
        if e is None or not isinstance(e, OSError):
            return False
        reason = "no space left on device" if e.errno in (errno.ENOSPC, errno.EDQUOT) else (e.strerror or str(e))
        raise DeriveError(f"cannot write this rank's part in '{self.parts_dir}': {reason}; the "
                          f"{self.record['done']} samples of its earlier chunks are kept: free space and run the "
                          f"same command again to go on") from e


def _recorded_kind(parts_dir: str, record: _Record) -> Tuple[str, int]:
    """(dtype, ndim) of the outputs in this part's first chunk."""
    with open(os.path.join(parts_dir, record["chunks"][0]["file"]), "rb") as f:
        data = f.read(8 + 65536)
    header, _ = _format.safetensors_header(data)
    return header["values"]["dtype"], header["shape"]["shape"][1]


def _torch() -> Optional[ModuleType]:
    try:
        import torch
        return torch
    except ImportError:
        return None


def main(argv: Optional[List[str]] = None) -> int:
    """`python -m tarmac.derive`: an error is one line on stderr and exit code 1 (2 for a usage
    error, from argparse), a stop by SIGINT or SIGTERM 128 + the signal."""
    p = argparse.ArgumentParser(
        prog="python -m tarmac.derive",
        description="Compute one output per sample of a converted dataset (VAE latents, embeddings) with "
                    "your function, on every rank, into DIR/columns/NAME.parts/; then `tarmac column merge DIR "
                    "NAME` joins the parts into DIR/columns/NAME.safetensors.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="FUNC gets {'image': uint8 [B, H, W, 3], '__index__': int64 [B], FIELDS...} (torch tensors, or\n"
               "numpy arrays without torch), images of one size per batch (no 'image' when the dataset was\n"
               "converted with --no-images; string and ragged FIELDS come as lists), and returns one output\n"
               "per sample ([B, ...], torch or numpy; its device is FUNC's business).\n\n"
               "Example (vae_encode.py in the current folder defines encode(batch)):\n"
               "  torchrun --nproc_per_node 8 -m tarmac.derive buckets/ --name latents --fn vae_encode:encode\n"
               "  tarmac column merge buckets/ latents && tarmac verify buckets/\n\n"
               "Rank r of W computes samples [r*N//W, (r+1)*N//W). Killed or stopped (SIGTERM, SIGINT: the\n"
               "batch in flight is finished and checkpointed), the same command goes on where it stopped.")
    p.add_argument("dir", help="the converted dataset")
    p.add_argument("--name", required=True, help="the column's name (latents, clip_emb, ...)")
    p.add_argument("--fn", required=True, help="MODULE:FUNC, imported from the current folder or PYTHONPATH")
    p.add_argument("--batch-size", type=int, default=16, help="samples per call of FUNC (default 16)")
    p.add_argument("--fields", default="", help="comma-separated label fields to pass to FUNC (fixed-shape ones "
                   "stacked [B, ...], strings and ragged ones as lists)")
    p.add_argument("--no-images", action="store_true", help="give FUNC no 'image' and decode nothing (a function "
                   "of the labels alone: text embeddings of the captions, say)")
    p.add_argument("--rank", type=int, help="this rank (default: $RANK, $SLURM_PROCID, or 0)")
    p.add_argument("--world", type=int, help="the number of ranks (default: $WORLD_SIZE, $SLURM_NTASKS, or 1)")
    p.add_argument("--threads", type=int, default=0, help="native decoding threads (default: the cores this process "
                   "may use, divided among torchrun's ranks on the node)")
    p.add_argument("--checkpoint-every", type=int, metavar="K",
                   help="write a chunk every K batches (default: every 256 MiB of outputs or 60 s)")
    p.add_argument("--restart", action="store_true", help="delete this rank's part and compute it from the start")
    p.add_argument("--fn-version", default="", metavar="STR", help="FUNC's version, part of every sample's input "
                   "digest: bump it when FUNC or its weights change, and --reuse reuses nothing (default: empty)")
    p.add_argument("--reuse", metavar="OLD_DIR[:NAME]", help="take a sample's output from OLD_DIR's merged column "
                   "NAME (default: --name) when its input digest (--fn, --fn-version, stored image bytes, "
                   "--fields values) is found there, instead of calling FUNC")
    a = p.parse_args(argv)
    try:
        run(a.dir, a.name, a.fn, batch_size=a.batch_size, fields=[f for f in a.fields.split(",") if f],
            rank=a.rank, world=a.world, threads=a.threads, checkpoint_every=a.checkpoint_every, restart=a.restart,
            images=not a.no_images, fn_version=a.fn_version, reuse=a.reuse)
    except DeriveStopped as e:  # run() logged how to go on
        return e.exit_code
    except DeriveError as e:
        print(f"tarmac.derive: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
