"""Remote outputs: `tarmac convert ... -o s3://bucket/prefix/` against a real S3-compatible
server (OpenStack Swift with its s3api middleware, started by scripts/s3-local.sh, as
test_s3.py does). What tarmac wrote is downloaded with boto3 (not tarmac) and compared byte for
byte with the conversion of the same tars to a local directory; `tarmac verify` checks the
downloaded copy. A TCP proxy run by the test between tarmac and the server cuts PUTs mid-body,
answers 503 SlowDown, stalls a PUT, and logs every request, so that retries and re-uploads are
counted from outside.

Needs swift-proxy swift-account swift-container swift-object memcached and python3-boto3
(scripts/setup-deps.sh test); skips, saying which is missing, without them.
"""
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402
import s3_local as s3l  # noqa: E402
from test_s3 import noise_png  # noqa: E402

BUCKET = "tarmac-out"
SHARDS = ["in-000.tar", "in-001.tar", "in-002.tar", "in-003.tar"]
OPTIONS = ["--format", "keep", "--shard-size", "1M", "--no-lock"]
DATASET_FILES = ("labels.safetensors", "shardlist.json", "manifest.json")


class UploadProxy(s3l.TcpProxy):
    """A TCP proxy to `upstream`, one request per connection (tarmac opens one per request). It
    logs (method, key, query, status) of every request; answers the first `slowdowns` PUTs with
    503 SlowDown; cuts the first `cuts` PUTs whose body is over `cut_after` bytes after passing
    that many bytes of it; holds a PUT of a key holding `stall_key` without ever answering."""

    def __init__(self, upstream_port, cuts=0, cut_after=0, slowdowns=0, stall_key=None):
        self.cuts_left, self.cut_after, self.slowdowns_left = cuts, cut_after, slowdowns
        self.stall_key = stall_key
        self.log, self.cut, self.slowed = [], 0, 0
        super().__init__(upstream_port)

    def puts(self, status=None):
        """Keys PUT (a part counts as its object's), answered `status` if given."""
        with self.lock:
            return [k for m, k, q, s in self.log if m == "PUT" and (status is None or s == status)]

    def handle(self, client):
        head = self.read_head(client)
        if head is None:
            return
        head, rest = head.split(b"\r\n\r\n", 1)
        head += b"\r\n\r\n"
        method, target = head.split(b" ")[:2]
        method, target = method.decode(), target.decode()
        path, _, query = target.partition("?")
        key = path.split("/", 2)[2] if path.count("/") >= 2 else ""
        m = re.search(rb"(?im)^content-length: *(\d+)", head)
        length = int(m.group(1)) if m else 0
        entry = [method, key, query, None]
        with self.lock:
            self.log.append(entry)
            slow = method == "PUT" and self.slowdowns_left > 0
            if slow:
                self.slowdowns_left -= 1
                self.slowed += 1
            cut = not slow and method == "PUT" and self.cuts_left > 0 and length > self.cut_after
            if cut:
                self.cuts_left -= 1
                self.cut += 1
            stall = method == "PUT" and self.stall_key is not None and self.stall_key in key
        if stall:
            threading.Event().wait(600)
            return
        if slow:
            if re.search(rb"(?im)^expect: *100-continue", head):
                client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            got = len(rest)
            while got < length:
                data = client.recv(65536)
                if not data:
                    break
                got += len(data)
            body = (b"<?xml version='1.0' encoding='UTF-8'?>\n<Error><Code>SlowDown</Code>"
                    b"<Message>Please reduce your request rate.</Message></Error>")
            client.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n"
                           b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
            entry[3] = 503
            client.close()
            return
        up = socket.create_connection(self.upstream)
        up.sendall(head + rest)

        def upstream_to_client():
            try:
                while True:
                    data = up.recv(65536)
                    if not data:
                        break
                    m = re.match(rb"HTTP/1\.1 (\d+)", data)
                    if m and int(m.group(1)) != 100:
                        entry[3] = int(m.group(1))
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
        sent = len(rest)
        try:
            while True:
                if cut and sent >= self.cut_after:
                    for s in (client, up):  # the connection drops mid-body
                        s.shutdown(socket.SHUT_RDWR)
                        s.close()
                    entry[3] = "cut"
                    return
                data = client.recv(65536)
                if not data:
                    break
                if cut:
                    data = data[:self.cut_after - sent]
                up.sendall(data)
                sent += len(data)
        except OSError:
            pass


