#!/usr/bin/env bash
# Peak RSS of a labels-only conversion (workload W4) at several sizes, with the default
# grouping window and with a 1 MiB one: the difference is the window, what remains grows
# only by the per-key cost (docs/performance.md, "Memory").
#
# usage: scripts/bench/rss_w4.sh [WORKDIR] [N...]     default N: 100000 1000000; env THREADS=2
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="${1:-/tmp/tarmac-rss}"
shift || true
SIZES=("${@:-100000 1000000}")
TARMAC="${TARMAC:-$ROOT/build/apps/tarmac}"
THREADS=${THREADS:-2}
mkdir -p "$WORK"
echo "| samples | --group-window 256M (the old default): peak RSS MiB | --group-window 1M: peak RSS MiB |"
echo "|---|---|---|"
for n in ${SIZES[*]}; do
  dir="$WORK/w4-$n"
  [ -f "$dir/w4.tar" ] || /usr/bin/python3 "$ROOT/scripts/bench/make_workloads.py" "$dir" --w4 "$n" >&2
  row="| $n"
  for window in 256M 1M; do
    rm -rf "$WORK/out"
    /usr/bin/time -v -o "$WORK/time.txt" "$TARMAC" convert "$dir/w4.tar" -o "$WORK/out" \
      --no-images --threads "$THREADS" --group-window "$window" >/dev/null
    kb=$(awk -F: '/Maximum resident set size/ {print $2}' "$WORK/time.txt")
    row="$row | $(( kb / 1024 ))"
  done
  echo "$row |"
done
rm -rf "$WORK/out"
echo "machine: $(nproc) cores, $(lscpu | awk -F: '/Model name/ {print $2}' | xargs); $(date -u +%F)"
