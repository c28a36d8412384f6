#!/usr/bin/env bash
# Installs what tarmac needs from Debian 12's packages, by need:
#   scripts/setup-deps.sh [build]   building, installing, the .deb and the demo (the default)
#   scripts/setup-deps.sh test      + what the test suite adds (scripts/test.sh)
#   scripts/setup-deps.sh ci        + what only CI needs: clang for the sanitizers and fuzzing,
#                                   clang-format and mypy for the checks before the tests,
#                                   PyTorch for the torch tests, a one-node Slurm for
#                                   tests/e2e/test_slurm.py, Google Benchmark, Ceph's RGW for
#                                   tests/e2e/test_s3_lock.py (.ci/run)
#   scripts/setup-deps.sh --list SET   prints the packages of SET, installs nothing
# Each set includes the ones before it. The daemons (Slurm and munge; Swift, memcached and Ceph
# for scripts/s3-local.sh) are installed without being started and are left disabled (the tests
# run their own). Sizes: README, "Install".
set -euo pipefail

BUILD=(
  build-essential cmake ninja-build pkg-config
  libcli11-dev libarchive-dev zlib1g-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev libturbojpeg0-dev libwebp-dev
  libisal-dev libdeflate-dev
  # convert --dedup: XXH3-128 of decoded pixels (lib/transform/content_hash.h)
  libxxhash-dev
  # s3:// and https:// inputs: HTTP and AWS SigV4 signing (lib/remote)
  libcurl4-openssl-dev
  # cpack -G DEB (its dependency scan reads file types)
  file
  # the Python package (numpy) and the demo's generator (scripts/make-sample-data.py: PIL)
  python3 python3-numpy python3-pil
)
TEST=(
  catch2
  # the independent oracles and archive tools of the end-to-end tests
  python3-opencv libarchive-tools tar gzip zstd xz-utils bzip2 zip
  # scripts/convert-parallel.sh (tests/e2e/test_scale.py); the full-disk test's tmpfs
  parallel mount
  # tests/install: pip install ./python into a venv
  python3-venv
  # tests/e2e/test_s3.py: a real S3-compatible server (OpenStack Swift with s3api, memcached
  # for its tokens; scripts/s3-local.sh starts it) and a client the users have (boto3)
  swift-proxy swift-account swift-container swift-object memcached python3-boto3
  # test_s3.py's HTTPS server: its certificates, signed by a private authority
  openssl
)
CI=(
  # sanitizers and fuzzing (scripts/ci-sanitize.sh, scripts/ci-fuzz.sh): clang with libFuzzer,
  # llvm-symbolizer for readable stacks
  clang-14 libclang-rt-14-dev llvm-14
  # scripts/check-format.sh, CI's first check
  clang-format-14
  # scripts/check-types.sh: mypy --strict over python/tarmac (it reads python3-torch's hints)
  mypy
  # tests/python's torch tests (they skip without it)
  python3-torch python3-torchvision
  # tests/bench keeps compiling (built whenever Google Benchmark is there)
  libbenchmark-dev
  # tests/e2e/test_s3_lock.py: a server that honours conditional PUTs (If-None-Match: *), Ceph's
  # RGW on a one-node cluster (S3_SERVER=radosgw scripts/s3-local.sh); here, not in the test
  # set, for its size (60 packages, 70 MB to download, 275 MB installed); the test skips without
  radosgw ceph-mon ceph-osd
)
# tests/e2e/test_slurm.py runs scripts/convert-slurm.sbatch on a one-node Slurm it starts itself
SLURM=(slurmctld slurmd slurm-client munge)
# Packages whose daemons are never started as services (the tests run their own): every
# systemd unit and init script each ships is disabled when setup-deps.sh installs it.
DAEMONS=(munge slurmctld slurmd memcached swift-proxy swift-account swift-container swift-object
  radosgw ceph-mon ceph-osd)

list=0
if [ "${1:-}" = "--list" ]; then list=1; shift; fi
set_name="${1:-build}"
case "$set_name" in
  build) PKGS=("${BUILD[@]}") ;;
  test) PKGS=("${BUILD[@]}" "${TEST[@]}") ;;
  ci) PKGS=("${BUILD[@]}" "${TEST[@]}" "${CI[@]}" "${SLURM[@]}") ;;
  *) echo "usage: scripts/setup-deps.sh [--list] [build|test|ci]" >&2; exit 2 ;;
esac
if [ "$list" = 1 ]; then printf '%s\n' "${PKGS[@]}"; exit 0; fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi

# Daemons among the new packages (DAEMONS) are not started: a policy-rc.d that refuses every
# start for the time of the install (unless the machine has one of its own, as Debian's
# container images do), and afterwards every service they ship is disabled, for systemd and
# for SysV init alike. Services that were installed before are left as they are.
new_daemons=()
for d in "${DAEMONS[@]}"; do
  for p in "${missing[@]}"; do [ "$p" = "$d" ] && new_daemons+=("$d"); done
done
policy=""
if [ ${#new_daemons[@]} -gt 0 ] && [ ! -e /usr/sbin/policy-rc.d ]; then
  policy=/usr/sbin/policy-rc.d
  trap '$SUDO rm -f "$policy"' EXIT
  printf '#!/bin/sh\n# scripts/setup-deps.sh: no service starts while it installs\nexit 101\n' |
    $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
fi

$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

for p in "${new_daemons[@]}"; do
  for f in $(dpkg-query -L "$p" 2>/dev/null |
    grep -E '^(/usr)?/lib/systemd/system/[^/@]+\.service$|^/etc/init\.d/'); do
    case "$f" in
      /etc/init.d/*) $SUDO update-rc.d "$(basename "$f")" disable >/dev/null 2>&1 || true ;;
      *) $SUDO deb-systemd-helper disable "$(basename "$f")" >/dev/null 2>&1 || true ;;
    esac
  done
done
