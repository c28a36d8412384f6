"""Fixture generators and helpers for the tarmac end-to-end tests.

Images are smooth (low-frequency) so that a pixel comparison with an independent reference
warp is meaningful, yet steep enough that a half-pixel error in the geometry shows.
"""
import io
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import unittest
import zlib

import cv2
import numpy as np

import st_reader

HERE = os.path.dirname(os.path.abspath(__file__))
TARMAC = os.environ.get("TARMAC") or os.path.join(HERE, "..", "..", "build-e2e", "apps", "tarmac")


def asan_build():
    """True when the tarmac under test is built with AddressSanitizer (scripts/ci-sanitize.sh):
    its shadow memory needs terabytes of address space, so a test's RLIMIT_AS cannot apply."""
    try:
        out = subprocess.run(["ldd", TARMAC], capture_output=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return b"libasan" in out


# ---------------------------------------------------------------- images

def smooth_rgb(w, h, seed=0):
    """A smooth RGB uint8 image: gradients plus sinusoids of 20-40 px periods, all channels different."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    p = rng.uniform(0, 2 * np.pi, 6)
    r = 128 + 70 * np.sin(2 * np.pi * x / 29 + p[0]) + 40 * np.cos(2 * np.pi * y / 37 + p[1])
    g = 40 + 170 * x / max(w - 1, 1) + 30 * np.sin(2 * np.pi * (x + y) / 23 + p[2])
    b = 128 + 60 * np.cos(2 * np.pi * (x - 0.7 * y) / 31 + p[3]) + 50 * np.sin(2 * np.pi * y / 41 + p[4])
    img = np.stack([r, g, b], axis=-1)
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def smooth_u16(w, h, seed=0):
    """A 16-bit depth-like map with many distinct values."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    d = 1000 + 37 * x + 101 * y + 500 * np.sin(x / 7.0 + seed) * np.cos(y / 5.0)
    return np.clip(d, 0, 65535).astype(np.uint16)


def png(rgb):
    """PNG bytes of an RGB (or grey / RGBA / 16-bit) array; channel order given as RGB(A)."""
    a = rgb
    if a.ndim == 3 and a.shape[2] == 3:
        a = cv2.cvtColor(a, cv2.COLOR_RGB2BGR)
    elif a.ndim == 3 and a.shape[2] == 4:
        a = cv2.cvtColor(a, cv2.COLOR_RGBA2BGRA)
    ok, buf = cv2.imencode(".png", a)
    assert ok
    return buf.tobytes()


def jpg(rgb, quality=95):
    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    return buf.tobytes()


def decode_rgb(data):
    """Decodes image bytes with OpenCV into RGB (independently of tarmac)."""
    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert bgr is not None, "not decodable"
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def decode_unchanged(data):
    m = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    assert m is not None, "not decodable"
    return m


def npy(arr):
    b = io.BytesIO()
    np.save(b, arr)
    return b.getvalue()


def npz(compressed=False, **arrays):
    b = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(b, **arrays)
    return b.getvalue()


def js(obj):
    return json.dumps(obj).encode()


# ---------------------------------------------------------------- archives

def write_tar(path, members, fmt=tarfile.PAX_FORMAT, mode="w"):
    """members: list of (name, bytes). mode 'w', 'w:gz', 'w:xz', 'w:bz2'."""
    with tarfile.open(path, mode, format=fmt) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1700000000
            t.addfile(info, io.BytesIO(data))
    return path


def write_tree(root, members):
    for name, data in members:
        p = os.path.join(root, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    return root


def gnu_tar(path, root, names, *flags):
    """GNU tar of `names` (relative to root), in the order given."""
    subprocess.run(["tar", "-c", "-f", path, "-C", root, *flags, "--", *names], check=True)
    return path


def flip_bit(path, from_end, mask=0x01):
    """XORs one byte `from_end` bytes before the end of the file with `mask`."""
    with open(path, "r+b") as f:
        f.seek(-from_end, 2)
        b = f.read(1)
        f.seek(-from_end, 2)
        f.write(bytes([b[0] ^ mask]))


def crc_hex(data):
    return "%08x" % (zlib.crc32(data) & 0xFFFFFFFF)


# ---------------------------------------------------------------- running tarmac

def run(args, stdin=None, timeout=120):
    return subprocess.run([TARMAC, *args], input=stdin, capture_output=True, timeout=timeout)


class Dataset:
    """A converted dataset read back with the independent reader."""

    def __init__(self, out):
        self.out = out
        self.t, self.meta = st_reader.load(os.path.join(out, "labels.safetensors"))
        with open(os.path.join(out, "manifest.json")) as f:
            self.manifest = json.load(f)
        self.schema = json.loads(self.meta["schema"])
        self.shards = json.loads(self.meta["shards"])
        self.keys = st_reader.keys(self.t)

    def blob(self, i, name="__image__"):
        shard = self.shards[int(self.t[name + ".shard"][i])]
        off, size = int(self.t[name + ".offset"][i]), int(self.t[name + ".size"][i])
        with open(os.path.join(self.out, shard), "rb") as f:
            f.seek(off)
            data = f.read(size)
        assert len(data) == size
        return data

    def affine(self, i):
        return np.array(self.t["__affine__"][i], dtype=np.float64)

    def string(self, name, i):
        return st_reader.string(self.t, name, i)

    def ragged(self, name, i):
        return st_reader.ragged(self.t, name, i)


def kill_at_checkpoint(args, out, entries=0, timeout=120, env=None):
    """Runs `tarmac ARGS --checkpoint-every 0` (a checkpoint after every sample) and SIGKILLs it
    once a checkpoint records at least `entries` entries handled. Returns (exit code, the last
    checkpoint or None); the exit code is -SIGKILL unless the run finished first. `env`: the
    run's environment (the caller's when None)."""
    proc = subprocess.Popen([TARMAC, *args, "--checkpoint-every", "0"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cp = os.path.join(out, ".tarmac-partial", "checkpoint.json")
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with open(cp) as f:  # renamed into place whole: never half written
                if json.load(f)["entries"] >= entries:
                    break
        except OSError:
            pass
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    try:
        with open(cp) as f:
            return proc.returncode, json.load(f)
    except OSError:
        return proc.returncode, None


def convert(test, inputs, *flags, stdin=None, expect=0, out=None):
    """Runs `tarmac convert`; asserts the exit code; returns (proc, Dataset or None)."""
    out = out or tempfile.mkdtemp(dir=test.tmp)
    if os.path.isdir(out) and not os.listdir(out):
        os.rmdir(out)
    p = run(["convert", *inputs, "-o", out, *flags], stdin=stdin)
    if p.returncode != expect:
        raise AssertionError(f"exit code {p.returncode}, expected {expect}; stderr:\n" + p.stderr.decode(errors="replace"))
    ds = Dataset(out) if expect == 0 else None
    return p, ds


def bucketed_photos(tmp, sizes, name="ds"):
    """Converts one smooth PNG per (w, h) of `sizes` with
    `--resize bucket --size 64 --bucket-step 16 --format png` into tmp/name; returns its path."""
    members = [("p%02d.png" % i, png(smooth_rgb(w, h, seed=i))) for i, (w, h) in enumerate(sizes)]
    archive = write_tar(os.path.join(tmp, name + ".tar"), members)
    out = os.path.join(tmp, name)
    subprocess.run([TARMAC, "convert", "-q", archive, "-o", out, "--resize", "bucket", "--size", "64",
                    "--bucket-step", "16", "--format", "png"], check=True)
    return out


def on_pty(args, env=None, timeout=60):
    """Runs tarmac with stdin, stdout and stderr on a pseudo-terminal; (exit code, output)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([TARMAC, *args], stdin=slave, stdout=slave, stderr=slave, env=env,
                         close_fds=True)
    os.close(slave)
    out = bytearray()
    deadline = time.time() + timeout
    while time.time() < deadline:
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    return p.wait(timeout=timeout), bytes(out)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def assert_same_files(test, out, ref):
    """Two converted datasets hold the same files, each byte for byte, but manifest.json (which
    names the inputs, so it differs where only how they were read does)."""
    names = sorted(os.listdir(ref))
    test.assertEqual(sorted(os.listdir(out)), names)
    test.assertTrue(any(n.endswith(".tar") for n in names), names)
    for name in names:
        if name != "manifest.json":
            test.assertEqual(read_bytes(os.path.join(out, name)), read_bytes(os.path.join(ref, name)), name)


class Unseekable(io.RawIOBase):
    """A write-only stream: zipfile then writes data descriptors (flag bit 3) after members."""

    def __init__(self, f):
        self.f = f

    def writable(self):
        return True

    def write(self, b):
        return self.f.write(b)


class TmpCase(unittest.TestCase):
    """A test case with a per-class temporary directory `cls.tmp`."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-e2e-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.build()

    @classmethod
    def build(cls):
        pass

    def path(self, name):
        return os.path.join(self.tmp, name)


def affine_region(x0, y0, side_w, side_h, out_w, out_h):
    """The OpenCV-convention affine mapping region [x0, x0+side_w] x [y0, y0+side_h] onto an out_w x out_h image."""
    sx, sy = out_w / side_w, out_h / side_h
    return np.array([[sx, 0, -x0 * sx - 0.5], [0, sy, -y0 * sy - 0.5]])


def apply_affine(m, pts):
    pts = np.asarray(pts, dtype=np.float64)
    xy = pts[..., :2] @ m[:, :2].T + m[:, 2]
    return np.concatenate([xy, pts[..., 2:]], axis=-1)


def edge_region(x, y, side_w, side_h, out_w, out_h):
    """affine_region of a box in edge coordinates (--box-convention edges, the default):
    [x, y, side_w, side_h] is image[y:y+side_h, x:x+side_w]."""
    return affine_region(x - 0.5, y - 0.5, side_w, side_h, out_w, out_h)


def _axis_weights(s, t, n_out, n_src):
    """(n_out, n_src + 1) weights of one axis of tarmac's resampling, the last column the
    weight of the pad outside the source. Shrinking (s < 1): output pixel x averages the source
    over its footprint [(x - .5 - t) / s, (x + .5 - t) / s], pixel i spanning [i - .5, i + .5]
    (cv2.resize INTER_AREA's definition, at any offset). Otherwise linear interpolation."""
    w = np.zeros((n_out, n_src + 1))
    for x in range(n_out):
        if s < 1:
            a, b = (x - 0.5 - t) / s, (x + 0.5 - t) / s
            lo, hi = max(a, -0.5), min(b, n_src - 0.5)
            w[x, n_src] = ((b - a) - max(hi - lo, 0.0)) * s
            for i in range(max(int(np.floor(lo + 0.5)), 0), min(int(np.ceil(hi + 0.5)), n_src)):
                w[x, i] = max(min(hi, i + 0.5) - max(lo, i - 0.5), 0.0) * s
        else:
            u = (x - t) / s
            i = int(np.floor(u))
            for j, wt in ((i, 1 - (u - i)), (i + 1, u - i)):
                w[x, j if 0 <= j < n_src else n_src] += wt
    return w


def warp_ref(src, m, w, h, flags=cv2.INTER_LINEAR, pad=0):
    """The oracle of tarmac's image warp under the axis-aligned map m: cv2.warpAffine when no
    axis shrinks (or for INTER_NEAREST), else each output pixel the area average of its
    footprint (numpy, from the definition; test_resample checks it against cv2.resize)."""
    m = np.asarray(m, dtype=np.float64).reshape(2, 3)
    if flags != cv2.INTER_LINEAR or (m[0, 0] >= 1 and m[1, 1] >= 1):
        return cv2.warpAffine(src, m, (w, h), flags=flags, borderMode=cv2.BORDER_CONSTANT,
                              borderValue=pad)
    assert m[0, 1] == 0 and m[1, 0] == 0
    wx = _axis_weights(m[0, 0], m[0, 2], w, src.shape[1])
    wy = _axis_weights(m[1, 1], m[1, 2], h, src.shape[0])
    f = src.astype(np.float64)
    f = f.reshape(f.shape[0], f.shape[1], -1)
    padded = np.full((f.shape[0] + 1, f.shape[1] + 1, f.shape[2]), float(pad))
    padded[:-1, :-1] = f
    out = np.tensordot(wy, np.tensordot(wx, padded, axes=([1], [1])), axes=([1], [1]))  # h, w, c
    out = out.reshape((h, w) + src.shape[2:])
    if src.dtype == np.uint8:
        return np.clip(np.round(out), 0, 255).astype(np.uint8)
    return out.astype(src.dtype)


def mean_abs(a, b):
    return float(np.mean(np.abs(a.astype(np.float64) - b.astype(np.float64))))
