# Usage: check_lone.sh LIBIBP WORK_DIR WEIGHT_STREAM
# A program copying one pinned buffer of a few MB again and again, as
# NVIDIA's bandwidthTest does (pinned, one cudaMemcpyAsync per call, a 4 MiB
# buffer of the pattern i & 0xff), on both built-in profiles (issue R: such
# copies were held for a batch where the single launch was modelled about
# 5x cheaper; docs/ARCHITECTURE.md "The gate"):
#   - the result line is IBP_DISABLE=1's;
#   - every copy is served by a route of libibp's (the buffer stores in
#     2 %: every estimate prefers them to the driver's copy), none passed;
#   - a copy held for a batched launch is launched alone (as many launches
#     as batched copies: none waits for a partner that never comes);
#   - with batching off (IBP_BATCH=0) none is held;
# and as bandwidthTest times it (one buffer copied 16 times back to back,
# no synchronisation between, --repeat): each copy onto the last one's
# destination, no batch can hold two -- none is held beyond the first,
# none passed (a declined launch), and each copy takes the route it takes
# with batching off (the routes' counts within the one held; held for a
# batch of 16, then 2, the copies went to launches of one, a fifth of them
# declined to the driver: 8.7 ms a 100 copies against 6.5).
. "$(dirname "$0")/common.sh"
lib=$1 work=$2 ws=$3
mkdir -p "$work"
TMP_OUT=$work/lone.out
TMP_ERR=$work/lone.err
json=$work/lone.json
data=$work/pattern4m.bin
python3 -c 'import sys
open(sys.argv[1], "wb").write(bytes(i & 0xff for i in range(4 << 20)))' \
  "$data" || fail "cannot write $data"

# served: "SERVED BATCHED LAUNCHES PASSED" of the region in $json
served() {
  python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["regions"][0]
print(r["copies_served"], r["copies_batched"], r["batch_launches"],
      sum(r["passed"].values()))' "$json"
}

# routes: "DRIVER ZEROCOPY STAGED BATCHED" copies of the region in $json
routes() {
  python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["regions"][0]["routes"]
print(*(r.get(k, {}).get("copies", 0)
        for k in ("driver", "zerocopy", "staged", "batched")))' "$json"
}

# disabled ARGS...: the run without libibp; its result line in $base
disabled() {
  IBP_DISABLE=1 LD_PRELOAD=$lib run "$ws" "$@"
  base=$(head -n 1 "$TMP_OUT")
  echo "$base" | grep -Eq "$(result_regex weight_stream)" ||
    fail "the disabled run ($*): $base $(cat "$TMP_ERR")"
}

# with PROFILE BATCH ARGS...: the run with libibp (its statistics in
# $json), its result line the disabled run's
with() {
  _profile=$1 _batch=$2
  shift 2
  rm -f "$json"
  IBP_BATCH=$_batch IBP_PROFILE=$_profile \
    IBP_REGIONS=min=1M,tensor=4096,name=w IBP_WAIT_READY=1 \
    IBP_STATS=$json LD_PRELOAD=$lib run "$ws" "$@"
  [ "$rc" -eq 0 ] && [ "$(head -n 1 "$TMP_OUT")" = "$base" ] ||
    fail "$_profile IBP_BATCH=$_batch ($*): exit $rc, $(head -n 1 "$TMP_OUT")"
  checks=$((checks + 1))
}

args="--data $data --layers 1 --epochs 24 --warmup 1"
disabled $args
for profile in a100-pcie4 h100-pcie5; do
  for batch in 1 0; do
    with $profile $batch $args
    set -- $(served 2>/dev/null || echo -1 -1 -1 -1)
    echo "$profile IBP_BATCH=$batch: served $1, batched $2 in $3 launches"
    [ "$1" -eq 24 ] && [ "$4" -eq 0 ] && [ "$2" -eq "$3" ] &&
      { [ "$batch" = 1 ] || [ "$2" -eq 0 ]; } ||
      fail "$profile IBP_BATCH=$batch: $(cat "$json")"
  done
done

# bandwidthTest's loop
args="--data $data --layers 1 --repeat 16 --epochs 4 --warmup 1"
disabled $args
for profile in a100-pcie4 h100-pcie5; do
  for batch in 0 1; do
    with $profile $batch $args
    set -- $(served 2>/dev/null || echo -1 -1 -1 -1)
    held=$2 passed=$4
    set -- $(routes 2>/dev/null || echo -1 -1 -1 -1)
    echo "$profile --repeat IBP_BATCH=$batch: driver $1, zero-copy $2," \
      "staged $3, batched $4"
    if [ "$batch" = 0 ]; then
      alone_zc=$2 alone_st=$3
    else
      # the one held at most; the others as without batching (+-1)
      [ "$held" -le 1 ] && [ "$passed" -eq 0 ] &&
        [ $(($2 - alone_zc)) -le 1 ] && [ $((alone_zc - $2)) -le 1 ] &&
        [ $(($3 - alone_st)) -le 1 ] && [ $((alone_st - $3)) -le 1 ] ||
        fail "$profile --repeat: held $held, passed $passed," \
          "zero-copy $2 staged $3 (alone: $alone_zc, $alone_st): $(cat "$json")"
    fi
  done
done
finish
