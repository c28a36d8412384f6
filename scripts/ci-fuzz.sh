#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan + UBSan) into build-fuzz and runs each for a
# bounded time, starting from its saved corpus. A crash, leak, timeout or out-of-memory fails
# the script; the input that caused it is copied to fuzz-crashes/<target>/ (CI keeps the log)
# to be fixed and then added to tests/fuzz/corpus/<target>/ as a regression.
#   FUZZ_SECONDS  time per target (default 30)
#   FUZZ_TARGETS  which targets (default: all)
#   FUZZ_SEED     libFuzzer seed (default 1: CI mutates the same way every run, so a red run is
#                 a regression in the code, not a lucky draw; explore with other seeds locally)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${FUZZ_SECONDS:-30}"
BUILD=build-fuzz
TARGETS=(${FUZZ_TARGETS:-fuzz_labels_npy fuzz_labels_npz fuzz_labels_json fuzz_safetensors fuzz_tar_grouping fuzz_image_decode})

CC=clang-14 CXX=clang++-14 cmake -S . -B "$BUILD" -G Ninja -DTARMAC_FUZZ=ON >/dev/null
cmake --build "$BUILD" -j2 --target fuzzers

# New inputs go to a scratch corpus (the first directory given), never into the source tree.
WORK="$BUILD/fuzz-work"
CRASHES=fuzz-crashes
rm -rf "$WORK" "$CRASHES"
failed=()
for t in "${TARGETS[@]}"; do
  mkdir -p "$WORK/$t/corpus" "$WORK/$t/artifacts"
  log="$WORK/$t/log"
  # -timeout: one input taking over 10 s is a hang; -rss_limit_mb: a parser that allocates
  # what a header claims without checking shows up as an out-of-memory crash.
  if "$BUILD/tests/fuzz/$t" "$WORK/$t/corpus" "tests/fuzz/corpus/$t" \
      -seed="${FUZZ_SEED:-1}" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix="$WORK/$t/artifacts/" -print_final_stats=1 >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz: $t: ${runs:-?} executions in ${SECONDS_PER_TARGET} s, no crash"
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
