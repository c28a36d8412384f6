#!/bin/bash
# PNG frames at speed (#28 items 1, 2): one tarmac binary against another (main's build, say),
# 3 interleaved runs each, on the same threads, outputs compared byte for byte.
#   - 200 1920x1080 photo-like PNG frames (agora_table.py's texture): a box in the middle
#     (rows to 85 %), a box near the top, a centre crop (every row), all to 224x224 JPEG;
#   - 200 frames x 8 person boxes through --table (agora_table.py's data at 1080p and 720p);
#   - the 200 720p frames written by PIL (Paeth-filtered rows), centre crop;
#   - 200 Hypersim-like pairs, 1024x768 RGB PNG + 16-bit depth PNG (--dense depth.png).
# usage: scripts/bench/png_frames.sh REF_TARMAC NEW_TARMAC [WORKDIR]   env: THREADS=2
# Prints wall, user and sys seconds per run (user time is the steadier figure on a shared VM).
set -euo pipefail
REF=$(realpath "$1") NEW=$(realpath "$2") WORK=${3:-/tmp/tarmac-bench-png}
THREADS=${THREADS:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$WORK" && cd "$WORK"
[ -f frames.tar ] || /usr/bin/python3 - <<'PY'
import io, tarfile, cv2, numpy as np
W, H = 1920, 1080
def add(t, name, b):
    ti = tarfile.TarInfo(name); ti.size = len(b); t.addfile(ti, io.BytesIO(b))
def frame(i, w, h, cells):
    rng = np.random.default_rng(i)
    base = cv2.resize(rng.integers(0, 256, cells + (3,), dtype=np.uint8), (w, h), interpolation=cv2.INTER_CUBIC)
    return cv2.add(base, rng.integers(0, 12, (h, w, 3), dtype=np.uint8))
with tarfile.open("frames.tar", "w") as t:
    for i in range(200):
        add(t, "f%05d.png" % i, cv2.imencode(".png", frame(i, W, H, (45, 80)))[1].tobytes())
with tarfile.open("hyper.tar", "w") as t:
    for i in range(200):
        y, x = np.mgrid[0:768, 0:1024].astype(np.float64)
        d = (2000 + 9 * x + 13 * y + 800 * np.sin(x / 40 + i) * np.cos(y / 30)).astype(np.uint16)
        add(t, "h%05d.png" % i, cv2.imencode(".png", frame(i, 1024, 768, (24, 32)))[1].tobytes())
        add(t, "h%05d.depth.png" % i, cv2.imencode(".png", d)[1].tobytes())
PY
[ -d agora ] || FRAMES=200 PERSONS=8 /usr/bin/python3 -c "
import sys; sys.path.insert(0, '$HERE'); import agora_table as a
a.W, a.H = 1920, 1080; a.make('$WORK/agora')"
[ -d agora720 ] || FRAMES=200 PERSONS=8 /usr/bin/python3 -c "
import sys; sys.path.insert(0, '$HERE'); import agora_table as a
a.W, a.H = 1280, 720; a.make('$WORK/agora720')"
# The 720p frames again, written by PIL (adaptive filters: Paeth on nearly every row, where
# OpenCV writes Sub), as a tar.
[ -f pil720.tar ] || /usr/bin/python3 - <<'PY'
import glob, io, tarfile
from PIL import Image
with tarfile.open("pil720.tar", "w") as t:
    for i, f in enumerate(sorted(glob.glob("agora720/agora/images/train/*.png"))):
        b = io.BytesIO(); Image.open(f).save(b, "PNG"); b = b.getvalue()
        ti = tarfile.TarInfo("p%05d.png" % i); ti.size = len(b); t.addfile(ti, io.BytesIO(b))
PY

ONLY=${ONLY:-}  # a word of the titles to run only those (e.g. ONLY=person)
bench() {  # title input flags...
  local title=$1 in=$2; shift 2
  [[ -z $ONLY || $title == *$ONLY* ]] || return 0
  echo "### $title"
  TIMEFORMAT='%R %U %S'
  for r in 1 2 3; do
    for b in ref new; do
      local bin=$REF; [ $b = new ] && bin=$NEW
      rm -rf out-$b
      echo "$b run$r wall/user/sys: $( { time "$bin" convert -q "$in" -o out-$b "$@" -j "$THREADS" >/dev/null 2>&1; } 2>&1 )"
    done
  done
  for f in $(cd out-ref && ls | grep -v manifest.json); do cmp -s out-ref/$f out-new/$f || echo "DIFFERS: $f"; done
}
bench "box in the middle" frames.tar --crop box:700,300,420,610 --size 224 --format jpg
bench "box near the top" frames.tar --crop box:200,60,300,400 --size 224 --format jpg
bench "centre crop" frames.tar --crop center --size 224 --format jpg
bench "8 person boxes per frame (--table), 1920x1080" agora/agora --table agora/agora_train_smplx.npz \
  --crop field:bbox_xywh --square --size 224 --points keypoints2d
bench "8 person boxes per frame (--table), 1280x720" agora720/agora --table agora720/agora_train_smplx.npz \
  --crop field:bbox_xywh --square --size 224 --points keypoints2d
bench "PIL-written 1280x720 frames (Paeth), centre crop" pil720.tar --crop center --size 224 \
  --format jpg
bench "Hypersim-like pairs, centre crop + 16-bit depth" hyper.tar --crop center --size 512 \
  --format jpg --dense depth.png
