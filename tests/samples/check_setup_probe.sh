# Usage: check_setup_probe.sh LIBIBP WORK_DIR KV_BLOCKS LINKTHIRD CALLS4X
# A span dearer than its model is a slower link or a dearer set-up, and
# the gate probes the copy engine's set-up to tell them apart
# (serve/choose/engine_probe.h; docs/ARCHITECTURE.md "The gate"):
# kv_blocks' calls of 64 entries under the built-in h100-pcie5 prior, every
# run printing the same result line as IBP_DISABLE=1:
#   - on a simulated GPU whose link is a third as wide (LINKTHIRD): the
#     entries measure 2.1x their model, the probe finds the set-up as
#     modelled, and no batched launch is explored (read as set-up, the
#     excess made a batched call hopeful: one call explored, 2.3 % of the
#     run);
#   - on one whose driver calls and set-up are 4x dearer (CALLS4X): the
#     probe finds the set-up 4x, the batched launch is explored early and
#     takes most entries (1.8x the driver's time).
. "$(dirname "$0")/common.sh"
lib=$1 work=$2 kv=$3 linkthird=$4 calls4x=$5
mkdir -p "$work"
TMP_OUT=$work/probe.out
TMP_ERR=$work/probe.err
json=$work/probe.json
args="--blocks 256 --slots 64 --steps 17 --window 16 --warmup 1"
# kv_run TRUTH: kv_blocks under libibp on the h100-pcie5 prior, on a GPU
# behaving as TRUTH
# shellcheck disable=SC2086 # $args: the sample's arguments, split
kv_run() {
  truth_run "$1" h100-pcie5 min=16M,tensor=256,name=kv "$kv" $args
}
kv_run "$linkthird"
checks=$((checks + 1))
[ "$(route driver timed)" -ge 1 ] && [ "$(route batched copies)" -eq 0 ] ||
  fail "a link a third as wide: batched launches explored: $(cat "$json")"
kv_run "$calls4x"
checks=$((checks + 1))
[ "$(route batched copies)" -gt $((4 * $(route driver copies))) ] ||
  fail "set-up 4x dearer: the batched launch not found: $(cat "$json")"
finish
