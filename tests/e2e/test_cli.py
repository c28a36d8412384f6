"""End-to-end: the command line's habits (issue #16, items 4 and 6). Progress on a terminal
(a pseudo-terminal) and in a log, on real runs made slow by feeding a named pipe at the test's
pace; the output folder inside the input folder; runs that convert nothing; -q; "did you mean";
every error prefixed "tarmac: error:"; NO_COLOR; a terminal on standard input; --json errors."""
import json
import os
import re
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402
import numpy as np  # noqa: E402

SGR = re.compile(rb"\x1b\[[0-9;]*m")  # an ANSI colour (Select Graphic Rendition)


def samples(n, seed=0, noise=False):
    """n samples; `noise`: ~190 KB PNGs of noise, so that the pipeline's batches (1 MiB or 64
    samples) hand samples on every few samples."""
    rng = np.random.default_rng(seed)
    members = []
    for i in range(n):
        img = rng.integers(0, 256, (256, 256, 3), np.uint8) if noise else fx.smooth_rgb(48, 32, seed=seed + i % 5)
        members.append((f"s/{i:05d}.png", fx.png(img)))
        members.append((f"s/{i:05d}.json", fx.js({"id": i})))
    return members


class SlowFeed:
    """Writes a tar into a named pipe at a fixed pace, so that a run lasts as long as the test
    says, whatever the machine. pause()/resume() hold the feed at a point."""

    def __init__(self, path, data, chunks=40, interval=0.06):
        self.path, self.data, self.chunks, self.interval = path, data, chunks, interval
        self.gate = threading.Event()
        self.gate.set()
        self.hold_at = None
        os.mkfifo(path)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        step = -(-len(self.data) // self.chunks)
        try:
            with open(self.path, "wb") as f:
                for i in range(0, len(self.data), step):
                    if self.hold_at is not None and i >= self.hold_at:
                        self.gate.wait()
                    f.write(self.data[i:i + step])
                    f.flush()
                    time.sleep(self.interval)
        except BrokenPipeError:  # the reader stops at the end-of-archive blocks, before the padding
            pass

    def hold_from(self, fraction):
        self.hold_at = int(len(self.data) * fraction)
        self.gate.clear()


def tar_bytes(path, members):
    fx.write_tar(path, members)
    with open(path, "rb") as f:
        return f.read()


def bar_lines(out):
    """The progress lines drawn (each redraw starts with a carriage return)."""
    text = out.decode(errors="replace").replace("\x1b[K", "")
    return [l for l in re.split(r"[\r\n]", text) if l.startswith("[") and "samples" in l]


def count(line):
    m = re.search(r"\] +(?:\d+%|\?%) (\d+)(?: of (~?)(\d+))? samples", line)
    assert m, line
    return int(m.group(1)), m.group(2), (int(m.group(3)) if m.group(3) else None)


class ProgressTest(fx.TmpCase):
    N = 40

    @classmethod
    def build(cls):
        cls.data = tar_bytes(os.path.join(cls.tmp, "src.tar"), samples(cls.N, noise=True))

    def test_bar_redraws_on_a_terminal_and_ends_at_every_sample(self):
        fifo = self.path("bar.fifo")
        SlowFeed(fifo, self.data, chunks=40, interval=0.06)  # >= 2.4 s whatever the machine
        out = self.path("bar-out")
        rc, text = fx.on_pty(["convert", fifo, "-o", out, "-j", "1", "--group-window", "1K"])
        self.assertEqual(rc, 0, text.decode(errors="replace"))
        lines = bar_lines(text)
        # Redrawn every 200 ms for at least 2.4 s: several redraws, not one at the end.
        self.assertGreaterEqual(len(lines), 6, lines)
        done = [count(l)[0] for l in lines]
        self.assertEqual(done, sorted(done), "samples done never go back")
        self.assertGreater(len(set(done)), 3, "the count moves while the run goes")
        ds = fx.Dataset(out)
        n = len(ds.keys)
        self.assertEqual(n, self.N)
        last = lines[-1]
        self.assertTrue(last.startswith("[" + "#" * 24 + "] 100% "), last)
        self.assertEqual(count(last), (n, "", n))
        self.assertIn("read", last)  # bytes read: the second figure
        # Before the end, a pipe has no size: no percentage is invented.
        self.assertTrue(any("?%" in l for l in lines[:-2]), lines)
        # The summary follows on a line of its own.
        self.assertIn(b"\nconverted 40 samples", text.replace(b"\r\n", b"\n"))

    def test_plain_lines_reach_a_log_before_the_end(self):
        fifo = self.path("plain.fifo")
        feed = SlowFeed(fifo, self.data, chunks=20, interval=0.02)
        feed.hold_from(0.5)
        out = self.path("plain-out")
        log_path = self.path("plain.log")
        with open(log_path, "wb") as log:
            p = subprocess.Popen([fx.TARMAC, "convert", fifo, "-o", out, "-v", "--progress-every",
                                  "0.3", "--group-window", "1K"], stdout=subprocess.DEVNULL,
                                 stderr=log)
            try:
                # The feed is held half way: the run cannot end, yet lines must appear.
                deadline = time.time() + 30
                while time.time() < deadline:
                    with open(log_path, "rb") as f:
                        seen = f.read().decode(errors="replace")
                    if seen.count("tarmac: progress:") >= 2:
                        break
                    time.sleep(0.1)
                self.assertIsNone(p.poll(), "the run waits for the rest of its input")
                self.assertGreaterEqual(seen.count("tarmac: progress:"), 2, seen)
                self.assertNotIn("\r", seen)
                self.assertNotIn("\x1b", seen)
            finally:
                feed.gate.set()
            self.assertEqual(p.wait(timeout=60), 0)
        with open(log_path) as f:
            lines = [l for l in f.read().splitlines() if l.startswith("tarmac: progress:")]
        self.assertRegex(lines[-1], r"^tarmac: progress: 100% 40 of 40 samples")

    def test_none_and_quiet_draw_nothing(self):
        src = self.path("small.tar")
        fx.write_tar(src, samples(5))
        rc, text = fx.on_pty(["convert", src, "-o", self.path("none-out"), "--progress", "none"])
        self.assertEqual(rc, 0)
        self.assertNotIn(b"samples/s;", text)
        self.assertNotIn(b"\r\x1b[K", text)
        self.assertIn(b"converted 5 samples", text)  # the summary still comes
        rc, text = fx.on_pty(["convert", src, "-o", self.path("quiet-out"), "-q"])
        self.assertEqual(rc, 0)
        self.assertEqual(text, b"")  # -q: nothing but errors; there were none
        self.assertEqual(len(fx.Dataset(self.path("quiet-out")).keys), 5)


class HabitsTest(fx.TmpCase):
    def test_output_inside_the_input_folder_is_not_read(self):
        data = self.path("data")
        fx.write_tree(data, samples(6))
        p = subprocess.run([fx.TARMAC, "convert", ".", "-o", "out", "--checkpoint-every", "0"],
                           cwd=data, capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertIn("input '.' holds the output directory 'out': it is left out", p.stderr.decode())
        ds = fx.Dataset(os.path.join(data, "out"))
        self.assertEqual(sorted(ds.keys), [f"s/{i:05d}" for i in range(6)])
        self.assertEqual(ds.manifest["counts"].get("ignored_members", 0), 0, ds.manifest["counts"])
        # The output may not be the input folder itself.
        p = subprocess.run([fx.TARMAC, "convert", ".", "-o", "."], cwd=data, capture_output=True)
        self.assertNotEqual(p.returncode, 0)

    def test_a_dataset_inside_the_input_folder_is_listed_not_read(self):
        # An earlier run's output kept beside its data (written here by hand, not by tarmac:
        # what marks it is its labels.safetensors and manifest.json), with images and labels
        # of its own that would make samples if it were read.
        data = self.path("kept-beside")
        fx.write_tree(data, samples(4))
        fx.write_tree(os.path.join(data, "v1"), samples(3, seed=7) + [
            ("manifest.json", b'{"format": "tarmac/1"}'), ("labels.safetensors", b"\0" * 16)])
        # A folder with only one of the two names is the user's: read as ever.
        fx.write_tree(os.path.join(data, "notes"), [
            ("manifest.png", fx.png(fx.smooth_rgb(12, 10))), ("manifest.json", b'{"v": 1}')])
        out = self.path("beside-out")
        p = fx.run(["convert", data, "-o", out])
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 0, err)
        self.assertIn(f"input '{data}' holds a tarmac dataset in 'v1/': it is left out", err)
        ds = fx.Dataset(out)
        self.assertEqual(sorted(ds.keys), ["notes/manifest"] + [f"s/{i:05d}" for i in range(4)])
        self.assertEqual(ds.manifest["counts"]["ignored_members"], 1, ds.manifest["counts"])
        self.assertEqual(ds.manifest["ignored"], [{
            "input": data, "member": "v1/", "code": "tarmac_dataset",
            "reason": "a tarmac dataset (it holds manifest.json and labels.safetensors): "
                      "not read as input"}])
        self.assertEqual(fx.run(["verify", out]).returncode, 0)
        # --classes-from-dirs: no class for the dataset's folder.
        p = fx.run(["convert", data, "-o", self.path("cls"), "--classes-from-dirs"])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertEqual(json.loads(fx.Dataset(self.path("cls")).meta["classes"]), ["notes", "s"])
        # A dataset given as the input itself is refused, saying what to do instead.
        p = fx.run(["convert", os.path.join(data, "v1"), "-o", self.path("again")])
        self.assertEqual(p.returncode, 1)
        self.assertIn("is a tarmac dataset (it holds manifest.json and labels.safetensors), "
                      "not raw data", p.stderr.decode())
        self.assertFalse(os.path.exists(self.path("again")))

    def test_a_run_that_converts_nothing_fails_unless_allowed(self):
        no_images = fx.write_tar(self.path("noimg.tar"),
                                 [("a/1.json", b'{"a": 1}'), ("a/2.json", b'{"a": 2}')])
        unparsed = fx.write_tar(self.path("unparsed.tar"), [("a/1.foo", b"x"), ("a/2.foo", b"y")])
        cases = [
            ([no_images, "--on-error", "skip"], None, "all 2 sample(s) were skipped as bad"),
            (["-"], b"", "the input holds no member"),
            ([unparsed, "--no-images"], None, "hold no label"),
        ]
        for i, (args, stdin, why) in enumerate(cases):
            out = self.path(f"empty{i}")
            p = fx.run(["convert", *args, "-o", out], stdin=stdin)
            err = p.stderr.decode()
            self.assertEqual(p.returncode, 1, err)
            self.assertIn("tarmac: error: no sample was converted: ", err)
            self.assertIn(why, err)
            self.assertIn("--allow-empty", err)
            self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))
            self.assertFalse(os.path.exists(os.path.join(out, ".tarmac-partial")))
            out = self.path(f"allowed{i}")
            p = fx.run(["convert", *args, "-o", out, "--allow-empty"], stdin=stdin)
            self.assertEqual(p.returncode, 0, p.stderr.decode())
            self.assertTrue(os.path.exists(os.path.join(out, "labels.safetensors")))

    def test_quiet_prints_only_errors(self):
        src = fx.write_tar(self.path("q.tar"), samples(3))
        p = fx.run(["convert", src, "-o", self.path("q-out"), "-q"])
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, b"", b""))
        p = fx.run(["merge", self.path("q-out"), "-o", self.path("q-merged"), "-q"])
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, b"", b""))
        p = fx.run(["verify", self.path("q-merged"), "-q"])
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, b"", b""))
        p = fx.run(["convert", self.path("missing.tar"), "-o", self.path("q-bad"), "-q"])
        self.assertEqual(p.returncode, 1)
        self.assertTrue(p.stderr.startswith(b"tarmac: error: "), p.stderr)

    def test_did_you_mean(self):
        p = fx.run(["covnert", "x.tar", "-o", "out"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("tarmac: error: unknown command 'covnert'; did you mean 'convert'?",
                      p.stderr.decode())
        p = fx.run(["convert", "x.tar", "-o", "out", "--szie", "256"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("did you mean '--size'?", p.stderr.decode())
        p = fx.run(["verify", "out", "--decdoe"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("did you mean '--decode'?", p.stderr.decode())
        p = fx.run(["frobnicate"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown command 'frobnicate'", p.stderr.decode())
        self.assertNotIn("did you mean", p.stderr.decode())

    def test_every_error_starts_tarmac_error(self):
        for args in ([], ["convert", "x.tar"], ["convert", "x.tar", "-o", "o", "--quality", "500"],
                     ["info"], ["convert", "x.tar", "-o", "o", "--on-error", "maybe"],
                     ["info", self.path("nothing-here")], ["covnert"]):
            p = fx.run(args)
            self.assertNotEqual(p.returncode, 0, args)
            self.assertTrue(p.stderr.startswith(b"tarmac: error: "), (args, p.stderr))

    def test_no_color(self):
        env = dict(os.environ)
        env.pop("NO_COLOR", None)
        _, coloured = fx.on_pty(["info", self.path("nothing")], env=env)
        self.assertRegex(coloured, SGR, "an error on a terminal is coloured by default")
        for value in ("1", "true"):
            _, plain = fx.on_pty(["info", self.path("nothing")], env={**env, "NO_COLOR": value})
            self.assertIn(b"tarmac: error: ", plain)
            self.assertNotRegex(plain, SGR)
        _, empty = fx.on_pty(["info", self.path("nothing")], env={**env, "NO_COLOR": ""})
        self.assertRegex(empty, SGR, "NO_COLOR set but empty: colour stays")

    def test_standard_input_on_a_terminal_is_refused(self):
        t0 = time.time()
        rc, text = fx.on_pty(["convert", "-", "-o", self.path("tty-out")], timeout=20)
        self.assertEqual(rc, 2, text)
        self.assertLess(time.time() - t0, 15)
        self.assertIn(b"tarmac: error: standard input ('-') is a terminal: pipe an archive in",
                      SGR.sub(b"", text))

    def test_bad_numbers_in_flags_are_refused(self):
        """Issue #25, item 6: --crop-scale inf made every image black and exited 0; --size 1e3
        was 1x1. Every numeric flag of every command is read whole, finite, within its range."""
        src = fx.write_tar(self.path("n.tar"), samples(2))
        ds = self.path("n-ds")
        self.assertEqual(fx.run(["convert", src, "-o", ds, "-q"]).returncode, 0)
        convert = ["convert", src, "-o", self.path("n-out")]
        bad = [
            (convert, "--crop-scale", "--crop-scale", "inf"),
            (convert, "--crop-scale", "--crop-scale", "1e-300"),
            (convert, "--crop-scale", "--crop-scale", "nan"),
            (convert, "--crop-scale", "--crop-scale", "0"),
            (convert, "--size", "--size", "192,256"),
            (convert, "--size", "--size", "192X256"),
            (convert, "--size", "--size", "192.5"),
            (convert, "--size", "--size", "1e3"),
            (convert, "--size", "--size", "64abc"),
            (convert, "--size", "--size", "0x64"),
            (convert, "--quality", "--quality", "0x50"),
            (convert, "--quality", "--quality", "101"),
            (convert, "--quality", "--quality", "95.5"),
            (convert, "-j", "--threads", "1025"),
            (convert, "--threads", "--threads", "4x"),
            (convert, "--pad-value", "--pad-value", "inf"),
            (convert, "--bucket-step", "--bucket-step", "6.5"),
            (convert, "--bucket-max-ratio", "--bucket-max-ratio", "nan"),
            (convert, "--checkpoint-every", "--checkpoint-every", "inf"),
            (convert, "--progress-every", "--progress-every", "nan"),
            (convert, "--max-pixels", "--max-pixels", "-1"),
            (convert, "--max-pixels", "--max-pixels", "1e6"),
            (convert, "--shard", "--shard", "1/2x"),
            (convert, "--shard", "--shard", "0/2.0"),
            (convert, "--shard-size", "--shard-size", "infG"),
            (convert, "--group-window", "--group-window", "1e30"),
            (convert, "--max-member-size", "--max-member-size", "0.5"),
            (convert, "--max-label-size", "--max-label-size", "16MB"),
            (convert, "--max-outputs-per-sample", "--max-outputs-per-sample", "0"),
            (convert, "--max-outputs-per-sample", "--max-outputs-per-sample", "1e4"),
            (convert, "--crop", "--crop box:X,Y,W,H", "box:1,2,inf,4", "inf"),
            (convert, "--crop", "--crop box:X,Y,W,H", "box:1,2,3,4abc", "4abc"),
            (["verify", ds], "-j", "--threads", "-1"),
            (["verify", ds], "--threads", "--threads", "1.5"),
            (["bench", ds], "--threads", "--threads", "1e3"),
            (["bench", ds], "--samples", "--samples", "-1"),
            (["preview", ds, "-o", self.path("n.png")], "--n", "--n", "1e3"),
            (["preview", ds, "-o", self.path("n.png")], "--seed", "--seed", "-1"),
            (["preview", ds, "-o", self.path("n.png")], "--tile-height", "--tile-height", "256px"),
            (["preview", ds, "-o", self.path("n.png")], "--skeleton", "--skeleton", "1-2x"),
        ]
        for command, flag, named, value, *shown in bad:
            args = [*command, flag, value]
            p = fx.run(args)
            err = p.stderr.decode()
            self.assertEqual(p.returncode, 2, (args, err))
            self.assertTrue(err.startswith("tarmac: error: " + named + ": "), (args, err))
            self.assertIn("'%s'" % (shown[0] if shown else value), err, args)
            self.assertIn("; accepted: ", err, args)
            self.assertFalse(os.path.exists(self.path("n-out")), args)
            # The same under --json: a usage error document.
            p = fx.run([*args, "--json"])
            self.assertEqual(p.returncode, 2, args)
            self.assertEqual(json.loads(p.stdout)["error"]["code"], "usage_error", args)
        # What is accepted still is.
        p = fx.run([*convert, "--crop-scale", "1.5", "--crop", "box:0,0,16,16", "--size", "8x12",
                    "--quality", "080", "-j", "2", "--shard-size", "1.5M", "--shard", "0/1", "-q"])
        self.assertEqual(p.returncode, 0, p.stderr)
        options = fx.Dataset(self.path("n-out")).manifest["options"]
        self.assertEqual(options["--quality"], "80")  # decimal, not octal 0o80
        self.assertEqual(options["--size"], "8x12")

    def test_option_rules_are_the_librarys_usage_errors(self):
        """Rules between options are checked once, by the library (a UsageError): the CLI exits 2
        with the library's message, before anything is read or written (issue #25)."""
        src = fx.write_tar(self.path("r.tar"), samples(2))
        tree = self.path("r-tree")
        fx.write_tree(tree, [("cat/1.png", fx.png(fx.smooth_rgb(8, 8)))])
        rules = [
            ([src, "--format", "keep", "--size", "64"],
             "--format keep stores the source bytes untouched; it cannot be combined with --crop or --size"),
            ([src, "--channels", "keep", "--format", "webp"],
             "--channels keep cannot be stored with --format webp: WebP and raw images are always "
             "3-channel (WebP has no grey images); use --format jpg or png, or --channels 3"),
            ([src, "--channels", "1", "--format", "keep"],
             "--channels 1 cannot be stored with --format keep: the source bytes are stored as they "
             "are, so they cannot be converted to grey; use --format jpg or png"),
            ([tree, "--classes-from-dirs", "--no-images"],
             "--classes-from-dirs takes each sample's class from the folder of its image; it cannot "
             "be combined with --no-images"),
            (["-", "--classes-from-dirs"],
             "--classes-from-dirs reads the inputs' names first, so it cannot read standard input ('-')"),
            ([src, "--table", self.path("t.csv"), "--no-images"],
             "--table: rows are made from the images they name; it cannot be combined with --no-images"),
            ([src, "--table", self.path("t.csv"), "--instances", "persons"],
             "--instances splits per-sample label files; with --table each row is already one output"),
            (["-", src, "--on-duplicate", "last"],
             "--on-duplicate last reads the inputs twice (member names first), so it cannot read "
             "standard input ('-'); use first or error"),
            (["-", "--resume"], "--resume cannot be used with standard input (-): it cannot be read again"),
        ]
        for i, (args, message) in enumerate(rules):
            out = self.path(f"r-out{i}")
            p = fx.run(["convert", *args, "-o", out], stdin=b"")
            err = p.stderr.decode()
            self.assertEqual(p.returncode, 2, (args, err))
            self.assertEqual(err, "tarmac: error: " + message + "\n", args)
            self.assertFalse(os.path.exists(out), args)  # refused before the output was made
            p = fx.run(["convert", *args, "-o", out, "--json"], stdin=b"")
            self.assertEqual(p.returncode, 2, args)
            doc = json.loads(p.stdout)["error"]
            self.assertEqual((doc["code"], doc["message"]), ("usage_error", message), args)

    def test_json_errors_are_json_documents(self):
        ds = self.path("j-ds")
        src = fx.write_tar(self.path("j.tar"), samples(2))
        self.assertEqual(fx.run(["convert", src, "-o", ds, "-q"]).returncode, 0)
        missing = self.path("j-missing")
        runs = [
            ["convert", self.path("j-none.tar"), "-o", self.path("j-out")],
            ["info", missing], ["ls", missing], ["cat", ds, "no/such/key"],
            ["merge", missing, "-o", self.path("j-merged")], ["bench", missing],
            ["convert", src, "-o", self.path("j-out2"), "--szie", "3"],
        ]
        for args in runs:
            p = fx.run([*args, "--json"])
            self.assertIn(p.returncode, (1, 2), args)
            doc = json.loads(p.stdout)  # one document, nothing else
            self.assertIn("error", doc, (args, doc))
            err = doc["error"]
            self.assertEqual(err["exit_code"], p.returncode, args)
            self.assertEqual(err["code"], "usage_error" if p.returncode == 2 else "data_error")
            self.assertTrue(err["message"], args)
            self.assertIn(err["message"], p.stderr.decode())
        # A command whose own document reports the failure prints only that one.
        p = fx.run(["verify", missing, "--json"])
        self.assertEqual(p.returncode, 1)
        self.assertFalse(json.loads(p.stdout)["ok"])
        with open(os.path.join(ds, fx.Dataset(ds).shards[0]), "r+b") as f:
            f.seek(700)
            b = f.read(1)
            f.seek(700)
            f.write(bytes([b[0] ^ 0xFF]))
        p = fx.run(["verify", ds, "--json"])
        self.assertEqual(p.returncode, 3)
        self.assertFalse(json.loads(p.stdout)["ok"])


class PrintableNamesTest(fx.TmpCase):
    """Keys and field names holding a newline, a tab, a terminal escape or a backslash are printed
    escaped by ls, info, cat and verify in text (\\n, \\t, \\xNN, \\\\: one sample one line, nothing
    a terminal acts on), and as they are in JSON."""

    KEYS = ["k\n1", "k\t2", "k\x1b[31m3", "b\\s"]
    SHOWN = ["k\\n1", "k\\t2", "k\\x1b[31m3", "b\\\\s"]
    FIELD, FIELD_SHOWN = "f\nx\x1b[2J", "f\\nx\\x1b[2J"

    @classmethod
    def build(cls):
        members = []
        for i, key in enumerate(cls.KEYS):
            members += [(key + ".png", fx.png(fx.smooth_rgb(8, 8, seed=i))), (key + ".json", fx.js({cls.FIELD: i}))]
        cls.out = os.path.join(cls.tmp, "odd-names")
        p = fx.run(["convert", fx.write_tar(os.path.join(cls.tmp, "odd.tar"), members), "-o", cls.out, "-q"])
        assert p.returncode == 0, p.stderr.decode()

    def text(self, *args, expect=0):
        p = fx.run(list(args))
        self.assertEqual(p.returncode, expect, p.stderr.decode(errors="replace"))
        for stream in (p.stdout, p.stderr):
            self.assertFalse(re.search(rb"[\x00-\x09\x0b-\x1f\x7f]", stream), stream)  # no control but \n
        return p.stdout.decode(), p.stderr.decode()

    def test_ls_prints_one_escaped_key_a_line(self):
        self.assertEqual(fx.Dataset(self.out).keys, self.KEYS)
        out, _ = self.text("ls", self.out)
        self.assertEqual(out, "".join(k + "\n" for k in self.SHOWN))
        out, _ = self.text("ls", self.out, "-l")
        self.assertEqual([line.split(None, 3)[3] for line in out.splitlines()], self.SHOWN)

    def test_ls_json_holds_the_keys_as_they_are(self):
        p = fx.run(["ls", self.out, "--json"])
        self.assertEqual([e["key"] for e in json.loads(p.stdout)], self.KEYS)

    def test_info_escapes_field_names(self):
        out, _ = self.text("info", self.out)
        self.assertIn("    " + self.FIELD_SHOWN + " ", out)
        p = fx.run(["info", self.out, "--json"])
        self.assertIn(self.FIELD, json.loads(p.stdout)["schema"])

    def test_cat_names_an_unknown_key_escaped(self):
        _, err = self.text("cat", self.out, "nope\x1b[2J\n", expect=1)
        self.assertIn("no sample 'nope\\x1b[2J\\n'", err)
        p = fx.run(["cat", self.out, self.KEYS[2], "--labels"])  # JSON: the key as it is
        doc = json.loads(p.stdout)
        self.assertEqual((doc["key"], doc["labels"][self.FIELD]), (self.KEYS[2], 2))

    def test_verify_names_a_damaged_sample_escaped(self):
        bad = self.path("damaged")
        subprocess.run(["cp", "-r", self.out, bad], check=True)
        ds = fx.Dataset(bad)
        at = int(ds.t["__image__.offset"][0]) + int(ds.t["__image__.size"][0]) // 2
        with open(os.path.join(bad, ds.shards[0]), "r+b") as f:
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0xFF]))
        out, _ = self.text("verify", bad, expect=3)
        self.assertIn("sample '" + self.SHOWN[0] + "'", out)


if __name__ == "__main__":
    unittest.main()
