"""Remote zip inputs (issue #27, item 1): a zip in object storage is read as a local one is, by
its central directory (Range GETs of the object's end), then streamed once front to back with its
members sliced out by the directory's offsets and sizes, for the workers to inflate and check.

Zips are written by Python's zipfile (DEFLATED and STORED members, data descriptors, a symlink
marked only in the central directory, ZIP64 extra fields and end records), uploaded with boto3
to a real S3-compatible server (Swift + s3api, scripts/s3-local.sh), or served by Python's
http.server; each converts to the same dataset, byte for byte, as the same zip from local disk.
A proxy between tarmac and the server counts the GETs and cuts connections mid-member.

Needs swift-proxy swift-account swift-container swift-object memcached and python3-boto3
(scripts/setup-deps.sh test); the S3 tests skip, saying which is missing, without them.
"""
import http.server
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest
import zipfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402
import s3_local as s3l  # noqa: E402
from s3_local import FaultProxy  # noqa: E402
from test_s3 import RangeHandler, ThreadingServer, noise_png  # noqa: E402

BUCKET = "tarmac-zip"
OPTIONS = ["--format", "keep", "--shard-size", "1M"]
TAIL = 22 + 0xFFFF  # the end record and the longest comment: the first Range GET
DATE = (2024, 5, 6, 7, 8, 10)


def members(seed, n=24):
    out = []
    for i in range(n):
        key = f"{seed}/{i:04d}"
        out += [(key + ".png", noise_png(seed * 1000 + i)), (key + ".json", fx.js({"cls": i, "zip": seed}))]
    return out


def write_zip(path, items, seekable=True, zip64=(), link=None):
    """zipfile's zip of `items`: .png members STORED, the others DEFLATED; names in `zip64` with
    ZIP64 extra fields (force_zip64); `link` (name, target) a symbolic link that only the central
    directory marks as one (Unix mode 0120777 in its external attributes)."""
    with open(path, "wb") as raw:
        with zipfile.ZipFile(raw if seekable else fx.Unseekable(raw), "w") as z:
            for name, data in items:
                info = zipfile.ZipInfo(name, DATE)
                info.compress_type = zipfile.ZIP_STORED if name.endswith(".png") else zipfile.ZIP_DEFLATED
                with z.open(info, "w", force_zip64=name in zip64) as f:
                    f.write(data)
            if link:
                info = zipfile.ZipInfo(link[0], DATE)
                info.create_system = 3
                info.external_attr = 0o120777 << 16
                z.writestr(info, link[1])
    return path


def add_zip64_end(path):
    """Rewrites a zip's end as a ZIP64 zip's (APPNOTE 4.3.14-16): a ZIP64 end record and its
    locator before the end record, whose counts, size and offset then say 'see ZIP64'."""
    with open(path, "rb") as f:
        b = f.read()
    at = b.rfind(b"PK\x05\x06")
    _, _, _, _, entries, cd_size, cd_offset, _ = struct.unpack_from("<IHHHHIIH", b, at)
    end64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, entries, entries, cd_size, cd_offset)
    locator = struct.pack("<IIQI", 0x07064B50, 0, at, 1)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    with open(path, "wb") as f:
        f.write(b[:at] + end64 + locator + end)
    return path


class HoldRanges(s3l.TcpProxy):
    """A proxy that forwards every request but those with a Range header: these it holds,
    answering nothing, so that a zip's central directory is never read."""

    def __init__(self, upstream_port):
        self.held = threading.Event()
        super().__init__(upstream_port)

    def handle(self, client):
        head = self.read_head(client)
        if head is None:
            return
        if re.search(rb"(?im)^range:", head):
            self.held.set()
            threading.Event().wait(600)
            return
        up = socket.create_connection(self.upstream)
        up.sendall(head)

        def pump(a, b):
            try:
                while data := a.recv(65536):
                    b.sendall(data)
            except OSError:
                pass
            for x in (a, b):
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                x.close()

        threading.Thread(target=pump, args=(up, client), daemon=True).start()
        pump(client, up)



