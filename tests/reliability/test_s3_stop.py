"""A signal is a stop inside uploads too (docs/reliability.md): SIGTERM while a PUT of
`-o s3://` hangs (a proxy between tarmac and the real Swift s3api server of scripts/s3-local.sh
holds it without answering) exits 143 with the stop message, every time. It was 2 runs in 9
exiting 1 with "cannot write ...: stopped": the upload thread saw the request before the writer
and its abandoned transfer was rethrown as a failed write. Repeated, as the race was; the last
stopped run is resumed and its objects, downloaded with boto3, equal a local run's files.

Needs swift-proxy swift-account swift-container swift-object memcached and python3-boto3
(scripts/setup-deps.sh test); skips, saying which is missing, without them.
"""
import json
import os
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fixtures as fx  # noqa: E402
import s3_local as s3l  # noqa: E402
from test_s3 import noise_png  # noqa: E402
from test_s3_output import UploadProxy  # noqa: E402

BUCKET = "tarmac-stop"
OPTIONS = ["--format", "keep", "--shard-size", "256K", "--no-lock", "--threads", "2"]
TRIES = 5


class StalledUploadStop(fx.TmpCase):
    @classmethod
    def build(cls):
        s3l.start_server(cls)
        cls.s3.create_bucket(Bucket=BUCKET)
        members = []
        for i in range(96):  # ~2.7 MB of incompressible PNGs: ten shards
            members += [("k/%04d.png" % i, noise_png(i)), ("k/%04d.json" % i, fx.js({"i": i}))]
        cls.archive = fx.write_tar(os.path.join(cls.tmp, "in.tar"), members)
        cls.reference = os.path.join(cls.tmp, "reference")
        subprocess.run([fx.TARMAC, "convert", "-q", cls.archive, "-o", cls.reference, *OPTIONS], check=True)

    def keys(self, prefix):
        got = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
        return sorted(o["Key"][len(prefix):] for o in got.get("Contents", []))

    def wait_for(self, what, seconds=60):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if what():
                return True
            time.sleep(0.02)
        return False

    def test_sigterm_during_stalled_upload_exits_143(self):
        for i in range(TRIES):
            with self.subTest(run=i):
                proxy = UploadProxy(self.port, stall_key="shard-000001")
                self.addCleanup(proxy.close)
                prefix, cp = "try%d/" % i, self.path("cp-%d" % i)
                args = [fx.TARMAC, "convert", self.archive, "-o", f"s3://{BUCKET}/{prefix}", *OPTIONS,
                        "--checkpoint-dir", cp]
                proc = subprocess.Popen([*args, "--endpoint-url", proxy.url], env=self.env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                self.assertTrue(self.wait_for(lambda: any("shard-000001" in k for k in proxy.puts())), proxy.log)
                time.sleep(0.1 + 0.15 * i)  # the writer blocked on the full upload queue, or not yet
                proc.send_signal(signal.SIGTERM)
                _, err = proc.communicate(timeout=60)
                self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
                self.assertIn("stopped by SIGTERM", err)
                self.assertNotIn(": stopped", err.replace("stopped by SIGTERM", ""), "a stop reported as a write error")
                self.assertNotIn("did not stop in time", err)
                self.assertIn("--resume", err)
                self.assertNotIn("manifest.json", self.keys(prefix))
        # The last one goes on: the same objects as the local run's files.
        p = subprocess.run([*args, "--resume"], env=self.env, capture_output=True, text=True, timeout=180)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.keys(prefix), sorted(os.listdir(self.reference)))
        for name in os.listdir(self.reference):
            got = self.s3.get_object(Bucket=BUCKET, Key=prefix + name)["Body"].read()
            if name != "manifest.json":
                self.assertEqual(got, fx.read_bytes(os.path.join(self.reference, name)), name)
            else:
                with open(os.path.join(self.reference, name)) as f:
                    want = json.load(f)
                for field in ("counts", "shards", "labels_crc32"):
                    self.assertEqual(json.loads(got)[field], want[field], field)


if __name__ == "__main__":
    unittest.main()
