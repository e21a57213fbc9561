# check_behaviour.sh CASE NEED_GPU SAMPLES_DIR WORKDIR
# What the samples do besides copying: data files, the mismatch report, CUDA
# errors and bad command lines (one CASE per CTest test).
. "$(dirname "$0")/common.sh"
case_name=$1
gpu=$2
dir=$3
WORK=$4
need_gpu_or_skip "$gpu"
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
TMP_OUT=$WORK/stdout
TMP_ERR=$WORK/stderr
ws=$dir/weight_stream
eg=$dir/emb_gather
kb=$dir/kv_blocks

# expect_fail CODE REGEX EXE ARGS...: exit CODE and a line of stdout+stderr
# matching the extended regular expression REGEX.
expect_fail() {
  code=$1
  regex=$2
  shift 2
  run "$@"
  if [ "$rc" -ne "$code" ]; then
    fail "$*: exit $rc, expected $code; stdout: $(cat "$TMP_OUT"); stderr: $(cat "$TMP_ERR")"
  elif ! cat "$TMP_OUT" "$TMP_ERR" | grep -Eqx -- "$regex"; then
    fail "$*: no line matching '$regex'; stdout: $(cat "$TMP_OUT"); stderr: $(cat "$TMP_ERR")"
  fi
}

# expect_usage REGEX EXE ARGS...: exit 3, nothing on stdout, one line on
# stderr matching REGEX.
expect_usage() {
  expect_fail 3 "$@"
  checks=$((checks + 1))
  { [ ! -s "$TMP_OUT" ] && [ "$(wc -l <"$TMP_ERR")" -eq 1 ]; } ||
    fail "$2 ...: stdout: $(cat "$TMP_OUT"); stderr: $(cat "$TMP_ERR")"
}

first_line() {
  head -n 1 "$TMP_OUT"
}

data_files() {
  # Weights: an odd size, saved and loaded back.
  expect_success weight_stream "$ws" --size 1000003 --layers 5 --epochs 2 --save w.bin
  generated=$(first_line)
  checks=$((checks + 1))
  [ "$(wc -c <w.bin)" -eq 1000003 ] || fail "w.bin has $(wc -c <w.bin) bytes"
  expect_success weight_stream "$ws" --data w.bin --layers 5 --epochs 2
  checks=$((checks + 1))
  [ "$(first_line)" = "$generated" ] || fail "--data w.bin: '$(first_line)', generated: '$generated'"
  grep -qx 'data=w.bin' "$TMP_OUT" || fail "--data w.bin: no data=w.bin line"

  # A table: 1000 rows of 33 floats.
  expect_success emb_gather "$eg" --rows 1000 --dim 33 --batches 3 --batch-rows 50 --save e.bin
  generated=$(first_line)
  checks=$((checks + 1))
  [ "$(wc -c <e.bin)" -eq 132000 ] || fail "e.bin has $(wc -c <e.bin) bytes"
  expect_success emb_gather "$eg" --data e.bin --row-bytes 132 --batches 3 --batch-rows 50
  checks=$((checks + 1))
  [ "$(first_line)" = "$generated" ] || fail "--data e.bin: '$(first_line)', generated: '$generated'"

  # --warmup: the first passes or batches are copied and checked, not timed.
  expect_success weight_stream "$ws" --size 64K --layers 2 --epochs 3 --warmup 1
  checks=$((checks + 1))
  grep -qx 'timed_bytes=131072' "$TMP_OUT" || fail "--warmup 1: $(grep timed_bytes "$TMP_OUT")"
  head -n 1 "$TMP_OUT" | grep -q ' bytes=196608 copies=6 ' || fail "--warmup 1: $(first_line)"
  expect_success emb_gather "$eg" --rows 100 --dim 10 --batches 4 --batch-rows 5 --warmup 3
  checks=$((checks + 1))
  grep -qx 'timed_bytes=200' "$TMP_OUT" || fail "--warmup 3: $(grep timed_bytes "$TMP_OUT")"

  # KV blocks: a pool of 9 blocks of 2 layers x K,V x 4 tokens x 2 heads x
  # 8 values (256 bytes a layer), saved and loaded back; then any bytes, a
  # tail shorter than a block not used.
  set -- --block-tokens 4 --layers 2 --heads 2 --head-dim 8 --slots 4 --steps 5 --window 3
  expect_success kv_blocks "$kb" --blocks 9 --dtype fp16 --save k.bin "$@"
  generated=$(first_line)
  checks=$((checks + 1))
  [ "$(wc -c <k.bin)" -eq 4608 ] || fail "k.bin has $(wc -c <k.bin) bytes"
  head -n 1 "$TMP_OUT" | grep -q ' bytes=7680 copies=30 ' || fail "kv_blocks: $(first_line)"
  expect_success kv_blocks "$kb" --data k.bin "$@"
  checks=$((checks + 1))
  [ "$(first_line)" = "$generated" ] || fail "--data k.bin: '$(first_line)', generated: '$generated'"
  grep -qx 'blocks=9' "$TMP_OUT" || fail "--data k.bin: $(grep '^blocks=' "$TMP_OUT")"
  expect_success kv_blocks "$kb" --data "$ws" "$@" --fetch random

  # Any bytes will do; a tail shorter than a row is not used.
  expect_success weight_stream "$ws" --data "$ws" --layers 3 --epochs 1
  expect_success emb_gather "$eg" --data "$ws" --row-bytes 1000 --batches 2 --batch-rows 10
}

