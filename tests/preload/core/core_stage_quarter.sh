#!/bin/sh
# core_stage quarter: 8 MiB of 1 KiB tensors, each fourth bf16 weights and
# the rest flat values (clusters=2: a cluster of their own, where the stage
# saves nothing and is off, so the stage codes a quarter of the region;
# chunk=2: the width whose search finds the two).  Under
# stage_quarter.profile the stage's decode of that quarter hides behind
# the link's copy and of the whole region would not (docs/PROFILE.md "Whether the stage pays"): the region must be
# stored with the stage on the weights' cluster alone, its decode charged
# on the tensors it codes -- the log's count near 2048 of 8192 -- and the
# statistics must say so.  A pick that charged the stage on every tensor
# (before the charge per tensor, or libibp's preparation passing the
# region's tensors instead of the stage's to ibp_profile_stage_pays)
# refuses it on time and fails here.
#   core_stage_quarter.sh PROGRAM          (IBP_LOG=info, IBP_STATS set)
set -eu
log=$IBP_STATS.log out=$IBP_STATS.out
"$1" quarter >"$out" 2>"$log" || { cat "$out" "$log"; exit 1; }
cat "$out" "$log"
grep -q "region 'core': no exponent stage: .*decode costs more" "$log" &&
  { echo "core_stage_quarter: refused on the decode's cost"; exit 1; }
line=$(grep -E "region 'core': exponent stage on [a-z0-9]+ values, on 1 of 2 cluster" "$log") ||
  { echo "core_stage_quarter: the stage not picked on one cluster of two"; exit 1; }
coded=$(printf '%s\n' "$line" | sed -nE 's/.* cluster\(s\), ([0-9]+) of 8192 tensors.*/\1/p')
echo "core_stage_quarter: the stage codes ${coded:-?} of 8192 tensors"
# a quarter, give or take what the estimate on a sample misses
if [ "${coded:-0}" -lt 1800 ] || [ "${coded:-0}" -gt 2300 ]; then
  echo "core_stage_quarter: not a quarter of the tensors"
  exit 1
fi
grep -q '"stage": "exp", "stage_pick": "exp", "stage_clusters": 1,' "$IBP_STATS" ||
  { echo "core_stage_quarter: the statistics do not say the stage, on one cluster"; exit 1; }
echo "core_stage_quarter: ok"
