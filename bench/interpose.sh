#!/usr/bin/env bash
# The cost libibp adds to copies outside every region (target: bench/README.md,
# "Targets"), on the simulated driver: bench_passthrough with
# and without LD_PRELOAD=libibp.so, alternating, 5 times each; prints the
# median of each and the difference.
#   bash bench/interpose.sh [build-dir]        (default build/release)
set -euo pipefail
build=${1:-build/release}
bench=$build/tests/preload/core/bench_passthrough
lib=$build/preload/libibp.so
[[ -x $bench && -f $lib ]] || {
  echo "interpose.sh: build first: cmake --build --preset release" >&2
  exit 2
}
export LD_LIBRARY_PATH=$build/sim/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
run() { "$@" | sed -n 's/^ns_per_copy=//p'; }
without=() with=()
for _ in 1 2 3 4 5; do
  without+=("$(run "$bench")")
  with+=("$(IBP_REGIONS=size=1M,name=elsewhere LD_PRELOAD=$lib run "$bench")")
done
median() { printf '%s\n' "$@" | sort -g | sed -n 3p; }
a=$(median "${without[@]}")
b=$(median "${with[@]}")
echo "copy outside every region, ns/call: without libibp $a, with libibp $b"
awk -v a="$a" -v b="$b" 'BEGIN { printf "added by libibp: %.1f ns/call (target <= 50)\n", b - a }'
