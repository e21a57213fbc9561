# Usage: check_probe_retry.sh LIBIBP WORK_DIR KV_BLOCKS
# A set-up probe reshapes an application's batch call (docs/ARCHITECTURE.md,
# "The gate": its first timed driver part made as two driver calls, one
# half with entries halved); a reshaped call the driver refuses is made
# again as the application's, so the application sees what it would see
# without libibp.  kv_blocks loads its blocks with one cuMemcpyBatchAsync
# a step, under h100-pcie5 (its decoder's figures a guess: the class's
# first timed driver part is probed); the simulated driver refuses the
# nth batch call (SIMCUDA_FAIL) for n = 1 .. 4:
#   - each run either ends as the disabled run does (its result line:
#     the same bytes) or fails as kv_blocks does on a refused call of its
#     own;
#   - in some run a refused call was libibp's: the run ended as the
#     disabled one though a call was refused;
#   - and some run failed: libibp hides no refusal of the application's
#     own calls.
. "$(dirname "$0")/common.sh"
lib=$1 work=$2 kv=$3
mkdir -p "$work"
TMP_OUT=$work/retry.out
TMP_ERR=$work/retry.err
args="--blocks 256 --slots 64 --steps 5 --window 16 --warmup 1"
# shellcheck disable=SC2086 # $args: the sample's arguments, split
IBP_DISABLE=1 LD_PRELOAD=$lib run "$kv" $args
base=$(head -n 1 "$TMP_OUT")
[ "$rc" -eq 0 ] || fail "disabled run: exit $rc: $(cat "$TMP_ERR")"
hidden=0 seen=0
for n in 1 2 3 4; do
  # shellcheck disable=SC2086
  SIMCUDA_FAIL=cuMemcpyBatchAsync:$n IBP_PROFILE=h100-pcie5 \
    IBP_REGIONS=min=16M,tensor=256,name=kv IBP_WAIT_READY=1 \
    LD_PRELOAD=$lib run "$kv" $args
  grep -q "SIMCUDA_FAIL: cuMemcpyBatchAsync.*call $n of" "$TMP_ERR" ||
    fail "call $n: no call refused: $(cat "$TMP_ERR")"
  if [ "$rc" -eq 0 ]; then
    [ "$(head -n 1 "$TMP_OUT")" = "$base" ] ||
      fail "call $n refused: result $(head -n 1 "$TMP_OUT") vs $base"
    hidden=$((hidden + 1))
  else
    grep -q 'kv_blocks: cudaMemcpyBatchAsync failed: unknown error' "$TMP_ERR" ||
      fail "call $n refused: exit $rc: $(cat "$TMP_ERR")"
    seen=$((seen + 1))
  fi
done
checks=$((checks + 1))
[ "$hidden" -ge 1 ] || fail "no probe's refused call was made again"
checks=$((checks + 1))
[ "$seen" -ge 1 ] || fail "no refusal of kv_blocks' own calls reached it"
finish
