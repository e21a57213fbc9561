#!/bin/sh
# core_stage, then its log and stats: the region must be stored with the
# exponent stage, and
#   served:   its copy served by libibp (the stage's self-test passed);
#   fallback: its copy passed through, the stage's self-test reported failed
#             (SIMCUDA_KERNELS gives the device a broken stage decoder)
#   slow:     served, on a simulated GPU whose stage decodes at 1 GB/s per
#             SM (SIMCUDA_PROFILE: stage_slow.profile): the copy took the
#             stage's decode of its 8 MiB on at most its 132 SMs, 63.6 us
#             at least (the virtual clock charges the stage's term)
# -- the device's bytes the host's either way (core_stage.c checks them).
#   core_stage.sh PROGRAM served|fallback|slow (IBP_LOG=info, IBP_STATS set)
set -eu
log=$IBP_STATS.log out=$IBP_STATS.out
"$1" >"$out" 2>"$log" || { cat "$out" "$log"; exit 1; }
cat "$out" "$log"
grep -q "region 'core': .* + exponent stage, " "$log" ||
  { echo "core_stage: the region was not stored with the exponent stage"; exit 1; }
served=$(grep -o '"copies_served": [0-9]*' "$IBP_STATS" | head -1 | sed 's/.*: //')
failed=$(grep -c "exponent stage's self-test failed" "$log" || true)
echo "core_stage: ${served:-0} copies served, stage self-test failures reported: $failed"
us=$(sed -n 's/^core_stage: copy us=//p' "$out" | head -1)
case $2 in
served) [ "${served:-0}" -gt 0 ] && [ "$failed" -eq 0 ] ;;
slow)
  [ "${served:-0}" -gt 0 ] && [ "$failed" -eq 0 ] || exit 1
  awk -v us="${us:-0}" 'BEGIN { exit !(us >= 8388608 / (1e3 * 132)) }' ||
    { echo "core_stage: the copy took $us us, less than the stage's decode"; exit 1; }
  ;;
fallback) [ "${served:-0}" -eq 0 ] && [ "$failed" -eq 1 ] ;;
*) exit 2 ;;
esac
echo "core_stage: ok"
