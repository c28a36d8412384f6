"""tarmac.Dataset: a converted dataset opened by memory map, its samples as zero-copy numpy views,
and batches decoded on native threads (docs/reader.md, "Python API")."""
from __future__ import annotations

import ctypes
import json
import numbers
import os
import weakref
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union, cast

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

from . import _format, _geometry
from ._library import Field, Tensor, check, load_library
from .augment import Augment
from .errors import ArgumentError, DataError, RangeError

# Where Dataset.batch writes an array: (name, shape, dtype) -> a writable C-contiguous array of them.
# (np.dtype[...] in quotes: numpy subscripts it at run time from 1.22 on, and the package takes 1.21)
_Alloc = Callable[[str, Tuple[int, ...], "np.dtype[Any]"], NDArray[Any]]
_New = Callable[[str, Tuple[int, ...], npt.DTypeLike], NDArray[Any]]
_Getter = Callable[[int], Any]

__all__ = ["Dataset"]


class _Handle:
    """Owns one tarmac_dataset*, closed once when the last Dataset or array referring to it goes.
    weakref.finalize, not __del__: in a garbage cycle __del__ methods run in any order, and the
    dataset could be closed before its loaders were freed; a loader's finalizer holds the handle."""

    def __init__(self, path: str, cache: Optional[str] = None, cache_size: int = 0) -> None:
        self.lib = load_library()
        self.ptr = ctypes.c_void_p()
        if cache is None:
            check(self.lib.tarmac_open(os.fsencode(path), ctypes.byref(self.ptr)))
        else:
            check(self.lib.tarmac_open_cached(os.fsencode(path), os.fsencode(cache), cache_size,
                                              ctypes.byref(self.ptr)))
        # A forked child shares the parent's maps copy-on-write; unmapping there is harmless. Not
        # at exit: a daemon thread may still be decoding from the maps; the process's end unmaps.
        self._finalizer = weakref.finalize(self, self.lib.tarmac_close, ctypes.c_void_p(self.ptr.value))
        self._finalizer.atexit = False


class _Shards:
    """The shards as zero-copy views, each taken on first use: a dataset in object storage
    downloads a shard when it is first read, not when ds[i] first runs."""

    def __init__(self, lib: ctypes.CDLL, handle: _Handle) -> None:
        self._lib, self._h = lib, handle
        count = ctypes.c_int64()
        check(lib.tarmac_num_shards(handle.ptr, ctypes.byref(count)))
        self._views: List[Optional[NDArray[np.uint8]]] = [None] * count.value

    def __len__(self) -> int:
        return len(self._views)

    def __getitem__(self, k: int) -> NDArray[np.uint8]:
        v = self._views[k]
        if v is None:
            data, size = ctypes.c_void_p(), ctypes.c_size_t()
            check(self._lib.tarmac_shard(self._h.ptr, k, ctypes.byref(data), ctypes.byref(size)))
            v = self._views[k] = _view(self._h, data.value, size.value, "u1", (size.value,))
        return v


def _view(handle: _Handle, address: Optional[int], nbytes: int, dtype: npt.DTypeLike,
          shape: Tuple[int, ...]) -> NDArray[Any]:
    """A read-only numpy array over `nbytes` at `address`, keeping `handle` alive via .base."""
    buf = (ctypes.c_uint8 * max(nbytes, 1)).from_address(address) if address else (ctypes.c_uint8 * 1)()
    buf._tarmac_handle = handle  # type: ignore[attr-defined]  # the base chain holds the dataset open
    # numpy's stubs take no ctypes array as a buffer
    a: NDArray[np.uint8] = np.frombuffer(buf, dtype=np.uint8, count=nbytes)  # type: ignore[call-overload]
    a.flags.writeable = False
    return a.view(np.dtype(dtype)).reshape(shape)


_REMOTE = ("s3://", "http://", "https://")


