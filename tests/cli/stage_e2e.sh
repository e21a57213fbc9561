# libibp serving a whole-region copy of bf16 data sets stored with the
# exponent stage (docs/FORMAT.md §9; issue T): for each data set, `ibp
# analyze` (--clusters 1, as the rule; the profile libibp is given) must
# pick the stage, and on each
# route forced (IBP_FORCE_ROUTE=zerocopy, staged, batched; IBP_PATH the
# zero-copy or staged path alone for the first two) the region must be
# prepared with the stage, its one copy served on that route, the bytes over
# PCIe (bytes_read_pcie) within 1 % of analyze's stored bytes with the stage,
# and the device's bytes those of the run with libibp disabled (and of the
# file).  Then cnn_f32_to_bf16 in 16 KiB tensors: analyze's pick IBP alone
# (the block path has no stage) and why, libibp saying it does not try the
# stage.  Then a region with the stage on some of its clusters only (the
# first 16 MiB of cnn_f32, clusters=auto: docs/FORMAT.md §9.5; analyze,
# on every tensor, puts it on 2 of 5 clusters and saves 16.6 %, IBP alone
# 13.6 %; the first 16 MiB of cnn_f16, where the stage gains 0.3 points,
# turns on which tensors the sample holds): on each
# route, prepared so, served, and its bytes those of the disabled run.
#   sh stage_e2e.sh IBP - WORKDIR PRELOAD SIMDIR KERNEL_PROFILE PROG DATADIR GEN
# KERNEL_PROFILE: tests/preload/kernel_path.profile (the gate serves with
# the kernel).  Without the bf16 data sets (bench/data/build.sh, which a
# fresh clone's CI does not run), the same checks on 16 MiB of generated
# bf16 weights (GEN: gen_bf16.c), the clusters' part skipped without
# cnn_f32; skipped (77) without libibp.so or the simulated driver.
. "$(dirname "$0")/common.sh"
PRELOAD=$4
SIMDIR=$5
KERNEL_PROFILE=$6
PROG=$7
DATA=$8
GEN=$9
SETS="cnn_f32_to_bf16:1024 glove_f32_to_bf16:200"
BLOCK_SET=cnn_f32_to_bf16 # its 16 KiB tensors: the block path
for f in "$PRELOAD" "$SIMDIR/libcuda.so.1" "$PROG" "$GEN"; do
  [ -e "$f" ] || { echo "skipped: $f is not built"; exit 77; }
done
for s in $SETS; do
  [ -e "$DATA/${s%%:*}.bin" ] && continue
  echo "$DATA/${s%%:*}.bin is not built (bench/data/build.sh):" \
    "generated bf16 weights instead"
  DATA=.
  SETS="gen_bf16:1024"
  BLOCK_SET=gen_bf16
  "$GEN" gen_bf16.bin 16777216 || { echo "gen_bf16 failed"; exit 1; }
  break
done
export IBP_PRELOAD_LIB="$PRELOAD" IBP_SIM_LIB_DIR="$SIMDIR"
unset IBP_REGIONS IBP_CONFIG IBP_STATS IBP_DISABLE IBP_DISCOVER IBP_PROFILE IBP_PATH IBP_FORCE_ROUTE LD_PRELOAD
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0"

last_json() {
  grep -o "\"$1\": *[0-9]*" "$2" | tail -n 1 | grep -o '[0-9]*$'
}

# IBP_PATH for a route forced: the GPU path it is (batched: either)
path_of() {
  case $1 in zerocopy | staged) echo "$1" ;; *) echo auto ;; esac
}

# served_on NAME ROUTE JSON: the one copy served on ROUTE
# serve_forced NAME FILE RULE ROUTE JSON: the program copies FILE through
# libibp with ROUTE forced (its statistics in JSON); its bytes must be the
# disabled run's (NAME.disabled), left in NAME.ROUTE.
serve_forced() {
  IBP_WAIT_READY=1 IBP_LOG=info IBP_PROFILE=$KERNEL_PROFILE \
    IBP_FORCE_ROUTE=$4 IBP_PATH=$(path_of "$4") \
    run run --sim --regions "$3" --stats "$5" -- "$PROG" "$2" "$1.$4"
  expect_eq "$1 $4: exit status" "$rc" 0
  expect_eq "$1 $4: result" "$(cat "$OUT")" "stage_prog: ok"
  checks=$((checks + 1))
  cmp -s "$1.disabled" "$1.$4" ||
    fail "$1 $4: the device's bytes differ from the disabled run's"
}

served_on() {
  expect_eq "$1 $2: copies served" "$(last_json copies_served "$3")" 1
  case $2 in
  staged) expect_eq "$1 staged: copies staged" "$(last_json copies_staged "$3")" 1 ;;
  batched) expect_eq "$1 batched: copies batched" "$(last_json copies_batched "$3")" 1 ;;
  esac
}

