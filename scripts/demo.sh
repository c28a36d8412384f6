#!/usr/bin/env bash
# Builds tarmac, makes a small HMR-style sample dataset, converts it and shows the result.
# Installs only what building and the demo need (scripts/setup-deps.sh build). It builds in
# build/ with the project's default configuration, as scripts/test.sh does, so that neither
# rebuilds what the other built.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-deps.sh build
cmake -S . -B build -G Ninja >/dev/null
# tarmac_c too: the Python package (PYTHONPATH=python) loads build/lib/read/libtarmac_c.so, and
# the last "next" step below uses it.
cmake --build build -j2 --target tarmac tarmac_c
rm -rf demo-out && mkdir -p demo-out
/usr/bin/python3 scripts/make-sample-data.py demo-out/raw --samples 64 --archives 2 >/dev/null
echo "== tarmac convert (person crops 224x224, keypoints and boxes follow the crop; the SMPL pose is declared, for the reader's flips)"
build/apps/tarmac convert demo-out/raw/part-*.tar.gz -o demo-out/dataset \
  --crop field:bbox_xywh --crop-scale 1.2 --square --size 224 \
  --points keypoints2d --boxes bbox_xywh --format jpg --quality 95 \
  --axis-angle smpl.global_orient smpl.body_pose:smpl-body
echo
echo "== tarmac info"
build/apps/tarmac info demo-out/dataset
echo
echo "== tarmac preview (a contact sheet: crops, keys, keypoints and boxes drawn)"
build/apps/tarmac preview demo-out/dataset -o demo-out/sheet.png
echo
echo "== what it made: demo-out/dataset"
ls -l demo-out/dataset
echo
# The listing is read whole (no `| head`: under pipefail, tar killed by SIGPIPE fails the script).
members=$(tar -tvf demo-out/dataset/shard-000000.tar)
echo "== the shard is a plain tar ($(wc -l <<<"$members") members), the first three:"
sed -n '1,3p' <<<"$members"
echo
echo "demo: done. Input archives in demo-out/raw/, the dataset in demo-out/dataset/, its contact"
echo "sheet in demo-out/sheet.png (open it: the keypoints sit on the crops); next, in $PWD:"
echo "  build/apps/tarmac verify demo-out/dataset --decode"
echo "  PYTHONPATH=python /usr/bin/python3 -c \"import tarmac; print(tarmac.Dataset('demo-out/dataset')[0]['__key__'])\""
