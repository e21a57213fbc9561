# Usage: check_learn_alone.sh LIBIBP WORK_DIR EMB_GATHER CALL_CHEAP
# The gate finds out a driver cheaper than modelled for copies it holds
# for batched launches (docs/ARCHITECTURE.md, "The gate"): 400-byte row
# gathers on h100-pcie5, whose model holds them, each copy in a call of
# its own.  The batched class explores going alone only where that breaks
# no held batch (its stream's batch empty, nothing handed to the flusher),
# and the copy's single decision is then timed: the key's classes learn
# the driver's cost from it.  Every run prints the same result line as
# IBP_DISABLE=1:
#   - the simulated GPU as the model says (truth = prior): the rows stay
#     batched;
#   - on one whose driver copy call costs 0.05 us and its other calls half
#     (CALL_CHEAP, a truth profile: a driver's copy cheaper than libibp's
#     hold of a row): the driver's copies are timed and the rows go to the
#     driver -- more copies end on its route than batched, and the class's
#     choice ends there.  Never explored alone, the rows stayed batched at
#     0.38 of the driver's time.
. "$(dirname "$0")/common.sh"
lib=$1 work=$2 emb=$3 cheap=$4
mkdir -p "$work"
TMP_OUT=$work/alone.out
TMP_ERR=$work/alone.err
json=$work/alone.json
set -- --rows 20000 --dim 100 --batches 8 --batch-rows 1024
regions=min=1M,tensor=400,name=emb
truth_run h100-pcie5 h100-pcie5 "$regions" "$emb" "$@"
checks=$((checks + 1))
[ "$(route batched classes)" -ge 1 ] &&
  [ "$(route batched copies)" -gt $((10 * $(route driver copies))) ] ||
  fail "truth = prior: rows not kept batched: $(cat "$json")"
truth_run "$cheap" h100-pcie5 "$regions" "$emb" "$@"
checks=$((checks + 1))
[ "$(route driver timed)" -ge 2 ] && [ "$(route batched classes)" -eq 0 ] &&
  [ "$(route driver classes)" -ge 1 ] &&
  [ "$(route driver copies)" -gt "$(route batched copies)" ] ||
  fail "a driver cheaper than holding a row: rows still batched: $(cat "$json")"
finish
