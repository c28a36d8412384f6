"""Every error the tarmac package raises is a tarmac.TarmacError subclass that is also the builtin
exception it raised before (issue #36): `except tarmac.TarmacError` catches every refusal and an
older `except ValueError` / `IndexError` / `TypeError` / `OSError` still does. The package's
`raise` statements are read with ast (a bare builtin is refused), and representative bad calls
are made. Needs TARMAC_LIB, PYTHONPATH=python/ and TARMAC."""
import ast
import builtins
import glob
import importlib
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TARMAC = os.environ.get("TARMAC", "tarmac")

import tarmac  # noqa: E402
import tarmac.cache_flags  # noqa: E402
from tarmac import _format  # noqa: E402

try:
    import torch  # noqa: F401
    import tarmac.torch as tt
except ImportError:
    tt = None

PACKAGE = os.path.dirname(os.path.abspath(tarmac.__file__))

# Raises of another library's exception that are that library's protocol, not an error of ours
# reaching the caller: argparse turns ArgumentTypeError from a type= converter into its usage error.
# StopIteration ends an iterator (tarmac.torch.Loader's __next__): the protocol, not an error.
# A module __getattr__ raises AttributeError (PEP 562: hasattr and getattr with a default catch it).
ALLOWED = {("cache_flags", "argparse.ArgumentTypeError"), ("loader", "StopIteration"), ("__init__", "AttributeError")}


def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return inner and inner + "." + node.attr
    return None


