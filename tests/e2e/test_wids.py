"""End-to-end: `shardlist.json`, the shard list WebDataset's indexed reader (wids) opens.

The file is parsed here per wids' spec (wids/wids_specs.py: `wids_version` 1, `shardlist` of
{url, nsamples}, relative URLs merged onto the list's folder as `urlmerge(urldir(path), url)`
does) and every shard is opened with Python's tarfile: the samples counted by key as wids
groups them (`group_by_key`: the member name up to the first dot of its file name) must be
`nsamples`. Written by convert, convert --resume and merge; checked by verify.

When WIDS_SRC names a folder holding webdataset's pure-Python `wids` package (a checkout of
github.com/webdataset/webdataset, e.g. `git archive 0d98ea3 wids | tar -x`), the real
`wids.ShardListDataset` also opens the dataset and every sample's key and bytes are compared.
"""
import json
import os
import re
import sys
import tarfile
import unittest
from urllib.parse import urlparse

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

N = 12


def source(path, n=N, seed=0):
    members = []
    for i in range(n):
        img = fx.smooth_rgb(64 + 8 * (i % 3), 48, seed + i)
        members.append((f"d/{i:05d}.png", fx.png(img)))
        members.append((f"d/{i:05d}.depth.png", fx.png(fx.smooth_u16(64 + 8 * (i % 3), 48, i))))
        members.append((f"d/{i:05d}.json", fx.js({"i": i})))
    fx.write_tar(path, members)
    return path


def wids_resolve(list_path, url):
    """wids_specs.urlmerge(urldir(list_path), url) for local paths."""
    base = os.path.dirname(urlparse(list_path).path)
    u = urlparse(url)
    assert not u.scheme and not u.netloc, url
    return u.path if u.path.startswith("/") else os.path.normpath(os.path.join(base, u.path))


def keys_in_tar(path):
    """Distinct keys of a shard in member order, as wids' group_by_key makes samples."""
    keys = []
    with tarfile.open(path) as t:
        for m in t.getmembers():
            if not m.isfile():
                continue
            key = re.match(r"^((?:.*/)?.*?)(\..*)$", m.name).group(1)
            if not keys or keys[-1] != key:
                keys.append(key)
    return keys


class ShardListTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.src = source(os.path.join(cls.tmp, "in.tar"))

    def check_list(self, out, n):
        """The shard list of dataset `out` per the spec; returns its parsed JSON."""
        ds = fx.Dataset(out)
        path = os.path.join(out, "shardlist.json")
        with open(path) as f:
            doc = json.load(f)
        self.assertEqual(doc["__kind__"], "wids-shard-index-v1")
        self.assertEqual(doc["wids_version"], 1)
        self.assertNotIn("name", doc)  # the bytes do not depend on the folder's name
        self.assertEqual([s["url"] for s in doc["shardlist"]], ds.shards)
        all_keys = []
        for s in doc["shardlist"]:
            # Resolved from another working directory, as wids does from the list's URL.
            shard = wids_resolve(path, s["url"])
            self.assertTrue(os.path.isfile(shard), shard)
            keys = keys_in_tar(shard)
            self.assertEqual(s["nsamples"], len(keys), s["url"])
            self.assertEqual(s["filesize"], os.path.getsize(shard))
            all_keys += keys
        self.assertEqual(all_keys, ds.keys)  # wids' global index i is tarmac's sample i
        self.assertEqual(sum(s["nsamples"] for s in doc["shardlist"]), n)
        man = ds.manifest["shard_list"]
        self.assertEqual(man["name"], "shardlist.json")
        with open(path, "rb") as f:
            self.assertEqual(man["crc32"], fx.crc_hex(f.read()))
        return doc

    def test_convert_writes_a_shard_list_with_per_shard_counts(self):
        _, ds = fx.convert(self, [self.src], "--dense", "depth.png", "--format", "png",
                           "--shard-size", "24K", out=self.path("conv"))
        self.assertGreater(len(ds.shards), 2)  # several shards, so counts differ from N
        self.check_list(ds.out, N)
        p = fx.run(["verify", ds.out])
        self.assertEqual(p.returncode, 0, p.stderr.decode())

    def test_relative_urls_resolve_from_the_list_folder_whatever_the_cwd(self):
        _, ds = fx.convert(self, [self.src], "--shard-size", "8K", out=self.path("rel"))
        here = os.getcwd()
        try:
            os.chdir(self.tmp)
            self.check_list("rel", N)
            os.chdir("/")
            self.check_list(os.path.relpath(ds.out, "/"), N)
        finally:
            os.chdir(here)

    def test_merge_writes_the_list_of_the_merged_shards(self):
        parts = []
        for k in range(2):
            _, d = fx.convert(self, [self.src], "--shard", f"{k}/2",
                              "--shard-size", "16K", out=self.path(f"part{k}"))
            self.check_list(d.out, len(d.keys))
            parts.append(d.out)
        p = fx.run(["merge", *parts, "-o", self.path("merged")])
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.check_list(self.path("merged"), N)
        p = fx.run(["verify", self.path("merged")])
        self.assertEqual(p.returncode, 0, p.stderr.decode())

    def test_labels_only_datasets_have_no_shard_list(self):
        _, ds = fx.convert(self, [self.src], "--no-images", out=self.path("labels"))
        self.assertFalse(os.path.exists(os.path.join(ds.out, "shardlist.json")))
        self.assertNotIn("shard_list", ds.manifest)
        p = fx.run(["verify", ds.out])
        self.assertEqual(p.returncode, 0, p.stderr.decode())

    def test_verify_finds_a_wrong_count_a_missing_list_and_a_changed_byte(self):
        _, ds = fx.convert(self, [self.src], "--shard-size", "8K", out=self.path("bad"))
        path = os.path.join(ds.out, "shardlist.json")
        with open(path) as f:
            original = f.read()
        doc = json.loads(original)
        doc["shardlist"][0]["nsamples"] += 1
        with open(path, "w") as f:
            json.dump(doc, f)
        p = fx.run(["verify", ds.out])
        self.assertEqual(p.returncode, 3)
        err = p.stdout.decode() + p.stderr.decode()
        self.assertIn("shardlist.json", err)
        self.assertIn(f"has nsamples {doc['shardlist'][0]['nsamples']}", err)
        os.remove(path)
        p = fx.run(["verify", ds.out])
        self.assertEqual(p.returncode, 3)
        self.assertIn("shardlist.json", p.stdout.decode() + p.stderr.decode())
        with open(path, "w") as f:
            f.write(original)
        p = fx.run(["verify", ds.out])
        self.assertEqual(p.returncode, 0, p.stdout.decode() + p.stderr.decode())


@unittest.skipUnless(os.environ.get("WIDS_SRC"), "WIDS_SRC (a folder with webdataset's wids/) not set")
class RealWidsTest(fx.TmpCase):
    def test_wids_shard_list_dataset_opens_the_dataset(self):
        sys.path.insert(0, os.environ["WIDS_SRC"])
        import wids  # noqa: E402  (webdataset's, from the folder the environment names)

        src = source(os.path.join(self.tmp, "in.tar"))
        _, ds = fx.convert(self, [src], "--format", "png", "--dense", "depth.png",
                           "--shard-size", "16K", out=self.path("w"))
        cache = os.path.join(self.tmp, "cache")
        w = wids.ShardListDataset(os.path.join(ds.out, "shardlist.json"), cache_dir=cache,
                                  transformations=[])
        self.assertEqual(len(w), N)
        self.assertGreater(len(w.shards), 1)
        for i in range(N):
            s = w[i]
            self.assertEqual(s["__key__"], ds.keys[i])
            self.assertEqual(s[".png"].read() if hasattr(s[".png"], "read") else s[".png"],
                             ds.blob(i))
            self.assertEqual(np.asarray(fx.decode_unchanged(ds.blob(i, "__depth__"))).dtype, np.uint16)


if __name__ == "__main__":
    unittest.main()
