"""Read tarmac datasets from Python: ctypes over libtarmac_c.so, numpy views without copies.

Works with any CPython >= 3.9 and numpy; nothing is compiled against the interpreter.
The library is found via $TARMAC_LIB, else next to this package, where the installation put it,
a source checkout's build/lib/read/, the lib/ of the prefix of `tarmac` on PATH, of sys.prefix,
/usr/local or /usr, and last by the system loader (docs/reader.md, "Installing").

    ds = tarmac.Dataset("out/")
    s = ds[0]                       # {"__key__", "image" (stored bytes), fields..., "__affine__"}
    rgb = ds.decode(0)              # H x W x 3 uint8 RGB
    images, labels = ds.batch([3, 1, 4], fields=["keypoints2d"])
    aug = tarmac.Augment(size=(224, 224), flip=0.5, rotate=30, scale=(0.75, 1.25))
    images, labels = ds.batch([3, 1, 4], augment=aug, seed=0, epoch=2)   # + "__augment__", "__flip__"

Lifetimes: every array that views the dataset (images, fixed-shape fields, columns) keeps
the dataset's memory maps alive through its `.base` chain, even after close() or deletion
of the Dataset object; closing only drops this object's own reference.
"""
import ctypes
import ctypes.util
import json
import math
import numbers
import os
import shutil
import sys
import sysconfig

import numpy as np

__all__ = ["Augment", "Dataset", "TarmacError", "indices", "load_library"]
__version__ = "0.1.0"  # the project's version (CMakeLists.txt, pyproject.toml)

_DTYPES = ["?", "u1", "i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f2", "<u2", "<f4", "<f8"]
_BF16 = 10  # numpy has no bfloat16: BF16 values are returned as their raw uint16 bits
_KINDS = ["numeric", "string", "json"]
_MAX_DIMS = 8


class TarmacError(Exception):
    """An error of the tarmac library; `.code` is the C API's error code."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class _Tensor(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32), ("shape", ctypes.c_int64 * _MAX_DIMS),
                ("data", ctypes.c_void_p), ("nbytes", ctypes.c_size_t),
                ("offsets", ctypes.POINTER(ctypes.c_int64))]


class _Field(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int32), ("dtype", ctypes.c_int32),
                ("ragged", ctypes.c_int32), ("ndim", ctypes.c_int32), ("shape", ctypes.c_int64 * _MAX_DIMS),
                ("sample_bytes", ctypes.c_uint64), ("nullable", ctypes.c_int32)]


class _Augment(ctypes.Structure):
    _fields_ = [("width", ctypes.c_int32), ("height", ctypes.c_int32), ("flip", ctypes.c_double),
                ("flip_pairs", ctypes.POINTER(ctypes.c_int32)), ("nflip_pairs", ctypes.c_size_t),
                ("rotate", ctypes.c_double), ("scale_min", ctypes.c_double), ("scale_max", ctypes.c_double),
                ("translate", ctypes.c_double), ("crop", ctypes.c_int32), ("crop_min", ctypes.c_double),
                ("crop_max", ctypes.c_double), ("ratio_min", ctypes.c_double), ("ratio_max", ctypes.c_double),
                ("fill", ctypes.c_double), ("points", ctypes.POINTER(ctypes.c_char_p)), ("npoints", ctypes.c_size_t),
                ("boxes", ctypes.POINTER(ctypes.c_char_p)), ("nboxes", ctypes.c_size_t)]


def _number(name, v, lo=None, hi=None, lo_open=False):
    """v as a finite float in range, else ValueError naming the argument."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, not {v!r}")
    v = float(v)
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo}, not {v}")
    if hi is not None and v > hi:
        raise ValueError(f"{name} must be <= {hi}, not {v}")
    return v


def _range(name, v, lo=0.0, hi=None):
    """A (min, max) pair with lo < min <= max (<= hi), else ValueError naming the argument."""
    try:
        a, b = v
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (min, max), not {v!r}") from None
    a, b = _number(name, a, lo, hi, lo_open=True), _number(name, b, lo, hi, lo_open=True)
    if a > b:
        raise ValueError(f"{name} must be (min, max) with min <= max, not {v!r}")
    return a, b


