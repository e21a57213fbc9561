#!/usr/bin/env bash
# libibp's CPU time per copy it leaves to the driver (docs/ARCHITECTURE.md
# "The gate", quiet runs), on the simulated driver or a real one:
# bench_hold under LD_PRELOAD=libibp.so gathering 64 KiB blocks of a
# 64 MiB region of 4 KiB tensors onto the device, 256 a round, 5 runs,
# under a profile whose gate leaves such blocks to the driver (default:
# the H200's calibrated profile of 2026-12-04, where kv_offload's blocks
# all went to the driver).  Prints the medians of the copy calls' CPU time
# per copy with libibp disabled (A) and serving (B), and B - A: what libibp
# costs a copy it does not serve.
#   bash bench/gated_cost.sh [build-dir] [profile]
#       (default build/release and bench/results/gpu/2026-12-04-h200-3/profile.txt)
set -euo pipefail
build=${1:-build/release}
profile=${2:-bench/results/gpu/2026-12-04-h200-3/profile.txt}
bench=$build/tests/preload/core/bench_hold
lib=$build/preload/libibp.so
[[ -x $bench && -f $lib && -f $profile ]] || {
  echo "gated_cost.sh: build first (cmake --build --preset release); profile $profile" >&2
  exit 2
}
if [[ -d $build/sim/lib ]] && ! command -v nvidia-smi >/dev/null; then
  export LD_LIBRARY_PATH=$build/sim/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # side env...
  local side=$1
  shift
  local v=()
  for _ in 1 2 3 4 5; do
    v+=("$(env "$@" IBP_PROFILE="$profile" IBP_WAIT_READY=1 \
      IBP_REGIONS=size=64M,tensor=4K,name=blocks IBP_STATS="$tmp/$side.json" \
      LD_PRELOAD="$lib" "$bench" 9 256 64 65536 2>/dev/null |
      sed -n 's/^ns_per_copy=//p')")
  done
  printf '%s\n' "${v[@]}" | sort -g | sed -n 3p
}
a=$(run A IBP_DISABLE=1)
b=$(run B IBP_LOG=warn)
gated=$(python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['totals']; print(t['copies_gated'], 'of', t['copies_gated'] + t['copies_served'])" "$tmp/B.json")
echo "64 KiB blocks, ns per copy call: A $a, B $b (left to the driver: $gated)"
awk -v a="$a" -v b="$b" 'BEGIN { printf "libibp per copy left to the driver: %.0f ns\n", b - a }'