class RemoteZip(fx.TmpCase):
    """Shared by the S3 and the HTTP cases: the zips, written once, and their local conversions."""

    @classmethod
    def write_zips(cls):
        cls.local = os.path.join(cls.tmp, "zips")
        os.makedirs(cls.local)
        a, b = members(1), members(2)
        tiny = fx.png(fx.smooth_rgb(4, 4))
        cls.zips = {
            # DEFLATED labels, STORED images, and a symlink the central directory alone marks
            "mixed.zip": write_zip(os.path.join(cls.local, "mixed.zip"), a, link=("1/0024.png", "0002.png")),
            # every member followed by a data descriptor: its local header has no sizes
            "descriptors.zip": write_zip(os.path.join(cls.local, "descriptors.zip"), b, seekable=False),
            # ZIP64 extra fields in local headers and ZIP64 end records
            "zip64.zip": add_zip64_end(write_zip(os.path.join(cls.local, "zip64.zip"), members(3, 8),
                                                 zip64={n for n, _ in members(3, 8)[::2]})),
            # a central directory larger than the first Range GET of the end
            "big-directory.zip": write_zip(os.path.join(cls.local, "big-directory.zip"),
                                           [(f"d/{i:05d}-{'x' * 60}{ext}", data) for i in range(600) for ext, data in
                                            ((".png", tiny), (".json", fx.js({"i": i})))]),
        }
        for name, path in cls.zips.items():  # what was asked is what zipfile wrote
            with zipfile.ZipFile(path) as z:
                infos = z.infolist()
            size = os.path.getsize(path)
            if name == "mixed.zip":
                assert {i.compress_type for i in infos} == {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}
                assert [i.external_attr >> 16 for i in infos][-1] == 0o120777
            if name == "descriptors.zip":
                assert all(i.flag_bits & 8 for i in infos)
            if name == "zip64.zip":
                raw = fx.read_bytes(path)
                n, e = struct.unpack_from("<HH", raw, 26)  # the first local header's ZIP64 field
                assert raw.rfind(b"PK\x06\x06") > 0 and (e, raw[30 + n:32 + n]) == (20, b"\x01\x00")
            if name == "big-directory.zip":
                end = fx.read_bytes(path).rfind(b"PK\x05\x06")
                (cd_offset,) = struct.unpack_from("<I", fx.read_bytes(path), end + 16)
                assert size - cd_offset > TAIL
        cls.references = {}

    @classmethod
    def reference(cls, names):
        """The dataset of the same zips converted from local disk."""
        key = tuple(names)
        if key not in cls.references:
            out = os.path.join(cls.tmp, "ref-%d" % len(cls.references))
            subprocess.run([fx.TARMAC, "convert", "-q", *[cls.zips[n] for n in names], "-o", out, *OPTIONS],
                           check=True)
            cls.references[key] = out
        return cls.references[key]

    def run_tarmac(self, *args, timeout=180):
        return subprocess.run([fx.TARMAC, *args], env=getattr(self, "env", None), capture_output=True, text=True,
                              timeout=timeout)

    def convert(self, urls, *flags):
        out = self.path("out%d" % len(os.listdir(self.tmp)))
        p = self.run_tarmac("convert", *urls, "-o", out, *OPTIONS, *flags)
        self.assertEqual(p.returncode, 0, p.stderr)
        return out

    def manifest(self, out):
        with open(os.path.join(out, "manifest.json")) as f:
            return json.load(f)

    def assert_same_dataset(self, out, names):
        """Every file but manifest.json (which names the inputs) byte for byte, the inputs' sizes,
        CRC-32 and member counts those of the zip files, the ignored members the same."""
        ref = self.reference(names)
        self.assertEqual(sorted(os.listdir(out)), sorted(os.listdir(ref)))
        for name in os.listdir(ref):
            if name != "manifest.json":
                self.assertEqual(fx.read_bytes(os.path.join(out, name)), fx.read_bytes(os.path.join(ref, name)), name)
        got, want = self.manifest(out), self.manifest(ref)
        for i, name in zip(got["inputs"], names):
            data = fx.read_bytes(self.zips[name])
            with zipfile.ZipFile(self.zips[name]) as z:
                count = len(z.infolist())
            self.assertEqual((i["size"], i["crc32"], i["members"]), (len(data), "%08x" % zlib.crc32(data), count))
        strip = lambda entries: [{k: v for k, v in e.items() if k != "input"} for e in entries]  # noqa: E731
        self.assertEqual(strip(got["ignored"]), strip(want["ignored"]))
        self.assertEqual(got["counts"], want["counts"])
        return got


