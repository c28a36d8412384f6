#!/usr/bin/env bash
# The reader's GPU figures in one run on the device machine (issue #4): the training example
# with 0/2/4/8 loader workers (samples/s, data-wait fraction, GPU utilisation), batch decoding
# with 1..16 threads, and torchvision's (GPU) JPEG decoder against tarmac's. Runs from the
# repository root with a reader bundle (scripts/bundle-reader.sh) and a converted HMR-style
# dataset carried along; works on CPU too.
#
#   scripts/device/gpu_figures.sh BUNDLE DATASET OUTDIR
#
# Prepared here (carry/ is git-ignored, so the device tool's `carry` can take it; <= 64 MiB):
#   scripts/bundle-reader.sh carry/bundle                        # 32 MB
#   scripts/make-sample-data.py carry/raw --samples 1024 && tarmac convert carry/raw/*.tar.gz \
#     -o carry/hmr --crop field:bbox_xywh --crop-scale 1.2 --square --size 224 --points keypoints2d
#   device run, carry ["carry/bundle", "carry/hmr"]: scripts/device/gpu_figures.sh carry/bundle carry/hmr $OUT
#   env: STEPS=200 WORKERS="0 2 4 8" (or RUNS, below) THREADS="1 2 4 8 16" DECODE_SAMPLES=2048
#        SCALE_SAMPLES=4096
#        DEVICE=(cuda if present)
set -euo pipefail
BUNDLE="${1:?usage: gpu_figures.sh BUNDLE DATASET OUTDIR}" DATA="${2:?dataset}" OUT="${3:?outdir}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
export TARMAC_LIB="$BUNDLE/tarmac/libtarmac_c.so" PYTHONPATH="$BUNDLE"
DEVICE_ARGS=()
[ -n "${DEVICE:-}" ] && DEVICE_ARGS=(--device "$DEVICE")
{
  date -u
  nproc
  "$PY" -c "import sys, numpy, torch; print(sys.version.split()[0], 'numpy', numpy.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
} > "$OUT/env.txt" 2>&1
# Training runs, each MODE:MODEL:LOADER:WORKERS:BATCH[:amp] (examples/train_keypoints.py):
# "synthetic" is the GPU's ceiling (no loader), "loader" the loader's (no model), "train" both.
WORKERS="${WORKERS:-0 2 4 8}"
DEFAULT_RUNS="synthetic:small:batched:0:64"
for w in $WORKERS; do DEFAULT_RUNS+=" train:small:batched:$w:64"; done
DEFAULT_RUNS+=" train:small:per-sample:${WORKERS##* }:64"
for run in ${RUNS:-$DEFAULT_RUNS}; do
  IFS=: read -r mode model loader w batch amp <<< "$run"
  log="$OUT/train_${mode}_${model}_${loader}_w${w}_b${batch}${amp:+_$amp}.log"
  "$PY" "$ROOT/examples/train_keypoints.py" "$DATA" --steps "${STEPS:-200}" --workers "$w" \
    --batch-size "$batch" --mode "$mode" --model "$model" --loader "$loader" ${amp:+--amp} \
    "${DEVICE_ARGS[@]}" > "$log" 2>&1
  echo "$run: $(tail -1 "$log")"
done
# shellcheck disable=SC2086
"$PY" "$ROOT/scripts/device/decode_scaling.py" "$DATA" --samples "${SCALE_SAMPLES:-4096}" --threads ${THREADS:-1 2 4 8 16} | tee "$OUT/decode_scaling.txt"
# torchvision's JPEG decoder (on the GPU when there is one) against tarmac's CPU decoding.
if "$PY" -c "import torchvision" 2>/dev/null; then
  DEV=()
  [ -n "${DEVICE:-}" ] && DEV=(--device "$DEVICE")
  "$PY" "$ROOT/scripts/device/gpu_decode.py" "$DATA" "${DEV[@]}" --samples "${DECODE_SAMPLES:-2048}" | tee "$OUT/gpu_decode.txt"
else
  echo "torchvision not installed: no GPU decode comparison" | tee "$OUT/gpu_decode.txt"
fi