class Dataset:
    """A tarmac dataset directory, opened by memory map in constant time.

    `path` may also be a dataset in object storage, "s3://bucket/prefix/" (or an http(s)://
    folder), read through the local folder `cache`: its annotation file is downloaded at open,
    each shard whole on first use, CRC-checked, then mapped as a local one; `cache_size` bytes
    at most stay there (0: no limit; least recently used shards go first). Processes may
    share one cache. docs/reader.md, "Datasets in object storage".

    Picklable (it reopens by path, and cache), so it can be handed to worker processes; after a
    fork it keeps working on the inherited maps (shared through the page cache)."""

    def __init__(self, path: Union[str, os.PathLike[str]], cache: Optional[Union[str, os.PathLike[str]]] = None,
                 cache_size: int = 0) -> None:
        self.path = os.fspath(path)
        self.cache: Optional[str] = None if cache is None else os.fspath(cache)
        if isinstance(cache_size, bool) or not isinstance(cache_size, numbers.Integral) or cache_size < 0:
            raise ArgumentError(f"cache_size must be a number of bytes >= 0 (0: no limit), not {cache_size!r}")
        self.cache_size: int = int(cache_size)
        if self.path.startswith(_REMOTE) and self.cache is None:
            raise ArgumentError(f"'{self.path}' is in object storage: give a local folder to keep its "
                                f"shards in, tarmac.Dataset('{self.path}', cache='DIR')")
        if self.cache is not None and not self.path.startswith(_REMOTE):
            raise ArgumentError(f"cache= is for datasets in object storage (s3://, http(s)://), "
                                f"not the local folder '{self.path}'")
        self._open()

    def _open(self) -> None:
        self._h: Optional[_Handle] = _Handle(self.path, self.cache, self.cache_size)
        lib, p = self._h.lib, self._h.ptr
        self._lib = lib
        self._n: int = lib.tarmac_size(p)
        nf = ctypes.c_int64()
        check(lib.tarmac_num_fields(p, ctypes.byref(nf)))
        self.fields: Dict[str, Dict[str, Any]] = {}
        for k in range(nf.value):
            f = Field()
            check(lib.tarmac_field_info(p, k, ctypes.byref(f)))
            self.fields[f.name.decode()] = {
                "kind": _format.KINDS[f.kind], "dtype": _format.DTYPE_NAMES[f.dtype],
                "shape": tuple(f.shape[d] for d in range(f.ndim)), "ragged": bool(f.ragged),
                "nullable": bool(f.nullable)}
        nb = ctypes.c_int64()
        check(lib.tarmac_num_blob_kinds(p, ctypes.byref(nb)))
        self.blob_kinds: List[str] = []
        for k in range(nb.value):
            s = ctypes.c_char_p()
            check(lib.tarmac_blob_kind(p, k, ctypes.byref(s)))
            self.blob_kinds.append(cast(bytes, s.value).decode())  # not NULL: the call succeeded
        nd = ctypes.c_int64()
        check(lib.tarmac_num_derived(p, ctypes.byref(nd)))
        self.derived: List[str] = []  # derived columns (tarmac.derive + tarmac column merge), sorted
        for k in range(nd.value):
            s = ctypes.c_char_p()
            check(lib.tarmac_derived_name(p, k, ctypes.byref(s)))
            self.derived.append(cast(bytes, s.value).decode())
        self._loaders: Dict[Tuple[Any, ...], _Loader] = {}
        self._loader_pid = os.getpid()
        self._getters: Optional[List[Tuple[str, _Getter]]] = None
        # the fields' geometric kinds (_geometry.declared), read on first use
        self._declared: Optional[Dict[str, Dict[str, Any]]] = None

    def _sample_getters(self) -> List[Tuple[str, _Getter]]:
        """[(name, getter(i))] for ds[i], built once: whole-column views sliced with numpy, so a
        sample costs no library call. Checks what the library checks per access (ragged
        offsets, blob ranges), raising DataError (TARMAC_E_DATA) as it would."""
        if self._getters is not None:
            return self._getters
        key = _format.KEY
        getters: List[Tuple[str, _Getter]] = [
            (key, self._ragged_getter(key + ".values", key + ".offsets", key, _format.STRING))]
        if self.blob_kinds:
            getters.append(("image", self._blob_getter(_format.IMAGE, _Shards(self._lib, self._handle))))
        for name, f in self.fields.items():
            get: _Getter
            if f["kind"] == _format.NUMERIC and not f["ragged"]:
                get = self._tensor(name).__getitem__
            else:
                get = self._ragged_getter(name + ".values", name + ".offsets", name, f["kind"])
            if f["nullable"]:  # None where the sample has no value
                get = (lambda valid, get: lambda i: get(i) if valid[i] else None)(self._tensor(name + ".valid"), get)
            getters.append((name, get))
        if self.blob_kinds:
            getters.append((_format.AFFINE, self.column(_format.AFFINE).__getitem__))
        for name in self.derived:  # a column of another dataset version raises here
            getters.append((name, self._derived_getter(name)))
        self._getters = getters
        return getters

    def _derived_getter(self, name: str) -> _Getter:
        values, shapes = self._derived_arrays(name)
        if shapes is None:
            return values.__getitem__
        return lambda i: self.derived_value(name, i)

    def _derived_arrays(self, name: str
                        ) -> Tuple[NDArray[Any], Optional[Tuple[NDArray[np.int64], NDArray[np.int64]]]]:
        """(values [N, ...], None) for a column of one shape, else (flat values, (offsets, shapes))."""
        t, sh = Tensor(), Tensor()
        check(self._lib.tarmac_derived_column(self._ptr, name.encode(), ctypes.byref(t), ctypes.byref(sh)))
        values = self._tensor_array(t)
        if not t.offsets:
            return values, None
        off = ctypes.cast(t.offsets, ctypes.c_void_p).value
        offsets = _view(self._handle, off, (self._n + 1) * 8, "<i8", (self._n + 1,))
        return values, (offsets, self._tensor_array(sh))

    def derived_dtype(self, name: str) -> str:
        """The safetensors dtype name of derived column `name` ("F16", "BF16", ...): derived_value
        gives BF16 outputs as their raw uint16 bits, and this tells them apart from U16."""
        t = Tensor()
        check(self._lib.tarmac_derived_column(self._ptr, name.encode(), ctypes.byref(t), None))
        dtype: str = _format.DTYPE_NAMES[t.dtype]
        return dtype

    def derived_value(self, name: str, i: int) -> NDArray[Any]:
        """Sample i's output of derived column `name`: a read-only zero-copy array of its own
        shape (BF16 outputs as their raw uint16 bits)."""
        t = Tensor()
        check(self._lib.tarmac_derived_value(self._ptr, name.encode(), self._index(i), ctypes.byref(t)))
        return self._tensor_array(t)

    def _tensor(self, name: str) -> NDArray[Any]:
        t = Tensor()
        check(self._lib.tarmac_column(self._ptr, name.encode(), ctypes.byref(t)))
        return self._tensor_array(t)

    def _bad(self, i: int, what: str) -> DataError:
        return DataError(f"dataset '{self.path}': sample {i} {what}")

    def _text(self, raw: bytes, i: int, field: str, kind: str) -> Any:
        """Sample i's bytes of a string (str) or json (parsed) field; bytes that are not UTF-8,
        or not JSON, are DataError (TARMAC_E_DATA) naming the sample, never a bare ValueError."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self._bad(i, f"field '{field}' is not valid UTF-8 (byte {e.start} of {len(raw)})") from None
        if kind != _format.JSON:
            return text
        try:
            return json.loads(text)
        except ValueError as e:
            raise self._bad(i, f"field '{field}' is not valid JSON ({e})") from None

    def _ragged_getter(self, values_name: str, offsets_name: str, field: str, kind: str) -> _Getter:
        values, offsets = self._tensor(values_name), self._tensor(offsets_name)
        rows = values.shape[0]

        def get(i: int) -> Any:
            b, e = int(offsets[i]), int(offsets[i + 1])
            if not 0 <= b <= e <= rows:
                raise self._bad(i, f"field '{field}' has offsets {b}..{e} outside its {rows} values")
            v = values[b:e]
            if kind == _format.NUMERIC:
                return v
            return self._text(v.tobytes(), i, field, kind)
        return get

    def _blob_getter(self, kind: str, shards: _Shards) -> Callable[[int], NDArray[np.uint8]]:
        shard_col, offset_col, size_col = (self._tensor(kind + s) for s in (".shard", ".offset", ".size"))

        def get(i: int) -> NDArray[np.uint8]:
            k, off, size = int(shard_col[i]), int(offset_col[i]), int(size_col[i])
            if not 0 <= k < len(shards):
                raise self._bad(i, f"{kind} names shard {k} of {len(shards)}")
            if off < 0 or size < 0 or off + size > shards[k].shape[0]:
                raise self._bad(i, f"{kind} lies at bytes {off}+{size}, beyond shard {k} of "
                                   f"{shards[k].shape[0]} bytes")
            return shards[k][off:off + size]
        return get

    def __getstate__(self) -> Dict[str, Any]:
        return {"path": self.path, "cache": self.cache, "cache_size": self.cache_size}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.path = state["path"]
        self.cache, self.cache_size = state.get("cache"), state.get("cache_size", 0)
        self._open()

    @property
    def closed(self) -> bool:
        """True once close() was called (arrays handed out before stay valid)."""
        return self._h is None

    def close(self) -> None:
        """Drops this object's reference to the dataset, which is closed once no array handed out
        refers to it (those stay valid). Closing again does nothing."""
        self._loaders = {}
        self._getters = None
        self._h = None

    def __enter__(self) -> Dataset:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        return self._n

    @property
    def metadata(self) -> Dict[str, str]:
        """The annotation file's __metadata__ entries the format defines (text, as stored; the
        optional `classes` and `table` entries are JSON: json.loads them)."""
        out = {}
        for k in _format.METADATA_KEYS:
            v = self._lib.tarmac_metadata(self._ptr, k.encode())
            if v is not None:
                out[k] = v.decode()
        return out

    @property
    def _handle(self) -> _Handle:
        if self._h is None:
            raise ArgumentError("the dataset is closed")
        return self._h

    @property
    def _ptr(self) -> ctypes.c_void_p:
        return self._handle.ptr

    def _index(self, i: int) -> int:
        i = int(i)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise RangeError(f"sample index {i} out of range for {self._n} samples")
        return i

    def _tensor_array(self, t: Tensor) -> NDArray[Any]:
        dt = _format.DTYPES[t.dtype][1]
        return _view(self._handle, t.data, t.nbytes, dt, tuple(t.shape[d] for d in range(t.ndim)))

    def key(self, i: int) -> str:
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        i = self._index(i)
        check(self._lib.tarmac_key(self._ptr, i, ctypes.byref(data), ctypes.byref(size)))
        if not size.value:
            return ""
        key: str = self._text(ctypes.string_at(data, size.value), i, _format.KEY, _format.STRING)
        return key

    def blob(self, i: int, kind: str = _format.IMAGE) -> NDArray[np.uint8]:
        """The stored bytes of sample i's blob as a read-only uint8 array (zero-copy)."""
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        check(self._lib.tarmac_blob(self._ptr, self._index(i), kind.encode(), ctypes.byref(data),
                                    ctypes.byref(size)))
        return _view(self._handle, data.value, size.value, "u1", (size.value,))

    def image(self, i: int) -> NDArray[np.uint8]:
        return self.blob(i)

    def value(self, name: str, i: int) -> Any:
        """Sample i's value of field `name`: a zero-copy array (ragged: its slice), str for strings;
        None where a nullable field's sample has no value. A derived column's name gives
        derived_value(name, i)."""
        if name in self.derived and name not in self.fields:
            return self.derived_value(name, i)
        if self.fields.get(name, {}).get("nullable"):
            has = ctypes.c_int32()
            check(self._lib.tarmac_has_value(self._ptr, name.encode(), self._index(i), ctypes.byref(has)))
            if not has.value:
                return None
        return self.stored_value(name, i)

    def stored_value(self, name: str, i: int) -> Any:
        """Sample i's value of field `name` as stored, also where a nullable field's sample has no
        value (zeros, an empty slice or "" there; value() gives None): what column(name) holds at
        i, so that the samples of a batch stack. Strings are str, JSON its parsed value."""
        t, i = Tensor(), self._index(i)
        check(self._lib.tarmac_value(self._ptr, name.encode(), i, ctypes.byref(t)))
        kind = self.fields.get(name, {}).get("kind", _format.NUMERIC)
        if kind != _format.NUMERIC:
            return self._text(ctypes.string_at(t.data, t.nbytes) if t.nbytes else b"", i, name, kind)
        return self._tensor_array(t)

    def affine(self, i: int) -> NDArray[np.float64]:
        affine: NDArray[np.float64] = self.value(_format.AFFINE, i)
        return affine

    def dense(self, i: int, name: str) -> NDArray[Any]:
        """Sample i's dense map `name` ("depth" or "__depth__") stored as .npy (`--dense
        depth.npy`): a read-only zero-copy array of its stored dtype, shape (H, W) or (H, W, C)."""
        kind = name if name.startswith("__") else f"__{name}__"
        t = Tensor()
        check(self._lib.tarmac_dense(self._ptr, self._index(i), kind.encode(), ctypes.byref(t)))
        return self._tensor_array(t)

    def column(self, name: str) -> Any:
        """The whole column as one zero-copy array; ragged fields give (values, offsets).

        A derived column (ds.derived) whose outputs share one shape gives them as one array
        [N, ...]; one of several shapes (latents of several buckets) gives (values, offsets,
        shapes): sample i is values[offsets[i]:offsets[i+1]].reshape(shapes[i]).

        A nullable field gives its values with a mask: a fixed field a numpy masked array
        (np.ma.MaskedArray, masked where the sample has no value; the data there is zeros), a
        ragged one (values, offsets, valid) with valid a bool array [N] (a sample without a
        value has an empty slice)."""
        if name in self.derived and name not in self.fields:
            values, ragged = self._derived_arrays(name)
            return values if ragged is None else (values, ragged[0], ragged[1])
        t = Tensor()
        check(self._lib.tarmac_column(self._ptr, name.encode(), ctypes.byref(t)))
        values = self._tensor_array(t)
        nullable = self.fields.get(name, {}).get("nullable")
        valid = self._tensor(name + ".valid").astype(bool) if nullable else None
        if t.offsets:
            off = ctypes.cast(t.offsets, ctypes.c_void_p).value
            offsets = _view(self._handle, off, (self._n + 1) * 8, "<i8", (self._n + 1,))
            return (values, offsets, valid) if nullable else (values, offsets)
        if valid is not None:  # nullable
            mask = np.broadcast_to(~valid.reshape((-1,) + (1,) * (values.ndim - 1)), values.shape)
            return np.ma.masked_array(values, mask=mask)  # type: ignore[no-untyped-call]  # numpy.ma has no hints
        return values

    def __getitem__(self, i: int) -> Dict[str, Any]:
        i = self._index(i)
        return {name: get(i) for name, get in self._sample_getters()}

    def decoded_size(self, i: int) -> Tuple[int, int]:
        """(width, height) of sample i's image once decoded."""
        w, h = ctypes.c_int32(), ctypes.c_int32()
        check(self._lib.tarmac_decoded_size(self._ptr, self._index(i), ctypes.byref(w), ctypes.byref(h)))
        return w.value, h.value

    def decoded_channels(self, i: int) -> int:
        """Channels of sample i's image as stored: 1 (grey, `--channels 1|keep`) or 3."""
        c = ctypes.c_int32()
        check(self._lib.tarmac_decoded_channels(self._ptr, self._index(i), ctypes.byref(c)))
        return c.value

    def decode(self, i: int, size: Optional[Tuple[int, int]] = None, resize: bool = False,
               channels: Optional[int] = None) -> NDArray[np.uint8]:
        """Sample i's image as an H x W x C uint8 array: RGB (C 3) or grey (C 1), as stored
        unless `channels` (1 or 3) asks; `size=(w, h)` with resize=True resizes."""
        i = self._index(i)
        w, h = size if size else self.decoded_size(i)
        c = channels or self.decoded_channels(i)
        out = np.empty((h, w, c), dtype=np.uint8)
        check(self._lib.tarmac_decode_channels(self._ptr, i, out.ctypes.data, out.nbytes, w, h, c, int(resize)))
        return out

    def _loader(self, w: int, h: int, resize: bool, threads: int, fields: Tuple[str, ...], channels: int = 3,
                augment: Optional[Augment] = None, points: Optional[Sequence[str]] = None,
                boxes: Optional[Sequence[str]] = None) -> _Loader:
        if self._loader_pid != os.getpid():
            # A forked child has no copy of the parent's decoding threads: make new loaders
            # and leave the inherited ones alone (freeing them would join absent threads).
            self._loaders = {}
            self._loader_pid = os.getpid()
        key = (w, h, resize, threads, fields, channels, augment, points, boxes)
        if key not in self._loaders:
            names = (ctypes.c_char_p * max(len(fields), 1))(*[f.encode() for f in fields])
            ptr = ctypes.c_void_p()
            if augment is None:
                check(self._lib.tarmac_loader_new_channels(self._ptr, w, h, channels, int(resize), threads, names,
                                                           len(fields), ctypes.byref(ptr)))
            else:
                check(self._lib.tarmac_loader_new_augment(self._ptr, ctypes.byref(augment._c(points, boxes)),
                                                          channels, threads, names, len(fields),
                                                          ctypes.byref(ptr)))
            self._loaders[key] = _Loader(self._lib, ptr, self._handle)
        return self._loaders[key]

    def fixed_fields(self) -> List[str]:
        """Names of the fixed-shape fields (those ds.batch can stack), plus '__affine__'."""
        names = [n for n, f in self.fields.items() if not f["ragged"]]
        return names + ([_format.AFFINE] if self.blob_kinds else [])

    def batch(self, indices: Iterable[int], fields: Optional[Sequence[str]] = None,
              size: Optional[Tuple[int, int]] = None, resize: bool = False, threads: int = 0,
              out: Optional[NDArray[np.uint8]] = None, channels: int = 3, augment: Optional[Augment] = None,
              seed: int = 0, epoch: int = 0, dense: Optional[Sequence[str]] = None,
              points: Optional[Sequence[str]] = None, boxes: Optional[Sequence[str]] = None,
              alloc: Optional[_Alloc] = None) -> Tuple[Optional[NDArray[np.uint8]], Dict[str, Any]]:
        """Decodes `indices` into one (N, H, W, C) uint8 array and stacks fixed-shape fields.

        channels: 3 (RGB; grey images replicated, the default) or 1 (grey; colour images
        converted with 0.299 R + 0.587 G + 0.114 B): one count for the whole batch, whatever
        each sample stores.

        size=(w, h) defaults to the first sample's decoded size; an image of another size is an
        error unless resize=True. fields defaults to every fixed-shape field and __affine__.
        Decoding runs on `threads` native threads (0: all cores) without the GIL. out: a
        C-contiguous (N, H, W, 3) uint8 array to decode into (pinned or shared memory, say)
        instead of a new one; its H and W are the size when size is not given.

        augment: a tarmac.Augment. Every image is then augment.size (any stored size), warped
        under sample i's draw, a pure function of (seed, epoch, i); the points fields and boxes
        fields among `fields` follow (those convert --points / --boxes declared, or `points`,
        `boxes`: lists of names, a box "NAME" (x, y, w, h) or "NAME:xyxy"), and so do the
        dense maps named in `dense`, .npy or PNG (labels[name]: (N, H, W[, C]), the stored
        dtype, a 16-bit PNG's uint16; nearest);
        labels["__augment__"] (N, 2, 3) float64 maps stored pixels to output pixels,
        labels["__flip__"] (N,) bool. Every other declared kind follows too (points3d, axis-angle
        poses, cameras: docs/reader.md, "Augmentation"); a field whose name looks geometric but
        that is declared as no kind is refused unless augment.passthrough lists it.

        Strings, JSON and ragged fields named in `fields` come as lists, one value a sample (str,
        the parsed JSON, an array; None where a nullable field has none); under an augmentation a
        ragged points, boxes or polygons field follows it, and a ragged boxes field's boxes are
        clipped to the canvas with labels[NAME + ".valid"] a list of bool arrays, False for a box
        left with no area.

        alloc(name, shape, dtype): where the native loader writes the images ("image", unless
        `out` is given) and each stacked array of labels (a field, "__augment__", "__flip__", a
        dense map) instead of new arrays: a writable C-contiguous array of exactly that shape
        and dtype (tarmac.torch.Loader hands out views of its reused buffers)."""
        new: _New = _new_array if alloc is None else _checked_alloc(alloc)
        idx = np.ascontiguousarray([self._index(i) for i in indices], dtype=np.int64)
        fields = tuple(self.fixed_fields() if fields is None else fields)
        listed = tuple(n for n in fields if n in self.fields and (self.fields[n]["ragged"] or
                                                                 self.fields[n]["kind"] != _format.NUMERIC))
        if augment is not None and isinstance(augment, Augment):
            _geometry.check_undeclared(self, fields, augment.passthrough, tuple(points or ()) + tuple(boxes or ()))
        fields = tuple(n for n in fields if n not in listed)  # those the native loader stacks
        if augment is not None and not isinstance(augment, Augment):
            raise ArgumentError(f"augment must be a tarmac.Augment, not {type(augment).__name__}")
        if augment is None and (dense or points is not None or boxes is not None):
            raise ArgumentError("dense, points and boxes follow an augmentation: give augment=")
        if augment is not None:
            if not self.blob_kinds:
                raise ArgumentError(f"augment: dataset '{self.path}' has no images")
            ah, aw = augment.size
            if size is not None and tuple(size) != (aw, ah):
                raise ArgumentError(f"size (w, h) {tuple(size)} differs from augment.size (h, w) {augment.size}")
            size = (aw, ah)
            for name, v in (("seed", seed), ("epoch", epoch)):
                if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= v < 2**64:
                    raise ArgumentError(f"{name} must be an integer in 0 .. 2^64 - 1, not {v!r}")
            dense = tuple(dense or ())
            kinds: List[str] = []
            for name in dense:
                kind = name if name.startswith("__") else f"__{name}__"
                if kind not in self.blob_kinds[1:]:
                    raise ArgumentError(f"dense: '{name}' is not a dense map of '{self.path}' "
                                        f"(it has: {', '.join(self.blob_kinds[1:]) or 'none'})")
                kinds.append(kind)
            points = None if points is None else tuple(points)
            boxes = None if boxes is None else tuple(boxes)
        if out is not None:
            if (not isinstance(out, np.ndarray) or out.dtype != np.uint8 or out.ndim != 4
                    or out.shape[0] != len(idx) or out.shape[3] != channels or not out.flags.c_contiguous
                    or not out.flags.writeable):
                raise ArgumentError(f"out must be a writable C-contiguous uint8 array of shape "
                                    f"({len(idx)}, H, W, {channels}), not {getattr(out, 'dtype', type(out))} "
                                    f"{getattr(out, 'shape', '')}")
            size = size or (out.shape[2], out.shape[1])
            if tuple(size) != (out.shape[2], out.shape[1]):
                raise ArgumentError(f"out holds {out.shape[2]}x{out.shape[1]} images, size asks for "
                                    f"{size[0]}x{size[1]}")
        if self.blob_kinds:
            w, h = size if size else (self.decoded_size(int(idx[0])) if len(idx) else (1, 1))
        else:
            w, h = 0, 0
        gathered = fields
        if augment is not None:
            gathered = fields + ("__augment__", "__flip__") + tuple(kinds)
        loader = self._loader(w, h, resize, threads, gathered, channels, augment, points, boxes)
        if out is not None or not self.blob_kinds:
            images = out if out is not None else np.empty((len(idx), h, w, channels), dtype=np.uint8)
        else:
            images = new("image", (len(idx), h, w, channels), np.uint8)
        labels: Dict[str, Any] = {}
        for name in fields:
            probe = self.stored_value(name, 0) if self._n else np.empty(0)
            labels[name] = new(name, (len(idx),) + probe.shape, probe.dtype)
        outs = [labels[n] for n in fields]
        if augment is not None:
            labels["__augment__"] = new("__augment__", (len(idx), 2, 3), np.float64)
            labels["__flip__"] = new("__flip__", (len(idx),), bool)
            outs += [labels["__augment__"], labels["__flip__"]]
            for k, name in enumerate(dense or ()):  # the loader's dtype and shape (sample 0's map)
                dtype, shape = loader.layout(len(fields) + 2 + k)
                labels[name] = new(name, (len(idx),) + shape, dtype)
                outs.append(labels[name])
        loader.run(idx, images, outs, seed, epoch)
        for name in fields:  # a nullable field's zeros are told apart by its mask
            if self.fields.get(name, {}).get("nullable"):
                labels[name + ".valid"] = self._tensor(name + ".valid").astype(bool)[idx]
        if listed:
            self._listed(labels, idx, listed, augment, points, boxes, (w, h))
        return (images if self.blob_kinds else None), labels

    def _listed(self, labels: Dict[str, Any], idx: NDArray[np.int64], names: Tuple[str, ...],
                augment: Optional[Augment], points: Optional[Sequence[str]], boxes: Optional[Sequence[str]],
                size: Tuple[int, int]) -> None:
        """The string, JSON and ragged fields `names` of samples idx into labels, as lists; under
        an augmentation a ragged points, boxes or polygons field follows labels["__augment__"]."""
        kinds = _geometry.declared(self) if augment is not None else {}
        given_boxes = {b.split(":", 1)[0]: b for b in boxes or ()}
        for name in names:
            geometry = kinds.get(name)
            kind = (geometry or {}).get("kind")
            if points is not None and (name in points or kind == "points"):
                geometry = {"kind": "points"} if name in points else None
            if boxes is not None and (name in given_boxes or kind == "boxes"):
                spec = given_boxes.get(name)
                geometry = None if spec is None else {
                    "kind": "boxes", "box_format": "xyxy" if spec.endswith(":xyxy") else "xywh",
                    "convention": (geometry or {}).get("convention", "centers")}
            values, valid = _geometry.ragged_values(
                self, name, idx.tolist(), geometry, labels.get("__augment__") if augment is not None else None,
                labels.get("__flip__"), augment.flip_pairs if augment is not None else (), size)
            labels[name] = values
            if valid is not None:
                labels[name + ".valid"] = valid
            elif self.fields[name]["nullable"]:
                labels[name + ".valid"] = self._tensor(name + ".valid").astype(bool)[idx]

    def indices(self, rank: int = 0, world: int = 1, seed: int = 0, epoch: int = 0, shuffle: bool = True,
                drop_last: bool = False) -> NDArray[np.int64]:
        """This dataset's share for `rank` of epoch `epoch` (see tarmac.indices)."""
        from .sampling import indices  # sampling's bucket_batches takes a Dataset: no import cycle
        return indices(self._n, rank, world, seed, epoch, shuffle, drop_last)


