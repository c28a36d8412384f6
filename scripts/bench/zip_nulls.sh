#!/usr/bin/env bash
# The two benchmarks of issue #13, item 6 (docs/performance.md):
#  - W1 as .tar and as a deflated .zip (same members), side by side, with the binary before the
#    change ($BEFORE) and after ($TARMAC): samples/s (median of REPEAT) and the stages' busy
#    fractions from --json;
#  - W5 (img2dataset metadata, nulls and optional fields) against W4 of the same count, both
#    labels only (--no-images).
#
# usage: scripts/bench/zip_nulls.sh [WORKDIR]   env: W1=400 N=1000000 THREADS=2 REPEAT=5
#                                               BEFORE=/tmp/tarmac-before (skipped if absent)
#                                               ONLY=w1|w5 (one of the two tables)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="${1:-/tmp/tarmac-bench-zip}"
TARMAC="${TARMAC:-$ROOT/build/apps/tarmac}"
BEFORE="${BEFORE:-/tmp/tarmac-before}"
PY=/usr/bin/python3
W1=${W1:-400} N=${N:-1000000} THREADS=${THREADS:-2} REPEAT=${REPEAT:-5} ONLY=${ONLY:-}
mkdir -p "$WORK"
cd "$WORK"
[ "$ONLY" = w5 ] || [ -f w1.zip ] || $PY "$ROOT/scripts/bench/make_workloads.py" . --w1 "$W1" --formats tar,zip >&2
[ "$ONLY" = w1 ] || [ -f w5.tar ] || $PY "$ROOT/scripts/bench/make_workloads.py" . --w4 "$N" --w5 "$N" >&2

# measure LABEL BINARY INPUT ARGS...: one table row, the median of REPEAT runs by wall clock,
# with the stages of the median run.
measure() {
  local label=$1 bin=$2 input=$3; shift 3
  rm -f run-*.json
  for i in $(seq "$REPEAT"); do
    rm -rf out
    "$bin" convert "$input" -o out --threads "$THREADS" --json "$@" > "run-$i.json" 2> err.txt ||
      { cat err.txt >&2; return 1; }
  done
  $PY - "$label" <<'PY'
import glob, json, sys
runs = [json.load(open(p)) for p in glob.glob("run-*.json")]
runs.sort(key=lambda r: r["seconds"])
m = runs[len(runs) // 2]
s = m.get("stages", {})
busy = " / ".join("%.0f %%" % (100 * s[k]) if k in s else "-" for k in ("reader_busy", "worker_busy", "writer_busy"))
print("| %s | %d | %.2f | %.1f | %s |" % (sys.argv[1], m["samples"], m["seconds"], m["samples"] / m["seconds"], busy))
PY
}

echo "THREADS=$THREADS REPEAT=$REPEAT $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| run | samples | seconds (median) | samples/s | busy: reader / workers / writer |"
echo "|---|---|---|---|---|"
W1ARGS=(--crop field:bbox_xywh --crop-scale 1.2 --square --size 224 --points keypoints2d --boxes bbox_xywh --quality 95)
for bin in "$BEFORE" "$TARMAC"; do
  [ "$ONLY" != w5 ] || break
  [ -x "$bin" ] || continue
  which=$([ "$bin" = "$TARMAC" ] && echo after || echo before)
  measure "W1 .tar, $which" "$bin" w1.tar "${W1ARGS[@]}"
  measure "W1 .zip (deflated), $which" "$bin" w1.zip "${W1ARGS[@]}"
done
[ "$ONLY" = w1 ] && exit 0
measure "W4 .tar ($N .npz), --no-images" "$TARMAC" w4.tar --no-images
measure "W5 .tar ($N img2dataset .json + .txt), --no-images" "$TARMAC" w5.tar --no-images
