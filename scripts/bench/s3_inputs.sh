#!/usr/bin/env bash
# W1 converted from the local S3-compatible server (scripts/s3-local.sh: Swift + s3api on this
# machine) against the same archive from local disk, and the same pair for `--format keep`
# (no decoding: the read path alone). Prints one markdown table: samples/s (wall, the median
# of REPEAT runs) and S3 ÷ local. ZIP=1 adds the same members as a deflated zip (w1.zip, read
# by its central directory: Range GETs of its end, then one stream).
#
# usage: scripts/bench/s3_inputs.sh [WORKDIR]     env: W1=400 THREADS=$(nproc) REPEAT=3 ZIP=0
#        SERVER_CPUS=1 TARMAC_CPUS=0: pin the server and tarmac to their own cores (taskset), so
#        that the server's CPU (Swift is Python) does not compete with tarmac's workers: on a
#        machine as small as this one, the only fair way to compare the read paths.
# Needs a built tarmac (build/apps/tarmac) and scripts/setup-deps.sh test (Swift, boto3).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="${1:-/tmp/tarmac-bench-s3}"
TARMAC="${TARMAC:-$ROOT/build/apps/tarmac}"
PY=/usr/bin/python3
W1=${W1:-400}
THREADS=${THREADS:-$(nproc)}
REPEAT=${REPEAT:-3}
ZIP=${ZIP:-0}
ARCHIVES=(w1.tar)
FORMATS=tar
if [ "$ZIP" = 1 ]; then ARCHIVES+=(w1.zip); FORMATS=tar,zip; fi
mkdir -p "$WORK"
cd "$WORK"

if [ ! -f ".made-$W1-$FORMATS" ]; then
  echo "generating W1 ($W1 frames) in $WORK ..." >&2
  rm -f .made-*
  $PY "$ROOT/scripts/bench/make_workloads.py" . --w1 "$W1" --formats "$FORMATS" >&2
  touch ".made-$W1-$FORMATS"
fi

SERVER_PIN=() TARMAC_PIN=()
[ -n "${SERVER_CPUS:-}" ] && SERVER_PIN=(taskset -c "$SERVER_CPUS")
[ -n "${TARMAC_CPUS:-}" ] && TARMAC_PIN=(taskset -c "$TARMAC_CPUS")
eval "$("${SERVER_PIN[@]}" "$ROOT/scripts/s3-local.sh" start "$WORK/s3")"
trap '"$ROOT/scripts/s3-local.sh" stop "$WORK/s3"' EXIT
$PY - <<'PY'
import os, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
if "bench" not in [b["Name"] for b in s3.list_buckets().get("Buckets", [])]:
    s3.create_bucket(Bucket="bench")
for name in ("w1.tar", "w1.zip"):
    if os.path.exists(name):
        s3.upload_file(name, "bench", name)
PY

# "WALL CPU": median wall seconds and median CPU seconds (tarmac's user + sys) of REPEAT runs
# of a command writing OUTDIR. On a shared machine the CPU time is the steadier measure; the
# server's own CPU (Swift, in Python, on the same cores) is not in it.
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
echo "| W1 | from | samples/s (wall) | S3 ÷ local (wall) | tarmac CPU s | S3 ÷ local (CPU) |"
echo "|---|---|---|---|---|---|"
for archive in "${ARCHIVES[@]}"; do
for mode in crops keep; do
  if [ "$mode" = crops ]; then args=("${W1ARGS[@]}"); else args=(--format keep --threads "$THREADS"); fi
  read -r tl cl < <(seconds out "${TARMAC_PIN[@]}" "$TARMAC" convert "$archive" -o out "${args[@]}")
  read -r ts cs < <(seconds out "${TARMAC_PIN[@]}" "$TARMAC" convert "s3://bench/$archive" -o out "${args[@]}")
  $PY -c "
n, tl, ts, cl, cs = $W1, $tl, $ts, $cl, $cs
label = {'crops': 'HMR crops (224, q95)', 'keep': '--format keep'}['$mode'] + ', $archive'
print(f'| {label} | local disk | {n / tl:.1f} | | {cl:.2f} | |')
print(f'| {label} | local S3 (Swift s3api) | {n / ts:.1f} | {tl / ts:.2f} | {cs:.2f} | {cs / cl:.2f} |')"
done
done
