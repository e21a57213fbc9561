#!/usr/bin/env bash
# How fast libibp prepares a region (docs/ARCHITECTURE.md, "Preparing a
# region"), on the simulated driver: bench_prepare pins N bytes of bf16
# weights and times its first copy, which waits (IBP_WAIT_READY=1) until the
# region is compressed and set up (a profile under which the kernel serves
# every copy, so the copy checks the served path).  Best of 3 per size (a
# noisy machine), and the least CPU seconds (user + system, every thread)
# of the 3 waits, per GiB: what a loaded machine inflates least.  "first
# chunk usable": when the first 32 tensors' streams were in place, from the
# start of compression (libibp's stats).
#   bash bench/prepare.sh [build-dir] [sizes...]   (default build/release;
#                                                   256M 1G 4G)
#   IBP_THREADS=N  compression threads (default here: 2)
#   IBP_PROFILE=F  the device profile (default tests/preload/kernel_path.profile,
#                  where the exponent stage pays on these weights;
#                  tests/preload/core/stage_slow.profile: it does not, so the
#                  region goes without it -- its choice still made)
# The stage the region got is printed (libibp's log: stage or none).
set -euo pipefail
build=${1:-build/release}
shift || true
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(256M 1G 4G)
root=$(cd "$(dirname "$0")/.." && pwd)
bench=$build/tests/preload/core/bench_prepare
lib=$build/preload/libibp.so
[[ -x $bench && -f $lib ]] || {
  echo "prepare.sh: build first: cmake --build --preset release" >&2
  exit 2
}
export LD_LIBRARY_PATH=$build/sim/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
threads=${IBP_THREADS:-2}
bytes_of() { numfmt --from=iec "$1"; }
for size in "${sizes[@]}"; do
  best=""
  cpu=""
  for _ in 1 2 3; do
    stats=$(mktemp)
    log=$(mktemp)
    line=$(IBP_THREADS=$threads IBP_WAIT_READY=1 IBP_STATS=$stats \
      IBP_PROFILE=${IBP_PROFILE:-$root/tests/preload/kernel_path.profile} \
      IBP_LOG=info IBP_REGIONS="min=1M,name=weights" LD_PRELOAD=$lib \
      "$bench" "$(bytes_of "$size")" 2>"$log")
    stage=$(grep -q "exponent stage on" "$log" && echo stage || echo none)
    rm -f "$log"
    s=$(sed -n 's/.*ready_seconds=\([0-9.]*\).*/\1/p' <<<"$line")
    c=$(sed -n 's/.*cpu_seconds=\([0-9.]*\).*/\1/p' <<<"$line")
    if [[ -z $cpu ]] || awk -v a="$c" -v b="$cpu" 'BEGIN{exit !(a<b)}'; then
      cpu=$c
    fi
    extra=$(sed -n 's/.*extra_peak_fraction=\([0-9.]*\).*/\1/p' <<<"$line")
    shadow=$(python3 -c "import json,sys; r=json.load(open('$stats'))['regions'][0]; print('%.3f %.3f %d %.3f' % (r['compressed_bytes']/r['bytes'], r['prepare_peak_bytes']/r['bytes'], r['copies_served'], r['first_chunk_seconds']))")
    rm -f "$stats"
    if [[ -z $best ]] || awk -v a="$s" -v b="${best%% *}" 'BEGIN{exit !(a<b)}'; then
      best="$s $extra $shadow"
    fi
  done
  read -r s extra stored peak served first <<<"$best"
  awk -v size="$size" -v s="$s" -v t="$threads" -v b="$(bytes_of "$size")" \
    -v extra="$extra" -v stored="$stored" -v peak="$peak" -v served="$served" \
    -v first="$first" -v cpu="$cpu" -v stage="$stage" \
    'BEGIN { limit = 0.5 + b / (1e9 * t);
      printf "%-5s threads %d: first chunk usable after %.3f s, fully ready in %.3f s (limit 0.5 s + size/(1 GB/s x threads) = %.3f s), %.2f GB/s; CPU %.3f s (%.3f s per GiB); exponent stage: %s; stored %.3f of the region; peak extra host memory %.3f of the region (RSS), libibp counts %.3f; copy served: %s\n",
        size, t, first, s, limit, b / s / 1e9, cpu, cpu * 1073741824 / b, stage, stored, extra, peak, served ? "yes" : "no" }'
done
