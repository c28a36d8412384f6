"""End-to-end: tables of many columns (issue #25, item 4).

A CSV table of 1.2 M columns spent minutes in the schema (a search over every field for every
field) and, above ~20 k columns, died with "Too many open files" (a spill file per column).
The table and its tar are written here with Python's csv and tarfile; values are checked
against the CSV as Python's csv module reads it, through the independent safetensors reader.
"""
import csv
import json
import os
import resource
import subprocess
import sys
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402
import st_reader  # noqa: E402


def low_open_files():
    """The child may open 256 files at most: far fewer than the table has columns."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


def cell(c, r):
    """Column c's cell in row r: integers, floats, text and empty cells (nulls), by column."""
    kind = c % 4
    if kind == 0:
        return str((c * 7 + r * 13) % 199 - 99)
    if kind == 1:
        return "%.3f" % ((c * 31 + r * 17) % 1000 / 7.0)
    if kind == 2:
        return "t%d,%d" % (c, r)  # a comma: the cell is quoted
    return "" if (c + r) % 3 == 0 else str(c + r)


def write_table(path, tar, columns, rows):
    names = ["image_path"] + ["f%d" % c for c in range(columns)]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(names)
        for r in range(rows):
            w.writerow(["img/%03d.jpg" % r] + [cell(c, r) for c in range(columns)])
    fx.write_tar(tar, [("img/%03d.jpg" % r, fx.jpg(fx.smooth_rgb(16, 16, seed=r))) for r in range(rows)])


class WideTable(fx.TmpCase):
    COLUMNS = 5000
    ROWS = 6

    @classmethod
    def build(cls):
        cls.table, cls.tar = cls.tmp + "/wide.csv", cls.tmp + "/img.tar"
        write_table(cls.table, cls.tar, cls.COLUMNS, cls.ROWS)

    def convert(self, out, *extra, timeout=120):
        return subprocess.run([fx.TARMAC, "convert", self.tar, "--table", self.table, "-o", out,
                               "--size", "8", *extra],
                              capture_output=True, timeout=timeout, preexec_fn=low_open_files)

    def test_five_thousand_columns_under_256_open_files(self):
        out = self.path("wide")
        p = self.convert(out)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        with open(self.table, newline="") as f:
            rows = list(csv.DictReader(f))
        t, meta = st_reader.load(os.path.join(out, "labels.safetensors"))
        schema = json.loads(meta["schema"])
        self.assertEqual(list(schema)[:self.COLUMNS], ["f%d" % c for c in range(self.COLUMNS)])
        self.assertEqual([schema["f%d" % c]["dtype"] for c in range(4)], ["I64", "F64", "U8", "I64"])
        keys = st_reader.keys(t)
        self.assertEqual(len(keys), self.ROWS)
        for i, key in enumerate(keys):
            row = rows[int(t["__row__"][i])]
            self.assertTrue(key.startswith(row["image_path"][:-4] + "/"), key)
            for c in (0, 1, 2, 3, 7, 2502, 4996, 4997, 4998, 4999):
                name, text = "f%d" % c, row["f%d" % c]
                with self.subTest(field=name, row=i):
                    if c % 4 == 0:
                        self.assertEqual(t[name].dtype, np.int64)
                        self.assertEqual(int(t[name][i]), int(text))
                    elif c % 4 == 1:
                        self.assertEqual(t[name].dtype, np.float64)
                        self.assertEqual(float(t[name][i]), float(text))
                    elif c % 4 == 2:
                        self.assertEqual(st_reader.string(t, name, i), text)
                    else:  # integers with empty cells: nullable
                        self.assertEqual(bool(t[name + ".valid"][i]), text != "")
                        if text:
                            self.assertEqual(int(t[name][i]), int(text))
        self.assertEqual(fx.run(["verify", out]).returncode, 0)

    def test_resume_after_kill_under_256_open_files(self):
        ref = self.path("ref")
        self.assertEqual(self.convert(ref, "--shard-size", "1K").returncode, 0)
        out = self.path("killed")
        proc = subprocess.Popen([fx.TARMAC, "convert", self.tar, "--table", self.table, "-o", out,
                                 "--size", "8", "--shard-size", "1K", "--checkpoint-every", "0"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                preexec_fn=low_open_files)
        cp = os.path.join(out, ".tarmac-partial", "checkpoint.json")
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with open(cp) as f:
                    if json.load(f)["writer"]["samples"] >= 2:
                        break
            except (OSError, ValueError):
                pass
            time.sleep(0.002)
        proc.kill()
        proc.wait()
        if proc.returncode != -9:
            self.skipTest("the run finished before the kill")
        p = self.convert(out, "--shard-size", "1K", "--resume")
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assertIn("resumed an interrupted run", p.stderr.decode())
        for n in sorted(os.listdir(ref)):
            if n == "labels.safetensors" or n.startswith("shard-"):
                with open(os.path.join(out, n), "rb") as a, open(os.path.join(ref, n), "rb") as b:
                    self.assertEqual(a.read(), b.read(), n)


class VeryWideTable(fx.TmpCase):
    """100 000 columns, 3 rows, converted, verified and described. How long each takes is
    scripts/bench/wide_tables.sh's to measure (docs/performance.md); the timeouts here only stop
    a run that has gone quadratic again (minutes) from holding the suite."""

    def test_hundred_thousand_columns(self):
        table, tar = self.path("wide.csv"), self.path("img.tar")
        write_table(table, tar, 100000, 3)
        out = self.path("wide")
        p = subprocess.run([fx.TARMAC, "convert", tar, "--table", table, "-o", out, "--size", "8"],
                           capture_output=True, timeout=900, preexec_fn=low_open_files)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        t, _ = st_reader.load(os.path.join(out, "labels.safetensors"))
        row = [int(r) for r in t["__row__"]]
        self.assertEqual([int(t["f99996"][i]) for i in range(3)], [int(cell(99996, r)) for r in row])
        self.assertEqual([st_reader.string(t, "f50002", i) for i in range(3)], [cell(50002, r) for r in row])
        # Reading it back: the header's and the schema's fields were found by linear searches,
        # and nlohmann's ordered parse looks for each key it adds (info: 19 s here, 93 s under ASan).
        for command in (["verify", out], ["info", out]):
            p = subprocess.run([fx.TARMAC, *command], capture_output=True, timeout=900)
            self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        listed = p.stdout.decode()
        self.assertTrue("f99999 " in listed and "f0 " in listed, "info lists every field")
        p = subprocess.run([fx.TARMAC, "info", out, "--json"], capture_output=True, timeout=900)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        described = json.loads(p.stdout)
        with open(table, newline="") as f:
            header = next(csv.reader(f))
        self.assertEqual(list(described["schema"]), header[1:] + ["__row__"],
                         "info --json lists the fields in the table's order")


if __name__ == "__main__":
    unittest.main()
