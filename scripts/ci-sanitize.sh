#!/usr/bin/env bash
# Sanitizer builds, each in its own directory:
#  1. build-asan: the whole project with AddressSanitizer + UndefinedBehaviorSanitizer
#     (-DTARMAC_SANITIZE=ON) and the whole CTest suite; the e2e and reliability tests run the
#     instrumented tarmac binary.
#  2. build-tsan: ThreadSanitizer (-DTARMAC_TSAN=ON), only the tarmac binary, run by the e2e
#     convert tests: conversion is the only multi-threaded code (reader, workers, writer).
set -euo pipefail
cd "$(dirname "$0")/.."
# Any report fails the test that caused it; a leak at exit is a report too.
export ASAN_OPTIONS="abort_on_error=0:detect_leaks=1:halt_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"

echo "sanitize: ASan + UBSan" >&2
cmake -S . -B build-asan -G Ninja -DTARMAC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-asan -j2
ctest --test-dir build-asan --output-on-failure -j2

echo "sanitize: TSan" >&2
cmake -S . -B build-tsan -G Ninja -DTARMAC_TSAN=ON -DTARMAC_BUILD_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-tsan -j2 --target tarmac
TARMAC="$PWD/build-tsan/apps/tarmac" /usr/bin/python3 tests/e2e/test_convert.py
