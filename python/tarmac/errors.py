"""The errors of the tarmac package: TarmacError, and one subclass per error code of the C API
(lib/read/c_api.h), so a caller can catch the kind it can act on (docs/reader.md, "What opening
checks, and what access checks")."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple, Type

__all__ = ["TarmacError", "ArgumentError", "WrongTypeError", "RangeError", "DatasetIOError", "ParseError",
           "FormatError", "DataError", "InternalError", "LibraryVersionError", "LibraryNotFoundError",
           "error_for_code"]

# The C API's codes (c_api.h, enum TARMAC_E_*).
TARMAC_E_INVALID = 1
TARMAC_E_RANGE = 2
TARMAC_E_IO = 3
TARMAC_E_PARSE = 4
TARMAC_E_DATA = 5
TARMAC_E_INTERNAL = 6


class TarmacError(Exception):
    """An error of the tarmac library; `.code` is the C API's error code (None where the package
    found the problem itself, before any library call: a stale library, a derive run's state)."""

    def __init__(self, code: Optional[int], message: str) -> None:
        super().__init__(message)
        self.code = code

    # picklable with its class, code and attributes (errors cross processes)
    def __reduce__(self) -> Tuple[Callable[..., TarmacError], Tuple[Any, ...]]:
        return _rebuild, (type(self), self.code, str(self), dict(self.__dict__))


def _rebuild(cls: Type[TarmacError], code: Optional[int], message: str,
             attributes: Dict[str, Any]) -> TarmacError:
    e = cls.__new__(cls)
    TarmacError.__init__(e, code, message)
    e.__dict__.update(attributes)
    return e


class ArgumentError(TarmacError, ValueError):
    """TARMAC_E_INVALID: a bad argument, an unknown field, a wrong buffer size."""

    def __init__(self, message: str) -> None:
        super().__init__(TARMAC_E_INVALID, message)


class WrongTypeError(ArgumentError, TypeError):
    """TARMAC_E_INVALID: an argument of the wrong type (a dict where a list of weights is asked);
    a TypeError too, as Python's own type checks raise."""


class RangeError(TarmacError, IndexError):
    """TARMAC_E_RANGE: a sample index out of range."""

    def __init__(self, message: str) -> None:
        super().__init__(TARMAC_E_RANGE, message)


class DatasetIOError(TarmacError):
    """TARMAC_E_IO: no dataset, a file missing or unmappable."""

    def __init__(self, message: str) -> None:
        super().__init__(TARMAC_E_IO, message)


class ParseError(TarmacError):
    """TARMAC_E_PARSE: the annotation file (labels.safetensors) is invalid."""

    def __init__(self, message: str) -> None:
        super().__init__(TARMAC_E_PARSE, message)


class FormatError(ParseError, ValueError):
    """TARMAC_E_PARSE: a file the package reads itself (a safetensors header, a derived column's
    chunk) is not what docs/format.md says; a ValueError too, as json's own errors are."""


class DataError(TarmacError):
    """TARMAC_E_DATA: a sample's data is inconsistent or does not decode (in Python also text that
    is not UTF-8, a JSON value that does not parse)."""

    def __init__(self, message: str) -> None:
        super().__init__(TARMAC_E_DATA, message)


class InternalError(TarmacError):
    """TARMAC_E_INTERNAL: out of memory or another unexpected failure of the library."""

    def __init__(self, message: str) -> None:
        super().__init__(TARMAC_E_INTERNAL, message)


class LibraryVersionError(TarmacError):
    """The libtarmac_c.so found is of another C API version than this package (a stale library
    left by an earlier installation, say); the message names its path. `.code` is None."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


class LibraryNotFoundError(TarmacError, OSError):
    """No libtarmac_c.so where the package looks (docs/reader.md, "Installing"); the message lists
    the places tried. An OSError too, as ctypes' own load failure is. `.code` is None."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


_BY_CODE = {TARMAC_E_INVALID: ArgumentError, TARMAC_E_RANGE: RangeError, TARMAC_E_IO: DatasetIOError,
            TARMAC_E_PARSE: ParseError, TARMAC_E_DATA: DataError, TARMAC_E_INTERNAL: InternalError}


def error_for_code(code: int, message: str) -> TarmacError:
    """The exception for a C API error code: its subclass, or TarmacError for a code this package
    does not know (a newer library)."""
    cls = _BY_CODE.get(code)
    return cls(message) if cls is not None else TarmacError(code, message)
