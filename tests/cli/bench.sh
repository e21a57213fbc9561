# ibp bench runs quickly on small inputs and reports every figure.
. "$(dirname "$0")/common.sh"

stages="statistics search compress decompress"

expect_ok bench --mb 4 --seconds 0.05
for label in 'data  ' 'tensors       4096 x 1024 B$' 'impl  ' 'chunk width  ' 'space saved  '; do
  grep -q "^$label" "$OUT" || fail "bench: no '$label' line"
done
grep -q '^GB/s (1e9 B/s of original bytes' "$OUT" || fail "bench: no unit line"
for s in $stages; do
  grep -Eq "^  $s +[0-9]+\\.[0-9]{3} +[0-9]+\\.[0-9]{3}\$" "$OUT" || fail "bench: no '$s' row"
done
grep -qx 'decoded bytes identical to the original' "$OUT" || fail "bench: not verified"

expect_ok bench --mb 4 --seconds 0.05 --json --tensor-bytes 4K --threads 2
expect_json_valid
expect_eq "data" "$(json_get data)" '"generated"'
expect_eq "original_bytes" "$(json_get original_bytes)" 4194304
expect_eq "tensor_bytes" "$(json_get tensor_bytes)" 4096
expect_eq "tensors" "$(json_get tensors)" 1024
expect_eq "tail_bytes" "$(json_get tail_bytes)" 0
expect_eq "verified" "$(json_get verified)" true
s=$(json_get saved_fraction)
expect_true "saved_fraction $s" "$s > 0.02 && $s < 1"
for s in $stages; do
  n=$(grep -c "^    \"$s\": [0-9.e+-]*,\\{0,1\\}\$" "$OUT")
  expect_eq "rates of $s (one_core, all_cores)" "$n" 2
done
grep -q '^    "threads": 2' "$OUT" || fail "bench --threads 2 not used"

# On a file, with a tail, each implementation this CPU has.
"$GEN" floats 1000003 5 >data.bin || exit 1
for impl in auto portable bmi2; do
  run bench data.bin --tensor-bytes 1000 --seconds 0.02 --impl $impl --json
  if [ "$rc" -ne 0 ] && [ $impl = bmi2 ] &&
    grep -qx 'ibp bench: the bmi2 implementation is not available on this CPU or build' "$ERR"; then
    continue
  fi
  [ "$rc" -eq 0 ] || fail "bench --impl $impl: exit $rc: $(cat "$ERR")"
  expect_eq "file" "$(json_get file)" '"data.bin"'
  expect_eq "tensors" "$(json_get tensors)" 1000
  expect_eq "tail_bytes" "$(json_get tail_bytes)" 3
  [ $impl = auto ] || expect_eq "impl" "$(json_get impl)" "\"$impl\""
  expect_eq "verified" "$(json_get verified)" true
done

expect_files data.bin
finish
