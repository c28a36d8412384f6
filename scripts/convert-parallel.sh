#!/usr/bin/env bash
# Converts inputs in N deterministic parts run side by side (GNU parallel), joins the parts
# with `tarmac merge` and checks the result with `tarmac verify`. The same recipe as a cluster
# job (scripts/convert-slurm.sbatch), on one machine or over ssh (parallel -S host1,host2).
#
#   scripts/convert-parallel.sh -n 8 -o out/ raw/*.tar.gz -- --crop center --size 256
#
# -n N       number of parts (default: the number of cores)
# -o OUT     output dataset directory; parts are written to OUT.parts/ (same filesystem, so
#            merge hard-links their shards) and removed once OUT verifies
# -j JOBS    parts converted at once (default: N); each gets cores/JOBS threads
# --keep     keep OUT.parts/
# Everything after `--` is passed to every `tarmac convert`. TARMAC (env) is the binary.
set -euo pipefail
TARMAC=${TARMAC:-tarmac}
N=$(nproc)
JOBS=""
OUT=""
KEEP=0
INPUTS=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) N=$2; shift 2 ;;
    -o) OUT=$2; shift 2 ;;
    -j) JOBS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) INPUTS+=("$1"); shift ;;
  esac
done
OPTS=("$@")
if [ -z "$OUT" ] || [ ${#INPUTS[@]} -eq 0 ]; then
  echo "usage: $0 -n N -o OUT INPUT... [-- CONVERT_OPTIONS...]" >&2
  exit 2
fi
command -v parallel >/dev/null || { echo "$0: GNU parallel is not installed (apt-get install parallel)" >&2; exit 2; }
OUT=${OUT%/}
JOBS=${JOBS:-$N}
THREADS=$(( $(nproc) / JOBS )); [ "$THREADS" -ge 1 ] || THREADS=1
PARTS="$OUT.parts"
rm -rf "$PARTS"
mkdir -p "$PARTS"

# Part I of N; --halt stops the other parts at the first failure. --allow-empty: with more parts
# than samples a part may hold none, and merge joins it anyway.
parallel -q --will-cite --halt now,fail=1 -j "$JOBS" \
  "$TARMAC" convert "${INPUTS[@]}" -o "$PARTS/part-{}" --shard "{}/$N" -j "$THREADS" -q --allow-empty "${OPTS[@]}" \
  ::: $(seq 0 $((N - 1)))

PART_DIRS=()
for i in $(seq 0 $((N - 1))); do PART_DIRS+=("$PARTS/part-$i"); done
"$TARMAC" merge "${PART_DIRS[@]}" -o "$OUT"
"$TARMAC" verify -q "$OUT"
if [ "$KEEP" -eq 0 ]; then rm -rf "$PARTS"; fi
