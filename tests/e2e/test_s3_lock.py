"""The one-writer lock of `tarmac convert -o s3://bucket/prefix/` against a server that honours
conditional PUTs: Ceph's RGW (started by `S3_SERVER=radosgw scripts/s3-local.sh`, as users
start it), where the lock object is created with PUT + If-None-Match: * and the second writer
gets 412 PreconditionFailed. (Swift's s3api answers 501 instead: test_s3_output.py covers that.)
A proxy run by the test holds the lock PUTs of two runs until both have arrived, so that they
race at the server, and holds shard uploads until the test lets them go. What is in the bucket
is read with boto3, not tarmac, and compared with a local conversion of the same tars.

Needs radosgw, ceph-mon, ceph-osd (scripts/setup-deps.sh ci) and python3-boto3 (test); skips,
saying which is missing, without them.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402
import s3_local as s3l  # noqa: E402
from test_s3 import noise_png  # noqa: E402

BUCKET = "tarmac-lock"
SHARDS = ["in-000.tar", "in-001.tar"]
OPTIONS = ["--format", "keep", "--shard-size", "300K"]
LOCK = ".tarmac-lock"


class GateProxy(s3l.TcpProxy):
    """A TCP proxy to `upstream_port` (one request per connection, as tarmac sends them) that
    holds the first `lock_puts` PUTs of the lock object until all have arrived, then lets them
    go together; holds every PUT of a shard until `shards` is set; and holds the requests
    hold() names until their event is set. `log` lists (method, key, status) of each request."""

    def __init__(self, upstream_port, lock_puts=1):
        self.lock_barrier = threading.Barrier(lock_puts, timeout=60)
        self.lock_puts = lock_puts
        self.shards = threading.Event()
        self.log = []
        self.holds = {}  # (method, key suffix, n) -> (arrived, go)
        super().__init__(upstream_port)

    def hold(self, method, suffix, n):
        """Holds the n-th (1-based) `method` request of a key ending in `suffix`: returns the
        events (arrived, go): set when it arrives, and to be set to let it go."""
        events = self.holds[(method, suffix, n)] = (threading.Event(), threading.Event())
        return events

    def statuses(self, method, suffix):
        with self.lock:
            return self.statuses_locked(method, suffix)

    def statuses_locked(self, method, suffix):
        return [s for m, k, s in self.log if m == method and k.endswith(suffix)]

    def handle(self, client):
        head = self.read_head(client)
        if head is None:
            return
        method, target = head.split(b" ")[:2]
        method, path = method.decode(), target.decode().partition("?")[0]
        key = path.split("/", 2)[2] if path.count("/") >= 2 else ""
        entry = [method, key, None]
        with self.lock:
            self.log.append(entry)
            held = [events for (m, suffix, n), events in self.holds.items()
                    if m == method and key.endswith(suffix) and
                    n == sum(1 for e in self.log if e[0] == method and e[1].endswith(suffix))]
            racing = method == "PUT" and key.endswith(LOCK) and len(self.statuses_locked("PUT", LOCK)) <= self.lock_puts
        if racing:
            self.lock_barrier.wait()
        for arrived, go in held:
            arrived.set()
            go.wait(120)
        if method == "PUT" and key.endswith(".tar"):
            self.shards.wait(120)
        up = socket.create_connection(self.upstream)
        up.sendall(head)

        def upstream_to_client():
            try:
                while True:
                    data = up.recv(65536)
                    if not data:
                        break
                    if entry[2] is None and data.startswith(b"HTTP/1.1 ") and not data.startswith(b"HTTP/1.1 100"):
                        entry[2] = int(data[9:12])
                    client.sendall(data)
            except OSError:
                pass
            for s in (client, up):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

        threading.Thread(target=upstream_to_client, daemon=True).start()
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                up.sendall(data)
        except OSError:
            pass


class S3Lock(fx.TmpCase):
    @classmethod
    def build(cls):
        s3l.start_server(cls, "radosgw")
        cls.s3.create_bucket(Bucket=BUCKET)
        local = os.path.join(cls.tmp, "local")
        os.makedirs(local)
        for s, name in enumerate(SHARDS):
            members = []
            for i in range(12):
                key = f"{s}/{i:04d}"
                members += [(key + ".png", noise_png(s * 100 + i)), (key + ".json", fx.js({"cls": i}))]
            fx.write_tar(os.path.join(local, name), members)
        cls.inputs = [os.path.join(local, n) for n in SHARDS]
        cls.reference = os.path.join(cls.tmp, "reference")
        subprocess.run([fx.TARMAC, "convert", "-q", *cls.inputs, "-o", cls.reference, *OPTIONS], check=True)

    def keys(self, prefix):
        got = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
        return sorted(o["Key"][len(prefix):] for o in got.get("Contents", []))

    def lock_record(self, prefix):
        return json.loads(self.s3.get_object(Bucket=BUCKET, Key=prefix + LOCK)["Body"].read())

    def convert_args(self, prefix, checkpoint, *flags):
        return [fx.TARMAC, "convert", "-q", *self.inputs, "-o", f"s3://{BUCKET}/{prefix}", *OPTIONS,
                "--checkpoint-dir", self.path(checkpoint), *flags]

    def start(self, prefix, checkpoint, *flags):
        p = subprocess.Popen(self.convert_args(prefix, checkpoint, *flags), env=self.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.addCleanup(p.kill)
        return p

    def run_convert(self, prefix, checkpoint, *flags):
        return subprocess.run(self.convert_args(prefix, checkpoint, *flags), env=self.env, capture_output=True,
                              text=True, timeout=180)

    def wait_for(self, what, seconds=60):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if what():
                return True
            time.sleep(0.05)
        return False

    def assert_is_reference(self, prefix, resumed=False):
        """Every object byte for byte as the local run's file (the manifest, which names the
        destination, by what it says of the data), downloaded with boto3; nothing else under
        `prefix`."""
        self.assertEqual(self.keys(prefix), sorted(os.listdir(self.reference)))
        for name in os.listdir(self.reference):
            got = self.s3.get_object(Bucket=BUCKET, Key=prefix + name)["Body"].read()
            with open(os.path.join(self.reference, name), "rb") as f:
                want = f.read()
            if name == "manifest.json":
                got, want = json.loads(got), json.loads(want)
                for field in ("counts", "shards", "labels_crc32", "schema", "inputs"):
                    self.assertEqual(got[field], want[field], field)
                self.assertEqual("resumed" in got, resumed)
            else:
                self.assertEqual(got, want, name)

    def assert_lock_message(self, stderr, holder_pid, prefix):
        """One line naming the holder, the lock object and what to do."""
        lines = stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, stderr)
        line = lines[0]
        for words in (f"'s3://{BUCKET}/{prefix}' is being written by another tarmac", f"pid {holder_pid} on host",
                      f"s3://{BUCKET}/{prefix}{LOCK}", "wait for it to end or choose another prefix", "--resume",
                      f"aws s3 rm s3://{BUCKET}/{prefix}{LOCK}"):
            self.assertIn(words, line)

    def test_two_concurrent_writers_one_wins(self):
        prefix = "race/"
        proxy = GateProxy(self.port, lock_puts=2)
        self.addCleanup(proxy.close)
        runs = [self.start(prefix, f"cp-race{i}", "--endpoint-url", proxy.url) for i in range(2)]
        # both conditional PUTs reach the server together; one is created, the other refused
        self.assertTrue(self.wait_for(lambda: len(proxy.statuses("PUT", LOCK)) == 2 and
                                      None not in proxy.statuses("PUT", LOCK)), proxy.log)
        self.assertEqual(sorted(proxy.statuses("PUT", LOCK)), [200, 412])
        self.assertTrue(self.wait_for(lambda: any(p.poll() is not None for p in runs)))
        loser = next(p for p in runs if p.poll() is not None)
        winner = next(p for p in runs if p is not loser)
        _, err = loser.communicate(timeout=60)
        self.assertEqual(loser.returncode, 1, err)
        self.assert_lock_message(err, winner.pid, prefix)
        self.assertIsNone(winner.poll(), "the winner waits at its first shard")
        record = self.lock_record(prefix)
        self.assertEqual(record["pid"], winner.pid)
        # the server itself refuses a second lock: a conditional PUT of boto3 gets 412, and the
        # winner's record stays
        self.s3.meta.events.register("before-sign.s3.PutObject", self.if_none_match)
        try:
            with self.assertRaises(self.s3.exceptions.ClientError) as e:
                self.s3.put_object(Bucket=BUCKET, Key=prefix + LOCK, Body=b"{}")
        finally:
            self.s3.meta.events.unregister("before-sign.s3.PutObject", self.if_none_match)
        self.assertEqual(e.exception.response["ResponseMetadata"]["HTTPStatusCode"], 412)
        self.assertEqual(e.exception.response["Error"]["Code"], "PreconditionFailed")
        self.assertEqual(self.lock_record(prefix), record)
        self.assertEqual(self.keys(prefix), [LOCK], "the loser wrote nothing")

        proxy.shards.set()
        out, err = winner.communicate(timeout=120)
        self.assertEqual(winner.returncode, 0, err)
        self.assert_is_reference(prefix)  # the lock object is gone with it
        # a third run may write there now (replacing the dataset, so --overwrite)
        p = self.run_convert(prefix, "cp-race-third", "--overwrite")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_is_reference(prefix)

    @staticmethod
    def if_none_match(request, **_):
        request.headers["If-None-Match"] = "*"

    def test_lock_gone_when_read_is_made_again_conditionally(self):
        """The loser's 412, then the winner ends before the loser reads whose lock it was (404),
        and a third writer takes the lock before the loser tries again: the loser's second try is
        a conditional PUT too (412), so the third writer's lock stays and the loser is refused
        naming it."""
        prefix = "gone/"
        proxy = GateProxy(self.port, lock_puts=2)
        self.addCleanup(proxy.close)
        read_arrived, read_go = proxy.hold("GET", LOCK, 1)
        retry_arrived, retry_go = proxy.hold("PUT", LOCK, 3)
        runs = [self.start(prefix, f"cp-gone{i}", "--endpoint-url", proxy.url) for i in range(2)]
        self.assertTrue(read_arrived.wait(60), proxy.log)  # the loser asks whose the lock is
        winner = next(p for p in runs if p.pid == self.lock_record(prefix)["pid"])
        loser = next(p for p in runs if p is not winner)
        proxy.shards.set()
        out, err = winner.communicate(timeout=120)
        self.assertEqual(winner.returncode, 0, err)
        self.assertNotIn(LOCK, self.keys(prefix))
        read_go.set()  # 404: the lock is gone
        self.assertTrue(retry_arrived.wait(60), proxy.log)
        third = {"run": "third", "pid": 424242, "host": "elsewhere", "started": "2026-01-01T00:00:00Z",
                 "command": "tarmac convert ..."}
        self.s3.put_object(Bucket=BUCKET, Key=prefix + LOCK, Body=json.dumps(third).encode())
        retry_go.set()
        _, err = loser.communicate(timeout=60)
        self.assertEqual(loser.returncode, 1, err)
        puts = proxy.statuses("PUT", LOCK)
        self.assertEqual((sorted(puts[:2]), puts[2:]), ([200, 412], [412]), "the second try is conditional")
        self.assert_lock_message(err, 424242, prefix)
        self.assertEqual(self.lock_record(prefix), third, "the third writer's lock stays")

    def test_killed_run_keeps_its_lock_for_its_resume_only(self):
        prefix = "killed/"
        proxy = GateProxy(self.port)
        self.addCleanup(proxy.close)
        first = self.start(prefix, "cp-killed", "--endpoint-url", proxy.url)
        self.assertTrue(self.wait_for(lambda: proxy.statuses("PUT", ".tar")), proxy.log)
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
        self.assertEqual(first.returncode, -signal.SIGKILL)
        self.assertEqual(self.keys(prefix), [LOCK], "a killed run leaves its lock")
        record = self.lock_record(prefix)
        self.assertEqual(record["pid"], first.pid)
        # the lock names the run by the id kept in its checkpoint folder
        with open(os.path.join(self.path("cp-killed"), ".tarmac-partial", "uploads.json")) as f:
            self.assertEqual(record["run"], json.load(f)["run"])

        # another checkpoint folder (another machine, another command): refused, told how to go on
        p = self.run_convert(prefix, "cp-other")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assert_lock_message(p.stderr, first.pid, prefix)
        self.assertFalse(os.path.exists(self.path("cp-other")), "nothing is left locally")
        self.assertEqual(self.lock_record(prefix), record)
        # so is a fresh start from the killed run's own folder without --resume
        p = self.run_convert(prefix, "cp-killed")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(self.lock_record(prefix), record)

        # its --resume takes its own lock over and finishes; the lock goes with it
        p = self.run_convert(prefix, "cp-killed", "--resume")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_is_reference(prefix, resumed=True)
        self.assertFalse(os.path.exists(self.path("cp-killed")))


if __name__ == "__main__":
    unittest.main()
