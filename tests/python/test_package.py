"""The Python package's structure (issue #25): every public name where docs and scripts use it,
type hints that resolve, errors by the C API's codes (lib/read/c_api.h read as text), handles
closed by weakref.finalize (seen in /proc/self/maps), the library's C API version checked at
load (against real shared libraries built here with gcc), and the format's names spelled in one
module (checked against docs/format.md). Needs TARMAC_LIB, PYTHONPATH=python/ and TARMAC."""
import ast
import gc
import glob
import importlib
import importlib.util
import inspect
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import typing
import unittest
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PACKAGE = os.path.join(ROOT, "python", "tarmac")
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import st_reader  # noqa: E402

import tarmac  # noqa: E402
import tarmac.derive  # noqa: E402
from tarmac import _format, _library  # noqa: E402

TARMAC = os.environ.get("TARMAC", "tarmac")


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def c_enum(names):
    """{NAME: value} of enum constants in lib/read/c_api.h."""
    header = read("lib", "read", "c_api.h")
    out = {}
    for name in names:
        m = re.search(r"\b%s\s*=\s*(\d+)" % name, header)
        assert m, name
        out[name] = int(m.group(1))
    return out


def convert(tmp, name):
    src = os.path.join(tmp, name + ".tar")
    subprocess.run([sys.executable, os.path.join(HERE, "..", "read", "make_fixture.py"), src, "--samples", "6"],
                   check=True)
    out = os.path.join(tmp, name)
    subprocess.run([TARMAC, "convert", "-q", src, "-o", out, "--format", "jpg"], check=True,
                   stdout=subprocess.DEVNULL)
    return out


def mapped(path):
    """Whether this process maps the file at `path` (/proc/self/maps names mapped files)."""
    path = os.path.realpath(path)
    with open("/proc/self/maps") as f:
        return any(line.rstrip("\n").endswith(" " + path) for line in f)


def string_literals(source):
    """The string constants of a module's code, without its docstrings: [(value, line)]."""
    tree = ast.parse(source)
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [(n.value, n.lineno) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


class PublicNamesTest(unittest.TestCase):
    def test_every_name_docs_and_scripts_use_is_importable(self):
        used = set()
        for pattern in ("docs/*.md", "README.md", "examples/*.py", "scripts/**/*.py", "scripts/**/*.sh",
                        "tests/**/*.py"):
            for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
                with open(path, encoding="utf-8") as f:
                    used |= set(re.findall(r"(?<![\w/.-])tarmac\.([A-Za-z_]\w*)\b(?!\.(?:pc|so|h)\b)", f.read()))
        used -= {"pc", "json", "safetensors"}  # file names (tarmac.pc), not attributes
        self.assertLessEqual({"Dataset", "Augment", "indices", "bucket_batches", "TarmacError", "library",
                              "derive", "torch"}, used)
        for name in sorted(used):
            with self.subTest(name=name):
                if name == "torch" and importlib.util.find_spec("torch") is None:
                    continue  # tarmac.torch needs torch, which is optional
                if not hasattr(tarmac, name):
                    importlib.import_module("tarmac." + name)  # a submodule: tarmac.derive

    def test_exports_are_their_modules_objects(self):
        self.assertIs(tarmac.Dataset, importlib.import_module("tarmac.dataset").Dataset)
        self.assertIs(tarmac.Augment, importlib.import_module("tarmac.augment").Augment)
        self.assertIs(tarmac.indices, importlib.import_module("tarmac.sampling").indices)
        self.assertIs(tarmac.bucket_batches, importlib.import_module("tarmac.sampling").bucket_batches)
        self.assertIs(tarmac.library.load_library, _library.load_library)
        self.assertIs(tarmac.TarmacError, importlib.import_module("tarmac.errors").TarmacError)
        for name in tarmac.__all__:
            self.assertTrue(hasattr(tarmac, name), name)

    def test_the_top_level_holds_the_dataset_augment_sampling_and_errors(self):
        errors = importlib.import_module("tarmac.errors")
        error_names = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, Exception)
                       and v.__module__ == errors.__name__}
        self.assertEqual(set(tarmac.__all__), {"Dataset", "Augment", "indices", "bucket_batches"} | error_names)
        for name in ("load_library", "add_cache_arguments", "cache_options", "parse_size"):
            self.assertNotIn(name, dir(tarmac))

    def test_names_moved_off_the_top_level_still_work_one_release_and_warn(self):
        for name, module in (("load_library", "tarmac.library"), ("add_cache_arguments", "tarmac.cache_flags"),
                             ("cache_options", "tarmac.cache_flags"), ("parse_size", "tarmac.cache_flags")):
            with self.subTest(name=name), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                old = getattr(tarmac, name)
                self.assertEqual([w.category for w in caught], [DeprecationWarning])
                self.assertIn(f"moved to {module}.{name}", str(caught[0].message))
                self.assertIs(old, getattr(importlib.import_module(module), name))
        self.assertEqual(tarmac.cache_flags.parse_size("1.5G"), 1610612736)  # 1.5 * 1024**3
        with self.assertRaises(AttributeError):
            getattr(tarmac, "no_such" + "_name")  # spelled so the used-names scan skips it

    def test_public_api_has_type_hints_that_resolve(self):
        self.assertTrue(os.path.isfile(os.path.join(PACKAGE, "py.typed")))
        functions = [tarmac.indices, tarmac.bucket_batches, tarmac.library.load_library, tarmac.derive.run,
                     tarmac.derive.main, tarmac.Augment.__init__, tarmac.Dataset.__init__]
        for cls in (tarmac.Dataset,):
            functions += [f for name, f in vars(cls).items() if inspect.isfunction(f) and not name.startswith("_")]
        functions += [tarmac.Dataset.metadata.fget]
        for f in functions:
            with self.subTest(function=f.__qualname__):
                hints = typing.get_type_hints(f)  # raises where a hint names nothing on this Python
                self.assertIn("return", hints)
                params = [p for p in inspect.signature(f).parameters if p not in ("self", "cls")]
                self.assertEqual([p for p in params if p not in hints], [])


