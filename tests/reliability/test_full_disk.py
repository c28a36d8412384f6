"""Full disk: converting onto a small tmpfs that cannot hold the dataset fails with exit code 1,
a message naming the file, the byte count and "no space left on device" (also when the file
system reports the full disk as an I/O error, as NFS and FUSE may), and leaves nothing
that looks complete (no labels.safetensors). A run that failed before its first checkpoint
leaves nothing at all (no .tarmac-partial/, no used space); one that had checkpointed keeps its
checkpoint, and once space is freed, --resume finishes it with the same bytes as an
uninterrupted run.

Needs root to mount the tmpfs; skipped otherwise.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fixtures as fx  # noqa: E402

DISK = 2 * 1024 * 1024  # the tmpfs; every dataset below needs about three times as much

# write(2) and fsync(2) that say EIO where the file system said ENOSPC, as NFS and FUSE may.
EIO_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <unistd.h>
static int eio(int r) { if (r < 0 && errno == ENOSPC) errno = EIO; return r; }
ssize_t write(int fd, const void* buf, size_t n) {
  static ssize_t (*real)(int, const void*, size_t);
  if (!real) real = (ssize_t (*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  ssize_t r = real(fd, buf, n);
  if (r < 0 && errno == ENOSPC) errno = EIO;
  return r;
}
int fsync(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  return eio(real(fd));
}
int fdatasync(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  return eio(real(fd));
}
"""


def noise_jpg(seed):
    """A 256x256 JPEG of noise: ~100 KB that no quality setting makes much smaller."""
    rgb = np.random.default_rng(seed).integers(0, 256, (256, 256, 3), dtype=np.uint8)
    return fx.jpg(rgb, quality=95)