for s in $SETS; do
  name=${s%%:*}
  R=${s##*:}
  file=$DATA/$name.bin
  run analyze "$file" --tensor-bytes "$R" --clusters 1 --json \
    --profile "$KERNEL_PROFILE"
  expect_eq "$name: analyze exit status" "$rc" 0
  stage=$(sed -n '/"stage": {/,/}/p' "$OUT")
  pick=$(printf '%s\n' "$stage" | sed -nE 's/^ *"pick": "([a-z]*)".*/\1/p')
  predicted=$(printf '%s\n' "$stage" | sed -nE 's/^ *"stored_bytes": ([0-9]*).*/\1/p')
  expect_eq "$name: analyze's pick" "$pick" exp
  rule="min=1M,tensor=$R,clusters=1,name=$name"

  run run --sim --disable -- "$PROG" "$file" "$name.disabled"
  expect_eq "$name disabled: exit status" "$rc" 0
  for route in zerocopy staged batched; do
    json=$name.$route.json
    serve_forced "$name" "$file" "$rule" "$route" "$json"
    checks=$((checks + 1))
    grep -q "region '$name': .* + exponent stage, " "$ERR" ||
      fail "$name $route: not prepared with the exponent stage: $(grep "region '$name'" "$ERR")"
    served_on "$name" "$route" "$json"
    pcie=$(last_json bytes_read_pcie "$json")
    echo "$name $route: $pcie bytes over PCIe, ibp analyze predicts $predicted" \
      "($(awk "BEGIN { printf \"%+.4f%%\", 100 * (${pcie:-0} / ${predicted:-1} - 1) }"))"
    expect_true "$name $route: PCIe bytes ${pcie:-none} within 1 % of ${predicted:-none}" \
      "${pcie:-0} >= 0.99 * ${predicted:-0} && ${pcie:-0} <= 1.01 * ${predicted:-0} && ${pcie:-0} > 0"
    rm -f "$name.$route" "$json"
  done
  rm -f "$name.disabled"
done

# tensors of 16 KiB (the kernel's block path, which has no stage:
# docs/FORMAT.md §9.6): analyze's pick is IBP alone, and says why, though
# the stage stores fewer bytes and costs less on the profile; libibp says
# it does not try the stage, stores IBP alone and serves the right bytes.
name=$BLOCK_SET
file=$DATA/$name.bin
run analyze "$file" --tensor-bytes 16384 --clusters 1 --json \
  --profile "$KERNEL_PROFILE"
expect_eq "$name 16 KiB: analyze exit status" "$rc" 0
stage=$(sed -n '/"stage": {/,/}/p' "$OUT")
field() {
  printf '%s\n' "$stage" | sed -nE "s/^ *\"$1\": \"?([^\",]*)\"?,?\$/\1/p"
}
expect_eq "$name 16 KiB: the stage stores fewer bytes" \
  "$(field stage_stores_fewer_bytes)" true
expect_eq "$name 16 KiB: the stage costs less" "$(field stage_costs_less)" true
expect_eq "$name 16 KiB: analyze's pick" "$(field pick)" none
expect_eq "$name 16 KiB: why" "$(field why_none)" \
  "tensors of 16384 B or more: libibp's device decoder has no stage on its block path"
run run --sim --disable -- "$PROG" "$file" "$name.disabled"
expect_eq "$name disabled: exit status" "$rc" 0
serve_forced "$name" "$file" "min=1M,tensor=16384,clusters=1,name=$name" \
  zerocopy "$name.16k.json"
checks=$((checks + 1))
grep -q "region '$name': exponent stage not tried: its tensors of 16384 B" "$ERR" ||
  fail "$name 16 KiB: libibp does not say why the stage is off: $(grep "region '$name'" "$ERR")"
checks=$((checks + 1))
grep -q "region '$name': .* + exponent stage, " "$ERR" &&
  fail "$name 16 KiB: prepared with the exponent stage"
served_on "$name" zerocopy "$name.16k.json"
rm -f "$name.disabled" "$name.zerocopy" "$name.16k.json"

# the stage on some clusters only: the log's "on N of K cluster(s)"
name=cnn_f32_16m
[ -e "$DATA/cnn_f32.bin" ] || {
  echo "the stage on some clusters only: skipped, $DATA/cnn_f32.bin is not built"
  rm -f gen_bf16.bin
  finish
}
head -c 16777216 "$DATA/cnn_f32.bin" >"$name.bin"
run run --sim --disable -- "$PROG" "$name.bin" "$name.disabled"
expect_eq "$name disabled: exit status" "$rc" 0
for route in zerocopy staged batched; do
  json=$name.$route.json
  serve_forced "$name" "$name.bin" "min=1M,tensor=1024,name=$name" "$route" \
    "$json"
  mix=$(sed -nE "s/.*region '$name': exponent stage on .* values, on ([0-9]+) of ([0-9]+) cluster.*/\1 \2/p" "$ERR")
  on=${mix% *} all=${mix#* }
  echo "$name $route: the stage on ${on:-?} of ${all:-?} clusters"
  expect_true "$name $route: the stage on some clusters only" \
    "${on:-0} > 0 && ${on:-0} < ${all:-0}"
  served_on "$name" "$route" "$json"
  rm -f "$name.$route" "$json"
done
finish
