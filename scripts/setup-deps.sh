#!/usr/bin/env bash
# Installs everything tarmac needs to build and test, from Debian 12's packages.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
PKGS=(
  # build
  build-essential cmake ninja-build pkg-config git
  # cpack -G DEB (its dependency scan reads file types; tests/install)
  file
  # libraries
  libcli11-dev libarchive-dev zlib1g-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev libturbojpeg0-dev libwebp-dev
  libisal-dev
  # microbenchmarks (tests/bench, run by hand)
  libbenchmark-dev
  catch2
  # tests: archive tools and the independent oracles (numpy, OpenCV, PIL)
  python3 python3-numpy python3-opencv python3-pil python3-torch python3-torchvision libarchive-tools tar gzip zstd xz-utils bzip2 zip
  # scale-out: scripts/convert-parallel.sh runs the parts with GNU parallel; tests/e2e/test_slurm.py
  # runs scripts/convert-slurm.sbatch on a one-node Slurm it starts itself (about 13 MB installed)
  parallel slurmctld slurmd slurm-client munge
  # sanitizers and fuzzing (scripts/ci-sanitize.sh, scripts/ci-fuzz.sh): clang with libFuzzer,
  # llvm-symbolizer for readable stacks, mount for the full-disk test's tmpfs
  clang-14 libclang-rt-14-dev llvm-14 mount
)
if ! dpkg -s "${PKGS[@]}" >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${PKGS[@]}"
fi
