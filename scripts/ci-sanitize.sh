#!/usr/bin/env bash
# Sanitizer builds, each in its own directory:
#  1. build-asan: the whole project with AddressSanitizer + UndefinedBehaviorSanitizer
#     (-DTARMAC_SANITIZE=ON) and the whole CTest suite; the e2e and reliability tests run the
#     instrumented tarmac binary.
#  2. build-tsan: ThreadSanitizer (-DTARMAC_TSAN=ON): the tarmac binary, run by the e2e
#     convert and input tests (reader, workers processing ahead, ordered writer), and the
#     CTests labelled `threads` (the reader's BatchLoader pool, the conversion pipeline,
#     parallel_for), built alone since nothing else there is multi-threaded.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-deps.sh ci
# Any report fails the test that caused it; a leak at exit is a report too.
export ASAN_OPTIONS="abort_on_error=0:detect_leaks=1:halt_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# -O1 -g1: about 40% less compile time than -O2 -g, line numbers kept for the reports.
# No benchmarks: nothing runs them here.
FLAGS=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
       -DTARMAC_BUILD_BENCH=OFF)
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan-suppressions.txt"

echo "sanitize: ASan + UBSan" >&2
cmake -S . -B build-asan "${FLAGS[@]}" -DTARMAC_SANITIZE=ON -DTARMAC_BUILD_TESTS=ON >/dev/null
cmake --build build-asan -j2
# Not `install` (label install): it checks packaging, and its Python part would load the
# instrumented library into python3 without the preload below.
# Tests that load libtarmac_c.so into python3 (the Python suite, and e2e tests that read
# through the package) run apart, with the preload below.
IN_PYTHON='^(python_.*|e2e_npy_dense|e2e_channels|e2e_s3_read|e2e_dedup)$'
ctest --test-dir build-asan --output-on-failure -j2 -E "$IN_PYTHON" -LE '^install$'
# The Python tests load the instrumented libtarmac_c.so into an uninstrumented python3: the
# ASan runtime (and libstdc++, for its __cxa_throw interceptor) must be loaded first, and
# python's own allocations still held at exit are not ours to report.
# Their DataLoader workers start from a fork server there (tests/CMakeLists.txt puts
# scripts/sanitize/sitecustomize.py on their path): this ASan runtime can hang a child forked
# from a threaded parent.
LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)" \
  ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" \
  ctest --test-dir build-asan --output-on-failure -j2 -R "$IN_PYTHON"

echo "sanitize: TSan" >&2
cmake -S . -B build-tsan "${FLAGS[@]}" -DTARMAC_TSAN=ON -DTARMAC_BUILD_TESTS=ON >/dev/null
cmake --build build-tsan -j2 --target tarmac test_read_dataset test_convert test_parallel_for
TARMAC="$PWD/build-tsan/apps/tarmac" /usr/bin/python3 tests/e2e/test_convert.py
TARMAC="$PWD/build-tsan/apps/tarmac" /usr/bin/python3 tests/e2e/test_inputs.py
# Zip members inflated by the workers, samples converted ahead included.
TARMAC="$PWD/build-tsan/apps/tarmac" /usr/bin/python3 tests/e2e/test_zip.py
# A graceful stop: the writer drains the workers, checkpoints, then joins the reader.
TARMAC="$PWD/build-tsan/apps/tarmac" /usr/bin/python3 tests/reliability/test_stop.py -k sigint
ctest --test-dir build-tsan --output-on-failure -L threads
