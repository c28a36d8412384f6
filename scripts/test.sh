#!/usr/bin/env bash
# Installs the dependencies of the test suite, builds everything and runs the whole suite. The
# build folder and configuration are scripts/demo.sh's, so neither rebuilds the other's work.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-deps.sh test
# TARMAC_WERROR=1 (CI sets it): a compiler warning fails the build.
cmake -S . -B build -G Ninja -DTARMAC_BUILD_TESTS=ON "-DTARMAC_WERROR=${TARMAC_WERROR:-OFF}" >/dev/null
cmake --build build -j2
ctest --test-dir build --output-on-failure -j2
