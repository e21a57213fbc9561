# ibp analyze: JSON keys and values, the text report, the tail note, the
# warning on too few tensors, and that the headline "space saved" is what
# `ibp compress` really produces, metadata and header included.
. "$(dirname "$0")/common.sh"

"$GEN" floats 1048576 1 >even.bin || exit 1   # 1024 x 1024 B
"$GEN" floats 1000003 2 >tail.bin || exit 1   # 1000 x 1000 B + 3 B
"$GEN" random 262144 3 >random.bin || exit 1

# check_json FILE R TENSORS TAIL: the analyze --json output in $OUT.
check_json() {
  expect_json_valid
  for key in tensor_bytes tensors tail_bytes chunk_bytes threshold \
    saved_fraction compressed_bytes original_bytes metadata_bytes \
    invariant80_fraction tensors_compressed impl table table_thresholds \
    container_bytes saved_fraction_container too_few_tensors; do
    [ -n "$(json_get $key)" ] || fail "analyze --json $1: no key $key"
  done
  checks=$((checks + 1))
  expect_eq "tensor_bytes" "$(json_get tensor_bytes)" "$2"
  expect_eq "tensors" "$(json_get tensors)" "$3"
  expect_eq "tail_bytes" "$(json_get tail_bytes)" "$4"
  expect_eq "original_bytes" "$(json_get original_bytes)" "$(wc -c <"$1" | tr -d ' ')"
  expect_eq "metadata_bytes" "$(json_get metadata_bytes)" "$(($2 * 2 + ($3 + 7) / 8))"
  s=$(json_get saved_fraction)
  c=$(json_get compressed_bytes)
  o=$(json_get original_bytes)
  t=$(json_get threshold)
  expect_true "saved_fraction $s" "$s >= 0 && $s < 1"
  expect_true "saved_fraction = 1 - compressed/original" \
    "($s - (1 - $c / $o))^2 < 1e-12"
  expect_true "compressed_bytes <= original_bytes" "$c <= $o"
  m=$(json_get metadata_bytes)
  expect_true "saved_fraction_with_metadata = 1 - (compressed+metadata)/original" \
    "($(json_get saved_fraction_with_metadata) - (1 - ($c + $m) / $o))^2 < 1e-12"
  expect_eq "container_bytes = 128 + metadata + compressed" \
    "$(json_get container_bytes)" "$((128 + m + c))"
  expect_true "saved_fraction_container = 1 - container/original" \
    "($(json_get saved_fraction_container) - (1 - (128 + $c + $m) / $o))^2 < 1e-12"
  expect_true "threshold $t" "$t >= 0.5 && $t <= 1"
  expect_true "invariant80_fraction" \
    "$(json_get invariant80_fraction) >= 0 && $(json_get invariant80_fraction) <= 1"
  expect_true "tensors_compressed" "$(json_get tensors_compressed) <= $3"
  case $(json_get chunk_bytes) in 1 | 2 | 4 | 8) ;; *) fail "chunk_bytes $(json_get chunk_bytes)" ;; esac
  case $(json_get impl) in '"portable"' | '"bmi2"') ;; *) fail "impl $(json_get impl)" ;; esac
  expect_eq "table rows" "$(grep -c '^      "chunk_bytes": ' "$OUT")" 4
}

expect_ok analyze even.bin --tensor-bytes 1K --json
check_json even.bin 1024 1024 0
expect_true "float data saves space" "$(json_get saved_fraction) > 0.02"
saved_even=$(json_get saved_fraction_container)
meta_even=$(json_get metadata_bytes)
comp_even=$(json_get compressed_bytes)

# expect_notes ARGS...: exit status 0, notes or warnings allowed on stderr.
expect_notes() {
  run "$@"
  [ "$rc" -eq 0 ] || fail "$(shown "$@"): exit $rc, stderr: $(cat "$ERR")"
}

expect_notes analyze tail.bin --tensor-bytes 1000 --json
check_json tail.bin 1000 1000 3

# Random bytes: nothing to save, every tensor stored raw.
expect_ok analyze random.bin --tensor-bytes 4096 --json
check_json random.bin 4096 64 0
# the stage on no cluster of random bytes: no dtype, the pick IBP alone
# and why (docs/FORMAT.md §9.5)
stage=$(sed -n '/"stage": {/,/}/p' "$OUT")
expect_eq "random: stage.stage_pairs" \
  "$(printf '%s\n' "$stage" | sed -nE 's/^ *"stage_pairs": ([0-9]+),?$/\1/p')" 0
# ... so its decode is charged on no tensor: the figures with the stage
# decode as IBP alone's (docs/PROFILE.md "Whether the stage pays")
expect_eq "random: stage.stage_tensors" \
  "$(printf '%s\n' "$stage" | sed -nE 's/^ *"stage_tensors": ([0-9]+),?$/\1/p')" 0
