# Usage: check_learn.sh LIBIBP WORK_DIR EMB_GATHER KV_BLOCKS CALLS4X WEIGHT_STREAM
#                       A100_CALLS4X
# The gate learns what its batched launches cost where it runs
# (docs/ARCHITECTURE.md, "The gate"): 256-byte row gathers on a100-pcie4,
# whose model holds them for batched launches, from libibp's statistics
# (routes); every run prints the same result line as IBP_DISABLE=1:
#   - the simulated GPU as the model says (truth = prior): the rows stay
#     batched (the class's choice ends on `batched`), and some batched
#     launches are timed;
#   - the simulated GPU's decode 100x slower than the profile says
#     (SIMCUDA_DECODE_SCALE=100, a prior far too kind): after a few timed
#     launches the rows go to the driver -- more copies end on the driver's
#     route than batched, and the class's choice ends there;
#   - kv_blocks' 64 KiB blocks on h100-pcie5, where the model leaves them
#     to the driver, on a simulated GPU whose driver calls and copy-engine
#     set-up are 4x dearer (CALLS4X, a truth profile): the batched route is
#     explored as a batch -- its launches carry more than one copy each
#     (a batch of one measures a launch's fixed costs alone).  Whether it is
#     then taken varies from run to run (a timed span may include waiting
#     behind the stream's earlier copies), so that is not checked here;
#   - bf16 weight copies of 512 KiB on h100-pcie5, whose model prefers the
#     staged route, on the same truth: the first staged and driver copies
#     are timed while the region's upload shares the link, their spans
#     dropped -- but the calls they measured on the host are believed, and
#     no more than the first copy is staged, on the prior (the staged
#     copies' calls cost 3.7x their model there; the driver's copies are
#     faster; 3-4 were staged while those calls were dropped with the
#     spans; none where the driver's calls were measured first);
#   - the same weight copies on a100-pcie4 under its own calls-4x truth
#     (A100_CALLS4X), two streams: what the staged route's timed copies
#     measured of its calls is no dearer than the truth makes them (each
#     call 4x its model: the route's cpu_seconds at most 4x its
#     cpu_model_seconds) -- the timing's own calls, the events that say
#     whether a copy shared another stream's timed span (beside.h), are set
#     aside (read as the route's: 4.10x in 2 runs of 3).
. "$(dirname "$0")/common.sh"
lib=$1 work=$2 emb=$3 kv=$4 calls4x=$5 ws=$6 a100_calls4x=$7
mkdir -p "$work"
TMP_OUT=$work/learn.out
TMP_ERR=$work/learn.err
json=$work/learn.json
libibp_run() {
  rm -f "$json"
  IBP_PROFILE=a100-pcie4 IBP_REGIONS=min=1M,tensor=256,name=emb \
    IBP_WAIT_READY=1 IBP_STATS=$json LD_PRELOAD=$lib run "$@"
  [ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP_ERR")"
  [ "$(head -n 1 "$TMP_OUT")" = "$base" ] ||
    fail "result differs: $(head -n 1 "$TMP_OUT") vs $base"
}

set -- --rows 20000 --dim 64 --batches 8 --batch-rows 1024
IBP_DISABLE=1 LD_PRELOAD=$lib run "$emb" "$@"
base=$(head -n 1 "$TMP_OUT")

libibp_run "$emb" "$@"
checks=$((checks + 1))
[ "$(route batched classes)" -ge 1 ] && [ "$(route batched timed)" -ge 1 ] &&
  [ "$(route batched copies)" -gt $((10 * $(route driver copies))) ] ||
  fail "truth = prior: rows not kept batched, or no launch timed: $(cat "$json")"

SIMCUDA_DECODE_SCALE=100 libibp_run "$emb" "$@"
checks=$((checks + 1))
[ "$(route batched timed)" -ge 2 ] && [ "$(route batched classes)" -eq 0 ] &&
  [ "$(route driver classes)" -ge 1 ] &&
  [ "$(route driver copies)" -gt "$(route batched copies)" ] ||
  fail "decode 100x slower than modelled: rows still batched: $(cat "$json")"

truth_run "$calls4x" h100-pcie5 min=16M,tensor=256,name=kv "$kv" \
  --blocks 256 --slots 64 --steps 17 --window 16 --warmup 1
checks=$((checks + 1))
[ "$(route batched explored)" -ge 1 ] && [ "$(region batch_launches)" -ge 1 ] &&
  [ "$(region copies_batched)" -gt "$(region batch_launches)" ] ||
  fail "calls 4x dearer: kv_blocks' batched route not explored as a batch: $(cat "$json")"

truth_run "$calls4x" h100-pcie5 min=4M,tensor=1K,name=weights "$ws" \
  --size 16M --dtype bf16 --layers 32 --epochs 5 --warmup 1
checks=$((checks + 1))
[ "$(route staged copies)" -le 1 ] && [ "$(region copies_timed)" -ge 2 ] ||
  fail "calls 4x dearer: weight copies staged on the prior: $(cat "$json")"

truth_run "$a100_calls4x" a100-pcie4 min=4M,tensor=1K,name=weights "$ws" \
  --size 16M --dtype bf16 --layers 32 --epochs 5 --warmup 1
checks=$((checks + 1))
[ "$(route staged timed)" -ge 1 ] &&
  python3 -c 'import sys
sys.exit(float(sys.argv[1]) > 4.0 * 1.005 * float(sys.argv[2]))' \
    "$(route staged cpu_seconds)" "$(route staged cpu_model_seconds)" ||
  fail "calls 4x dearer: staged copies' calls read dearer than they are: $(cat "$json")"
finish
