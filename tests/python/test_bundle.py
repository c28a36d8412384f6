"""scripts/bundle-reader.sh: the Python reader packed with its shared libraries runs from the
bundle alone, its libraries loaded from the bundle, not from the system. Needs TARMAC (the
converter) and TARMAC_LIB (the library to bundle) in the environment."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fixtures as fx  # noqa: E402

RUNTIMES = ("linux-vdso", "libc.so", "libm.so", "libpthread", "libdl.so", "librt.so", "ld-linux", "libstdc++",
            "libgcc_s", "libasan", "libubsan", "libtsan")


class BundleTest(unittest.TestCase):
    def test_bundled_reader_loads_its_own_libraries(self):
        tmp = tempfile.mkdtemp(prefix="tarmac-bundle-")
        try:
            out = os.path.join(tmp, "bundle")
            subprocess.run(["bash", os.path.join(ROOT, "scripts", "bundle-reader.sh"), out], check=True)
            lib = os.path.join(out, "tarmac", "libtarmac_c.so")
            ldd = subprocess.run(["ldd", lib], check=True, capture_output=True, text=True).stdout
            outside = [line.strip() for line in ldd.splitlines()
                       if not any(r in line for r in RUNTIMES) and os.path.join(out, "tarmac", "lib") not in line]
            self.assertEqual(outside, [], "libraries resolved outside the bundle")
            self.assertNotIn("not found", ldd)

            src = fx.write_tar(os.path.join(tmp, "a.tar"),
                               [("a.jpg", fx.jpg(fx.smooth_rgb(40, 30))), ("a.cls", b"7")])
            data = os.path.join(tmp, "data")
            subprocess.run([os.environ["TARMAC"], "convert", "-q", src, "-o", data], check=True,
                           stdout=subprocess.DEVNULL)
            code = ("import tarmac\n"
                    "ds = tarmac.Dataset(%r)\n"
                    "print(ds.decode(0).shape, int(ds[0]['cls']))\n"
                    "print([l.split()[-1] for l in open('/proc/self/maps') if 'libopencv_core' in l][0])\n" % data)
            env = {k: v for k, v in os.environ.items() if k not in ("TARMAC_LIB", "PYTHONPATH", "LD_LIBRARY_PATH")}
            env["PYTHONPATH"] = out
            p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            shape, where = p.stdout.splitlines()
            self.assertEqual(shape, "(30, 40, 3) 7")
            self.assertTrue(where.startswith(os.path.join(out, "tarmac", "lib") + "/"), where)
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    unittest.main()
