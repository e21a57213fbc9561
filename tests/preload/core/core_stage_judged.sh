#!/bin/sh
# core_stage alternating (every other 1 KiB tensor of another kind: an
# evenly spaced sample of half the region would hold one kind only), twice:
# under IBP_PROFILE and under a copy of it where the stage's decode never
# pays (the stage priced out).  The region may be stored with the exponent
# stage only where that reads no more bytes over PCIe (bytes_read_pcie)
# than IBP alone (docs/ARCHITECTURE.md "Preparing a region": a choice
# learnt on a sample is judged on other tensors); the device's bytes the
# host's both times.  The samples see both kinds (ibp__sample_jittered):
# IBP alone finds their two clusters, and under IBP_PROFILE (where
# the stage's decode is free) the stage is used, as learnt on the whole
# region it saves bytes.
#   core_stage_judged.sh PROGRAM        (IBP_LOG=info, IBP_STATS, IBP_PROFILE)
set -eu
base=${IBP_STATS%.json}
priced=$base.priced.profile
sed -e 's/^name *=.*/name = stage-priced-out/' \
  -e 's/^stage_decode_gbps_per_sm *=.*/stage_decode_gbps_per_sm = 0.01/' \
  -e 's/^stage_tensor_us *=.*/stage_tensor_us = 1000/' "$IBP_PROFILE" >"$priced"

# run TAG [PROFILE]: the program's copy, its PCIe bytes into $pcie
run() {
  stats=$base.$1.json
  IBP_STATS=$stats IBP_PROFILE=${2:-$IBP_PROFILE} "$PROGRAM" alternating \
    2>"$base.$1.log" || { cat "$base.$1.log"; exit 1; }
  grep "region 'core'" "$base.$1.log" || true
  pcie=$(grep -o '"bytes_read_pcie": *[0-9]*' "$stats" | tail -n 1 | grep -o '[0-9]*$')
  echo "core_stage_judged $1: ${pcie:-none} bytes over PCIe"
  [ -n "$pcie" ] && [ "$pcie" -gt 0 ]
}
PROGRAM=$1
run chosen
chosen=$pcie
run priced "$priced"
alone=$pcie
grep -q "+ exponent stage" "$base.priced.log" &&
  { echo "core_stage_judged: the stage used where it was priced out"; exit 1; }
grep -q "+ exponent stage" "$base.chosen.log" ||
  { echo "core_stage_judged: the stage, which saves bytes on the region, not used"; exit 1; }
grep -q "2 cluster(s)" "$base.priced.log" ||
  { echo "core_stage_judged: IBP alone without the region's two clusters"; exit 1; }
[ "$chosen" -le "$alone" ] ||
  { echo "core_stage_judged: the choice reads $chosen bytes, IBP alone $alone"; exit 1; }
echo "core_stage_judged: ok"