class Augment:
    """Random geometry drawn per sample and applied in the batch decode, on the native threads:
    the stored image is decoded then warped once (bilinear, border `fill`) to `size`, and the
    points, boxes and dense maps of the batch follow (docs/reader.md, "Augmentation").

    size=(H, W): the output; flip: probability of a horizontal flip; flip_pairs: pairs of point
    indices (0-based) swapped after a flip, in every points field; rotate: degrees, uniform in
    [-rotate, rotate]; scale=(min, max): uniform; translate: fraction of the output size, uniform
    in [-translate, translate] on each axis; crop=(smin, smax) with ratio=(rmin, rmax):
    torchvision's random resized crop (area fraction, aspect ratio; 10 tries, then the centre),
    resized to size; fill: the image's border value (0..255; dense maps: 0).
    Sample i's draw is a pure function of (seed, epoch, i) given to Dataset.batch."""

    def __init__(self, size, flip=0.0, flip_pairs=None, rotate=0.0, scale=(1.0, 1.0), translate=0.0,
                 crop=None, ratio=(3 / 4, 4 / 3), fill=0):
        try:
            h, w = size
        except (TypeError, ValueError):
            raise ValueError(f"size must be (height, width), not {size!r}") from None
        for v in (h, w):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v <= 0 or v > 2**15:
                raise ValueError(f"size must be (height, width) of integers in 1..32768, not {size!r}")
        self.size = (int(h), int(w))
        self.flip = _number("flip", flip, 0.0, 1.0)
        pairs = []
        for p in flip_pairs or ():
            try:
                i, j = p
            except (TypeError, ValueError):
                raise ValueError(f"flip_pairs must hold pairs of point indices, not {p!r}") from None
            for v in (i, j):
                if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= v < 2**31:
                    raise ValueError(f"flip_pairs holds {p!r}: indices are integers >= 0 (0-based)")
            pairs.append((int(i), int(j)))
        self.flip_pairs = tuple(pairs)
        self.rotate = _number("rotate", rotate, 0.0)
        self.scale = _range("scale", scale)
        self.translate = _number("translate", translate, 0.0)
        self.crop = None if crop is None else _range("crop", crop, 0.0, 1.0)
        self.ratio = _range("ratio", ratio)
        self.fill = _number("fill", fill, 0.0, 255.0)

    def _key(self):
        return (self.size, self.flip, self.flip_pairs, self.rotate, self.scale, self.translate, self.crop,
                self.ratio, self.fill)

    def __eq__(self, other):
        return isinstance(other, Augment) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return (f"Augment(size={self.size}, flip={self.flip}, flip_pairs={list(self.flip_pairs)}, "
                f"rotate={self.rotate}, scale={self.scale}, translate={self.translate}, crop={self.crop}, "
                f"ratio={self.ratio}, fill={self.fill})")

    def _c(self, points, boxes):
        """The C struct; the arrays it points to are kept on it (alive while it is)."""
        a = _Augment()
        a.height, a.width = self.size
        a.flip, a.rotate, a.translate, a.fill = self.flip, self.rotate, self.translate, self.fill
        pairs = (ctypes.c_int32 * max(2 * len(self.flip_pairs), 1))(*[v for p in self.flip_pairs for v in p])
        a.flip_pairs, a.nflip_pairs = pairs, len(self.flip_pairs)
        a.scale_min, a.scale_max = self.scale
        if self.crop is not None:
            a.crop, (a.crop_min, a.crop_max) = 1, self.crop
        a.ratio_min, a.ratio_max = self.ratio
        keep = [pairs]
        for attr, names in (("points", points), ("boxes", boxes)):
            if names is not None:
                arr = (ctypes.c_char_p * max(len(names), 1))(*[n.encode() for n in names])
                keep.append(arr)
                setattr(a, attr, ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p)))
                setattr(a, "n" + attr, len(names))
        a._keep = keep
        return a


_lib = None


def _prefix_libdirs(prefix):
    """The library folders of an installation prefix: lib/ and Debian's multiarch lib/<triplet>/."""
    multiarch = sysconfig.get_config_var("MULTIARCH")
    dirs = [os.path.join(prefix, "lib")]
    if multiarch:
        dirs.append(os.path.join(prefix, "lib", multiarch))
    return dirs


