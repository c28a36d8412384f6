#!/bin/bash
# Wide tables (#25 item 4): seconds for convert, verify, info and info --json on a 3-row CSV
# table of 25 000, 50 000 and 100 000 columns, one tarmac binary against another (main's
# build, say). Time that grows 4x per doubling of the columns is a search left in a loop.
# usage: scripts/bench/wide_tables.sh REF_TARMAC NEW_TARMAC [WORKDIR]
set -euo pipefail
REF=$(realpath "$1") NEW=$(realpath "$2") WORK=${3:-/tmp/tarmac-bench-wide}
mkdir -p "$WORK" && cd "$WORK"
for n in 25000 50000 100000; do
  [ -f "wide$n.csv" ] || /usr/bin/python3 - "$n" <<'PY'
import csv, io, sys, tarfile, cv2, numpy as np
n = int(sys.argv[1])
def cell(c, r):  # integers, floats, quoted text, empty cells, by column
    return [str((c * 7 + r * 13) % 199 - 99), "%.3f" % ((c * 31 + r * 17) % 1000 / 7.0),
            "t%d,%d" % (c, r), "" if (c + r) % 3 == 0 else str(c + r)][c % 4]
with open("wide%d.csv" % n, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["image_path"] + ["f%d" % c for c in range(n)])
    for r in range(3):
        w.writerow(["img/%03d.png" % r] + [cell(c, r) for c in range(n)])
with tarfile.open("img.tar", "w") as t:
    for r in range(3):
        b = cv2.imencode(".png", np.full((16, 16, 3), r * 40, np.uint8))[1].tobytes()
        ti = tarfile.TarInfo("img/%03d.png" % r); ti.size = len(b); t.addfile(ti, io.BytesIO(b))
PY
done
secs() { /usr/bin/time -f %e "$@" 2>&1 >/dev/null | tail -n 1; }
printf '%-8s %-8s %9s %9s %9s %12s\n' columns binary convert verify info "info --json"
for n in 25000 50000 100000; do
  for b in REF NEW; do
    bin=${!b}
    rm -rf "out$b"
    c=$(secs "$bin" convert img.tar --table "wide$n.csv" -o "out$b" --size 8)
    printf '%-8s %-8s %9s %9s %9s %12s\n' "$n" "$b" "$c" "$(secs "$bin" verify "out$b")" \
      "$(secs "$bin" info "out$b")" "$(secs "$bin" info "out$b" --json)"
  done
done
