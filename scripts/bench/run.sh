#!/usr/bin/env bash
# Runs tarmac and the pipelines users run today side by side on the same generated
# workloads, and prints one markdown table (samples/s by wall clock; ratios vs tarmac).
#
# usage: scripts/bench/run.sh [WORKDIR]     env: W1=400 W2=120 W3=200 W4=100000 THREADS=$(nproc)
#                                            REPEAT=3 (runs per measurement; the median is shown)
# Needs: a built tarmac (build/apps/tarmac), Debian's python3-numpy/opencv/pil, libvips-tools,
# parallel, libarchive-tools (scripts/setup-deps.sh test installs all but libvips-tools:
# apt-get install libvips-tools).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="${1:-/tmp/tarmac-bench}"
TARMAC="${TARMAC:-$ROOT/build/apps/tarmac}"
PY=/usr/bin/python3
W1=${W1:-400} W2=${W2:-120} W3=${W3:-200} W4=${W4:-100000}
THREADS=${THREADS:-$(nproc)}
REPEAT=${REPEAT:-3}
mkdir -p "$WORK"
cd "$WORK"

if [ ! -f .made-$W1-$W2-$W3-$W4 ]; then
  echo "generating workloads in $WORK ..." >&2
  rm -f .made-*
  $PY "$ROOT/scripts/bench/make_workloads.py" . --w1 "$W1" --w2 "$W2" --w3 "$W3" --w4 "$W4" >&2
  touch .made-$W1-$W2-$W3-$W4
fi

