#!/usr/bin/python3
"""Writes the seed inputs of the fuzz_tar_grouping, fuzz_zip_directory, fuzz_image_decode, fuzz_png_region,
fuzz_npy_dense, fuzz_table, fuzz_dataset, fuzz_pickle and fuzz_table_npz corpora.

The seeds are small, valid (or nearly valid) examples of every format the target reads, so that
the fuzzer starts from deep inside each parser. Re-running rewrites only these seeds; inputs
saved from fuzzing runs (crashes, regressions) sit beside them and are kept.
The fuzz_dataset seeds are datasets made by the real converter: $TARMAC, else build/apps/tarmac.
"""
import io
import os
import pickle
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fixtures as fx  # noqa: E402


def save(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def tar_bytes(members, fmt=tarfile.PAX_FORMAT, mode="w", links=()):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode=mode, format=fmt) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        for name, target, kind in links:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = target
            t.addfile(info)
    return b.getvalue()


def archives():
    img = fx.jpg(fx.smooth_rgb(8, 8), quality=50)
    sample = [("a/0001.jpg", img), ("a/0001.json", b'{"id": 1}'), ("a/0002.jpg", img),
              ("a/0002.cls", b"3")]
    save("fuzz_tar_grouping", "pax.tar", tar_bytes(sample))
    save("fuzz_tar_grouping", "gnu_long_name.tar",
         tar_bytes([("d/" + "x" * 120 + ".txt", b"caption")], fmt=tarfile.GNU_FORMAT))
    save("fuzz_tar_grouping", "ustar.tar.gz", tar_bytes(sample, fmt=tarfile.USTAR_FORMAT, mode="w:gz"))
    # Images first, labels after: the grouping window has to hold samples back.
    apart = [m for m in sample if m[0].endswith(".jpg")] + [m for m in sample if not m[0].endswith(".jpg")]
    save("fuzz_tar_grouping", "not_adjacent.tar", tar_bytes(apart))
    save("fuzz_tar_grouping", "duplicate_member.tar", tar_bytes(sample[:2] + sample[:1]))
    save("fuzz_tar_grouping", "unsafe_and_links.tar",
         tar_bytes([("../up.jpg", img), ("/abs.json", b"{}"), (".hidden.jpg", img), ("noext", b"")],
                   links=[("l.jpg", "a/0001.jpg", tarfile.SYMTYPE), ("h.jpg", "a/0001.jpg", tarfile.LNKTYPE)]))
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("k/1.json", b'{"v": [1, 2]}')
        f.writestr(zipfile.ZipInfo("k/1.txt"), b"deflated " * 8, compress_type=zipfile.ZIP_DEFLATED)
    save("fuzz_tar_grouping", "deflate.zip", z.getvalue())
    # ZIP64 extra fields in the local headers, and data descriptors (written to a stream)
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as f:
        for name, data in sample[:3]:
            with f.open(zipfile.ZipInfo(name), "w", force_zip64=True) as m:
                m.write(data)
    save("fuzz_tar_grouping", "zip64.zip", z.getvalue())

    class Stream(io.RawIOBase):
        def __init__(self):
            self.b = bytearray()

        def writable(self):
            return True

        def write(self, b):
            self.b += b
            return len(b)

    z = Stream()
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as f:
        for name, data in sample[:3]:
            with f.open(zipfile.ZipInfo(name), "w") as m:
                m.write(data)
    save("fuzz_tar_grouping", "descriptors.zip", bytes(z.b))


def zip_directories():
    """fuzz_zip_directory: a byte for the size of the tail read first (1 + 64 * byte), then a zip:
    a tail that holds everything, one that cuts the central directory, one of a single byte."""
    entries = [("d/%03d-%s.json" % (i, "x" * 40), b"[%d]" % i) for i in range(40)]
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as f:
        for name, data in entries:
            f.writestr(zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0)), data)
        link = zipfile.ZipInfo("d/link.json", (2024, 1, 1, 0, 0, 0))
        link.create_system = 3
        link.external_attr = 0o120777 << 16
        f.writestr(link, b"d/000.json")
        f.comment = b"a comment"
    plain = z.getvalue()
    # the same zip with ZIP64 end records (APPNOTE 4.3.14-16), as a writer past 65535 entries makes
    at = plain.rfind(b"PK\x05\x06")
    _, _, _, _, n, cd_size, cd_offset, _ = struct.unpack_from("<IHHHHIIH", plain, at)
    end64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, cd_size, cd_offset)
    locator = struct.pack("<IIQI", 0x07064B50, 0, at, 1)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    zip64 = plain[:at] + end64 + locator + end
    save("fuzz_zip_directory", "whole_tail.zip", b"\xff" + plain)
    save("fuzz_zip_directory", "directory_cut.zip", b"\x08" + plain)
    save("fuzz_zip_directory", "end64_cut.zip", b"\x01" + zip64)
    save("fuzz_zip_directory", "one_byte_tail.zip", b"\x00" + zip64)


