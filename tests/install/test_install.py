"""An installed tarmac works on its own, wherever it is moved: `cmake --install` into a
temporary prefix, the tree moved elsewhere, then the installed `tarmac` converts images to PNG
(encoding PNG needs the codec plugin, found relative to the binary), the installed Python package
reads the result from another directory, and programs built against the installed CMake
package and pkg-config files read it. `cpack -G DEB` builds the .deb, whose contents and
dependencies are checked and which works unpacked (dpkg -x) in another place.

Nothing of the build tree may be what makes it work: installed binaries never look for the
plugin in the build folder (the test removes the installed plugin and checks that the error
names only installed places), and the environment variables that point at the build tree
are removed. Needs TARMAC_BUILD_DIR (the build folder) in the environment."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fixtures as fx  # noqa: E402

BUILD = os.path.realpath(os.environ.get("TARMAC_BUILD_DIR") or os.path.join(ROOT, "build"))
PLUGIN = "libtarmac_opencv_codecs.so"
HEADERS = ["read/dataset.h", "read/augment.h", "read/batch_loader.h", "read/partition.h", "read/c_api.h", "read/geometry.h", "common/dtype.h",
           "common/error.h", "format/field_spec.h", "format/field_geometry.h", "format/names.h"]


def clean_env(**extra):
    """The environment without anything that points at the build tree."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TARMAC", "TARMAC_LIB", "TARMAC_OPENCV_CODECS", "PYTHONPATH", "LD_LIBRARY_PATH",
                        "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH")}
    env.update(extra)
    return env


def run(cmd, cwd, **extra):
    p = subprocess.run(cmd, cwd=cwd, env=clean_env(**extra), capture_output=True, text=True, timeout=300)
    return p


def read(path, mode="r"):
    with open(path, mode, encoding=None if "b" in mode else "utf-8") as f:
        return f.read()


def project_version():
    text = read(os.path.join(ROOT, "CMakeLists.txt"))
    return re.search(r"project\(tarmac VERSION ([0-9.]+)", text).group(1)


class InstalledTreeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-install-")
        staged = os.path.join(cls.tmp, "staged")
        p = subprocess.run(["cmake", "--install", BUILD, "--prefix", staged], capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr
        # Moved, as a relocated or copied installation is: nothing may remember `staged`.
        cls.prefix = os.path.join(cls.tmp, "moved", "opt", "tarmac")
        os.makedirs(os.path.dirname(cls.prefix))
        shutil.move(staged, cls.prefix)
        cls.work = os.path.join(cls.tmp, "work")  # the working directory of every run
        os.makedirs(cls.work)
        rgb = [fx.smooth_rgb(48, 36, seed=i) for i in range(4)]
        members = []
        for i, img in enumerate(rgb):
            members += [("s%d.png" % i, fx.png(img)), ("s%d.json" % i, fx.js({"id": i}))]
        cls.png_tar = fx.write_tar(os.path.join(cls.tmp, "png.tar"), members)
        cls.tarmac = os.path.join(cls.prefix, "bin", "tarmac")
        # A PNG dataset, made by the installed binary: encoding PNG needs the plugin (decoding
        # one does not: png_region.h).
        cls.data = os.path.join(cls.tmp, "data")
        p = run([cls.tarmac, "convert", "-q", cls.png_tar, "-o", cls.data, "--crop", "center", "--size", "32",
                 "--format", "png"], cls.work)
        cls.convert_result = p

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def libdir(self):
        """The installed library folder (lib/ or lib/<multiarch>/, as GNUInstallDirs chose)."""
        found = [os.path.dirname(os.path.join(d, f)) for d, _, files in os.walk(self.prefix)
                 for f in files if f.startswith("libtarmac_c.so")]
        self.assertTrue(found, "libtarmac_c.so not installed")
        return found[0]

    def test_layout(self):
        lib = self.libdir()
        for rel in ["bin/tarmac"] + ["include/tarmac/" + h for h in HEADERS]:
            self.assertTrue(os.path.isfile(os.path.join(self.prefix, rel)), rel)
        for name in ["libtarmac_c.so", "libtarmac_reader.so", "tarmac/" + PLUGIN, "cmake/tarmac/tarmacConfig.cmake",
                     "cmake/tarmac/tarmacConfigVersion.cmake", "cmake/tarmac/tarmacTargets.cmake",
                     "pkgconfig/tarmac.pc", "pkgconfig/tarmac-c.pc"]:
            self.assertTrue(os.path.exists(os.path.join(lib, name)), name)
        pkg = os.path.join(self.prefix, "lib", "python3", "dist-packages", "tarmac")
        # every module of the package, its type hints' marker, and the place of the library
        modules = [os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "python", "tarmac", "*.py"))]
        self.assertIn("derive.py", modules)
        for name in modules + ["py.typed", "_install.py"]:
            self.assertTrue(os.path.isfile(os.path.join(pkg, name)), name)
        # No installed file names the build tree or the place it was installed to.
        for d, _, files in os.walk(self.prefix):
            for f in files:
                path = os.path.join(d, f)
                if os.path.islink(path):
                    continue
                data = read(path, "rb")
                self.assertNotIn(os.path.join(self.tmp, "staged").encode(), data, path)
                if not f.endswith(".so") and ".so." not in f and f != "tarmac":
                    self.assertNotIn(BUILD.encode(), data, path)

    def test_installed_tarmac_converts_png_with_the_installed_plugin(self):
        p = self.convert_result
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run([self.tarmac, "verify", self.data, "--decode"], self.work)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p = run([self.tarmac, "--version"], self.work)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(project_version(), p.stdout)

    def test_without_the_installed_plugin_only_installed_places_are_tried(self):
        """The build tree's plugin is never a fallback for an installed binary."""
        plugin = os.path.join(self.libdir(), "tarmac", PLUGIN)
        aside = plugin + ".aside"
        os.rename(plugin, aside)
        try:
            # PNG output: the encoder needs the plugin (a PNG is decoded without it, png_region.h).
            p = run([self.tarmac, "convert", self.png_tar, "-o", os.path.join(self.tmp, "no-plugin"), "--crop",
                     "center", "--size", "32", "--format", "png"], self.work)
        finally:
            os.rename(aside, plugin)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("cannot load " + PLUGIN, p.stderr)
        self.assertIn(plugin, p.stderr)
        self.assertNotIn(BUILD, p.stderr)

    def test_installed_python_package_reads_from_another_directory(self):
        code = ("import tarmac, os\n"
                "ds = tarmac.Dataset(%r)\n"
                "s = ds[0]\n"
                "print(len(ds), s['__key__'], int(s['id']), ds.decode(0).shape)\n"
                "print(tarmac.library.load_library()._name)\n" % self.data)
        pkgs = os.path.join(self.prefix, "lib", "python3", "dist-packages")
        p = run([sys.executable, "-c", code], self.work, PYTHONPATH=pkgs)
        self.assertEqual(p.returncode, 0, p.stderr)
        summary, lib = p.stdout.splitlines()
        self.assertEqual(summary, "4 s0 0 (32, 32, 3)")
        self.assertEqual(os.path.dirname(os.path.realpath(lib)), os.path.realpath(self.libdir()))

    def test_pip_installed_package_finds_the_installed_library(self):
        """pip install ./python into a venv (offline: Debian's setuptools and numpy); the package
        finds the library through the `tarmac` on PATH, without TARMAC_LIB."""
        venv = os.path.join(self.tmp, "venv")
        src = os.path.join(self.tmp, "python-src")  # pip builds in the source folder: a copy
        shutil.copytree(os.path.join(ROOT, "python"), src, ignore=shutil.ignore_patterns("__pycache__", "build",
                                                                                         "*.egg-info"))
        p = run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], self.work)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run([os.path.join(venv, "bin", "pip"), "install", "-q", "--no-build-isolation", "--no-index", src],
                self.work)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        code = ("import tarmac\n"
                "print(tarmac.__file__)\n"
                "print(tarmac.library.load_library()._name)\n"
                "print(len(tarmac.Dataset(%r)))\n" % self.data)
        path = os.path.join(self.prefix, "bin") + os.pathsep + os.environ.get("PATH", "")
        p = run([os.path.join(venv, "bin", "python"), "-c", code], self.work, PATH=path)
        self.assertEqual(p.returncode, 0, p.stderr)
        package, lib, n = p.stdout.splitlines()
        self.assertTrue(package.startswith(venv + os.sep), package)
        for name in [os.path.basename(f) for f in glob.glob(os.path.join(src, "tarmac", "*.py"))] + ["py.typed"]:
            self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(package), name)), name)
        self.assertEqual(os.path.dirname(os.path.realpath(lib)), os.path.realpath(self.libdir()))
        self.assertEqual(n, "4")

    def test_a_program_built_with_find_package(self):
        build = os.path.join(self.tmp, "consumer-cmake")
        p = run(["cmake", "-S", os.path.join(HERE, "consumer"), "-B", build, "-G", "Ninja",
                 "-DCMAKE_PREFIX_PATH=" + self.prefix], self.work)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p = run(["cmake", "--build", build], self.work)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p = run([os.path.join(build, "read_dataset"), self.data], self.work)
        self.assertEqual((p.returncode, p.stdout), (0, "4 s0 32x32x3 2\n"), p.stderr)
        p = run([os.path.join(build, "read_dataset_c"), self.data], self.work)
        self.assertEqual((p.returncode, p.stdout), (0, "4 s0 32x32\n"), p.stderr)
        p = run([os.path.join(build, "read_dataset"), os.path.join(self.tmp, "nothing")], self.work)
        self.assertEqual(p.returncode, 1, p.stdout)  # the library's FatalError, caught by type
        self.assertIn("read_dataset: ", p.stderr)
        self.assertNotIn("unexpected", p.stderr)

    def test_a_program_built_with_pkg_config(self):
        pc = os.path.join(self.libdir(), "pkgconfig")
        p = run(["pkg-config", "--modversion", "tarmac", "tarmac-c"], self.work, PKG_CONFIG_PATH=pc)
        self.assertEqual(p.stdout.split(), [project_version()] * 2, p.stderr)
        flags = {}
        for pkg in ("tarmac", "tarmac-c"):
            p = run(["pkg-config", "--cflags", "--libs", pkg], self.work, PKG_CONFIG_PATH=pc)
            self.assertEqual(p.returncode, 0, p.stderr)
            flags[pkg] = p.stdout.split()
        exe = os.path.join(self.tmp, "read_dataset_pc")
        rpath = "-Wl,-rpath," + self.libdir()
        p = run(["g++", "-std=c++20", os.path.join(HERE, "consumer", "read_dataset.cpp"), "-o", exe,
                 *flags["tarmac"], rpath], self.work)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run([exe, self.data], self.work)
        self.assertEqual((p.returncode, p.stdout), (0, "4 s0 32x32x3 2\n"), p.stderr)
        exe_c = os.path.join(self.tmp, "read_dataset_c_pc")
        p = run(["gcc", os.path.join(HERE, "consumer", "read_dataset_c.c"), "-o", exe_c, *flags["tarmac-c"], rpath],
                self.work)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run([exe_c, self.data], self.work)
        self.assertEqual((p.returncode, p.stdout), (0, "4 s0 32x32\n"), p.stderr)

    def test_python_package_version_is_the_project_version(self):
        text = read(os.path.join(ROOT, "python", "pyproject.toml"))
        self.assertEqual(re.search(r'^version = "([0-9.]+)"', text, re.M).group(1), project_version())


