# Usage: check_learn_call.sh LIBIBP WORK_DIR KV_BLOCKS PRIOR TRUTH
# The gate learns what the driver's part of an application's batch call
# costs (docs/ARCHITECTURE.md, "The gate"): kv_blocks loads its blocks
# with one cuMemcpyBatchAsync a step, under PRIOR, an H200's calibrated
# profile that models each entry set up like a copy of its own call
# (2.3 us), so that holding the entries for a batched launch looks cheaper;
# every run prints the same result line as IBP_DISABLE=1:
#   - on a simulated GPU that behaves as PRIOR says: the entries stay
#     batched (the class's choice ends there);
#   - on one whose entries are set up in 0.75 us (TRUTH, as the H200 ran
#     them): the driver's part of a call is timed whole, found cheaper, and
#     the class's choice ends on the driver's route, which takes most
#     entries.  Timed alone, an entry measured a copy of its own call and
#     the entries stayed batched (0.88 of the driver's time);
#   - under TRUTH as the prior too (a profile that measured the entries'
#     set-up, as `ibp calibrate` now does): the driver's route from the
#     start, nearly every entry (a prior that costs an entry as a copy of
#     its own call batches hundreds first).
. "$(dirname "$0")/common.sh"
lib=$1 work=$2 kv=$3 prior=$4 truth=$5
mkdir -p "$work"
TMP_OUT=$work/call.out
TMP_ERR=$work/call.err
json=$work/call.json
args="--blocks 1024 --slots 64 --steps 65 --window 16 --warmup 1"
# kv_run TRUTH [PRIOR]: kv_blocks under libibp (its profile PRIOR, by
# default $prior) on a GPU behaving as TRUTH
# shellcheck disable=SC2086 # $args: the sample's arguments, split
kv_run() {
  truth_run "$1" "${2:-$prior}" min=16M,tensor=256,name=kv "$kv" $args
}
kv_run "$prior"
checks=$((checks + 1))
[ "$(route batched classes)" -ge 1 ] &&
  [ "$(route batched copies)" -gt "$(route driver copies)" ] ||
  fail "truth = prior: entries not kept batched: $(cat "$json")"
kv_run "$truth"
checks=$((checks + 1))
[ "$(route driver classes)" -ge 1 ] && [ "$(route batched classes)" -eq 0 ] &&
  [ "$(route driver timed)" -ge 1 ] &&
  [ "$(route driver copies)" -gt "$(route batched copies)" ] ||
  fail "entries set up 3x cheaper: still batched: $(cat "$json")"
kv_run "$truth" "$truth"
checks=$((checks + 1))
[ "$(route driver classes)" -ge 1 ] && [ "$(route batched classes)" -eq 0 ] &&
  [ "$(route driver copies)" -gt $((20 * $(route batched copies))) ] ||
  fail "a prior that knows the entries' set-up: entries batched: $(cat "$json")"
finish