def images():
    rgb = fx.smooth_rgb(12, 9, seed=3)
    save("fuzz_image_decode", "rgb.jpg", fx.jpg(rgb, quality=60))
    save("fuzz_image_decode", "truncated.jpg", fx.jpg(fx.smooth_rgb(64, 48), quality=90)[:400])
    save("fuzz_image_decode", "rgb.png", fx.png(rgb))
    save("fuzz_image_decode", "grey16.png", fx.png(fx.smooth_u16(10, 7)))
    save("fuzz_image_decode", "rgba.png", fx.png(np.dstack([rgb, np.full(rgb.shape[:2], 200, np.uint8)])))
    for ext in (".webp", ".bmp", ".tiff"):
        ok, buf = cv2.imencode(ext, rgb)
        assert ok
        save("fuzz_image_decode", "rgb" + ext, buf.tobytes())
    # A JPEG with an EXIF APP1 segment saying "rotate 90" (orientation 6).
    tiff = b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", 1) + \
        struct.pack("<HHIHH", 0x0112, 3, 1, 6, 0) + struct.pack("<I", 0)
    app1 = b"Exif\x00\x00" + tiff
    jpeg = fx.jpg(rgb, quality=60)
    save("fuzz_image_decode", "exif_rotated.jpg",
         jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + jpeg[2:])


def png_region():
    """Tiny PNGs of each colour type: grey 1/8/16, RGB, RGBA, grey + alpha, palettes with tRNS."""
    from PIL import Image
    rgb = fx.smooth_rgb(9, 7, seed=5)
    grey = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)

    def pil(img, **kw):
        b = io.BytesIO()
        img.save(b, format="PNG", **kw)
        return b.getvalue()
    save("fuzz_png_region", "rgb8.png", fx.png(rgb))
    save("fuzz_png_region", "rgba8.png", fx.png(np.dstack([rgb, grey])))
    save("fuzz_png_region", "grey16.png", fx.png(fx.smooth_u16(6, 5)))
    save("fuzz_png_region", "rgb16.png", fx.png(rgb.astype(np.uint16) * 250))
    save("fuzz_png_region", "greyalpha8.png", pil(Image.fromarray(np.dstack([grey, grey]), "LA")))
    save("fuzz_png_region", "bilevel.png", pil(Image.fromarray(grey).convert("1")))
    p = Image.fromarray(rgb).quantize(4)
    save("fuzz_png_region", "palette2_trns.png", pil(p, transparency=b"\x00\x80"))
    save("fuzz_png_region", "palette8.png", pil(Image.fromarray(rgb).quantize(200)))


def npy_dense():
    """.npy dense maps as members (any dtype, byte order, Fortran order, channels)."""
    def npy(a):
        b = io.BytesIO()
        np.save(b, a, allow_pickle=False)
        return b.getvalue()
    rng = np.random.default_rng(5)
    depth = rng.uniform(0, 10, (6, 8)).astype(np.float32)
    depth[1, 2], depth[3, 3] = np.nan, np.inf
    save("fuzz_npy_dense", "f32_depth_nan.npy", npy(depth))
    save("fuzz_npy_dense", "i32_seg.npy", npy(rng.integers(-5, 5, (6, 8)).astype(np.int32)))
    save("fuzz_npy_dense", "u8_3ch.npy", npy(rng.integers(0, 255, (5, 4, 3)).astype(np.uint8)))
    save("fuzz_npy_dense", "u64_be.npy", npy(np.arange(12, dtype=">u8").reshape(3, 4)))
    save("fuzz_npy_dense", "f16_fortran.npy", npy(np.asfortranarray(np.ones((4, 3), np.float16))))
    save("fuzz_npy_dense", "bool.npy", npy(np.eye(4, dtype=bool)))
    save("fuzz_npy_dense", "i64_1d.npy", npy(np.arange(5, dtype=np.int64)))


