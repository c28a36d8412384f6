"""End-to-end: every input kind yields the same samples, in order of first appearance."""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import unittest
import zipfile
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

KEYS = ["set/b/0002", "set/a/0000", "set/a/0001"]


def sample_members(keys, seed=0):
    out = []
    for i, k in enumerate(keys):
        out.append((k + ".png", fx.png(fx.smooth_rgb(32, 24, seed=seed + i))))
        out.append((k + ".json", fx.js({"id": seed + i, "name": k})))
        out.append((k + ".txt", f"text of {k}".encode()))
    return out


class InputFormatsTest(fx.TmpCase):
    @classmethod
    def build(cls):
        cls.members = sample_members(KEYS)
        cls.data = dict(cls.members)
        cls.names = [n for n, _ in cls.members]
        cls.root = fx.write_tree(os.path.join(cls.tmp, "tree"), cls.members)

    def check(self, inputs, keys=KEYS, stdin=None, data=None):
        _, ds = fx.convert(self, inputs, "--format", "keep", stdin=stdin)
        data = data or self.data
        self.assertEqual(ds.keys, keys)
        self.assertEqual(ds.t["id"].tolist(), [fx.json.loads(data[k + ".json"])["id"] for k in keys])
        for i, k in enumerate(keys):
            self.assertEqual(ds.blob(i), data[k + ".png"], k)
            self.assertEqual(ds.string("txt", i), data[k + ".txt"].decode())
            self.assertEqual(ds.string("name", i), k)
        return ds

    def check_manifest_input(self, ds, path, members=None):
        (inp,) = ds.manifest["inputs"]
        with open(path, "rb") as f:
            raw = f.read()
        self.assertEqual(inp["size"], len(raw))
        self.assertEqual(inp["crc32"], fx.crc_hex(raw))
        if members is not None:
            self.assertEqual(inp["members"], members)

    def test_python_tarfile_formats(self):
        for fmt_name, fmt in (("ustar", tarfile.USTAR_FORMAT), ("gnu", tarfile.GNU_FORMAT), ("pax", tarfile.PAX_FORMAT)):
            for mode in ("w", "w:gz", "w:bz2", "w:xz"):
                with self.subTest(format=fmt_name, mode=mode):
                    p = fx.write_tar(self.path(f"py-{fmt_name}-{mode[2:] or 'plain'}.tar"), self.members, fmt, mode)
                    ds = self.check([p])
                    self.check_manifest_input(ds, p, members=len(self.members))
                    self.assertEqual(ds.manifest["inputs"][0]["path"], p)

    def test_gnu_tar_compressions(self):
        for flag, ext in (([], "tar"), (["-z"], "tar.gz"), (["-J"], "tar.xz"), (["--zstd"], "tar.zst"),
                          (["--format=posix"], "pax.tar")):
            with self.subTest(ext=ext):
                p = fx.gnu_tar(self.path("gnu." + ext), self.root, self.names, *flag)
                ds = self.check([p])
                self.check_manifest_input(ds, p, members=len(self.members))

    def test_bsdtar(self):
        for fmt in ("ustar", "pax", "gnutar"):
            with self.subTest(format=fmt):
                p = self.path(f"bsd-{fmt}.tar")
                subprocess.run(["bsdtar", "-c", "-f", p, "--format", fmt, "-C", self.root, *self.names], check=True)
                self.check([p])

    def test_zip_command_and_zipfile(self):
        p = self.path("cmd.zip")
        subprocess.run(["zip", "-q", "-X", p, *self.names], cwd=self.root, check=True)
        self.check([p])
        for comp in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            with self.subTest(compression=comp):
                p = self.path(f"py-{comp}.zip")
                with zipfile.ZipFile(p, "w", comp) as z:
                    for n, d in self.members:
                        z.writestr(n, d)
                self.check([p])

    def test_dot_slash_prefix_and_directory_entries(self):
        # `tar -C root .` writes ./set/, ./set/a/0000.png, ...: keys lose the './'
        p = self.path("dot.tar")
        subprocess.run(["tar", "-c", "-f", p, "--sort=name", "-C", self.root, "."], check=True)
        self.check([p], keys=sorted(KEYS))

    def test_directory_input(self):
        ds = self.check([self.root], keys=sorted(KEYS))  # a directory is read in sorted order
        (inp,) = ds.manifest["inputs"]
        self.assertEqual(inp["path"], self.root)

    def test_stdin(self):
        p = fx.write_tar(self.path("stdin.tar.gz"), self.members, mode="w:gz")
        with open(p, "rb") as f:
            raw = f.read()
        ds = self.check(["-"], stdin=raw)
        (inp,) = ds.manifest["inputs"]
        self.assertEqual(inp["path"], "-")
        self.assertEqual(inp["size"], len(raw))
        self.assertEqual(inp["crc32"], fx.crc_hex(raw))

    def test_non_adjacent_members(self):
        # like `tar cf x.tar *.png *.json *.txt`: every sample's members are far apart
        order = sorted(self.names, key=lambda n: (n.rsplit(".", 1)[1], self.names.index(n)))
        p = fx.gnu_tar(self.path("spread.tar"), self.root, order)
        self.check([p])

    def test_member_order_never_changes_the_output(self):
        # Samples followed by another key are processed ahead of their release from the group
        # window; a member that comes later must still count. Three layouts of the same 60
        # samples (adjacent; every 7th sample's label 5 samples late; all images, then all
        # labels) give byte-identical datasets, with real decoding and cropping on 2 threads.
        # (A 40 KB member no stage uses makes each sample big enough to be converted ahead.)
        keys = [f"o/{i:04d}" for i in range(60)]
        rng = np.random.default_rng(5)
        members = []
        for i, k in enumerate(keys):
            members.append((k + ".jpg", fx.jpg(fx.smooth_rgb(96, 64, seed=i), 90)))
            members.append((k + ".pad", rng.integers(0, 256, 40000, np.uint8).tobytes()))
            members.append((k + ".json", fx.js({"id": i, "box": [i % 30, 3, 40, 30]})))
        late = list(members)
        for i in range(0, 55, 7):  # move sample i's label after sample i + 5's
            late.remove(members[3 * i + 2])
            late.insert(late.index(members[3 * (i + 5) + 2]) + 1, members[3 * i + 2])
        spread = members[0::3] + members[1::3] + members[2::3]
        outs = []
        for name, layout in (("adjacent", members), ("late", late), ("spread", spread)):
            src = fx.write_tar(self.path(f"order-{name}.tar"), layout)
            p, ds = fx.convert(self, [src], "--crop", "field:box", "--size", "32", "--threads", "2", "--json",
                               out=self.path(f"order-out-{name}"))
            ahead = fx.json.loads(p.stdout)["stages"]["ahead_samples"]
            if name == "adjacent":
                self.assertEqual(ahead, 59)  # every sample but the last went ahead
            else:
                self.assertLess(ahead, 59)  # a late member stops it
            self.assertEqual(ds.keys, keys, name)
            self.assertEqual(ds.t["id"].tolist(), list(range(60)), name)
            files = sorted(f for f in os.listdir(ds.out) if f != "manifest.json")
            outs.append({f: open(os.path.join(ds.out, f), "rb").read() for f in files})
        self.assertEqual(outs[0], outs[1])
        self.assertEqual(outs[0], outs[2])

    def test_gzip_of_several_members_and_padding(self):
        # bgzip and pigz -i write a .gz as many gzip members; tape copies add zero padding.
        import gzip
        raw = open(fx.write_tar(self.path("members.tar"), self.members), "rb").read()
        third = len(raw) // 3
        data = b"".join(gzip.compress(raw[i:i + third]) for i in range(0, len(raw), third)) + bytes(512)
        p = self.path("members.tar.gz")
        with open(p, "wb") as f:
            f.write(data)
        ds = self.check([p])
        self.check_manifest_input(ds, p)

    def test_several_inputs_in_order(self):
        more = sample_members(["other/0009", "other/0005"], seed=50)
        a = fx.write_tar(self.path("multi-a.tar"), self.members)
        b = fx.write_tar(self.path("multi-b.tar.gz"), more, mode="w:gz")
        data = dict(self.data, **dict(more))
        ds = self.check([b, a], keys=["other/0009", "other/0005", *KEYS], data=data)
        self.assertEqual([i["path"] for i in ds.manifest["inputs"]], [b, a])
        for inp, path in zip(ds.manifest["inputs"], [b, a]):
            with open(path, "rb") as f:
                self.assertEqual(inp["crc32"], fx.crc_hex(f.read()))
        # an archive, a directory and stdin together
        tree2 = fx.write_tree(self.path("tree2"), sample_members(["t2/x"], seed=70))
        data2 = dict(data, **dict(sample_members(["t2/x"], seed=70)))
        with open(b, "rb") as f:
            self.check([a, tree2, "-"], keys=[*KEYS, "t2/x", "other/0009", "other/0005"], stdin=f.read(), data=data2)

    def test_long_and_unicode_names(self):
        long_dir = "deep/" + "/".join(["d%02d_" % i + "x" * 20 for i in range(6)])
        keys = [long_dir + "/0001", "ünïcødé/写真_01", "plain/0"]
        members = sample_members(keys, seed=20)
        for fmt_name, fmt in (("gnu", tarfile.GNU_FORMAT), ("pax", tarfile.PAX_FORMAT)):
            with self.subTest(format=fmt_name):
                p = fx.write_tar(self.path(f"long-{fmt_name}.tar"), members, fmt)
                ds = self.check([p], keys=keys, data=dict(members))
                # shards are read back by Python's tarfile with the same names
                with tarfile.open(os.path.join(ds.out, ds.shards[0]), encoding="utf-8") as tf:
                    self.assertEqual(tf.getnames(), [k + ".png" for k in keys])

    def test_ignored_members_are_recorded(self):
        members = self.members + [("README", b"no extension"), (".hidden.png", b"x"), ("set/a/0000.xyz", b"?")]
        p = fx.write_tar(self.path("extra.tar"), members)
        _, ds = fx.convert(self, [p], "--format", "keep", "--json")
        ignored = {i["member"] for i in ds.manifest["ignored"]}
        self.assertEqual(ignored, {"README", ".hidden.png", "set/a/0000.xyz"})
        self.assertEqual(ds.manifest["counts"]["ignored_members"], 3)
        self.assertEqual(ds.keys, KEYS)


