#!/usr/bin/python3
"""Writes the tiny zips that tests/source/zip_test.cpp reads through its central directory
(over a pread-like and a Range-GET-like "read at" function), with Python's zipfile.

Run: /usr/bin/python3 make_fixtures.py (from this directory). It prints zipfile's infolist
(header_offset, compress_size, file_size, CRC, kind) for each; the test repeats those values as
literals: change both together.
"""
import io
import zipfile

DATE = (2024, 5, 6, 7, 8, 10)


class Unseekable(io.RawIOBase):
    """A write-only stream: zipfile then writes data descriptors (flag bit 3) after members."""

    def __init__(self, f):
        self.f = f

    def writable(self):
        return True

    def write(self, b):
        return self.f.write(b)


def write(path, seekable):
    with open(path, "wb") as raw:
        with zipfile.ZipFile(raw if seekable else Unseekable(raw), "w") as z:
            z.comment = b"tarmac zip fixture " * 16
            for name, data, method in (("a/0.json", b'{"id": 0, "note": "deflated"}' * 4, zipfile.ZIP_DEFLATED),
                                       ("a/0.png", bytes(range(256)) * 2, zipfile.ZIP_STORED),
                                       ("a/", b"", zipfile.ZIP_STORED)):
                info = zipfile.ZipInfo(name, DATE)
                info.compress_type = method
                if name.endswith("/"):
                    info.external_attr = 0o40755 << 16 | 0x10
                with z.open(info, "w") as f:
                    f.write(data)
            if seekable:  # a symbolic link: only the central directory's external attributes say so
                info = zipfile.ZipInfo("a/1.png", DATE)
                info.create_system = 3
                info.external_attr = 0o120777 << 16
                z.writestr(info, b"0.png")


for path, seekable in (("mixed.zip", True), ("descriptors.zip", False)):
    write(path, seekable)
    with zipfile.ZipFile(path) as z:
        print(path)
        for i in z.infolist():
            print("  {%r, %d, %d, %d, 0x%08x, %d, 0%o}," % (i.filename, i.header_offset, i.compress_size,
                                                           i.file_size, i.CRC, i.compress_type,
                                                           i.external_attr >> 16))