def pack_dataset(d):
    """fuzz_dataset's input format: [u32le len][labels.safetensors], then [u32le len][shard]..."""
    with open(os.path.join(d, "labels.safetensors"), "rb") as f:
        parts = [f.read()]
    shards = sorted(n for n in os.listdir(d) if n.startswith("shard-") and n.endswith(".tar"))
    # The fuzz target writes part k as shard-{k:06d}.tar: the converter's own names.
    assert shards == [f"shard-{k:06d}.tar" for k in range(len(shards))], shards
    for n in shards:
        with open(os.path.join(d, n), "rb") as f:
            parts.append(f.read())
    return b"".join(struct.pack("<I", len(p)) + p for p in parts)


def datasets():
    tarmac = os.environ.get("TARMAC") or os.path.join(HERE, "..", "..", "build", "apps", "tarmac")
    rgb = [fx.smooth_rgb(12, 10, seed=k) for k in range(3)]
    labelled = []
    for k in range(3):
        labelled += [(f"s/{k}.png", fx.png(rgb[k])),
                     (f"s/{k}.json", fx.js({"id": k, "vec": [k, 0.5], "name": f"n{k}",
                                            "pts": [[k, r] for r in range(k + 1)]})),
                     (f"s/{k}.depth.png", fx.png(fx.smooth_u16(12, 10, seed=k)))]
    cases = {
        "jpg_two_shards": (labelled, ["--size", "8", "--dense", "depth.png", "--shard-size", "1K"]),
        "png_keep": ([m for m in labelled if not m[0].endswith("depth.png")], ["--format", "keep"]),
        "raw": ([m for m in labelled if not m[0].endswith("depth.png")],
                ["--format", "raw", "--size", "6x4", "--resize", "exact"]),
        "webp": ([m for m in labelled if m[0].endswith(".png") and "depth" not in m[0]],
                 ["--format", "webp", "--size", "8"]),
        "no_images": ([m for m in labelled if m[0].endswith(".json")], ["--no-images"]),
        "npy_dense": ([m for m in labelled if "depth" not in m[0]] + [
            (f"s/{k}.seg.npy", fx.npy(np.arange(120, dtype=np.int64).reshape(10, 12) * k))
            for k in range(3)] + [
            (f"s/{k}.flow.npy", fx.npy(np.full((10, 12, 2), k / 3, np.float32))) for k in range(3)],
            ["--size", "8", "--dense", "seg.npy", "flow.npy"]),
        # grey and colour images stored as they are (1 and 3 channels)
        "grey_keep": ([(f"g/{k}.png", fx.png(rgb[k][:, :, 0] if k % 2 == 0 else rgb[k])) for k in range(3)],
                      ["--channels", "keep", "--format", "png", "--size", "8"]),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, (members, flags) in cases.items():
            src, out = os.path.join(tmp, name + ".tar"), os.path.join(tmp, name)
            with open(src, "wb") as f:
                f.write(tar_bytes(members))
            subprocess.run([tarmac, "convert", "-q", src, "-o", out, *flags], check=True,
                           stdout=subprocess.DEVNULL)
            data = pack_dataset(out)
            assert len(data) < 50_000, (name, len(data))
            save("fuzz_dataset", name, data)
            # The annotation file alone: a whole tarmac layout for fuzz_safetensors to mutate.
            with open(os.path.join(out, "labels.safetensors"), "rb") as f:
                save("fuzz_safetensors", "layout_" + name, f.read())


def pickles():
    """Pickles as numpy and mmhuman3d write them (protocols 2-5), and HumanData npz tables."""
    value = {
        "pose": np.arange(6, dtype=np.float32).reshape(2, 3),
        "fortran": np.asfortranarray(np.arange(6, dtype=">f8").reshape(2, 3)),
        "names": np.array(["male", "female"]),
        "kid": np.array([True, False]),
        "scalars": [np.float32(1.5), np.int64(-2), np.bool_(True)],
        "list": ["a", "a", 1, 2.5, None, (1, 2)],
        "bytes": b"\x00\xffab",
        "objects": np.array([{"k": 1}, "x"], dtype=object),
    }
    for protocol in (2, 3, 4, 5):
        save("fuzz_pickle", f"protocol{protocol}.pkl", pickle.dumps(value, protocol=protocol))
    save("fuzz_pickle", "object_array.pkl", pickle.dumps(np.array(value, dtype=object), protocol=3))
    n = 3
    members = {
        "image_path": np.array([f"images/{i}.jpg" for i in range(n)]),
        "bbox_xywh": np.arange(n * 5, dtype=np.float64).reshape(n, 5),
        "keypoints2d": np.zeros((n, 4, 3)),
        "keypoints2d_mask": np.ones(4, dtype=np.uint8),
        "config": np.array("agora"),
        "__data_len__": np.array(n),
        "__key_strict__": np.array(False),
        "smplx": np.array({"betas": np.zeros((n, 2), np.float32),
                           "body_pose": np.ones((n, 2, 3), np.float32)}, dtype=object),
        "meta": np.array({"gender": ["male", "female", "male"],
                          "age": np.array(["kid", "adult", "adult"]),
                          "kid": [True, False, False], "occlusion": [0.0, 0.5, 1.0]},
                         dtype=object),
    }
    for name, kw in (("humandata.npz", members),
                     ("no_pickles.npz", {k: v for k, v in members.items()
                                         if k not in ("smplx", "meta")})):
        b = io.BytesIO()
        np.savez_compressed(b, **kw)
        save("fuzz_table_npz", name, b.getvalue())
    b = io.BytesIO()
    np.savez(b, **members)
    save("fuzz_table_npz", "stored.npz", b.getvalue())


def tables():
    """fuzz_table: the first byte picks the reader (0 COCO, 1 JSON Lines, 2 CSV, 3 split list;
    0x10 named list columns, 0x20 the image column 'file')."""
    import json
    coco = {"info": {"year": 2017}, "licenses": [{"id": 1}],
            "images": [{"id": 3, "file_name": "a.jpg", "width": 5, "height": 4, "file": "b.jpg"},
                       {"id": 7, "file_name": "c.jpg", "width": 6, "height": 2}],
            "annotations": [
                {"id": 1, "image_id": 3, "bbox": [0, 1, 2.5, 3], "keypoints": [1, 2, 2, 0, 0, 0],
                 "num_keypoints": 1, "area": 7.5, "iscrowd": 0, "category_id": 1,
                 "segmentation": [[0, 1, 2, 1.5, 2, 3]], "extra": {"a": [1, 2]}},
                {"id": 2, "image_id": 7, "bbox": None, "keypoints": [3, 4, 1, 5, 6, 2],
                 "iscrowd": 1, "segmentation": {"counts": "P1Q", "size": [2, 6]}}],
            "categories": [{"id": 1, "name": "person", "keypoints": ["a", "b"], "skeleton": [[1, 2]]}]}
    save("fuzz_table", "coco.json", b"\x00" + json.dumps(coco).encode())
    save("fuzz_table", "coco_file.json", b"\x20" + json.dumps(coco, indent=1).encode())
    jsonl = (b'{"image_path": "a.jpg", "label": 3, "box": [1, 2, 3, 4], "meta": {"g": "f"}}\n'
             b'\n{"image_path": "b.jpg", "label": null, "box": [[1, 2], [3, 4]], "x": [1, "a"]}\r\n'
             b'{"image_path": "c.jpg", "file": "d.jpg", "label": 2.5, "box": [5, 6, 7, 8]}\n')
    save("fuzz_table", "rows.jsonl", b"\x01" + jsonl)
    save("fuzz_table", "rows_file.jsonl", b"\x21" + jsonl)
    csv = (b'\xef\xbb\xbfimage_path,label,score,caption,file\r\n'
           b'000123.jpg,3,0.5,"a cat, sitting",x.png\r\n'
           b'b.jpg,-4,2,"she said ""hi""\nand left",y.png\r\n'
           b'"c,1.jpg",,1e-3,plain,z.png\r\n')
    save("fuzz_table", "table.csv", b"\x02" + csv)
    save("fuzz_table", "table_file.csv", b"\x22" + csv)
    lst = (b"# hypersim\ntrain/ai_001_001/rgb_cam_00_fr0000.png train/ai_001_001/depth_plane_cam_00_fr0000.png\n"
           b"\n  train/ai_001_001/rgb_cam_00_fr0001.png\t train/ai_001_001/depth_plane_cam_00_fr0001.png \r\n")
    save("fuzz_table", "filename_list.txt", b"\x03" + lst)
    save("fuzz_table", "filename_list_named.txt", b"\x13" + lst)


if __name__ == "__main__":
    tables()
    archives()
    zip_directories()
    images()
    png_region()
    npy_dense()
    datasets()
    pickles()
