# `ibp run --discover` on the samples (docs/USING.md, "Finding the
# regions"): the report lists the pinned buffer and its copies, the rule it
# suggests is the one that fits, and running with that rule serves copies
# that read fewer bytes over PCIe than they deliver -- with the same bytes
# on the device.  Also the exit summary's note on copies made before
# compression finished.
#   sh discover.sh IBP GEN WORKDIR SAMPLES_DIR PRELOAD SIMDIR KERNEL_PROFILE PROG
# KERNEL_PROFILE: tests/preload/kernel_path.profile, under which the gate
# serves every copy with the kernel (the built-in profiles leave small
# copies, such as emb_gather's 256-byte rows, to the driver).  PROG:
# discover_prog.c (pageable-only copies; 2D copies).
# Skipped (77) without libibp.so, the simulated driver or the samples.
. "$(dirname "$0")/common.sh"
SAMPLES=$4
PRELOAD=$5
SIMDIR=$6
KERNEL_PROFILE=$7
PROG=$8
for f in "$PRELOAD" "$SIMDIR/libcuda.so.1" "$SAMPLES/weight_stream" "$SAMPLES/emb_gather" \
  "$SAMPLES/kv_blocks" "$PROG"; do
  [ -e "$f" ] || { echo "skipped: $f is not built"; exit 77; }
done
export IBP_PRELOAD_LIB="$PRELOAD" IBP_SIM_LIB_DIR="$SIMDIR"
unset IBP_REGIONS IBP_CONFIG IBP_STATS IBP_DISABLE IBP_DISCOVER IBP_PROFILE IBP_WAIT_READY LD_PRELOAD
# (A sanitizer build's libibp.so brings the ASan runtime along.)
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0"

# last_json KEY FILE: the last value of KEY in FILE (the totals' one).
last_json() {
  grep -o "\"$1\": *[0-9]*" "$2" | tail -n 1 | grep -o '[0-9]*$'
}

# discover NAME EXPECTED_ROW EXPECTED_RULE ARGS...: the discovery run
# prints the sample's result line unchanged, the table row of its pinned
# buffer and exactly the rule expected.  Sets $rule and $base.
discover() {
  name=$1 row=$2 want=$3
  shift 3
  run run --sim --disable -- "$SAMPLES/$name" "$@" --quiet
  base=$(head -n 1 "$OUT")
  expect_eq "$name baseline exit status" "$rc" 0
  run run --sim --discover -- "$SAMPLES/$name" "$@" --quiet
  expect_eq "$name --discover exit status" "$rc" 0
  expect_eq "$name --discover result" "$(head -n 1 "$OUT")" "$base"
  checks=$((checks + 1))
  grep -q '^\[ibp\] discover: 1 pinned allocation; host-to-device copies from 1 of them$' "$ERR" ||
    fail "$name: no discovery header: $(cat "$ERR")"
  checks=$((checks + 1))
  grep -Eq -- "$row" "$ERR" || fail "$name: no row matching '$row': $(cat "$ERR")"
  rule=$(sed -n "s/^IBP_REGIONS='\\(.*\\)'\$/\\1/p" "$ERR")
  expect_eq "$name suggested rule" "$rule" "$want"
}

# saves NAME PROFILE ARGS...: with the suggested rule, the same bytes
# arrive, copies are served, and they read fewer bytes over PCIe than
# they deliver.
saves() {
  name=$1 profile=$2
  shift 2
  json=$FILES/$name.json
  rm -f "$json"
  IBP_WAIT_READY=1 IBP_PROFILE=$profile run run --sim --regions "$rule" \
    --stats "$FILES/$name-%p.json" -- "$SAMPLES/$name" "$@" --quiet
  expect_eq "$name with the rule: exit status" "$rc" 0
  expect_eq "$name with the rule: result" "$(head -n 1 "$OUT")" "$base"
  # %p: the stats file is named after the sample's process
  set -- "$FILES/$name"-[0-9]*.json
  checks=$((checks + 1))
  [ -s "$1" ] || { fail "$name: no stats file $FILES/$name-<pid>.json"; return; }
  served=$(last_json copies_served "$1")
  requested=$(last_json bytes_requested "$1")
  pcie=$(last_json bytes_read_pcie "$1")
  echo "$name ($profile): rule '$rule': served $served copies, $requested B requested, $pcie B over PCIe"
  expect_true "$name copies served" "${served:-0} > 0"
  expect_true "$name bytes over PCIe < bytes requested" "${pcie:-0} < ${requested:-0}"
  rm -f "$FILES/$name"-*.json
}

