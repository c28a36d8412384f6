#!/usr/bin/env bash
# The cost of `convert --dedup` (#29): W1 (HMR crops, 1280x720 JPEG frames) converted as
# scripts/bench/run.sh does, without --dedup, with --dedup exact and with --dedup near,
# interleaved. Prints one markdown table: medians of REPEAT runs, wall and CPU (user + sys)
# seconds, and each run's cost over the run without --dedup. W1 holds no duplicates, so every
# image is hashed, looked up and kept: the whole cost, nothing saved.
#
# usage: scripts/bench/dedup.sh TARMAC [WORKDIR]     env: W1=400 THREADS=2 REPEAT=7
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TARMAC=$(realpath "$1") W1=${W1:-400}
WORK="${2:-/tmp/tarmac-bench-dedup-$W1}" THREADS=${THREADS:-2} REPEAT=${REPEAT:-7}
PY=/usr/bin/python3
mkdir -p "$WORK"
cd "$WORK"
[ -f w1.tar ] || $PY "$ROOT/scripts/bench/make_workloads.py" . --w1 "$W1" --formats tar >&2
ARGS=(--crop field:bbox_xywh --crop-scale 1.2 --square --size 224 --points keypoints2d
      --boxes bbox_xywh --quality 95 --threads "$THREADS")
: > runs.txt
run() {  # LABEL FLAGS...
  local label=$1; shift
  rm -rf out
  /usr/bin/time -f "%e %U %S" -o time.txt "$TARMAC" convert w1.tar -o out -q "${ARGS[@]}" "$@"
  echo "$label $(cat time.txt)" >> runs.txt
}
for _ in $(seq "$REPEAT"); do
  run none
  run exact --dedup exact
  run near --dedup near
done
echo "W1=$W1 THREADS=$THREADS REPEAT=$REPEAT, $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
$PY - "$W1" <<'PY'
import statistics, sys
n = int(sys.argv[1])
runs = {}
for line in open("runs.txt"):
    label, e, u, s = line.split()
    runs.setdefault(label, []).append((float(e), float(u) + float(s)))
med = {k: (statistics.median(e for e, _ in v), statistics.median(c for _, c in v)) for k, v in runs.items()}
print("| run | wall s | CPU s | samples/s | wall ÷ without | CPU ÷ without |")
print("|---|---:|---:|---:|---:|---:|")
for k, flags in (("none", "without --dedup"), ("exact", "--dedup exact"), ("near", "--dedup near")):
    wall, cpu = med[k]
    print("| %s | %.2f | %.2f | %.0f | %.3f | %.3f |" % (flags, wall, cpu, n / wall, wall / med["none"][0],
                                                        cpu / med["none"][1]))
PY
