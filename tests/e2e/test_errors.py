"""End-to-end: bad input of every kind gets a clear error (or a recorded skip), and a failed
run leaves nothing that looks like a dataset."""
import gzip
import io
import json
import os
import struct
import sys
import tarfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402


def good(key, seed=0, **label):
    label = label or {"id": seed}
    return [(key + ".jpg", fx.jpg(fx.smooth_rgb(40, 30, seed=seed))), (key + ".json", fx.js(label))]


def huge_jpeg_header():
    """A real JPEG whose SOF0 claims 60000 x 60000 pixels."""
    b = bytearray(fx.jpg(fx.smooth_rgb(16, 16)))
    i = 2
    while b[i] == 0xFF and b[i + 1] not in (0xC0, 0xC1, 0xC2):
        i += 2 + struct.unpack(">H", b[i + 2:i + 4])[0]
    struct.pack_into(">HH", b, i + 5, 60000, 60000)
    return bytes(b)


class ErrorsTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.jpeg = fx.jpg(fx.smooth_rgb(40, 30, seed=1))
        cls.big_jpeg = fx.jpg(fx.smooth_rgb(200, 150, seed=1))  # half of it ends inside the scan data

    def tar(self, name, members, **kw):
        return fx.write_tar(self.path(name), members, **kw)

    def assert_nothing_published(self, out):
        left = os.listdir(out) if os.path.isdir(out) else []
        self.assertNotIn("labels.safetensors", left)
        self.assertNotIn("manifest.json", left)
        self.assertNotIn(".tarmac-lock", left)  # released, whatever ended the run
        # A failed run keeps its staging directory only for --resume: with a checkpoint in it.
        if ".tarmac-partial" in left:
            self.assertIn("checkpoint.json", os.listdir(os.path.join(out, ".tarmac-partial")))
        self.assertFalse([n for n in left if n.startswith("shard-")], left)

    def refuse(self, inputs, *flags, expect=1, stdin=None, says=()):
        """Runs a conversion that must fail; checks stderr names everything in `says`."""
        out = self.path("out-%d" % time.monotonic_ns())
        p = fx.run(["convert", *inputs, "-o", out, *flags], stdin=stdin)
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, expect, err)
        for s in says:
            self.assertIn(s, err)
        self.assert_nothing_published(out)
        return err

    def skip(self, inputs, *flags):
        p, ds = fx.convert(self, inputs, "--on-error", "skip", "--json", *flags)
        return json.loads(p.stdout), ds

    # ------------------------------------------------ manifest codes

    def test_every_skip_and_ignore_has_a_stable_code(self):
        """Each entry of the manifest's skipped/ignored/duplicates lists carries a `code` users
        can filter on; the expected codes are written here, one per kind of bad input."""
        a = self.tar("codes-a.tar", good("ok/0", 0) + [("ok/0.kp.npy", fx.npy(np.zeros((2, 2))))] + [
            ("noimg/0.json", b"{\"id\": 1}"),                                     # no_image
            ("badjson/0.jpg", self.jpeg), ("badjson/0.json", b"{\"id\": 1,"),     # bad_json
            ("badnpy/0.jpg", self.jpeg), ("badnpy/0.json", b"{\"id\": 1}"),
            ("badnpy/0.kp.npy", b"\x93NUMPY garbage"),                            # bad_npy
            ("badimg/0.jpg", self.big_jpeg[:len(self.big_jpeg) // 2]),
            ("badimg/0.json", b"{\"id\": 1}"),                                    # bad_image
            ("schema/0.jpg", self.jpeg), ("schema/0.json", b"{\"id\": 1}"),
            ("schema/0.kp.npy", fx.npy(np.zeros(3))),                            # schema_mismatch
            ("twice/0.jpg", self.jpeg), ("twice/0.json", b"{\"id\": 1}"),
            ("twice/0.json", b"{\"id\": 2}"),                                     # duplicate_member
            ("ok/1.jpg", self.jpeg), ("ok/1.json", b"{\"id\": 1}"),
            ("ok/1.xyz", b"?"),                                                    # unused_member
            (".hidden", b"x"),                                                     # hidden_file
            ("README", b"x"),                                                      # no_extension
        ])
        b = self.tar("codes-b.tar", good("ok/0", 5))                              # duplicate_key
        _, ds = self.skip([a, b])
        self.assertEqual(ds.keys, ["ok/0", "ok/1"])
        m = ds.manifest
        skipped = {e["sample"]: e["code"] for e in m["skipped"] if e["input"] == a}
        self.assertEqual(skipped, {
            "noimg/0": "no_image", "badjson/0": "bad_json", "badnpy/0": "bad_npy",
            "badimg/0": "bad_image", "schema/0": "schema_mismatch",
            "twice/0": "duplicate_member",
        }, m["skipped"])
        self.assertEqual([(e["sample"], e["code"]) for e in m["skipped"] if e["input"] == b],
                         [("ok/0", "duplicate_key")])
        ignored = {e["member"]: e["code"] for e in m["ignored"]}
        self.assertEqual(ignored, {"ok/1.xyz": "unused_member", ".hidden": "hidden_file",
                                   "README": "no_extension"}, m["ignored"])
        for e in m["skipped"] + m["ignored"]:
            self.assertTrue(e["reason"])

    def test_duplicates_left_out_have_codes(self):
        a = self.tar("dup-a.tar", good("d/0", 0))
        b = self.tar("dup-b.tar", good("d/0", 1) + good("d/1", 2) + [("d/1.json", b"{\"id\": 9}")])
        _, ds = fx.convert(self, [a, b], "--on-duplicate", "first")
        codes = sorted(e["code"] for e in ds.manifest["duplicates"])
        self.assertEqual(codes, ["duplicate_key", "duplicate_member"], ds.manifest["duplicates"])

    # ------------------------------------------------ sample errors: fail vs skip

    def test_truncated_jpeg(self):
        members = (good("a/0", 0) + [("a/1.jpg", self.big_jpeg[:len(self.big_jpeg) // 2]), ("a/1.json", b"{\"id\": 1}")]
                   + good("a/2", 2))
        p = self.tar("trunc.tar", members)
        self.refuse([p], says=[p, "a/1", "a/1.jpg", "corrupt or truncated"])
        summary, ds = self.skip([p])
        self.assertEqual(ds.keys, ["a/0", "a/2"])
        self.assertEqual(summary["samples"], 2)
        self.assertEqual(summary["skipped_samples"], 1)
        self.assertEqual(ds.manifest["counts"]["skipped_samples"], 1)
        (sk,) = ds.manifest["skipped"]
        self.assertEqual((sk["input"], sk["sample"]), (p, "a/1"))
        self.assertIn("corrupt or truncated", sk["reason"])
        self.assertEqual(ds.t["id"].tolist(), [0, 2])

    def test_failed_overwrite_says_the_old_dataset_is_still_there(self):
        """A failed --overwrite run leaves the dataset it was to replace in place (replaced only
        when a run completes): the message says so, not "nothing looks like a dataset" over a
        good one a user might then delete."""
        out = self.path("overwritten")
        ok = self.tar("overwrite-good.tar", good("a/0", 0) + good("a/1", 1))
        fx.convert(self, [ok], out=out)
        bad = self.tar("overwrite-bad.tar", good("b/0", 0) + good("b/1", 1) + [("b/2.jpg", b"not a jpeg"),
                                                                               ("b/2.json", b"{}")])
        p = fx.run(["convert", bad, "-o", out, "--overwrite", "--checkpoint-every", "0", "-j", "1"])
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("'%s' still holds the dataset that was there before this run" % out, err)
        self.assertNotIn("looks like a dataset yet", err)
        self.assertEqual(fx.Dataset(out).keys, ["a/0", "a/1"])
        v = fx.run(["verify", out])  # intact; its one problem the interrupted run's checkpoint beside it
        self.assertIn("1 problem(s)", v.stdout.decode() + v.stderr.decode())
        self.assertIn("an unfinished run left its staging directory", v.stdout.decode() + v.stderr.decode())
        # Into an empty output, the same failure says there is none.
        p = fx.run(["convert", bad, "-o", self.path("overwritten-new"), "--checkpoint-every", "0", "-j", "1"])
        self.assertIn("looks like a dataset yet", p.stderr.decode(errors="replace"))

    def test_huge_jpeg_refused_quickly(self):
        p = self.tar("huge.tar", [("big/0.jpg", huge_jpeg_header())])
        t0 = time.monotonic()
        self.refuse([p], says=["big/0.jpg", "60000", "max-pixels"])
        self.assertLess(time.monotonic() - t0, 5)

    def test_not_an_image(self):
        p = self.tar("notimg.tar", [("x/0.png", b"this is text, not a PNG")])
        self.refuse([p], says=["x/0.png", p])

    def test_sample_without_image(self):
        p = self.tar("noimg.tar", good("a/0") + [("a/1.json", b"{\"id\": 1}"), ("a/1.txt", b"caption")])
        err = self.refuse([p], says=["a/1", "no image member", "its members: 'a/1.json' and 'a/1.txt'",
                                     ".jpg, .jpeg, .png, .webp, .bmp, .tif or .tiff"])
        # a/0 had an image: --no-images would be the wrong advice
        self.assertNotIn("--no-images", err)

    def test_labels_only_input_suggests_no_images(self):
        p = self.tar("labels-only.tar", [("m/0.json", b"{\"id\": 0}"), ("m/1.json", b"{\"id\": 1}")])
        # fail: the first sample stops the run, and no sample before it had an image
        self.refuse([p], says=["m/0", "its members: 'm/0.json'", "No sample before it had an image",
                               "pass --no-images"])
        # skip: every sample is skipped for want of an image; the run converted nothing, so it
        # fails (#16), and says why
        r = fx.run(["convert", p, "-o", self.path("labels-only-skip"), "--on-error", "skip"])
        err = r.stderr.decode()
        self.assertEqual(r.returncode, 1, err)
        self.assertIn("every sample was skipped for want of an image member", err)
        self.assertIn("pass --no-images", err)
        # with --allow-empty the empty dataset is published, and the warning says the same
        r = fx.run(["convert", p, "-o", self.path("labels-only-empty"), "--on-error", "skip",
                    "--allow-empty"])
        err = r.stderr.decode()
        self.assertEqual(r.returncode, 0, err)
        self.assertIn("tarmac: warning: every sample was skipped for want of an image member", err)
        # ... and not when some sample converted, or another reason left one out
        mixed = self.tar("labels-mixed.tar", good("a/0") + [("m/1.json", b"{\"id\": 1}")])
        r = fx.run(["convert", mixed, "-o", self.path("labels-mixed-skip"), "--on-error", "skip"])
        self.assertEqual(r.returncode, 0)
        self.assertNotIn("--no-images", r.stderr.decode())
        other = self.tar("labels-other.tar", [("m/0.json", b"{\"id\": 0}"), ("b/0.jpg", self.jpeg[:50]),
                                               ("b/0.json", b"{\"id\": 1}")])
        r = fx.run(["convert", other, "-o", self.path("labels-other-skip"), "--on-error", "skip"])
        self.assertEqual(r.returncode, 1)  # nothing converted (#16)
        self.assertIn("no sample was converted: all 2 sample(s) were skipped as bad", r.stderr.decode())
        self.assertNotIn("--no-images", r.stderr.decode())
        # with --no-images it converts
        _, ds = fx.convert(self, [p], "--no-images")
        self.assertEqual(ds.t["id"].tolist(), [0, 1])

    def test_image_members_that_differ_before_the_extension(self):
        # one folder of frames, keyed by WebDataset's first-dot rule: all one sample 'v/frame'
        frames = [("v/frame.000123.jpg", self.jpeg), ("v/frame.000124.jpg", self.jpeg)]
        p = self.tar("frames.tar", frames)
        self.refuse([p], says=["v/frame", "'v/frame.000123.jpg' and 'v/frame.000124.jpg'",
                               "pass --key-rule last-dot"])
        # roles rather than numbers: which member is the image?
        q = self.tar("roles.tar", [("k/0.left.jpg", self.jpeg), ("k/0.right.jpg", self.jpeg)])
        self.refuse([q], says=["k/0", "'k/0.left.jpg' and 'k/0.right.jpg'",
                               "--image left.jpg or --image right.jpg"])
        # many: the message lists a few, and how many more
        many = self.tar("frames-many.tar", [("v/frame.%06d.jpg" % i, self.jpeg) for i in range(12)])
        self.refuse([many], says=["'v/frame.000007.jpg' and 4 more", "--key-rule last-dot"])

    def test_field_missing_is_nullable_unless_required(self):
        p = self.tar("missing.tar", good("a/0", 0, id=0, score=1.5) + good("a/1", 1, id=1)
                     + good("a/2", 2, id=2, score=None))
        _, ds = fx.convert(self, [p])
        self.assertEqual(ds.t["score.valid"].tolist(), [True, False, False])
        self.assertEqual(ds.t["score"].tolist(), [1.5, 0.0, 0.0])
        self.assertTrue(json.loads(ds.meta["schema"])["score"]["nullable"])
        self.assertNotIn("nullable", json.loads(ds.meta["schema"])["id"])
        # --require: absent or null is a bad sample, named.
        err = self.refuse([p], "--require", "score", says=["a/1", "required field 'score' is missing", "--require"])
        del err
        _, ds = self.skip([p], "--require", "score")
        self.assertEqual(ds.keys, ["a/0"])
        self.assertEqual([e["code"] for e in ds.manifest["skipped"]], ["bad_field", "bad_field"])
        self.assertIn("is null", ds.manifest["skipped"][1]["reason"])

    def test_field_kind_changes(self):
        # From JSON: kept as each value's JSON text, with a warning naming the field and counts.
        p = self.tar("kind.tar", good("a/0", 0, v=1) + good("a/1", 1, v="one") + good("a/2", 2, v=["x", "y"]))
        r, ds = fx.convert(self, [p])
        self.assertIn("field 'v' holds values of types that share no column type (1 number(s) or numeric "
                      "array(s), 1 string(s), 1 other JSON value(s))", r.stderr.decode())
        self.assertEqual(json.loads(ds.meta["schema"])["v"]["kind"], "json")
        self.assertEqual([json.loads(ds.string("v", i)) for i in range(3)], [1, "one", ["x", "y"]])
        # From members that have types (.npy, .txt): a bad sample, as before.
        q = self.tar("kind2.tar", [("a/0.jpg", self.jpeg), ("a/0.v.npy", fx.npy(np.int64(3))),
                                   ("a/1.jpg", self.jpeg), ("a/1.v.txt", b"three")])
        self.refuse([q], says=["a/1", "'v'"])

    def test_malformed_json(self):
        p = self.tar("badjson.tar", good("a/0") + [("a/1.jpg", self.jpeg), ("a/1.json", b"{\"id\": 1,")])
        self.refuse([p], says=["a/1.json", "JSON"])

    def test_npy_shape_varies_needs_ragged(self):
        members = []
        for i, n in enumerate([2, 5, 3]):
            members += [(f"n/{i}.jpg", self.jpeg), (f"n/{i}.kp.npy", fx.npy(np.arange(n * 2, dtype=np.float32).reshape(n, 2)))]
        p = self.tar("ragged.tar", members)
        self.refuse([p], says=["n/1", "kp", "--ragged"])
        _, ds = fx.convert(self, [p], "--ragged", "kp")
        self.assertTrue(ds.schema["kp"]["ragged"])
        self.assertEqual(ds.schema["kp"]["shape"], [-1, 2])
        self.assertEqual(ds.t["kp.offsets"].tolist(), [0, 2, 7, 10])
        for i, n in enumerate([2, 5, 3]):
            np.testing.assert_array_equal(ds.ragged("kp", i), np.arange(n * 2, dtype=np.float32).reshape(n, 2))

    def test_field_name_clash(self):
        # .json's "txt" and the .txt member both make field 'txt'
        p = self.tar("clash.tar", [("c/0.jpg", self.jpeg), ("c/0.json", b"{\"txt\": \"a\"}"), ("c/0.txt", b"b")])
        self.refuse([p], says=["c/0", "txt", "c/0.json", "c/0.txt"])

    def test_points_field_missing(self):
        p = self.tar("nopoints.tar", good("a/0"))
        self.refuse([p], "--points", "kp", says=["a/0", "kp"])

    def test_member_twice(self):
        p = self.tar("twice.tar", good("a/0") + [("a/0.json", b"{\"id\": 5}")])
        self.refuse([p], says=["a/0", "twice"])

    # ------------------------------------------------ archive-level errors

    def test_truncated_gzip(self):
        members = []
        for i in range(6):
            members += good(f"g/{i}", i)
        full = self.tar("full.tar", members)
        with open(full, "rb") as f:
            data = gzip.compress(f.read())
        p = self.path("cut.tar.gz")
        with open(p, "wb") as f:
            f.write(data[:len(data) * 2 // 3])
        self.refuse([p], says=[p])

    def test_not_an_archive(self):
        p = self.path("garbage.tar")
        with open(p, "wb") as f:
            f.write(os.urandom(4096))
        self.refuse([p], says=[p])

    def test_missing_input(self):
        self.refuse([self.path("does-not-exist.tar")], says=["does-not-exist.tar"])

    def test_unsafe_member_names(self):
        for bad in ("../evil.jpg", "/etc/x.jpg", "a/../../evil.jpg"):
            with self.subTest(name=bad):
                p = self.tar("unsafe-%d.tar" % len(bad), good("a/0") + [(bad, self.jpeg)])
                self.refuse([p], says=[bad])
                summary, ds = self.skip([p])
                self.assertEqual(ds.keys, ["a/0"])
                self.assertEqual(summary["skipped_members"], 1)
                (sk,) = ds.manifest["skipped"]
                self.assertEqual(sk["member"], bad)
                self.assertIn("unsafe", sk["reason"])

    def test_member_name_not_utf8_in_a_folder_as_in_a_tar(self):
        """A file whose name is not UTF-8 is refused in a folder as a tar member is: the run
        stops, or under --on-error skip the member is left out with code bad_member_name, its
        name shown escaped; the dataset verifies (a folder once converted it into a key that
        verify and Python's ds.key() refused)."""
        jpeg_name = os.fsencode("a/") + b"\xff1.jpg"
        folder = os.fsencode(self.path("not-utf8-folder"))
        for name, data in good("a/0") + [(jpeg_name, self.jpeg), (b"a/\xff1.json", b"{\"id\": 1}")]:
            p = os.path.join(folder, os.fsencode(name))
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(data)
        tar = self.path("not-utf8.tar")
        with tarfile.open(tar, "w", format=tarfile.GNU_FORMAT, encoding="utf-8", errors="surrogateescape") as t:
            for name, data in good("a/0") + [(os.fsdecode(jpeg_name), self.jpeg)]:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        for kind, src in (("folder", os.fsdecode(folder)), ("tar", tar)):
            with self.subTest(input=kind):
                err = self.refuse([src], says=["a/\\xff1.", "not valid UTF-8"])
                self.assertNotIn("\ufffd", err)  # the byte is shown escaped, not replaced
                summary, ds = self.skip([src])
                self.assertEqual(ds.keys, ["a/0"])
                self.assertEqual(ds.t["id"].tolist(), [0])
                bad = [(e["member"], e["code"]) for e in ds.manifest["skipped"]]
                expected = [("a/\\xff1.jpg", "bad_member_name")]
                if kind == "folder":
                    expected.append(("a/\\xff1.json", "bad_member_name"))
                self.assertEqual(sorted(bad), expected)
                self.assertEqual(summary["skipped_members"], len(expected))
                v = fx.run(["verify", ds.out])
                self.assertEqual(v.returncode, 0, v.stdout.decode(errors="replace") + v.stderr.decode(errors="replace"))

    def test_symlink_not_followed(self):
        p = self.path("link.tar")
        with tarfile.open(p, "w") as t:
            for name, data in good("a/0"):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
            link = tarfile.TarInfo("a/1.jpg")
            link.type = tarfile.SYMTYPE
            link.linkname = "/etc/passwd"
            t.addfile(link)
        _, ds = fx.convert(self, [p])
        self.assertEqual(ds.keys, ["a/0"])
        (ig,) = ds.manifest["ignored"]
        self.assertEqual(ig["member"], "a/1.jpg")
        self.assertIn("link", ig["reason"])
        self.assertEqual(ds.manifest["counts"]["ignored_members"], 1)

    def test_duplicate_key_across_archives(self):
        a = self.tar("dup-a.tar", good("k/0", 0) + good("k/1", 1))
        b = self.tar("dup-b.tar", good("k/1", 2))
        self.refuse([a, b], says=["k/1", "duplicate"])

    def test_dense_map_missing(self):
        p = self.tar("densemiss.tar", [("a/0.jpg", self.jpeg), ("a/0.depth.png", fx.png(fx.smooth_u16(40, 30))),
                                       ("a/1.jpg", self.jpeg)])
        self.refuse([p], "--dense", "depth.png", says=[p, "a/1", "depth.png"])

    def test_max_pixels_flag(self):
        p = self.tar("maxpx.tar", good("a/0"))
        self.refuse([p], "--max-pixels", "1000", says=["a/0.jpg", "40x30", "--max-pixels"])

    def test_bad_crop_box_fields(self):
        for name, box in (("short", [1, 2, 3]), ("negative", [10, 10, -5, 10]), ("text", "abcd")):
            with self.subTest(box=name):
                p = self.tar(f"box-{name}.tar", good("a/0", 0, b=box))
                self.refuse([p], "--crop", "field:b", "--size", "8", says=["a/0", "'b'" if name != "negative" else "crop box"])

    def test_stdin_not_an_archive(self):
        self.refuse(["-"], stdin=b"hello world\n" * 100, says=["standard input"])

    def test_members_too_far_apart(self):
        ms = [(f"g/{i}.jpg", self.jpeg) for i in range(6)] + [(f"g/{i}.json", fx.js({"i": i})) for i in range(6)]
        p = self.tar("window.tar", ms)
        self.refuse([p], "--group-window", "2K", says=[p, "g/0.json", "--group-window"])

    # Regression: reader-side sample errors (duplicate key, members too far apart) printed
    # `sample ''` and named the first input (the worker cleared the sample before the writer
    # read its key and input); they name the sample and the archive it came from.
    def test_reader_error_names_sample_and_archive(self):
        a = self.tar("dup2-a.tar", good("k/0", 0) + good("k/1", 1))
        b = self.tar("dup2-b.tar", good("k/1", 2))
        self.refuse([a, b], says=[f"'{b}', sample 'k/1'"])

    # Regression (same cause): the text summary of --on-error skip named the first input for a
    # sample skipped from a later one ("skipped m/0 (a.tar)" where m/0 came from c.tar); it
    # names the archive the sample came from, as the manifest does.
    def test_skip_summary_names_right_archive(self):
        a = self.tar("sum-a.tar", good("k/0", 0))
        c = self.tar("sum-c.tar", [("m/0.jpg", self.jpeg[:len(self.jpeg) // 2])])
        p, ds = fx.convert(self, [a, c], "--on-error", "skip")
        self.assertEqual(ds.manifest["skipped"][0]["input"], c)  # the manifest is right
        self.assertIn(f"skipped m/0 ({c})", p.stdout.decode())

    # Regression: under --on-error skip an archive that cannot be read to its end (here a
    # truncated .tar.gz) was dropped silently, mentioned only by the manifest's inputs[].error.
    # Nothing is silently dropped: it is named on stderr and listed in the manifest's "skipped"
    # (or the run fails naming it).
    def test_unreadable_archive_under_skip_is_reported(self):
        members = []
        for i in range(8):
            members += good(f"t/{i}", i)
        full = self.tar("skipcut.tar", members)
        with open(full, "rb") as f:
            data = gzip.compress(f.read())
        p = self.path("skipcut.tar.gz")
        with open(p, "wb") as f:
            f.write(data[:len(data) // 2])
        out = self.path("skipcut-out")
        r = fx.run(["convert", p, "-o", out, "--on-error", "skip"])
        if r.returncode == 0:
            with open(os.path.join(out, "manifest.json")) as f:
                manifest = json.load(f)
            self.assertIn(p, r.stderr.decode())
            self.assertTrue([s for s in manifest["skipped"] if s["input"] == p])
        else:
            self.assertIn(p, r.stderr.decode())

    # ------------------------------------------------ usage and output directory

    def test_keep_with_crop_is_refused(self):
        p = self.tar("keep.tar", good("a/0"))
        out = self.path("keep-out")
        r = fx.run(["convert", p, "-o", out, "--format", "keep", "--crop", "center", "--size", "16"])
        self.assertIn(r.returncode, (1, 2))
        self.assertIn("keep", r.stderr.decode())
        self.assert_nothing_published(out)

    def test_usage_errors_exit_2(self):
        p = self.tar("usage.tar", good("a/0"))
        for flags in (["--crop", "diagonal"], ["--size", "abc"], ["--format", "gif"], ["--resize", "fit"],
                      ["--on-error", "ignore"], ["--shard-size", "12Q"], ["--crop-scale", "0"]):
            with self.subTest(flags=flags):
                self.refuse([p], *flags, expect=2)
        r = fx.run(["convert", p])  # no -o
        self.assertEqual(r.returncode, 2)

    def test_output_not_empty_and_overwrite(self):
        p = self.tar("ow.tar", good("a/0", 0) + good("a/1", 1))
        _, first = fx.convert(self, [p])
        r = fx.run(["convert", p, "-o", first.out])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--overwrite", r.stderr.decode())
        # a failing --overwrite run leaves the old dataset as it was
        with open(os.path.join(first.out, "labels.safetensors"), "rb") as f:
            before = f.read()
        bad = self.tar("ow-bad.tar", good("b/0") + [("b/1.jpg", self.jpeg[:100])])
        r = fx.run(["convert", bad, "-o", first.out, "--overwrite"])
        self.assertEqual(r.returncode, 1)
        with open(os.path.join(first.out, "labels.safetensors"), "rb") as f:
            self.assertEqual(f.read(), before)
        self.assertNotIn(".tarmac-lock", os.listdir(first.out))
        # a good --overwrite run replaces it, with no stale shard left behind
        small = self.tar("ow-small.tar", good("c/0", 5))
        _, again = fx.convert(self, [small], "--overwrite", out=first.out)
        self.assertEqual(again.keys, ["c/0"])
        self.assertEqual(sorted(os.listdir(first.out)), sorted(["labels.safetensors", "manifest.json", "shardlist.json", *again.shards]))

    def test_stale_partial_dir_is_not_a_dataset(self):
        p = self.tar("stale.tar", good("a/0"))
        out = self.path("stale-out")
        os.makedirs(os.path.join(out, ".tarmac-partial"))
        with open(os.path.join(out, ".tarmac-partial", "labels.safetensors"), "wb") as f:
            f.write(b"junk")
        _, ds = fx.convert(self, [p], out=out)
        self.assertEqual(ds.keys, ["a/0"])
        self.assertNotIn(".tarmac-partial", os.listdir(out))


if __name__ == "__main__":
    unittest.main()
