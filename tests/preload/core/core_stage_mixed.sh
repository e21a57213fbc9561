#!/bin/sh
# core_stage_mixed under IBP_FORCE_ROUTE=batched, then its log and
# statistics: the first region ('stage', 1 KiB tensors) stored with the
# exponent stage, the second ('block', 16 KiB tensors) without it (the
# kernel's block path has no stage: docs/FORMAT.md §9.6), copies of both
# served by batched launches -- which then decode every unit by a block,
# the stage region's tensors copied from the original -- and the device's
# bytes the host's (core_stage_mixed.c checks them).
#   core_stage_mixed.sh PROGRAM      (IBP_LOG=info, IBP_STATS set)
set -eu
export IBP_REGIONS='nth=1,tensor=1024,clusters=1,name=stage;nth=2,tensor=16384,clusters=1,name=block'
log=$IBP_STATS.log
"$1" 2>"$log" || { cat "$log"; exit 1; }
cat "$log"
grep -q "region 'stage': .* + exponent stage, " "$log" ||
  { echo "core_stage_mixed: 'stage' was not stored with the exponent stage"; exit 1; }
grep -q "region 'block': exponent stage not tried" "$log" ||
  { echo "core_stage_mixed: 'block' does not say why it has no stage"; exit 1; }
# copies_batched of each region (the regions' objects in order, then the
# totals)
batched=$(grep -o '"copies_batched": [0-9]*' "$IBP_STATS" | sed 's/.*: //' | tr '\n' ' ')
echo "core_stage_mixed: copies batched (stage, block, ...): $batched"
set -- $batched
[ "${1:-0}" -gt 0 ] && [ "${2:-0}" -gt 0 ] ||
  { echo "core_stage_mixed: not both regions' copies batched"; exit 1; }
echo "core_stage_mixed: ok"
