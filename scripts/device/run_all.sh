#!/usr/bin/env bash
# Every figure that needs the device machine, in one call (issues #4, #7, #15): the reader's GPU
# figures (gpu_figures.sh), safetensors interoperability with the real `safetensors` package,
# conversion scaling over 1..16 threads (convert_scaling.py), and derive with an SD-VAE-sized
# encoder over 1024² buckets (derive_gpu.py). A device call runs at most 10 minutes: choose
# parts with PARTS (e.g. PARTS="env derive"). The machine is bare and
# cannot fetch anything, so the build travels as one archive made here:
#
#   scripts/device/pack.sh carry/dev.tar.xz          # reader bundle + stripped tarmac + libs, ~20 MB
#   device run, carry ["carry/dev.tar.xz"]:  scripts/device/run_all.sh carry/dev.tar.xz $OUT
#
# Everything it prints also goes to OUT/logs (one tar, OUT/logs.tar, comes back). Each part
# runs even if an earlier one failed; the exit status is that of the first failure.
# env: W1=6400 HMR_SAMPLES=256 STEPS=300 RUNS=(gpu_figures.sh's) THREADS="1 2 4 8 12 16"
#      GPU_LIMIT=300 SCALING_LIMIT=200 (seconds) SCALING_ARGS=(more convert_scaling.py flags)
#      PARTS="env w1 hmr safetensors gpu scaling" (default; "derive" is separate: it needs most of
#      a call) DERIVE_PHOTOS=960 DERIVE_THREADS="1 2 4 8 16" DERIVE_BATCH=8 DERIVE_SIZE=1024
#      DERIVE_LIMIT=420
set -uo pipefail
PACK="${1:?usage: run_all.sh PACK.tar.xz OUTDIR}" OUT="${2:?outdir}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
W="${WORK:-/tmp/tarmac-device}"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
rm -rf "$W" && mkdir -p "$W" "$OUT/logs"
tar -xJf "$PACK" -C "$W" 2>/dev/null ||
  "$PY" -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$PACK" "$W" || exit 1
# tarmac runs with its own libraries; Python (torch, OpenCV) keeps the machine's.
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$W/dev/tarmac/lib:$W/dev/bin/lib" "$W/dev/bin/tarmac" > "$W/tarmac"
chmod +x "$W/tarmac"
T="$W/tarmac"
status=0
PARTS=" ${PARTS:-env w1 hmr safetensors gpu scaling} "
part() {  # part NAME COMMAND...: runs one part, its output to the screen and OUT/logs/NAME.txt
  local name=$1; shift
  [[ "$PARTS" == *" $name "* ]] || return 0
  echo "== $name: $*"
  local t0=$SECONDS
  "$@" 2>&1 | tee "$OUT/logs/$name.txt"
  local rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc, $((SECONDS - t0)) s"
  [ "$rc" -ne 0 ] && [ "$status" -eq 0 ] && status=$rc
  return 0
}
environment() {
  uname -srm; ldd --version | head -1; nproc; free -g | sed -n 2p
  grep -m1 'model name' /proc/cpuinfo
  command -v lscpu >/dev/null && lscpu | grep -E '^(Thread|Core|Socket|NUMA node\(s\)|L3)' 
  "$PY" -c "import sys, numpy, torch; print('python', sys.version.split()[0], 'numpy', numpy.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  LD_LIBRARY_PATH="$W/dev/tarmac/lib:$W/dev/bin/lib" ldd "$W/dev/bin/tarmac" | grep -c 'not found' | sed 's/^/libraries not found: /'
  "$T" --version
}
hmr() {  # a small HMR-style dataset with string fields, for the safetensors check
  "$PY" "$ROOT/scripts/make-sample-data.py" "$W/raw" --samples "${HMR_SAMPLES:-256}" --archives 2 >/dev/null &&
    "$T" convert "$W"/raw/part-*.tar.gz -o "$W/hmr" --crop field:bbox_xywh --crop-scale 1.2 --square \
      --size 224 --points keypoints2d --boxes bbox_xywh --quality 95 &&
    "$T" verify "$W/hmr" --decode
}
w1() {  # W1 frames, the conversion benchmark's input and, converted, the training data
  "$PY" "$ROOT/scripts/bench/make_workloads.py" "$W/w1" --w1 "${W1:-6400}" --formats tar &&
    "$T" convert "$W/w1/w1.tar" -o "$W/train" --crop field:bbox_xywh --crop-scale 1.2 --square \
      --size 224 --points keypoints2d --boxes bbox_xywh --quality 95
}
derive() {  # W2 photos (1-3 MP) in 1024² buckets, then derive_gpu.py
  "$PY" "$ROOT/scripts/bench/make_workloads.py" "$W/w2" --w2 "${DERIVE_PHOTOS:-960}" >/dev/null &&
    "$T" convert -q "$W/w2/w2.tar" -o "$W/buckets" --resize bucket --size "${DERIVE_SIZE:-1024}" --quality 90 &&
    # shellcheck disable=SC2086
    PYTHONPATH="$W/dev" TARMAC_LIB="$W/dev/tarmac/libtarmac_c.so" timeout "${DERIVE_LIMIT:-420}" \
      "$PY" "$ROOT/scripts/device/derive_gpu.py" "$W/buckets" --threads ${DERIVE_THREADS:-1 2 4 8 16} \
      --batch-size "${DERIVE_BATCH:-8}" --tarmac "$T" --json "$OUT/logs/derive.json"
}
# The training matrix: the GPU's ceiling (synthetic), the loader's (loader), and training with
# 0..12 loader workers, for a small CNN and for ResNet-50 in bf16.
RUNS_DEFAULT="synthetic:small:batched:0:128"
for w in 0 1 2 4 8 12; do RUNS_DEFAULT+=" train:small:batched:$w:128"; done
for w in 4 8; do RUNS_DEFAULT+=" train:small:per-sample:$w:128"; done
for w in 1 2 4 8; do RUNS_DEFAULT+=" loader:small:batched:$w:128"; done
RUNS_DEFAULT+=" synthetic:resnet50:batched:0:128:amp"
for w in 2 4 8; do RUNS_DEFAULT+=" train:resnet50:batched:$w:128:amp"; done
part env environment
part w1 w1
part hmr hmr
part safetensors env PYTHONPATH="$W/dev" TARMAC_LIB="$W/dev/tarmac/libtarmac_c.so" \
  "$PY" "$ROOT/scripts/device/safetensors_check.py" "$W/hmr" "$W/train"
part gpu env STEPS="${STEPS:-300}" RUNS="${RUNS:-$RUNS_DEFAULT}" THREADS="${THREADS:-1 2 4 8 12 16}" \
  SCALE_SAMPLES=6400 timeout "${GPU_LIMIT:-300}" "$ROOT/scripts/device/gpu_figures.sh" "$W/dev" "$W/train" "$OUT/logs/gpu"
# shellcheck disable=SC2086
part scaling timeout "${SCALING_LIMIT:-200}" "$PY" "$ROOT/scripts/device/convert_scaling.py" "$W/w1/w1.tar" \
  --tarmac "$T" --threads ${THREADS:-1 2 4 8 12 16} --work "$W/scaling" ${SCALING_ARGS:-}
part derive derive
tar -cf "$OUT/logs.tar" -C "$OUT" logs && rm -rf "$OUT/logs"
exit "$status"
