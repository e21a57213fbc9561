#!/usr/bin/env bash
# libibp's CPU time per copy held for a batched launch (the profile's
# ibp_hold_us, docs/PROFILE.md), on the simulated driver: bench_hold under
# LD_PRELOAD=libibp.so, 5 runs; prints the medians of the hold (the copy
# calls) and of the flush's share (the synchronize that launches the
# batch: libibp's work and the simulated driver's cost of its calls), and
# their sum.  A profile with a long batch_deadline_us keeps every flush
# out of the timed copy calls, and IBP_FORCE_ROUTE=batched holds every
# row (left to the gate, about half went to the driver, whose calls then
# counted as the hold: 3.2 us a row).  The mprotect tracker: the userfaultfd
# tracker's scan of the span at each flush costs with the span, not with
# the copies, and libibp charges its modelled cost where it happens.
#   bash bench/batch_hold.sh [build-dir]        (default build/release)
set -euo pipefail
build=${1:-build/release}
bench=$build/tests/preload/core/bench_hold
lib=$build/preload/libibp.so
ibp=$build/tools/ibp
[[ -x $bench && -f $lib && -x $ibp ]] || {
  echo "batch_hold.sh: build first: cmake --build --preset release" >&2
  exit 2
}
export LD_LIBRARY_PATH=$build/sim/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$ibp" profile a100-pcie4 |
  sed 's/^batch_deadline_us = .*/batch_deadline_us = 1000000/' >"$tmp/p"
hold=() flush=()
for _ in 1 2 3 4 5; do
  out=$(IBP_PROFILE=$tmp/p IBP_WAIT_READY=1 IBP_TRACKER=mprotect IBP_FORCE_ROUTE=batched \
    IBP_REGIONS=size=64M,tensor=256,name=rows LD_PRELOAD=$lib "$bench")
  hold+=("$(sed -n 's/^ns_per_copy=//p' <<<"$out")")
  flush+=("$(sed -n 's/^sync_ns_per_copy=//p' <<<"$out")")
done
median() { printf '%s\n' "$@" | sort -g | sed -n 3p; }
h=$(median "${hold[@]}")
f=$(median "${flush[@]}")
echo "held 256-byte rows of a 64 MiB region, ns/copy: hold $h, flush $f"
awk -v h="$h" -v f="$f" 'BEGIN { printf "libibp per held copy: %.0f ns (profile ibp_hold_us)\n", h + f }'