class DebianPackageTest(unittest.TestCase):
    """cpack -G DEB: the paths a Debian 12 system expects, its dependencies, and an unpacked copy
    that works (dpkg -x into a folder, not installed on this machine)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tarmac-deb-")
        self.addCleanup(shutil.rmtree, self.tmp)

    def test_deb(self):
        out = os.path.join(self.tmp, "pkg")
        p = subprocess.run(["cpack", "-G", "DEB", "--config", os.path.join(BUILD, "CPackConfig.cmake"), "-B", out],
                           cwd=self.tmp, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        debs = [f for f in os.listdir(out) if f.endswith(".deb")]
        self.assertEqual(len(debs), 1, os.listdir(out))
        deb = os.path.join(out, debs[0])
        self.assertRegex(debs[0], r"^tarmac_%s_amd64\.deb$" % re.escape(project_version()))

        listing = subprocess.run(["dpkg-deb", "-c", deb], check=True, capture_output=True, text=True).stdout
        paths = {line.split()[5].lstrip(".") for line in listing.splitlines()}
        lib = os.path.dirname(next(p for p in paths if p.endswith("/libtarmac_c.so")))  # lib/ or lib/<multiarch>/
        for path in ["/usr/bin/tarmac", lib + "/libtarmac_c.so", lib + "/libtarmac_reader.so",
                     lib + "/tarmac/" + PLUGIN, lib + "/cmake/tarmac/tarmacConfig.cmake", lib + "/pkgconfig/tarmac.pc",
                     "/usr/lib/python3/dist-packages/tarmac/__init__.py",
                     "/usr/lib/python3/dist-packages/tarmac/_library.py",
                     "/usr/lib/python3/dist-packages/tarmac/py.typed",
                     "/usr/lib/python3/dist-packages/tarmac/_install.py"] + ["/usr/include/tarmac/" + h
                                                                          for h in HEADERS]:
            self.assertIn(path, paths)

        info = subprocess.run(["dpkg-deb", "-f", deb, "Depends"], check=True, capture_output=True, text=True).stdout
        depends = {d.strip().split()[0] for d in info.split(",")}
        # The CLI's and the readers' libraries (from dpkg-shlibdeps), the plugin's OpenCV and
        # the Python package's interpreter and numpy.
        for pkg in ["libc6", "libstdc++6", "libarchive13", "libturbojpeg0", "libwebp7", "libisal2", "libdeflate0", "libxxhash0",
                    "libopencv-core406", "libopencv-imgproc406", "libopencv-imgcodecs406", "python3", "python3-numpy"]:
            self.assertIn(pkg, depends, info)

        # Unpacked elsewhere: the CLI converts PNG and the Python package, with only its own
        # folder on the path, finds the library next to it in that tree.
        root = os.path.join(self.tmp, "root")
        subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
        data = os.path.join(self.tmp, "data")
        png_tar = fx.write_tar(os.path.join(self.tmp, "png.tar"),
                               [("a.png", fx.png(fx.smooth_rgb(40, 30))), ("a.cls", b"7")])
        p = run([root + "/usr/bin/tarmac", "convert", "-q", png_tar, "-o", data, "--format", "png"], self.tmp)
        self.assertEqual(p.returncode, 0, p.stderr)
        code = "import tarmac\nds = tarmac.Dataset(%r)\nprint(ds.decode(0).shape, int(ds[0]['cls']))\n" % data
        p = run([sys.executable, "-c", code], self.tmp, PYTHONPATH=root + "/usr/lib/python3/dist-packages")
        self.assertEqual((p.returncode, p.stdout), (0, "(30, 40, 3) 7\n"), p.stderr)


if __name__ == "__main__":
    unittest.main()
