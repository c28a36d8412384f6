"""Finding and loading libtarmac_c.so: its C API version checked, its functions declared, its
errors raised as TarmacError subclasses (docs/reader.md, "Installing")."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import sys
import sysconfig
from typing import List, Optional

from . import _format
from .errors import LibraryNotFoundError, LibraryVersionError, error_for_code

# The TARMAC_C_API_VERSION (lib/read/c_api.h) this package declares its functions for: the
# library's tarmac_api_version() must say the same, or the structs below may not match its own.
C_API_VERSION = 4
_MAX_DIMS = 8


class Tensor(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32), ("shape", ctypes.c_int64 * _MAX_DIMS),
                ("data", ctypes.c_void_p), ("nbytes", ctypes.c_size_t),
                ("offsets", ctypes.POINTER(ctypes.c_int64))]


class Field(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int32), ("dtype", ctypes.c_int32),
                ("ragged", ctypes.c_int32), ("ndim", ctypes.c_int32), ("shape", ctypes.c_int64 * _MAX_DIMS),
                ("sample_bytes", ctypes.c_uint64), ("nullable", ctypes.c_int32)]


class AugmentStruct(ctypes.Structure):
    _fields_ = [("width", ctypes.c_int32), ("height", ctypes.c_int32), ("flip", ctypes.c_double),
                ("flip_pairs", ctypes.POINTER(ctypes.c_int32)), ("nflip_pairs", ctypes.c_size_t),
                ("rotate", ctypes.c_double), ("scale_min", ctypes.c_double), ("scale_max", ctypes.c_double),
                ("translate", ctypes.c_double), ("crop", ctypes.c_int32), ("crop_min", ctypes.c_double),
                ("crop_max", ctypes.c_double), ("ratio_min", ctypes.c_double), ("ratio_max", ctypes.c_double),
                ("fill", ctypes.c_double), ("points", ctypes.POINTER(ctypes.c_char_p)), ("npoints", ctypes.c_size_t),
                ("boxes", ctypes.POINTER(ctypes.c_char_p)), ("nboxes", ctypes.c_size_t)]


_lib: Optional[ctypes.CDLL] = None


def _prefix_libdirs(prefix: str) -> List[str]:
    """The library folders of an installation prefix: lib/ and Debian's multiarch lib/<triplet>/."""
    multiarch = sysconfig.get_config_var("MULTIARCH")
    dirs = [os.path.join(prefix, "lib")]
    if multiarch:
        dirs.append(os.path.join(prefix, "lib", multiarch))
    return dirs


