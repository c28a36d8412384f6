"""End-to-end: zip inputs, whose members the workers inflate and check (issue #13, item 6).

Every zip is written by Python's zipfile (or by hand, from PKWARE's APPNOTE, for what zipfile
will not write: a wrong CRC, a lying size, an encrypted flag); the same members as a .tar
convert to the same dataset, and the values are checked against the source members.
"""
import io
import json
import os
import struct
import subprocess
import sys
import time
import unittest
import zipfile
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402
import st_reader  # noqa: E402


def sample_members(n):
    rng = np.random.default_rng(13)
    out = []
    for i in range(n):
        k = f"z/{i:03d}"
        if i % 3 == 0:  # a big, noisy image: such samples are converted ahead of their release
            img = rng.integers(0, 255, (160, 200, 3), dtype=np.uint8)
            out.append((k + ".jpg", fx.jpg(img, 95)))
        elif i % 3 == 1:
            out.append((k + ".png", fx.png(fx.smooth_rgb(48, 32, seed=i))))
        else:
            out.append((k + ".jpg", fx.jpg(fx.smooth_rgb(64, 40, seed=i), 90)))
        meta = {"id": i, "name": k, "note": None if i % 2 else "even"}
        out.append((k + ".json", json.dumps(meta, indent=4).encode()))
        out.append((k + ".kp.npy", fx.npy(rng.normal(size=(5, 2)).astype(np.float32))))
        out.append((k + ".txt", ("" if i % 4 == 0 else f"caption {i}").encode()))
    return out


def write_zip(path, members, compression=zipfile.ZIP_DEFLATED, zip64=(), stored=(), seekable=True):
    """zipfile's zip of `members`; names in `zip64` get ZIP64 extra fields (force_zip64), names in
    `stored` are stored whatever `compression` says."""
    with open(path, "wb") as raw:
        with zipfile.ZipFile(raw if seekable else fx.Unseekable(raw), "w", compression) as z:
            for name, data in members:
                info = zipfile.ZipInfo(name, (2023, 11, 14, 22, 13, 20))
                info.compress_type = zipfile.ZIP_STORED if name in stored else compression
                with z.open(info, "w", force_zip64=name in zip64) as f:
                    f.write(data)
    return path


def data_range(path, name):
    """Where the data of member `name` lies in the zip file (from its local header)."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(name)
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        h = f.read(30)
    n, e = struct.unpack_from("<HH", h, 26)
    start = info.header_offset + 30 + n + e
    return start, start + info.compress_size


def patch(path, out, offset, data):
    with open(path, "rb") as f:
        b = bytearray(f.read())
    b[offset:offset + len(data)] = data
    with open(out, "wb") as f:
        f.write(b)
    return out


def central_entry(path, name):
    """Offset of member `name`'s central directory entry."""
    with open(path, "rb") as f:
        b = f.read()
    at = b.rfind(b"PK\x05\x06")
    (cd,) = struct.unpack_from("<I", b, at + 16)
    while b[cd:cd + 4] == b"PK\x01\x02":
        n, e, c = struct.unpack_from("<HHH", b, cd + 28)
        if b[cd + 46:cd + 46 + n].decode() == name:
            return cd
        cd += 46 + n + e + c
    raise KeyError(name)


def hand_zip(path, name, stored_data, declared_size, crc, method=8, flags=0):
    """One member, written from the APPNOTE: `stored_data` as its data, with the declared size,
    CRC-32, method and flags given (so they may lie)."""
    nb = name.encode()
    local = struct.pack("<IHHHHHIIIHH", 0x04034b50, 20, flags, method, 0, 0x21, crc,
                        len(stored_data), declared_size, len(nb), 0) + nb
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 0x0314, 20, flags, method, 0, 0x21, crc,
                          len(stored_data), declared_size, len(nb), 0, 0, 0, 0, 0o100644 << 16, 0) + nb
    body = local + stored_data
    end = struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, 1, 1, len(central), len(body), 0)
    with open(path, "wb") as f:
        f.write(body + central + end)
    return path