class S3Zip(RemoteZip):
    @classmethod
    def build(cls):
        s3l.start_server(cls)
        cls.s3.create_bucket(Bucket=BUCKET)
        cls.write_zips()
        for name, path in cls.zips.items():
            cls.s3.upload_file(path, BUCKET, "zips/" + name)
        data = fx.read_bytes(cls.zips["mixed.zip"])
        cd = data.rfind(b"PK\x05\x06")
        (cd_offset,) = struct.unpack_from("<I", data, cd + 16)
        bad = bytearray(data)
        bad[cd_offset + 1] ^= 0xFF  # the first central directory entry's signature
        cls.s3.put_object(Bucket=BUCKET, Key="bad/corrupt-directory.zip", Body=bytes(bad))
        cls.s3.put_object(Bucket=BUCKET, Key="bad/truncated.zip", Body=data[:len(data) // 2])

    def url(self, name):
        return f"s3://{BUCKET}/zips/{name}"

    def proxy(self, **faults):
        p = FaultProxy(self.port, **faults)
        self.addCleanup(p.close)
        return p

    def test_each_zip_converts_as_from_disk_with_two_gets(self):
        for name in ("mixed.zip", "descriptors.zip", "zip64.zip"):
            with self.subTest(zip=name):
                proxy = self.proxy()
                out = self.convert([self.url(name)], "--endpoint-url", proxy.url)
                m = self.assert_same_dataset(out, [name])
                # the body from its start, then the end's last 64 KiB by one Range GET
                size = os.path.getsize(self.zips[name])
                self.assertEqual(proxy.gets, [f"/{BUCKET}/zips/{name}"] * 2)
                self.assertEqual(proxy.ranges, [max(0, size - TAIL)])
                self.assertEqual((m["inputs"][0]["retries"], m["inputs"][0]["resumed_bytes"]), (0, 0))

    def test_symlink_is_not_followed(self):
        # the central directory alone says it is a link: a stream of local headers would read it
        # as a 8-byte image
        out = self.convert([self.url("mixed.zip")])
        (ignored,) = self.manifest(out)["ignored"]
        self.assertEqual(ignored, {"input": self.url("mixed.zip"), "member": "1/0024.png", "code": "link",
                                   "reason": "symbolic link, not followed"})
        self.assertEqual(self.manifest(out)["counts"]["samples"], 24)

    def test_directory_larger_than_the_tail_costs_one_get_more(self):
        proxy = self.proxy()
        name = "big-directory.zip"
        out = self.convert([self.url(name)], "--endpoint-url", proxy.url)
        self.assert_same_dataset(out, [name])
        self.assertEqual(len(proxy.gets), 3)
        size = os.path.getsize(self.zips[name])
        data = fx.read_bytes(self.zips[name])
        (cd_offset,) = struct.unpack_from("<I", data, data.rfind(b"PK\x05\x06") + 16)
        # the tail, then what lies between the central directory's start and the tail
        self.assertEqual(proxy.ranges, [size - TAIL, cd_offset])

    def test_every_zip_under_a_prefix(self):
        proxy = self.proxy()
        names = ["big-directory.zip", "descriptors.zip", "mixed.zip", "zip64.zip"]
        out = self.convert([f"s3://{BUCKET}/zips/"], "--endpoint-url", proxy.url)
        self.assert_same_dataset(out, names)
        objects = [g for g in proxy.gets if g.startswith(f"/{BUCKET}/zips/")]  # not the listing
        self.assertEqual(len(objects), 2 * 4 + 1)

    def test_cut_mid_member_resumes_by_range(self):
        name = "mixed.zip"
        size = os.path.getsize(self.zips[name])
        self.assertGreater(size, 4 * 150_000)
        proxy = self.proxy(cut_after=150_000, cuts=3)
        out = self.convert([self.url(name)], "--endpoint-url", proxy.url)
        m = self.assert_same_dataset(out, [name])
        self.assertEqual(proxy.cut, 3)
        (inp,) = m["inputs"]
        self.assertEqual(inp["retries"], 3)
        # the tail's Range GET (64 KiB: never cut), and the stream resumed three times from the
        # byte each cut left it at (the first block, 1 MiB, is read before the tail's GET, so
        # the order of the two kinds depends on where the cuts fall)
        tail = max(0, size - TAIL)
        self.assertIn(tail, proxy.ranges)
        resumed = list(proxy.ranges)
        resumed.remove(tail)
        self.assertEqual(len(resumed), 3)
        self.assertTrue(all(0 < r < size for r in resumed), resumed)
        self.assertEqual(inp["resumed_bytes"], sum(resumed))
        self.assertEqual(len(proxy.gets), 1 + 1 + 3)

    def test_cut_tail_get_is_retried_and_counted(self):
        # the first two GETs are cut after 20 kB: the body's and the tail's (65 kB); the tail's is
        # sent again whole (a small answer is not resumed), the body's resumed by range
        name = "mixed.zip"
        proxy = self.proxy(cut_after=20_000, cuts=2)
        out = self.convert([self.url(name)], "--endpoint-url", proxy.url)
        m = self.assert_same_dataset(out, [name])
        self.assertEqual(proxy.cut, 2)
        self.assertEqual(m["inputs"][0]["retries"], 2)

    def test_killed_then_resumed(self):
        # a run stalled on the second zip, with a checkpoint after every sample, is killed;
        # --resume reads the zips again, checking their CRC-32 up to the checkpoint
        names = ["mixed.zip", "zip64.zip"]
        proxy = self.proxy(stall_key="zip64.zip")
        out = self.path("killed")
        args = ["convert", *[self.url(n) for n in names], "-o", out, *OPTIONS]
        code, cp = fx.kill_at_checkpoint([*args, "--endpoint-url", proxy.url], out, 24, timeout=60, env=self.env)
        self.assertEqual(code, -signal.SIGKILL, "finished before the kill")
        self.assertGreaterEqual(cp["entries"], 24)  # the first zip's samples
        p = self.run_tarmac(*args, "--resume")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("resumed an interrupted run", p.stderr)
        self.assert_same_dataset(out, names)

    def test_sigterm_while_the_directory_is_read(self):
        # the tail's Range GET gets no answer: SIGTERM stops the run inside that wait (not after
        # the 30 s stall timeout and its retries, nor by the CLI's watchdog after 10 s)
        proxy = HoldRanges(self.port)
        self.addCleanup(proxy.close)
        out = self.path("stopped")
        proc = subprocess.Popen([fx.TARMAC, "convert", self.url("zip64.zip"), "-o", out, *OPTIONS,
                                 "--endpoint-url", proxy.url], env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.assertTrue(proxy.held.wait(60), "no Range GET came")
        time.sleep(0.3)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
        self.assertIn("stopped by SIGTERM", err)
        self.assertNotIn("did not stop in time", err)
        self.assertLess(time.monotonic() - t0, 8, "stopped by the watchdog, not in the wait")

    def assert_fails(self, key, *words):
        url = f"s3://{BUCKET}/{key}"
        out = self.path("failed%d" % len(os.listdir(self.tmp)))
        p = self.run_tarmac("convert", url, "-o", out, *OPTIONS)
        self.assertEqual(p.returncode, 1, p.stderr)
        first = [line for line in p.stderr.splitlines() if line.startswith("tarmac: error:")][0]
        self.assertTrue(first.startswith(f"tarmac: error: archive '{url}': zip is corrupt: "), p.stderr)
        for w in words:
            self.assertIn(w, first)
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))

    def test_corrupt_or_truncated_directory(self):
        self.assert_fails("bad/corrupt-directory.zip", "the central directory is corrupt at its entry 1")
        self.assert_fails("bad/truncated.zip", "no zip end record", "truncated")


class HttpZip(RemoteZip):
    """http:// URLs: a server with ranges reads zips by their central directory; one without
    (http.server as it is) answers the tail's Range GET with the whole object, which is cut short,
    and the zip is read as a stream of local headers, as before."""

    @classmethod
    def build(cls):
        cls.write_zips()
        for name, handler in (("ranged", RangeHandler), ("plain", http.server.SimpleHTTPRequestHandler)):
            quiet = type("Quiet", (handler,), {"log_message": lambda *a: None})
            server = ThreadingServer(("127.0.0.1", 0), lambda *a, q=quiet, **k: q(*a, directory=cls.local, **k))
            threading.Thread(target=server.serve_forever, daemon=True).start()
            cls.addClassCleanup(server.server_close)
            cls.addClassCleanup(server.shutdown)
            setattr(cls, name + "_port", server.server_address[1])

    def test_ranged_server(self):
        proxy = FaultProxy(self.ranged_port)
        self.addCleanup(proxy.close)
        out = self.convert([f"{proxy.url}/mixed.zip"])
        self.assert_same_dataset(out, ["mixed.zip"])
        self.assertEqual(len(proxy.gets), 2)
        self.assertEqual(self.manifest(out)["ignored"][0]["code"], "link")

    def test_server_without_ranges_streams(self):
        proxy = FaultProxy(self.plain_port)
        self.addCleanup(proxy.close)
        name = "descriptors.zip"  # no symlink: a stream reads it whole
        out = self.convert([f"{proxy.url}/{name}"])
        self.assert_same_dataset(out, [name])
        self.assertEqual(len(proxy.gets), 2)  # the body, and the Range GET answered 200


if __name__ == "__main__":
    unittest.main()
