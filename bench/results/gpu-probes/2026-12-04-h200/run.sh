#!/usr/bin/env bash
# The third device run of stop 50 (not part of the project): where a copy's
# CPU time goes (a diagnostic libibp with cycle counters per phase), and
# whether the explorations' first use of a route costs the lines.
set -u
B=build/gpu
O=${OUT:-/tmp/out}
D=/tmp/D
mkdir -p "$O" "$D"
exec > >(tee "$O/log3.txt") 2>&1
date -u
ldconfig -p | grep -q libxxhash.so.0 || export LD_LIBRARY_PATH=$PWD/.lease/lib
DL=$PWD/.lease/diag/libibp.so
P=$PWD/.lease/profile.txt
head -c ${RND:-67108864} /dev/urandom >/tmp/rnd.bin
run() { # id side(A|B) regions env... -- command...
  local id=$1 side=$2 reg=$3
  shift 3
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  local extra=(--regions "$reg" --stats "$D/$id.json")
  [[ $side == A ]] && extra=(--disable)
  timeout 90 env "${envs[@]}" IBP_PROFILE="$P" IBP_PRELOAD_LIB="$DL" \
    IBP_DIAG_OUT="$D/$id.diag" IBP_WAIT_READY=1 "$B/tools/ibp" run ${SIM:+--sim} \
    "${extra[@]}" -- "$@" >"$D/$id.out" 2>"$D/$id.err"
  echo "$id rc=$? $(grep -o 'h2d_seconds=[0-9.]*' "$D/$id.out") $(head -n 1 "$D/$id.out" | cut -c1-60)"
  [[ -f $D/$id.diag ]] && cat "$D/$id.diag"
  [[ -f $D/$id.json ]] && python3 -c "
import json,sys; t=json.load(open(sys.argv[1]))['totals']
print('   ', {k: t[k] for k in ('copies_served','copies_staged','copies_batched','batch_launches','copies_gated','copies_timed','copies_explored')})" "$D/$id.json"
}
kvw=(kv_offload --blocks 1024 --prefill 1024 --block-bytes 64K --steps ${STEPS:-256} --window 32 --warmup 16)
kvp=(kv_offload --blocks 2048 --prefill 2000 --block-bytes 64K --steps 16 --window 32 --warmup 4 --fetch prefix)
wr=(weight_stream --data /tmp/rnd.bin --layers 16 --epochs 50 --warmup 5)
emb=(emb_gather --rows 341479 --dim 100 --batches 64 --batch-rows 2048 --warmup 4)
S=$B/samples
run kvw.A A x -- "$S/${kvw[0]}" "${kvw[@]:1}"
run kvw.B B min=64M,tensor=4K,name=kv -- "$S/${kvw[0]}" "${kvw[@]:1}"
run kvw.B.nostage B min=64M,tensor=4K,name=kv IBP_STAGING=0 IBP_BATCH=0 -- "$S/${kvw[0]}" "${kvw[@]:1}"
run kvw.B.driver B min=64M,tensor=4K,name=kv IBP_FORCE_ROUTE=driver -- "$S/${kvw[0]}" "${kvw[@]:1}"
run kvp.A A x -- "$S/${kvp[0]}" "${kvp[@]:1}"
run kvp.B B min=64M,tensor=4K,name=kv -- "$S/${kvp[0]}" "${kvp[@]:1}"
run kvp.B.nostage B min=64M,tensor=4K,name=kv IBP_STAGING=0 IBP_BATCH=0 -- "$S/${kvp[0]}" "${kvp[@]:1}"
run wr.A A x -- "$S/${wr[0]}" "${wr[@]:1}"
run wr.B B min=32M,tensor=4K,name=weights -- "$S/${wr[0]}" "${wr[@]:1}"
run wr.B.nostage B min=32M,tensor=4K,name=weights IBP_STAGING=0 IBP_BATCH=0 -- "$S/${wr[0]}" "${wr[@]:1}"
run emb.A A x -- "$S/${emb[0]}" "${emb[@]:1}"
run emb.B B min=64M,tensor=400,name=emb -- "$S/${emb[0]}" "${emb[@]:1}"
run emb.B.mprotect B min=64M,tensor=400,name=emb IBP_TRACKER=mprotect -- "$S/${emb[0]}" "${emb[@]:1}"
tar czf "$O/diag.tgz" -C /tmp D --exclude=rnd.bin
date -u