mismatch() {
  # 64 KiB in 4 layers of 16 KiB: offset 40000 is in layer 2.
  expect_fail 1 'weight_stream: mismatch epoch=1 layer=2 offset=40000 expected=0x[0-9a-f]{2} got=0x[0-9a-f]{2}' \
    "$ws" --size 64K --layers 4 --epochs 2 --corrupt 40000
  expect_fail 1 'weight_stream: mismatch epoch=0 layer=0 offset=0 expected=0x[0-9a-f]{2} got=0x[0-9a-f]{2}' \
    "$dir/weight_stream_static_ptds" --size 4K --layers 1 --epochs 1 --corrupt 0
  # Rows of 64 bytes: batch byte 100 is byte 36 of slot 1.
  expect_fail 1 'emb_gather: mismatch batch=2 slot=1 row=[0-9]+ offset=[0-9]+ expected=0x[0-9a-f]{2} got=0x[0-9a-f]{2}' \
    "$eg" --rows 500 --dim 16 --batches 3 --batch-rows 20 --corrupt 100
  row=$(sed -n 's/.* row=\([0-9]*\) .*/\1/p' "$TMP_OUT")
  offset=$(sed -n 's/.* offset=\([0-9]*\) .*/\1/p' "$TMP_OUT")
  checks=$((checks + 1))
  [ -n "$row" ] && [ "$offset" = $((row * 64 + 36)) ] ||
    fail "emb_gather --corrupt 100: row $row, table offset $offset (want row * 64 + 36)"
  expect_fail 1 'emb_gather: mismatch batch=0 slot=19 row=[0-9]+ offset=[0-9]+ expected=0x[0-9a-f]{2} got=0x[0-9a-f]{2}' \
    "$dir/emb_gather_static_ptds" --rows 500 --dim 16 --batches 1 --batch-rows 20 --corrupt 1279
  # Entries of 256 bytes (one block, one layer): batch byte 700 is byte
  # 188 of entry 2, the first layer of the step's second block (step 3 of
  # a window: blocks 3, 4, 5), in slot (3 * 3 + 1) % 4; pool offset
  # (4 * 2 + 0) * 256 + 188.
  expect_fail 1 'kv_blocks: mismatch step=3 block=4 layer=0 slot=2 offset=2236 expected=0x[0-9a-f]{2} got=0x[0-9a-f]{2}' \
    "$kb" --blocks 9 --block-tokens 4 --layers 2 --heads 2 --head-dim 8 --slots 4 \
    --steps 4 --window 3 --corrupt 700
  expect_fail 1 'kv_blocks: mismatch step=0 block=0 layer=0 slot=0 offset=0 expected=0x[0-9a-f]{2} got=0x[0-9a-f]{2}' \
    "$dir/kv_blocks_static_ptds" --blocks 2 --slots 1 --steps 1 --window 1 --corrupt 0
}

cuda_error() {
  for exe in "$ws" "$dir/weight_stream_static_ptds"; do
    SIMCUDA_FAIL=cuMemcpyHtoDAsync:5 expect_fail 2 \
      'weight_stream: cudaMemcpyAsync failed: unknown error \(cudaErrorUnknown\)' \
      "$exe" --size 1M --layers 8 --epochs 1
    SIMCUDA_FAIL=cuMemHostAlloc:1 expect_fail 2 \
      'weight_stream: cudaHostAlloc failed: out of memory \(cudaErrorMemoryAllocation\)' \
      "$exe" --size 1M --layers 8 --epochs 1
  done
  SIMCUDA_FAIL=cuMemHostRegister:1 expect_fail 2 \
    'weight_stream: cudaHostRegister failed: out of memory \(cudaErrorMemoryAllocation\)' \
    "$ws" --size 1M --register
  for exe in "$eg" "$dir/emb_gather_static_ptds"; do
    SIMCUDA_FAIL=cuMemcpyHtoDAsync:7:CUDA_ERROR_INVALID_VALUE expect_fail 2 \
      'emb_gather: cudaMemcpyAsync failed: invalid argument \(cudaErrorInvalidValue\)' \
      "$exe" --rows 100 --dim 8 --batches 2 --batch-rows 10
  done
  for exe in "$kb" "$dir/kv_blocks_static_ptds"; do
    SIMCUDA_FAIL=cuMemcpyBatchAsync:2 expect_fail 2 \
      'kv_blocks: cudaMemcpyBatchAsync failed: unknown error \(cudaErrorUnknown\)' \
      "$exe" --blocks 8 --slots 4 --steps 3 --window 2
  done
}

