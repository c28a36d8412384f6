"""`pipe:COMMAND` inputs (WebDataset's convention: the command's standard output is the input),
run as real processes by /bin/sh. Every dataset is compared byte for byte with the conversion of
the same archives from local files (tars written by Python's tarfile, a zip by zipfile), image
bytes with the source members, and the manifest's sizes and CRC-32s with zlib's. A failing
command is one line naming it, its status and its stderr's last line; SIGTERM kills the
command's whole process group (checked in /proc); SIGKILL mid-pipe then --resume runs the
command again, checks the bytes it re-reads, and gives the same dataset as one run.
"""
import gzip
import json
import os
import shlex
import signal
import subprocess
import sys
import tarfile
import time
import unittest
import zipfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

OPTIONS = ["--format", "keep", "--shard-size", "256K"]


def noise_png(seed, side=64):
    rng = np.random.RandomState(seed)
    return fx.png(rng.randint(0, 256, (side, side, 3), dtype=np.uint8))


def members(shard, n):
    out = []
    for i in range(n):
        key = f"s{shard}/{i:04d}"
        out += [(key + ".png", noise_png(shard * 1000 + i)), (key + ".json", fx.js({"i": i, "shard": shard}))]
    return out



def proc_stat(pid):
    """(state, process group) of a process from /proc, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[2])


def live_in_group(pgid):
    """Processes of group `pgid` that are not zombies (an orphan reaped late is no child left)."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(name)
            if st and st[1] == pgid and st[0] != "Z":
                pids.append(int(name))
    return pids


