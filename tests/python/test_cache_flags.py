"""tarmac.cache_flags: --cache and --cache-size of command lines reading a dataset in object
storage. Sizes are checked against values computed here by hand (powers of 1024), and against
what `tarmac`'s own size flags accept and refuse (convert --multipart-size, the same grammar,
run as a process). Needs PYTHONPATH=python/ and TARMAC."""
import argparse
import contextlib
import io
import os
import subprocess
import unittest

import tarmac

TARMAC = os.environ.get("TARMAC", "tarmac")


def parser():
    ap = argparse.ArgumentParser(prog="train")
    ap.add_argument("dataset")
    tarmac.cache_flags.add_cache_arguments(ap)
    return ap


def parse(*argv):
    """(options, exit status, stderr) of parsing `argv` then cache_options."""
    ap, err = parser(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            a = ap.parse_args(list(argv))
            return tarmac.cache_flags.cache_options(ap, a, a.dataset), 0, ""
    except SystemExit as e:
        return None, e.code, err.getvalue()


class ParseSize(unittest.TestCase):
    def test_values(self):
        for text, want in [("4096", 4096), ("1", 1), ("512M", 512 * 1024 ** 2), ("1.5G", 3 * 1024 ** 3 // 2),
                           ("10G", 10 * 1024 ** 3), ("2K", 2048), ("2KiB", 2048), ("3MiB", 3 * 1024 ** 2),
                           ("1T", 1024 ** 4), ("1TiB", 1024 ** 4), ("7B", 7), ("0.5K", 512), (".5K", 512),
                           ("1.0009765625K", 1025), ("1.3K", 1331), ("1024T", 2 ** 50), ("1e3", 1000),
                           ("2E1K", 20480), ("1.", 1)]:
            self.assertEqual(tarmac.cache_flags.parse_size(text), want, text)
        self.assertEqual(tarmac.cache_flags.parse_size("0", zero=True), 0)
        self.assertEqual(tarmac.cache_flags.parse_size("0G", zero=True), 0)

    def test_refused(self):
        for text in ["", "0", "0.4", "G", "1g", "1 G", "1GB", "-1M", "+1M", "1eK", "1,5G", "nan", "inf", "1025T",
                     "1125899906842625", "1..5G", "12M3", "0x10"]:
            with self.assertRaises(ValueError, msg=text) as e:
                tarmac.cache_flags.parse_size(text)
            self.assertIn(f"'{text}' is not a size", str(e.exception))
            self.assertIn("512M, 1.5G, 4096", str(e.exception))

    def test_same_as_tarmacs_size_flags(self):
        """tarmac's --multipart-size (bytes_flag) accepts and refuses the same texts."""
        for text in ["4096", "512M", "1.5G", "2KiB", "7B", "1e3", "2E1K", "+1M", "1eK", "1g", "0", "-1M", "1025T",
                     "G", "nan", ".5K"]:
            p = subprocess.run([TARMAC, "convert", "in.tar", "-o", "s3://b/p/", "--multipart-size", text],
                               capture_output=True, text=True, cwd=os.path.dirname(__file__))
            refused_by_tarmac = "is not a size" in p.stderr
            try:
                tarmac.cache_flags.parse_size(text)
                refused = False
            except ValueError:
                refused = True
            self.assertEqual(refused, refused_by_tarmac, (text, p.stderr))


class CacheArguments(unittest.TestCase):
    def test_remote_dataset(self):
        self.assertEqual(parse("s3://b/p/", "--cache", "/c", "--cache-size", "10G"),
                         ({"cache": "/c", "cache_size": 10 << 30}, 0, ""))
        self.assertEqual(parse("https://h/d/", "--cache", "/c"), ({"cache": "/c", "cache_size": 0}, 0, ""))
        self.assertEqual(parse("s3://b/p/", "--cache", "/c", "--cache-size", "0"),
                         ({"cache": "/c", "cache_size": 0}, 0, ""))

    def test_local_dataset(self):
        self.assertEqual(parse("out/"), ({"cache": None, "cache_size": 0}, 0, ""))

    def test_refused(self):
        _, code, err = parse("s3://b/p/")
        self.assertEqual(code, 2)
        self.assertIn("'s3://b/p/' is in object storage: pass --cache DIR", err)
        _, code, err = parse("out/", "--cache", "/c")
        self.assertEqual(code, 2)
        self.assertIn("--cache and --cache-size are for a dataset in object storage", err)
        _, code, err = parse("out/", "--cache-size", "1G")
        self.assertEqual(code, 2)
        _, code, err = parse("s3://b/p/", "--cache", "/c", "--cache-size", "10GB")
        self.assertEqual(code, 2)
        self.assertIn("argument --cache-size: '10GB' is not a size", err)
        self.assertIn("from 0 to 1024T", err)

    def test_help_names_the_default(self):
        self.assertIn("Default 0: no limit", " ".join(parser().format_help().split()))


if __name__ == "__main__":
    unittest.main()
