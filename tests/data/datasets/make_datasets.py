#!/usr/bin/python3
"""Writes the checked-in tarmac datasets that the reader, verify and merge tests read.

An independent writer of the tarmac/1 format, written from docs/format.md: struct, json,
numpy and zlib only (PNG and ustar are written by hand here), no tarmac code. Our rule is
that fixtures for a reader are not made by our writer: a writer bug and a reader bug must
not be able to cancel out.

The bytes are laid out as tarmac 0.1.0 lays them out (metadata entries, tensor order, header
padding, shard splitting, manifest with its seal), without the later `blob_encodings`
metadata entry except in raw3/ -- so read12/ and parts/ are also "a dataset written before
that entry existed". tests/data/datasets/test_datasets.py re-runs this script and checks
that its output is byte-identical to the checked-in files.

usage: make_datasets.py [OUT_DIR] [--archives DIR]
  OUT_DIR defaults to this script's directory. --archives also writes, for each dataset, the
  input archive its manifest describes (what `tarmac convert` would be given to make it), e.g.
  to compare with the converter on the side.

Datasets (K = the sample number):
  read12/   12 samples s/0000..s/0011 (tests/read): KEY.png 32x24 RGB, pixel = expected_pixel(K);
            KEY.depth.png 16-bit 32x24, 1000K + 32y + x; KEY.json {"id": K,
            "vec": [1.5K, -K, 2.0], "name": "name-K", "pts": K%3+1 rows [K, r]}; KEY.cls K%5.
            Like `tarmac convert --format png --dense depth.png --shard-size 8K` (4 shards).
  parts/N/  like tests/check's make_dataset (library convert(), shard_size 4096): samples
            PREFIX/NNN, a PNG 16 x (12 + K%5), RGB (200-K, 40, 7K % 255), JSON {"cls": K,
            "score": K or K + 0.5, "pts": K%3+1 points [1.5, 2], "name": "nK"}; see PARTS.
  raw3/     3 samples r/0..r/2, KEY.rgb raw RGB 4x3 (raw_pixel(K)), KEY.v.npy F32 [2]
            [K + 0.25, -K]; metadata blob_encodings = {"__image__":"rgb"}.
  sheet2/   2 samples for the contact sheet's test (tests/preview): KEY.png uniform RGB, a
            30x20 (10, 20, 30), b 10x20 (200, 100, 50); KEY.json {"bb": F32 [4], "kp": F32
            [1, 2]}: a [5, 4, 10, 8], [[22, 15]]; b [100, 100, 1, 1], [[-50, -50]].
            Like `tarmac convert sheet2.tar -o sheet2 --format png`.
  read12_columns/  derived columns of read12 (format.md 9), to be copied into a copy of
            read12 as columns/: emb.safetensors F32 [3] per sample [K, 2K, -K] (uniform:
            values [12, 3]); lat.safetensors U16 [2, 1 + K%3] per sample, 100K + j (ragged:
            values flat); old.safetensors like emb but bound to another annotation file.
"""
import argparse
import json
import os
import struct
import sys
import zlib

import numpy as np

TOOL_VERSION = "0.1.0"  # the tarmac version whose output these datasets reproduce

# ----------------------------------------------------------------------------- content


def expected_pixel(k):
    """read12: the RGB image of sample k, 24 x 32 x 3 uint8 (as tests/read/make_fixture.py)."""
    y, x = np.mgrid[0:24, 0:32]
    return np.stack([(x * 7 + k * 13) % 256, (y * 11 + k) % 256, (x + y + k * 5) % 256],
                    -1).astype(np.uint8)


def expected_depth(k):
    """read12: the 16-bit depth map of sample k, 24 x 32 uint16."""
    y, x = np.mgrid[0:24, 0:32]
    return (1000 * k + 32 * y + x).astype(np.uint16)


def read12_labels(k):
    return {"id": k, "vec": [1.5 * k, -k, 2.0], "name": f"name-{k}",
            "pts": [[k, r] for r in range(k % 3 + 1)]}


def part_pixel(i):
    """parts: the RGB image of sample i, (12 + i%5) x 16 x 3 uint8."""
    img = np.empty((12 + i % 5, 16, 3), np.uint8)
    img[...] = (200 - i, 40, i * 7 % 255)
    return img