expect_eq "random: stage_decode_ms_per_gib" \
  "$(sed -nE 's/^ *"stage_decode_ms_per_gib": (.*),$/\1/p' "$OUT")" \
  "$(sed -nE 's/^ *"ibp_decode_ms_per_gib": (.*),$/\1/p' "$OUT")"
expect_eq "random: stage.dtype" \
  "$(printf '%s\n' "$stage" | sed -nE 's/^ *"dtype": (.*),$/\1/p')" null
expect_eq "random: stage.why_none" \
  "$(printf '%s\n' "$stage" | sed -nE 's/^ *"why_none": (.*),$/\1/p')" \
  '"the stage stores no fewer bytes than IBP alone"'
expect_eq "random: compressed_bytes" "$(json_get compressed_bytes)" 262144
expect_eq "random: tensors_compressed" "$(json_get tensors_compressed)" 0

# Fixed parameters are reported as given.
expect_ok analyze even.bin --tensor-bytes 1024 --chunk 2 --threshold 0.9 --json
check_json even.bin 1024 1024 0
expect_eq "given chunk" "$(json_get chunk_bytes)" 2
expect_eq "given threshold" "$(json_get threshold)" 0.9
expect_eq "chunk_searched" "$(json_get chunk_searched)" false
expect_eq "threshold_searched" "$(json_get threshold_searched)" false

# Sampling and threads change how, not what: same exact figure format.
expect_ok analyze even.bin --tensor-bytes 1024 --sample 0.5 --threads 1 --json
check_json even.bin 1024 1024 0
expect_ok analyze tail.bin --tensor-bytes=1 --chunk=8 --json
check_json tail.bin 1 1000003 0

# The exact figure is what compress writes: container = 128-byte header +
# metadata + compressed bytes.
expect_ok compress even.bin even.ibp --tensor-bytes 1024 --stage none --quiet
expect_eq "container size" "$(wc -c <even.ibp | tr -d ' ')" "$((128 + meta_even + comp_even))"
rm -f even.ibp

# Text report.
expect_ok analyze even.bin --tensor-bytes 1024
for label in 'file  ' 'size  ' 'tensors  ' '80%-invariant bits' 'chunk width  ' \
  'threshold  ' 'compressed  ' 'space saved  ' 'metadata  ' 'implementation  '; do
  grep -q "^$label" "$OUT" || fail "analyze report has no '$label' line"
done
grep -q '^tensors             1024 x 1024 B$' "$OUT" || fail "analyze: tensors line"
grep -q '^saved share by chunk width and threshold' "$OUT" || fail "analyze: no table"
for c in 1 2 4 8; do
  grep -q "^    $c B " "$OUT" || fail "analyze: no table row for chunk $c"
done
pct=$(awk -v s="$saved_even" 'BEGIN { printf "%.2f%%", 100 * s }')
grep -q "^space saved         $pct (exact" "$OUT" || fail "analyze: space saved is not $pct"
grep -q '^note:' "$OUT" && fail "analyze: tail note without a tail"
grep -q '^warning:' "$OUT" && fail "analyze: too-few warning on 1024 tensors"

expect_ok analyze tail.bin --tensor-bytes 1000
grep -qx 'note: the file size is not a multiple of 1000 B: the last 3 B (a partial tensor) are kept raw' "$OUT" ||
  fail "analyze: no tail note"
expect_notes analyze tail.bin --tensor-bytes 1000 --json
grep -qx 'ibp analyze: note: the file size is not a multiple of 1000 B: the last 3 B (a partial tensor) are kept raw' "$ERR" ||
  fail "analyze --json: no tail note on stderr"

# The headline is what compress reports, metadata and header included:
# 1 MiB of random bytes as one tensor (every bit "invariant" in one tensor,
# Mask and Bitval 2 MiB) loses about 101.57 %, never "98.44 % saved"; and
# the sample is too small for the statistics (a warning, also with --json).
# compress_saved FILE R: the "saved" percentage compress reports.
compress_saved() {
  expect_ok compress "$1" c.ibp --tensor-bytes "$2" --stage none -f
  sed -n 's/.*saved \(-*[0-9.]*%\)).*/\1/p' "$OUT"
  rm -f c.ibp
}
"$GEN" random 1048576 5 >one.bin || exit 1
want=$(compress_saved one.bin 1M)
expect_ok analyze one.bin --tensor-bytes 1M
grep -q "^space saved         $want (exact" "$OUT" ||
  fail "analyze: one random tensor: headline is not compress's $want: $(grep '^space saved' "$OUT")"
grep -q '98\.44' "$OUT" && fail "analyze: one random tensor reports 98.44 %"
grep -q '^warning: only 1 tensor of 1048576 B: too few for the statistics' "$OUT" ||
  fail "analyze: one tensor: no warning"
