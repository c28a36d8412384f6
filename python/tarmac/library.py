"""The native library this package reads with: load_library() finds libtarmac_c.so (docs/reader.md,
"Installing"), checks its C API version and returns it (its `_name` is the path that was loaded)."""
from ._library import C_API_VERSION, load_library

__all__ = ["C_API_VERSION", "load_library"]