def part_labels(i, float_scores):
    return {"cls": i, "score": i + 0.5 if float_scores else i,
            "pts": [[1.5, 2] for _ in range(i % 3 + 1)], "name": f"n{i}"}


def raw_pixel(k):
    """raw3: the RGB image of sample k, 3 x 4 x 3 uint8."""
    return (np.arange(36).reshape(3, 4, 3) * 5 + 50 * k).astype(np.uint8)


def raw_v(k):
    return np.array([k + 0.25, -k], np.float32)


# Each part: (directory under parts/, samples, key prefix, float scores, images). Named after
# the tests that read them (tests/check/verify_test.cpp, tests/merge/merge_test.cpp).
PARTS = [
    ("s12", 12, "s", False, True),   # verify: an intact dataset
    ("s10", 10, "s", False, True),   # verify: random byte flips
    ("s6", 6, "s", False, True),     # verify: missing, extra, truncated files
    ("s5", 5, "s", False, True),     # verify: cat's helpers
    ("a", 5, "a", False, True),      # merge: basic (I64 scores)
    ("b", 4, "b", True, True),       # merge: basic (F64 scores)
    ("a1", 1, "a", False, True),     # merge: "pts" fixed [1, 2] ...
    ("b2", 2, "b", False, True),     # merge: ... and ragged: becomes ragged
    ("k1", 3, "k", False, True),     # merge: duplicate keys k/000..k/002 ...
    ("k2", 3, "k", False, True),     # ... in both parts
    ("c", 2, "c", False, False),     # merge: labels only, other blobs than k1
    ("la", 2, "a", False, False),    # merge: labels-only parts ...
    ("lb", 3, "b", False, False),    # ... merge
]

# ----------------------------------------------------------------------------- PNG


