"""--cache DIR and --cache-size SIZE for command lines that read a dataset in object storage
through the reader's shard cache (tarmac.Dataset(url, cache=DIR, cache_size=N)), with sizes read
as tarmac's own size flags read them (512M, 1.5G, 4096: powers of 1024).

    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    tarmac.cache_flags.add_cache_arguments(ap)
    a = ap.parse_args()
    ds = tarmac.Dataset(a.dataset, **tarmac.cache_flags.cache_options(ap, a, a.dataset))
"""
from __future__ import annotations

import argparse
import math
import re
from typing import Any, Dict, Optional

from .dataset import _REMOTE
from .errors import ArgumentError

__all__ = ["parse_size", "add_cache_arguments", "cache_options"]

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20, "G": 1 << 30, "GiB": 1 << 30,
          "T": 1 << 40, "TiB": 1 << 40}
MAX_BYTES = 1 << 50  # 1024T, the largest size tarmac's flags take (apps/flag_values.h, kMaxBytes)
# a number as tarmac's flags read it (std::from_chars: an optional '-', no '+', an exponent), a unit
_SIZE = re.compile(r"(-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)([A-Za-z]*)")


def parse_size(text: str, zero: bool = False) -> int:
    """'1.5G' / '512M' / '4096' -> bytes: a number and a unit K, M, G or T (powers of 1024; KiB..TiB
    and B too), rounded down, from 1 byte (0 too where `zero`) to 1024T. Raises ArgumentError (a
    ValueError) saying what is accepted."""
    m = _SIZE.fullmatch(text)
    bytes_ = math.floor(float(m.group(1)) * _UNITS[m.group(2)]) if m and m.group(2) in _UNITS else -1
    if not (0 if zero else 1) <= bytes_ <= MAX_BYTES:
        raise ArgumentError(f"'{text}' is not a size; accepted: a number and a unit K, M, G or T (powers of 1024; "
                            f"e.g. 512M, 1.5G, 4096), from {'0' if zero else '1 byte'} to 1024T")
    return bytes_


def _cache_size(text: str) -> int:
    try:
        return parse_size(text, zero=True)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds --cache DIR and --cache-size SIZE (default 0: no limit) to `parser`, in a group of
    their own."""
    g = parser.add_argument_group("a dataset in object storage (s3://bucket/prefix/, http(s)://)")
    g.add_argument("--cache", metavar="DIR",
                   help="the local folder its annotation file is downloaded into at open and each shard on first "
                        "use (whole, CRC-checked); required for such a dataset; processes may share it")
    g.add_argument("--cache-size", metavar="SIZE", type=_cache_size, default=0,
                   help="at most this much stays in --cache, the least recently used shards removed first: "
                        "e.g. 500M, 10G (powers of 1024); hold at least the shards read at once. "
                        "Default 0: no limit")


def cache_options(parser: argparse.ArgumentParser, args: argparse.Namespace, path: Any) -> Dict[str, Optional[Any]]:
    """{"cache", "cache_size"} of tarmac.Dataset (and TarmacDataset) for dataset `path` from the
    parsed `args`; exits through parser.error (status 2) when `path` is in object storage and
    --cache is missing, or is local and --cache or --cache-size is given."""
    remote = str(path).startswith(_REMOTE)
    if remote and args.cache is None:
        parser.error(f"'{path}' is in object storage: pass --cache DIR, the local folder its shards are downloaded "
                     "into (and --cache-size SIZE to bound it)")
    if not remote and (args.cache is not None or args.cache_size):
        parser.error(f"--cache and --cache-size are for a dataset in object storage (s3://, http(s)://), not the "
                     f"local folder '{path}'")
    return {"cache": args.cache, "cache_size": args.cache_size}
