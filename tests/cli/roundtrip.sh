# compress -> verify -> decompress gives back the original bytes, for many
# tensor sizes and chunk widths, with and without a tail.
. "$(dirname "$0")/common.sh"

# roundtrip FILE R CHUNK
roundtrip() {
  f=$1
  base=${f%.bin}
  expect_ok compress "$f" "$base.ibp" --tensor-bytes "$2" --chunk "$3"
  size=$(wc -c <"$f" | tr -d ' ')
  csize=$(wc -c <"$base.ibp" | tr -d ' ')
  grep -Eq "^$f -> $base.ibp: $size B -> $csize B \\(ratio [0-9.]+, saved -?[0-9.]+%\\), chunk [1248] B, threshold [0-9.]+\$" "$OUT" ||
    fail "compress $f R=$2: summary is: $(head -n 1 "$OUT")"
  if [ $((size % $2)) -ne 0 ]; then
    grep -qx "note: $f: size is not a multiple of $2 B: the last $((size % $2)) B are kept raw" "$OUT" ||
      fail "compress $f R=$2: no tail note"
  fi
  [ "$3" != auto ] && ! grep -q ", chunk $3 B," "$OUT" && fail "compress $f: chunk $3 not used"

  expect_ok verify "$base.ibp"
  grep -q "^OK $base.ibp: $size B of $2 B tensors" "$OUT" || fail "verify $base.ibp: $(cat "$OUT")"
  expect_ok verify "$base.ibp" --original "$f"
  grep -q "^OK $base.ibp: .*; identical to $f\$" "$OUT" || fail "verify --original: $(cat "$OUT")"

  expect_ok decompress "$base.ibp" "$base.out"
  expect_eq "decompress summary" "$(cat "$OUT")" "$base.ibp -> $base.out: $csize B -> $size B"
  checks=$((checks + 1))
  cmp -s "$f" "$base.out" || fail "$f R=$2 chunk $3: decompressed bytes differ"
  expect_files "$f" "$base.ibp" "$base.out"
  rm -f "$base.ibp" "$base.out"
}

i=0
for r in 1 3 64 1000 4096; do
  for chunk in auto 1 2 4 8; do
    i=$((i + 1))
    # One file R divides and one with a tail (except R = 1).
    "$GEN" floats $((r * 37)) "$i" >even$i.bin || exit 1
    roundtrip even$i.bin "$r" "$chunk"
    rm -f even$i.bin
    if [ "$r" -gt 1 ]; then
      "$GEN" floats $((r * 23 + r / 2 + 1)) "$i" >tail$i.bin || exit 1
      roundtrip tail$i.bin "$r" "$chunk"
      rm -f tail$i.bin
    fi
  done
done

# Incompressible data, a tensor size with a single tensor, and a file that
# is one tensor plus a one-byte tail.
"$GEN" random 65536 7 >random.bin && roundtrip random.bin 256 auto && rm -f random.bin
"$GEN" floats 4096 8 >one.bin && roundtrip one.bin 4096 auto && rm -f one.bin
"$GEN" floats 4097 9 >onetail.bin && roundtrip onetail.bin 4096 4 && rm -f onetail.bin
# A larger file, several threads, the maximum tensor size.
"$GEN" floats 5000000 10 >big.bin && roundtrip big.bin 1048576 auto && rm -f big.bin
"$GEN" floats 3000000 11 >mid.bin || exit 1
expect_ok compress mid.bin mid.ibp --tensor-bytes 4K --threads 3 --sample 0.25 --threshold 0.8 -q
expect_eq "compress -q output" "$(cat "$OUT")" ""
expect_ok decompress mid.ibp mid.out --quiet
expect_eq "decompress --quiet output" "$(cat "$OUT")" ""
checks=$((checks + 1))
cmp -s mid.bin mid.out || fail "mid.bin: decompressed bytes differ"
expect_ok verify mid.ibp --original mid.out -q
expect_eq "verify -q output" "$(cat "$OUT")" ""

# An existing output file is kept unless -f, then replaced (atomically,
# by rename).
echo old >mid2.out
expect_error 1 "ibp: mid2.out: exists (-f replaces it)" decompress mid.ibp mid2.out -q
expect_eq "existing output kept" "$(cat mid2.out)" "old"
expect_error 1 "ibp: mid2.out: exists (-f replaces it)" compress mid.bin mid2.out --tensor-bytes 4K
expect_eq "existing output kept" "$(cat mid2.out)" "old"
expect_ok decompress mid.ibp mid2.out -q -f
checks=$((checks + 1))
cmp -s mid.bin mid2.out || fail "existing output not replaced"
cp mid.ibp mid3.ibp
expect_ok compress mid.bin mid3.ibp --tensor-bytes 4K --force -q
expect_ok verify mid3.ibp --original mid.bin -q
rm mid3.ibp

# '-': standard input and output.  The summary goes to stderr when the
# container itself goes to stdout.
checks=$((checks + 1))
"$IBP" compress - - --tensor-bytes 4K <mid.bin >pipe.ibp 2>"$ERR" &&
  grep -q '^- -> -: 3000000 B -> ' "$ERR" || fail "compress - -: $(cat "$ERR")"
checks=$((checks + 1))
cat pipe.ibp | "$IBP" verify - --original mid.bin -q 2>"$ERR" || fail "verify - (pipe): $(cat "$ERR")"
checks=$((checks + 1))
"$IBP" decompress - - -q <pipe.ibp | cmp -s - mid.bin || fail "decompress - - differs"
checks=$((checks + 1))
cat mid.bin | "$IBP" compress - piped.ibp --tensor-bytes 4K -q &&
  "$IBP" decompress piped.ibp - -q | cmp -s - mid.bin || fail "compress from a pipe, decompress to a pipe"
rm pipe.ibp piped.ibp
# Output files get the usual permissions (umask), not mkstemp's 0600.
checks=$((checks + 1))
perm=$(ls -l mid.out | cut -c1-10)
[ "$perm" = "-rw-r--r--" ] || [ "$(umask)" != 0022 ] || fail "mid.out has mode $perm"

expect_files mid.bin mid.ibp mid.out mid2.out
finish
