"""Remote inputs: `tarmac convert` reading s3:// objects from a real S3-compatible server
(OpenStack Swift with its s3api middleware, from Debian's packages, started by
scripts/s3-local.sh) and http:// URLs from Python's http.server (with a Range handler written
here). Every dataset is compared byte for byte with the conversion of the same tars from local
disk. A TCP proxy run by the test between tarmac and the server cuts connections mid-object or
answers 503 SlowDown: the conversion resumes by range, is byte-identical, and counts its retries.

Needs swift-proxy swift-account swift-container swift-object memcached and python3-boto3
(scripts/setup-deps.sh test); skips, saying which is missing, without them.
"""
import http.server
import json
import os
import re
import shutil
import signal
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402
import s3_local as s3l  # noqa: E402
from s3_local import FaultProxy  # noqa: E402

BUCKET = "tarmac-e2e"
SHARDS = ["shard-000.tar", "shard-001.tar", "shard-002.tar.gz", "shard-003.tar"]
OPTIONS = ["--format", "keep", "--shard-size", "1M"]


def noise_png(seed, side=96):
    rng = fx.np.random.RandomState(seed)
    return fx.png(rng.randint(0, 256, (side, side, 3), dtype=fx.np.uint8))


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files with `Range: bytes=A-` and `bytes=A-B` (http.server has no ranges)."""

    def log_message(self, *args):
        pass

    def send_head(self):
        path = self.translate_path(self.path)
        if not os.path.isfile(path):
            self.send_error(404, "File not found")
            return None
        size = os.path.getsize(path)
        f = open(path, "rb")
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if m:
            start = int(m.group(1))
            end = int(m.group(2)) if m.group(2) else size - 1
            if start >= size:
                f.close()
                self.send_error(416, "Range Not Satisfiable")
                return None
            f.seek(start)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.send_header("Content-Length", str(end - start + 1))
            self.remaining = end - start + 1
        else:
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.remaining = size
        self.send_header("Content-Type", "application/x-tar")
        self.send_header("ETag", '"%x"' % os.stat(path).st_mtime_ns)
        self.end_headers()
        return f

    def copyfile(self, source, outputfile):
        while self.remaining > 0:
            data = source.read(min(65536, self.remaining))
            if not data:
                break
            outputfile.write(data)
            self.remaining -= len(data)


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True



class S3Inputs(fx.TmpCase):
    @classmethod
    def build(cls):
        s3l.start_server(cls)
        cls.s3.create_bucket(Bucket=BUCKET)

        cls.local = os.path.join(cls.tmp, "local")
        os.makedirs(cls.local)
        for s, name in enumerate(SHARDS):
            members = []
            for i in range(24):
                key = f"{s}/{i:04d}"
                members += [(key + ".png", noise_png(s * 1000 + i)), (key + ".json", fx.js({"cls": i, "shard": s}))]
            fx.write_tar(os.path.join(cls.local, name), members, mode="w:gz" if name.endswith(".gz") else "w")
            cls.s3.upload_file(os.path.join(cls.local, name), BUCKET, "data/" + name)
        # a folder marker and an object outside the prefix: neither is an input
        cls.s3.put_object(Bucket=BUCKET, Key="data/", Body=b"")
        cls.s3.put_object(Bucket=BUCKET, Key="other/x.tar", Body=b"not a tar")
        cls.reference = cls.convert_local(sorted(SHARDS))

    @classmethod
    def convert_local(cls, names):
        out = os.path.join(cls.tmp, "ref-" + "-".join(n.split(".")[0][-3:] for n in names))
        if not os.path.exists(out):
            subprocess.run([fx.TARMAC, "convert", "-q", *[os.path.join(cls.local, n) for n in names],
                            "-o", out, *OPTIONS], check=True)
        return out

    def tarmac(self, *args, env=None, timeout=180):
        return subprocess.run([fx.TARMAC, *args], env=env or self.env, capture_output=True, text=True,
                              timeout=timeout)

    def convert(self, inputs, *flags, env=None):
        out = self.path("out%d" % len(os.listdir(self.tmp)))
        p = self.tarmac("convert", *inputs, "-o", out, *OPTIONS, *flags, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        return out, p

    def assert_same_dataset(self, out, ref):
        fx.assert_same_files(self, out, ref)

    def manifest_inputs(self, out):
        with open(os.path.join(out, "manifest.json")) as f:
            return json.load(f)["inputs"]

    def test_script_serves_s3_with_ranges(self):
        # the server itself, through boto3: an object and a ranged GET of it
        data = fx.read_bytes(os.path.join(self.local, SHARDS[0]))
        got = self.s3.get_object(Bucket=BUCKET, Key="data/" + SHARDS[0], Range="bytes=1000-1999")
        self.assertEqual(got["Body"].read(), data[1000:2000])
        self.assertEqual(got["ContentRange"], f"bytes 1000-1999/{len(data)}")

    def test_prefix_is_every_object_by_key(self):
        out, _ = self.convert([f"s3://{BUCKET}/data/"])
        self.assert_same_dataset(out, self.reference)
        inputs = self.manifest_inputs(out)
        self.assertEqual([i["path"] for i in inputs], [f"s3://{BUCKET}/data/{n}" for n in sorted(SHARDS)])
        for i, name in zip(inputs, sorted(SHARDS)):
            data = fx.read_bytes(os.path.join(self.local, name))
            self.assertEqual((i["size"], i["crc32"]), (len(data), "%08x" % zlib.crc32(data)))
            self.assertEqual((i["retries"], i["resumed_bytes"]), (0, 0))

    def test_brace_range_and_endpoint_flag(self):
        env = dict(self.env)
        endpoint = env.pop("AWS_ENDPOINT_URL")
        out, _ = self.convert([f"s3://{BUCKET}/data/shard-{{000..001}}.tar", f"s3://{BUCKET}/data/shard-003.tar"],
                              "--endpoint-url", endpoint, env=env)
        self.assert_same_dataset(out, self.convert_local(["shard-000.tar", "shard-001.tar", "shard-003.tar"]))

    def test_parts_split_a_brace_range_then_merge(self):
        # the cluster recipe (cookbook): every part gets the same s3:// inputs, only --shard I/N
        # differs; each part reads its own block of objects, and the merged dataset holds one
        # run's samples in its order (read back with the independent reader: shard boundaries
        # differ, so the files do not)
        inputs = [f"s3://{BUCKET}/data/shard-{{000..001}}.tar", f"s3://{BUCKET}/data/shard-002.tar.gz",
                  f"s3://{BUCKET}/data/shard-003.tar"]
        parts = []
        for i in range(2):
            part, _ = self.convert(inputs, "--shard", f"{i}/2")
            parts.append(part)
        merged = self.path("merged")
        p = self.tarmac("merge", *parts, "-o", merged)
        self.assertEqual(p.returncode, 0, p.stderr)
        got, want = fx.Dataset(merged), fx.Dataset(self.reference)
        self.assertEqual(got.keys, want.keys)
        self.assertEqual(len(got.keys), 4 * 24)
        for i in range(len(want.keys)):
            self.assertEqual(got.blob(i), want.blob(i), got.keys[i])
            self.assertEqual(int(got.t["cls"][i]), int(want.t["cls"][i]))
        # each object was read by exactly one part: the parts split the expanded inputs
        per_part = [{x["path"] for x in self.manifest_inputs(part)} for part in parts]
        self.assertFalse(per_part[0] & per_part[1], per_part)
        self.assertEqual(per_part[0] | per_part[1], {f"s3://{BUCKET}/data/{n}" for n in SHARDS})
        with open(os.path.join(parts[0], "manifest.json")) as f:
            self.assertEqual(json.load(f)["part"]["split"], "inputs")

    def test_cut_connections_resume_by_range(self):
        proxy = FaultProxy(self.port, cut_after=150_000, cuts=4)
        self.addCleanup(proxy.close)
        out, p = self.convert([f"s3://{BUCKET}/data/"], "--endpoint-url", proxy.url)
        self.assert_same_dataset(out, self.reference)
        self.assertEqual(proxy.cut, 4)
        inputs = self.manifest_inputs(out)
        self.assertEqual(sum(i["retries"] for i in inputs), 4)
        # each retry asked for the bytes from where the cut left it, not from the start
        self.assertEqual(len(proxy.ranges), 4)
        self.assertTrue(all(r > 0 for r in proxy.ranges), proxy.ranges)
        self.assertEqual(sum(i["resumed_bytes"] for i in inputs), sum(proxy.ranges))
        self.assertIn("network: 4 request(s) retried", p.stdout)

    def test_slowdown_is_retried(self):
        proxy = FaultProxy(self.port, slowdowns=3)
        self.addCleanup(proxy.close)
        out, _ = self.convert([f"s3://{BUCKET}/data/"], "--endpoint-url", proxy.url)
        self.assert_same_dataset(out, self.reference)
        self.assertEqual(proxy.slowed, 3)
        self.assertEqual(sum(i["retries"] for i in self.manifest_inputs(out)), 3)

    def test_killed_while_reading_resumes(self):
        # a run stalled on the third object, with a checkpoint after every sample, is killed;
        # --resume reads the objects again (checking their CRC-32 up to the checkpoint)
        proxy = FaultProxy(self.port, stall_key="shard-002")
        self.addCleanup(proxy.close)
        out = self.path("killed")
        args = ["convert", f"s3://{BUCKET}/data/", "-o", out, *OPTIONS]
        code, cp = fx.kill_at_checkpoint([*args, "--endpoint-url", proxy.url], out, 48, timeout=60, env=self.env)
        self.assertEqual(code, -signal.SIGKILL, "finished before the kill")
        self.assertGreaterEqual(cp["entries"], 48)  # the two shards before the stalled one
        p = self.tarmac(*args, "--resume")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("resumed an interrupted run", p.stderr)
        self.assert_same_dataset(out, self.reference)

    def test_sigterm_while_an_object_stalls(self):
        # the stop request is honoured inside the network wait (not after the 30 s stall timeout
        # and its retries, minutes later, nor by the CLI's watchdog after 10 s): SIGTERM's exit,
        # the checkpoint kept
        proxy = FaultProxy(self.port, stall_key="shard-001")
        self.addCleanup(proxy.close)
        out = self.path("stopped")
        proc = subprocess.Popen([fx.TARMAC, "convert", f"s3://{BUCKET}/data/", "-o", out, *OPTIONS,
                                 "--checkpoint-every", "0", "--endpoint-url", proxy.url], env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        cp = os.path.join(out, ".tarmac-partial", "checkpoint.json")
        deadline = time.time() + 60
        while time.time() < deadline and not os.path.exists(cp) and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.5)  # into the stalled read
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
        self.assertIn("stopped by SIGTERM", err)
        # stopped by itself, its checkpoint written, not ended by the CLI's watchdog
        self.assertNotIn("did not stop in time", err)
        self.assertIn("converted sample(s) are kept", err)
        self.assertIn("--resume", err)

    def assert_one_line_error(self, inputs, *words, env=None, flags=()):
        out = self.path("failed%d" % len(os.listdir(self.tmp)))
        p = self.tarmac("convert", *inputs, "-o", out, *flags, env=env)
        self.assertEqual(p.returncode, 1, p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        for w in words:
            self.assertIn(w, lines[0])
        self.assertFalse(os.path.exists(out), "nothing is written")
        return lines[0]

    def test_wrong_credentials(self):
        env = dict(self.env, AWS_SECRET_ACCESS_KEY="not-the-secret")
        self.assert_one_line_error([f"s3://{BUCKET}/data/shard-000.tar"], f"s3://{BUCKET}/data/shard-000.tar",
                                   "SignatureDoesNotMatch", "AWS_SECRET_ACCESS_KEY", env=env)
        env = dict(self.env, AWS_ACCESS_KEY_ID="nobody:nobody")
        self.assert_one_line_error([f"s3://{BUCKET}/data/"], f"s3://{BUCKET}/data/", "(HTTP 403)",
                                   "AWS_ACCESS_KEY_ID", env=env)

    def test_missing_key_bucket_and_prefix(self):
        self.assert_one_line_error([f"s3://{BUCKET}/data/shard-000.tar", f"s3://{BUCKET}/data/nope.tar"],
                                   f"s3://{BUCKET}/data/nope.tar", "NoSuchKey")
        self.assert_one_line_error(["s3://no-such-bucket/x.tar"], "s3://no-such-bucket/x.tar", "NoSuchBucket")
        self.assert_one_line_error([f"s3://{BUCKET}/nothing/"], f"s3://{BUCKET}/nothing/", "holds no objects")

    def test_unreachable_endpoint(self):
        with socket.socket() as s:  # a port nothing listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.assert_one_line_error([f"s3://{BUCKET}/data/shard-000.tar"], f"s3://{BUCKET}/data/shard-000.tar",
                                   f"http://127.0.0.1:{port}", "--endpoint-url",
                                   flags=["--endpoint-url", f"http://127.0.0.1:{port}"])

    def test_no_credentials(self):
        env = {k: v for k, v in self.env.items() if not k.startswith("AWS_") or k == "AWS_ENDPOINT_URL"}
        env["HOME"] = self.tmp  # no ~/.aws/credentials
        self.assert_one_line_error([f"s3://{BUCKET}/data/shard-000.tar"], "no AWS credentials", env=env)

    def test_profile_credentials(self):
        home = self.path("home")
        os.makedirs(os.path.join(home, ".aws"), exist_ok=True)
        with open(os.path.join(home, ".aws", "credentials"), "w") as f:
            f.write("[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n"
                    f"[e2e]\naws_access_key_id = {self.env['AWS_ACCESS_KEY_ID']}\n"
                    f"aws_secret_access_key = {self.env['AWS_SECRET_ACCESS_KEY']}\n")
        env = {k: v for k, v in self.env.items() if not k.startswith("AWS_") or k == "AWS_ENDPOINT_URL"}
        env.update(HOME=home, AWS_PROFILE="e2e")
        out, _ = self.convert([f"s3://{BUCKET}/data/shard-001.tar"], env=env)
        self.assert_same_dataset(out, self.convert_local(["shard-001.tar"]))
        env["AWS_PROFILE"] = "absent"
        self.assert_one_line_error([f"s3://{BUCKET}/data/shard-001.tar"], "AWS_PROFILE", "'absent'", env=env)


class HttpInputs(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.local = os.path.join(cls.tmp, "www")
        os.makedirs(cls.local)
        for s, name in enumerate(SHARDS):
            members = [(f"{s}/{i:04d}.png", noise_png(s * 1000 + i)) for i in range(24)]
            fx.write_tar(os.path.join(cls.local, name), members, mode="w:gz" if name.endswith(".gz") else "w")
        handler = lambda *a, **k: RangeHandler(*a, directory=cls.local, **k)  # noqa: E731
        cls.server = ThreadingServer(("127.0.0.1", 0), handler)
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.addClassCleanup(cls.server.server_close)
        cls.addClassCleanup(cls.server.shutdown)
        cls.port = cls.server.server_address[1]
        cls.reference = os.path.join(cls.tmp, "ref")
        subprocess.run([fx.TARMAC, "convert", "-q", *[os.path.join(cls.local, n) for n in SHARDS],
                        "-o", cls.reference, *OPTIONS], check=True)

    def convert(self, base, names):
        out = self.path("out%d" % len(os.listdir(self.tmp)))
        p = subprocess.run([fx.TARMAC, "convert", *[f"{base}/{n}" for n in names], "-o", out, *OPTIONS],
                           capture_output=True, text=True, timeout=180)
        self.assertEqual(p.returncode, 0, p.stderr)
        return out

    def assert_same(self, out):
        for name in os.listdir(self.reference):
            if name != "manifest.json":
                with open(os.path.join(out, name), "rb") as a, open(os.path.join(self.reference, name), "rb") as b:
                    self.assertEqual(a.read(), b.read(), name)

    def test_http_urls(self):
        out = self.convert(f"http://127.0.0.1:{self.port}", ["shard-{000..001}.tar", "shard-002.tar.gz",
                                                              "shard-003.tar"])
        self.assert_same(out)

    def test_cut_connections_resume_by_range(self):
        proxy = FaultProxy(self.port, cut_after=100_000, cuts=3)
        self.addCleanup(proxy.close)
        out = self.convert(proxy.url, SHARDS)
        self.assert_same(out)
        self.assertEqual(proxy.cut, 3)
        self.assertEqual(len(proxy.ranges), 3)
        self.assertTrue(all(r > 0 for r in proxy.ranges), proxy.ranges)
        with open(os.path.join(out, "manifest.json")) as f:
            inputs = json.load(f)["inputs"]
        self.assertEqual(sum(i["retries"] for i in inputs), 3)
        self.assertEqual(sum(i["resumed_bytes"] for i in inputs), sum(proxy.ranges))

    def test_not_found(self):
        url = f"http://127.0.0.1:{self.port}/missing.tar"
        p = subprocess.run([fx.TARMAC, "convert", url, "-o", self.path("nf")], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr.strip().splitlines(), [
            f"tarmac: error: cannot read '{url}': HTTP 404: not found: check the URL"])
        self.assertFalse(os.path.exists(self.path("nf")))


class HttpsInputs(fx.TmpCase):
    """https:// with a server whose certificate no system authority signed (a private CA, as an
    S3-compatible service inside a company has): refused with the fix named, then read with
    AWS_CA_BUNDLE naming the authority, as the AWS CLI reads it. The certificates are made by
    Debian's openssl, the server is http.server behind Python's ssl."""

    @classmethod
    def build(cls):
        if not shutil.which("openssl"):
            raise unittest.SkipTest("openssl not installed")
        cls.local = os.path.join(cls.tmp, "www")
        os.makedirs(cls.local)
        members = [(f"0/{i:04d}.png", noise_png(7000 + i)) for i in range(12)]
        fx.write_tar(os.path.join(cls.local, "a.tar"), members)
        ca_key, cls.ca = cls.path_of("ca.key"), cls.path_of("ca.pem")
        key, csr, cert = cls.path_of("srv.key"), cls.path_of("srv.csr"), cls.path_of("srv.pem")
        ext = cls.path_of("ext.cnf")
        with open(ext, "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\n")
        run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)  # noqa: E731
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=tarmac test CA",
            "-keyout", ca_key, "-out", cls.ca)
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", csr)
        run("x509", "-req", "-in", csr, "-CA", cls.ca, "-CAkey", ca_key, "-CAcreateserial", "-days", "2",
            "-extfile", ext, "-out", cert)
        handler = lambda *a, **k: RangeHandler(*a, directory=cls.local, **k)  # noqa: E731
        cls.server = ThreadingServer(("127.0.0.1", 0), handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        cls.server.socket = ctx.wrap_socket(cls.server.socket, server_side=True)
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.addClassCleanup(cls.server.server_close)
        cls.addClassCleanup(cls.server.shutdown)
        cls.url = f"https://127.0.0.1:{cls.server.server_address[1]}/a.tar"
        cls.reference = os.path.join(cls.tmp, "ref")
        subprocess.run([fx.TARMAC, "convert", "-q", os.path.join(cls.local, "a.tar"), "-o", cls.reference,
                        *OPTIONS], check=True)

    @classmethod
    def path_of(cls, name):
        return os.path.join(cls.tmp, name)

    def convert(self, env):
        out = self.path("out%d" % len(os.listdir(self.tmp)))
        p = subprocess.run([fx.TARMAC, "convert", self.url, "-o", out, *OPTIONS], capture_output=True, text=True,
                           timeout=120, env=env)
        return out, p

    def test_private_authority_refused_then_named(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env["HOME"] = self.tmp  # no ~/.aws/config
        out, p = self.convert(env)
        self.assertEqual(p.returncode, 1, p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn(f"cannot read '{self.url}'", lines[0])
        self.assertIn("AWS_CA_BUNDLE=FILE", lines[0])
        self.assertFalse(os.path.exists(out))

        out, p = self.convert(dict(env, AWS_CA_BUNDLE=self.ca))
        self.assertEqual(p.returncode, 0, p.stderr)
        for name in os.listdir(self.reference):
            if name != "manifest.json":
                with open(os.path.join(out, name), "rb") as a, open(os.path.join(self.reference, name), "rb") as b:
                    self.assertEqual(a.read(), b.read(), name)

        # the profile's ca_bundle in ~/.aws/config, as the AWS CLI reads it
        os.makedirs(os.path.join(self.tmp, ".aws"), exist_ok=True)
        with open(os.path.join(self.tmp, ".aws", "config"), "w") as f:
            f.write(f"[default]\nca_bundle = {self.ca}\n")
        out, p = self.convert(env)
        self.assertEqual(p.returncode, 0, p.stderr)

        out, p = self.convert(dict(env, AWS_CA_BUNDLE=self.path("absent.pem")))
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("absent.pem", p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)


if __name__ == "__main__":
    unittest.main()
