"""`tarmac convert --dedup exact|near[:D]` and `--dedup-against DIR`.

A corpus made here with numpy, PIL and OpenCV (never with our writer): distinct textured images,
and after some of them their byte-identical copies, lossless re-encodes (the JPEG's pixels saved
as PNG), lossy re-encodes (JPEG q95 -> q80) and half-size copies; then 60 % crops and distinct
near-looking images (the same backdrop, other shapes), which are no duplicates. `exact` must drop
exactly the first two kinds, `near` all four, neither a crop or a distinct image; precision and
recall are printed (docs/cli.md quotes them). Every drop is in the manifest's `ignored` list with
its code, key, duplicate-of key and distance; `__phash__` equals the pHash of format.md 1.5
computed here with numpy from cv2's decode; a run stopped by SIGTERM and resumed keeps the same
samples as one run; --dedup-against drops what another dataset holds.
"""
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest
import zlib

import cv2
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

W, H = 320, 240
N_BASE = 30


def phash(bgr):
    """format.md 1.5, from its words: the mean B, G, R of each cell of a 32x32 grid (cell k of
    an axis of n pixels: [k*n//32, max((k+1)*n//32, k*n//32 + 1))), grey = 0.299 R + 0.587 G +
    0.114 B of the means, the orthonormal DCT-II (numpy, float64), the 8x8 lowest frequencies,
    bit 8*u+v set where the coefficient is above their median."""
    img = bgr.astype(np.int64)
    if img.ndim == 2:
        img = img[..., None]
    h, w = img.shape[:2]
    s = np.zeros((h + 1, w + 1, img.shape[2]), np.int64)
    s[1:, 1:] = img.cumsum(0).cumsum(1)
    k = np.arange(32)

    def cells(n):
        lo = k * n // 32
        return lo, np.maximum((k + 1) * n // 32, lo + 1)

    (y0, y1), (x0, x1) = cells(h), cells(w)
    sums = (s[y1][:, x1] - s[y0][:, x1] - s[y1][:, x0] + s[y0][:, x0]).astype(np.float64)
    means = sums / ((y1 - y0)[:, None] * (x1 - x0)[None, :])[..., None]
    small = means[..., 0] if img.shape[2] == 1 else \
        0.299 * means[..., 2] + 0.587 * means[..., 1] + 0.114 * means[..., 0]
    n = np.arange(32)
    kk = np.arange(8)[:, None]
    c = np.sqrt(np.where(kk == 0, 1 / 32, 2 / 32)) * np.cos(np.pi * (2 * n + 1) * kk / 64)
    low = (c @ small @ c.T).ravel()
    med = np.median(low)
    return sum(1 << i for i, v in enumerate(low) if v > med)


def hamming(a, b):
    return bin(a ^ b).count("1")


def decode_bgr(data, denom=1):
    """cv2's decode; a JPEG at libjpeg's DCT scale 1/denom (denom 1, 2, 4, 8)."""
    flag = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4,
            8: cv2.IMREAD_REDUCED_COLOR_8}[denom]
    return cv2.imdecode(np.frombuffer(data, np.uint8), flag)


def near_hash_denom(data, size):
    """The DCT scale --dedup near takes a JPEG's pHash at under `--size size` (a whole image
    resized by its shorter side), from docs/format.md 1.5 and jpeg_region.h's rule: the
    conversion decodes a shrink s <= 0.3 at the smallest 1/2^k leaving a shrink of at most 0.6;
    the pHash is taken at that scale when it is 1/1 or 1/2, at 1/2 when it is smaller."""
    if data[:2] != b"\xff\xd8":
        return 1
    h, w = decode_bgr(data).shape[:2]
    s, denom = size / min(w, h), 1
    if s <= 0.3:
        while denom < 8 and s * denom * 2 <= 0.6:
            denom *= 2
    return min(denom, 2)


