#!/usr/bin/python3
"""The HumanData npz table reader and the restricted unpickler, checked against numpy and
Python's pickle module. Every pickle and npz here is written by Python (pickle.dumps, np.save,
np.savez_compressed); table_dump ($TABLE_DUMP) prints what tarmac reads, as JSON.
"""
import json
import os
import pickle
import pickletools
import struct
import subprocess
import sys
import tempfile
import unittest
import zipfile

import numpy as np

TABLE_DUMP = os.environ.get("TABLE_DUMP", os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "tests", "table", "table_dump"))
N = 12


def dump(mode, path, *extra):
    r = subprocess.run([TABLE_DUMP, mode, path, *extra], capture_output=True, text=True)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else None), r.stderr


def expected(o):
    """What table_dump prints for a Python value, computed from the value itself."""
    if isinstance(o, (np.ndarray, np.generic)):  # before float: np.float64 is a float
        a = np.asarray(o)
        if a.dtype == object:
            return {"ndarray": "|O", "shape": list(a.shape),
                    "items": [expected(x) for x in a.ravel(order="C")]}
        le = a.dtype.newbyteorder("<")
        descr = le.str if a.dtype.kind not in "bS" else "|" + le.str[1:]
        return {"ndarray": descr, "shape": list(a.shape),
                "hex": np.ascontiguousarray(a.astype(le)).tobytes().hex()}
    if o is None or isinstance(o, (bool, str)):
        return o
    if isinstance(o, int):
        return o
    if isinstance(o, float):
        return {"float": struct.pack("<d", o).hex()}
    if isinstance(o, bytes):
        return {"bytes": o.hex()}
    if isinstance(o, list):
        return {"list": [expected(x) for x in o]}
    if isinstance(o, tuple):
        return {"tuple": [expected(x) for x in o]}
    if isinstance(o, dict):
        return {"dict": [[expected(k), expected(v)] for k, v in o.items()]}
    raise TypeError(type(o))


def rich_value():
    rng = np.random.default_rng(7)
    return {
        "f32": rng.standard_normal((2, 3)).astype(np.float32),
        "f64": rng.standard_normal(4),
        "f16": np.array([0.5, -2.0], dtype=np.float16),
        "ints": {k: np.arange(-3, 3).astype(k) for k in ("i1", "i2", "i4", "i8")},
        "uints": {k: np.arange(6).astype(k).reshape(2, 3) for k in ("u1", "u2", "u4", "u8")},
        "bool": np.array([True, False, True]),
        "unicode": np.array(["male", "female", "é☃𝄞"]),
        "bytes_array": np.array([b"ab", b"c"]),
        "fortran": np.asfortranarray(np.arange(24, dtype=np.float64).reshape(2, 3, 4)),
        "big_endian": np.arange(6, dtype=">f4").reshape(3, 2),
        "big_endian_u": np.array(["xy", "z"], dtype=">U2"),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "scalars": [np.float32(1.25), np.int64(-7), np.bool_(True), np.float64(2.5)],
        "strings": ["a", "bb", "a", "ccc"],
        "nested": {"deeper": {"x": (1, 2.5, None, True, False), "list": [[1, 2], [3]]}},
        "numbers": [0, 1, -1, 255, 256, 65535, -65536, 2**31, -2**31 - 1, 2**62, -2**63],
        "bytes": b"\x00\xff\x80abc",
        "object_array": np.array([{"k": 1}, "two", 3.0], dtype=object),
    }


