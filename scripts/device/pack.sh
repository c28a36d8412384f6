#!/usr/bin/env bash
# Packs what scripts/device/run_all.sh needs from this build into one archive for the device
# machine (bare, no package archive): the reader bundle (scripts/bundle-reader.sh), a stripped
# tarmac and the libraries it needs beyond the bundle's (not the C/C++ runtimes), xz-compressed
# (~20 MB; a device call carries at most 64 MiB).
#
#   scripts/device/pack.sh carry/dev.tar.xz      (carry/ is git-ignored)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PACK="${1:?usage: scripts/device/pack.sh OUT.tar.xz}"
BIN="${TARMAC:-$ROOT/build/apps/tarmac}"
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
"$ROOT/scripts/bundle-reader.sh" "$STAGE/dev"
mkdir -p "$STAGE/dev/bin/lib"
strip -o "$STAGE/dev/bin/tarmac" "$BIN"
ldd "$BIN" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r dep; do
  name="$(basename "$dep")"
  case "$name" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*) ;;
    *) [ -e "$STAGE/dev/tarmac/lib/$name" ] || cp -L "$dep" "$STAGE/dev/bin/lib/" ;;
  esac
done
mkdir -p "$(dirname "$PACK")"
tar -cf - -C "$STAGE" dev | xz -T0 -6 > "$PACK"
echo "pack: $PACK, $(du -h "$PACK" | cut -f1)" >&2
