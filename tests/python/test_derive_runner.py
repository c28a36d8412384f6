"""`python -m tarmac.derive` on its own: where rank and world come from, the share each rank
writes (docs/format.md 8, read back here with struct/json/numpy), label fields passed to FUNC,
what FUNC may return, refusals, and SIGTERM. Needs TARMAC_LIB, PYTHONPATH=python/, TARMAC."""
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fixtures as fx  # noqa: E402

TARMAC = os.environ.get("TARMAC", "tarmac")
SIZES = [(320, 200), (200, 320), (240, 240), (330, 210), (180, 300)] * 3

FUNCS = textwrap.dedent("""
    import os, time
    import numpy as np

    def mean_rgb(batch):      # per-sample mean colour, numpy out
        return batch["image"].numpy().reshape(len(batch["__index__"]), -1, 3).mean(axis=1)

    def affine(batch):        # a label field passed through
        return batch["__affine__"]

    def sizes_no_image(batch):  # --no-images: the micro-conditioning, no pixels
        assert "image" not in batch
        return np.concatenate([batch["__original_size__"], batch["__target_size__"]], axis=1)

    def slow(batch):
        time.sleep(0.3)
        return batch["__index__"].reshape(-1, 1)

    def cursed(batch):        # fails on sample 5 while $CURSED is set
        if os.environ.get("CURSED") and 5 in batch["__index__"].tolist():
            raise RuntimeError("sample 5 is cursed")
        return batch["__index__"].reshape(-1, 1)

    def wide(batch):          # 256 KiB of outputs a sample: a small disk fills
        return np.repeat(batch["__index__"].numpy().reshape(-1, 1).astype(np.float64), 32768, axis=1)

    def a_list(batch):
        return [1, 2, 3]

    def short(batch):
        return np.zeros((1, 2))

    def text(batch):
        return np.array(["x"] * len(batch["__index__"]))

    def caption_bytes(batch):  # labels only: each caption's UTF-8 byte histogram, then its tokens' sum
        assert "image" not in batch and isinstance(batch["txt"], list)
        out = np.zeros((len(batch["__index__"]), 257), np.int64)
        for j, (text, tokens) in enumerate(zip(batch["txt"], batch["tokens"])):
            out[j, :256] = np.bincount(np.frombuffer(text.encode(), np.uint8), minlength=256)
            out[j, 256] = -1 if tokens is None else int(np.asarray(tokens).sum())
        return out
""")


def load_st(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    dt = {"U8": "u1", "I64": "<i8", "I32": "<i4", "F64": "<f8", "F32": "<f4"}
    out = {k: np.frombuffer(data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], dt[v["dtype"]])
           .reshape(v["shape"]) for k, v in header.items()}
    return out, meta


class DeriveRunnerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-derive-runner-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.base = fx.bucketed_photos(cls.tmp, SIZES, "base")
        with open(os.path.join(cls.tmp, "funcs.py"), "w") as f:
            f.write(FUNCS)
        cls.ref = fx.Dataset(cls.base)
        cls.n = len(cls.ref.keys)

    def dataset(self, name):
        out = os.path.join(self.tmp, name)
        shutil.copytree(self.base, out)
        return out

    def derive(self, out, *args, env=None, expect=0):
        e = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS")}
        e.update(env or {})
        p = subprocess.run([sys.executable, "-m", "tarmac.derive", out, *args], cwd=self.tmp, env=e,
                           capture_output=True, timeout=120)
        self.assertEqual(p.returncode, expect, p.stderr.decode())
        return p.stderr.decode()

    def part(self, out, name, rank, world):
        parts = os.path.join(out, "columns", name + ".parts")
        with open(os.path.join(parts, "part-%05d-of-%05d.json" % (rank, world))) as f:
            record = json.load(f)
        got = {}
        for c in record["chunks"]:
            t, meta = load_st(os.path.join(parts, c["file"]))
            self.assertEqual(meta["format"], "tarmac-column-chunk/1")
            with open(os.path.join(parts, c["file"]), "rb") as f:
                self.assertEqual("%08x" % (zlib.crc32(f.read()) & 0xFFFFFFFF), c["crc32"])
            off = 0
            for i, shape in zip(t["index"], t["shape"]):
                k = int(np.prod(shape))
                got[int(i)] = t["values"][off:off + k].reshape(shape)
                off += k
        return record, got

    def test_rank_and_world_from_torchrun_and_slurm_env(self):
        out = self.dataset("env")
        self.derive(out, "--name", "m", "--fn", "funcs:mean_rgb", env={"RANK": "1", "WORLD_SIZE": "3"})
        record, got = self.part(out, "m", 1, 3)
        b, e = self.n // 3, 2 * self.n // 3
        self.assertEqual((record["begin"], record["end"], record["complete"]), (b, e, True))
        self.assertEqual(sorted(got), list(range(b, e)))
        with open(os.path.join(out, "manifest.json")) as f:
            self.assertEqual(record["dataset"], {"labels_crc32": json.load(f)["labels_crc32"], "num_samples": self.n})
        self.assertEqual(record["fn"], "funcs:mean_rgb")
        for i in range(b, e):  # against the stored PNG decoded by OpenCV here
            rgb = fx.decode_rgb(self.ref.blob(i)).astype(np.float64)
            np.testing.assert_allclose(got[i], rgb.reshape(-1, 3).mean(axis=0), rtol=1e-12)
        self.derive(out, "--name", "m", "--fn", "funcs:mean_rgb", env={"SLURM_PROCID": "2", "SLURM_NTASKS": "3"})
        self.derive(out, "--name", "m", "--fn", "funcs:mean_rgb", "--rank", "0", "--world", "3")
        self.assertEqual(subprocess.run([TARMAC, "column", "merge", "-q", out, "m"]).returncode, 0)
        err = self.derive(out, "--name", "x", "--fn", "funcs:mean_rgb", "--rank", "1", expect=1)
        self.assertIn("both --rank and --world", err)

    def test_fields_reach_the_function(self):
        out = self.dataset("fields")
        self.derive(out, "--name", "aff", "--fn", "funcs:affine", "--fields", "__affine__", "--batch-size", "4")
        _, got = self.part(out, "aff", 0, 1)
        for i in range(self.n):
            np.testing.assert_array_equal(got[i], self.ref.affine(i))
        # --no-images: the same fields, stacked without decoding, in index order
        self.derive(out, "--name", "sz", "--fn", "funcs:sizes_no_image", "--no-images", "--batch-size", "4",
                    "--fields", "__original_size__,__target_size__")
        record, got = self.part(out, "sz", 0, 1)
        self.assertEqual(record["complete"], True)
        for i in range(self.n):
            want = [*self.ref.t["__original_size__"][i], *self.ref.t["__target_size__"][i]]
            np.testing.assert_array_equal(got[i], want)
        np.testing.assert_array_equal([SIZES[i][::-1] for i in range(self.n)],
                                      [got[i][:2] for i in range(self.n)])  # (h, w) of the photo written
        err = self.derive(out, "--name", "aff2", "--fn", "funcs:affine", "--fields", "nope", expect=1)
        self.assertIn("'nope' is not a field of the dataset", err)

    def test_labels_only_dataset_with_string_and_ragged_fields(self):
        # Captions and token lists as a captioning tool writes them (KEY.txt, KEY.json with a null),
        # converted with --no-images: FUNC gets no image, and lists for the string and ragged fields.
        rng = np.random.default_rng(3)
        words = ["a", "photo", "of", "café", "東京", "dog", "at", "night", ""]
        raw, members = {}, []
        for i in range(23):
            key = "cap/%03d" % i
            text = " ".join(rng.choice(words, size=int(rng.integers(0, 7))))
            tokens = None if i == 5 else [int(t) for t in rng.integers(0, 50000, size=int(rng.integers(1, 9)))]
            raw[key] = (text, tokens)
            members += [(key + ".txt", text.encode()), (key + ".json", json.dumps({"tokens": tokens}).encode())]
        archive = fx.write_tar(os.path.join(self.tmp, "captions.tar"), members)
        out = os.path.join(self.tmp, "captions")
        subprocess.run([TARMAC, "convert", "-q", archive, "-o", out, "--no-images"], check=True)
        self.derive(out, "--name", "hist", "--fn", "funcs:caption_bytes", "--fields", "txt,tokens",
                    "--batch-size", "5")
        _, got = self.part(out, "hist", 0, 1)
        keys = fx.Dataset(out).keys
        self.assertEqual(sorted(got), list(range(len(raw))))
        for i, key in enumerate(keys):
            text, tokens = raw[key]
            want = [text.encode().count(bytes([b])) for b in range(256)] + [-1 if tokens is None else sum(tokens)]
            np.testing.assert_array_equal(got[i], want, err_msg=key)

    def test_run_in_process_with_its_defaults_decodes_the_images(self):
        import tarmac.derive
        out = self.dataset("inproc")

        def mean_rgb(batch):  # torch tensors or numpy arrays alike
            img = np.asarray(batch["image"], dtype=np.float64)
            return img.reshape(len(img), -1, 3).mean(axis=1)

        r = tarmac.derive.run(out, "m", mean_rgb, log=lambda m: None)
        self.assertEqual((r["computed"], r["complete"]), (self.n, True))
        # the default decoding threads: this process's cores (its affinity), one rank on the node
        self.assertEqual(r["threads"], len(os.sched_getaffinity(0)))
        _, got = self.part(out, "m", 0, 1)
        for i in range(self.n):
            rgb = fx.decode_rgb(self.ref.blob(i)).astype(np.float64)
            np.testing.assert_allclose(got[i], rgb.reshape(-1, 3).mean(axis=0), rtol=1e-12)
        # two torchrun ranks on this node share its cores
        os.environ["LOCAL_WORLD_SIZE"] = "2"
        try:
            r = tarmac.derive.run(out, "m2", mean_rgb, rank=0, world=2, log=lambda m: None)
        finally:
            del os.environ["LOCAL_WORLD_SIZE"]
        self.assertEqual(r["threads"], max(1, len(os.sched_getaffinity(0)) // 2))

    def test_time_waiting_for_data_is_reported(self):
        import tarmac.derive
        out = self.dataset("timing")
        calls = []

        def slow(batch):  # FUNC sets the pace: 0.2 s a batch, during which the next is decoded
            calls.append(len(batch["__index__"]))
            time.sleep(0.2)
            return batch["__index__"].reshape(-1, 1)

        r = tarmac.derive.run(out, "t", slow, batch_size=4, rank=0, world=1, log=lambda m: None)
        self.assertEqual((r["batches"], r["computed"]), (len(calls), self.n))
        self.assertGreaterEqual(r["fn_seconds"], 0.2 * len(calls))
        self.assertLessEqual(r["wait_seconds"] + r["fn_seconds"], r["seconds"])
        self.assertAlmostEqual(r["data_wait"], r["wait_seconds"] / r["seconds"])
        # decoding 4 images of <= 64 px takes milliseconds: the loop waited at most for the first batch
        self.assertLess(r["data_wait"], 0.25)

    def test_run_raises_where_the_command_exits(self):
        """run() raises DeriveError (a TarmacError) and DeriveStopped, never SystemExit: only the
        command turns them into a line and an exit code (test_sigterm_..., test_bad_...)."""
        import tarmac.derive
        out = self.dataset("raises")
        quiet = {"log": lambda m: None}

        def index(batch):
            return batch["__index__"].reshape(-1, 1)

        for kwargs, words in (({"name": "nl\n", "fn": index}, "is not a column name"),
                              ({"name": "r", "fn": "funcs"}, "MODULE:FUNC"),
                              ({"name": "r", "fn": "no_such_module:f"}, "cannot import module"),
                              ({"name": "r", "fn": index, "batch_size": 0}, "--batch-size"),
                              ({"name": "r", "fn": index, "rank": 2, "world": 2}, "need 0 <= rank < world"),
                              ({"name": "r", "fn": lambda b: [1]}, "is a list")):
            with self.subTest(words=words):
                with self.assertRaises(tarmac.derive.DeriveError) as e:
                    tarmac.derive.run(out, **kwargs, **quiet)
                self.assertIsInstance(e.exception, tarmac.TarmacError)
                self.assertIn(words, str(e.exception))
        with self.assertRaises(tarmac.derive.DeriveError) as e:
            tarmac.derive.run(os.path.join(self.tmp, "nowhere"), "r", index, **quiet)
        self.assertIsInstance(e.exception.__cause__, tarmac.DatasetIOError)
        os.environ.update(RANK="x", WORLD_SIZE="2")
        try:
            with self.assertRaisesRegex(tarmac.derive.DeriveError, r"\$RANK='x'"):
                tarmac.derive.run(out, "r", index, **quiet)
        finally:
            del os.environ["RANK"], os.environ["WORLD_SIZE"]

        calls = []

        def term_in_second_batch(batch):  # as a scheduler's SIGTERM arriving while FUNC runs
            calls.append([int(i) for i in batch["__index__"]])
            if len(calls) == 2:
                os.kill(os.getpid(), signal.SIGTERM)
            return batch["__index__"].reshape(-1, 1)

        with self.assertRaises(tarmac.derive.DeriveStopped) as e:
            tarmac.derive.run(out, "s", term_in_second_batch, batch_size=2, **quiet)
        self.assertEqual((e.exception.signal, e.exception.exit_code), (signal.SIGTERM, 128 + signal.SIGTERM))
        self.assertIn("run the same command again", str(e.exception))
        self.assertIs(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)  # run() put the handler back
        record, got = self.part(out, "s", 0, 1)
        self.assertEqual((record["done"], sorted(got)), (4, sorted(calls[0] + calls[1])))  # both batches kept
        r = tarmac.derive.run(out, "s", term_in_second_batch, batch_size=2, **quiet)  # goes on
        self.assertEqual((r["computed"], r["complete"]), (self.n - 4, True))

    def test_bad_outputs_and_names_are_refused(self):
        out = self.dataset("bad")
        for fn, words in (("funcs:a_list", "is a list"), ("funcs:short", "first axis must be the batch's"),
                          ("funcs:text", "a column cannot hold"), ("funcs:nothing", "has no 'nothing'"),
                          ("nomodule:f", "cannot import module 'nomodule'"), ("funcs", "MODULE:FUNC")):
            err = self.derive(out, "--name", "b", "--fn", fn, "--restart", expect=1)
            self.assertIn(words, err)
        self.assertIn("starting at sample", self.derive(out, "--name", "b", "--fn", "funcs:short", "--restart",
                                                        expect=1))
        self.assertIn("the image", self.derive(out, "--name", "image", "--fn", "funcs:slow", expect=1))
        self.assertIn("not a column name", self.derive(out, "--name", "_x", "--fn", "funcs:slow", expect=1))
        # The whole name is held to format.md 8's rule: a trailing newline once passed (re.match with $).
        for bad in ("nl\n", "-x", "a b", "a" * 129, "x\x1b[2J"):
            with self.subTest(name=bad):
                err = self.derive(out, "--name=" + bad, "--fn", "funcs:slow", expect=1)
                self.assertIn(repr(bad) + " is not a column name", err)
                self.assertNotIn(bad + ".parts", os.listdir(os.path.join(out, "columns"))
                                 if os.path.isdir(os.path.join(out, "columns")) else [])
        # tarmac column merge / rm hold names to the same rule (the C++ once let "-x" through)
        for args in (["column", "merge"], ["column", "rm"]):
            for name in ("nl\n", "-x"):
                with self.subTest(cli=args[1], name=name):
                    p = subprocess.run([TARMAC, *args, out, "--", name], capture_output=True, timeout=60)
                    self.assertEqual(p.returncode, 2, p.stderr.decode())  # a usage error
                    self.assertIn(repr(name) + " is not a column name", p.stderr.decode())  # escaped alike
            p = subprocess.run([TARMAC, *args, out, "a"], capture_output=True, timeout=60)
            self.assertNotIn("not a column name", p.stderr.decode())  # a valid name, only no such column

    def test_a_raising_fn_is_one_line_and_the_same_command_goes_on(self):
        out = self.dataset("cursed")
        args = ["--name", "c", "--fn", "funcs:cursed", "--batch-size", "2", "--checkpoint-every", "1"]
        err = self.derive(out, *args, env={"CURSED": "1"}, expect=1)
        self.assertNotIn("Traceback", err)
        lines = [line for line in err.splitlines() if line.startswith("tarmac.derive: error:")]
        self.assertEqual(len(lines), 1, err)
        m = re.search(r"--fn raised RuntimeError: sample 5 is cursed \(at .*funcs\.py:\d+\) on the batch of "
                      r"samples (\d+), (\d+); (\d+) of this rank's %d samples are kept in its part" % self.n, lines[0])
        self.assertIsNotNone(m, lines[0])
        self.assertIn("run the same command again", lines[0])
        batch, kept = {int(m[1]), int(m[2])}, int(m[3])
        self.assertIn(5, batch)
        record, got = self.part(out, "c", 0, 1)  # every batch before the failing one is kept
        self.assertEqual((record["done"], len(got)), (kept, kept))
        self.assertFalse(batch & set(got))
        self.derive(out, *args)  # FUNC fixed: the same command goes on from sample 4
        record, got = self.part(out, "c", 0, 1)
        self.assertTrue(record["complete"])
        self.assertEqual(sorted(got), list(range(self.n)))
        for i, v in got.items():
            self.assertEqual(v.tolist(), [i])

    def test_a_full_disk_is_one_line_and_the_same_command_goes_on(self):
        if os.geteuid() != 0:
            self.skipTest("mounting a tmpfs needs root")
        mnt = tempfile.mkdtemp(dir=self.tmp)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(self.base) for f in fs)
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % (size + (1 << 20)), "tmpfs", mnt],
                           capture_output=True)
        if p.returncode != 0:
            self.skipTest("cannot mount a tmpfs: " + p.stderr.decode(errors="replace").strip())
        self.addCleanup(subprocess.run, ["umount", "-l", mnt], check=False)
        out = os.path.join(mnt, "ds")
        shutil.copytree(self.base, out)
        args = ["--name", "w", "--fn", "funcs:wide", "--batch-size", "1", "--checkpoint-every", "1"]
        err = self.derive(out, *args, expect=1)  # 1 MiB free; the column needs 256 KiB a sample
        self.assertNotIn("Traceback", err)
        self.assertRegex(err, r"tarmac.derive: error: cannot write this rank's part in '.*w\.parts': no space left "
                              r"on device; the \d+ samples of its earlier chunks are kept: free space and run the "
                              r"same command again to go on")
        parts = os.path.join(out, "columns", "w.parts")
        self.assertEqual([f for f in os.listdir(parts) if f.endswith(".tmp")], [], "no half-written chunk left")
        record, got = self.part(out, "w", 0, 1)
        self.assertGreater(record["done"], 0)
        self.assertEqual(len(got), record["done"])
        subprocess.run(["mount", "-o", "remount,size=%d" % (size + (8 << 20)), mnt], check=True)
        self.derive(out, *args)  # space freed: the same command goes on
        record, got = self.part(out, "w", 0, 1)
        self.assertTrue(record["complete"])
        for i, v in got.items():
            np.testing.assert_array_equal(v, np.full(32768, i, np.float64))

    def test_another_fn_is_refused_and_restart_starts_over(self):
        out = self.dataset("refuse")
        self.derive(out, "--name", "c", "--fn", "funcs:slow", "--rank", "0", "--world", "2", "--batch-size", "8")
        err = self.derive(out, "--name", "c", "--fn", "funcs:mean_rgb", "--rank", "0", "--world", "2", expect=1)
        self.assertIn("another --fn", err)
        self.assertIn("--restart", err)
        self.assertIn("already complete", self.derive(out, "--name", "c", "--fn", "funcs:slow", "--rank", "0",
                                                      "--world", "2"))
        self.derive(out, "--name", "c", "--fn", "funcs:mean_rgb", "--rank", "0", "--world", "2", "--restart")
        record, _ = self.part(out, "c", 0, 2)
        self.assertEqual(record["fn"], "funcs:mean_rgb")

    def test_sigterm_checkpoints_and_the_same_command_goes_on(self):
        out = self.dataset("term")
        cmd = [sys.executable, "-m", "tarmac.derive", out, "--name", "s", "--fn", "funcs:slow", "--batch-size", "2"]
        p = subprocess.Popen(cmd, cwd=self.tmp, stderr=subprocess.PIPE)
        record = os.path.join(out, "columns", "s.parts", "part-00000-of-00001.json")
        deadline = time.time() + 60
        while not os.path.exists(record) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.7)  # a few batches in
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 143, err.decode())
        self.assertIn("run the same command again", err.decode())
        first, got = self.part(out, "s", 0, 1)
        self.assertFalse(first["complete"])
        self.assertGreater(first["done"], 0)
        self.assertLess(first["done"], self.n)
        self.assertEqual(len(got), first["done"])
        r = subprocess.run(cmd, cwd=self.tmp, capture_output=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        self.assertIn("going on from %d" % first["done"], r.stderr.decode())
        second, got = self.part(out, "s", 0, 1)
        self.assertTrue(second["complete"])
        self.assertEqual(sorted(got), list(range(self.n)))
        for i in range(self.n):
            self.assertEqual(int(got[i][0]), i)


if __name__ == "__main__":
    unittest.main()