def png(pixels):
    """A PNG of an H x W x 3 uint8 (RGB) or H x W uint16 (gray) array: every row filtered with
    Sub, one IDAT compressed by zlib at level 9."""
    h, w = pixels.shape[:2]
    if pixels.dtype == np.uint8 and pixels.ndim == 3 and pixels.shape[2] == 3:
        depth, color, bpp, rows = 8, 2, 3, pixels.reshape(h, w * 3)
    elif pixels.dtype == np.uint16 and pixels.ndim == 2:
        depth, color, bpp = 16, 0, 2
        rows = pixels.astype(">u2").view(np.uint8).reshape(h, w * 2)
    else:
        raise ValueError("png(): RGB uint8 or gray uint16 only")
    sub = rows.copy()
    sub[:, bpp:] = rows[:, bpp:] - rows[:, :-bpp]  # uint8 arithmetic: modulo 256
    raw = np.concatenate([np.ones((h, 1), np.uint8), sub], axis=1).tobytes()

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n" +
            chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def npy(array):
    """A version 1.0 .npy file of a little-endian array (for the input archive of raw3)."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        array.dtype.str, "".join(f"{d}," for d in array.shape))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + array.tobytes()


# ----------------------------------------------------------------------------- tar (ustar)

BLOCK = 512


def padded(n):
    return (n + BLOCK - 1) // BLOCK * BLOCK


def octal(value, width):
    """width-1 zero-padded octal digits and a NUL."""
    return b"%0*o" % (width - 1, value) + b"\0"


def ustar_header(name, size):
    """The 512-byte POSIX ustar header of a regular file: mode 0644, uid/gid 0, mtime 0."""
    name = name.encode("ascii")
    if len(name) > 100:
        raise ValueError("names over 100 bytes need a pax header; none are used here")
    b = bytearray(BLOCK)
    b[0:len(name)] = name
    b[100:108] = octal(0o644, 8)
    b[108:116] = octal(0, 8)           # uid
    b[116:124] = octal(0, 8)           # gid
    b[124:136] = octal(size, 12)
    b[136:148] = octal(0, 12)          # mtime
    b[156:157] = b"0"                  # regular file
    b[257:263] = b"ustar\0"
    b[263:265] = b"00"
    b[329:337] = octal(0, 8)           # devmajor
    b[337:345] = octal(0, 8)           # devminor
    b[148:156] = b" " * 8              # the checksum counts its own field as spaces
    b[148:156] = octal(sum(b), 7) + b" "
    return bytes(b)


class Tar:
    """An uncompressed ustar archive built in memory."""

    def __init__(self):
        self.data = bytearray()

    @staticmethod
    def bytes_if_added(size):
        return BLOCK + padded(size)

    def add(self, name, blob):
        """Appends member `name`; returns the offset of its data."""
        self.data += ustar_header(name, len(blob))
        at = len(self.data)
        self.data += blob + b"\0" * (padded(len(blob)) - len(blob))
        return at

    def finish(self):
        self.data += b"\0" * (2 * BLOCK)
        return bytes(self.data)


# ----------------------------------------------------------------------------- safetensors

DTYPES = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "U16": np.uint16, "I16": np.int16,
          "U32": np.uint32, "I32": np.int32, "U64": np.uint64, "I64": np.int64,
          "F16": np.float16, "F32": np.float32, "F64": np.float64}


def compact(value):
    """JSON text without spaces, as the metadata entries hold it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def safetensors(tensors, metadata):
    """The bytes of a safetensors file of {name: (DTYPE, ndarray)} and {str: str} metadata:
    tensors back to back, largest element size first, then by name; metadata keys sorted; the
    header padded with spaces to make 8 + its length a multiple of 8."""
    order = sorted(tensors, key=lambda n: (-np.dtype(DTYPES[tensors[n][0]]).itemsize,
                                           n.encode()))
    header = {"__metadata__": {k: metadata[k] for k in sorted(metadata, key=str.encode)}}
    data, offset = [], 0
    for name in order:
        dtype, array = tensors[name]
        raw = np.ascontiguousarray(array, dtype=np.dtype(DTYPES[dtype]).newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        data.append(raw)
        offset += len(raw)
    text = compact(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(data)


# ----------------------------------------------------------------------------- label columns


def json_value(v):
    """(kind, dtype, ndarray) of one JSON label value (docs/format.md 1.4)."""
    if isinstance(v, str):
        return "string", "U8", np.frombuffer(v.encode(), np.uint8)
    a = np.array(v)
    if a.dtype == np.bool_:
        return "numeric", "BOOL", a
    if a.dtype.kind == "i":
        return "numeric", "I64", a.astype(np.int64)
    return "numeric", "F64", a.astype(np.float64)


class Columns:
    """Label fields in the order of their first appearance, with their per-sample values."""

    PROMOTE = ["BOOL", "I64", "F64"]

    def __init__(self):
        self.fields = {}  # name -> dict(kind, dtype, source, values[])

    def add(self, name, source, kind, dtype, value):
        f = self.fields.setdefault(name, {"kind": kind, "dtype": dtype, "source": source,
                                          "values": []})
        if kind == "numeric" and f["dtype"] != dtype:
            if {f["dtype"], dtype} <= set(self.PROMOTE):
                f["dtype"] = max(f["dtype"], dtype, key=self.PROMOTE.index)
            else:
                raise ValueError(f"{name}: {f['dtype']} and {dtype} are not promoted here")
        f["values"].append(value)

    def schema_and_tensors(self):
        schema, tensors = {}, {}
        for name, f in self.fields.items():
            vals = [np.asarray(v, DTYPES[f["dtype"]]) for v in f["values"]]
            inner = {v.shape[1:] for v in vals}
            ragged = f["kind"] != "numeric" or len({v.shape[:1] for v in vals}) > 1
            if len(inner) != 1 or len({v.ndim for v in vals}) != 1:
                raise ValueError(f"{name}: values of different inner shapes")
            shape = list(vals[0].shape)
            if ragged:
                shape[0] = -1
                offsets = np.cumsum([0] + [len(v) for v in vals]).astype(np.int64)
                values = np.concatenate(vals).reshape((-1,) + vals[0].shape[1:])
                tensors[name + ".values"] = (f["dtype"], values)
                tensors[name + ".offsets"] = ("I64", offsets)
            else:
                tensors[name] = (f["dtype"], np.stack(vals))
            schema[name] = {"kind": f["kind"], "dtype": f["dtype"], "shape": shape,
                            "ragged": ragged, "source": f["source"]}
        return schema, tensors


# ----------------------------------------------------------------------------- datasets


def crc_hex(data):
    return "%08x" % (zlib.crc32(data) & 0xFFFFFFFF)


def sealed_manifest(manifest):
    """manifest.json's text: indented by 2, a final newline, and the last member
    "manifest_crc32" the CRC-32 of the text in which its own 8 digits read 00000000."""
    manifest = dict(manifest, manifest_crc32="00000000")
    text = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    field = '"manifest_crc32": "'
    at = text.rindex(field) + len(field)
    text = text[:at] + crc_hex(text.encode()) + text[at + 8:]
    return text.encode()


def write_dataset(out, samples, *, shard_size, blob_kinds, options, command_line, input_name,
                  extra_meta=None, archives=None, geometry=None):
    """Writes the dataset `out` of `samples`: dicts with "key", "blobs" (a list of (member
    extension, bytes, width, height), one per blob kind, the image first), "labels" (a list of
    (field, source, kind, dtype, value)), "inputs" (the members of the input archive the
    manifest describes: (extension, bytes)) and optionally "ignored" (extension, reason) of the
    input members a conversion ignores. `geometry`: {field: geometry object} added to those
    fields' schema entries. Returns {file name: bytes} of what it wrote."""
    files, shard_names = {}, []
    blob_cols = [{c: [] for c in ("shard", "offset", "size", "crc32", "width", "height")}
                 for _ in blob_kinds]
    columns, keys = Columns(), []
    tar, archive, members, ignored = None, Tar(), 0, []
    image_bytes = 0

    def close_shard():
        files[shard_names[-1]] = tar.finish()

    for s in samples:
        key = s["key"]
        keys.append(key.encode())
        for ext, data in s["inputs"]:
            archive.add(f"{key}.{ext}", data)
            members += 1
        for ext, reason in s.get("ignored", []):
            ignored.append({"input": input_name, "member": f"{key}.{ext}", "reason": reason})
        if blob_kinds:
            need = sum(Tar.bytes_if_added(len(b[1])) for b in s["blobs"])
            if tar is not None and len(tar.data) > 0 and len(tar.data) + need + 1024 > shard_size:
                close_shard()
                tar = None
            if tar is None:
                shard_names.append("shard-%06d.tar" % len(shard_names))
                tar = Tar()
            for cols, (ext, data, w, h) in zip(blob_cols, s["blobs"]):
                cols["offset"].append(tar.add(f"{key}.{ext}", data))
                cols["shard"].append(len(shard_names) - 1)
                cols["size"].append(len(data))
                cols["crc32"].append(zlib.crc32(data) & 0xFFFFFFFF)
                cols["width"].append(w)
                cols["height"].append(h)
                image_bytes += len(data)
        for name, source, kind, dtype, value in s["labels"]:
            columns.add(name, source, kind, dtype, value)
    if tar is not None:
        close_shard()

    n = len(samples)
    schema, tensors = columns.schema_and_tensors()
    for name, g in (geometry or {}).items():  # the declared kinds (format.md: "geometry")
        schema[name]["geometry"] = g
    tensors["__key__.values"] = ("U8", np.frombuffer(b"".join(keys), np.uint8))
    tensors["__key__.offsets"] = ("I64", np.cumsum([0] + [len(k) for k in keys]).astype(np.int64))
    if blob_kinds:
        tensors["__affine__"] = ("F64", np.tile(np.array([[1.0, 0, 0], [0, 1.0, 0]]), (n, 1, 1)))
        types = {"shard": "I32", "offset": "I64", "size": "I64", "crc32": "U32", "width": "I32",
                 "height": "I32"}
        for kind, cols in zip(blob_kinds, blob_cols):
            for c, t in types.items():
                tensors[f"{kind}.{c}"] = (t, np.array(cols[c], DTYPES[t]))
    meta = {"format": "tarmac/1", "num_samples": str(n), "schema": compact(schema),
            "shards": compact(shard_names), "blobs": compact(blob_kinds),
            "tool": "tarmac " + TOOL_VERSION, **(extra_meta or {})}
    labels = safetensors(tensors, meta)
    files["labels.safetensors"] = labels

    archive_bytes = archive.finish()
    manifest = {
        "tool": {"name": "tarmac", "version": TOOL_VERSION},
        "command_line": command_line,
        "options": options,
        "inputs": [{"path": input_name, "size": len(archive_bytes), "crc32": crc_hex(archive_bytes),
                    "members": members}],
        "counts": {"samples": n, "skipped_samples": 0, "skipped_members": 0,
                   "ignored_members": len(ignored),
                   "duplicates": 0, "input_errors": 0, "shards": len(shard_names),
                   "image_bytes": image_bytes},
        "shards": [{"name": name, "size": len(files[name]), "crc32": crc_hex(files[name])}
                   for name in shard_names],
        "annotation": {"name": "labels.safetensors", "size": len(labels)},
        "labels_crc32": crc_hex(labels),
        "schema": schema,
        "skipped": [],
        "ignored": ignored,
        "duplicates": [],
    }
    files["manifest.json"] = sealed_manifest(manifest)

    os.makedirs(out, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    if archives:
        os.makedirs(os.path.dirname(os.path.join(archives, input_name)), exist_ok=True)
        with open(os.path.join(archives, input_name), "wb") as f:
            f.write(archive_bytes)
    return files


# The resolved options `tarmac convert` records for read12's command line (on two cores).
READ12_OPTIONS = {
    "inputs": "read12.tar", "--output": "read12", "--checkpoint-every": "30", "--crop": "none",
    "--bucket-step": "64", "--bucket-max-ratio": "4", "--dense": "depth.png", "--pad-value": "0",
    "--format": "png", "--quality": "95", "--image": "jpg jpeg png webp bmp tif tiff",
    "--max-pixels": "268435456", "--max-member-size": "1G", "--group-window": "64M",
    "--shard-size": "8K", "--on-error": "fail", "--on-duplicate": "error", "threads": 2,
}


def read12(out, archives):
    samples = []
    for k in range(12):
        lab = read12_labels(k)
        labels = [(name, "json", *json_value(v)) for name, v in lab.items()]
        labels.append(("cls", "cls", "numeric", "I64", np.int64(k % 5)))
        image, depth = png(expected_pixel(k)), png(expected_depth(k))
        samples.append({
            "key": f"s/{k:04d}",
            "blobs": [("png", image, 32, 24), ("depth.png", depth, 32, 24)],
            "labels": labels,
            "inputs": [("png", image), ("json", json.dumps(lab).encode()), ("depth.png", depth),
                       ("cls", str(k % 5).encode())],
        })
    cmd = "tarmac convert read12.tar -o read12 --format png --dense depth.png --shard-size 8K".split()
    return write_dataset(out, samples, shard_size=8 * 1024, blob_kinds=["__image__", "__depth__"],
                         options=read12_options(), command_line=cmd, input_name="read12.tar",
                         archives=archives)


def part(out, name, n, prefix, float_scores, images, archives):
    samples = []
    for i in range(n):
        lab = part_labels(i, float_scores)
        img = part_pixel(i)
        image = png(img)
        samples.append({
            "key": f"{prefix}/{i:03d}",
            "blobs": [("png", image, img.shape[1], img.shape[0])] if images else [],
            "labels": [(k, "json", *json_value(v)) for k, v in lab.items()],
            "inputs": [("png", image), ("json", json.dumps(lab).encode())],
            # --no-images: the PNG is left out, and listed as ignored
            "ignored": [] if images else [
                ("png", "extension '.png' is neither an image, a dense map nor a label")],
        })
    # tests/check/make_dataset.h called the library's convert(): no command line, no options.
    return write_dataset(out, samples, shard_size=4096,
                         blob_kinds=["__image__"] if images else [], options={},
                         command_line=[], input_name=f"parts/{name}.tar", archives=archives)


def raw3(out, archives):
    samples = []
    for k in range(3):
        img = raw_pixel(k)
        samples.append({
            "key": f"r/{k}",
            "blobs": [("rgb", img.tobytes(), img.shape[1], img.shape[0])],
            "labels": [("v", "v.npy", "numeric", "F32", raw_v(k))],
            "inputs": [("png", png(img)), ("v.npy", npy(raw_v(k)))],
        })
    options = read12_options(**{"inputs": "raw3.tar", "--output": "raw3", "--format": "raw",
                                "--dense": None, "--shard-size": "1M"})
    cmd = "tarmac convert raw3.tar -o raw3 --format raw --shard-size 1M".split()
    return write_dataset(out, samples, shard_size=1 << 20, blob_kinds=["__image__"],
                         options=options, command_line=cmd, input_name="raw3.tar",
                         extra_meta={"blob_encodings": compact({"__image__": "rgb"})},
                         archives=archives)


SHEET2 = [("a", 30, (10, 20, 30), [5, 4, 10, 8], [[22, 15]]),
          ("b", 10, (200, 100, 50), [100, 100, 1, 1], [[-50, -50]])]


def sheet2(out, archives):
    samples = []
    for key, w, rgb, bb, kp in SHEET2:
        img = np.empty((20, w, 3), np.uint8)
        img[...] = rgb
        image = png(img)
        lab = {"bb": bb, "kp": kp}
        samples.append({
            "key": key,
            "blobs": [("png", image, w, 20)],
            "labels": [("bb", "json", "numeric", "F32", np.array(bb, np.float32)),
                       ("kp", "json", "numeric", "F32", np.array(kp, np.float32))],
            "inputs": [("png", image), ("json", json.dumps(lab).encode())],
        })
    options = read12_options(**{"inputs": "sheet2.tar", "--output": "sheet2", "--dense": None,
                                "--shard-size": "1G"})
    cmd = "tarmac convert sheet2.tar -o sheet2 --format png".split()
    return write_dataset(out, samples, shard_size=1 << 30, blob_kinds=["__image__"],
                         options=options, command_line=cmd, input_name="sheet2.tar",
                         archives=archives)


def column_file(name, outputs, dtype, labels_crc, uniform):
    """A merged derived column (format.md 9) of per-sample `outputs`."""
    shapes = np.array([o.shape for o in outputs], dtype=np.int64).reshape(len(outputs), -1)
    sizes = [int(np.prod(o.shape)) for o in outputs]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    flat = np.concatenate([o.reshape(-1) for o in outputs]).astype(DTYPES[dtype])
    values = flat.reshape((len(outputs),) + outputs[0].shape) if uniform else flat
    le = lambda a: np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()  # noqa: E731
    meta = {"format": "tarmac-column/1", "column": name, "num_samples": str(len(outputs)),
            "labels_crc32": labels_crc, "world": "2", "fn": "fixture:encode",
            "tool": "make_datasets.py", "merged_by": "make_datasets.py",
            "values_crc32": crc_hex(le(values)), "offsets_crc32": crc_hex(le(offsets)),
            "shapes_crc32": crc_hex(le(shapes))}
    return safetensors({"values": (dtype, values), "offsets": ("I64", offsets), "shapes": ("I64", shapes)},
                       meta)


def read12_columns(out, read12_dir):
    with open(os.path.join(read12_dir, "labels.safetensors"), "rb") as f:
        labels_crc = crc_hex(f.read())
    emb = [np.array([k, 2 * k, -k], dtype=np.float32) for k in range(12)]
    lat = [(100 * k + np.arange(2 * (1 + k % 3))).astype(np.uint16).reshape(2, 1 + k % 3) for k in range(12)]
    os.makedirs(out, exist_ok=True)
    for name, data in (("emb", column_file("emb", emb, "F32", labels_crc, True)),
                       ("lat", column_file("lat", lat, "U16", labels_crc, False)),
                       ("old", column_file("old", emb, "F32", "0badc0de", True))):
        with open(os.path.join(out, name + ".safetensors"), "wb") as f:
            f.write(data)


def read12_options(**changes):
    o = dict(READ12_OPTIONS)
    for k, v in changes.items():
        if v is None:
            o.pop(k, None)
        else:
            o[k] = v
    return o


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--archives", help="also write the input archives the manifests describe")
    a = ap.parse_args()
    read12(os.path.join(a.out, "read12"), a.archives)
    read12_columns(os.path.join(a.out, "read12_columns"), os.path.join(a.out, "read12"))
    for name, n, prefix, float_scores, images in PARTS:
        part(os.path.join(a.out, "parts", name), name, n, prefix, float_scores, images, a.archives)
    raw3(os.path.join(a.out, "raw3"), a.archives)
    sheet2(os.path.join(a.out, "sheet2"), a.archives)


if __name__ == "__main__":
    sys.exit(main())
