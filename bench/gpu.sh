#!/usr/bin/env bash
# bench/gpu.sh -- what a machine with an NVIDIA GPU measures, in one
# command (bench/README.md, "On a GPU"):
#
#   1. nvidia-smi must list a GPU;
#   2. `ibp calibrate --out build/gpu/profile.txt`: the device cost profile
#      of this GPU (docs/PROFILE.md) -- skipped with a note while the
#      subcommand is not built;
#   3. `ctest --preset release -L gpu`: the tests that need a GPU;
#   4. `bench/ab --backend gpu --profiles [build/gpu/profile.txt,]a100-pcie4,h100-pcie5`:
#      the A/B benchmark with the samples' CUDA event timing (measured
#      time; the profile steers libibp's gate), docs/RESULTS.md.
#
#   bash bench/gpu.sh [-- BENCH_AB_ARGS...]     e.g. bash bench/gpu.sh -- --quick
#
# Builds build/release with the samples on NVIDIA's runtime
# (-DIBP_SAMPLES_RUNTIME=toolkit; needs the CUDA Toolkit).  Stops at the
# first step that fails, with its exit status.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PROG=gpu
# shellcheck source=bench/lib/common.sh
. bench/lib/common.sh

ab_args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --)
      shift
      ab_args=("$@")
      break
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument '$1' (bench/ab's arguments go after --)" ;;
  esac
done

# 1. the GPU
gpu_present || die "nvidia-smi lists no GPU: this script is for a machine with one (bench/ab runs on the simulated GPU without it)"
log "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)"

# the build: everything, the samples on NVIDIA's runtime
need_tools cmake:cmake cc:gcc c++:g++ make:make
cmake --preset release -DIBP_SAMPLES_RUNTIME=toolkit >/dev/null || die "cmake could not configure build/release"
cmake --build --preset release -j "$(nproc 2>/dev/null || echo 2)" >/dev/null || die "the build failed"
ibp=build/release/tools/ibp

# 2. calibration
profiles=a100-pcie4,h100-pcie5
mkdir -p build/gpu
if "$ibp" --help 2>&1 | grep -Eq '^ +calibrate( |$)'; then
  log "ibp calibrate --out build/gpu/profile.txt"
  "$ibp" calibrate --out build/gpu/profile.txt || die "ibp calibrate failed"
  "$ibp" profile build/gpu/profile.txt >/dev/null || die "ibp calibrate wrote a profile that does not read back"
  profiles=build/gpu/profile.txt,$profiles
else
  log "note: 'ibp calibrate' is not built yet: no profile of this GPU; the built-ins only"
fi

# 3. the tests that need a GPU
n=$(ctest --preset release -L gpu -N 2>/dev/null | sed -n 's/^Total Tests: *//p')
if [[ ${n:-0} -eq 0 ]]; then
  log "note: no test carries the 'gpu' label yet"
else
  log "ctest --preset release -L gpu ($n tests)"
  ctest --preset release -L gpu || die "tests labelled gpu failed"
fi

# 4. the A/B benchmark, measured
log "bench/ab --backend gpu --profiles $profiles ${ab_args[*]}"
bench/ab --backend gpu --profiles "$profiles" "${ab_args[@]}"
