#!/usr/bin/env bash
# Installs the dependencies of the test suite, builds everything and runs the whole suite. The
# build folder and configuration are scripts/demo.sh's, so neither rebuilds the other's work.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-deps.sh test
# TARMAC_WERROR=1 (CI sets it): a compiler warning fails the build.
cmake -S . -B build -G Ninja -DTARMAC_BUILD_TESTS=ON "-DTARMAC_WERROR=${TARMAC_WERROR:-OFF}" >/dev/null
cmake --build build -j2
# In two tiers: first the fast one (the C++ unit tests, every fuzz corpus replayed, the checked-in
# datasets: about a minute), so that a broken unit fails in minutes, not after the end-to-end
# runs; then everything else (end to end, Python, reliability, the S3 and Slurm servers).
FAST='^(test_.*|.*_replay|data_.*)$'
ctest --test-dir build --output-on-failure -j2 -R "$FAST"
ctest --test-dir build --output-on-failure -j2 -E "$FAST"