def raw_deflate(data):
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


class ZipTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.members = sample_members(18)
        cls.data = dict(cls.members)
        cls.keys = sorted({n.split(".")[0] for n, _ in cls.members})
        cls.tar = fx.write_tar(os.path.join(cls.tmp, "same.tar"), cls.members)

    def convert(self, inputs, *flags, **kw):
        return fx.convert(self, inputs, "--threads", "2", *flags, **kw)

    def assert_same_dataset(self, got, want):
        self.assertEqual(got.keys, want.keys)
        self.assertEqual(sorted(got.t), sorted(want.t))
        for name in want.t:
            np.testing.assert_array_equal(got.t[name], want.t[name], err_msg=name)
        for i in range(len(want.keys) if "__image__.shard" in want.t else 0):
            self.assertEqual(got.blob(i), want.blob(i))
            np.testing.assert_array_equal(fx.decode_rgb(got.blob(i)), fx.decode_rgb(want.blob(i)))

    def assert_source_values(self, ds):
        """The labels against the source members themselves (numpy and json, not tarmac)."""
        self.assertEqual(ds.keys, self.keys)
        for i, k in enumerate(ds.keys):
            meta = json.loads(self.data[k + ".json"])
            self.assertEqual(int(ds.t["id"][i]), meta["id"])
            self.assertEqual(ds.string("name", i), k)
            self.assertEqual(bool(ds.t["note.valid"][i]), meta["note"] is not None)
            self.assertEqual(ds.string("txt", i), self.data[k + ".txt"].decode())
            want = np.load(io.BytesIO(self.data[k + ".kp.npy"]))
            np.testing.assert_array_equal(ds.t["kp"][i], want)

    def assert_input_recorded(self, ds, path):
        (inp,) = ds.manifest["inputs"]
        with open(path, "rb") as f:
            raw = f.read()
        self.assertEqual(inp["size"], len(raw))
        self.assertEqual(inp["crc32"], fx.crc_hex(raw))
        with zipfile.ZipFile(path) as z:
            self.assertEqual(inp["members"], len(z.infolist()))

    def test_zips_convert_as_the_tar_does(self):
        _, want = self.convert([self.tar], "--resize", "shorter", "--size", "24")
        self.assert_source_values(want)
        names = [n for n, _ in self.members]
        variants = {
            "deflated": dict(),
            "stored": dict(compression=zipfile.ZIP_STORED),
            "deflated+zip64+stored": dict(zip64=set(names[::2]), stored=set(names[::5])),
            "data descriptors": dict(seekable=False, zip64=set(names[::3])),
        }
        for label, kw in variants.items():
            with self.subTest(zip=label):
                p = write_zip(self.path(label.replace(" ", "-") + ".zip"), self.members, **kw)
                with zipfile.ZipFile(p) as z:  # what was asked is what zipfile wrote
                    infos = z.infolist()
                    if "zip64" in label:
                        self.assertTrue(any(len(i.extra) >= 20 for i in infos) or any(
                            i.header_offset for i in infos))
                    if "descriptors" in label:
                        self.assertTrue(all(i.flag_bits & 8 for i in infos))
                _, ds = self.convert([p], "--resize", "shorter", "--size", "24")
                self.assert_same_dataset(ds, want)
                self.assert_input_recorded(ds, p)

    def test_zip64_local_headers(self):
        # force_zip64 puts a ZIP64 extra field in every local header (none in the central directory).
        p = write_zip(self.path("all64.zip"), self.members, zip64={n for n, _ in self.members})
        with open(p, "rb") as f:
            head = f.read(64)
        n, e = struct.unpack_from("<HH", head, 26)
        self.assertEqual((e, head[30 + n:30 + n + 2]), (20, b"\x01\x00"))  # the ZIP64 field
        _, ds = self.convert([p], "--format", "keep")
        self.assert_source_values(ds)
        for i, k in enumerate(ds.keys):
            self.assertEqual(ds.blob(i), self.data.get(k + ".jpg") or self.data[k + ".png"])

    def test_labels_only_and_shards(self):
        p = write_zip(self.path("labels.zip"), self.members)
        _, want = self.convert([self.tar], "--no-images")
        _, ds = self.convert([p], "--no-images")
        self.assert_same_dataset(ds, want)
        self.assert_source_values(ds)
        # --shard by sample splits the zip as it splits the tar
        for part in (0, 1):
            _, a = self.convert([p], "--no-images", "--shard", f"{part}/2")
            _, b = self.convert([self.tar], "--no-images", "--shard", f"{part}/2")
            self.assertEqual(a.keys, b.keys)

    def test_standard_input_streams(self):
        p = write_zip(self.path("stdin.zip"), self.members)
        with open(p, "rb") as f:
            raw = f.read()
        _, want = self.convert([self.tar], "--format", "keep")
        _, ds = self.convert(["-"], "--format", "keep", stdin=raw)
        self.assert_same_dataset(ds, want)

    # ------------------------------------------------ bad members

    def refuse(self, inputs, says, *flags):
        out = self.path("refused-%d" % time.monotonic_ns())
        p = fx.run(["convert", *inputs, "-o", out, "--threads", "2", *flags])
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 1, err)
        for s in says:
            self.assertIn(s, err)
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))
        return err

    def skip_one(self, path, key, code, reason):
        p, ds = self.convert([path], "--on-error", "skip", "--json")
        summary = json.loads(p.stdout)
        self.assertEqual(summary["skipped_samples"], 1)
        (sk,) = ds.manifest["skipped"]
        self.assertEqual((sk["input"], sk["sample"], sk["code"]), (path, key, code))
        self.assertIn(reason, sk["reason"])
        self.assertEqual(ds.keys, [k for k in self.keys if k != key])
        return ds

    def test_flipped_byte_in_deflated_data(self):
        p = write_zip(self.path("ok.zip"), self.members)
        name = "z/004.png"
        start, end = data_range(p, name)
        with open(p, "rb") as f:
            f.seek((start + end) // 2)
            b = f.read(1)
        bad = patch(p, self.path("flipped.zip"), (start + end) // 2, bytes([b[0] ^ 0x10]))
        self.refuse([bad], [bad, "z/004", name, "zip member is corrupt"])
        ds = self.skip_one(bad, "z/004", "corrupt_member", name)
        self.assertEqual(ds.t["id"].tolist(), [int(k[2:]) for k in ds.keys])

    def test_wrong_crc(self):
        for compression in (zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED):
            with self.subTest(compression=compression):
                p = write_zip(self.path(f"crc-ok-{compression}.zip"), self.members, compression)
                name = "z/007.json"
                with zipfile.ZipFile(p) as z:
                    info = z.getinfo(name)
                wrong = struct.pack("<I", info.CRC ^ 0x00A50000)
                bad = patch(p, self.path(f"crc-{compression}.zip"), central_entry(p, name) + 16, wrong)
                bad = patch(bad, bad, info.header_offset + 14, wrong)
                with zipfile.ZipFile(bad) as z:  # zipfile's own check agrees it is corrupt
                    with self.assertRaises(zipfile.BadZipFile):
                        z.read(name)
                self.refuse([bad], [bad, "z/007", name, "CRC-32 is %08x" % info.CRC,
                                    "says %08x" % (info.CRC ^ 0x00A50000)])
                self.skip_one(bad, "z/007", "corrupt_member", "CRC-32")

    def test_declared_size_over_max_member_size(self):
        p = write_zip(self.path("big.zip"), self.members)
        size = len(self.data["z/003.jpg"])
        err = self.refuse([p], [p, "z/003.jpg", "over --max-member-size"],
                          "--max-member-size", str(size - 1))
        self.assertNotIn("corrupt", err)

    def test_zip_bomb_is_not_inflated(self):
        # 512 MiB of zeros deflate to ~0.5 MB; the header declares 1 MiB (a declared size that
        # small deflate data could not hold is refused before inflating: test_lying_sizes...).
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        chunk = bytes(1 << 20)
        data = b"".join(c.compress(chunk) for _ in range(512)) + c.flush()
        bomb = hand_zip(self.path("bomb.zip"), "b/0.json", data, 1 << 20, 0)
        spaced = b'{"id": 1' + b" " * ((1 << 20) - 9) + b"}"  # 1 MiB that inflates honestly
        honest = hand_zip(self.path("honest-1m.zip"), "b/0.json", raw_deflate(spaced), len(spaced),
                          zlib.crc32(spaced))

        def peak(path):
            """exit code, stderr and peak RSS (KiB) of a conversion, in a process of its own."""
            script = ("import json, resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True);"
                      "sys.stdout.write(json.dumps([p.returncode, p.stderr.decode(errors='replace'),"
                      "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))")
            r = subprocess.run([sys.executable, "-c", script, fx.TARMAC, "convert", path, "-o",
                                self.path("out-%d" % time.monotonic_ns()), "--no-images"],
                               capture_output=True, check=True)
            return json.loads(r.stdout)

        code, err, base_kib = peak(honest)
        self.assertEqual(code, 0, err)
        t0 = time.monotonic()
        code, err, maxrss_kib = peak(bomb)
        self.assertEqual(code, 1, err)
        for s in (bomb, "b/0.json", "inflates past the 1048576 bytes", "zip bomb"):
            self.assertIn(s, err)
        self.assertLess(time.monotonic() - t0, 10)
        # never near the 512 MiB it would inflate to (whatever the build: sanitizers add their own)
        self.assertLess(maxrss_kib, base_kib + 100 * 1024)

    def test_lying_sizes_and_encryption(self):
        payload = b'{"id": 1}'
        crc = zlib.crc32(payload)
        cases = [
            ("short", raw_deflate(payload), len(payload) + 5, 8, 0, "corrupt_member", "inflates to 9 bytes"),
            ("stored-size", payload, len(payload) + 1, 0, 0, "unsupported_member", "central directory is corrupt"),
            ("tiny-size", raw_deflate(bytes(16 << 20)), 10, 8, 0, "unsupported_member", "declares 10 bytes"),
            ("encrypted", payload, len(payload), 0, 1, "unsupported_member", "encrypted"),
        ]
        for label, data, size, method, flags, code, says in cases:
            with self.subTest(case=label):
                p = hand_zip(self.path(label + ".zip"), "s/0.json", data, size, crc, method, flags)
                self.refuse([p], [p, "s/0.json", says], "--no-images")
                _, ds = self.convert([p], "--no-images", "--on-error", "skip", "--allow-empty")
                (sk,) = ds.manifest["skipped"]
                self.assertEqual(sk["code"], code)
        # the hand-made writer is right: with honest sizes the member converts
        p = hand_zip(self.path("honest.zip"), "s/0.json", raw_deflate(payload), len(payload), crc)
        _, ds = self.convert([p], "--no-images")
        self.assertEqual(ds.t["id"].tolist(), [1])

    def test_overlapping_members_are_refused(self):
        # Two central directory entries naming one local header: a zip bomb's trick.
        p = write_zip(self.path("two.zip"), [("a/0.json", b'{"id": 0}'), ("a/1.json", b'{"id": 1}')],
                      zipfile.ZIP_STORED)
        with zipfile.ZipFile(p) as z:
            first = z.getinfo("a/0.json").header_offset
        bad = patch(p, self.path("overlap.zip"), central_entry(p, "a/1.json") + 42, struct.pack("<I", first))
        self.refuse([bad], [bad, "overlap"], "--no-images")


if __name__ == "__main__":
    unittest.main()
