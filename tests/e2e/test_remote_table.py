"""`convert --table` read from s3:// (the real S3-compatible server of scripts/s3-local.sh, the
tables uploaded with boto3) and from http:// (Python's http.server with the Range handler of
test_s3.py): CSV and JSON Lines tables give the same dataset, byte for byte, as the same table
read from local disk; the manifest's table CRC-32 is zlib's of the bytes uploaded. A missing
table is one line naming the URL and the server's code; a connection cut mid-table (the fault
proxy of s3_local.py) is retried and resumed by range. --resume knows a remote table by its size
and CRC-32: the same table resumes to the dataset of one run, a replaced one is refused.

Needs swift-proxy swift-account swift-container swift-object memcached and python3-boto3
(scripts/setup-deps.sh test) for the s3:// cases, which skip without them.
"""
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import unittest
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402
import s3_local as s3l  # noqa: E402
from s3_local import FaultProxy  # noqa: E402
from test_s3 import RangeHandler, ThreadingServer  # noqa: E402

BUCKET = "tarmac-tables"
IMAGES = 150  # more than a batch (64 samples): a checkpoint comes while the input still runs
OPTIONS = ["--format", "keep", "--shard-size", "512K"]


def noise_png(seed, side=64):
    rng = np.random.RandomState(seed)
    return fx.png(rng.randint(0, 256, (side, side, 3), dtype=np.uint8))



def tables(rows):
    """A CSV and a JSON Lines table of `rows` (image_path, label, score, caption)."""
    csv = "image_path,label,score,caption\n" + "".join(
        f"img/{i:04d}.png,{i % 7},{i * 0.25},\"a caption, number {i}\"\n" for i in rows)
    jsonl = "".join(json.dumps({"image_path": f"img/{i:04d}.png", "label": i % 7, "score": i * 0.25,
                                "meta": {"caption": f"a caption, number {i}"}}) + "\n" for i in rows)
    return csv.encode(), jsonl.encode()