expect_notes analyze one.bin --tensor-bytes 1M --json
expect_eq "one tensor: too_few_tensors" "$(json_get too_few_tensors)" true
expect_true "one tensor: saved_fraction_container < -1" "$(json_get saved_fraction_container) < -1"
grep -q '^ibp analyze: warning: only 1 tensor' "$ERR" || fail "analyze --json: no warning on stderr"

# Two tensors of floats: the same, with compress's figure as the headline.
"$GEN" floats 8192 6 >two.bin || exit 1
want=$(compress_saved two.bin 4K)
expect_ok analyze two.bin --tensor-bytes 4K
grep -q "^space saved         $want (exact" "$OUT" ||
  fail "analyze: two tensors: headline is not compress's $want: $(grep '^space saved' "$OUT")"
grep -q '^warning: only 2 tensors of 4096 B: too few' "$OUT" || fail "analyze: two tensors: no warning"
expect_notes analyze two.bin --tensor-bytes 4K --json
check_json two.bin 4096 2 0
expect_eq "two tensors: too_few_tensors" "$(json_get too_few_tensors)" true
expect_ok analyze even.bin --tensor-bytes 1024 --json
expect_eq "1024 tensors: too_few_tensors" "$(json_get too_few_tensors)" false
rm -f one.bin two.bin

# Clusters and the entropy limit (docs/FORMAT.md §4).  Clustering never
# stores more than one Mask/Bitval, metadata included; the per-bit entropy
# limit is a share in [0, 1).
# nested_get KEY: value of a member of the "clusters" object in $OUT.
nested_get() {
  sed -n "s/^    \"$1\": \(.*\)\$/\1/p" "$OUT" | sed 's/,$//'
}
expect_ok analyze even.bin --tensor-bytes 1024 --clusters auto --entropy --json
check_json even.bin 1024 1024 0
k=$(nested_get k)
cm=$(nested_get saved_fraction_with_metadata)
expect_true "clusters: K $k in [1, 16]" "$k >= 1 && $k <= 16"
expect_true "clusters never worse: $cm >= $(json_get saved_fraction_with_metadata)" \
  "$cm >= $(json_get saved_fraction_with_metadata)"
e=$(json_get entropy_limit_saved_fraction)
expect_true "entropy limit $e" "$e > 0 && $e < 1"
expect_ok analyze even.bin --tensor-bytes 1024 --clusters 1 --json
[ -z "$(json_get entropy_limit_saved_fraction)" ] || fail "entropy limit without --entropy"
grep -q '"clusters"' "$OUT" && fail "analyze --clusters 1 reports clusters"
expect_ok analyze even.bin --tensor-bytes 1024 --clusters 4 --entropy
for label in 'clusters  ' 'clustered saved  ' 'entropy limit  ' '  K =   1 '; do
  grep -q "^$label" "$OUT" || fail "analyze --clusters: no '$label' line"
done
expect_error_like 2 'ibp: --clusters must be auto or a whole number from 1 to 256 \(got 0\).*' \
  analyze even.bin --tensor-bytes 1024 --clusters 0
expect_error_like 2 'ibp: --clusters must be auto or a whole number from 1 to 256 \(got 257\).*' \
  analyze even.bin --tensor-bytes 1024 --clusters 257

# Tensors of two kinds, alternating (floats / all-zero rows): clusters pay,
# compress writes a container with clusters (version 3) that decodes to the
# original.
"$GEN" floats 65536 4 >f.bin || exit 1
head -c 65536 /dev/zero >z.bin
i=0
while [ $i -lt 64 ]; do
  dd if=f.bin bs=1024 skip=$i count=1 2>/dev/null
  dd if=z.bin bs=1024 count=1 2>/dev/null
  i=$((i + 1))
done >mixed.bin
expect_ok analyze mixed.bin --tensor-bytes 1024 --clusters auto --json
expect_true "mixed: clusters found" "$(nested_get k) >= 2"
mixed_container=$(json_get container_bytes)
expect_true "mixed: clusters save more" \
  "$(nested_get saved_fraction_with_metadata) > $(json_get saved_fraction_with_metadata)"
expect_ok compress mixed.bin mixed.ibp --tensor-bytes 1024 --clusters auto --stage none --quiet
expect_eq "mixed: container_bytes is the container" "$(wc -c <mixed.ibp | tr -d ' ')" "$mixed_container"
expect_eq "mixed: container version" "$(od -A n -t u4 -j 8 -N 4 mixed.ibp | tr -d ' ')" 3
expect_ok decompress mixed.ibp mixed.out --quiet
cmp -s mixed.bin mixed.out || fail "mixed: decompressed bytes differ"
rm -f f.bin z.bin mixed.ibp mixed.out

expect_files even.bin tail.bin random.bin mixed.bin
finish
