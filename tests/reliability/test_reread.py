"""A command read twice is compared, and a table from a command is bounded (docs/reliability.md):

- `--on-duplicate last` and `--classes-from-dirs` read every input twice (a pre-pass of member
  names, then the conversion). A `pipe:` command whose output differs between its two runs (here
  a script with a counter file, printing one tar on its first run and another on its second)
  fails the run naming the command and both CRC-32s (computed here with zlib over the tars
  Python's tarfile wrote), and leaves nothing that looks like a dataset; a command that prints
  the same bytes twice converts as its output saved to a file does.
- An endless `--table 'pipe:yes'` stops at --max-table-size with a message naming the table, the
  bound and the flag; with the default bound under an address-space limit it fails naming the
  table and the flag, not with a bare "std::bad_alloc".
"""
import os
import resource
import subprocess
import sys
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fixtures as fx  # noqa: E402


def image(seed):
    return fx.jpg(fx.smooth_rgb(48, 40, seed=seed), quality=90)


class RereadTest(fx.TmpCase):
    @classmethod
    def build(cls):
        # Two different outputs of one command: run 1 prints first.tar, run 2 second.tar.
        cls.first = fx.write_tar(cls.path(cls, "first.tar"), [
            ("a.jpg", image(1)), ("a.json", fx.js({"v": 1})),
            ("b.jpg", image(2)), ("b.json", fx.js({"v": 2}))])
        cls.second = fx.write_tar(cls.path(cls, "second.tar"), [
            ("a.jpg", image(3)), ("a.json", fx.js({"v": 3})),
            ("c.jpg", image(4)), ("c.json", fx.js({"v": 4}))])
        # Class folders: the second run has lost "dog".
        cls.classes_first = fx.write_tar(cls.path(cls, "classes-first.tar"), [
            ("cat/1.jpg", image(5)), ("dog/2.jpg", image(6)), ("eel/3.jpg", image(7))])
        cls.classes_second = fx.write_tar(cls.path(cls, "classes-second.tar"), [
            ("cat/1.jpg", image(5)), ("eel/3.jpg", image(7))])
        cls.empty = os.path.join(cls.tmp, "no-images")
        os.makedirs(cls.empty)

    def counting_command(self, name, first, second):
        """pipe:COMMAND printing `first` on its first run and `second` on every later one."""
        script = self.path(name + ".sh")
        counter = self.path(name + ".count")
        with open(script, "w") as f:
            f.write('n=$(cat "%s" 2>/dev/null || echo 0)\necho $((n + 1)) > "%s"\n'
                    'if [ "$n" = 0 ]; then cat "%s"; else cat "%s"; fi\n' % (counter, counter, first, second))
        return "pipe:sh " + script

    @staticmethod
    def crc(path):
        with open(path, "rb") as f:
            return "%08x" % (zlib.crc32(f.read()) & 0xFFFFFFFF)

    def assert_no_dataset(self, out):
        names = os.listdir(out) if os.path.isdir(out) else []
        self.assertNotIn("manifest.json", names)
        self.assertNotIn("labels.safetensors", names)

    def test_pipe_differs_on_second_read_fails(self):
        command = self.counting_command("dup", self.first, self.second)
        out = self.path("out-dup")
        p = fx.run(["convert", command, "-o", out, "--on-duplicate", "last", "-q"])
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 1, err)
        self.assertIn(command + " gave other bytes on its second run (CRC-32 %s then %s"
                      % (self.crc(self.first), self.crc(self.second)), err)
        self.assertIn("make the command deterministic or write its output to a file", err)
        self.assert_no_dataset(out)

    def test_pipe_same_on_both_reads_converts_as_its_file(self):
        command = self.counting_command("same", self.first, self.first)
        out, ref = self.path("out-same"), self.path("ref-same")
        p = fx.run(["convert", command, "-o", out, "--on-duplicate", "last", "-q"])
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        with open(self.path("same.count")) as f:
            self.assertEqual(f.read().strip(), "2", "the command was run twice")
        p = fx.run(["convert", self.first, "-o", ref, "--on-duplicate", "last", "-q"])
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        for name in ("labels.safetensors", "shard-000000.tar"):
            self.assertEqual(fx.read_bytes(os.path.join(out, name)), fx.read_bytes(os.path.join(ref, name)), name)

    def test_classes_lost_between_runs_fails(self):
        command = self.counting_command("classes", self.classes_first, self.classes_second)
        out = self.path("out-classes")
        p = fx.run(["convert", command, "-o", out, "--classes-from-dirs", "-q"])
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 1, err)
        self.assertIn(command + " gave other bytes on its second run (CRC-32 %s then %s"
                      % (self.crc(self.classes_first), self.crc(self.classes_second)), err)
        self.assert_no_dataset(out)

    def test_endless_table_pipe_bounded(self):
        out = self.path("out-yes")
        p = fx.run(["convert", self.empty, "-o", out, "--table", "pipe:yes", "--table-format", "list",
                    "--max-table-size", "1M", "-q"], timeout=60)
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("table 'pipe:yes'", err)
        self.assertIn("1.0 MiB", err)
        self.assertIn("--max-table-size", err)
        self.assert_no_dataset(out)

    def test_endless_table_pipe_out_of_memory_names_the_table(self):
        # The default bound (16 GiB) is larger than the 1 GiB this run may map: the read runs out
        # of memory first, which must say so naming the table and the flag.
        if fx.asan_build():
            self.skipTest("an address-space limit cannot apply under ASan (its shadow memory)")
        limit = 1 << 30
        out = self.path("out-yes-oom")
        p = subprocess.run([fx.TARMAC, "convert", self.empty, "-o", out, "--table", "pipe:yes",
                            "--table-format", "list", "--threads", "1", "-q"], capture_output=True,
                           timeout=120,
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("out of memory reading table 'pipe:yes'", err)
        self.assertIn("--max-table-size", err)
        self.assertNotEqual(err.strip(), "tarmac: error: std::bad_alloc")
        self.assert_no_dataset(out)


if __name__ == "__main__":
    unittest.main()
