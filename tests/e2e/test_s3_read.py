"""Datasets in object storage: `tarmac verify`, `info`, `ls` and `cat` on s3:// prefixes, and the
reader (tarmac.Dataset(url, cache=DIR), TarmacDataset) through its local shard cache, against a
real S3-compatible server (OpenStack Swift with s3api, started by scripts/s3-local.sh). The
dataset is converted locally and uploaded with boto3, as users copy datasets up; everything read
over s3:// is compared with the local folder, and the local folder with independent oracles
(the source images and labels, Python's tarfile, OpenCV). The fault proxy of s3_local counts
the GETs (a warm cache reads no shard again) and cuts connections mid-download.
examples/train_keypoints.py reads an uploaded dataset with --cache DIR --cache-size N.

Needs swift-* memcached python3-boto3 (scripts/setup-deps.sh test); skips without them.
"""
import functools
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402
import s3_local as s3l  # noqa: E402
from s3_local import FaultProxy  # noqa: E402
from test_s3 import RangeHandler, ThreadingServer  # noqa: E402  (http.server with ranges)

BUCKET = "tarmac-read"
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
N = 48


def source_image(i):
    return fx.smooth_rgb(64 + 8 * (i % 3), 48, i)


def source_labels(i):
    return {"cls": i % 7, "box": [i, i + 0.5, 10.25, 20.0], "caption": f"sample {i} caption"}


def tree_bytes(folder):
    """Bytes of the objects in a cache folder (lock files and downloads in flight left out)."""
    total = 0
    for root, _, files in os.walk(folder):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files
                     if not f.endswith(".lock") and ".part-" not in f)
    return total


# A reader in another process: every sample's image bytes, decoded pixels and labels, hashed.
READER = """
import hashlib, sys, tarmac
ds = tarmac.Dataset(sys.argv[1], cache=sys.argv[2])
h = hashlib.sha256()
for i in range(len(ds)):
    h.update(ds.key(i).encode()); h.update(bytes(ds.image(i))); h.update(ds.decode(i).tobytes())
    h.update(repr(ds.value("cls", i)).encode())
print(h.hexdigest())
"""


