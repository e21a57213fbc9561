# NVTX ranges around served copies (preload/serve/nvtx.h): with an NVTX
# tool attached -- here nvtx_inject.c standing in for Nsight Systems,
# through NVTX_INJECTION64_PATH -- every copy libibp serves is one range in
# the domain "libibp", named after its region, its bytes as payload.
#   sh nvtx.sh IBP GEN WORKDIR SAMPLES_DIR PRELOAD SIMDIR INJECT
# Skipped (77) without libibp.so, the simulated driver, the sample or the
# injection library (libibp.so built without the NVTX headers).
. "$(dirname "$0")/common.sh"
SAMPLES=$4
PRELOAD=$5
SIMDIR=$6
INJECT=$7
for f in "$PRELOAD" "$SIMDIR/libcuda.so.1" "$SAMPLES/weight_stream" "$INJECT"; do
  [ -e "$f" ] || { echo "skipped: $f is not built"; exit 77; }
done
export IBP_PRELOAD_LIB="$PRELOAD" IBP_SIM_LIB_DIR="$SIMDIR"
unset IBP_REGIONS IBP_CONFIG IBP_STATS IBP_DISABLE IBP_DISCOVER IBP_PROFILE LD_PRELOAD
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0"
ws="--size 16M --layers 4 --epochs 3 --quiet"

# served: of 12 copies of 4 MiB, those the gate serves (an epoch's first
# on an idle stream may go to the driver), each in one closed range named
# 'weights', and no range for the others
# shellcheck disable=SC2086
IBP_WAIT_READY=1 NVTX_INJECTION64_PATH=$INJECT run run --sim --stats "$FILES/s.json" \
  --regions 'size=16777216,name=weights' -- "$SAMPLES/weight_stream" $ws
expect_eq "exit status" "$rc" 0
served=$(grep -o '"copies_served": *[0-9]*' "$FILES/s.json" | tail -n 1 | grep -o '[0-9]*$')
[ "${served:-0}" -ge 6 ] || fail "copies served: '$served', expected most of 12"
expect_eq "the tool's count" "$(grep '^nvtx:' "$ERR")" \
  "nvtx: domain libibp: $served ranges, $served closed, $((served * 4194304)) bytes, first 'weights'"
rm -f "$FILES/s.json"

# nothing served (libibp disabled): no range
# shellcheck disable=SC2086
NVTX_INJECTION64_PATH=$INJECT run run --sim --disable -- "$SAMPLES/weight_stream" $ws
checks=$((checks + 1))
! grep -q '^nvtx:' "$ERR" || [ "$(grep '^nvtx:' "$ERR")" = "nvtx: domain libibp: 0 ranges, 0 closed, 0 bytes, first ''" ] ||
  fail "ranges without served copies: $(cat "$ERR")"

expect_files
finish