class Pickles(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_protocols_2_to_5_match_python(self):
        value = rich_value()
        for protocol in (2, 3, 4, 5):
            with self.subTest(protocol=protocol):
                path = self.write(f"p{protocol}.pkl", pickle.dumps(value, protocol=protocol))
                rc, got, err = dump("pickle", path)
                self.assertEqual(rc, 0, err)
                self.assertEqual(got, expected(value))

    def test_object_array_as_np_save_writes_it(self):
        # np.save of a 0-d object array: the bytes after the .npy header are the pickle.
        value = np.array(rich_value(), dtype=object)
        path = os.path.join(self.dir, "o.npy")
        np.save(path, value, allow_pickle=True)
        with open(path, "rb") as f:
            data = f.read()
        header_len = struct.unpack("<H", data[8:10])[0]
        rc, got, err = dump("pickle", self.write("o.pkl", data[10 + header_len:]))
        self.assertEqual(rc, 0, err)
        self.assertEqual(got, expected(value))

    def test_wider_than_64_bit_int_is_refused(self):
        rc, _, err = dump("pickle", self.write("big.pkl", pickle.dumps(2**64, protocol=2)))
        self.assertEqual(rc, 1)
        self.assertIn("wider than 64 bits", err)

    def test_structured_dtype_is_refused(self):
        a = np.zeros(2, dtype=[("x", "<f4"), ("y", "<i4")])
        rc, _, err = dump("pickle", self.write("s.pkl", pickle.dumps(a, protocol=3)))
        self.assertEqual(rc, 1)
        self.assertIn("structured", err)


class Reduce:
    """Pickles as a call of `fn(*args)`: what a hostile pickle does."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def first_global(data):
    """The first global a pickle names, as pickletools reads it ("posix.system"; protocol 2
    writes Python 2 names: "__builtin__.eval")."""
    strings = []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            return arg.replace(" ", ".")
        if op.name == "STACK_GLOBAL":
            return strings[-2] + "." + strings[-1]
        if isinstance(arg, str):
            strings.append(arg)
    raise ValueError("no global")


def global_pickle(module, name, protocol=2):
    """A pickle that names module.name, by GLOBAL (protocol 2) or STACK_GLOBAL (4)."""
    if protocol < 4:
        body = b"c" + module.encode() + b"\n" + name.encode() + b"\n"
    else:
        body = (b"\x8c" + bytes([len(module)]) + module.encode() + b"\x8c" +
                bytes([len(name)]) + name.encode() + b"\x93")
    return bytes([0x80, protocol]) + body + b")R."


class Security(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.marker = os.path.join(self.dir, "MARKER")

    def tearDown(self):
        self.tmp.cleanup()

    def hostile(self):
        import subprocess as sp
        touch = "touch " + self.marker
        return [
            ("posix.system", Reduce(os.system, touch)),  # os.system pickles as posix.system
            ("builtins.eval", Reduce(eval, f"__import__('os').system({touch!r})")),
            ("subprocess.Popen", Reduce(sp.Popen, ["touch", self.marker])),
            ("numpy.load", Reduce(np.load, self.marker)),
        ]

    def assert_refused(self, mode, path, name):
        rc, _, err = dump(mode, path)
        self.assertEqual(rc, 1, err)
        self.assertIn(f"'{name}'", err)
        self.assertIn("refused", err)
        self.assertFalse(os.path.exists(self.marker), "the pickle ran")

    def test_the_hostile_pickle_really_runs_in_python(self):
        # The oracle: Python's own unpickler runs it (in a child), so the refusal below is real.
        data = pickle.dumps(self.hostile()[0][1], protocol=3)
        subprocess.run([sys.executable, "-c", "import pickle,sys; pickle.loads(sys.stdin.buffer.read())"],
                       input=data, check=True)
        self.assertTrue(os.path.exists(self.marker))

    def test_hostile_pickles_are_refused_alone(self):
        for name, obj in self.hostile():
            for protocol in (2, 3, 4, 5):
                with self.subTest(name=name, protocol=protocol):
                    path = os.path.join(self.dir, "evil.pkl")
                    data = pickle.dumps(obj, protocol=protocol)
                    with open(path, "wb") as f:
                        f.write(data)
                    named = first_global(data)
                    self.assertEqual(named.split(".")[-1], name.split(".")[-1])
                    self.assert_refused("pickle", path, named)
        for module, name in (("os", "system"), ("numpy", "load"), ("subprocess", "Popen")):
            for protocol in (2, 4):
                path = os.path.join(self.dir, "global.pkl")
                with open(path, "wb") as f:
                    f.write(global_pickle(module, name, protocol))
                self.assert_refused("pickle", path, f"{module}.{name}")

    def test_hostile_pickles_are_refused_inside_an_npz_member(self):
        for name, obj in self.hostile():
            with self.subTest(name=name):
                path = os.path.join(self.dir, "evil.npz")
                np.savez_compressed(path, image_path=np.array(["a.jpg"]),
                                    meta=np.array({"gender": [obj]}, dtype=object))
                rc, _, err = dump("npz", path)
                self.assertEqual(rc, 1, err)
                self.assertIn(path, err)
                self.assertIn("'meta'", err)
                self.assertIn(f"'{name}'", err)
                self.assertFalse(os.path.exists(self.marker), "the pickle ran")


def humandata(rng, smplx_dtype=np.float32):
    images = np.array([f"images/{c}.jpg" for c in "abc" for _ in range(N // 3)])
    smplx = {
        "body_pose": rng.standard_normal((N, 21, 3)).astype(smplx_dtype),
        "global_orient": rng.standard_normal((N, 3)).astype(smplx_dtype),
        "betas": rng.standard_normal((N, 10)).astype(np.float64),
        "transl": rng.standard_normal((N, 3)).astype(smplx_dtype),
        "left_hand_pose": rng.standard_normal((N, 15, 3)).astype(smplx_dtype),
        "right_hand_pose": rng.standard_normal((N, 15, 3)).astype(smplx_dtype),
        "expression": rng.standard_normal((N, 10)).astype(smplx_dtype),
        "jaw_pose": rng.standard_normal((N, 3)).astype(smplx_dtype),
        "leye_pose": rng.standard_normal((N, 3)).astype(smplx_dtype),
        "reye_pose": rng.standard_normal((N, 3)).astype(smplx_dtype),
    }
    meta = {
        "gender": [["male", "female", "neutral"][i % 3] for i in range(N)],
        "age": np.array([["31-50", "kid", "18-30"][i % 3] for i in range(N)]),
        "kid": np.array([i % 4 == 1 for i in range(N)]),
        "occlusion": [float(x) for x in rng.uniform(0, 1, N)],
        "ethnicity": [["white", "asian", "black", "hispanic"][i % 4] for i in range(N)],
    }
    members = {
        "image_path": images,
        "bbox_xywh": rng.uniform(0, 500, (N, 5)),
        "keypoints2d": rng.uniform(0, 500, (N, 127, 3)),
        "keypoints3d": rng.standard_normal((N, 127, 4)),
        "keypoints2d_mask": (rng.uniform(0, 1, 190) > 0.3).astype(np.uint8),
        "keypoints3d_mask": (rng.uniform(0, 1, 190) > 0.3).astype(np.uint8),
        "config": np.array("agora"),
        "__data_len__": np.array(N),
        "__key_strict__": np.array(False),
        "__keypoints_compressed__": np.array(False),
        "smplx": np.array(smplx, dtype=object),
        "meta": np.array(meta, dtype=object),
    }
    return members, smplx, meta


class HumanData(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "humandata.npz")

    def tearDown(self):
        self.tmp.cleanup()

    def check_numeric(self, col, a):
        names = {"float32": "F32", "float64": "F64", "bool": "BOOL", "int64": "I64",
                 "uint8": "U8"}
        self.assertTrue(col["uniform"], col["name"])
        self.assertEqual(col["dtype"], names[a.dtype.name], col["name"])
        self.assertEqual(col["row_shape"], list(a.shape[1:]), col["name"])
        self.assertEqual(col["hex"], np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"))
                         .tobytes().hex(), col["name"])

    def test_every_column_of_every_row(self):
        members, smplx, meta = humandata(np.random.default_rng(1))
        np.savez_compressed(self.path, **members)
        # numpy writes each member with a ZIP64 extra field (id 0x0001); the reader must take it.
        with zipfile.ZipFile(self.path) as z:
            for info in z.infolist():
                self.assertEqual(info.compress_type, zipfile.ZIP_DEFLATED)
        with open(self.path, "rb") as f:
            raw = f.read()
        local = raw[:30 + struct.unpack("<H", raw[26:28])[0] + struct.unpack("<H", raw[28:30])[0]]
        self.assertEqual(struct.unpack("<H", local[30 + struct.unpack("<H", raw[26:28])[0]:][:2])[0], 1)

        rc, t, err = dump("npz", self.path)
        self.assertEqual(rc, 0, err)
        self.assertEqual(t["rows"], N)
        self.assertEqual(t["member_columns"], ["image_path"])
        self.assertEqual(t["member_paths"], [members["image_path"].tolist()])
        self.assertEqual(t["bytes"], len(raw))
        import zlib
        self.assertEqual(t["crc32"], zlib.crc32(raw))

        cols = {c["name"]: c for c in t["columns"]}
        expect_names = ["bbox_xywh", "keypoints2d", "keypoints3d"] + \
            [f"smplx.{k}" for k in smplx] + [f"meta.{k}" for k in meta]
        self.assertEqual(sorted(cols), sorted(expect_names))
        for name in ("bbox_xywh", "keypoints2d", "keypoints3d"):
            self.check_numeric(cols[name], members[name])
        for k, a in smplx.items():
            self.check_numeric(cols[f"smplx.{k}"], a)
        self.check_numeric(cols["meta.kid"], meta["kid"])
        self.check_numeric(cols["meta.occlusion"], np.array(meta["occlusion"], dtype=np.float64))
        for k in ("gender", "age", "ethnicity"):
            self.assertFalse(cols[f"meta.{k}"]["uniform"])
            self.assertEqual(cols[f"meta.{k}"]["values"],
                             [{"string": str(s)} for s in meta[k]], k)

        md = t["metadata"]
        self.assertEqual(md["config"], "agora")
        self.assertEqual(md["__data_len__"], N)
        self.assertIs(md["__key_strict__"], False)
        self.assertIs(md["__keypoints_compressed__"], False)
        for k in ("keypoints2d_mask", "keypoints3d_mask"):
            self.assertEqual(md[k], members[k].tolist())
            self.assertIn(f"'{k}': shape (190,), not N = {N} rows long (kept in the annotation file's table metadata)",
                          t["ignored"])
        self.assertEqual(len(t["ignored"]), 2)

    def test_rows_from_the_image_column_without_data_len(self):
        members, _, _ = humandata(np.random.default_rng(2), smplx_dtype=np.float64)
        del members["__data_len__"]
        members["frames"] = members.pop("image_path")
        np.savez_compressed(self.path, **members)
        rc, _, err = dump("npz", self.path)
        self.assertEqual(rc, 1)
        self.assertIn("'image_path'", err)
        self.assertIn("--table-image", err)
        rc, t, err = dump("npz", self.path, "frames")
        self.assertEqual(rc, 0, err)
        self.assertEqual(t["rows"], N)
        self.assertEqual(t["member_columns"], ["frames"])
        self.assertEqual(t["member_paths"], [members["frames"].tolist()])
        self.assertEqual(len(t["columns"]), 3 + 10 + 5)

    def test_data_len_that_disagrees_is_refused(self):
        members, _, _ = humandata(np.random.default_rng(3))
        members["__data_len__"] = np.array(N + 1)
        np.savez_compressed(self.path, **members)
        rc, _, err = dump("npz", self.path)
        self.assertEqual(rc, 1)
        self.assertIn("'__data_len__' says 13 rows", err)

    def test_a_name_given_twice_is_refused(self):
        members, smplx, _ = humandata(np.random.default_rng(5))
        members["smplx.betas"] = smplx["betas"]
        np.savez_compressed(self.path, **members)
        rc, _, err = dump("npz", self.path)
        self.assertEqual(rc, 1)
        self.assertIn("'smplx.betas' is given twice", err)

    def test_damaged_pickle_names_file_and_member(self):
        members, _, _ = humandata(np.random.default_rng(4))
        np.savez_compressed(self.path, **members)
        with zipfile.ZipFile(self.path) as z:
            smplx = z.read("smplx.npy")
        bad = os.path.join(self.tmp.name, "bad.npz")
        with zipfile.ZipFile(self.path) as src, zipfile.ZipFile(bad, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in src.infolist():
                data = src.read(info)
                dst.writestr(info.filename, data[:len(data) - 40] if info.filename == "smplx.npy" else data)
        self.assertGreater(len(smplx), 40)
        rc, _, err = dump("npz", bad)
        self.assertEqual(rc, 1)
        self.assertIn(bad, err)
        self.assertIn("'smplx'", err)
        self.assertIn("truncated", err)


if __name__ == "__main__":
    unittest.main()
