#!/bin/sh
# core_stage, then its log and stats: the region must be stored with the
# exponent stage, and
#   served:   its copy served by libibp (the stage's self-test passed);
#   fallback: its copy passed through, the stage's self-test reported failed
#             (SIMCUDA_KERNELS gives the device a broken stage decoder)
# -- the device's bytes the host's either way (core_stage.c checks them).
#   core_stage.sh PROGRAM served|fallback      (IBP_LOG=info, IBP_STATS set)
set -eu
log=$IBP_STATS.log
"$1" 2>"$log" || { cat "$log"; exit 1; }
cat "$log"
grep -q "region 'core': .* + exponent stage, " "$log" ||
  { echo "core_stage: the region was not stored with the exponent stage"; exit 1; }
served=$(grep -o '"copies_served": [0-9]*' "$IBP_STATS" | head -1 | sed 's/.*: //')
failed=$(grep -c "exponent stage's self-test failed" "$log" || true)
echo "core_stage: ${served:-0} copies served, stage self-test failures reported: $failed"
case $2 in
served) [ "${served:-0}" -gt 0 ] && [ "$failed" -eq 0 ] ;;
fallback) [ "${served:-0}" -eq 0 ] && [ "$failed" -eq 1 ] ;;
*) exit 2 ;;
esac
echo "core_stage: ok"