def raises(path):
    """[(line, dotted name of what is raised)] of the module at `path`; None for a name that is
    not a dotted name (`raise self._bad(...)`, `raise e`: checked by the behaviour tests)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            out.append((node.lineno, _dotted(target)))
    return out


def dataset(tmp):
    src = os.path.join(tmp, "src.tar")
    subprocess.run([sys.executable, os.path.join(HERE, "..", "read", "make_fixture.py"), src, "--samples", "4"],
                   check=True)
    out = os.path.join(tmp, "ds")
    subprocess.run([TARMAC, "convert", "-q", src, "-o", out, "--format", "jpg"], check=True,
                   stdout=subprocess.DEVNULL)
    return out


class RaiseStatementsTest(unittest.TestCase):
    def test_no_module_raises_a_bare_builtin_exception(self):
        modules = sorted(glob.glob(os.path.join(PACKAGE, "*.py")))
        self.assertGreater(len(modules), 8)
        seen = 0
        for path in modules:
            name = os.path.splitext(os.path.basename(path))[0]
            module = importlib.import_module("tarmac" if name == "__init__" else "tarmac." + name)
            for line, raised in raises(path):
                if raised is None or (name, raised) in ALLOWED:
                    continue
                with self.subTest(module=name, line=line, raised=raised):
                    head, *rest = raised.split(".")
                    if head in ("self", "cls"):
                        continue
                    if not rest and hasattr(builtins, head) and not hasattr(module, head):
                        self.fail(f"tarmac/{name}.py:{line} raises the builtin {raised}; raise the "
                                  f"tarmac.errors subclass that is also a {raised}")
                    obj = getattr(module, head, None)
                    for attr in rest:
                        obj = getattr(obj, attr, None)
                    if isinstance(obj, type):
                        seen += 1
                        self.assertTrue(issubclass(obj, tarmac.TarmacError),
                                        f"tarmac/{name}.py:{line} raises {raised}, not a tarmac.TarmacError")
                    else:  # a local factory: `raise bad(reason)` returns a DataError
                        self.assertTrue(obj is None or callable(obj), f"{name}.py:{line}: {raised}")
        self.assertGreater(seen, 100)  # the walk found the package's raises

    def test_each_class_is_also_its_builtin_and_made_from_its_message(self):
        for cls, builtin in ((tarmac.ArgumentError, ValueError), (tarmac.WrongTypeError, TypeError),
                             (tarmac.WrongTypeError, ValueError), (tarmac.RangeError, IndexError),
                             (tarmac.FormatError, ValueError), (tarmac.FormatError, tarmac.ParseError),
                             (tarmac.LibraryNotFoundError, OSError)):
            with self.subTest(cls=cls.__name__, builtin=builtin.__name__):
                e = cls("why")  # how a DataLoader re-raises a worker's error
                self.assertIsInstance(e, builtin)
                self.assertIsInstance(e, tarmac.TarmacError)
                self.assertEqual(str(e), "why")
                back = pickle.loads(pickle.dumps(e))
                self.assertIs(type(back), cls)
                self.assertEqual((back.code, str(back)), (e.code, "why"))
        self.assertEqual(tarmac.WrongTypeError("x").code, tarmac.ArgumentError("x").code)
        self.assertEqual(tarmac.FormatError("x").code, tarmac.ParseError("x").code)
        self.assertIsNone(tarmac.LibraryNotFoundError("x").code)


class BadCallsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-errors-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.out = dataset(cls.tmp)

    def check(self, call, cls, builtin, text):
        with self.assertRaises(builtin) as e:
            call()
        self.assertIsInstance(e.exception, cls)
        self.assertIsInstance(e.exception, tarmac.TarmacError)
        self.assertIn(text, str(e.exception))

    def test_augment(self):
        A = tarmac.Augment
        self.check(lambda: A(size=(0, 8)), tarmac.ArgumentError, ValueError, "size must be")
        self.check(lambda: A(size=(8, 8), flip=2), tarmac.ArgumentError, ValueError, "flip must be <= 1.0")
        self.check(lambda: A(size=(8, 8), scale=(2, 1)), tarmac.ArgumentError, ValueError, "min <= max")
        self.check(lambda: A(size=(8, 8), flip_pairs=[(1, 1)]), tarmac.ArgumentError, ValueError, "itself")

    def test_dataset(self):
        self.check(lambda: tarmac.Dataset(self.out, cache_size=-1), tarmac.ArgumentError, ValueError, "cache_size")
        self.check(lambda: tarmac.Dataset("s3://bucket/x/"), tarmac.ArgumentError, ValueError, "cache=")
        ds = tarmac.Dataset(self.out)
        n = len(ds)
        self.check(lambda: ds[n], tarmac.RangeError, IndexError, f"sample index {n} out of range")
        self.check(lambda: ds.key(-n - 1), tarmac.RangeError, IndexError, "out of range")
        self.check(lambda: ds.batch([0], augment="flip"), tarmac.ArgumentError, ValueError, "tarmac.Augment")
        self.check(lambda: ds.batch([0], dense=["depth"]), tarmac.ArgumentError, ValueError, "give augment=")
        self.check(lambda: tarmac.bucket_batches(ds, 0), tarmac.ArgumentError, ValueError, "batch_size >= 1")
        ds.close()
        self.check(lambda: ds.key(0), tarmac.ArgumentError, ValueError, "closed")

    def test_sizes_and_headers(self):
        self.check(lambda: tarmac.cache_flags.parse_size("12X"), tarmac.ArgumentError, ValueError, "not a size")
        self.check(lambda: _format.safetensors_header(b"abc"), tarmac.FormatError, ValueError, "3 bytes")
        self.check(lambda: _format.safetensors_header(b"\x08" + bytes(7) + b"[1]     "), tarmac.ParseError,
                   ValueError, "not a JSON object")

    def test_no_library(self):
        code = ("import tarmac, tarmac._library as L\n"
                "try:\n    L.load_library()\n"
                "except OSError as e:\n    print(type(e).__name__, isinstance(e, tarmac.TarmacError), e)\n")
        env = dict(os.environ, TARMAC_LIB=os.path.join(self.tmp, "nowhere", "libtarmac_c.so"))
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("LibraryNotFoundError True libtarmac_c.so not found"), p.stdout)
        self.assertIn(env["TARMAC_LIB"], p.stdout)

    @unittest.skipIf(tt is None, "needs torch")
    def test_torch(self):
        self.check(lambda: tt.TarmacDataset(self.out, channels=2), tarmac.ArgumentError, ValueError, "channels")
        self.check(lambda: tt.MixedDataset([]), tarmac.ArgumentError, ValueError, "the list is empty")
        mixed = tt.MixedDataset([self.out, self.out], decode=False)
        self.check(lambda: mixed[len(mixed)], tarmac.RangeError, IndexError, "out of range")
        self.check(lambda: tt.MixSampler([3, 4], {"a": 1}), tarmac.WrongTypeError, TypeError, "weights must be")
        self.check(lambda: tt.MixSampler([3, 4], [1, "x"]), tarmac.WrongTypeError, TypeError, "is a str")
        self.check(lambda: tt.MixSampler("ab", [1]), tarmac.ArgumentError, ValueError, "mixed_or_sizes")


if __name__ == "__main__":
    unittest.main()
