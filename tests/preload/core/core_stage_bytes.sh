#!/bin/sh
# core_stage flat: 8 MiB of bf16 values whose sign and exponent are uniform
# (a code saves nothing on them: the choice keeps the stage off, 100.0 % of
# IBP alone's bytes) and whose 4 low mantissa bits are 0 (IBP saves those).  The region must
# be stored with IBP alone, served, the device's bytes the host's (checked
# by core_stage.c), and the reason recorded (logged, and the statistics'
# "stage_pick") must be the bytes
# (IBP_STAGE_PICK_BYTES: the stage stores no fewer bytes) -- not the
# profile's (the decode costs more than it saves), which would refuse it
# too (a mutant that dropped ibp_stage_pays from pick_stage, in
# preload/serve/prepare/compress.c, passed every other test).
#   core_stage_bytes.sh PROGRAM            (IBP_LOG=info, IBP_STATS set)
set -eu
log=$IBP_STATS.log out=$IBP_STATS.out
"$1" flat >"$out" 2>"$log" || { cat "$out" "$log"; exit 1; }
cat "$out" "$log"
grep -q "region 'core': .* + exponent stage, " "$log" &&
  { echo "core_stage_bytes: the stage used where it saves nothing"; exit 1; }
grep -Eq "region 'core': no exponent stage: [0-9.]+% of IBP alone's bytes (on a sample|in the region \(estimated on tensors it did not learn on\))$" "$log" ||
  { echo "core_stage_bytes: the refusal on bytes not logged"; exit 1; }
grep -q "region 'core': no exponent stage: .*decode costs more" "$log" &&
  { echo "core_stage_bytes: refused on the decode's cost, not on bytes"; exit 1; }
grep -q '"stage": "none", "stage_pick": "bytes", "stage_clusters": 0,' "$IBP_STATS" ||
  { echo "core_stage_bytes: the statistics do not say IBP alone, on bytes"; exit 1; }
served=$(grep -o '"copies_served": [0-9]*' "$IBP_STATS" | head -1 | sed 's/.*: //')
[ "${served:-0}" -gt 0 ] ||
  { echo "core_stage_bytes: no copy served"; exit 1; }
echo "core_stage_bytes: ok"