class S3Datasets(fx.TmpCase):
    @classmethod
    def build(cls):
        s3l.start_server(cls)
        cls.s3.create_bucket(Bucket=BUCKET)
        members = []
        for i in range(N):
            members += [(f"s/{i:04d}.png", fx.png(source_image(i))), (f"s/{i:04d}.json", fx.js(source_labels(i)))]
        tar = os.path.join(cls.tmp, "in.tar")
        fx.write_tar(tar, members)
        cls.local = os.path.join(cls.tmp, "local")
        subprocess.run([fx.TARMAC, "convert", "-q", tar, "-o", cls.local, "--format", "png",
                        "--shard-size", "64K"], check=True)
        cls.files = sorted(n for n in os.listdir(cls.local) if os.path.isfile(os.path.join(cls.local, n)))
        cls.shards = [n for n in cls.files if n.endswith(".tar")]
        assert len(cls.shards) >= 4, cls.files
        cls.upload("ds/")
        cls.url = f"s3://{BUCKET}/ds/"
        import tarmac
        cls.tarmac = tarmac
        cls.ref = tarmac.Dataset(cls.local)
        os.environ.update(cls.env)  # the reader in this process reads the endpoint and keys there

    @classmethod
    def upload(cls, prefix, skip=()):
        for name in cls.files:
            if name not in skip:
                cls.s3.upload_file(os.path.join(cls.local, name), BUCKET, prefix + name)

    def setUp(self):
        os.environ["AWS_ENDPOINT_URL"] = self.env["AWS_ENDPOINT_URL"]

    def through(self, proxy):
        os.environ["AWS_ENDPOINT_URL"] = proxy.url
        self.addCleanup(proxy.close)

    def tarmac_cli(self, *args):
        return subprocess.run([fx.TARMAC, *args], env=self.env, capture_output=True, timeout=180)

    def shard_gets(self, proxy):
        return [g for g in proxy.gets if g.endswith(".tar")]

    def cache(self, name):
        return os.path.join(self.tmp, name)

    def assert_same_as_local(self, ds):
        """Every sample of `ds` as the local dataset holds it, and as the sources say."""
        ref = self.ref
        self.assertEqual(len(ds), N)
        self.assertEqual(ds.fields, ref.fields)
        with tarfile.open(os.path.join(self.local, self.shards[0])) as t:  # the writer's tar, read by Python
            first = {m.name: t.extractfile(m).read() for m in t.getmembers()}
        for i in range(N):
            key = ref.key(i)
            self.assertEqual(ds.key(i), key)
            self.assertEqual(bytes(ds.image(i)), bytes(ref.image(i)), key)
            src = int(key.split("/")[-1])
            self.assertTrue((ds.decode(i) == source_image(src)).all(), key)  # PNG: lossless
            labels = source_labels(src)
            self.assertEqual(int(ds.value("cls", i)), labels["cls"])
            self.assertEqual(ds.value("box", i).tolist(), labels["box"])
            self.assertEqual(ds.value("caption", i), labels["caption"])
            self.assertTrue((ds.affine(i) == ref.affine(i)).all())
            if key + ".png" in first:
                self.assertEqual(bytes(ds.image(i)), first[key + ".png"], key)

    def assert_cached_shards_are_local(self, cache):
        folder = os.path.join(cache, BUCKET, "ds")
        for name in self.shards:
            with open(os.path.join(folder, name), "rb") as a, open(os.path.join(self.local, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)
        self.assertEqual([n for n in os.listdir(folder) if ".part-" in n], [])

    # ------------------------------------------------------------------ reader
    def test_reader_equals_local_and_a_warm_cache_reads_no_shard(self):
        proxy = FaultProxy(self.port)
        self.through(proxy)
        cache = self.cache("warm")
        ds = self.tarmac.Dataset(self.url, cache=cache)
        self.assertEqual(self.shard_gets(proxy), [], "shards are fetched on first use, not at open")
        self.assertEqual(bytes(ds[0]["image"]), bytes(self.ref.image(0)))  # ds[i]: numpy views
        self.assertEqual(len(self.shard_gets(proxy)), 1)
        ds.image(0)
        self.assertEqual(len(self.shard_gets(proxy)), 1)
        for i in range(N):
            self.assertEqual(ds[i]["__key__"], self.ref.key(i))
            self.assertEqual(bytes(ds[i]["image"]), bytes(self.ref[i]["image"]))
        self.assert_same_as_local(ds)
        gets = self.shard_gets(proxy)
        self.assertEqual(sorted(g.rsplit("/", 1)[1] for g in gets), self.shards, "each shard once")
        self.assert_cached_shards_are_local(cache)
        again = self.tarmac.Dataset(self.url, cache=cache)
        self.assert_same_as_local(again)
        self.assertEqual(self.shard_gets(proxy), gets, "a second open read a shard again")
        # pickled (to a DataLoader worker): it reopens through the same cache
        import pickle
        copy = pickle.loads(pickle.dumps(again))
        self.assertEqual((copy.path, copy.cache), (self.url, cache))
        self.assertEqual(bytes(copy.image(N - 1)), bytes(self.ref.image(N - 1)))
        self.assertEqual(self.shard_gets(proxy), gets)

    def test_corrupted_cached_shard_is_fetched_again(self):
        cache = self.cache("corrupt")
        self.assert_same_as_local(self.tarmac.Dataset(self.url, cache=cache))
        path = os.path.join(cache, BUCKET, "ds", self.shards[1])
        with open(path, "r+b") as f:
            f.seek(1000)
            b = f.read(1)
            f.seek(1000)
            f.write(bytes([b[0] ^ 0xFF]))
        proxy = FaultProxy(self.port)
        self.through(proxy)
        self.assert_same_as_local(self.tarmac.Dataset(self.url, cache=cache))
        self.assertEqual([g.rsplit("/", 1)[1] for g in self.shard_gets(proxy)], [self.shards[1]])
        self.assert_cached_shards_are_local(cache)

    def test_eviction_keeps_the_cache_under_its_size(self):
        cache = self.cache("small")
        sizes = {n: os.path.getsize(os.path.join(self.local, n)) for n in self.files}
        small = sum(v for n, v in sizes.items() if not n.endswith(".tar")) + 2 * max(
            sizes[n] for n in self.shards)
        ds = self.tarmac.Dataset(self.url, cache=cache, cache_size=small)
        for i in range(N):
            self.assertEqual(bytes(ds.image(i)), bytes(self.ref.image(i)))
            self.assertLessEqual(tree_bytes(cache), small)
        kept = [n for n in os.listdir(os.path.join(cache, BUCKET, "ds")) if n.endswith(".tar")]
        self.assertLess(len(kept), len(self.shards))
        self.assertIn(self.ref_shard_of(N - 1), kept, "the last shard used is kept")
        with self.assertRaises(ValueError):
            self.tarmac.Dataset(self.url, cache=cache, cache_size=-1)

    def ref_shard_of(self, i):
        return self.shards[int(self.ref.column("__image__.shard")[i])]

    def test_dropped_connections_mid_download_are_resumed(self):
        proxy = FaultProxy(self.port, cut_after=30_000, cuts=3)
        self.through(proxy)
        cache = self.cache("cut")
        self.assert_same_as_local(self.tarmac.Dataset(self.url, cache=cache))
        self.assertEqual(proxy.cut, 3)
        self.assertTrue(any(r > 0 for r in proxy.ranges), proxy.ranges)  # resumed, not restarted
        self.assert_cached_shards_are_local(cache)

    def test_processes_share_one_cache(self):
        cache = self.cache("shared")
        env = dict(self.env, PYTHONPATH=os.pathsep.join(sys.path))
        procs = [subprocess.Popen([sys.executable, "-c", READER, self.url, cache], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
        outs = [p.communicate(timeout=300) for p in procs]
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err)
        want = subprocess.run([sys.executable, "-c", READER.replace(", cache=sys.argv[2]", ""), self.local],
                              env=env, capture_output=True, text=True, check=True).stdout
        self.assertEqual({o for o, _ in outs}, {want})
        self.assert_cached_shards_are_local(cache)

    def test_torch_dataset_in_loader_workers(self):
        try:
            import torch
            import tarmac.torch as tt
        except ImportError as e:
            self.skipTest(f"torch: {e}")
        cache = self.cache("torch")
        ds = tt.TarmacDataset(self.url, cache=cache, fields=["cls", "box"])
        # images of three widths: one sample at a time (batch_size None), not collated
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
        seen = {}
        for sample in loader:
            seen[int(sample["__index__"])] = (int(sample["cls"]), sample["image"].numpy())
        self.assertEqual(sorted(seen), list(range(N)))
        for i, (cls, chw) in seen.items():
            self.assertEqual(cls, int(self.ref.value("cls", i)))
            self.assertTrue((chw.transpose(1, 2, 0) == self.ref.decode(i)).all())
        self.assert_cached_shards_are_local(cache)
        # the samplers and MixedDataset open it through its cache too
        batches = list(tt.BucketBatchSampler(ds, 4, rank=0, world=1))
        self.assertEqual(sorted(i for b in batches for i in b), list(range(N)))
        raw = tt.TarmacDataset(self.url, cache=cache, fields=["cls"], decode=False)  # images of 3 sizes
        mixed = tt.MixedDataset([raw, raw], fields=["cls"], decode=False)
        self.assertEqual(len(mixed), 2 * N)
        self.assertEqual(int(mixed[N + 3]["cls"]), int(self.ref.value("cls", 3)))

    def test_train_example_with_cache_and_cache_size(self):
        """examples/train_keypoints.py on s3:// with --cache DIR --cache-size N: the same losses
        as on the local folder (the same seed, so the same samples in the same order), the
        cache folder at most N bytes (two of its largest shards and the rest), its shards the
        local files byte for byte; the next run fetches again what was evicted."""
        if importlib.util.find_spec("torch") is None:
            self.skipTest("torch is not installed")
        raw, local = self.path("hmr-raw"), self.path("hmr")
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make-sample-data.py"), raw, "--samples", "16",
                        "--archives", "2"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([fx.TARMAC, "convert", "-q", *sorted(os.path.join(raw, f) for f in os.listdir(raw)), "-o",
                        local, "--crop", "field:bbox_xywh", "--crop-scale", "1.2", "--square", "--size", "224",
                        "--points", "keypoints2d", "--shard-size", "48K"], check=True)
        names = sorted(os.listdir(local))
        shards = [n for n in names if n.endswith(".tar")]
        self.assertGreaterEqual(len(shards), 4, names)
        for name in names:
            self.s3.upload_file(os.path.join(local, name), BUCKET, "hmr/" + name)
        sizes = {n: os.path.getsize(os.path.join(local, n)) for n in names}
        limit = sum(v for n, v in sizes.items() if n not in shards) + 2 * max(sizes[n] for n in shards)
        proxy = FaultProxy(self.port)
        self.addCleanup(proxy.close)
        cache = self.cache("train")
        env = dict(self.env, AWS_ENDPOINT_URL=proxy.url, OMP_NUM_THREADS="1")
        example = [sys.executable, os.path.join(ROOT, "examples", "train_keypoints.py")]
        flags = ["--steps", "4", "--batch-size", "4", "--workers", "0", "--device", "cpu", "--log-every", "1"]

        def losses(*args):
            p = subprocess.run([*example, *args, *flags], env=env, capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            return [line.split("data-wait")[0] for line in p.stdout.splitlines() if line.startswith("step")]

        want = losses(local)
        self.assertEqual(len(want), 4)
        self.assertEqual(losses(f"s3://{BUCKET}/hmr/", "--cache", cache, "--cache-size", str(limit)), want)
        self.assertLessEqual(tree_bytes(cache), limit)
        folder = os.path.join(cache, BUCKET, "hmr")
        kept = [n for n in os.listdir(folder) if n.endswith(".tar")]
        self.assertTrue(0 < len(kept) < len(shards), kept)
        for name in kept:
            with open(os.path.join(folder, name), "rb") as a, open(os.path.join(local, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)
        gets = [g.rsplit("/", 1)[1] for g in self.shard_gets(proxy)]
        self.assertEqual(sorted(gets), shards, "each shard once (a process keeps what it mapped)")
        # the next run (a size in another unit) downloads again just what was evicted
        self.assertEqual(losses(f"s3://{BUCKET}/hmr/", "--cache", cache, "--cache-size", "1G"), want)
        again = [g.rsplit("/", 1)[1] for g in self.shard_gets(proxy)][len(gets):]
        self.assertEqual(sorted(again), sorted(set(shards) - set(kept)))
        # an s3:// dataset without --cache, and a size that is not one: usage errors
        for args, words in [([f"s3://{BUCKET}/hmr/"], "pass --cache DIR"),
                            ([f"s3://{BUCKET}/hmr/", "--cache", cache, "--cache-size", "1GB"], "'1GB' is not a size")]:
            p = subprocess.run([*example, *args, *flags], env=env, capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(words, p.stderr)

    def test_reader_errors(self):
        with self.assertRaisesRegex(ValueError, "cache="):
            self.tarmac.Dataset(self.url)
        with self.assertRaisesRegex(ValueError, "object storage"):
            self.tarmac.Dataset(self.local, cache=self.cache("x"))
        self.upload("nomanifest/", skip=("manifest.json",))
        with self.assertRaisesRegex(Exception, "not a complete dataset.*manifest.json"):
            self.tarmac.Dataset(f"s3://{BUCKET}/nomanifest/", cache=self.cache("nm"))
        self.upload("noshard/")
        self.s3.delete_object(Bucket=BUCKET, Key="noshard/" + self.shards[2])
        ds = self.tarmac.Dataset(f"s3://{BUCKET}/noshard/", cache=self.cache("ns"))
        i = next(i for i in range(N) if self.ref_shard_of(i) == self.shards[2])
        with self.assertRaisesRegex(Exception, f"s3://{BUCKET}/noshard/{self.shards[2]}.*NoSuchKey"):
            ds.image(i)

    def test_an_http_folder_is_read_as_a_bucket(self):
        handler = functools.partial(RangeHandler, directory=self.tmp)
        server = ThreadingServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        url = f"http://127.0.0.1:{server.server_address[1]}/local/"
        self.assert_same_as_local(self.tarmac.Dataset(url, cache=self.cache("http")))
        p = self.tarmac_cli("verify", url)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn(f"OK {url}: {N} samples", p.stdout.decode())
        p = self.tarmac_cli("cat", url, "#2")
        self.assertEqual(p.stdout, bytes(self.ref.image(2)))

    # ------------------------------------------------------------------ CLI
    def test_verify_passes_and_reads_every_byte_once(self):
        proxy = FaultProxy(self.port)
        p = subprocess.run([fx.TARMAC, "verify", "--json", self.url], capture_output=True, timeout=180,
                           env=dict(self.env, AWS_ENDPOINT_URL=proxy.url))
        proxy.close()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        j = json.loads(p.stdout)
        self.assertTrue(j["ok"])
        self.assertEqual((j["dataset"], j["samples"], j["shards"]), (self.url, N, len(self.shards)))
        self.assertEqual(sorted(g.rsplit("/", 1)[1] for g in self.shard_gets(proxy)), self.shards)
        local = json.loads(subprocess.run([fx.TARMAC, "verify", "--json", self.local], capture_output=True,
                                          check=True).stdout)
        self.assertEqual(j["bytes_checked"], local["bytes_checked"])

    def test_verify_finds_a_corrupted_shard_object(self):
        self.upload("flipped/")
        with open(os.path.join(self.local, self.shards[1]), "rb") as f:
            data = bytearray(f.read())
        data[3000] ^= 0x01  # inside a blob
        self.s3.put_object(Bucket=BUCKET, Key="flipped/" + self.shards[1], Body=bytes(data))
        p = self.tarmac_cli("verify", f"s3://{BUCKET}/flipped/")
        self.assertEqual(p.returncode, 3, p.stdout)
        out = p.stdout.decode()
        self.assertIn(f"{self.shards[1]}: sample", out)
        self.assertIn("CRC-32", out)
        self.assertNotIn(self.shards[0], out)

    def test_verify_sample_reads_the_chosen_blobs_alone(self):
        proxy = FaultProxy(self.port)
        p = subprocess.run([fx.TARMAC, "verify", "--json", "--sample", "10", "--seed", "5", self.url],
                           capture_output=True, timeout=180, env=dict(self.env, AWS_ENDPOINT_URL=proxy.url))
        proxy.close()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        j = json.loads(p.stdout)
        self.assertEqual((j["ok"], j["sampled"], j["blobs"]), (True, 10, 10))
        self.assertEqual(len(self.shard_gets(proxy)), 10)  # one Range GET per sample, no whole shard
        self.assertEqual(len(proxy.ranges), 10)
        local = subprocess.run([fx.TARMAC, "verify", "--json", "--sample", "10", "--seed", "5", self.local],
                               capture_output=True, check=True)
        self.assertEqual(json.loads(local.stdout)["bytes_checked"], j["bytes_checked"])  # the same samples
        # every blob of one shard damaged: a spot check of half the samples finds it
        self.upload("spot/")
        path = os.path.join(self.local, self.shards[1])
        with open(path, "rb") as f:
            data = bytearray(f.read())
        sel = self.ref.column("__image__.shard") == 1
        for off in self.ref.column("__image__.offset")[sel]:
            data[int(off) + 7] ^= 0x10
        self.s3.put_object(Bucket=BUCKET, Key="spot/" + self.shards[1], Body=bytes(data))
        p = self.tarmac_cli("verify", "--sample", str(N // 2), f"s3://{BUCKET}/spot/")
        self.assertEqual(p.returncode, 3, p.stdout)
        self.assertIn(f"{self.shards[1]}: sample", p.stdout.decode())
        self.assertIn(f"({N // 2} spot-checked, --sample)", p.stdout.decode())

    def test_missing_manifest_is_not_a_complete_dataset(self):
        self.upload("nomanifest/", skip=("manifest.json",))
        url = f"s3://{BUCKET}/nomanifest/"
        for args in (["verify", url], ["info", url], ["ls", url], ["cat", url, "#0", "--labels"]):
            p = self.tarmac_cli(*args)
            self.assertEqual(p.returncode, 1, args)
            self.assertIn(f"'{url}' is not a complete dataset: it has no manifest.json",
                          (p.stdout + p.stderr).decode(), args)

    def test_info_ls_cat_equal_the_local_dataset(self):
        def same(args):
            remote = self.tarmac_cli(*[a if a != "DS" else self.url for a in args])
            local = self.tarmac_cli(*[a if a != "DS" else self.local + "/" for a in args])
            self.assertEqual(remote.returncode, 0, remote.stderr)
            self.assertEqual(local.returncode, 0, local.stderr)
            return remote.stdout.replace(self.url.encode(), b"DS/"), local.stdout.replace(
                (self.local + "/").encode(), b"DS/")

        for args in (["info", "DS"], ["ls", "DS"], ["ls", "-l", "DS"], ["ls", "--json", "DS"],
                     ["cat", "DS", "#5", "--labels"]):
            remote, local = same(args)
            self.assertEqual(remote, local, args)
        remote, local = same(["info", "--json", "DS"])
        self.assertEqual(json.loads(remote), json.loads(local))
        proxy = FaultProxy(self.port)
        p = subprocess.run([fx.TARMAC, "cat", self.url, self.ref.key(N - 1)], capture_output=True,
                           env=dict(self.env, AWS_ENDPOINT_URL=proxy.url), timeout=60)
        proxy.close()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, bytes(self.ref.image(N - 1)))
        self.assertTrue((fx.decode_rgb(p.stdout) == source_image(N - 1)).all())
        shard_reads = [g for g in proxy.gets if g.endswith(".tar")]
        self.assertEqual(len(shard_reads), 1)  # one Range GET: the sample's bytes, not the shard
        self.assertEqual(len(proxy.ranges), 1)
        self.assertEqual(proxy.ranges[0], int(self.ref.column("__image__.offset")[N - 1]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
