#!/usr/bin/env bash
# Zip at the speed of tar (#28): W1 as a tar and as Python's zipfile (DEFLATED, level 6) with the
# same members, converted side by side, interleaved, by one or two tarmac binaries. Prints one
# markdown table: medians of REPEAT runs, wall and CPU (user + sys) seconds, and each zip's
# speed (samples/s) as a fraction of the tar's with the same binary.
#
# usage: scripts/bench/zip_vs_tar.sh TARMAC [BEFORE_TARMAC] [WORKDIR]
#        env: W1=400 THREADS=2 REPEAT=7
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
NEW=$(realpath "$1") OLD=${2:+$(realpath "$2")} W1=${W1:-400}
WORK="${3:-/tmp/tarmac-bench-zip-$W1}" THREADS=${THREADS:-2} REPEAT=${REPEAT:-7}
PY=/usr/bin/python3
mkdir -p "$WORK"
cd "$WORK"
[ -f w1.zip ] || $PY "$ROOT/scripts/bench/make_workloads.py" . --w1 "$W1" --formats tar,zip >&2
ARGS=(--crop field:bbox_xywh --crop-scale 1.2 --square --size 224 --points keypoints2d
      --boxes bbox_xywh --quality 95 --threads "$THREADS")
: > runs.txt
run() {  # LABEL TARMAC INPUT
  rm -rf out
  /usr/bin/time -f "%e %U %S" -o time.txt "$2" convert "$3" -o out -q "${ARGS[@]}"
  echo "$1 $(cat time.txt)" >> runs.txt
}
for _ in $(seq "$REPEAT"); do
  run "tar,after" "$NEW" w1.tar
  run "zip,after" "$NEW" w1.zip
  if [ -n "$OLD" ]; then
    run "tar,before" "$OLD" w1.tar
    run "zip,before" "$OLD" w1.zip
  fi
done
echo "W1=$W1 THREADS=$THREADS REPEAT=$REPEAT, $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
$PY - "$W1" <<'PY'
import statistics, sys
n = int(sys.argv[1])
runs = {}
for line in open("runs.txt"):
    label, e, u, s = line.split()
    runs.setdefault(label, []).append((float(e), float(u) + float(s)))
print("| binary | input | wall s | CPU s | samples/s | zip ÷ tar (samples/s) | zip ÷ tar (CPU) |")
print("|---|---|---:|---:|---:|---:|---:|")
for which in ("before", "after"):
    if "tar," + which not in runs:
        continue
    med = {k: (statistics.median(e for e, _ in runs[k + "," + which]),
               statistics.median(c for _, c in runs[k + "," + which])) for k in ("tar", "zip")}
    for k in ("tar", "zip"):
        wall, cpu = med[k]
        ratio = "" if k == "tar" else "%.1f %%" % (100 * med["tar"][0] / wall)
        cratio = "" if k == "tar" else "%.1f %%" % (100 * med["tar"][1] / cpu)
        print(f"| {which} | {k} | {wall:.2f} | {cpu:.2f} | {n / wall:.0f} | {ratio} | {cratio} |")
PY