# seconds OUTDIR COMMAND...: wall-clock seconds of a command (output discarded), the median of
# REPEAT runs, each after removing OUTDIR (the command's output); the peak RSS of all runs goes
# to rss.txt and the median CPU seconds (user + sys, children included) to cpu.txt: on a
# shared machine one run can be 20 % off, and CPU time is the steadier measure.
seconds() {
  local clean=$1; shift
  : > runs.txt
  for _ in $(seq "$REPEAT"); do
    rm -rf "$clean"
    /usr/bin/time -f "%e %M %U %S" -o time.txt "$@" >/dev/null 2>err.txt || { cat err.txt >&2; return 1; }
    cat time.txt >> runs.txt
  done
  $PY - <<'PY'
import statistics
runs = [list(map(float, line.split())) for line in open("runs.txt") if line.strip()]
open("rss.txt", "w").write("%d\n" % max(r[1] for r in runs))
open("cpu.txt", "w").write("%r\n" % statistics.median(r[2] + r[3] for r in runs))
print(statistics.median(r[0] for r in runs))
PY
}
cpurate() { $PY -c "print(f'{$1 / $(cat cpu.txt):.1f}')"; }
rate() { $PY -c "print(f'{$1 / $2:.1f}')"; }
ratio() { $PY -c "print(f'{$1 / $2:.2f}')"; }
row() { printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4" "$(cpurate "$N")" "$5"; }

echo "| workload | pipeline | samples/s (wall) | tarmac ÷ this (wall) | samples per CPU-second | peak RSS (MB) |"
echo "|---|---|---|---|---|---|"

N=$W1
# W1: HMR person crops -> 224x224 JPEG q95, keypoints and boxes transformed.
W1ARGS=(--crop field:bbox_xywh --crop-scale 1.2 --square --size 224 --points keypoints2d --boxes bbox_xywh --quality 95)
for ext in tar tar.gz tar.zst; do
  t=$(seconds out-w1 "$TARMAC" convert "w1.$ext" -o out-w1 "${W1ARGS[@]}" --threads "$THREADS")
  r=$(rate "$W1" "$t"); [ "$ext" = tar ] && TW1=$r
  row "W1 .$ext" "tarmac, $THREADS threads" "$r" "1.00" "$(( $(cat rss.txt) / 1024 ))"
done
t=$(seconds out-w1 "$TARMAC" convert w1.tar -o out-w1 "${W1ARGS[@]}" --threads 1)
row "W1 .tar" "tarmac, 1 thread" "$(rate "$W1" "$t")" "$(ratio "$TW1" "$(rate "$W1" "$t")")" "$(( $(cat rss.txt) / 1024 ))"
t=$(seconds out-py $PY "$ROOT/scripts/bench/peer_python.py" w1.tar out-py)
row "W1 .tar" "Python tarfile+PIL, 1 process" "$(rate "$W1" "$t")" "$(ratio "$TW1" "$(rate "$W1" "$t")")" "$(( $(cat rss.txt) / 1024 ))"
t=$(seconds out-py $PY "$ROOT/scripts/bench/peer_python.py" w1.tar out-py --procs "$THREADS")
row "W1 .tar" "Python tarfile+PIL, $THREADS processes" "$(rate "$W1" "$t")" "$(ratio "$TW1" "$(rate "$W1" "$t")")" "-"
FLOOR1=$($PY "$ROOT/scripts/bench/decode_floor.py" w1.tar)
FLOORN=$($PY -c "print(f'{$FLOOR1 * $THREADS:.1f}')")
echo "$W1 / $FLOOR1" | $PY -c "import sys; print(eval(sys.stdin.read()))" > cpu.txt
row "W1 .tar" "floor: libjpeg-turbo full decode × $THREADS cores" "$FLOORN" "$(ratio "$TW1" "$FLOORN")" "-"

N=$W2
# W2: captioned photos -> centre crop 512x512 JPEG q95.
t=$(seconds out-w2 "$TARMAC" convert w2.tar -o out-w2 --crop center --size 512 --quality 95 --threads "$THREADS")
TW2=$(rate "$W2" "$t")
row "W2 .tar" "tarmac, $THREADS threads" "$TW2" "1.00" "$(( $(cat rss.txt) / 1024 ))"
if command -v vipsthumbnail >/dev/null && command -v parallel >/dev/null; then
  cat > shell-w2.sh <<'SH'
set -e
rm -rf x-w2 o-w2 && mkdir -p x-w2 o-w2
bsdtar -xf w2.tar -C x-w2
find x-w2 -name '*.jpg' | parallel -j "$1" -X vipsthumbnail --size 512x512 --smartcrop centre -o "$PWD/o-w2/%s.jpg[Q=95]"
SH
  t=$(seconds o-w2 bash shell-w2.sh "$THREADS")
  row "W2 .tar" "bsdtar -x + vipsthumbnail + GNU parallel" "$(rate "$W2" "$t")" "$(ratio "$TW2" "$(rate "$W2" "$t")")" "-"
fi
FLOOR2=$($PY "$ROOT/scripts/bench/decode_floor.py" w2.tar)
echo "$W2 / $FLOOR2" | $PY -c "import sys; print(eval(sys.stdin.read()))" > cpu.txt
row "W2 .tar" "floor: libjpeg-turbo full decode × $THREADS cores" "$($PY -c "print(f'{$FLOOR2 * $THREADS:.1f}')")" "$(ratio "$TW2" "$($PY -c "print($FLOOR2 * $THREADS)")")" "-"

# W2 in aspect-ratio buckets of ~1024² pixels (what SDXL-style fine-tuning caches), against the
# same task in Python + PIL (the rule of docs/cli.md, written in peer_python.py).
t=$(seconds out-w2b "$TARMAC" convert w2.tar -o out-w2b --resize bucket --size 1024 --quality 95 --threads "$THREADS")
TW2B=$(rate "$W2" "$t")
row "W2 .tar, buckets 1024²" "tarmac, $THREADS threads" "$TW2B" "1.00" "$(( $(cat rss.txt) / 1024 ))"
t=$(seconds out-py $PY "$ROOT/scripts/bench/peer_python.py" w2.tar out-py --bucket 1024)
row "W2 .tar, buckets 1024²" "Python tarfile+PIL, 1 process" "$(rate "$W2" "$t")" "$(ratio "$TW2B" "$(rate "$W2" "$t")")" "$(( $(cat rss.txt) / 1024 ))"
t=$(seconds out-py $PY "$ROOT/scripts/bench/peer_python.py" w2.tar out-py --bucket 1024 --procs "$THREADS")
row "W2 .tar, buckets 1024²" "Python tarfile+PIL, $THREADS processes" "$(rate "$W2" "$t")" "$(ratio "$TW2B" "$(rate "$W2" "$t")")" "-"

N=$W3
# W3: depth pairs -> centre crop 480x480 PNG, depth warped by nearest neighbour.
t=$(seconds out-w3 "$TARMAC" convert w3.tar -o out-w3 --crop center --size 480 --format png --dense depth.png --threads "$THREADS")
row "W3 .tar" "tarmac, $THREADS threads" "$(rate "$W3" "$t")" "1.00" "$(( $(cat rss.txt) / 1024 ))"

N=$W4
# W4: labels only, per-sample .npz -> one annotation file.
t=$(seconds out-w4 "$TARMAC" convert w4.tar -o out-w4 --no-images --threads "$THREADS")
row "W4 .tar ($W4 samples)" "tarmac --no-images" "$(rate "$W4" "$t")" "1.00" "$(( $(cat rss.txt) / 1024 ))"
RAW=$($PY - <<PY
import sys; sys.path.insert(0, "$ROOT/tests/e2e")
import st_reader
t, m = st_reader.load("out-w4/labels.safetensors")
raw = sum(v.nbytes for k, v in t.items() if not k.startswith("__key__"))
import os
print(f"{os.path.getsize('out-w4/labels.safetensors') / raw:.3f} {t['__key__.values'].nbytes}")
PY
)
echo
echo "W4: labels.safetensors size ÷ raw label array bytes (keys excluded) = ${RAW% *}; key bytes: ${RAW#* }"
echo "W4: conversion took $t s for $W4 samples"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%F)"