# ---- weight_stream: 4 layers of 4 MiB, read 3 times (the default profile's
# gate leaves smaller layers to the driver) ---------------------------------
ws="--size 16M --layers 4 --epochs 3"
# shellcheck disable=SC2086
discover weight_stream '^ +1 +16\.0 MiB +12 +48\.0 MiB +3\.0x +no +4\.0 MiB x12$' \
  'size=16777216,tensor=4096,name=pinned1' $ws
# weights unchanged after their first copy: compact is offered, apart
checks=$((checks + 1))
grep -q '^\[ibp\] discover: allocation nth=1 did not change after its first copy: add mode=compact' "$ERR" ||
  fail "weight_stream: no compact suggestion: $(cat "$ERR")"
# shellcheck disable=SC2086
saves weight_stream a100-pcie4 $ws

# ---- emb_gather: 2048 rows of 256 B from a 20000-row table --------------------
eg="--rows 20000 --dim 64 --batches 4 --batch-rows 512"
# shellcheck disable=SC2086
discover emb_gather '^ +1 +4\.9 MiB +2048 +512\.0 KiB +0\.1x +no +256 B x2048$' \
  'size=5120000,tensor=256,name=pinned1' $eg
# shellcheck disable=SC2086
saves emb_gather "$KERNEL_PROFILE" $eg

# ---- kv_blocks: 4096 blocks x layers loaded with cudaMemcpyBatchAsync --------
# (discovery sees each entry of the batches, as libibp serves them)
# (the tensor size by the codec's trial on the buffer's bytes: 512 B
# saves most on its KV blocks)
discover kv_blocks '^ +1 +64\.0 MiB +4096 +256\.0 MiB +4\.0x +no +64\.0 KiB x4096$' \
  'size=67108864,tensor=512,name=pinned1'

# ---- 2D copies: each row is a copy, as libibp serves them ------------------------
run run --sim --discover -- "$PROG" 2d
expect_eq "2d: exit status" "$rc" 0
checks=$((checks + 1))
grep -Eq '^ +1 +2\.0 MiB +1536 +6\.0 MiB +3\.0x +no +4\.0 KiB x1536$' "$ERR" &&
  grep -q "^IBP_REGIONS='size=2097152,tensor=4096,name=pinned1'\$" "$ERR" ||
  fail "2D copies not seen: $(cat "$ERR")"

