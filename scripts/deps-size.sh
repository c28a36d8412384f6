#!/usr/bin/env bash
# What each set of scripts/setup-deps.sh costs on a fresh Debian 12, measured by apt itself
# without installing anything: apt-get resolves the set against a stand-in for a fresh
# debian:12 system (this machine's dpkg status cut down to the packages of priority required,
# the essential ones and apt, with what they depend on: the ~90 packages of the debian:12
# image) and an empty download cache, and prints its "Need to get" (download) and "After this
# operation" (installed size) lines. Needs apt's package lists (apt-get update) and python3.
#   scripts/deps-size.sh            the three sets
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/archives/partial"
/usr/bin/python3 - /var/lib/dpkg/status "$tmp/status" <<'EOF'
import re
import sys

src, dst = sys.argv[1:]
installed = {}
for block in open(src, encoding="utf-8").read().split("\n\n"):
    fields, key = {}, None
    for line in block.splitlines():
        if line.startswith(" ") and key:
            fields[key] += "\n" + line
            continue
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    if "install ok installed" in fields.get("Status", ""):
        installed[fields["Package"]] = (fields, block)
todo = [p for p, (f, _) in installed.items() if f.get("Priority") == "required" or f.get("Essential") == "yes"]
todo.append("apt")
base = set()
while todo:
    p = todo.pop()
    if p in base or p not in installed:
        continue
    base.add(p)
    for field in ("Pre-Depends", "Depends"):
        for alternatives in installed[p][0].get(field, "").split(","):
            names = [re.split(r"[ (:]", a.strip())[0] for a in alternatives.split("|") if a.strip()]
            present = [n for n in names if n in installed]
            if present:
                todo.append(present[0])
open(dst, "w", encoding="utf-8").write("\n\n".join(installed[p][1] for p in sorted(base)) + "\n")
print(f"baseline: {len(base)} packages (required, essential, apt and their dependencies)")
EOF
for set in build test ci; do
  mapfile -t pkgs < <(scripts/setup-deps.sh --list "$set")
  out=$(apt-get install --print-uris --no-install-recommends -o Debug::NoLocking=1 \
    -o Dir::State::status="$tmp/status" -o Dir::Cache::archives="$tmp/archives" "${pkgs[@]}")
  new=$(sed -n 's/.* \([0-9]*\) newly installed.*/\1/p' <<<"$out")
  get=$(sed -n 's/^Need to get \(.*\) of archives\./\1/p' <<<"$out")
  after=$(sed -n 's/^After this operation, \(.*\) of additional disk space will be used\./\1/p' <<<"$out")
  echo "$set: ${#pkgs[@]} named, $new packages installed, download $get, installed size $after"
done
