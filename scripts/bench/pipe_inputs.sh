#!/usr/bin/env bash
# W1 converted from a pipe:COMMAND input ('pipe:cat w1.tar': the command's output through a
# pipe, read as a stream) against the same archive from local disk, with the HMR crops and
# with `--format keep` (the read path alone). Prints one markdown table: samples/s (wall, the
# median of REPEAT runs), tarmac's CPU seconds (user + sys, the command's not in it) and the
# ratios.
#
# usage: scripts/bench/pipe_inputs.sh [WORKDIR]     env: W1=400 THREADS=$(nproc) REPEAT=3
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="${1:-/tmp/tarmac-bench-pipe}"
TARMAC="${TARMAC:-$ROOT/build/apps/tarmac}"
PY=/usr/bin/python3
W1=${W1:-400}
THREADS=${THREADS:-$(nproc)}
REPEAT=${REPEAT:-3}
mkdir -p "$WORK"
cd "$WORK"

if [ ! -f .made-$W1 ]; then
  echo "generating W1 ($W1 frames) in $WORK ..." >&2
  rm -f .made-*
  $PY "$ROOT/scripts/bench/make_workloads.py" . --w1 "$W1" --formats tar >&2
  touch .made-$W1
fi

# "WALL CPU": median wall seconds and median CPU seconds of REPEAT runs writing OUTDIR.
seconds() {
  local out=$1; shift
  : > runs.txt
  for _ in $(seq "$REPEAT"); do
    rm -rf "$out"
    /usr/bin/time -f "%e %U %S" -o time.txt "$@" >/dev/null 2>err.txt || { cat err.txt >&2; return 1; }
    cat time.txt >> runs.txt
  done
  echo "$(sort -n runs.txt | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')" \
    "$(awk '{print $2 + $3}' runs.txt | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
}

W1ARGS=(--crop field:bbox_xywh --crop-scale 1.2 --square --size 224 --points keypoints2d
  --boxes bbox_xywh --quality 95 --threads "$THREADS")
echo "| W1 | from | samples/s (wall) | pipe ÷ local (wall) | tarmac CPU s | pipe ÷ local (CPU) |"
echo "|---|---|---|---|---|---|"
for mode in crops keep; do
  if [ "$mode" = crops ]; then args=("${W1ARGS[@]}"); else args=(--format keep --threads "$THREADS"); fi
  read -r tl cl < <(seconds out "$TARMAC" convert w1.tar -o out "${args[@]}")
  read -r tp cp < <(seconds out "$TARMAC" convert "pipe:cat w1.tar" -o out "${args[@]}")
  $PY -c "
n, tl, tp, cl, cp = $W1, $tl, $tp, $cl, $cp
label = {'crops': 'HMR crops (224, q95)', 'keep': '--format keep'}['$mode']
print(f'| {label} | local disk | {n / tl:.1f} | | {cl:.2f} | |')
print(f'| {label} | pipe:cat w1.tar | {n / tp:.1f} | {tl / tp:.2f} | {cp:.2f} | {cp / cl:.2f} |')"
done
