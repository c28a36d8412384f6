#!/usr/bin/env bash
# Installs the dependencies of the test suite, builds everything and runs the whole suite. The
# build folder and configuration are scripts/demo.sh's, so neither rebuilds the other's work.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-deps.sh test
# TARMAC_WERROR=1 (CI sets it): a compiler warning fails the build.
cmake -S . -B build -G Ninja -DTARMAC_BUILD_TESTS=ON "-DTARMAC_WERROR=${TARMAC_WERROR:-OFF}" >/dev/null
cmake --build build -j2
# In three tiers: first the fast one (the C++ unit tests, every fuzz corpus replayed, the
# checked-in datasets: about a minute), so that a broken unit fails in minutes, not after the
# end-to-end runs; then everything else but the tests that start servers (end to end, Python,
# reliability); then those (label `servers`: the S3 servers, Slurm). TARMAC_SERVER_TESTS=later
# leaves the last tier to the caller (.ci/run runs it after the sanitizers and the fuzzers).
FAST='^(test_.*|.*_replay|data_.*)$'
ctest --test-dir build --output-on-failure -j2 -R "$FAST"
if [ "${TARMAC_SERVER_TESTS:-now}" = later ]; then
  ctest --test-dir build --output-on-failure -j2 -E "$FAST" -LE '^servers$'
else
  ctest --test-dir build --output-on-failure -j2 -E "$FAST"
fi