class MemberNamesTest(fx.TmpCase):
    """Which member is the image: its last extension (`KEY.rgb.png` is a PNG), --image for a
    full extension, and --key-rule for names whose dots are not WebDataset's."""

    @classmethod
    def build(cls):
        cls.rgb = [fx.png(fx.smooth_rgb(32, 24, seed=s)) for s in range(2)]
        cls.depth = [fx.png(fx.smooth_u16(32, 24, seed=s)) for s in range(2)]
        members = []
        for i in range(2):
            members += [(f"wds/{i:06d}.rgb.png", cls.rgb[i]), (f"wds/{i:06d}.depth.png", cls.depth[i]),
                        (f"wds/{i:06d}.json", fx.js({"id": i}))]
        cls.rgb_depth = fx.write_tar(os.path.join(cls.tmp, "rgb-depth.tar"), members)

    def test_rgb_png_with_json_converts_with_no_flag(self):
        members = [(f"wds/{i:06d}.rgb.png", self.rgb[i]) for i in range(2)]
        members += [(f"wds/{i:06d}.json", fx.js({"id": 10 + i})) for i in range(2)]
        p = fx.write_tar(self.path("rgb-only.tar"), sorted(members))
        _, ds = fx.convert(self, [p], "--format", "keep")
        self.assertEqual(ds.keys, ["wds/000000", "wds/000001"])
        self.assertEqual([ds.blob(i) for i in range(2)], self.rgb)
        self.assertEqual(ds.t["id"].tolist(), [10, 11])

    def test_two_png_candidates_are_refused_naming_both(self):
        p = fx.run(["convert", self.rgb_depth, "-o", self.path("two-out")])
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 1, err)
        for s in ("wds/000000", "'wds/000000.depth.png'", "'wds/000000.rgb.png'", "--image rgb.png",
                  "--image depth.png"):
            self.assertIn(s, err)
        self.assertNotIn("labels.safetensors", os.listdir(self.path("two-out")))

    def test_image_names_the_full_extension(self):
        _, ds = fx.convert(self, [self.rgb_depth], "--image", "rgb.png", "--format", "keep")
        self.assertEqual(ds.keys, ["wds/000000", "wds/000001"])
        self.assertEqual([ds.blob(i) for i in range(2)], self.rgb)
        self.assertEqual(json.loads(ds.meta["blobs"]), ["__image__"])
        ignored = {e["member"]: e["code"] for e in ds.manifest["ignored"]}
        self.assertEqual(ignored, {"wds/000000.depth.png": "unused_member",
                                   "wds/000001.depth.png": "unused_member"})

    def test_dense_map_leaves_one_candidate(self):
        for flags in (["--dense", "depth.png"], ["--dense", "depth.png", "--image", "rgb.png"]):
            with self.subTest(flags=flags):
                _, ds = fx.convert(self, [self.rgb_depth], *flags, "--format", "keep")
                self.assertEqual([ds.blob(i) for i in range(2)], self.rgb)
                self.assertEqual([ds.blob(i, "__depth__") for i in range(2)], self.depth)

    def test_several_candidates_are_skipped_with_their_code(self):
        # Every sample skipped converts nothing: accepted with --allow-empty (else exit 1, #16).
        _, ds = fx.convert(self, [self.rgb_depth], "--on-error", "skip", "--allow-empty")
        self.assertEqual(ds.keys, [])
        self.assertEqual([(e["sample"], e["code"]) for e in ds.manifest["skipped"]],
                         [("wds/000000", "ambiguous_image"), ("wds/000001", "ambiguous_image")])

    def photo_tree(self, name, names):
        files = [(n, fx.jpg(fx.smooth_rgb(16, 12, seed=i))) for i, n in enumerate(names)]
        return fx.write_tree(self.path(name), files), dict(files)

    def test_key_rule_last_dot_groups_labels_with_their_image(self):
        images = ["cam/IMG_2020.01.01.jpg", "cam/IMG_2020.01.02.jpg", "clip/frame.000123.jpg",
                  "clip/frame.000124.jpg"]
        root, data = self.photo_tree("photos", images)
        labels = {}
        for i, n in enumerate(images):
            stem = os.path.splitext(n)[0]  # the key, computed here: the name up to its last dot
            labels[stem] = 100 + i
            with open(os.path.join(root, stem + ".json"), "wb") as f:
                f.write(fx.js({"t": 100 + i}))
        _, ds = fx.convert(self, [root], "--key-rule", "last-dot", "--format", "keep")
        self.assertEqual(ds.keys, sorted(labels))
        self.assertEqual(ds.t["t"].tolist(), [labels[k] for k in ds.keys])
        for i, k in enumerate(ds.keys):
            self.assertEqual(ds.blob(i), data[k + ".jpg"], k)

    def test_key_rule_last_dot_images_only(self):
        names = ["cam/IMG_2020.01.01.jpg", "cam/IMG_2020.01.02.jpg", "clip/frame.000123.jpg",
                 "clip/frame.000124.jpg"]
        root, data = self.photo_tree("photos-only", names)
        _, ds = fx.convert(self, [root], "--key-rule", "last-dot", "--format", "keep")
        self.assertEqual(ds.keys, sorted(os.path.splitext(n)[0] for n in names))
        for i, k in enumerate(ds.keys):
            self.assertEqual(ds.blob(i), data[k + ".jpg"], k)
        self.assertEqual(ds.manifest["output_options"]["--key-rule"], "last-dot")
        # first-dot makes frame.000123.jpg and frame.000124.jpg one sample 'clip/frame': refused,
        # naming both and the rule to use
        p = fx.run(["convert", root, "-o", self.path("photos-first-dot")])
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("--key-rule last-dot", err)
        self.assertIn("'cam/IMG_2020.01.01.jpg'", err)
        self.assertIn("'cam/IMG_2020.01.02.jpg'", err)

    def test_key_rule_reaches_the_duplicate_scan_and_parts(self):
        a_img, b_img = fx.jpg(fx.smooth_rgb(16, 12, seed=1)), fx.jpg(fx.smooth_rgb(16, 12, seed=2))
        other = fx.jpg(fx.smooth_rgb(16, 12, seed=3))
        a = fx.write_tar(self.path("dup-a.tar"), [("frame.000001.jpg", a_img), ("frame.000002.jpg", other)])
        b = fx.write_tar(self.path("dup-b.tar"), [("frame.000001.jpg", b_img)])
        # --on-duplicate last reads the keys first: with the same rule, frame.000001 is kept from b
        _, ds = fx.convert(self, [a, b], "--key-rule", "last-dot", "--on-duplicate", "last", "--format", "keep")
        self.assertEqual(ds.keys, ["frame.000002", "frame.000001"])
        self.assertEqual([ds.blob(0), ds.blob(1)], [other, b_img])
        self.assertEqual([(e["sample"], e["input"]) for e in ds.manifest["duplicates"]], [("frame.000001", a)])
        # --shard I/N by sample: the parts' keys together are one run's
        names = [f"clip/frame.{i:06d}.jpg" for i in range(5)]
        root, _ = self.photo_tree("parts", names)
        parts = []
        for i in range(2):
            out = self.path(f"part-{i}")
            fx.convert(self, [root], "--key-rule", "last-dot", "--shard", f"{i}/2", out=out)
            parts.append(out)
        merged = self.path("merged")
        r = fx.run(["merge", *parts, "-o", merged])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        self.assertEqual(sorted(fx.Dataset(merged).keys), [n[:-4] for n in names])


