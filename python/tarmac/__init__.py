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

The top level holds the dataset, the augmentation, the sampling functions and the errors.
Modules, by idea: library (load_library: finding libtarmac_c.so, its C API version checked), errors
(TarmacError, one subclass per C error code), dataset, augment, sampling (tarmac.indices,
bucket_batches), cache_flags (add_cache_arguments, cache_options, parse_size: --cache and --cache-size
for command lines reading a dataset in object storage), _format (the format's names), derive (python -m tarmac.derive), torch, loader
(tarmac.torch.Loader: batches prefetched on native threads into reused buffers).
"""
import importlib as _importlib
import warnings as _warnings
from typing import Any as _Any

from .augment import Augment
from .dataset import Dataset
from .errors import (ArgumentError, DataError, DatasetIOError, FormatError, InternalError, LibraryNotFoundError,
                     LibraryVersionError, ParseError, RangeError, TarmacError, WrongTypeError)
from .sampling import bucket_batches, indices

__all__ = ["Augment", "Dataset", "TarmacError", "ArgumentError", "WrongTypeError", "RangeError", "DatasetIOError",
           "ParseError", "FormatError", "DataError", "InternalError", "LibraryVersionError", "LibraryNotFoundError",
           "bucket_batches", "indices"]
__version__ = "0.1.0"  # the project's version (CMakeLists.txt, pyproject.toml)

# Names that left the top level in 0.1.0: still found here for one release, with a
# DeprecationWarning, because scripts written from the docs of the release before use them.
_MOVED = {"load_library": "tarmac.library", "add_cache_arguments": "tarmac.cache_flags",
          "cache_options": "tarmac.cache_flags", "parse_size": "tarmac.cache_flags"}
_SUBMODULES = ("cache_flags", "library")  # tarmac.cache_flags.parse_size works after a bare `import tarmac`


def __getattr__(name: str) -> _Any:
    if name in _MOVED:
        _warnings.warn(f"tarmac.{name} moved to {_MOVED[name]}.{name}; the old name goes away in the next release",
                      DeprecationWarning, stacklevel=2)
        return getattr(_importlib.import_module(_MOVED[name]), name)
    if name in _SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