class ErrorsTest(unittest.TestCase):
    CODES = {"TARMAC_E_INVALID": tarmac.ArgumentError, "TARMAC_E_RANGE": tarmac.RangeError,
             "TARMAC_E_IO": tarmac.DatasetIOError, "TARMAC_E_PARSE": tarmac.ParseError,
             "TARMAC_E_DATA": tarmac.DataError, "TARMAC_E_INTERNAL": tarmac.InternalError}

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-package-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.out = convert(cls.tmp, "ds")
        cls.codes = c_enum(cls.CODES)

    def test_one_subclass_per_c_code(self):
        for name, cls in self.CODES.items():
            with self.subTest(code=name):
                e = tarmac.errors.error_for_code(self.codes[name], "why")
                self.assertIs(type(e), cls)
                self.assertIsInstance(e, tarmac.TarmacError)
                self.assertEqual((e.code, str(e)), (self.codes[name], "why"))
        unknown = tarmac.errors.error_for_code(99, "a newer library's code")
        self.assertIs(type(unknown), tarmac.TarmacError)
        self.assertEqual(unknown.code, 99)

    def test_the_library_errors_arrive_as_their_subclass(self):
        with self.assertRaises(tarmac.DatasetIOError) as e:
            tarmac.Dataset(os.path.join(self.tmp, "nowhere"))
        self.assertEqual(e.exception.code, self.codes["TARMAC_E_IO"])
        self.assertIn("nowhere", str(e.exception))

        bad = os.path.join(self.tmp, "bad-header")
        shutil.copytree(self.out, bad)
        path = os.path.join(bad, _format.LABELS)
        with open(path, "r+b") as f:
            f.seek(8)
            f.write(b"[")  # the header's JSON object now starts as an array
        with self.assertRaises(tarmac.ParseError) as e:
            tarmac.Dataset(bad)
        self.assertEqual(e.exception.code, self.codes["TARMAC_E_PARSE"])

        ds = tarmac.Dataset(self.out)
        with self.assertRaises(tarmac.ArgumentError) as e:
            ds.value("no_such_field", 0)
        self.assertEqual(e.exception.code, self.codes["TARMAC_E_INVALID"])
        self.assertIsInstance(e.exception, ValueError)
        with self.assertRaises(tarmac.RangeError) as e:  # the library's own range check, under ds.key's
            data, size = _library.ctypes.c_void_p(), _library.ctypes.c_size_t()
            _library.check(ds._lib.tarmac_key(ds._ptr, len(ds), _library.ctypes.byref(data),
                                              _library.ctypes.byref(size)))
        self.assertEqual(e.exception.code, self.codes["TARMAC_E_RANGE"])
        self.assertIsInstance(e.exception, IndexError)

    def test_errors_pickle_with_their_class_code_and_attributes(self):
        for e in [tarmac.TarmacError(7, "plain"), tarmac.DataError("sample 3"), tarmac.LibraryVersionError("old"),
                  tarmac.derive.DeriveStopped(signal.SIGTERM, "stopped")]:
            with self.subTest(error=type(e).__name__):
                back = pickle.loads(pickle.dumps(e))
                self.assertIs(type(back), type(e))
                self.assertEqual((back.code, str(back), vars(back)), (e.code, str(e), vars(e)))
        self.assertEqual(pickle.loads(pickle.dumps(tarmac.derive.DeriveStopped(signal.SIGTERM, "x"))).exit_code,
                         128 + signal.SIGTERM)


