#!/usr/bin/env bash
# Fails when `mypy --strict` finds an error in the Python package's annotations (python/tarmac,
# with the settings of mypy.ini; CI's `types` phase, after `format`, a minute cold and seconds
# with its cache in .mypy_cache/). Prints mypy's summary line. Debian's mypy, run by the python3
# the tests use, so that it reads that interpreter's numpy and torch hints.
set -euo pipefail
cd "$(dirname "$0")/.."
/usr/bin/python3 -c "import mypy" 2>/dev/null || ./scripts/setup-deps.sh ci
/usr/bin/python3 -m mypy --config-file mypy.ini
