#!/usr/bin/env bash
# Packs the Python reader into one folder that runs on a machine without this build's Debian
# packages (a training cluster, a GPU box): python/tarmac, libtarmac_c.so, and every shared
# library it needs except the C and C++ runtimes, which the target machine provides.
#
#   scripts/bundle-reader.sh OUTDIR      (after the build; OUTDIR/tarmac is the package)
#   PYTHONPATH=OUTDIR python3 -c "import tarmac; print(len(tarmac.Dataset('data/')))"
#
# libtarmac_c.so carries an RPATH of $ORIGIN/lib (DT_RPATH, which also covers the libraries'
# own dependencies), so the copies in OUTDIR/tarmac/lib are used before the system's. The
# target needs glibc >= 2.34 and the libstdc++ of GCC >= 12 (GLIBCXX_3.4.30); numpy for the
# package. Not bundled: libtarmac_opencv_codecs.so and OpenCV's imgcodecs (~160 MB): datasets
# stored as JPEG, WebP or raw never need them; for PNG datasets, install OpenCV there or copy
# the plugin with its dependencies and set TARMAC_OPENCV_CODECS.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:?usage: scripts/bundle-reader.sh OUTDIR}"
LIB="${TARMAC_LIB:-$ROOT/build/lib/read/libtarmac_c.so}"
[ -f "$LIB" ] || { echo "bundle-reader: $LIB not found: build first (scripts/test.sh)" >&2; exit 1; }

rm -rf "$OUT/tarmac"
mkdir -p "$OUT/tarmac/lib"
cp "$ROOT"/python/tarmac/*.py "$ROOT"/python/tarmac/py.typed "$OUT/tarmac/"
cp "$LIB" "$OUT/tarmac/libtarmac_c.so"
# Everything ldd resolves, but the runtimes every Linux machine has in its own version.
ldd "$LIB" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r dep; do
  case "$(basename "$dep")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*) ;;
    *) cp -L "$dep" "$OUT/tarmac/lib/" ;;
  esac
done
echo "bundle-reader: $OUT/tarmac: $(ls "$OUT/tarmac/lib" | wc -l) libraries, $(du -sh "$OUT/tarmac" | cut -f1)" >&2