class S3Outputs(fx.TmpCase):
    @classmethod
    def build(cls):
        s3l.start_server(cls)
        import boto3
        cls.boto3 = boto3
        cls.s3 = cls.client(cls.env["AWS_ACCESS_KEY_ID"], cls.env["AWS_SECRET_ACCESS_KEY"])
        cls.s3.create_bucket(Bucket=BUCKET)

        cls.local = os.path.join(cls.tmp, "local")
        os.makedirs(cls.local)
        for s, name in enumerate(SHARDS):
            members = []
            for i in range(24):
                key = f"{s}/{i:04d}"
                members += [(key + ".png", noise_png(s * 1000 + i)), (key + ".json", fx.js({"cls": i, "shard": s}))]
            fx.write_tar(os.path.join(cls.local, name), members)
        cls.inputs = [os.path.join(cls.local, n) for n in SHARDS]
        cls.reference = os.path.join(cls.tmp, "reference")
        subprocess.run([fx.TARMAC, "convert", "-q", *cls.inputs, "-o", cls.reference, *OPTIONS], check=True)

    @classmethod
    def client(cls, key, secret):
        return cls.boto3.client("s3", endpoint_url=cls.env["AWS_ENDPOINT_URL"], aws_access_key_id=key,
                                aws_secret_access_key=secret, region_name=cls.env["AWS_REGION"])

    def tarmac(self, *args, env=None, timeout=180):
        return subprocess.run([fx.TARMAC, *args], env=env or self.env, capture_output=True, text=True,
                              timeout=timeout, cwd=self.tmp)

    counter = itertools.count()

    def prefix(self):
        return "run%d/" % next(self.counter)

    def keys(self, prefix):
        got = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
        return sorted(o["Key"][len(prefix):] for o in got.get("Contents", []))

    def download(self, prefix):
        """The dataset at `prefix`, downloaded with boto3 into a folder of its own."""
        out = self.path("dl-" + prefix.strip("/").replace("/", "-"))
        os.makedirs(out)
        for name in self.keys(prefix):
            self.s3.download_file(BUCKET, prefix + name, os.path.join(out, name))
        return out

    def assert_same_as_reference(self, prefix, ref=None, resumed=False):
        """Every object byte for byte as the local run's file; the manifest too, but for what
        names the destination (the command line, -o and the flags of remote outputs) and the
        record of a resumed run."""
        ref = ref or self.reference
        self.assertEqual(self.keys(prefix), sorted(os.listdir(ref)))
        got = self.download(prefix)
        for name in os.listdir(ref):
            with open(os.path.join(got, name), "rb") as a, open(os.path.join(ref, name), "rb") as b:
                data, want = a.read(), b.read()
            if name != "manifest.json":
                self.assertEqual(data, want, name)
                continue
            m, r = json.loads(data), json.loads(want)
            self.assertEqual("resumed" in m, resumed)
            m.pop("resumed", None)
            for j in (m, r):
                del j["command_line"], j["manifest_crc32"]
                for flag in ("--output", "--checkpoint-dir", "--multipart-size", "--no-lock", "--overwrite",
                             "--resume", "--endpoint-url", "--checkpoint-every"):
                    j["options"].pop(flag, None)
            self.assertEqual(m, r)
        p = self.tarmac("verify", got)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return got

    def convert(self, prefix, *flags, env=None, inputs=None, options=OPTIONS):
        p = self.tarmac("convert", *(inputs or self.inputs), "-o", f"s3://{BUCKET}/{prefix}", *options, *flags,
                        "--json", env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def test_uploaded_dataset_is_the_local_one(self):
        prefix = self.prefix()
        result = self.convert(prefix.rstrip("/"))  # without the slash: a prefix all the same
        self.assert_same_as_reference(prefix)
        shards = [n for n in os.listdir(self.reference) if n.endswith(".tar")]
        self.assertEqual(result["uploads"]["objects"], len(shards) + 3)
        self.assertEqual(result["uploads"]["retries"], 0)
        # the default checkpoint folder is gone with the lock object: nothing but the dataset
        self.assertFalse(os.path.exists(os.path.join(self.tmp, ".tarmac-checkpoint")))
        # each object carries its CRC-32 (what --resume checks by HEAD)
        for name in shards:
            with open(os.path.join(self.reference, name), "rb") as f:
                crc = "%08x" % zlib.crc32(f.read())
            self.assertEqual(self.s3.head_object(Bucket=BUCKET, Key=prefix + name)["Metadata"]["tarmac-crc32"], crc)

    def test_large_shard_is_multipart(self):
        big = self.path("big")
        os.makedirs(big)
        members = [(f"{i:04d}.png", noise_png(7000 + i, side=512)) for i in range(10)]
        fx.write_tar(os.path.join(big, "big.tar"), members)
        opts = ["--format", "keep", "--shard-size", "16M", "--no-lock"]
        ref = self.path("big-ref")
        subprocess.run([fx.TARMAC, "convert", "-q", os.path.join(big, "big.tar"), "-o", ref, *opts], check=True)
        size = os.path.getsize(os.path.join(ref, "shard-000000.tar"))
        self.assertGreater(size, 5 << 20)
        prefix = self.prefix()
        # the first part's connection drops after 1 MiB: that part is sent again, from the file
        proxy = UploadProxy(self.port, cuts=1, cut_after=1 << 20)
        self.addCleanup(proxy.close)
        result = self.convert(prefix, "--multipart-size", "5M", "--endpoint-url", proxy.url,
                              inputs=[os.path.join(big, "big.tar")], options=opts)
        self.assertEqual(result["uploads"]["multipart"], 1)
        self.assertEqual((proxy.cut, result["uploads"]["retries"]), (1, 1))
        with proxy.lock:
            parts = [q.split("&")[0] for m, k, q, st in proxy.log if m == "PUT" and "partNumber" in q]
        self.assertEqual(parts[:2], ["partNumber=1", "partNumber=1"])
        self.assert_same_as_reference(prefix, ref)
        head = self.s3.head_object(Bucket=BUCKET, Key=prefix + "shard-000000.tar")
        parts = -(-size // (5 << 20))
        self.assertTrue(head["ETag"].strip('"').endswith("-%d" % parts), head["ETag"])
        # the smaller files went in one PUT
        self.assertNotIn("-", self.s3.head_object(Bucket=BUCKET, Key=prefix + "manifest.json")["ETag"])

    def test_cut_and_slowed_puts_are_retried(self):
        proxy = UploadProxy(self.port, cuts=2, cut_after=300_000, slowdowns=3)
        self.addCleanup(proxy.close)
        prefix = self.prefix()
        result = self.convert(prefix, "--endpoint-url", proxy.url)
        self.assertEqual((proxy.cut, proxy.slowed), (2, 3))
        self.assertEqual(result["uploads"]["retries"], 5)
        self.assert_same_as_reference(prefix)

    def wait_for(self, what, seconds=60):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if what():
                return True
            time.sleep(0.05)
        return False

    def uploads_recorded(self, checkpoint_dir):
        try:
            with open(os.path.join(checkpoint_dir, ".tarmac-partial", "uploads.json")) as f:
                return sorted(json.load(f)["uploaded"])
        except (OSError, ValueError, KeyError):
            return []

    def test_killed_mid_upload_resumes_without_sending_twice(self):
        proxy = UploadProxy(self.port, stall_key="shard-000002")
        self.addCleanup(proxy.close)
        prefix, cp = self.prefix(), self.path("cp-killed")
        args = [fx.TARMAC, "convert", *self.inputs, "-o", f"s3://{BUCKET}/{prefix}", *OPTIONS, "--checkpoint-dir", cp]
        proc = subprocess.Popen([*args, "--endpoint-url", proxy.url], env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        done = self.wait_for(lambda: len(self.uploads_recorded(cp)) >= 2 and proxy.puts() and
                             any("shard-000002" in k for k in proxy.puts()))
        proc.send_signal(signal.SIGKILL)
        self.assertEqual(proc.wait(), -signal.SIGKILL, "finished before the kill")
        self.assertTrue(done, proxy.log)
        first = set(proxy.puts(200))
        self.assertIn(prefix + "shard-000000.tar", first)
        self.assertNotIn("manifest.json", self.keys(prefix))

        counter = UploadProxy(self.port)
        self.addCleanup(counter.close)
        p = subprocess.run([*args, "--resume", "--endpoint-url", counter.url, "--json"], env=self.env,
                           capture_output=True, text=True, timeout=180)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("resumed an interrupted run", p.stderr)
        again = set(counter.puts()) & first
        self.assertEqual(again - {prefix + ".tarmac-lock"}, set(), "uploaded twice")
        self.assertIn(prefix + "shard-000002.tar", counter.puts(200))
        self.assert_same_as_reference(prefix, resumed=True)
        self.assertFalse(os.path.exists(cp))

    def test_killed_while_publishing_resumes(self):
        # every shard is up, the last one closed after the last checkpoint; the annotation file's
        # PUT stalls and the run is killed: --resume writes the last shard again (the same
        # bytes, from its local copy cut back) and sends none of them twice
        proxy = UploadProxy(self.port, stall_key="labels.safetensors")
        self.addCleanup(proxy.close)
        prefix, cp = self.prefix(), self.path("cp-publishing")
        args = [fx.TARMAC, "convert", *self.inputs, "-o", f"s3://{BUCKET}/{prefix}", *OPTIONS, "--checkpoint-dir", cp]
        proc = subprocess.Popen([*args, "--endpoint-url", proxy.url], env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        done = self.wait_for(lambda: any("labels" in k for k in proxy.puts()))
        proc.send_signal(signal.SIGKILL)
        self.assertEqual(proc.wait(), -signal.SIGKILL, "finished before the kill")
        self.assertTrue(done, proxy.log)
        shards = sorted(n for n in os.listdir(self.reference) if n.endswith(".tar"))
        self.assertEqual(sorted(k for k in proxy.puts(200) if k.endswith(".tar")), [prefix + n for n in shards])
        counter = UploadProxy(self.port)
        self.addCleanup(counter.close)
        p = subprocess.run([*args, "--resume", "--endpoint-url", counter.url, "--json"], env=self.env,
                           capture_output=True, text=True, timeout=180)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([k for k in counter.puts() if k.endswith(".tar")], [], "uploaded twice")
        self.assert_same_as_reference(prefix, resumed=True)

    def test_sigterm_during_upload_stops_in_time(self):
        proxy = UploadProxy(self.port, stall_key="shard-000001")
        self.addCleanup(proxy.close)
        prefix, cp = self.prefix(), self.path("cp-term")
        args = [fx.TARMAC, "convert", *self.inputs, "-o", f"s3://{BUCKET}/{prefix}", *OPTIONS, "--checkpoint-dir", cp]
        proc = subprocess.Popen([*args, "--endpoint-url", proxy.url], env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        self.assertTrue(self.wait_for(lambda: any("shard-000001" in k for k in proxy.puts())), proxy.log)
        time.sleep(0.3)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        self.assertLess(time.monotonic() - t0, 5.0, "the documented bound")
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
        self.assertIn("stopped by SIGTERM", err)
        self.assertNotIn("did not stop in time", err)
        self.assertIn("--resume", err)
        self.assertNotIn("manifest.json", self.keys(prefix))
        self.assertNotIn(".tarmac-lock", self.keys(prefix), "a stopped run releases its lock")
        p = subprocess.run([*args, "--resume"], env=self.env, capture_output=True, text=True, timeout=180)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_same_as_reference(prefix, resumed=True)

    def assert_one_line_error(self, prefix, *words, env=None, flags=(), options=OPTIONS, complete=False):
        cp = self.path("cp-failed%d" % next(self.counter))
        p = self.tarmac("convert", *self.inputs, "-o", f"s3://{BUCKET}/{prefix}", *options, "--checkpoint-dir", cp,
                        "-q", *flags, env=env)
        self.assertEqual(p.returncode, 1, p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        for w in words:
            self.assertIn(w, lines[0])
        self.assertEqual("manifest.json" in self.keys(prefix), complete)
        self.assertFalse(os.path.exists(cp), "nothing is left locally")
        return lines[0]

    def test_denied_put(self):
        # a bucket the second user may read (public-read) but not write
        self.s3.create_bucket(Bucket="tarmac-readonly")
        self.s3.put_bucket_acl(Bucket="tarmac-readonly", ACL="public-read")
        env = dict(self.env)
        with open(os.path.join(self.server_dir, "reader-env")) as f:
            for line in f:
                name, value = line.strip().removeprefix("export ").split("=", 1)
                env[name] = value
        cp = self.path("cp-denied")
        p = self.tarmac("convert", *self.inputs, "-o", "s3://tarmac-readonly/ds/", *OPTIONS, "--checkpoint-dir", cp,
                        "-q", env=env)
        self.assertEqual(p.returncode, 1, p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("cannot write 's3://tarmac-readonly/ds/", lines[0])
        self.assertIn("AccessDenied (HTTP 403)", lines[0])
        self.assertIn("write access", lines[0])
        self.assertEqual(self.s3.list_objects_v2(Bucket="tarmac-readonly").get("KeyCount", 0), 0)
        self.assertFalse(os.path.exists(cp))

    def test_missing_bucket_wrong_credentials_unreachable(self):
        p = self.tarmac("convert", *self.inputs, "-o", "s3://no-such-bucket/x/", *OPTIONS, "-q")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("NoSuchBucket", p.stderr)
        self.assertIn("aws s3 mb s3://no-such-bucket", p.stderr)
        prefix = self.prefix()
        self.assert_one_line_error(prefix, f"s3://{BUCKET}/{prefix}", "SignatureDoesNotMatch",
                                   "AWS_SECRET_ACCESS_KEY", env=dict(self.env, AWS_SECRET_ACCESS_KEY="wrong"))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.assert_one_line_error(prefix, f"s3://{BUCKET}/{prefix}", f"http://127.0.0.1:{port}", "is up",
                                   flags=["--endpoint-url", f"http://127.0.0.1:{port}"])

    def test_checkpoint_dir_and_http_outputs_refused(self):
        p = self.tarmac("convert", *self.inputs, "-o", self.path("local-out"), "--checkpoint-dir", self.path("cp"))
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("--checkpoint-dir is for -o s3://", p.stderr)
        p = self.tarmac("convert", *self.inputs, "-o", "https://example.invalid/x/")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("not to an http(s) URL", p.stderr)
        self.assertFalse(os.path.exists(self.path("local-out")) or os.path.exists(self.path("cp")))

    def test_conditional_put_unsupported_says_so(self):
        if self.server != "swift":
            self.skipTest(f"{self.server} honours conditional PUTs (test_s3_lock.py); Swift's s3api does not")
        prefix = self.prefix()
        line = self.assert_one_line_error(prefix, "does not support conditional PUTs", "If-None-Match",
                                          "--no-lock", options=OPTIONS[:-1])
        self.assertIn(f"s3://{BUCKET}/{prefix}", line)

    def test_second_writer_is_refused(self):
        proxy = UploadProxy(self.port, stall_key="shard-000000")
        self.addCleanup(proxy.close)
        prefix, cp = self.prefix(), self.path("cp-first")
        first = subprocess.Popen([fx.TARMAC, "convert", *self.inputs, "-o", f"s3://{BUCKET}/{prefix}", *OPTIONS,
                                  "--checkpoint-dir", cp, "--endpoint-url", proxy.url], env=self.env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(first.kill)
        self.assertTrue(self.wait_for(lambda: ".tarmac-lock" in self.keys(prefix)))
        # another machine (another checkpoint folder): the lock object refuses it
        line = self.assert_one_line_error(prefix, "is being written by another tarmac", "aws s3 rm",
                                          f"s3://{BUCKET}/{prefix}.tarmac-lock")
        self.assertIn("pid %d" % first.pid, line)
        # the same machine and command (the same checkpoint folder): its lock refuses it
        p = self.tarmac("convert", *self.inputs, "-o", f"s3://{BUCKET}/{prefix}", *OPTIONS, "--checkpoint-dir", cp)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("is in use by another tarmac", p.stderr)
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=30)

    def test_existing_dataset_refused_unless_overwrite(self):
        prefix = self.prefix()
        self.convert(prefix, options=["--format", "keep", "--shard-size", "300K", "--no-lock"])
        old = self.keys(prefix)
        self.s3.put_object(Bucket=BUCKET, Key=prefix + "notes.txt", Body=b"mine")
        self.s3.put_object(Bucket=BUCKET, Key=prefix + "shard-999999.tar", Body=b"not listed")
        self.assert_one_line_error(prefix, "holds a dataset", "--overwrite", complete=True)
        self.assertEqual(self.keys(prefix), sorted(old + ["notes.txt", "shard-999999.tar"]), "untouched")
        # a shard-named object the old manifest does not list is the user's: refused even with
        # --overwrite (as a local output's file named so), none of the prefix touched
        self.assert_one_line_error(prefix, "shard-999999.tar", "no dataset there lists as its own",
                                   flags=["--overwrite"], complete=True)
        self.assertEqual(self.keys(prefix), sorted(old + ["notes.txt", "shard-999999.tar"]), "untouched")
        self.s3.delete_object(Bucket=BUCKET, Key=prefix + "shard-999999.tar")
        self.convert(prefix, "--overwrite")
        # the old dataset's extra shards went (its manifest listed them); what it did not list stays
        self.assertGreater(len(old), len(os.listdir(self.reference)))
        self.assertEqual(self.keys(prefix), sorted(os.listdir(self.reference) + ["notes.txt"]))
        self.s3.delete_object(Bucket=BUCKET, Key=prefix + "notes.txt")
        self.assert_same_as_reference(prefix)
        # --resume of a finished dataset: nothing to do
        p = self.tarmac("convert", *self.inputs, "-o", f"s3://{BUCKET}/{prefix}", *OPTIONS, "--resume")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("already holds a complete dataset", p.stderr)
        # Issue #35: a --resume with other options or inputs is not "complete": that dataset is
        # not its result. Refused naming the difference; the objects stay as they were.
        before = {k: self.s3.head_object(Bucket=BUCKET, Key=prefix + k)["ETag"] for k in self.keys(prefix)}
        p = self.tarmac("convert", *self.inputs, "-o", f"s3://{BUCKET}/{prefix}", "--format", "keep",
                        "--shard-size", "300K", "--no-lock", "--resume")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("holds a complete dataset, but not this run's", p.stderr)
        self.assertIn("--shard-size", p.stderr)
        self.assertNotIn("already holds a complete dataset", p.stderr)
        p = self.tarmac("convert", *self.inputs[:-1], "-o", f"s3://{BUCKET}/{prefix}", *OPTIONS, "--resume")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("input(s)", p.stderr)
        # a manifest changed on the server (its seal no longer matches) is nothing to compare with
        m = self.s3.get_object(Bucket=BUCKET, Key=prefix + "manifest.json")["Body"].read()
        self.s3.put_object(Bucket=BUCKET, Key=prefix + "manifest.json", Body=m.replace(b'"samples"', b'"samples" ', 1))
        p = self.tarmac("convert", *self.inputs, "-o", f"s3://{BUCKET}/{prefix}", *OPTIONS, "--resume")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("manifest.json cannot be read", p.stderr)
        self.s3.put_object(Bucket=BUCKET, Key=prefix + "manifest.json", Body=m)
        after = {k: self.s3.head_object(Bucket=BUCKET, Key=prefix + k)["ETag"] for k in self.keys(prefix)}
        self.assertEqual(after, before)  # the dataset compared above, byte for byte, as it was


if __name__ == "__main__":
    unittest.main()
