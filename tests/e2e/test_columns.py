"""End-to-end: `tarmac column merge|ls|rm` and `verify` on derived columns (docs/format.md 8, 9).

The parts are written here from the documented format (struct, json, numpy; the derive runner is
not used), the merged file is read back with the independent safetensors reader, and every
output is compared with the array the test wrote for that sample."""
import json
import os
import shutil
import struct
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402
import st_reader  # noqa: E402

SIZES = [(320, 200), (200, 320), (240, 240), (330, 210), (180, 300), (250, 250), (310, 190)] * 3
ST = {"float32": "F32", "float16": "F16", "int64": "I64", "uint8": "U8", "int32": "I32"}


def safetensors_bytes(tensors, metadata):
    """A safetensors file from the spec: tensors in the order given, header padded to 8."""
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, a, *dtype in tensors:
        a = np.ascontiguousarray(a)
        header[name] = {"dtype": dtype[0] if dtype else ST[a.dtype.name], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    h = json.dumps(header).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def share(n, rank, world):
    return rank * n // world, (rank + 1) * n // world


def write_part(ds_dir, name, rank, world, outputs, chunk_size=3, complete=True, labels_crc=None, n=None,
               fn="tests:encode", skip=(), bf16=False):
    """Rank's part: outputs {index: array} of its share, in chunks of chunk_size samples."""
    parts = os.path.join(ds_dir, "columns", name + ".parts")
    os.makedirs(parts, exist_ok=True)
    if labels_crc is None:
        with open(os.path.join(ds_dir, "manifest.json")) as f:
            labels_crc = json.load(f)["labels_crc32"]
    b, e = share(n, rank, world)
    idx = [i for i in range(b, e) if i not in skip]
    chunks = []
    for c, start in enumerate(range(0, len(idx), chunk_size)):
        rows = idx[start:start + chunk_size]
        arrays = [np.asarray(outputs[i]) for i in rows]
        data = safetensors_bytes([
            ("index", np.array(rows, dtype=np.int64)),
            ("shape", np.array([a.shape for a in arrays], dtype=np.int64).reshape(len(rows), arrays[0].ndim)),
            ("values", np.concatenate([a.ravel() for a in arrays]), *(["BF16"] if bf16 else []))],
            {"format": "tarmac-column-chunk/1"})
        fname = "part-%05d-of-%05d.chunk-%06d.safetensors" % (rank, world, c)
        with open(os.path.join(parts, fname), "wb") as f:
            f.write(data)
        chunks.append({"file": fname, "samples": len(rows), "bytes": len(data), "crc32": fx.crc_hex(data)})
    record = {"format": "tarmac-column-part/1", "column": name, "rank": rank, "world": world, "begin": b, "end": e,
              "dataset": {"labels_crc32": labels_crc, "num_samples": n}, "fn": fn, "tool": "tarmac test",
              "batch_size": chunk_size, "fields": [], "chunks": chunks, "done": len(idx), "complete": complete}
    with open(os.path.join(parts, "part-%05d-of-%05d.json" % (rank, world)), "w") as f:
        json.dump(record, f)


class ColumnTest(fx.TmpCase):
    @classmethod
    def build(cls):
        members = [("s%02d.png" % i, fx.png(fx.smooth_rgb(w, h, seed=i))) for i, (w, h) in enumerate(SIZES)]
        cls.archive = fx.write_tar(os.path.join(cls.tmp, "photos.tar"), members)
        cls.base = os.path.join(cls.tmp, "base")
        fx.convert(cls, [cls.archive], "--resize", "bucket", "--size", "64", "--bucket-step", "16",
                   "--format", "png", out=cls.base)

    def dataset(self, name):
        out = self.path(name)
        shutil.copytree(self.base, out)
        return out, fx.Dataset(out)

    def outputs(self, ds, ragged, dtype=np.float32):
        """A per-sample output: uniform [4, 2, 2], or ragged [4, h/16, w/16] like latents of buckets."""
        rng = np.random.default_rng(7)
        out = {}
        for i in range(len(ds.keys)):
            if ragged:
                w, h = int(ds.t["__image__.width"][i]), int(ds.t["__image__.height"][i])
                shape = (4, h // 16, w // 16)
            else:
                shape = (4, 2, 2)
            out[i] = (rng.standard_normal(shape) * 100).astype(dtype)
        return out

    def two_ranks(self, dataset, column, ragged):
        """A copy of the dataset with both parts of a 2-rank column written; (dir, dataset, outputs, n)."""
        out, ds = self.dataset(dataset)
        n = len(ds.keys)
        outs = self.outputs(ds, ragged=ragged)
        for r in range(2):
            write_part(out, column, r, 2, outs, n=n)
        return out, ds, outs, n

    def merge(self, out, name, expect=0, *flags):
        p = fx.run(["column", "merge", out, name, *flags])
        self.assertEqual(p.returncode, expect, p.stderr.decode())
        return p

    def test_uniform_column_merges_from_two_ranks(self):
        out, ds, outs, n = self.two_ranks("uniform", "emb", ragged=False)
        self.merge(out, "emb")
        t, meta = st_reader.load(os.path.join(out, "columns", "emb.safetensors"))
        self.assertEqual(t["values"].shape, (n, 4, 2, 2))
        np.testing.assert_array_equal(t["values"], np.stack([outs[i] for i in range(n)]))
        np.testing.assert_array_equal(t["offsets"], np.arange(n + 1) * 16)
        np.testing.assert_array_equal(t["shapes"], np.tile([4, 2, 2], (n, 1)))
        self.assertEqual(meta["format"], "tarmac-column/1")
        self.assertEqual(meta["labels_crc32"], ds.manifest["labels_crc32"])
        self.assertEqual(meta["world"], "2")
        self.assertEqual(meta["values_crc32"], fx.crc_hex(t["values"].tobytes()))
        self.assertFalse(os.path.exists(os.path.join(out, "columns", "emb.parts")))
        ls = json.loads(fx.run(["column", "ls", out, "--json"]).stdout)
        self.assertEqual([(c["name"], c["merged"], c["samples"], c["ok"]) for c in ls], [("emb", True, n, True)])
        v = fx.run(["verify", out, "--json"])
        self.assertEqual(v.returncode, 0, v.stdout.decode() + v.stderr.decode())
        self.assertEqual(json.loads(v.stdout)["columns"], 1)
        info = json.loads(fx.run(["info", out, "--json"]).stdout)
        self.assertEqual([(c["name"], c["dtype"], c["shape"], c["ok"]) for c in info["columns"]],
                         [("emb", "F32", "[4, 2, 2]", True)])
        self.assertIn("derived columns", fx.run(["info", out]).stdout.decode())

    def test_ragged_column_keeps_each_samples_shape(self):
        out, ds = self.dataset("ragged")
        n = len(ds.keys)
        outs = self.outputs(ds, ragged=True, dtype=np.float16)
        for r in range(3):
            write_part(out, "latents", r, 3, outs, n=n, chunk_size=4)
        self.merge(out, "latents", 0, "--keep-parts")
        self.assertTrue(os.path.isdir(os.path.join(out, "columns", "latents.parts")))
        t, _ = st_reader.load(os.path.join(out, "columns", "latents.safetensors"))
        self.assertEqual(t["values"].ndim, 1)
        self.assertGreater(len({tuple(s) for s in t["shapes"]}), 1)
        for i in range(n):
            b, e = t["offsets"][i], t["offsets"][i + 1]
            got = t["values"][b:e].view(np.float16).reshape(t["shapes"][i])
            np.testing.assert_array_equal(got, outs[i])
        self.assertEqual(fx.run(["verify", out]).returncode, 0)

    def test_incomplete_parts_are_refused_naming_ranks_and_ranges(self):
        out, ds = self.dataset("missing")
        n = len(ds.keys)
        outs = self.outputs(ds, ragged=False)
        write_part(out, "emb", 0, 4, outs, n=n)
        write_part(out, "emb", 2, 4, outs, n=n, complete=False, skip={12, 13})
        write_part(out, "emb", 3, 4, outs, n=n)
        p = self.merge(out, "emb", 1)
        err = p.stderr.decode()
        b1, e1 = share(n, 1, 4)
        missing = (e1 - b1) + 2
        self.assertIn(f"{missing} of {n} samples have no output", err)
        self.assertIn(f"rank 1 of 4: no part at all, samples {b1}..{e1 - 1}", err)
        self.assertIn("--rank 1 --world 4", err)
        self.assertIn("rank 2 of 4: 2 of", err)
        self.assertIn("12..13", err)
        self.assertIn("unfinished", err)
        self.assertFalse(os.path.exists(os.path.join(out, "columns", "emb.safetensors")))
        # The missing rank computed, the unfinished one resumed: then it merges.
        write_part(out, "emb", 1, 4, outs, n=n)
        write_part(out, "emb", 2, 4, outs, n=n)
        self.merge(out, "emb")
        t, _ = st_reader.load(os.path.join(out, "columns", "emb.safetensors"))
        np.testing.assert_array_equal(t["values"], np.stack([outs[i] for i in range(n)]))

    def test_parts_of_another_dataset_version_or_world_are_refused(self):
        out, ds = self.dataset("stale")
        n = len(ds.keys)
        outs = self.outputs(ds, ragged=False)
        write_part(out, "emb", 0, 2, outs, n=n, labels_crc="0badc0de")
        write_part(out, "emb", 1, 2, outs, n=n)
        err = self.merge(out, "emb", 1).stderr.decode()
        self.assertIn("another version of the dataset", err)
        self.assertIn("tarmac column rm", err)
        shutil.rmtree(os.path.join(out, "columns"))
        write_part(out, "emb", 0, 2, outs, n=n)
        write_part(out, "emb", 1, 3, outs, n=n)
        err = self.merge(out, "emb", 1).stderr.decode()
        self.assertIn("2 different world sizes", err)
        self.assertIn("part-00001-of-00003.json", err)

    def test_merge_shows_progress_on_a_terminal_only(self):
        out, ds, outs, n = self.two_ranks("progress", "lat", ragged=True)
        parts = os.path.join(out, "columns", "lat.parts")
        chunk_bytes = sum(os.path.getsize(os.path.join(parts, f)) for f in os.listdir(parts) if "chunk" in f)
        rc, text = fx.on_pty(["column", "merge", out, "lat", "--keep-parts"])
        self.assertEqual(rc, 0, text)
        text = text.decode()
        self.assertIn("column merge: reading parts 100%", text)
        self.assertGreater(chunk_bytes, 1024)
        kib = f"{chunk_bytes / 1024:.1f} KiB"
        self.assertIn(f"column merge: reading parts 100%  {kib} of {kib}", text)
        self.assertIn("column merge: writing 100%", text)
        p = self.merge(out, "lat")  # not a terminal, and short: the summary alone
        self.assertNotIn(b"column merge:", p.stderr + p.stdout)
        self.assertIn(b"merged column 'lat'", p.stdout)
        # verify's progress counts the column's bytes with the shards'
        total = os.path.getsize(os.path.join(out, "columns", "lat.safetensors")) + sum(
            os.path.getsize(os.path.join(out, s)) for s in ds.shards)
        rc, text = fx.on_pty(["verify", out])
        self.assertEqual(rc, 0, text)
        self.assertIn(f"verify: 100%  {total / 1024:.1f} KiB of {total / 1024:.1f} KiB", text.decode())

    def test_damaged_chunks_are_refused(self):
        out, ds, outs, n = self.two_ranks("damaged", "emb", ragged=False)
        chunk = os.path.join(out, "columns", "emb.parts", "part-00001-of-00002.chunk-000001.safetensors")
        fx.flip_bit(chunk, 3, 0x10)
        err = self.merge(out, "emb", 1).stderr.decode()
        self.assertIn("part-00001-of-00002.chunk-000001.safetensors", err)
        self.assertIn("CRC-32", err)
        # A chunk listing a sample another chunk holds.
        shutil.rmtree(os.path.join(out, "columns"))
        write_part(out, "emb", 0, 1, outs, n=n)
        rec = os.path.join(out, "columns", "emb.parts", "part-00000-of-00001.json")
        with open(rec) as f:
            record = json.load(f)
        record["chunks"].append(record["chunks"][0])
        with open(rec, "w") as f:
            json.dump(record, f)
        err = self.merge(out, "emb", 1).stderr.decode()
        self.assertIn("holds too", err)
        # Within one chunk: its index lists sample 0 twice. Written so (its CRC-32 in the record
        # is right), it is named as such; damaged so (a flipped bit), the CRC-32 says it.
        shutil.rmtree(os.path.join(out, "columns"))
        write_part(out, "emb", 0, 1, outs, n=n)
        chunk = os.path.join(out, "columns", "emb.parts", "part-00000-of-00001.chunk-000000.safetensors")
        with open(chunk, "rb") as f:
            data = bytearray(f.read())
        (hn,) = struct.unpack_from("<Q", data, 0)
        at = 8 + hn + json.loads(data[8:8 + hn])["index"]["data_offsets"][0]
        self.assertEqual(struct.unpack_from("<qq", data, at), (0, 1))
        struct.pack_into("<q", data, at + 8, 0)  # index [0, 0, 2]
        with open(chunk, "wb") as f:
            f.write(data)
        with open(rec) as f:
            record = json.load(f)
        record["chunks"][0]["crc32"] = fx.crc_hex(bytes(data))
        with open(rec, "w") as f:
            json.dump(record, f)
        err = self.merge(out, "emb", 1).stderr.decode()
        self.assertIn("holds sample 0, which " + chunk + " holds too", err)
        record["chunks"][0]["crc32"] = fx.crc_hex(bytes(data[:at + 8]) + bytes([1]) + bytes(data[at + 9:]))
        with open(rec, "w") as f:
            json.dump(record, f)  # as if the bit had flipped after the record was written
        err = self.merge(out, "emb", 1).stderr.decode()
        self.assertIn("its CRC-32 is " + fx.crc_hex(bytes(data)), err)

    def test_verify_finds_a_flipped_byte_and_a_stale_column(self):
        out, ds = self.dataset("verify")
        n = len(ds.keys)
        outs = self.outputs(ds, ragged=True)
        write_part(out, "latents", 0, 1, outs, n=n)
        self.merge(out, "latents")
        path = os.path.join(out, "columns", "latents.safetensors")
        fx.flip_bit(path, 100)
        v = fx.run(["verify", out])
        self.assertEqual(v.returncode, 3)
        self.assertIn("columns/latents.safetensors", v.stdout.decode() + v.stderr.decode())
        self.assertIn("values_crc32", v.stdout.decode() + v.stderr.decode())
        # The dataset converted again with other options: a column copied over from the old one
        # no longer belongs to it.
        other = self.path("reconverted")
        fx.convert(self, [self.archive], "--resize", "bucket", "--size", "48", "--bucket-step", "16",
                   "--format", "png", out=other)
        self.assertEqual(fx.run(["verify", other]).returncode, 0)
        os.makedirs(os.path.join(other, "columns"))
        write_part(self.path("verify"), "fresh", 0, 1, outs, n=n)
        self.merge(self.path("verify"), "fresh")
        shutil.copy(os.path.join(out, "columns", "fresh.safetensors"), os.path.join(other, "columns"))
        v = fx.run(["verify", other])
        self.assertEqual(v.returncode, 3)
        self.assertIn("another version of the dataset", v.stdout.decode() + v.stderr.decode())
        ls = fx.run(["column", "ls", other])
        self.assertEqual(ls.returncode, 1)
        self.assertIn("another version of the dataset", ls.stdout.decode())

    def test_verify_fails_half_derived_column(self):
        """Issue #35 item 7: verify said OK on a dataset whose column 'latent' held rank 0 of 2
        only (unmerged, half the samples without an output). It fails, naming the column, the
        samples held (counted here from the share rule of format.md 8) and the missing rank;
        then an unfinished rank; then both ranks complete but not merged; merged, it passes."""
        out, ds = self.dataset("half-derived")
        n = len(ds.keys)
        outs = self.outputs(ds, ragged=False)
        self.assertEqual(fx.run(["verify", out]).returncode, 0)
        write_part(out, "latent", 0, 2, outs, n=n)
        b, e = share(n, 0, 2)
        v = fx.run(["verify", out])
        text = v.stdout.decode() + v.stderr.decode()
        self.assertEqual(v.returncode, 3, text)
        self.assertIn("column 'latent' holds %d of %d samples (rank 0 of 2 complete; ranks 1 missing)" % (e - b, n),
                      text)
        self.assertIn("run derive for the missing ranks, then `tarmac column merge %s latent`" % out, text)
        self.assertIn("columns/latent.parts", text)
        # Rank 1 stopped after 3 samples (its record says so).
        b1, e1 = share(n, 1, 2)
        write_part(out, "latent", 1, 2, outs, n=n, complete=False, skip=range(b1 + 3, e1))
        v = fx.run(["verify", out])
        text = v.stdout.decode() + v.stderr.decode()
        self.assertEqual(v.returncode, 3, text)
        self.assertIn("holds %d of %d samples" % (e - b + 3, n), text)
        self.assertIn("rank 1 unfinished at 3 of %d" % (e1 - b1), text)
        # Both complete, not merged: still not part of the dataset.
        write_part(out, "latent", 1, 2, outs, n=n)
        v = fx.run(["verify", out])
        text = v.stdout.decode() + v.stderr.decode()
        self.assertEqual(v.returncode, 3, text)
        self.assertIn("column 'latent' is not merged: its 2 ranks hold all %d samples" % n, text)
        self.merge(out, "latent")
        v = fx.run(["verify", out])
        self.assertEqual(v.returncode, 0, v.stdout.decode() + v.stderr.decode())

    def test_verify_reads_part_records_as_merge_does(self):
        """verify read a part record with its own parser, which cast a JSON float to a count (a
        48-digit rank: undefined behaviour) and let through records `column merge` refuses
        (no format). It now reads them by the format's one parser: each is a problem naming the
        file and the field, exit 3."""
        out, ds = self.dataset("bad-records")
        n = len(ds.keys)
        outs = self.outputs(ds, ragged=False)
        write_part(out, "latent", 0, 1, outs, n=n)
        record = os.path.join(out, "columns", "latent.parts", "part-00000-of-00001.json")
        with open(record) as f:
            good = json.load(f)
        for change, says in [(lambda r: r.update(rank=4.2e47), '"rank" is not a count'),
                             (lambda r: r.pop("format"), 'has no "format"'),
                             (lambda r: r["chunks"][0].update(file="../x"), 'chunk file "../x" is not a plain name')]:
            r = json.loads(json.dumps(good))
            change(r)
            with open(record, "w") as f:
                json.dump(r, f)
            v = fx.run(["verify", out])
            text = v.stdout.decode() + v.stderr.decode()
            self.assertEqual(v.returncode, 3, text)
            self.assertIn("part-00000-of-00001.json", text)
            self.assertIn(says, text)

    def test_verify_notices_a_column_deleted_replaced_or_copied_in(self):
        """#25 item 11: the manifest records each merged column (size, CRC-32s), so that
        verify notices its file deleted, replaced by another, or copied in unrecorded."""
        out, ds = self.dataset("recorded")
        n = len(ds.keys)
        first = self.outputs(ds, ragged=False)
        write_part(out, "a", 0, 1, first, n=n)
        self.merge(out, "a")
        with open(os.path.join(out, "manifest.json")) as f:
            record = json.load(f)["columns"]["a"]
        path = os.path.join(out, "columns", "a.safetensors")
        _, meta = st_reader.load(path)
        self.assertEqual(record, {"size": os.path.getsize(path), "values_crc32": meta["values_crc32"],
                                  "offsets_crc32": meta["offsets_crc32"], "shapes_crc32": meta["shapes_crc32"]})
        self.assertEqual(fx.run(["verify", out]).returncode, 0)
        saved = self.path("a-first.safetensors")
        shutil.copy(path, saved)
        # Deleted: verify says so, naming the column and how to go on.
        os.remove(path)
        v = fx.run(["verify", out])
        self.assertEqual(v.returncode, 3)
        self.assertIn("is missing", v.stdout.decode())
        self.assertIn("column rm a", v.stdout.decode())
        # Derived again from other outputs: the new file is recorded.
        second = {i: x + 1 for i, x in first.items()}
        write_part(out, "a", 0, 1, second, n=n)
        self.merge(out, "a")
        self.assertEqual(fx.run(["verify", out]).returncode, 0)
        # Replaced by the first one, a valid column file of this dataset: not the recorded file.
        shutil.copy(saved, path)
        v = fx.run(["verify", out])
        self.assertEqual(v.returncode, 3)
        self.assertIn("replaced after it was merged", v.stdout.decode())
        # Removed with column rm (the record goes too), then copied in: not recorded.
        self.assertEqual(fx.run(["column", "rm", out, "a"]).returncode, 0)
        with open(os.path.join(out, "manifest.json")) as f:
            self.assertEqual(json.load(f)["columns"], {})
        self.assertEqual(fx.run(["verify", out]).returncode, 0)
        shutil.copy(saved, path)
        v = fx.run(["verify", out])
        self.assertEqual(v.returncode, 3)
        self.assertIn("not recorded in manifest.json", v.stdout.decode())
        # A record whose file is gone can be removed with column rm alone.
        write_part(out, "b", 0, 1, first, n=n)
        self.merge(out, "b")
        os.remove(os.path.join(out, "columns", "b.safetensors"))
        os.remove(path)
        self.assertEqual(fx.run(["column", "rm", out, "b"]).returncode, 0)
        self.assertEqual(fx.run(["verify", out]).returncode, 0)

    def test_ls_and_rm(self):
        out, ds = self.dataset("lsrm")
        n = len(ds.keys)
        outs = self.outputs(ds, ragged=False)
        write_part(out, "a", 0, 2, outs, n=n)
        ls = fx.run(["column", "ls", out])
        self.assertEqual(ls.returncode, 1)
        self.assertIn("not merged", ls.stdout.decode())
        self.assertIn("1 of 2 ranks complete", ls.stdout.decode())
        p = fx.run(["column", "rm", out, "b"])
        self.assertEqual(p.returncode, 1)
        self.assertIn("it has: a", p.stderr.decode())
        self.assertEqual(fx.run(["column", "rm", out, "a"]).returncode, 0)
        self.assertFalse(os.path.exists(os.path.join(out, "columns", "a.parts")))
        self.assertIn("no columns", fx.run(["column", "ls", out]).stdout.decode())
        bad = fx.run(["column", "merge", out, "__x"])
        self.assertEqual(bad.returncode, 2)  # a usage error, as every UsageError is
        self.assertIn("not a column name", bad.stderr.decode())


if __name__ == "__main__":
    unittest.main()