def imagefolder_oracle(root):
    """(classes, {key: class index}) as torchvision's ImageFolder numbers a tree ROOT/CLASS/...;
    without torchvision, its documented rule: classes are sorted(entry.name for entry in
    os.scandir(root) if entry.is_dir()), Python's code point order."""
    try:
        import torchvision
        ds = torchvision.datasets.ImageFolder(root)
        classes, samples = ds.classes, ds.samples
    except ImportError:
        classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
        samples = [(os.path.join(d, f), classes.index(os.path.relpath(d, root).split(os.sep)[0]))
                   for d, _, fs in os.walk(root) if d != root for f in fs]
    # tarmac's key: the path below the input, up to the first dot of the file name
    return classes, {os.path.relpath(p, root).split(".")[0]: c for p, c in samples}


class ClassFoldersTest(fx.TmpCase):
    """--classes-from-dirs: each image's folder is its class, numbered as ImageFolder does."""
    # created in this order, which is not the sorted one: upper case sorts before lower case,
    # "a10" before "a2", "_x" between them, a non-ASCII name last (Python: by code point)
    CLASSES = ["zebra", "Zebra", "n01440764", "a2", "a10", "\u00e9clair", "_x"]

    @classmethod
    def build(cls):
        cls.files = {}
        for i, c in enumerate(cls.CLASSES):
            for j in range(2):
                cls.files[f"{c}/img_{i}_{j}.JPEG"] = fx.jpg(fx.smooth_rgb(16, 12, seed=2 * i + j))
        cls.root = fx.write_tree(os.path.join(cls.tmp, "imagenet", "train"), list(cls.files.items()))
        cls.classes, cls.by_key = imagefolder_oracle(cls.root)
        assert cls.classes != cls.CLASSES and sorted(cls.classes) == sorted(cls.CLASSES)

    def check(self, ds, prefix=""):
        self.assertEqual(json.loads(ds.meta["classes"]), self.classes)
        self.assertEqual(ds.schema["cls"]["dtype"], "I64")
        self.assertEqual(ds.t["cls"].dtype, np.int64)
        self.assertEqual({k: int(c) for k, c in zip(ds.keys, ds.t["cls"])},
                         {k: self.by_key[k[len(prefix):]] for k in ds.keys})

    def test_imagefolder_tree_numbered_as_torchvision(self):
        _, ds = fx.convert(self, [self.root], "--classes-from-dirs", "--size", "8")
        self.assertEqual(sorted(ds.keys), sorted(self.by_key))
        self.check(ds)
        info = fx.run(["info", ds.out])
        self.assertEqual(info.returncode, 0)
        text = info.stdout.decode()
        for i, c in enumerate(self.classes):
            self.assertIn(f"{c} ({i})", text)
        j = json.loads(fx.run(["info", ds.out, "--json"]).stdout)
        self.assertEqual(j["classes"], self.classes)

    def test_parts_number_classes_alike_and_merge(self):
        # three archives of train/CLASS/x.JPEG, each holding only some classes; --shard by inputs
        # gives each part only its archive, yet every part numbers classes from all of them
        names = sorted(self.files)
        tars = [fx.write_tar(self.path(f"train-{i}.tar"),
                             [("train/" + n, self.files[n]) for n in names[i::3]]) for i in range(3)]
        parts = []
        for i in range(3):
            _, ds = fx.convert(self, tars, "--classes-from-dirs", "--shard", f"{i}/3", "--format", "keep",
                               out=self.path(f"cls-part-{i}"))
            self.check(ds, prefix="train/")
            parts.append(ds.out)
        merged = self.path("cls-merged")
        r = fx.run(["merge", *parts, "-o", merged])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        ds = fx.Dataset(merged)
        self.assertEqual(sorted(ds.keys), sorted("train/" + k for k in self.by_key))
        self.check(ds, prefix="train/")

    def test_merge_refuses_parts_numbered_differently(self):
        other = fx.write_tree(self.path("other-tree"), [("cat/0.jpg", self.files["zebra/img_0_0.JPEG"]),
                                                        ("dog/1.jpg", self.files["zebra/img_0_1.JPEG"])])
        _, a = fx.convert(self, [self.root], "--classes-from-dirs", "--format", "keep")
        _, b = fx.convert(self, [other], "--classes-from-dirs", "--format", "keep")
        _, plain = fx.convert(self, [other], "--format", "keep", out=self.path("plain-part"))
        for second, says in ((b, "7 classes against 2"), (plain, "the other none")):
            r = fx.run(["merge", second.out, a.out, "-o", self.path("bad-merge")])
            err = r.stderr.decode()
            self.assertEqual(r.returncode, 1, err)
            self.assertIn("numbers its classes by other class folders", err)
            self.assertIn(says, err)

    def test_resume_keeps_the_class_list(self):
        tree = self.path("resume-tree")
        shutil.copytree(self.root, tree)
        with open(os.path.join(tree, "a2", "img_3_0.JPEG"), "r+b") as f:
            f.truncate(100)  # a bad sample stops the run, its checkpoint kept
        out = self.path("resume-out")
        fx.convert(self, [tree], "--classes-from-dirs", "--checkpoint-every", "0", expect=1, out=out)
        self.assertTrue(os.path.exists(os.path.join(out, ".tarmac-partial", "checkpoint.json")))
        # a class folder added since would renumber the classes after it: refused
        os.makedirs(os.path.join(tree, "Aardvark"))
        shutil.copy(os.path.join(tree, "a2", "img_3_1.JPEG"), os.path.join(tree, "Aardvark", "x.JPEG"))
        r = fx.run(["convert", tree, "-o", out, "--classes-from-dirs", "--checkpoint-every", "0", "--resume",
                    "--on-error", "skip"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("class folders (--classes-from-dirs) are not those of the interrupted run", r.stderr.decode())
        shutil.rmtree(os.path.join(tree, "Aardvark"))
        _, ds = fx.convert(self, [tree], "--classes-from-dirs", "--checkpoint-every", "0", "--resume",
                           "--on-error", "skip", out=out)
        self.assertTrue(ds.manifest.get("resumed"))
        self.assertEqual(sorted(ds.keys), sorted(k for k in self.by_key if k != "a2/img_3_0"))
        self.check(ds)

    def test_image_in_no_folder_is_a_bad_sample(self):
        tree = fx.write_tree(self.path("flat-tree"), [("cat/0.jpg", self.files["zebra/img_0_0.JPEG"]),
                                                      ("top.jpg", self.files["zebra/img_0_1.JPEG"])])
        p = fx.run(["convert", tree, "-o", self.path("flat-out"), "--classes-from-dirs"])
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("sample 'top'", err)
        self.assertIn("image member 'top.jpg' is in no folder, so it has no class", err)
        _, ds = fx.convert(self, [tree], "--classes-from-dirs", "--on-error", "skip")
        self.assertEqual(ds.keys, ["cat/0"])
        self.assertEqual([(e["sample"], e["code"]) for e in ds.manifest["skipped"]], [("top", "bad_sample")])
        self.assertEqual(json.loads(ds.meta["classes"]), ["cat"])
        self.assertEqual(ds.t["cls"].tolist(), [0])

    def test_usage_errors(self):
        for flags in (["--no-images"], []):
            inputs = [self.root] if flags else ["-"]
            r = fx.run(["convert", *inputs, "-o", self.path("usage-out"), "--classes-from-dirs", *flags], stdin=b"")
            self.assertEqual(r.returncode, 2, r.stderr.decode())
            self.assertIn("--classes-from-dirs", r.stderr.decode())


if __name__ == "__main__":
    unittest.main()
