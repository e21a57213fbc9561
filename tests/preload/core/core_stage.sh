#!/bin/sh
# core_stage, then its log and stats: the region must be stored with the
# exponent stage (its statistics' "stage" "exp", on its one cluster), and
#   served:   its copy served by libibp (the stage's self-test passed);
#   fallback: its copy passed through, the stage's self-test reported failed
#             (SIMCUDA_KERNELS gives the device a broken stage decoder)
#   slow:     the three copies served, on a simulated GPU whose stage decodes
#             at 1 GB/s per SM (SIMCUDA_PROFILE: stage_slow.profile): the
#             timed copy took the stage's decode of its 8 MiB on at most
#             its 132 SMs, 63.6 us at least (the virtual clock charges the
#             stage's term), and less than 10x that
#   model:    the three copies served by the kernel (zero-copy), libibp's model
#             and the simulated GPU the same profile (stage_dear.profile,
#             where the stage's decode is most of a copy's time): the
#             route's timed copies measured within 5 % of its prior (the
#             routes price the stage)
#   model_staged: the same, the staged path forced: its decodes measured
#             within 5 % of the decode probe's model
# -- the device's bytes the host's either way (core_stage.c checks them).
#   core_stage.sh PROGRAM served|fallback|slow|model|model_staged
#   (IBP_LOG=info, IBP_STATS set)
set -eu
log=$IBP_STATS.log out=$IBP_STATS.out
"$1" >"$out" 2>"$log" || { cat "$out" "$log"; exit 1; }
cat "$out" "$log"
grep -q "region 'core': .* + exponent stage, " "$log" ||
  { echo "core_stage: the region was not stored with the exponent stage"; exit 1; }
served=$(grep -o '"copies_served": [0-9]*' "$IBP_STATS" | head -1 | sed 's/.*: //')
failed=$(grep -c "exponent stage's self-test failed" "$log" || true)
grep -q '"stage": "exp", "stage_pick": "exp", "stage_clusters": 1,' "$IBP_STATS" ||
  { echo "core_stage: the statistics do not say the region got the stage"; exit 1; }
echo "core_stage: ${served:-0} copies served, stage self-test failures reported: $failed"
us=$(sed -n 's/^core_stage: copy us=//p' "$out" | head -1)
# within PART of 1: measured X over modelled Y (both > 0)
near() {
  awk -v x="${1:-0}" -v y="${2:-0}" 'BEGIN { exit !(x > 0 && y > 0 &&
    x <= 1.05 * y && x >= 0.95 * y) }'
}
stat() { # the first "NAME": value of the statistics (the region's)
  grep -o "\"$1\": [0-9.e+-]*" "$IBP_STATS" | head -1 | sed 's/.*: //'
}
case $2 in
served) [ "${served:-0}" -gt 0 ] && [ "$failed" -eq 0 ] || exit 1 ;;
slow)
  [ "${served:-0}" -eq 3 ] && [ "$failed" -eq 0 ] || exit 1
  awk -v us="${us:-0}" 'BEGIN { b = 8388608 / (1e3 * 132)
    exit !(us >= b && us < 10 * b) }' ||
    { echo "core_stage: the copy took $us us, not the stage's decode"; exit 1; }
  ;;
model)
  [ "${served:-0}" -eq 3 ] && [ "$failed" -eq 0 ] || exit 1
  zc=$(sed -nE 's/.*"zerocopy": \{[^}]*"measured_seconds": ([0-9.e+-]+), "model_seconds": ([0-9.e+-]+).*/\1 \2/p' "$IBP_STATS" | head -1)
  echo "core_stage: zero-copy measured, modelled (s): $zc"
  near $zc ||
    { echo "core_stage: the zero-copy route's prior is not its time"; exit 1; }
  ;;
model_staged)
  [ "${served:-0}" -eq 3 ] && [ "$failed" -eq 0 ] &&
    [ "$(stat copies_staged)" = 3 ] || exit 1
  m=$(stat staged_decode_seconds) e=$(stat staged_decode_model_seconds)
  echo "core_stage: staged decodes measured $m s, modelled $e s"
  near "$m" "$e" ||
    { echo "core_stage: the staged decodes' model is not their time"; exit 1; }
  ;;
fallback) [ "${served:-0}" -eq 0 ] && [ "$failed" -eq 1 ] || exit 1 ;;
*) exit 2 ;;
esac
echo "core_stage: ok"
