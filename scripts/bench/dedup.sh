#!/usr/bin/env bash
# The cost of `convert --dedup` (#29) on two workloads, without --dedup, with --dedup exact and
# with --dedup near, interleaved:
#   W1     HMR crops as scripts/bench/run.sh converts them (1280x720 JPEG q92 frames, a person
#          box cropped to 224²), but every frame its own picture (--w1-frames): run.sh's W1
#          reuses 16 frames, which are near duplicates of each other.
#   LAION  whole 500x375 to 1024x768 JPEGs (make_workloads.py --laion), resized whole:
#          `--size 256` and `--resize bucket --size 512`, the workload --dedup is made for.
# Neither holds duplicates, so every image is hashed, looked up and kept: the whole cost,
# nothing saved. Prints one markdown table per workload: medians of REPEAT runs, wall and CPU
# (user + sys) seconds, and each run's cost over the run without --dedup. W1's floor (what any
# hash of the whole image costs on it) comes from build/tests/bench/dedup_floor_bench.
#
# usage: scripts/bench/dedup.sh TARMAC [WORKDIR]    env: W1=400 LAION=400 THREADS=2 REPEAT=5
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TARMAC=$(realpath "$1") W1=${W1:-400} LAION=${LAION:-400}
WORK="${2:-/tmp/tarmac-bench-dedup-w1d$W1-laion$LAION}" THREADS=${THREADS:-2} REPEAT=${REPEAT:-5}
PY=/usr/bin/python3
mkdir -p "$WORK"
cd "$WORK"
[ -f w1.tar ] && [ -f laion.tar ] ||
  $PY "$ROOT/scripts/bench/make_workloads.py" . --w1 "$W1" --w1-frames "$W1" --laion "$LAION" \
    --formats tar >&2
W1_ARGS=(w1.tar --crop field:bbox_xywh --crop-scale 1.2 --square --size 224 --points keypoints2d
         --boxes bbox_xywh --quality 95)
: > runs.txt
run() {  # WORKLOAD MODE CONVERT_ARGS...
  local workload=$1 mode=$2; shift 2
  local flags=()
  [ "$mode" = none ] || flags=(--dedup "$mode")
  rm -rf out
  /usr/bin/time -f "%e %U %S" -o time.txt "$TARMAC" convert "$@" -o out -q --threads "$THREADS" \
    "${flags[@]}"
  echo "$workload $mode $(cat time.txt)" >> runs.txt
}
for _ in $(seq "$REPEAT"); do
  for mode in none exact near; do
    run w1 "$mode" "${W1_ARGS[@]}"
    run laion-size256 "$mode" laion.tar --size 256
    run laion-bucket512 "$mode" laion.tar --resize bucket --size 512
  done
done
echo "W1=$W1 LAION=$LAION THREADS=$THREADS REPEAT=$REPEAT, $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
$PY - "$W1" "$LAION" <<'PY'
import statistics, sys
count = {"w1": int(sys.argv[1]), "laion-size256": int(sys.argv[2]), "laion-bucket512": int(sys.argv[2])}
runs = {}
for line in open("runs.txt"):
    workload, mode, e, u, s = line.split()
    runs.setdefault(workload, {}).setdefault(mode, []).append((float(e), float(u) + float(s)))
for workload, modes in runs.items():
    med = {k: (statistics.median(e for e, _ in v), statistics.median(c for _, c in v)) for k, v in modes.items()}
    n = count[workload]
    print("\n%s (%d images)\n" % (workload, n))
    print("| run | wall s | CPU s | CPU ms / image | wall ÷ without | CPU ÷ without |")
    print("|---|---:|---:|---:|---:|---:|")
    for k, flags in (("none", "without --dedup"), ("exact", "--dedup exact"), ("near", "--dedup near")):
        wall, cpu = med[k]
        print("| %s | %.2f | %.2f | %.2f | %.3f | %.3f |" % (flags, wall, cpu, 1e3 * cpu / n, wall / med["none"][0],
                                                            cpu / med["none"][1]))
PY