# ---- 80 pinned buffers of varied sizes (bandwidthTest's shmoo mode): one
# min= rule, and the line fed back to ibp run is accepted and serves them
# (against `ibp analyze`: discover_analyze.sh)
for m in many many-mixed; do
  run run --sim --discover -- "$PROG" $m
  expect_eq "$m: exit status" "$rc" 0
  rule=$(sed -n "s/^IBP_REGIONS='\(.*\)'\$/\1/p" "$ERR")
  rules=$(printf '%s' "$rule" | tr ';' '\n' | grep -c .)
  echo "$m: $rules rules, ${#rule} characters"
  checks=$((checks + 1))
  [ -n "$rule" ] && [ "$rules" -le 32 ] || fail "$m: no whole rule line: $(cat "$ERR")"
  if [ $m = many ]; then
    checks=$((checks + 1))
    [ "$rules" -eq 1 ] && printf '%s' "$rule" | grep -q '^min=' ||
      fail "many: not covered by one min= rule: '$rule'"
  else
    checks=$((checks + 1))
    [ ${#rule} -gt 1022 ] && grep -q '^\[ibp\] discover: 48 more allocations worth a rule left out' "$ERR" ||
      fail "many-mixed: no long line, or no note on the rule limit: '$rule'"
  fi
  IBP_WAIT_READY=1 IBP_PROFILE=$KERNEL_PROFILE run run --sim --regions "$rule" \
    --stats "$FILES/$m.json" -- "$PROG" $m
  expect_eq "$m with the rule: exit status" "$rc" 0
  served=$(last_json copies_served "$FILES/$m.json")
  checks=$((checks + 1))
  [ "${served:-0}" -gt 0 ] || fail "$m: the suggested rules served nothing: $(cat "$ERR")"
  rm -f "$FILES/$m.json"
done

# ---- copies only from pageable memory: the table, empty, and why ------------------
run run --sim --discover -- "$PROG" pageable
expect_eq "pageable: exit status" "$rc" 0
checks=$((checks + 1))
grep -q '^\[ibp\] discover: 0 pinned allocations; host-to-device copies from 0 of them$' "$ERR" &&
  grep -q '^\[ibp\] discover: the program made no pinned allocation; its 3 host-to-device copies (6\.0 MiB) came from pageable memory' "$ERR" &&
  grep -q '^ *nth  *size  *copies' "$ERR" &&
  grep -q '^\[ibp\] discover: no allocation is worth a rule (an empty table: libibp cannot help this program)$' "$ERR" ||
  fail "pageable copies: no empty table saying why: $(cat "$ERR")"

# ---- a buffer whose bytes are copied once each (4 layers, one pass): no rule ---------
run run --sim --discover -- "$SAMPLES/weight_stream" --size 16M --layers 4 --epochs 1 --quiet
checks=$((checks + 1))
grep -Eq '^ +1 +16\.0 MiB +4 +16\.0 MiB +1\.0x ' "$ERR" &&
  grep -q '^\[ibp\] discover: allocation nth=1: its bytes were copied once each (no copy repeated)' "$ERR" &&
  ! grep -q '^IBP_REGIONS=' "$ERR" || fail "copied once suggested: $(cat "$ERR")"

# ---- a tensor size that leaves the copies to the driver is named at exit ---------------
# (IBP_PATH=zerocopy on h100-pcie5: the gate leaves every weight copy to
# the driver, as tests/samples/check_gate.sh checks)
IBP_PATH=zerocopy IBP_PROFILE=h100-pcie5 IBP_WAIT_READY=1 \
  run run --sim --regions 'size=16777216,tensor=3000,name=w' --stats 1 -- \
  "$SAMPLES/weight_stream" --size 16M --layers 4 --epochs 3 --quiet
checks=$((checks + 1))
grep -q "^\[ibp\] stats: region 'w': 12 of 12 copies left to the driver, whose copy the gate models faster than the kernel's on tensor=3000 (IBP_PROFILE); tensor=3000 does not divide their offsets and lengths (multiples of 4194304 B), so each reads its partial tensors whole -- try tensor=4096 " "$ERR" ||
  fail "tensor=3000: no note naming it: $(cat "$ERR")"
IBP_PATH=zerocopy IBP_PROFILE=h100-pcie5 IBP_WAIT_READY=1 \
  run run --sim --regions 'size=16777216,tensor=4096,name=w' --stats 1 -- \
  "$SAMPLES/weight_stream" --size 16M --layers 4 --epochs 3 --quiet
checks=$((checks + 1))
grep -q "^\[ibp\] stats: region 'w': 12 of 12 copies left to the driver, whose copy the gate models faster than the kernel's on tensor=4096 (IBP_PROFILE) (docs" "$ERR" ||
  fail "tensor=4096, all gated: no note: $(cat "$ERR")"
IBP_PROFILE="$KERNEL_PROFILE" IBP_WAIT_READY=1 \
  run run --sim --regions 'size=16777216,tensor=4096,name=w' --stats 1 -- \
  "$SAMPLES/weight_stream" --size 16M --layers 4 --epochs 3 --quiet
checks=$((checks + 1))
! grep -q "left to the driver" "$ERR" || fail "copies served, yet noted: $(cat "$ERR")"

# ---- a buffer rewritten between passes (20000 random words changed) is no region
run run --sim --discover -- "$SAMPLES/weight_stream" --size 4M --layers 4 --epochs 3 --touch 20000 --quiet
expect_eq "rewritten: exit status" "$rc" 0
checks=$((checks + 1))
grep -Eq '^ +1 +4\.0 MiB +12 +12\.0 MiB +3\.0x +100% ' "$ERR" ||
  fail "rewritten buffer: no row saying 100% changed: $(cat "$ERR")"
checks=$((checks + 1))
grep -q "^\[ibp\] discover: allocation nth=1: more than half of it changed after its first copy" "$ERR" &&
  grep -q '^\[ibp\] discover: no allocation is worth a rule$' "$ERR" &&
  ! grep -q '^IBP_REGIONS=' "$ERR" || fail "rewritten buffer suggested: $(cat "$ERR")"

# ---- off unless asked; IBP_DISCOVER=FILE writes the report there --------------
run run --sim -- "$SAMPLES/weight_stream" --size 1M --layers 2 --quiet
checks=$((checks + 1))
! grep -q 'discover' "$ERR" || fail "discovery without --discover: $(cat "$ERR")"
RANK=3 IBP_DISCOVER="$FILES/d-%r.txt" run run --sim -- "$SAMPLES/weight_stream" --size 1M --layers 2 --quiet
checks=$((checks + 1))
grep -q "^IBP_REGIONS='size=1048576,tensor=4096,name=pinned1'\$" "$FILES/d-3.txt" 2>/dev/null &&
  ! grep -q discover "$ERR" || fail "IBP_DISCOVER=FILE: $(cat "$FILES/d-3.txt" "$ERR" 2>&1)"
rm -f "$FILES/d-3.txt"

# ---- the exit summary says when compression had not finished --------------------
# (16 MiB take far longer to compress than the two copies to be made)
run run --sim --regions 'min=1M,name=w' --stats 1 -- "$SAMPLES/weight_stream" --size 16M --layers 2 --epochs 1 --quiet
checks=$((checks + 1))
grep -q "^\[ibp\] stats: 2 copies passed through uncompressed because compression had not finished (region 'w'): for short runs and benchmarks set IBP_WAIT_READY=1" "$ERR" ||
  fail "no note on copies made before compression finished: $(cat "$ERR")"
# ... and the region, freed at the end while it was still being
# compressed, is "freed-early", not "degraded" (a staging buffer to drop)
checks=$((checks + 1))
grep -Eq '^\[ibp\]   w +freed-early\* +16\.0 MiB .* - +0 +2 ' "$ERR" ||
  fail "region freed before ready: no 'freed-early*' row with saved '-': $(cat "$ERR")"
run run --sim --regions 'min=1M,name=w' --stats "$FILES/early.json" -- "$SAMPLES/weight_stream" --size 16M --layers 2 --epochs 1 --quiet
checks=$((checks + 1))
grep -q '"state": "freed-early", "retired": true' "$FILES/early.json" ||
  fail "region freed before ready: JSON state: $(cat "$FILES/early.json")"
rm -f "$FILES/early.json"
IBP_WAIT_READY=1 run run --sim --regions 'min=1M,name=w' --stats 1 -- "$SAMPLES/weight_stream" --size 16M --layers 2 --epochs 1 --quiet
checks=$((checks + 1))
! grep -q "had not finished" "$ERR" || fail "IBP_WAIT_READY=1 still noted: $(cat "$ERR")"
checks=$((checks + 1))
grep -Eq '^\[ibp\]   w +ready\* ' "$ERR" || fail "IBP_WAIT_READY=1: region not 'ready*': $(cat "$ERR")"

# ---- auto's warnings name auto, and the rule to write in its place --------------
# (a 64 MiB table of 256-byte rows: auto's 4 KiB tensors do not fit)
IBP_WAIT_READY=1 run run --sim --regions auto -- "$SAMPLES/emb_gather" --rows 262144 --dim 64 --batches 1 --batch-rows 64 --quiet
expect_eq "auto: exit status" "$rc" 0
checks=$((checks + 1))
grep -Eq "^\[ibp\] region 'region@0x[0-9a-f]+' \(auto\): its 4096-byte tensors do not fit its copies .* try 'min=64M,tensor=256' in place of auto\$" "$ERR" ||
  fail "auto: the tensor warning does not name auto: $(cat "$ERR")"
IBP_WAIT_READY=1 run run --sim --regions 'size=1;auto' -- "$SAMPLES/emb_gather" --rows 262144 --dim 64 --batches 1 --batch-rows 64 --quiet
checks=$((checks + 1))
grep -q "(auto, rule 2): its 4096-byte tensors" "$ERR" || fail "auto as rule 2: $(cat "$ERR")"

expect_files
finish