class FullDiskTest(fx.TmpCase):
    @classmethod
    def build(cls):
        members = []
        for i in range(60):
            members.append(("k/%03d.jpg" % i, noise_jpg(i)))
            members.append(("k/%03d.json" % i, fx.js({"id": i})))
        cls.images = fx.write_tar(os.path.join(cls.tmp, "images.tar"), members)
        # Labels only: 48 KB of float64 a sample, so the column spill files fill the disk.
        labels = [("k/%03d.npy" % i, fx.npy(np.full((6000,), i, np.float64))) for i in range(120)]
        cls.labels = fx.write_tar(os.path.join(cls.tmp, "labels.tar"), labels)

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("mounting a tmpfs needs root")
        self.mnt = tempfile.mkdtemp(dir=self.tmp)
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % DISK, "tmpfs", self.mnt],
                           capture_output=True)
        if p.returncode != 0:
            self.skipTest("cannot mount a tmpfs: " + p.stderr.decode(errors="replace").strip())
        self.addCleanup(subprocess.run, ["umount", "-l", self.mnt], check=False)

    def convert_onto_full_disk(self, archive, *flags):
        out = os.path.join(self.mnt, "out")
        p = fx.run(["convert", archive, "-o", out, *flags])
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("no space left on device", err)
        # The file that could not be written, inside the output directory, and how much.
        self.assertRegex(err, r"'%s/[^']+'" % re.escape(out))
        self.assertRegex(err, r"\b\d+ bytes\b")
        left = os.listdir(out) if os.path.isdir(out) else []
        self.assertNotIn("labels.safetensors", left)
        self.assertNotIn("manifest.json", left)
        self.assertNotIn(".tarmac-partial", left)
        self.assertEqual([n for n in left if n.startswith("shard-")], [])
        # Nothing of the failed run is left taking space either.
        st = os.statvfs(self.mnt)
        self.assertEqual(st.f_bfree, st.f_blocks, "the failed run left files on the disk")
        return err

    def test_image_shards_fill_the_disk(self):
        err = self.convert_onto_full_disk(self.images, "--format", "keep")
        self.assertIn("shard-", err)

    def test_label_columns_fill_the_disk(self):
        self.convert_onto_full_disk(self.labels, "--no-images")

    def test_checkpoint_survives_and_resume_completes_once_space_is_freed(self):
        flags = ["--format", "keep", "--shard-size", "256K"]  # a shard (a checkpoint) every ~3 samples
        ref = os.path.join(self.tmp, "ref-small-shards")
        if not os.path.exists(ref):
            p = fx.run(["convert", self.images, "-o", ref, *flags])
            self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        out = os.path.join(self.mnt, "out")
        p = fx.run(["convert", self.images, "-o", out, *flags])
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("no space left on device", err)
        self.assertNotIn("labels.safetensors", os.listdir(out))
        with open(os.path.join(out, ".tarmac-partial", "checkpoint.json")) as f:
            kept = json.load(f)["writer"]["samples"]
        self.assertGreater(kept, 0)
        self.assertIn("%d converted sample(s) are kept" % kept, err)
        self.assertIn("--resume", err)
        # Space freed: the tmpfs grown, as a user would delete other files.
        subprocess.run(["mount", "-o", "remount,size=%d" % (16 * DISK), self.mnt], check=True)
        p = fx.run(["convert", self.images, "-o", out, *flags, "--resume"])
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        names = sorted(n for n in os.listdir(ref) if n == "labels.safetensors" or n.startswith("shard-"))
        self.assertEqual(sorted(n for n in os.listdir(out) if n == "labels.safetensors" or n.startswith("shard-")),
                         names)
        for n in names:
            with open(os.path.join(out, n), "rb") as a, open(os.path.join(ref, n), "rb") as b:
                self.assertEqual(a.read(), b.read(), n)
        with open(os.path.join(out, "manifest.json")) as f:
            self.assertEqual(json.load(f)["resumed"]["samples"], kept)

    def test_a_full_disk_reported_as_an_io_error_says_no_space(self):
        """Issue #25, 16b: NFS and FUSE file systems may report a full disk as EIO (at write,
        fsync or close). A preloaded shim turns the tmpfs's ENOSPC into EIO; the message must
        still say the disk is full, not "Input/output error"."""
        shim_c = os.path.join(self.tmp, "eio_shim.c")
        shim = os.path.join(self.tmp, "eio_shim.so")
        if not os.path.exists(shim):
            with open(shim_c, "w") as f:
                f.write(EIO_SHIM)
            p = subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", shim, shim_c, "-ldl"],
                               capture_output=True)
            if p.returncode != 0:
                self.skipTest("cannot build the shim: " + p.stderr.decode(errors="replace"))
        out = os.path.join(self.mnt, "out")
        # An ASan build (scripts/ci-sanitize.sh) wants its runtime first; the shim's calls go on
        # to its interceptors all the same.
        asan = os.environ.get("ASAN_OPTIONS", "")
        env = dict(os.environ, LD_PRELOAD=shim,
                   ASAN_OPTIONS=(asan + ":" if asan else "") + "verify_asan_link_order=0")
        p = subprocess.run([fx.TARMAC, "convert", self.images, "-o", out, "--format", "keep"],
                           capture_output=True, env=env, timeout=120)
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("reported an input/output error", err)  # the shim did its work
        self.assertIn("no space left on device", err)
        self.assertRegex(err, r"'%s/[^']+'" % re.escape(out))
        self.assertNotIn("labels.safetensors", os.listdir(out) if os.path.isdir(out) else [])

    def test_fits_after_the_disk_is_freed(self):
        """The same conversion on a large enough disk: the failure above was the disk's."""
        subprocess.run(["mount", "-o", "remount,size=%d" % (16 * DISK), self.mnt], check=True)
        out = os.path.join(self.mnt, "out")
        p = fx.run(["convert", self.images, "-o", out, "--format", "keep"])
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assertTrue(os.path.exists(os.path.join(out, "labels.safetensors")))


if __name__ == "__main__":
    unittest.main()
