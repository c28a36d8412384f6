"""The format's names as docs/format.md defines them, in one place for the whole package: file
names, dtype names and codes, field kinds, the derived columns' parts (format.md 8), and the
package's one safetensors writer and header reader. No other module spells these names."""
from __future__ import annotations

import json
import os
import re
import struct
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

from .errors import FormatError

LABELS = "labels.safetensors"  # format.md 1
MANIFEST = "manifest.json"      # format.md 5
COLUMNS = "columns"             # derived columns: COLUMNS/NAME.safetensors, COLUMNS/NAME.parts/ (format.md 8, 9)

# The annotation file's __metadata__ entries (format.md 1.1), in the document's order.
METADATA_KEYS = ("format", "num_samples", "schema", "shards", "blobs", "blob_encodings", "classes", "table",
                 "tool")

IMAGE = "__image__"    # the first blob kind; IMAGE.width, IMAGE.height, ... (format.md 1.3)
KEY = "__key__"        # KEY.values, KEY.offsets (format.md 1.2)
AFFINE = "__affine__"  # F64 [N, 2, 3] (format.md 1.3, 3)

# Field kinds in the C API's code order (c_api.h: TARMAC_NUMERIC, TARMAC_STRING, TARMAC_JSON).
NUMERIC, STRING, JSON = "numeric", "string", "json"
KINDS = (NUMERIC, STRING, JSON)

# The safetensors dtype names in the C API's code order (c_api.h: 0..12; format.md 1), each with
# the numpy dtype a reader views it as. numpy has no bfloat16: BF16 values are their raw uint16 bits.
DTYPES: Tuple[Tuple[str, np.dtype[Any]], ...] = tuple((name, np.dtype(np_name)) for name, np_name in (
    ("BOOL", "?"), ("U8", "u1"), ("I8", "i1"), ("U16", "<u2"), ("I16", "<i2"), ("U32", "<u4"), ("I32", "<i4"),
    ("U64", "<u8"), ("I64", "<i8"), ("F16", "<f2"), ("BF16", "<u2"), ("F32", "<f4"), ("F64", "<f8")))
DTYPE_NAMES = tuple(name for name, _ in DTYPES)
BF16 = "BF16"
I64 = "I64"
U8 = "U8"
_NAME_OF_NUMPY = {dt: name for name, dt in DTYPES if name != BF16}  # uint16 is U16


def dtype_name(dtype: npt.DTypeLike) -> Optional[str]:
    """The safetensors name of a little-endian numpy dtype ("F32"), None for one no column holds."""
    return _NAME_OF_NUMPY.get(np.dtype(dtype))


# Derived columns (format.md 8): the name rule, always applied with fullmatch (a `re.match` with
# `$` would let a trailing newline through), and the parts each rank writes.
COLUMN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
PART_FORMAT = "tarmac-column-part/1"
CHUNK_FORMAT = "tarmac-column-chunk/1"


def parts_dir(dataset: str, column: str) -> str:
    """The folder of derived column `column`'s parts in the dataset folder `dataset`."""
    return os.path.join(dataset, COLUMNS, column + ".parts")


def part_prefix(rank: int, world: int) -> str:
    """What every file of rank `rank` of `world` in a parts folder starts with."""
    return "part-%05d-of-%05d." % (rank, world)


def part_record(rank: int, world: int) -> str:
    return part_prefix(rank, world) + "json"  # the part's record (format.md 8)


def part_chunk(rank: int, world: int, chunk: int) -> str:
    return part_prefix(rank, world) + "chunk-%06d.safetensors" % chunk


def new_part_record(column: str, rank: int, world: int, begin: int, end: int, labels_crc32: str,
                    num_samples: int, fn: str, tool: str, batch_size: int, fields: Sequence[str],
                    fn_version: str, digest: str) -> Dict[str, Any]:
    """A rank's part record before its first chunk (format.md 8, key for key; the C++ side's one
    parser is lib/format/part_record.h): its share [begin, end) of the dataset it was computed
    from, the function, and no chunk yet."""
    return {"format": PART_FORMAT, "column": column, "rank": rank, "world": world, "begin": begin, "end": end,
            "dataset": {"labels_crc32": labels_crc32, "num_samples": num_samples}, "fn": fn, "tool": tool,
            "batch_size": batch_size, "fields": list(fields), "fn_version": fn_version, "digest": digest,
            "reused": 0, "chunks": [], "done": 0, "complete": False}


def part_chunk_entry(file: str, samples: int, size: int, crc32: int) -> Dict[str, Any]:
    """One entry of a part record's `chunks` (format.md 8): the chunk file's name, its samples,
    its bytes and their CRC-32 (lower-case hex)."""
    return {"file": file, "samples": samples, "bytes": size, "crc32": "%08x" % (crc32 & 0xFFFFFFFF)}


def safetensors_buffers(tensors: Sequence[Tuple[str, NDArray[Any], str]],
                        metadata: Mapping[str, str]) -> List[memoryview]:
    """A safetensors file of [(name, array, dtype name)] as the buffers to write one after the
    other: the header (padded with spaces to a multiple of 8, format.md 1), then each tensor's
    bytes in that order, as byte views of the arrays (no copy of a C-contiguous one)."""
    header: Dict[str, Any] = {"__metadata__": dict(metadata)}
    offset, blobs = 0, []
    for name, a, dtype in tensors:
        a = np.ascontiguousarray(a)
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.reshape(-1).view(np.uint8).data)  # .data: memoryview(a), typed as one
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return [memoryview(struct.pack("<Q", len(h)) + h)] + blobs


def safetensors_bytes(tensors: Sequence[Tuple[str, NDArray[Any], str]], metadata: Mapping[str, str]) -> bytes:
    """safetensors_buffers joined into one bytes object."""
    return b"".join(safetensors_buffers(tensors, metadata))


def safetensors_header(data: bytes) -> Tuple[Dict[str, Any], int]:
    """(the header's JSON object, where the data buffer starts) of a safetensors file's first
    bytes; FormatError (a ValueError) when they hold no whole header."""
    if len(data) < 8:
        raise FormatError(f"{len(data)} bytes hold no safetensors header length")
    (n,) = struct.unpack_from("<Q", data, 0)
    if 8 + n > len(data):
        raise FormatError(f"its header of {n} bytes runs past the {len(data)} bytes read")
    header = json.loads(data[8:8 + n])
    if not isinstance(header, dict):
        raise FormatError("its header is not a JSON object")
    return header, 8 + n


# A derived column's input digests (format.md 8, 9): `digest` U8 [k, 16] in a chunk, U8 [N, 16] in
# the merged column, computed by derive.py (its _input_digest says over what) and named by
# DIGEST_SCHEME in the part record and the column's metadata.
DIGEST = "digest"
DIGEST_BYTES = 16
DIGEST_SCHEME = "blake2b-128/tarmac-derive-input-1"