class _FieldOfSample:
    """A torch map-style dataset reading an unknown field: ArgumentError in the worker."""

    def __init__(self, path):
        self.path = path

    def __len__(self):
        return 2

    def __getitem__(self, i):
        return tarmac.Dataset(self.path).value("no_such_field", i)


class WorkerErrorTest(unittest.TestCase):
    def test_a_loader_worker_error_arrives_as_its_class(self):
        try:
            import torch.utils.data
        except ImportError:
            self.skipTest("torch is optional")
        tmp = tempfile.mkdtemp(prefix="tarmac-worker-")
        self.addCleanup(shutil.rmtree, tmp, True)
        loader = torch.utils.data.DataLoader(_FieldOfSample(convert(tmp, "ds")), num_workers=1)
        with self.assertRaises(tarmac.ArgumentError) as e:
            next(iter(loader))
        self.assertEqual(e.exception.code, c_enum(["TARMAC_E_INVALID"])["TARMAC_E_INVALID"])
        self.assertIn("no_such_field", str(e.exception))


class HandleTest(unittest.TestCase):
    """A Dataset's maps are released by weakref.finalize once nothing refers to them."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-handle-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.base = convert(cls.tmp, "base")

    def copy(self, name):
        out = os.path.join(self.tmp, name)
        shutil.copytree(self.base, out)
        return out, os.path.join(out, _format.LABELS)

    def test_a_dropped_dataset_closes_its_handle(self):
        path, labels = self.copy("dropped")
        ds = tarmac.Dataset(path)
        self.assertTrue(mapped(labels))
        ds[0]  # the sample getters refer back to the dataset: a reference cycle
        ds.batch([0, 1])  # and a loader, which its finalizer frees before the dataset closes
        del ds
        gc.collect()
        self.assertFalse(mapped(labels))

    def test_an_array_keeps_the_maps_until_it_goes(self):
        path, labels = self.copy("viewed")
        ds = tarmac.Dataset(path)
        blob, want = ds.blob(2), bytes(ds.blob(2))
        ds.close()
        del ds
        gc.collect()
        self.assertTrue(mapped(labels))
        self.assertEqual(bytes(blob), want)
        del blob
        gc.collect()
        self.assertFalse(mapped(labels))

    def test_close_twice_is_safe(self):
        path, labels = self.copy("closed")
        with tarmac.Dataset(path) as ds:
            self.assertEqual(len(ds), 6)
        ds.close()
        ds.close()
        with self.assertRaisesRegex(ValueError, "closed"):
            ds.key(0)
        gc.collect()
        self.assertFalse(mapped(labels))


FAKE_OLD = """const char* tarmac_last_error(void) { return ""; }
"""
FAKE_VERSION = """int tarmac_api_version(void) { return %d; }
const char* tarmac_dtype_name(int c) {
  static const char* names[] = {%s};
  return c >= 0 && c < (int)(sizeof names / sizeof *names) ? names[c] : 0;
}
"""


class LibraryVersionTest(unittest.TestCase):
    """Stale libraries are real shared libraries built here, refused by name at load."""

    @classmethod
    def setUpClass(cls):
        if not shutil.which("gcc"):
            raise unittest.SkipTest("gcc is needed to build the stale libraries")
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-stale-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)

    def build(self, name, source):
        c, so = os.path.join(self.tmp, name + ".c"), os.path.join(self.tmp, name + ".so")
        with open(c, "w") as f:
            f.write(source)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", so, c], check=True)
        return so

    def load_in_a_process(self, lib):
        """What `import tarmac; tarmac.Dataset(...)` says with TARMAC_LIB=lib."""
        code = ("import tarmac\n"
                "try:\n"
                "    tarmac.Dataset('x')\n"
                "except tarmac.TarmacError as e:\n"
                "    print(type(e).__name__, e.code, e)\n")
        env = dict(os.environ, TARMAC_LIB=lib)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_the_package_declares_the_headers_version_and_the_library_has_it(self):
        header = read("lib", "read", "c_api.h")
        version = int(re.search(r"#define TARMAC_C_API_VERSION (\d+)", header).group(1))
        self.assertEqual(_library.C_API_VERSION, version)
        lib = tarmac.library.load_library()
        self.assertEqual(lib.tarmac_api_version(), version)

    def test_a_library_without_the_version_function_is_named(self):
        old = self.build("old", FAKE_OLD)
        out = self.load_in_a_process(old)
        self.assertTrue(out.startswith("LibraryVersionError None " + old), out)
        self.assertIn("no tarmac_api_version", out)
        self.assertIn("needs %d" % _library.C_API_VERSION, out)

    def test_a_library_of_another_version_is_named(self):
        names = ", ".join('"%s"' % n for n in _format.DTYPE_NAMES)
        other = self.build("other", FAKE_VERSION % (_library.C_API_VERSION + 1, names))
        out = self.load_in_a_process(other)
        self.assertTrue(out.startswith("LibraryVersionError None " + other), out)
        self.assertIn("has C API version %d" % (_library.C_API_VERSION + 1), out)
        self.assertIn("TARMAC_LIB", out)  # how to fix it

    def test_dtype_codes_other_than_the_formats_are_refused(self):
        swapped = list(_format.DTYPE_NAMES)
        swapped[9], swapped[10] = swapped[10], swapped[9]  # F16 and BF16
        lib = self.build("swapped", FAKE_VERSION % (_library.C_API_VERSION, ", ".join('"%s"' % n for n in swapped)))
        with self.assertRaisesRegex(tarmac.LibraryVersionError, re.escape(lib)):
            _library._check_version(_library.ctypes.CDLL(lib), lib)
        good = self.build("good", FAKE_VERSION % (_library.C_API_VERSION,
                                                  ", ".join('"%s"' % n for n in _format.DTYPE_NAMES)))
        _library._check_version(_library.ctypes.CDLL(good), good)  # the same names: accepted


class FormatNamesTest(unittest.TestCase):
    def test_names_match_docs_format_md_and_the_c_header(self):
        doc = read("docs", "format.md")
        listed = re.search(r"`D` is one of `([A-Z0-9 \n]+)`", doc).group(1).split()
        self.assertEqual(list(_format.DTYPE_NAMES), listed)
        header = read("lib", "read", "c_api.h")
        order = re.search(r"dtype codes follow the order\s+\*?\s*([A-Z0-9 ]+) \(0\.\.12\)", header).group(1).split()
        self.assertEqual(list(_format.DTYPE_NAMES), order)
        kinds = c_enum(["TARMAC_NUMERIC", "TARMAC_STRING", "TARMAC_JSON"])
        self.assertEqual([_format.KINDS.index(k.lower()) for k in ("numeric", "string", "json")],
                         [kinds["TARMAC_NUMERIC"], kinds["TARMAC_STRING"], kinds["TARMAC_JSON"]])
        for name in (_format.LABELS, _format.MANIFEST, _format.PART_FORMAT, _format.CHUNK_FORMAT):
            self.assertIn("`%s`" % name, doc.replace('"', "`"))
        self.assertIn(_format.COLUMN_NAME.pattern, doc)
        self.assertEqual(_format.part_chunk(1, 4, 0), "part-00001-of-00004.chunk-000000.safetensors")  # format.md 8
        self.assertEqual(_format.part_record(1, 4), "part-00001-of-00004.json")
        for key in _format.METADATA_KEYS:
            self.assertIn("| `%s` |" % key, doc)

    def test_no_other_module_spells_the_formats_names(self):
        names = {_format.LABELS, _format.MANIFEST, _format.COLUMNS, _format.PART_FORMAT, _format.CHUNK_FORMAT,
                 _format.IMAGE, _format.COLUMN_NAME.pattern, *_format.DTYPE_NAMES, *_format.KINDS}
        found = []
        for path in sorted(glob.glob(os.path.join(PACKAGE, "*.py"))):
            if os.path.basename(path) == "_format.py":
                continue
            with open(path, encoding="utf-8") as f:
                for value, line in string_literals(f.read()):
                    if value in names or value.startswith(_format.IMAGE + "."):
                        found.append("%s:%d %r" % (os.path.basename(path), line, value))
        self.assertEqual(found, [], "spell them as tarmac._format's constants")

    def test_the_safetensors_writer_reads_back_with_an_independent_parser(self):
        tensors = [("a", np.arange(6, dtype="<f8").reshape(2, 3), "F64"),
                   ("b", np.array([-1, 7], dtype="<i4"), "I32"),
                   ("c", np.array([True, False, True]), "BOOL")]
        with tempfile.NamedTemporaryFile(suffix=".safetensors") as f:
            f.write(_format.safetensors_bytes(tensors, {"format": "x/1"}))
            f.flush()
            got, meta = st_reader.load(f.name)
        self.assertEqual(meta, {"format": "x/1"})
        for name, a, _ in tensors:
            np.testing.assert_array_equal(got[name], a)
            self.assertEqual(got[name].dtype, a.dtype)
        for dtype in [np.bool_, np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64,
                      np.float16, np.float32, np.float64]:
            self.assertEqual(np.dtype(st_reader.DTYPES[_format.dtype_name(np.dtype(dtype))]), np.dtype(dtype))
        self.assertIsNone(_format.dtype_name(np.dtype(np.complex64)))


if __name__ == "__main__":
    unittest.main()