def children(pid):
    """The child processes of `pid` (all its threads'), from /proc."""
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def wait_for(cond, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    return cond()


class PipeInputs(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.src = {}
        for s, n in enumerate([12, 10, 14]):
            cls.src[s] = members(s, n)
            fx.write_tar(cls.path_of(f"{s}.tar"), cls.src[s])
        with open(cls.path_of("1.tar.gz"), "wb") as f:
            f.write(gzip.compress(fx.read_bytes(cls.path_of("1.tar")), mtime=0))
        # more than a batch of samples (64), for a checkpoint inside it while its command runs
        fx.write_tar(cls.path_of("big.tar"), members(5, 150))
        with open(cls.path_of("noise.bin"), "wb") as f:
            f.write(np.random.RandomState(3).bytes(3000))
        cls.refs = {}

    @classmethod
    def path_of(cls, name):
        return os.path.join(cls.tmp, name)

    def q(self, name):
        return shlex.quote(self.path(name))

    def tarmac(self, *args, timeout=120):
        return subprocess.run([fx.TARMAC, *args], capture_output=True, text=True, timeout=timeout)

    def convert(self, inputs, *flags, expect=0, stdin=None):
        out = self.path("out%d" % len(os.listdir(self.tmp)))
        p = subprocess.run([fx.TARMAC, "convert", *inputs, "-o", out, *OPTIONS, *flags], input=stdin,
                           capture_output=True, timeout=120)
        self.assertEqual(p.returncode, expect, p.stderr.decode(errors="replace"))
        return out, p

    def reference(self, names, *flags):
        """The conversion of local files `names` (in the class folder), in that order."""
        key = (tuple(names), flags)
        if key not in self.refs:
            self.refs[key], _ = self.convert([self.path(n) for n in names], *flags)
        return self.refs[key]

    def assert_same_dataset(self, out, ref):
        fx.assert_same_files(self, out, ref)

    def manifest(self, out):
        with open(os.path.join(out, "manifest.json")) as f:
            return json.load(f)

    def shard_members(self, out):
        """Every member of the output shards, read with Python's tarfile."""
        got = {}
        for name in sorted(os.listdir(out)):
            if name.endswith(".tar"):
                with tarfile.open(os.path.join(out, name)) as t:
                    for m in t.getmembers():
                        got[m.name] = t.extractfile(m).read()
        return got

    def test_cat_is_the_local_file(self):
        out, _ = self.convert([f"pipe:cat {self.q('0.tar')}"])
        self.assert_same_dataset(out, self.reference(["0.tar"]))
        # the images are the source members' bytes (--format keep), as tarfile reads them
        images = sorted(v for k, v in self.shard_members(out).items() if k.endswith(".png"))
        self.assertEqual(images, sorted(d for n, d in self.src[0] if n.endswith(".png")))
        data = fx.read_bytes(self.path("0.tar"))
        [entry] = self.manifest(out)["inputs"]
        # the name as given; every byte the command wrote read (its end padding too) and summed
        self.assertEqual(entry["path"], f"pipe:cat {self.q('0.tar')}")
        self.assertEqual((entry["size"], entry["crc32"]), (len(data), fx.crc_hex(data)))

    def test_gzip_through_a_pipe(self):
        ref = self.reference(["1.tar"])
        out, _ = self.convert([f"pipe:gzip -dc {self.q('1.tar.gz')}"])
        self.assert_same_dataset(out, ref)
        # compressed bytes through the pipe: tarmac inflates them itself
        out, _ = self.convert([f"pipe:cat {self.q('1.tar.gz')}"])
        self.assert_same_dataset(out, ref)
        gz = fx.read_bytes(self.path("1.tar.gz"))
        self.assertEqual(self.manifest(out)["inputs"][0]["crc32"], fx.crc_hex(gz))

    def test_several_pipes_in_the_order_given(self):
        inputs = [f"pipe:cat {self.q('2.tar')}", f"pipe:gzip -dc < {self.q('1.tar.gz')}", self.path("0.tar")]
        out, _ = self.convert(inputs)
        self.assert_same_dataset(out, self.reference(["2.tar", "1.tar", "0.tar"]))
        self.assertEqual([i["path"] for i in self.manifest(out)["inputs"]], inputs)

    def test_braces_go_to_the_shell_as_written(self):
        # tarmac expands {A..B} in s3:// and http(s):// names, not in a command: one input, whose
        # command names the file called x{0..1}.tar (dash, /bin/sh, expands no braces either)
        odd = self.path("x{0..1}.tar")
        with open(odd, "wb") as f:
            f.write(fx.read_bytes(self.path("2.tar")))
        out, _ = self.convert([f"pipe:cat {shlex.quote(odd)}"])
        self.assert_same_dataset(out, self.reference(["2.tar"]))
        self.assertEqual(len(self.manifest(out)["inputs"]), 1)
        # a file whose name starts with pipe: is read as a file through ./
        os.makedirs(self.path("odd"), exist_ok=True)
        with open(self.path("odd/pipe:x.tar"), "wb") as f:
            f.write(fx.read_bytes(self.path("2.tar")))
        p = subprocess.run([fx.TARMAC, "convert", "./pipe:x.tar", "-o", self.path("odd-out"), *OPTIONS],
                           cwd=self.path("odd"), capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_same_dataset(self.path("odd-out"), self.reference(["2.tar"]))

    def test_zip_from_a_pipe_reads_as_from_stdin(self):
        zpath = self.path("z.zip")
        with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
            for name, data in self.src[0]:
                z.writestr(name, data)
        from_stdin, _ = self.convert(["-"], stdin=fx.read_bytes(zpath))
        out, _ = self.convert([f"pipe:cat {shlex.quote(zpath)}"])
        self.assert_same_dataset(out, from_stdin)
        self.assert_same_dataset(out, self.reference(["0.tar"]))

    def test_parts_split_pipes_like_files(self):
        inputs = [f"pipe:cat {self.q(n)}" for n in ("0.tar", "1.tar", "2.tar")]
        out, _ = self.convert(inputs, "--shard", "1/3")
        self.assert_same_dataset(out, self.reference(["0.tar", "1.tar", "2.tar"], "--shard", "1/3"))
        m = self.manifest(out)
        self.assertEqual([i["path"] for i in m["inputs"]], [inputs[1]])
        self.assertEqual(m["part"]["split"], "inputs")

    def test_two_pass_options_run_the_command_again(self):
        # --on-duplicate last reads every input's names first: the commands run twice
        inputs = [f"pipe:cat {self.q('0.tar')}", f"pipe:cat {self.q('0.tar')}"]
        out, _ = self.convert(inputs, "--on-duplicate", "last")
        ref = self.reference(["0.tar", "0.tar"], "--on-duplicate", "last")
        self.assert_same_dataset(out, ref)

    def test_a_table_from_a_command(self):
        table = self.path("t.csv")
        with open(table, "w") as f:
            f.write("image_path,label\n" + "".join(f"s0/{i:04d}.png,{i * 3}\n" for i in range(11, -1, -2)))
        ref, _ = self.convert([self.path("0.tar")], "--table", table)
        command = f"pipe:cat {shlex.quote(table)}"
        out, _ = self.convert([self.path("0.tar")], "--table", command)
        self.assert_same_dataset(out, ref)
        entry = self.manifest(out)["table"]
        self.assertEqual((entry["path"], entry["crc32"], entry["rows"]), (command, fx.crc_hex(fx.read_bytes(table)), 6))
        p = self.tarmac("convert", self.path("0.tar"), "-o", self.path("no-table"), "--table",
                        "pipe:echo image_path; exit 5")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stderr.strip().splitlines(), [
            "tarmac: error: cannot read 'pipe:echo image_path; exit 5': the command exited with status 5 "
            "(nothing on its standard error)"])

    def assert_failure(self, inputs, words):
        out = self.path("failed%d" % len(os.listdir(self.tmp)))
        p = subprocess.run([fx.TARMAC, "convert", *inputs, "-o", out, *OPTIONS], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(p.returncode, 1, p.stderr)
        errors = [line for line in p.stderr.splitlines() if line.startswith("tarmac: error: ")]
        # one line says it all: the input, the status, the stderr's last line
        self.assertTrue(errors, p.stderr)
        for w in words:
            self.assertIn(w, errors[0])
        self.assertEqual(sum(inputs[-1] in line for line in p.stderr.splitlines()), 1, p.stderr)
        # nothing published
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))
        self.assertFalse(os.path.exists(os.path.join(out, "manifest.json")))
        return errors[0]

    def test_failing_commands(self):
        tar = self.q("0.tar")
        line = self.assert_failure(["pipe:false"], [])
        self.assertEqual(line, "tarmac: error: cannot read 'pipe:false': the command exited with status 1 "
                               "(nothing on its standard error)")
        # a whole, valid archive, then a non-zero exit: the input failed all the same
        cmd = f"pipe:sh -c 'cat {tar}; echo first >&2; echo \"the last words\" >&2; exit 3'"
        line = self.assert_failure([self.path("2.tar"), cmd], [])
        self.assertEqual(line, f"tarmac: error: cannot read '{cmd}': the command exited with status 3; "
                               "its standard error ends: \"the last words\"")
        self.assert_failure(["pipe:no-such-command-anywhere x.tar"],
                            ["'pipe:no-such-command-anywhere x.tar'", "status 127", "no-such-command-anywhere: not found"])
        self.assert_failure([f"pipe:cat {tar}; kill -9 $$"], ["the command was killed by SIGKILL"])
        # the output is no archive at all: said of the command's output
        self.assert_failure([f"pipe:cat {self.q('noise.bin')}"],
                            [f"the output of 'pipe:cat {self.q('noise.bin')}' is not an archive tarmac can read"])

    def test_failing_command_under_skip_is_the_inputs_error(self):
        cmd = f"pipe:cat {self.q('1.tar')}; echo oops >&2; exit 4"
        out, p = self.convert([self.path("0.tar"), cmd], "--on-error", "skip")
        m = self.manifest(out)
        self.assertEqual(m["counts"]["input_errors"], 1)
        self.assertNotIn("error", m["inputs"][0])
        self.assertEqual(m["inputs"][1]["error"],
                         f"cannot read '{cmd}': the command exited with status 4; its standard error ends: \"oops\"")
        self.assertIn("INPUT ERROR: cannot read", p.stdout.decode())
        # its samples were read before it failed, as for a truncated archive
        self.assertEqual(m["counts"]["samples"], 12 + 10)

    def test_a_pipe_naming_no_command_is_a_usage_error(self):
        p = self.tarmac("convert", "pipe:", "-o", self.path("none"))
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("input 'pipe:' names no command: write pipe:COMMAND", p.stderr)

    def test_sigterm_kills_the_commands_group(self):
        for command in ("pipe:sleep 100; echo never", "pipe:cat /dev/zero"):
            with self.subTest(command=command):
                proc = subprocess.Popen([fx.TARMAC, "convert", command, "-o", self.path("stop%d" % len(os.listdir(self.tmp))),
                                         *OPTIONS], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                kids = wait_for(lambda: children(proc.pid), 30)
                self.assertEqual(len(kids), 1, kids)
                leader = kids[0]
                # its own process group: set by tarmac and by the child right after the fork,
                # which this may see before either has run (under ASan it did)
                wait_for(lambda: proc_stat(leader)[1] == leader, 10)
                self.assertEqual(proc_stat(leader)[1], leader)
                if command.startswith("pipe:sleep"):
                    wait_for(lambda: len(live_in_group(leader)) >= 2, 10)  # sh and its sleep
                time.sleep(0.3)
                t0 = time.time()
                proc.send_signal(signal.SIGTERM)
                _, err = proc.communicate(timeout=60)
                elapsed = time.time() - t0
                self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
                self.assertIn("stopped by SIGTERM", err)
                self.assertNotIn("did not stop in time", err)  # stopped itself, not by the watchdog
                self.assertLess(elapsed, 8, err)
                self.assertEqual(live_in_group(leader), [], "the command's group outlived tarmac")

    def stalling_command(self, name, at, go):
        """A command writing the first `at` bytes of `name`, then waiting for the file `go`,
        then the rest."""
        return (f"pipe:head -c {at} {self.q(name)}; while [ ! -e {shlex.quote(go)} ]; do sleep 0.05; done; "
                f"tail -c +{at + 1} {self.q(name)}")

    def kill_mid_pipe(self, command, out, flags):
        """Runs a conversion of [0.tar, command] until its checkpoint covers samples of the
        command's input, then SIGKILLs it; returns the command's process group."""
        args = [fx.TARMAC, "convert", self.path("0.tar"), command, "-o", out, *OPTIONS, *flags]
        proc = subprocess.Popen([*args, "--checkpoint-every", "0"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        cp = os.path.join(out, ".tarmac-partial", "checkpoint.json")

        def position():
            try:
                with open(cp) as f:
                    return json.load(f)["read"]
            except (OSError, ValueError, KeyError):
                return None
        read = wait_for(lambda: (lambda r: r if r and r["input"] == 1 and r["bytes"] > 0 else None)(position()), 60)
        kids = children(proc.pid)
        proc.send_signal(signal.SIGKILL)
        self.assertEqual(proc.wait(), -signal.SIGKILL, "finished before the kill")
        self.assertTrue(read, "no checkpoint inside the pipe's input")
        self.assertFalse(read["end"])
        return args, kids

    def test_resume_after_sigkill_mid_pipe(self):
        go = self.path("go-resume")
        data = fx.read_bytes(self.path("big.tar"))
        command = self.stalling_command("big.tar", len(data) * 2 // 3, go)
        flags = ["--group-window", "64K"]  # samples leave the window while the command still runs
        out = self.path("killed")
        args, kids = self.kill_mid_pipe(command, out, flags)
        # the command (sh, killed with tarmac by its parent-death signal) is gone
        self.assertEqual(len(kids), 1, kids)
        self.assertEqual(wait_for(lambda: not live_in_group(kids[0]), 10), True)
        open(go, "w").close()
        p = self.tarmac(*args[1:], "--resume")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("resumed an interrupted run", p.stderr)
        self.assert_same_dataset(out, self.reference(["0.tar", "big.tar"], *flags))
        entry = self.manifest(out)["inputs"][1]
        self.assertEqual((entry["path"], entry["size"], entry["crc32"]), (command, len(data), fx.crc_hex(data)))

    def test_resume_refuses_a_command_whose_output_changed(self):
        go = self.path("go-changed")
        name = "changing.tar"
        with open(self.path(name), "wb") as f:
            f.write(fx.read_bytes(self.path("big.tar")))
        command = self.stalling_command(name, os.path.getsize(self.path(name)) * 2 // 3, go)
        out = self.path("changed")
        args, _ = self.kill_mid_pipe(command, out, ["--group-window", "64K"])
        fx.write_tar(self.path(name), members(7, 150))  # other bytes from the same command
        open(go, "w").close()
        p = self.tarmac(*args[1:], "--resume")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"cannot resume: input '{command}' changed since the checkpoint: the command wrote "
                      "other bytes", p.stderr)
        self.assertTrue(os.path.exists(os.path.join(out, ".tarmac-partial", "checkpoint.json")))


if __name__ == "__main__":
    unittest.main()