class RemoteTable(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.tar = os.path.join(cls.tmp, "images.tar")
        fx.write_tar(cls.tar, [(f"img/{i:04d}.png", noise_png(i)) for i in range(IMAGES)])
        # rows out of image order, one image twice: the table's order is the dataset's
        rows = [*range(IMAGES - 1, -1, -2), *range(0, IMAGES, 2), 3]
        cls.www = os.path.join(cls.tmp, "www")
        os.makedirs(cls.www)
        cls.table = {}
        cls.table["csv"], cls.table["jsonl"] = tables(rows)
        for kind, data in cls.table.items():
            with open(os.path.join(cls.www, "t." + kind), "wb") as f:
                f.write(data)
        handler = lambda *a, **k: RangeHandler(*a, directory=cls.www, **k)  # noqa: E731
        cls.http = ThreadingServer(("127.0.0.1", 0), handler)
        threading.Thread(target=cls.http.serve_forever, daemon=True).start()
        cls.addClassCleanup(cls.http.server_close)
        cls.addClassCleanup(cls.http.shutdown)
        cls.http_url = f"http://127.0.0.1:{cls.http.server_address[1]}"
        cls.refs = {}
        cls.env = dict(os.environ)
        cls.s3_missing = s3l.missing_packages()
        if not cls.s3_missing:
            s3l.start_server(cls)
            cls.s3.create_bucket(Bucket=BUCKET)
            for kind, data in cls.table.items():
                cls.s3.put_object(Bucket=BUCKET, Key="tables/t." + kind, Body=data)

    def need_s3(self):
        if self.s3_missing:
            self.skipTest(", ".join(self.s3_missing) + " not installed (scripts/setup-deps.sh test)")

    def tarmac(self, *args, timeout=120):
        return subprocess.run([fx.TARMAC, *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def convert(self, table, *flags, inputs=None):
        out = self.path("out%d" % len(os.listdir(self.tmp)))
        p = self.tarmac("convert", *(inputs or [self.tar]), "-o", out, "--table", table, *OPTIONS, *flags)
        self.assertEqual(p.returncode, 0, p.stderr)
        return out

    def reference(self, kind):
        if kind not in self.refs:
            self.refs[kind] = self.convert(os.path.join(self.www, "t." + kind))
        return self.refs[kind]

    def assert_same_dataset(self, out, ref):
        fx.assert_same_files(self, out, ref)

    def assert_table_entry(self, out, url, kind):
        with open(os.path.join(out, "manifest.json")) as f:
            entry = json.load(f)["table"]
        data = self.table[kind]
        self.assertEqual((entry["path"], entry["bytes"], entry["crc32"], entry["rows"]),
                         (url, len(data), "%08x" % zlib.crc32(data), IMAGES + 1))

    def test_s3_tables_are_the_local_tables(self):
        self.need_s3()
        for kind in ("csv", "jsonl"):
            url = f"s3://{BUCKET}/tables/t.{kind}"
            out = self.convert(url)
            self.assert_same_dataset(out, self.reference(kind))
            self.assert_table_entry(out, url, kind)

    def test_http_tables_are_the_local_tables(self):
        for kind in ("csv", "jsonl"):
            url = f"{self.http_url}/t.{kind}"
            out = self.convert(url)
            self.assert_same_dataset(out, self.reference(kind))
            self.assert_table_entry(out, url, kind)

    def assert_one_line_error(self, table, *words):
        out = self.path("failed%d" % len(os.listdir(self.tmp)))
        p = self.tarmac("convert", self.tar, "-o", out, "--table", table)
        self.assertEqual(p.returncode, 1, p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        for w in words:
            self.assertIn(w, lines[0])
        self.assertFalse(os.path.exists(out), "nothing is written")

    def test_a_missing_table_is_one_line(self):
        url = f"{self.http_url}/missing.csv"
        self.assert_one_line_error(url, f"--table: cannot read '{url}': HTTP 404")
        if not self.s3_missing:
            url = f"s3://{BUCKET}/tables/missing.csv"
            self.assert_one_line_error(url, f"--table: cannot read '{url}': NoSuchKey (HTTP 404)")
            url = "s3://no-such-bucket/t.csv"
            self.assert_one_line_error(url, f"cannot read '{url}'", "NoSuchBucket")

    def test_a_cut_connection_is_resumed_by_range(self):
        cases = [("http", self.http.server_address[1], "/t.csv")]
        if not self.s3_missing:
            cases.append(("s3", self.port, f"s3://{BUCKET}/tables/t.csv"))
        size = len(self.table["csv"])
        for name, port, where in cases:
            with self.subTest(server=name):
                proxy = FaultProxy(port, cut_after=size // 3, cuts=2)
                self.addCleanup(proxy.close)
                if name == "http":
                    out = self.convert(proxy.url + where)
                else:
                    out = self.convert(where, "--endpoint-url", proxy.url)
                self.assert_same_dataset(out, self.reference("csv"))
                self.assertEqual(proxy.cut, 2)
                # each retry asked for the bytes from where the cut left it, not from the start
                self.assertEqual(len(proxy.ranges), 2, proxy.ranges)
                self.assertTrue(all(0 < r < size for r in proxy.ranges), proxy.ranges)

    def kill_mid_run(self, table, out, go):
        """Converts the images through a command that stalls after 2/3 of them (until `go`
        exists), with `table`; SIGKILLs the run once a checkpoint covers samples. Returns the
        arguments to run it again."""
        data = fx.read_bytes(self.tar)
        at = len(data) * 2 // 3
        q = shlex.quote
        command = (f"pipe:head -c {at} {q(self.tar)}; while [ ! -e {q(go)} ]; do sleep 0.05; done; "
                   f"tail -c +{at + 1} {q(self.tar)}")
        args = ["convert", command, "-o", out, "--table", table, *OPTIONS, "--group-window", "64K"]
        code, cp = fx.kill_at_checkpoint(args, out, 1, timeout=60, env=self.env)
        self.assertEqual(code, -signal.SIGKILL, "finished before the kill")
        self.assertGreater(cp["entries"], 0)
        return args

    def test_resume_knows_the_table_by_its_bytes(self):
        self.need_s3()
        url = f"s3://{BUCKET}/tables/resumed.csv"
        self.s3.put_object(Bucket=BUCKET, Key="tables/resumed.csv", Body=self.table["csv"])
        go = self.path("go-same")
        out = self.path("resumed")
        args = self.kill_mid_run(url, out, go)
        open(go, "w").close()
        p = self.tarmac(*args, "--resume")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("resumed an interrupted run", p.stderr)
        self.assert_same_dataset(out, self.reference("csv"))

        # the same table with one label changed: same name, other bytes
        url = f"s3://{BUCKET}/tables/replaced.csv"
        self.s3.put_object(Bucket=BUCKET, Key="tables/replaced.csv", Body=self.table["csv"])
        go = self.path("go-replaced")
        out = self.path("replaced")
        args = self.kill_mid_run(url, out, go)
        changed = self.table["csv"].replace(b"img/0000.png,0,", b"img/0000.png,5,")
        self.assertNotEqual(changed, self.table["csv"])
        self.s3.put_object(Bucket=BUCKET, Key="tables/replaced.csv", Body=changed)
        open(go, "w").close()
        p = self.tarmac(*args, "--resume")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"the table '{url}' is not the same (its size or CRC-32 differ) as the interrupted run's",
                      p.stderr)
        self.assertTrue(os.path.exists(os.path.join(out, ".tarmac-partial", "checkpoint.json")))


if __name__ == "__main__":
    unittest.main()
