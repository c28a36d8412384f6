#!/usr/bin/env bash
# The cost of the resampler (#28 item 3): two tarmac binaries side by side, interleaved, on the
# workloads that shrink images: W1 (person crops of 1280x720 JPEG frames -> 224), W2 (1-3 MP
# JPEGs, centre crop -> 512), W3 (640x480 PNG + 16-bit depth, centre crop -> 224), the new
# binary with --resample area (default) and area-exact. Prints one markdown table: medians of
# REPEAT runs, wall and CPU (user + sys) seconds, CPU ratio against the first binary.
#
# usage: scripts/bench/resample.sh OLD_TARMAC NEW_TARMAC [WORKDIR]   env: REPEAT=5 THREADS=2
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OLD=$(realpath "$1") NEW=$(realpath "$2") WORK="${3:-/tmp/tarmac-bench-resample}"
REPEAT=${REPEAT:-5} THREADS=${THREADS:-2}
PY=/usr/bin/python3
mkdir -p "$WORK"
cd "$WORK"
if [ ! -f .made ]; then
  $PY "$ROOT/scripts/bench/make_workloads.py" . --w1 400 --w2 120 --w3 200 --w4 0 --formats tar >&2
  touch .made
fi
W1=(w1.tar --crop field:bbox_xywh --crop-scale 1.2 --square --size 224 --points keypoints2d
    --boxes bbox_xywh --quality 95)
W2=(w2.tar --crop center --size 512 --quality 95)
W3=(w3.tar --crop center --size 224 --dense depth.png)
: > runs.txt
run() {  # LABEL TARMAC ARGS...
  local label=$1 bin=$2; shift 2
  rm -rf out
  /usr/bin/time -f "%e %U %S" -o time.txt "$bin" convert "$@" -o out -q --threads "$THREADS"
  echo "$label $(cat time.txt)" >> runs.txt
}
for _ in $(seq "$REPEAT"); do
  for w in W1 W2 W3; do
    declare -n args=$w
    run "$w old" "$OLD" "${args[@]}"
    run "$w area" "$NEW" "${args[@]}"
    run "$w area-exact" "$NEW" "${args[@]}" --resample area-exact
  done
done
$PY - <<'PY'
import statistics
runs = {}
for line in open("runs.txt"):
    w, mode, e, u, s = line.split()
    runs.setdefault((w, mode), []).append((float(e), float(u) + float(s)))
print("| workload | binary | wall s | CPU s | CPU ÷ old |")
print("|---|---|---:|---:|---:|")
for w in ("W1", "W2", "W3"):
    old = statistics.median(c for _, c in runs[w, "old"])
    for mode in ("old", "area", "area-exact"):
        r = runs[w, mode]
        cpu = statistics.median(c for _, c in r)
        print(f"| {w} | {mode} | {statistics.median(e for e, _ in r):.2f} | {cpu:.2f} | {cpu / old:.2f} |")
PY
