#!/usr/bin/env bash
# Fails, listing the files, when a tracked C++ file is not as clang-format-14 formats it with
# the repository's .clang-format (CI's first check, a few seconds). Fix: scripts/check-format.sh --fix
# (or clang-format-14 -i FILE...).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format-14 >/dev/null || ./scripts/setup-deps.sh ci
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.hpp' '*.cc')
if [ "${1:-}" = --fix ]; then
  clang-format-14 -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format-14 --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} file(s) not formatted by clang-format-14: ${bad[*]}" >&2
  echo "check-format: run scripts/check-format.sh --fix" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