def _candidates() -> List[str]:
    """Where libtarmac_c.so is looked for, in order (docs/reader.md, "Installing")."""
    env = os.environ.get("TARMAC_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [here]  # a bundle (scripts/bundle-reader.sh) or a copy beside the package
    try:  # installed by cmake --install or the .deb: the library's place relative to the package
        from . import _install  # written by the installation; absent from the source tree
        dirs.append(os.path.normpath(os.path.join(here, _install.LIBDIR)))  # type: ignore[attr-defined]
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
    out: List[str] = []
    for d in dirs:
        path = os.path.join(d, "libtarmac_c.so")
        if path not in out:
            out.append(path)
    return out


def _check_version(lib: ctypes.CDLL, path: str) -> None:
    """LibraryVersionError naming `path` unless the library's C API is the one this package declares,
    and its dtype codes are the format's (docs/format.md 1)."""
    fix = ("install the library and the Python package of one tarmac release, or set TARMAC_LIB to the "
           "libtarmac_c.so built with this package")
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        version = lib.tarmac_api_version
    except AttributeError:
        raise LibraryVersionError(f"{path} is a tarmac library older than this package ({here}): it has no "
                                  f"tarmac_api_version (C API version 2 or earlier; the package needs "
                                  f"{C_API_VERSION}): {fix}") from None
    version.restype, version.argtypes = ctypes.c_int, []
    found = version()
    if found != C_API_VERSION:
        raise LibraryVersionError(f"{path} has C API version {found}, this package ({here}) needs "
                                  f"{C_API_VERSION}: {fix}")
    lib.tarmac_dtype_name.restype, lib.tarmac_dtype_name.argtypes = ctypes.c_char_p, [ctypes.c_int32]
    names = [lib.tarmac_dtype_name(code) for code in range(len(_format.DTYPE_NAMES) + 1)]
    if names != [n.encode() for n in _format.DTYPE_NAMES] + [None]:
        raise LibraryVersionError(f"{path} names its dtype codes {[n and n.decode() for n in names]}, this package "
                                  f"{list(_format.DTYPE_NAMES)}: {fix}")


def load_library() -> ctypes.CDLL:
    """Loads libtarmac_c.so once, checks its C API version and declares its functions; returns the
    ctypes library. LibraryNotFoundError (an OSError) when no library is found, LibraryVersionError
    naming a library of another version (both TarmacErrors)."""
    global _lib
    if _lib is not None:
        return _lib
    tried = _candidates()
    path = next((p for p in tried if os.path.exists(p)), None)
    if path is None and not os.environ.get("TARMAC_LIB"):  # last, the system loader's own search
        path = ctypes.util.find_library("tarmac_c")
        tried.append("the system loader (ldconfig)")
    if path is None:
        raise LibraryNotFoundError("libtarmac_c.so not found (install tarmac, or set TARMAC_LIB to its path); tried "
                                   + ", ".join(tried))
    lib = ctypes.CDLL(path)
    _check_version(lib, os.path.abspath(path) if os.path.exists(path) else path)
    P, i64, u64, i32, sz = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_int32, ctypes.c_size_t
    pp = ctypes.POINTER
    sigs = {
        "tarmac_last_error": (ctypes.c_char_p, []),
        "tarmac_open": (ctypes.c_int, [ctypes.c_char_p, pp(P)]),
        "tarmac_open_cached": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, u64, pp(P)]),
        "tarmac_close": (None, [P]),
        "tarmac_size": (i64, [P]),
        "tarmac_metadata": (ctypes.c_char_p, [P, ctypes.c_char_p]),
        "tarmac_num_fields": (ctypes.c_int, [P, pp(i64)]),
        "tarmac_field_info": (ctypes.c_int, [P, i64, pp(Field)]),
        "tarmac_num_blob_kinds": (ctypes.c_int, [P, pp(i64)]),
        "tarmac_blob_kind": (ctypes.c_int, [P, i64, pp(ctypes.c_char_p)]),
        "tarmac_key": (ctypes.c_int, [P, i64, pp(P), pp(sz)]),
        "tarmac_blob": (ctypes.c_int, [P, i64, ctypes.c_char_p, pp(P), pp(sz)]),
        "tarmac_blob_ref": (ctypes.c_int, [P, i64, ctypes.c_char_p, pp(i32), pp(i64), pp(i64),
                                           pp(ctypes.c_uint32), pp(i32), pp(i32)]),
        "tarmac_num_shards": (ctypes.c_int, [P, pp(i64)]),
        "tarmac_shard": (ctypes.c_int, [P, i64, pp(P), pp(sz)]),
        "tarmac_value": (ctypes.c_int, [P, ctypes.c_char_p, i64, pp(Tensor)]),
        "tarmac_has_value": (ctypes.c_int, [P, ctypes.c_char_p, i64, pp(ctypes.c_int32)]),
        "tarmac_column": (ctypes.c_int, [P, ctypes.c_char_p, pp(Tensor)]),
        "tarmac_dense": (ctypes.c_int, [P, i64, ctypes.c_char_p, pp(Tensor)]),
        "tarmac_num_derived": (ctypes.c_int, [P, pp(i64)]),
        "tarmac_derived_name": (ctypes.c_int, [P, i64, pp(ctypes.c_char_p)]),
        "tarmac_derived_value": (ctypes.c_int, [P, ctypes.c_char_p, i64, pp(Tensor)]),
        "tarmac_derived_column": (ctypes.c_int, [P, ctypes.c_char_p, pp(Tensor), pp(Tensor)]),
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
        "tarmac_loader_new_augment": (ctypes.c_int, [P, pp(AugmentStruct), i32, i32, pp(ctypes.c_char_p), sz,
                                                     pp(P)]),
        "tarmac_loader_field_bytes": (ctypes.c_int, [P, sz, pp(u64)]),
        "tarmac_loader_field_layout": (ctypes.c_int, [P, sz, pp(Tensor)]),
        "tarmac_loader_start_seeded": (ctypes.c_int, [P, u64, u64, P, sz, P, sz, pp(P), pp(sz)]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    _lib = lib
    return lib


def check(code: int) -> None:
    """Raises the TarmacError subclass of a C API error code, with the library's message."""
    if code != 0:
        raise error_for_code(code, load_library().tarmac_last_error().decode("utf-8", "replace"))