usage() {
  run "$ws" --help
  checks=$((checks + 1))
  [ "$rc" -eq 0 ] && grep -q '^Usage: weight_stream' "$TMP_OUT" || fail "weight_stream --help"
  run "$eg" --help
  checks=$((checks + 1))
  [ "$rc" -eq 0 ] && grep -q '^Usage: emb_gather' "$TMP_OUT" || fail "emb_gather --help"

  expect_usage "weight_stream: unknown option '--frob' \(see --help\)" "$ws" --frob
  expect_usage "weight_stream: unexpected argument 'x' \(see --help\)" "$ws" x
  expect_usage "weight_stream: option --layers needs a value \(see --help\)" "$ws" --layers
  expect_usage "weight_stream: option --quiet takes no value \(see --help\)" "$ws" --quiet=1
  expect_usage "weight_stream: --size must be a whole number with optional K/M/G \(got '12X'\) \(see --help\)" \
    "$ws" --size 12X
  expect_usage "weight_stream: --layers must be from 1 to 100000 for 268435456 bytes \(layers of at least 256 bytes\) \(see --help\)" \
    "$ws" --layers 0
  expect_usage "weight_stream: --layers must be from 1 to 4 for 1024 bytes \(layers of at least 256 bytes\) \(see --help\)" \
    "$ws" --size 1K --layers 5
  expect_usage "weight_stream: --warmup must be below --epochs \(see --help\)" "$ws" --warmup 4
  expect_usage "emb_gather: --warmup must be below --batches \(see --help\)" "$eg" --batches 2 --warmup 2
  expect_usage "weight_stream: --epochs must be at least 1 \(see --help\)" "$ws" --epochs 0
  expect_usage "weight_stream: --dtype must be f32 or bf16 \(got 'fp8'\) \(see --help\)" "$ws" --dtype fp8
  expect_usage "weight_stream: --pin must be hostalloc, mallochost or register \(got 'x'\) \(see --help\)" \
    "$ws" --pin x
  expect_usage "weight_stream: --corrupt must be below the buffer size 1024 \(see --help\)" \
    "$ws" --size 1K --layers 1 --corrupt 1024
  expect_usage "weight_stream: nofile.bin: No such file or directory" "$ws" --data nofile.bin
  : >empty.bin
  expect_usage "weight_stream: empty.bin: file is empty" "$ws" --data empty.bin
  expect_usage "weight_stream: --data takes the size and contents of the file; drop --size and --dtype \(see --help\)" \
    "$ws" --data empty.bin --size 1M
  expect_usage "emb_gather: --data needs --row-bytes \(see --help\)" "$eg" --data empty.bin
  expect_usage "emb_gather: --row-bytes applies to --data only \(use --dim\) \(see --help\)" \
    "$eg" --row-bytes 4K
  expect_usage "emb_gather: --stream must be default or own \(got 'x'\) \(see --help\)" "$eg" --stream x
  expect_usage "emb_gather: --dim must be from 1 to 1048576 \(see --help\)" "$eg" --dim 0
  expect_usage "emb_gather: --batch-rows must be from 1 to .*" "$eg" --batch-rows 0
  run "$kb" --help
  checks=$((checks + 1))
  [ "$rc" -eq 0 ] && grep -q '^Usage: kv_blocks' "$TMP_OUT" || fail "kv_blocks --help"
  expect_usage "kv_blocks: --dtype must be bf16 or fp16 \(got 'f32'\) \(see --help\)" "$kb" --dtype f32
  expect_usage "kv_blocks: --fetch must be window, random or mixed \(got 'x'\) \(see --help\)" "$kb" --fetch x
  expect_usage "kv_blocks: --heads must be from 1 to 1048576 \(see --help\)" "$kb" --heads 0
  expect_usage "kv_blocks: --window must be from 1 to 8 \(the pool's blocks\) \(see --help\)" \
    "$kb" --blocks 8 --window 9
  expect_usage "kv_blocks: --slots must be from --window \(16\) to [0-9]+ \(see --help\)" "$kb" --slots 15
  expect_usage "kv_blocks: --warmup must be below --steps \(see --help\)" "$kb" --steps 2 --warmup 2
  expect_usage "kv_blocks: --data takes its blocks from the file; drop --blocks \(see --help\)" \
    "$kb" --data empty.bin --blocks 4
  expect_usage "kv_blocks: --corrupt must be below the batch size 4194304 \(see --help\)" \
    "$kb" --corrupt 4194304
  head -c 100 "$ws" >small.bin
  expect_usage "kv_blocks: a block of 262144 bytes is larger than small.bin \(see --help\)" \
    "$kb" --data small.bin
  expect_usage "emb_gather: --row-bytes 4096 is larger than small.bin \(see --help\)" \
    "$eg" --data small.bin --row-bytes 4K
}

$case_name
finish