def _new_array(name: str, shape: Tuple[int, ...], dtype: npt.DTypeLike) -> NDArray[Any]:
    return np.empty(shape, dtype=dtype)


def _checked_alloc(alloc: _Alloc) -> _New:
    """alloc (Dataset.batch's argument) wrapped to refuse an array the native loader cannot fill."""
    def new(name: str, shape: Tuple[int, ...], dtype: npt.DTypeLike) -> NDArray[Any]:
        a = alloc(name, tuple(shape), np.dtype(dtype))
        if (not isinstance(a, np.ndarray) or a.shape != tuple(shape) or a.dtype != np.dtype(dtype)
                or not a.flags.c_contiguous or not a.flags.writeable):
            raise ArgumentError(f"alloc('{name}') must give a writable C-contiguous {np.dtype(dtype)} array of "
                             f"shape {tuple(shape)}, not {getattr(a, 'dtype', type(a))} {getattr(a, 'shape', '')}")
        return a
    return new


def _free_loader(lib: ctypes.CDLL, ptr: ctypes.c_void_p, pid: int, handle: _Handle) -> None:
    """`handle`, an argument, keeps the dataset open until its loader is freed."""
    # A forked child has no copy of the parent's decoding threads: freeing would join absent ones.
    if pid == os.getpid():
        lib.tarmac_loader_free(ptr)


