#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan + UBSan) into build-fuzz and runs each for a
# fixed number of executions, starting from its saved corpus. A crash, leak, timeout or
# out-of-memory fails the script; the input that caused it is copied to fuzz-crashes/<target>/
# (CI keeps the log) to be fixed and then added to tests/fuzz/corpus/<target>/ as a regression.
#
# Repeatable by design: a fixed seed and a fixed number of runs make libFuzzer try the same
# inputs on every machine, so a red CI run is a change in the code, never a faster machine
# getting further. The counts are about 30 s each on the 2-core development machine, where two
# targets run at once (FUZZ_JOBS); the time cap only guards against a slow machine (a capped run
# tries a prefix of the same inputs).
#   FUZZ_RUNS     executions per target (default: the table below)
#   FUZZ_SECONDS  time cap per target (default 120)
#   FUZZ_TARGETS  which targets (default: all)
#   FUZZ_SEED     libFuzzer seed (default 1; explore with other seeds and more runs locally)
#   FUZZ_JOBS     targets run at once (default: the number of cores)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-deps.sh ci  # clang-14 with libFuzzer
SECONDS_PER_TARGET="${FUZZ_SECONDS:-120}"
declare -A RUNS=(
  [fuzz_labels_npy]=1000000 [fuzz_labels_npz]=400000 [fuzz_labels_json]=800000
  [fuzz_safetensors]=600000 [fuzz_tar_grouping]=15000 [fuzz_image_decode]=200000 [fuzz_png_region]=200000 [fuzz_dataset]=12000
  [fuzz_npy_dense]=300000 [fuzz_pickle]=400000 [fuzz_table_npz]=100000 [fuzz_table]=300000
  [fuzz_shard_list]=300000 [fuzz_column]=150000 [fuzz_manifest]=200000 [fuzz_s3_listing]=1000000
  [fuzz_zip_directory]=300000 [fuzz_coco_mask]=300000 [fuzz_checkpoint]=100000
)
BUILD=build-fuzz
TARGETS=(${FUZZ_TARGETS:-fuzz_labels_npy fuzz_labels_npz fuzz_labels_json fuzz_safetensors fuzz_tar_grouping fuzz_image_decode fuzz_png_region fuzz_npy_dense fuzz_table fuzz_dataset fuzz_pickle fuzz_table_npz fuzz_shard_list fuzz_column fuzz_manifest fuzz_s3_listing fuzz_zip_directory fuzz_coco_mask fuzz_checkpoint})

CC=clang-14 CXX=clang++-14 cmake -S . -B "$BUILD" -G Ninja -DTARMAC_FUZZ=ON -DTARMAC_BUILD_TESTS=ON >/dev/null
cmake --build "$BUILD" -j2 --target fuzzers

# New inputs go to a scratch corpus (the first directory given), never into the source tree.
WORK="$BUILD/fuzz-work"
CRASHES=fuzz-crashes
rm -rf "$WORK" "$CRASHES"
# One target: its result in $WORK/<target>/status (0 or libFuzzer's exit status).
fuzz_one() {
  local t=$1 rc=0
  mkdir -p "$WORK/$t/corpus" "$WORK/$t/artifacts"
  # -timeout: one input taking over 10 s is a hang; -rss_limit_mb: a parser that allocates
  # what a header claims without checking shows up as an out-of-memory crash.
  "$BUILD/tests/fuzz/$t" "$WORK/$t/corpus" "tests/fuzz/corpus/$t" \
    -seed="${FUZZ_SEED:-1}" -runs="${FUZZ_RUNS:-${RUNS[$t]:-100000}}" -reload=0 \
    -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$WORK/$t/artifacts/" -print_final_stats=1 >"$WORK/$t/log" 2>&1 || rc=$?
  echo "$rc" >"$WORK/$t/status"
}
# Each libFuzzer process is single-threaded: as many run at once as there are cores (each
# target's inputs are the same whatever runs beside it: the seed and count fix them).
JOBS="${FUZZ_JOBS:-$(nproc)}"
for t in "${TARGETS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
failed=()
for t in "${TARGETS[@]}"; do
  log="$WORK/$t/log"
  if [ "$(cat "$WORK/$t/status" 2>/dev/null)" = 0 ]; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz: $t: ${runs:-?} executions in $(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log") s, no crash"
  else
    mkdir -p "$CRASHES/$t"
    cp "$WORK/$t/artifacts/"* "$CRASHES/$t/" 2>/dev/null || true
    echo "fuzz: $t: FAILED; inputs in $CRASHES/$t/, the end of the log:" >&2
    tail -n 40 "$log" >&2
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: crashes in: ${failed[*]}" >&2
  exit 1
fi