def _candidates():
    """Where libtarmac_c.so is looked for, in order (docs/reader.md, "Installing")."""
    env = os.environ.get("TARMAC_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [here]  # a bundle (scripts/bundle-reader.sh) or a copy beside the package
    try:  # installed by cmake --install or the .deb: the library's place relative to the package
        from . import _install
        dirs.append(os.path.normpath(os.path.join(here, _install.LIBDIR)))
    except ImportError:
        pass
    checkout = os.path.dirname(os.path.dirname(here))
    if os.path.basename(os.path.dirname(here)) == "python":  # python/tarmac in a source checkout
        dirs.append(os.path.join(checkout, "build", "lib", "read"))
    # pip-installed: the prefix of the `tarmac` command on PATH, this environment's, the usual ones
    prefixes = []
    exe = shutil.which("tarmac")
    if exe:
        prefixes.append(os.path.dirname(os.path.dirname(os.path.realpath(exe))))
    prefixes += [sys.prefix, "/usr/local", "/usr"]
    for prefix in prefixes:
        dirs += _prefix_libdirs(prefix)
    out = []
    for d in dirs:
        path = os.path.join(d, "libtarmac_c.so")
        if path not in out:
            out.append(path)
    return out


def load_library():
    """Loads libtarmac_c.so once and declares its functions; returns the ctypes library."""
    global _lib
    if _lib is not None:
        return _lib
    tried = _candidates()
    path = next((p for p in tried if os.path.exists(p)), None)
    if path is None and not os.environ.get("TARMAC_LIB"):  # last, the system loader's own search
        path = ctypes.util.find_library("tarmac_c")
        tried.append("the system loader (ldconfig)")
    if path is None:
        raise OSError("libtarmac_c.so not found (install tarmac, or set TARMAC_LIB to its path); tried "
                      + ", ".join(tried))
    lib = ctypes.CDLL(path)
    P, i64, u64, i32, sz = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_int32, ctypes.c_size_t
    pp = ctypes.POINTER
    sigs = {
        "tarmac_last_error": (ctypes.c_char_p, []),
        "tarmac_dtype_name": (ctypes.c_char_p, [i32]),
        "tarmac_open": (ctypes.c_int, [ctypes.c_char_p, pp(P)]),
        "tarmac_close": (None, [P]),
        "tarmac_size": (i64, [P]),
        "tarmac_metadata": (ctypes.c_char_p, [P, ctypes.c_char_p]),
        "tarmac_num_fields": (ctypes.c_int, [P, pp(i64)]),
        "tarmac_field_info": (ctypes.c_int, [P, i64, pp(_Field)]),
        "tarmac_num_blob_kinds": (ctypes.c_int, [P, pp(i64)]),
        "tarmac_blob_kind": (ctypes.c_int, [P, i64, pp(ctypes.c_char_p)]),
        "tarmac_key": (ctypes.c_int, [P, i64, pp(P), pp(sz)]),
        "tarmac_blob": (ctypes.c_int, [P, i64, ctypes.c_char_p, pp(P), pp(sz)]),
        "tarmac_blob_ref": (ctypes.c_int, [P, i64, ctypes.c_char_p, pp(i32), pp(i64), pp(i64),
                                           pp(ctypes.c_uint32), pp(i32), pp(i32)]),
        "tarmac_num_shards": (ctypes.c_int, [P, pp(i64)]),
        "tarmac_shard": (ctypes.c_int, [P, i64, pp(P), pp(sz)]),
        "tarmac_value": (ctypes.c_int, [P, ctypes.c_char_p, i64, pp(_Tensor)]),
        "tarmac_has_value": (ctypes.c_int, [P, ctypes.c_char_p, i64, pp(ctypes.c_int32)]),
        "tarmac_column": (ctypes.c_int, [P, ctypes.c_char_p, pp(_Tensor)]),
        "tarmac_dense": (ctypes.c_int, [P, i64, ctypes.c_char_p, pp(_Tensor)]),
        "tarmac_num_derived": (ctypes.c_int, [P, pp(i64)]),
        "tarmac_derived_name": (ctypes.c_int, [P, i64, pp(ctypes.c_char_p)]),
        "tarmac_derived_value": (ctypes.c_int, [P, ctypes.c_char_p, i64, pp(_Tensor)]),
        "tarmac_derived_column": (ctypes.c_int, [P, ctypes.c_char_p, pp(_Tensor), pp(_Tensor)]),
        "tarmac_decoded_size": (ctypes.c_int, [P, i64, pp(i32), pp(i32)]),
        "tarmac_decode": (ctypes.c_int, [P, i64, P, sz, i32, i32, ctypes.c_int]),
        "tarmac_decoded_channels": (ctypes.c_int, [P, i64, pp(i32)]),
        "tarmac_decode_channels": (ctypes.c_int, [P, i64, P, sz, i32, i32, i32, ctypes.c_int]),
        "tarmac_partition_size": (ctypes.c_int, [u64, u64, u64, ctypes.c_int, pp(u64)]),
        "tarmac_indices": (ctypes.c_int, [u64, u64, u64, u64, u64, ctypes.c_int, ctypes.c_int, P, sz]),
        "tarmac_loader_new": (ctypes.c_int, [P, i32, i32, ctypes.c_int, i32, pp(ctypes.c_char_p), sz, pp(P)]),
        "tarmac_loader_new_channels": (ctypes.c_int, [P, i32, i32, i32, ctypes.c_int, i32, pp(ctypes.c_char_p), sz,
                                                      pp(P)]),
        "tarmac_loader_free": (None, [P]),
        "tarmac_loader_start": (ctypes.c_int, [P, P, sz, P, sz, pp(P), pp(sz)]),
        "tarmac_loader_wait": (ctypes.c_int, [P]),
        "tarmac_loader_new_augment": (ctypes.c_int, [P, pp(_Augment), i32, i32, pp(ctypes.c_char_p), sz, pp(P)]),
        "tarmac_loader_field_bytes": (ctypes.c_int, [P, sz, pp(u64)]),
        "tarmac_loader_field_layout": (ctypes.c_int, [P, sz, pp(_Tensor)]),
        "tarmac_loader_start_seeded": (ctypes.c_int, [P, u64, u64, P, sz, P, sz, pp(P), pp(sz)]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    _lib = lib
    return lib


def _check(code):
    if code != 0:
        raise TarmacError(code, load_library().tarmac_last_error().decode("utf-8", "replace"))


class _Handle:
    """Owns one tarmac_dataset*; closed when the last Dataset or array referring to it goes."""

    def __init__(self, path):
        self.lib = load_library()
        self.ptr = ctypes.c_void_p()
        _check(self.lib.tarmac_open(os.fsencode(path), ctypes.byref(self.ptr)))
        self.pid = os.getpid()

    def __del__(self):
        # A forked child shares the parent's maps copy-on-write; unmapping there is harmless.
        if getattr(self, "ptr", None) and self.ptr.value:
            self.lib.tarmac_close(self.ptr)
            self.ptr = ctypes.c_void_p()


def _view(handle, address, nbytes, dtype, shape):
    """A read-only numpy array over `nbytes` at `address`, keeping `handle` alive via .base."""
    buf = (ctypes.c_uint8 * max(nbytes, 1)).from_address(address) if address else (ctypes.c_uint8 * 1)()
    buf._tarmac_handle = handle  # the base chain holds the dataset open
    a = np.frombuffer(buf, dtype=np.uint8, count=nbytes)
    a.flags.writeable = False
    return a.view(np.dtype(dtype)).reshape(shape)


def indices(n, rank=0, world=1, seed=0, epoch=0, shuffle=True, drop_last=False):
    """Rank's share of the deterministic per-epoch order of n samples (int64 array).

    Every rank gets ceil(n / world) indices (floor with drop_last), disjoint between ranks up to
    the padding that repeats the order's start; identical on every machine (splitmix64 +
    Fisher-Yates, see docs/reader.md)."""
    lib = load_library()
    count = ctypes.c_uint64()
    _check(lib.tarmac_partition_size(n, rank, world, int(drop_last), ctypes.byref(count)))
    out = np.empty(count.value, dtype=np.int64)
    _check(lib.tarmac_indices(n, rank, world, seed & (2**64 - 1), epoch, int(shuffle), int(drop_last),
                              out.ctypes.data, out.size))
    return out


def bucket_batches(dataset, batch_size, rank=0, world=1, seed=0, epoch=0, shuffle=True, drop_last=True):
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
    w = np.asarray(dataset.column("__image__.width"), dtype=np.int64)
    h = np.asarray(dataset.column("__image__.height"), dtype=np.int64)
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


class Dataset:
    """A tarmac dataset directory, opened by memory map in constant time.

    Picklable (it reopens by path), so it can be handed to worker processes; after a fork it
    keeps working on the inherited maps (shared through the page cache)."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._open()

    def _open(self):
        self._h = _Handle(self.path)
        lib, p = self._h.lib, self._h.ptr
        self._lib = lib
        self._n = lib.tarmac_size(p)
        nf = ctypes.c_int64()
        _check(lib.tarmac_num_fields(p, ctypes.byref(nf)))
        self.fields = {}
        for k in range(nf.value):
            f = _Field()
            _check(lib.tarmac_field_info(p, k, ctypes.byref(f)))
            self.fields[f.name.decode()] = {
                "kind": _KINDS[f.kind], "dtype": lib.tarmac_dtype_name(f.dtype).decode(),
                "shape": tuple(f.shape[d] for d in range(f.ndim)), "ragged": bool(f.ragged),
                "nullable": bool(f.nullable)}
        nb = ctypes.c_int64()
        _check(lib.tarmac_num_blob_kinds(p, ctypes.byref(nb)))
        self.blob_kinds = []
        for k in range(nb.value):
            s = ctypes.c_char_p()
            _check(lib.tarmac_blob_kind(p, k, ctypes.byref(s)))
            self.blob_kinds.append(s.value.decode())
        nd = ctypes.c_int64()
        _check(lib.tarmac_num_derived(p, ctypes.byref(nd)))
        self.derived = []  # derived columns (tarmac.derive + tarmac column merge), sorted
        for k in range(nd.value):
            s = ctypes.c_char_p()
            _check(lib.tarmac_derived_name(p, k, ctypes.byref(s)))
            self.derived.append(s.value.decode())
        self._loaders = {}
        self._loader_pid = os.getpid()
        self._getters = None

    def _sample_getters(self):
        """[(name, getter(i))] for ds[i], built once: whole-column views sliced with numpy, so a
        sample costs no library call. Checks what the library checks per access (ragged
        offsets, blob ranges), raising TarmacError(TARMAC_E_DATA) as it would."""
        if self._getters is not None:
            return self._getters
        getters = [("__key__", self._ragged_getter("__key__.values", "__key__.offsets", "__key__", "string"))]
        if self.blob_kinds:
            shards = []
            count = ctypes.c_int64()
            _check(self._lib.tarmac_num_shards(self._ptr, ctypes.byref(count)))
            for k in range(count.value):
                data, size = ctypes.c_void_p(), ctypes.c_size_t()
                _check(self._lib.tarmac_shard(self._ptr, k, ctypes.byref(data), ctypes.byref(size)))
                shards.append(_view(self._h, data.value, size.value, "u1", (size.value,)))
            getters.append(("image", self._blob_getter("__image__", shards)))
        for name, f in self.fields.items():
            if f["kind"] == "numeric" and not f["ragged"]:
                get = self._tensor(name).__getitem__
            else:
                get = self._ragged_getter(name + ".values", name + ".offsets", name, f["kind"])
            if f["nullable"]:  # None where the sample has no value
                get = (lambda valid, get: lambda i: get(i) if valid[i] else None)(self._tensor(name + ".valid"), get)
            getters.append((name, get))
        if self.blob_kinds:
            getters.append(("__affine__", self.column("__affine__").__getitem__))
        for name in self.derived:  # a column of another dataset version raises here
            getters.append((name, self._derived_getter(name)))
        self._getters = getters
        return getters

    def _derived_getter(self, name):
        values, shapes = self._derived_arrays(name)
        if shapes is None:
            return values.__getitem__
        return lambda i: self.derived_value(name, i)

    def _derived_arrays(self, name):
        """(values [N, ...], None) for a column of one shape, else (flat values, (offsets, shapes))."""
        t, sh = _Tensor(), _Tensor()
        _check(self._lib.tarmac_derived_column(self._ptr, name.encode(), ctypes.byref(t), ctypes.byref(sh)))
        values = self._tensor_array(t)
        if not t.offsets:
            return values, None
        off = ctypes.cast(t.offsets, ctypes.c_void_p).value
        offsets = _view(self._h, off, (self._n + 1) * 8, "<i8", (self._n + 1,))
        return values, (offsets, self._tensor_array(sh))

    def _derived_dtype(self, name):
        """The safetensors dtype name of derived column `name` ("F16", "BF16", ...)."""
        t = _Tensor()
        _check(self._lib.tarmac_derived_column(self._ptr, name.encode(), ctypes.byref(t), None))
        return self._lib.tarmac_dtype_name(t.dtype).decode()

    def derived_value(self, name, i):
        """Sample i's output of derived column `name`: a read-only zero-copy array of its own
        shape (BF16 outputs as their raw uint16 bits)."""
        t = _Tensor()
        _check(self._lib.tarmac_derived_value(self._ptr, name.encode(), self._index(i), ctypes.byref(t)))
        return self._tensor_array(t)

    def _tensor(self, name):
        t = _Tensor()
        _check(self._lib.tarmac_column(self._ptr, name.encode(), ctypes.byref(t)))
        return self._tensor_array(t)

    def _bad(self, i, what):
        return TarmacError(5, f"dataset '{self.path}': sample {i} {what}")

    def _text(self, raw, i, field, kind):
        """Sample i's bytes of a string (str) or json (parsed) field; bytes that are not UTF-8,
        or not JSON, are TarmacError(TARMAC_E_DATA) naming the sample, never a bare ValueError."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self._bad(i, f"field '{field}' is not valid UTF-8 (byte {e.start} of {len(raw)})") from None
        if kind != "json":
            return text
        try:
            return json.loads(text)
        except ValueError as e:
            raise self._bad(i, f"field '{field}' is not valid JSON ({e})") from None

    def _ragged_getter(self, values_name, offsets_name, field, kind):
        values, offsets = self._tensor(values_name), self._tensor(offsets_name)
        rows = values.shape[0]

        def get(i):
            b, e = int(offsets[i]), int(offsets[i + 1])
            if not 0 <= b <= e <= rows:
                raise self._bad(i, f"field '{field}' has offsets {b}..{e} outside its {rows} values")
            v = values[b:e]
            if kind == "numeric":
                return v
            return self._text(v.tobytes(), i, field, kind)
        return get

    def _blob_getter(self, kind, shards):
        shard_col, offset_col, size_col = (self._tensor(kind + s) for s in (".shard", ".offset", ".size"))

        def get(i):
            k, off, size = int(shard_col[i]), int(offset_col[i]), int(size_col[i])
            if not 0 <= k < len(shards):
                raise self._bad(i, f"{kind} names shard {k} of {len(shards)}")
            if off < 0 or size < 0 or off + size > shards[k].shape[0]:
                raise self._bad(i, f"{kind} lies at bytes {off}+{size}, beyond shard {k} of "
                                   f"{shards[k].shape[0]} bytes")
            return shards[k][off:off + size]
        return get

    def __getstate__(self):
        return {"path": self.path}

    def __setstate__(self, state):
        self.path = state["path"]
        self._open()

    def close(self):
        """Drops this object's reference to the dataset; arrays already handed out stay valid."""
        self._loaders = {}
        self._getters = None
        self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __len__(self):
        return self._n

    @property
    def metadata(self):
        """The annotation file's __metadata__ entries the format defines (text, as stored; the
        optional `classes` and `table` entries are JSON: json.loads them)."""
        out = {}
        for k in ("format", "num_samples", "schema", "shards", "blobs", "blob_encodings", "classes",
                  "table", "tool"):
            v = self._lib.tarmac_metadata(self._ptr, k.encode())
            if v is not None:
                out[k] = v.decode()
        return out

    @property
    def _ptr(self):
        if self._h is None:
            raise ValueError("the dataset is closed")
        return self._h.ptr

    def _index(self, i):
        i = int(i)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(f"sample index {i} out of range for {self._n} samples")
        return i

    def _tensor_array(self, t):
        dt = _DTYPES[t.dtype]
        return _view(self._h, t.data, t.nbytes, dt, tuple(t.shape[d] for d in range(t.ndim)))

    def key(self, i):
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        i = self._index(i)
        _check(self._lib.tarmac_key(self._ptr, i, ctypes.byref(data), ctypes.byref(size)))
        return self._text(ctypes.string_at(data.value, size.value), i, "__key__", "string") if size.value else ""

    def blob(self, i, kind="__image__"):
        """The stored bytes of sample i's blob as a read-only uint8 array (zero-copy)."""
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        _check(self._lib.tarmac_blob(self._ptr, self._index(i), kind.encode(), ctypes.byref(data),
                                     ctypes.byref(size)))
        return _view(self._h, data.value, size.value, "u1", (size.value,))

    def image(self, i):
        return self.blob(i)

    def value(self, name, i):
        """Sample i's value of field `name`: a zero-copy array (ragged: its slice), str for strings;
        None where a nullable field's sample has no value. A derived column's name gives
        derived_value(name, i)."""
        if name in self.derived and name not in self.fields:
            return self.derived_value(name, i)
        if self.fields.get(name, {}).get("nullable"):
            has = ctypes.c_int32()
            _check(self._lib.tarmac_has_value(self._ptr, name.encode(), self._index(i), ctypes.byref(has)))
            if not has.value:
                return None
        return self._stored_value(name, i)

    def _stored_value(self, name, i):
        t, i = _Tensor(), self._index(i)
        _check(self._lib.tarmac_value(self._ptr, name.encode(), i, ctypes.byref(t)))
        kind = self.fields.get(name, {}).get("kind", "numeric")
        if kind != "numeric":
            return self._text(ctypes.string_at(t.data, t.nbytes) if t.nbytes else b"", i, name, kind)
        return self._tensor_array(t)

    def affine(self, i):
        return self.value("__affine__", i)

    def dense(self, i, name):
        """Sample i's dense map `name` ("depth" or "__depth__") stored as .npy (`--dense
        depth.npy`): a read-only zero-copy array of its stored dtype, shape (H, W) or (H, W, C)."""
        kind = name if name.startswith("__") else f"__{name}__"
        t = _Tensor()
        _check(self._lib.tarmac_dense(self._ptr, self._index(i), kind.encode(), ctypes.byref(t)))
        return self._tensor_array(t)

    def column(self, name):
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
        t = _Tensor()
        _check(self._lib.tarmac_column(self._ptr, name.encode(), ctypes.byref(t)))
        values = self._tensor_array(t)
        nullable = self.fields.get(name, {}).get("nullable")
        valid = self._tensor(name + ".valid").astype(bool) if nullable else None
        if t.offsets:
            off = ctypes.cast(t.offsets, ctypes.c_void_p).value
            offsets = _view(self._h, off, (self._n + 1) * 8, "<i8", (self._n + 1,))
            return (values, offsets, valid) if nullable else (values, offsets)
        if nullable:
            mask = np.broadcast_to(~valid.reshape((-1,) + (1,) * (values.ndim - 1)), values.shape)
            return np.ma.masked_array(values, mask=mask)
        return values

    def __getitem__(self, i):
        i = self._index(i)
        return {name: get(i) for name, get in self._sample_getters()}

    def decoded_size(self, i):
        """(width, height) of sample i's image once decoded."""
        w, h = ctypes.c_int32(), ctypes.c_int32()
        _check(self._lib.tarmac_decoded_size(self._ptr, self._index(i), ctypes.byref(w), ctypes.byref(h)))
        return w.value, h.value

    def decoded_channels(self, i):
        """Channels of sample i's image as stored: 1 (grey, `--channels 1|keep`) or 3."""
        c = ctypes.c_int32()
        _check(self._lib.tarmac_decoded_channels(self._ptr, self._index(i), ctypes.byref(c)))
        return c.value

    def decode(self, i, size=None, resize=False, channels=None):
        """Sample i's image as an H x W x C uint8 array: RGB (C 3) or grey (C 1), as stored
        unless `channels` (1 or 3) asks; `size=(w, h)` with resize=True resizes."""
        i = self._index(i)
        w, h = size if size else self.decoded_size(i)
        c = channels or self.decoded_channels(i)
        out = np.empty((h, w, c), dtype=np.uint8)
        _check(self._lib.tarmac_decode_channels(self._ptr, i, out.ctypes.data, out.nbytes, w, h, c, int(resize)))
        return out

    def _loader(self, w, h, resize, threads, fields, channels=3, augment=None, points=None, boxes=None):
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
                _check(self._lib.tarmac_loader_new_channels(self._ptr, w, h, channels, int(resize), threads, names,
                                                            len(fields), ctypes.byref(ptr)))
            else:
                _check(self._lib.tarmac_loader_new_augment(self._ptr, ctypes.byref(augment._c(points, boxes)),
                                                           channels, threads, names, len(fields),
                                                           ctypes.byref(ptr)))
            self._loaders[key] = _Loader(self._lib, ptr, self._h)
        return self._loaders[key]

    def fixed_fields(self):
        """Names of the fixed-shape fields (those ds.batch can stack), plus '__affine__'."""
        names = [n for n, f in self.fields.items() if not f["ragged"]]
        return names + (["__affine__"] if self.blob_kinds else [])

    def batch(self, indices, fields=None, size=None, resize=False, threads=0, out=None, channels=3,
              augment=None, seed=0, epoch=0, dense=None, points=None, boxes=None):
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
        labels["__flip__"] (N,) bool."""
        idx = np.ascontiguousarray([self._index(i) for i in indices], dtype=np.int64)
        fields = tuple(self.fixed_fields() if fields is None else fields)
        if augment is not None and not isinstance(augment, Augment):
            raise ValueError(f"augment must be a tarmac.Augment, not {type(augment).__name__}")
        if augment is None and (dense or points is not None or boxes is not None):
            raise ValueError("dense, points and boxes follow an augmentation: give augment=")
        if augment is not None:
            if not self.blob_kinds:
                raise ValueError(f"augment: dataset '{self.path}' has no images")
            ah, aw = augment.size
            if size is not None and tuple(size) != (aw, ah):
                raise ValueError(f"size (w, h) {tuple(size)} differs from augment.size (h, w) {augment.size}")
            size = (aw, ah)
            for name, v in (("seed", seed), ("epoch", epoch)):
                if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= v < 2**64:
                    raise ValueError(f"{name} must be an integer in 0 .. 2^64 - 1, not {v!r}")
            dense = tuple(dense or ())
            kinds = []
            for name in dense:
                kind = name if name.startswith("__") else f"__{name}__"
                if kind not in self.blob_kinds[1:]:
                    raise ValueError(f"dense: '{name}' is not a dense map of '{self.path}' "
                                     f"(it has: {', '.join(self.blob_kinds[1:]) or 'none'})")
                kinds.append(kind)
            points = None if points is None else tuple(points)
            boxes = None if boxes is None else tuple(boxes)
        if out is not None:
            if (not isinstance(out, np.ndarray) or out.dtype != np.uint8 or out.ndim != 4
                    or out.shape[0] != len(idx) or out.shape[3] != channels or not out.flags.c_contiguous
                    or not out.flags.writeable):
                raise ValueError(f"out must be a writable C-contiguous uint8 array of shape "
                                 f"({len(idx)}, H, W, {channels}), not {getattr(out, 'dtype', type(out))} "
                                 f"{getattr(out, 'shape', '')}")
            size = size or (out.shape[2], out.shape[1])
            if tuple(size) != (out.shape[2], out.shape[1]):
                raise ValueError(f"out holds {out.shape[2]}x{out.shape[1]} images, size asks for "
                                 f"{size[0]}x{size[1]}")
        if self.blob_kinds:
            w, h = size if size else (self.decoded_size(int(idx[0])) if len(idx) else (1, 1))
        else:
            w, h = 0, 0
        gathered = fields
        if augment is not None:
            gathered = fields + ("__augment__", "__flip__") + tuple(kinds)
        loader = self._loader(w, h, resize, threads, gathered, channels, augment, points, boxes)
        images = out if out is not None and self.blob_kinds else np.empty((len(idx), h, w, channels), dtype=np.uint8)
        labels = {}
        for name in fields:
            probe = self._stored_value(name, 0) if self._n else np.empty(0)
            labels[name] = np.empty((len(idx),) + probe.shape, dtype=probe.dtype)
        outs = [labels[n] for n in fields]
        if augment is not None:
            labels["__augment__"] = np.empty((len(idx), 2, 3), dtype=np.float64)
            labels["__flip__"] = np.empty(len(idx), dtype=bool)
            outs += [labels["__augment__"], labels["__flip__"]]
            for k, name in enumerate(dense):  # the loader's dtype and shape (sample 0's map)
                dtype, shape = loader.layout(len(fields) + 2 + k)
                labels[name] = np.empty((len(idx),) + shape, dtype=dtype)
                outs.append(labels[name])
        loader.run(idx, images, outs, seed, epoch)
        for name in fields:  # a nullable field's zeros are told apart by its mask
            if self.fields.get(name, {}).get("nullable"):
                labels[name + ".valid"] = self._tensor(name + ".valid").astype(bool)[idx]
        return (images if self.blob_kinds else None), labels

    def indices(self, rank=0, world=1, seed=0, epoch=0, shuffle=True, drop_last=False):
        """This dataset's share for `rank` of epoch `epoch` (see tarmac.indices)."""
        return indices(self._n, rank, world, seed, epoch, shuffle, drop_last)


class _Loader:
    def __init__(self, lib, ptr, handle):
        self.lib, self.ptr, self.handle, self.pid = lib, ptr, handle, os.getpid()

    def run(self, idx, images, outs, seed=0, epoch=0):
        bufs = (ctypes.c_void_p * max(len(outs), 1))(*[o.ctypes.data for o in outs])
        sizes = (ctypes.c_size_t * max(len(outs), 1))(*[o.nbytes for o in outs])
        _check(self.lib.tarmac_loader_start_seeded(self.ptr, seed, epoch, idx.ctypes.data, len(idx),
                                                   images.ctypes.data, images.nbytes, bufs, sizes))
        _check(self.lib.tarmac_loader_wait(self.ptr))

    def layout(self, k):
        """(numpy dtype, per-sample shape) of the loader's field k."""
        t = _Tensor()
        _check(self.lib.tarmac_loader_field_layout(self.ptr, k, ctypes.byref(t)))
        return np.dtype(_DTYPES[t.dtype]), tuple(t.shape[d] for d in range(t.ndim))

    def __del__(self):
        if self.pid == os.getpid() and self.ptr.value:
            self.lib.tarmac_loader_free(self.ptr)