class _Loader:
    """Owns one tarmac_loader*, freed (weakref.finalize) when the loader goes, in its own process."""

    def __init__(self, lib: ctypes.CDLL, ptr: ctypes.c_void_p, handle: _Handle) -> None:
        self.lib, self.ptr = lib, ptr
        finalizer = weakref.finalize(self, _free_loader, lib, ctypes.c_void_p(ptr.value), os.getpid(), handle)
        finalizer.atexit = False

    def run(self, idx: NDArray[np.int64], images: NDArray[np.uint8], outs: Sequence[NDArray[Any]], seed: int = 0,
            epoch: int = 0) -> None:
        bufs = (ctypes.c_void_p * max(len(outs), 1))(*[o.ctypes.data for o in outs])
        sizes = (ctypes.c_size_t * max(len(outs), 1))(*[o.nbytes for o in outs])
        check(self.lib.tarmac_loader_start_seeded(self.ptr, seed, epoch, idx.ctypes.data, len(idx),
                                                  images.ctypes.data, images.nbytes, bufs, sizes))
        check(self.lib.tarmac_loader_wait(self.ptr))

    def layout(self, k: int) -> Tuple[np.dtype[Any], Tuple[int, ...]]:
        """(numpy dtype, per-sample shape) of the loader's field k."""
        t = Tensor()
        check(self.lib.tarmac_loader_field_layout(self.ptr, k, ctypes.byref(t)))
        return _format.DTYPES[t.dtype][1], tuple(t.shape[d] for d in range(t.ndim))