def backdrop(rng):
    y, x = np.mgrid[0:H, 0:W].astype(np.float32)
    img = np.zeros((H, W, 3), np.float32)
    for ch in range(3):
        a, b, c = rng.uniform(-1, 1, 3)
        img[..., ch] = 128 + 60 * np.sin(a * x / 23 + b * y / 31 + c * 6)
    return img


def shapes(img, rng):
    y, x = np.mgrid[0:H, 0:W].astype(np.float32)
    img = img.copy()
    for _ in range(rng.integers(3, 7)):
        cx, cy, r = rng.uniform(0, W), rng.uniform(0, H), rng.uniform(15, 80)
        m = ((x - cx) ** 2 + (y - cy) ** 2) < r * r
        img[m] = 0.3 * img[m] + 0.7 * rng.uniform(0, 255, 3)
    noise = cv2.GaussianBlur(rng.normal(0, 25, (H, W, 3)).astype(np.float32), (0, 0), 3)
    return np.clip(img + noise, 0, 255).astype(np.uint8)


def jpeg(rgb, quality=95):
    b = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb)).save(b, "JPEG", quality=quality)
    return b.getvalue()


def png(rgb):
    b = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb)).save(b, "PNG")
    return b.getvalue()


def rgb_of(data):
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def corpus(seed=7, prefix="s"):
    """[(key, file name suffix, bytes, kind, original key or None)] in input order."""
    rng = np.random.default_rng(seed)
    items = []
    key = lambda: "%s/%03d" % (prefix, len(items))  # noqa: E731
    bases = []
    for i in range(N_BASE):
        back = backdrop(rng)
        data = jpeg(shapes(back, rng))
        k = key()
        items.append((k, "jpg", data, "distinct", None))
        bases.append((k, data, back))
        if i % 6 == 0:
            items.append((key(), "jpg", data, "copy", k))
        elif i % 6 == 1:
            items.append((key(), "png", png(rgb_of(data)), "lossless", k))
        elif i % 6 == 2:
            items.append((key(), "jpg", jpeg(rgb_of(data), 80), "lossy", k))
        elif i % 6 == 3:
            half = cv2.resize(rgb_of(data), (W // 2, H // 2), interpolation=cv2.INTER_AREA)
            items.append((key(), "jpg", jpeg(half), "resized", k))
        elif i % 6 == 4:
            rgb = rgb_of(data)
            y0, x0 = int(H * 0.2), int(W * 0.2)
            items.append((key(), "jpg", jpeg(rgb[y0:y0 + int(H * 0.6), x0:x0 + int(W * 0.6)]), "crop", None))
        else:
            # The same backdrop, other shapes: looks alike, is another image.
            items.append((key(), "jpg", jpeg(shapes(back, rng)), "near-looking", None))
    return items


DUP_KINDS = {"copy", "lossless", "lossy", "resized"}


def write_corpus(path, items):
    return fx.write_tar(path, [(k + "." + ext, data) for k, ext, data, _, _ in items])


def ignored_duplicates(ds):
    return [e for e in ds.manifest["ignored"] if e.get("code") == "duplicate_content"]


class DedupTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.items = corpus()
        cls.archive = write_corpus(os.path.join(cls.tmp, "in.tar"), cls.items)
        cls.hashes = {k: phash(decode_bgr(data)) for k, _, data, _, _ in cls.items}
        cls.kind = {k: kind for k, _, _, kind, _ in cls.items}
        cls.original = {k: orig for k, _, _, _, orig in cls.items}

    def test_the_corpus_is_what_it_says(self):
        # The fixture's own claims, by the oracle: duplicates within 4 bits of their original,
        # crops and distinct images farther than 4 from every earlier image.
        keys = [k for k, *_ in self.items]
        for i, k in enumerate(keys):
            if self.kind[k] in DUP_KINDS:
                self.assertLessEqual(hamming(self.hashes[k], self.hashes[self.original[k]]), 4, k)
            else:
                nearest = min((hamming(self.hashes[k], self.hashes[j]) for j in keys[:i]), default=64)
                self.assertGreater(nearest, 4, k)

    def run_mode(self, mode, threads=3, extra=()):
        p, ds = fx.convert(self, [self.archive], "--dedup", mode, "-j", str(threads), *extra)
        dropped = {e["sample"] for e in ignored_duplicates(ds)}
        truth = {k for k, *_ in self.items if self.kind[k] in DUP_KINDS}
        tp = len(dropped & truth)
        precision = tp / len(dropped) if dropped else 1.0
        recall = tp / len(truth)
        print("\n--dedup %s%s: dropped %d of %d duplicates (%s); precision %.2f, recall %.2f" % (
            mode, "".join(" " + f for f in extra), tp, len(truth), ", ".join("%s %d" % (kind, sum(1 for k in dropped if self.kind[k] == kind))
                                            for kind in sorted(DUP_KINDS)), precision, recall), file=sys.stderr)
        return p, ds, dropped

    def check_dataset(self, ds, dropped, out):
        # Every other sample kept, in input order; each kept one's __phash__ is the oracle's.
        kept = [k for k, *_ in self.items if k not in dropped]
        self.assertEqual(ds.keys, kept)
        self.assertEqual(ds.t["__phash__"].dtype, np.uint64)
        self.assertEqual([int(h) for h in ds.t["__phash__"]], [self.hashes[k] for k in kept])
        spec = ds.schema["__phash__"]
        self.assertEqual((spec["dtype"], spec["shape"], spec["source"]), ("U64", [], "dedup"))
        counts = ds.manifest["counts"]
        self.assertEqual(counts["duplicate_content_samples"], len(dropped))
        self.assertEqual(counts["samples"], len(kept))
        self.assertEqual(counts["no_instance_samples"], 0)
        v = fx.run(["verify", out, "--decode"])
        self.assertEqual(v.returncode, 0, v.stdout + v.stderr)

    def test_exact_finds_copies_and_lossless_reencodes_only(self):
        p, ds, dropped = self.run_mode("exact")
        self.assertEqual(dropped, {k for k in self.kind if self.kind[k] in ("copy", "lossless")})
        for e in ignored_duplicates(ds):
            self.assertEqual(e["duplicate_of"], self.original[e["sample"]])
            self.assertEqual(e["distance"], 0)
            self.assertEqual(e["input"], self.archive)
            self.assertIn("same decoded pixels", e["reason"])
        self.check_dataset(ds, dropped, ds.out)
        self.assertIn("dedup: left out 10 duplicate image(s)", p.stdout.decode())

    def test_near_finds_all_four_kinds_and_no_crop_or_distinct_image(self):
        p, ds, dropped = self.run_mode("near")
        self.assertEqual(dropped, {k for k in self.kind if self.kind[k] in DUP_KINDS})
        for e in ignored_duplicates(ds):
            k = e["sample"]
            self.assertEqual(e["duplicate_of"], self.original[k])
            self.assertEqual(e["distance"], hamming(self.hashes[k], self.hashes[self.original[k]]))
            self.assertNotIn("duplicate_of_dataset", e)
        self.check_dataset(ds, dropped, ds.out)
        # One thread or many: the same decisions, in input order.
        _, one, _ = self.run_mode("near:4", threads=1)
        self.assertEqual(one.keys, ds.keys)
        self.assertEqual(ignored_duplicates(one), ignored_duplicates(ds))

    def test_near_zero_is_exact_on_the_hash_and_a_wide_distance_finds_more(self):
        _, ds0, dropped0 = self.run_mode("near:0")
        self.assertTrue({k for k in self.kind if self.kind[k] in ("copy", "lossless")} <= dropped0)
        for e in ignored_duplicates(ds0):
            self.assertEqual(e["distance"], 0)
        # At 32 bits nearly everything is "alike": more is dropped than at 4, each within 32.
        _, ds32, dropped32 = self.run_mode("near:32")
        self.assertGreater(len(dropped32), 20)
        for e in ignored_duplicates(ds32):
            self.assertLessEqual(e["distance"], 32)
            self.assertEqual(e["distance"], hamming(self.hashes[e["sample"]], self.hashes[e["duplicate_of"]]))

    def test_the_output_is_the_same_with_and_without_dedup(self):
        # The hash shares the conversion's decode (a JPEG's region decode then decodes the whole
        # image at its scale): the shards must be what a run without --dedup writes, byte for
        # byte. No duplicates here, so every sample is kept. Whole images resized (scale 1/1,
        # 1/2, 1/8: the pHash then from a decode of its own), centre crops, and fixed boxes (the
        # region decode's columns and rows inside the image) at scale 1/1 and 1/2.
        # The near-looking images as PNG: a PNG is decoded whole, not by region, under --dedup.
        items = [(k, "png", png(rgb_of(d)), kind, o) if kind == "near-looking" else (k, ext, d, kind, o)
                 for k, ext, d, kind, o in self.items if kind not in DUP_KINDS]
        archive = write_corpus(self.path("distinct.tar"), items)
        for flags in (["--size", "100"], ["--size", "48"], ["--size", "16"], ["--crop", "center", "--size", "64"],
                      ["--crop", "box:40,30,120,90", "--size", "56"],
                      ["--crop", "box:100,70,150,120", "--size", "40"]):
            _, plain = fx.convert(self, [archive], *flags)
            shards = sorted(f for f in os.listdir(plain.out) if f.endswith(".tar"))
            for mode in ("exact", "near"):
                with self.subTest(flags=flags, mode=mode):
                    _, ds = fx.convert(self, [archive], *flags, "--dedup", mode)
                    self.assertEqual(ds.keys, [k for k, *_ in items])
                    self.assertEqual(sorted(f for f in os.listdir(ds.out) if f.endswith(".tar")), shards)
                    for f in shards:
                        with open(os.path.join(plain.out, f), "rb") as a, open(os.path.join(ds.out, f), "rb") as b:
                            self.assertEqual(a.read(), b.read(), f)

    def test_near_hashes_a_reduced_decode_within_its_tolerance(self):
        # Under --size, the conversion decodes a JPEG at a reduced DCT scale; --dedup near takes
        # the pHash from that decode (1/2 at most: format.md 1.5). The oracle: cv2's decode at
        # the same scale, hashed by phash(), equal bit for bit; against the full-scale pHash
        # within 4 bits, the most measured at 1/2 (1 image of 55 here, of 200 W1 frames and of
        # 200 LAION-like photos; docs/performance.md). Precision and recall stay 1.00, and
        # --dedup exact keeps the full-scale pHash.
        for size in (48, 16):
            p, ds, dropped = self.run_mode("near", extra=["--size", str(size)])
            self.assertEqual(dropped, {k for k in self.kind if self.kind[k] in DUP_KINDS})
            data = {k: d for k, _, d, _, _ in self.items}
            reduced = 0
            for k, h in zip(ds.keys, ds.t["__phash__"]):
                denom = near_hash_denom(data[k], size)
                reduced += denom > 1
                self.assertEqual(int(h), phash(decode_bgr(data[k], denom)), (k, size, denom))
                self.assertLessEqual(hamming(int(h), self.hashes[k]), 4, (k, size))
            self.assertGreater(reduced, 30)
            for e in ignored_duplicates(ds):
                self.assertLessEqual(e["distance"], 4)
            _, exact, _ = self.run_mode("exact", extra=["--size", str(size)])
            self.assertEqual([int(h) for h in exact.t["__phash__"]], [self.hashes[k] for k in exact.keys])

    def test_the_python_reader_sees_phash(self):
        _, ds, dropped = self.run_mode("near")
        sys.path.insert(0, os.path.join(fx.HERE, "..", "..", "python"))
        import tarmac
        with tarmac.Dataset(ds.out) as r:
            col = r.column("__phash__")
            self.assertEqual(col.dtype, np.uint64)
            self.assertEqual([int(x) for x in col], [int(h) for h in ds.t["__phash__"]])
            self.assertEqual(int(r.value("__phash__", 1)), int(ds.t["__phash__"][1]))
            _, labels = r.batch([0, 2], fields=["__phash__"], resize=True, size=(32, 32))
            self.assertEqual(labels["__phash__"].tolist(), [int(ds.t["__phash__"][0]), int(ds.t["__phash__"][2])])

    def test_resume_after_sigterm_keeps_the_same_samples(self):
        # 30 copies of the corpus under other keys (1800 samples, ~60 MB; a one-thread run with a
        # 1 MB group window holds at most ~600 samples in flight, 8 batches of up to 64, so the
        # stop comes well before the end): the copies after the first are all duplicates, of
        # samples kept before the stop.
        copies = 30
        archives = [self.archive] + [
            write_corpus(self.path("again%d.tar" % r), [("r%d/%s" % (r, k),) + tuple(rest) for k, *rest in self.items])
            for r in range(1, copies)]
        one = self.path("one")
        fx.convert(self, archives, "--dedup", "near", "--group-window", "1M", out=one)
        out = self.path("stopped")
        args = [fx.TARMAC, "convert", *archives, "-o", out, "--dedup", "near", "--group-window", "1M", "-j", "1",
                "--checkpoint-every", "0"]
        cp = os.path.join(out, ".tarmac-partial", "checkpoint.json")
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with open(cp) as f:
                    if json.load(f)["entries"] >= 90:  # past some of the duplicates
                        break
            except (OSError, ValueError):
                pass
            time.sleep(0.001)
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        self.assertNotEqual(proc.returncode, 0, "finished before the stop")
        with open(cp) as f:
            stopped_at = json.load(f)
        self.assertLess(stopped_at["entries"], copies * len(self.items))
        self.assertGreater(stopped_at["dedup"], 0)
        p = fx.run(["convert", *archives, "-o", out, "--dedup", "near", "--group-window", "1M", "-j", "2",
                    "--resume"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("resumed an interrupted run", p.stderr.decode())
        a, b = fx.Dataset(one), fx.Dataset(out)
        self.assertEqual(b.keys, a.keys)
        self.assertEqual(len(ignored_duplicates(a)), 20 + (copies - 1) * len(self.items))
        self.assertEqual(ignored_duplicates(b), ignored_duplicates(a))
        self.assertEqual(b.t["__phash__"].tolist(), a.t["__phash__"].tolist())
        with open(os.path.join(one, "labels.safetensors"), "rb") as f1, \
                open(os.path.join(out, "labels.safetensors"), "rb") as f2:
            self.assertEqual(f1.read(), f2.read())

    def test_dedup_against_another_dataset(self):
        # The earlier dataset: the first 12 distinct images.
        first = [it for it in self.items if it[3] == "distinct"][:12]
        old_in = write_corpus(self.path("old.tar"), first)
        old = self.path("old")
        fx.convert(self, [old_in], "--dedup", "near", out=old)
        # The new one: copies of three of them (re-encoded at q80, resized) and new images.
        rng_new = corpus(seed=99, prefix="n")
        fresh = [it for it in rng_new if it[3] == "distinct"][:5]
        k0, _, d0, _, _ = first[0]
        k5, _, d5, _, _ = first[5]
        half = cv2.resize(rgb_of(d5), (W // 2, H // 2), interpolation=cv2.INTER_AREA)
        again = [("n/again0", "jpg", jpeg(rgb_of(d0), 80), "lossy", k0),
                 ("n/again5", "jpg", jpeg(half), "resized", k5),
                 ("n/again0png", "png", png(rgb_of(d0)), "lossless", k0)]
        new_in = write_corpus(self.path("new.tar"), fresh[:2] + again + fresh[2:])
        _, ds = fx.convert(self, [new_in], "--dedup", "near", "--dedup-against", old)
        dropped = ignored_duplicates(ds)
        self.assertEqual([(e["sample"], e["duplicate_of"], e["duplicate_of_dataset"]) for e in dropped],
                         [(k, orig, old) for k, _, _, _, orig in again])
        hashes = {k: phash(decode_bgr(d)) for k, _, d, _, _ in first + again}
        for e in dropped:
            self.assertEqual(e["distance"], hamming(hashes[e["sample"]], hashes[e["duplicate_of"]]))
        self.assertEqual(ds.keys, [k for k, *_ in fresh])
        self.assertEqual(ds.manifest["counts"]["duplicate_content_samples"], 3)
        # exact against it: another dataset keeps no pixel digests, so an equal pHash is the
        # match (the lossless copy's is equal; re-encodes often hash equal too).
        _, ds_exact = fx.convert(self, [new_in], "--dedup", "exact", "--dedup-against", old)
        equal = [k for k, _, d, _, _ in fresh[:2] + again + fresh[2:]
                 if any(hashes.get(k, phash(decode_bgr(d))) == hashes[o] for o, *_ in first)]
        self.assertIn("n/again0png", equal)
        self.assertEqual([e["sample"] for e in ignored_duplicates(ds_exact)], equal)
        for e in ignored_duplicates(ds_exact):
            self.assertEqual((e["distance"], e["duplicate_of_dataset"]), (0, old))
        # A dataset converted without --dedup has no __phash__: an error naming it.
        plain = self.path("plain")
        fx.convert(self, [old_in], out=plain)
        p, _ = fx.convert(self, [new_in], "--dedup", "near", "--dedup-against", plain, expect=1)
        err = p.stderr.decode()
        self.assertIn(plain, err)
        self.assertIn("__phash__", err)
        self.assertIn("convert it with --dedup", err)

    def reference(self, name, items):
        """A dataset converted with --dedup near from `items`; returns its path."""
        out = self.path(name)
        fx.convert(self, [write_corpus(self.path(name + ".tar"), items)], "--dedup", "near", out=out)
        return out

    def test_damaged_reference_refused(self):
        """Issue #35 item 6: a reference whose labels fail verify was used (nothing dropped, exit
        0). Its annotation file's CRC-32 is computed here with zlib against the manifest's
        labels_crc32; a damaged one, and a manifest whose seal fails, are refused before the
        output exists."""
        distinct = [it for it in self.items if it[3] == "distinct"]
        good = self.reference("ref-good", distinct[:8])
        new_in = write_corpus(self.path("new-vs-damaged.tar"), distinct[:10])
        for what in ("labels", "manifest"):
            with self.subTest(what=what):
                ref = self.path("ref-damaged-" + what)
                shutil.copytree(good, ref)
                if what == "labels":
                    labels = os.path.join(ref, "labels.safetensors")
                    fx.flip_bit(labels, 3)  # in the last tensor's bytes
                    with open(labels, "rb") as f:
                        crc = "%08x" % zlib.crc32(f.read())
                    with open(os.path.join(ref, "manifest.json")) as f:
                        self.assertNotEqual(crc, json.load(f)["labels_crc32"])
                    words = [labels, crc, "nothing of it was used"]
                else:
                    path = os.path.join(ref, "manifest.json")
                    with open(path) as f:
                        text = f.read()
                    with open(path, "w") as f:
                        f.write(text.replace('"samples": 8', '"samples": 9', 1))
                    words = [path, "manifest_crc32"]
                self.assertNotEqual(fx.run(["verify", ref]).returncode, 0)
                out = self.path("vs-damaged-" + what)
                p, _ = fx.convert(self, [new_in], "--dedup", "near", "--dedup-against", ref, expect=1, out=out)
                err = p.stderr.decode()
                for w in words:
                    self.assertIn(w, err)
                self.assertIn("--dedup-against '%s'" % ref, err)
                self.assertFalse(os.path.exists(out), err)
        # The intact one drops the 8 it holds.
        _, ds = fx.convert(self, [new_in], "--dedup", "near", "--dedup-against", good)
        self.assertEqual(ds.keys, [k for k, *_ in distinct[8:10]])

    def test_reference_replaced_before_resume_refused(self):
        """Issue #35 item 6: the reference replaced between a kill and --resume gave decisions
        against two datasets, exit 0. The checkpoint records the reference by its annotation
        file's CRC-32 (computed here with zlib for the message); the resume is refused and keeps
        the checkpoint; with the first reference back, it goes on and equals an uninterrupted
        run."""
        distinct = [it for it in self.items if it[3] == "distinct"]
        first = self.reference("ref-first", distinct[:6])
        second = self.reference("ref-second", distinct[6:12])
        ref = self.path("ref-now")
        shutil.copytree(first, ref)
        archives = [self.archive] + [
            write_corpus(self.path("replaced%d.tar" % r), [("r%d/%s" % (r, k),) + tuple(rest) for k, *rest in self.items])
            for r in range(1, 4)]
        flags = ["--dedup", "near", "--dedup-against", ref, "-j", "1"]
        one = self.path("replaced-one")
        fx.convert(self, archives, *flags, out=one)
        out = self.path("replaced-killed")
        code, cp = fx.kill_at_checkpoint(["convert", *archives, "-o", out, *flags], out, entries=20)
        self.assertEqual(code, -signal.SIGKILL, "finished before the kill")
        crc = {}
        for name, d in (("first", first), ("second", second)):
            with open(os.path.join(d, "labels.safetensors"), "rb") as f:
                crc[name] = "%08x" % zlib.crc32(f.read())
        self.assertEqual(cp["run"]["dedup_against"], [{"path": ref, "labels_crc32": crc["first"]}])
        shutil.rmtree(ref)
        shutil.copytree(second, ref)
        p = fx.run(["convert", *archives, "-o", out, *flags, "--resume"])
        self.assertEqual(p.returncode, 1, p.stderr)
        err = p.stderr.decode()
        self.assertIn("--dedup-against %s changed since the interrupted run" % ref, err)
        self.assertIn(crc["first"], err)
        self.assertIn(crc["second"], err)
        self.assertTrue(os.path.exists(os.path.join(out, ".tarmac-partial", "checkpoint.json")))
        self.assertFalse(os.path.exists(os.path.join(out, "labels.safetensors")))
        shutil.rmtree(ref)
        shutil.copytree(first, ref)
        p = fx.run(["convert", *archives, "-o", out, *flags, "--resume"])
        self.assertEqual(p.returncode, 0, p.stderr)
        a, b = fx.Dataset(one), fx.Dataset(out)
        self.assertEqual(b.keys, a.keys)
        self.assertEqual(ignored_duplicates(b), ignored_duplicates(a))
        for d in (one, out):
            v = fx.run(["verify", d])
            self.assertEqual(v.returncode, 0, v.stdout.decode() + v.stderr.decode())
        # The complete dataset's manifest records the reference too: a --resume over it with
        # the reference replaced is not "nothing to resume" (it would have dropped other
        # samples), and the dataset is left as it was.
        self.assertEqual(b.manifest["dedup_against"], [{"path": ref, "labels_crc32": crc["first"]}])
        shutil.rmtree(ref)
        shutil.copytree(second, ref)
        before = os.stat(os.path.join(out, "labels.safetensors")).st_mtime_ns
        p = fx.run(["convert", *archives, "-o", out, *flags, "--resume"])
        self.assertEqual(p.returncode, 1, p.stderr)
        err = p.stderr.decode()
        self.assertIn("holds a complete dataset, but not this run's", err)
        self.assertIn(crc["second"], err)
        self.assertNotIn("nothing to resume", err)
        self.assertEqual(os.stat(os.path.join(out, "labels.safetensors")).st_mtime_ns, before)
        # With no reference at all, neither.
        p = fx.run(["convert", *archives, "-o", out, "--dedup", "near", "-j", "1", "--resume"])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("--dedup-against", p.stderr.decode())
        shutil.rmtree(ref)
        shutil.copytree(first, ref)
        p = fx.run(["convert", *archives, "-o", out, *flags, "--resume"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("nothing to resume", p.stderr.decode())

    def test_every_sample_a_content_duplicate_says_so(self):
        """Issue #35 item 17: a run whose every sample duplicates the reference said "none of the
        input's N member(s) made a sample"; it says they were all content duplicates, of which
        dataset, under which flag."""
        distinct = [it for it in self.items if it[3] == "distinct"]
        ref = self.reference("ref-all", distinct[:5])
        again = write_corpus(self.path("all-again.tar"), distinct[:5])
        p, _ = fx.convert(self, [again], "--dedup", "near", "--dedup-against", ref, expect=1)
        err = p.stderr.decode()
        self.assertIn("all 5 sample(s) were left out as content duplicates (--dedup near:", err)
        self.assertIn("of samples of --dedup-against '%s'" % ref, err)
        self.assertIn("sample '%s'" % distinct[0][0], err)
        self.assertNotIn("made a sample", err)

    def test_dedup_against_self_overwrite_refused(self):
        """Issue #35 item 17: `--dedup-against OUT -o OUT --overwrite` said "'OUT' holds no
        dataset" while it was intact (--overwrite had set it aside before it was read). The
        output itself as the reference is refused before anything is touched; every byte of the
        dataset is still there (compared with a copy made here) and verifies."""
        distinct = [it for it in self.items if it[3] == "distinct"]
        ref = self.reference("ref-self", distinct[:5])
        copy = self.path("ref-self-copy")
        shutil.copytree(ref, copy)
        new_in = write_corpus(self.path("self-new.tar"), distinct[:8])
        for spelling in (ref, ref + "/", os.path.join(ref, ".")):
            with self.subTest(spelling=spelling):
                p = fx.run(["convert", new_in, "-o", ref, "--overwrite", "--dedup", "near", "--dedup-against",
                            spelling])
                self.assertEqual(p.returncode, 2, p.stderr)
                err = p.stderr.decode()
                self.assertIn("is the output directory itself", err)
                self.assertNotIn("holds no dataset", err)
        self.assertEqual(sorted(os.listdir(ref)), sorted(os.listdir(copy)))
        for name in os.listdir(copy):
            if os.path.isfile(os.path.join(copy, name)):
                with open(os.path.join(ref, name), "rb") as f, open(os.path.join(copy, name), "rb") as g:
                    self.assertEqual(f.read(), g.read(), name)
        v = fx.run(["verify", ref])
        self.assertEqual(v.returncode, 0, v.stdout.decode() + v.stderr.decode())

    def test_bad_flags_are_usage_errors(self):
        for flags, words in [(["--dedup", "near", "--no-images"], ["--dedup", "--no-images"]),
                             (["--dedup", "fuzzy"], ["--dedup", "'fuzzy'", "exact", "near"]),
                             (["--dedup", "near:33"], ["--dedup near:D", "33"]),
                             (["--dedup", "near:-1"], ["--dedup near:D"]),
                             (["--dedup", "near:4x"], ["--dedup near:D"]),
                             (["--dedup-against", self.tmp], ["--dedup-against", "--dedup"])]:
            with self.subTest(flags=flags):
                p = fx.run(["convert", self.archive, "-o", self.path("bad"), *flags])
                self.assertEqual(p.returncode, 2, p.stderr)
                for w in words:
                    self.assertIn(w, p.stderr.decode())


if __name__ == "__main__":
    unittest.main()
