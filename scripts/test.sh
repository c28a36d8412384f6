#!/usr/bin/env bash
# Installs the dependencies of the test suite, builds everything and runs the whole suite. The
# build folder and configuration are scripts/demo.sh's, so neither rebuilds the other's work.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-deps.sh test
cmake -S . -B build -G Ninja -DTARMAC_BUILD_TESTS=ON >/dev/null
cmake --build build -j2
ctest --test-dir build --output-on-failure -j2
