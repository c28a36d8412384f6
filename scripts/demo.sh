#!/usr/bin/env bash
# Builds tarmac, makes a small HMR-style sample dataset, converts it and shows the result.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target tarmac
rm -rf demo-out && mkdir -p demo-out
/usr/bin/python3 scripts/make-sample-data.py demo-out/raw --samples 64 --archives 2 >/dev/null
echo "== tarmac convert (person crops 224x224, keypoints and boxes follow the crop)"
build/apps/tarmac convert demo-out/raw/part-*.tar.gz -o demo-out/dataset \
  --crop field:bbox_xywh --crop-scale 1.2 --square --size 224 \
  --points keypoints2d --boxes bbox_xywh --format jpg --quality 95
echo
echo "== tarmac info"
build/apps/tarmac info demo-out/dataset
echo
echo "== the shard is a plain tar:"
tar -tvf demo-out/dataset/shard-000000.tar | head -3
