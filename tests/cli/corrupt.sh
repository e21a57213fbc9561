# Damaged containers: a flipped byte anywhere in the header, the metadata
# or the payload, a truncated or extended file -- verify and decompress
# fail with one line naming the file and the problem, exit 1, and
# decompress leaves no output behind.
. "$(dirname "$0")/common.sh"

R=64
"$GEN" floats $((R * 100 + 10)) 1 >orig.bin || exit 1
expect_ok compress orig.bin good.ibp --tensor-bytes $R -q
size=$(wc -c <good.ibp | tr -d ' ')
meta_end=$((128 + 2 * R + (100 + 7) / 8)) # header, Mask, Bitval, flags

problem='(: unsupported container version|: container is truncated|: checksum mismatch: data is corrupt|: compressed data is corrupt| is not an ibp container \(bad magic\))'

# check_bad WHAT: bad.ibp must be rejected by verify and decompress.
check_bad() {
  expect_error_like 1 "ibp: bad.ibp$problem" verify bad.ibp
  expect_error_like 1 "ibp: bad.ibp$problem" verify bad.ibp --original orig.bin
  expect_error_like 1 "ibp: bad.ibp$problem" decompress bad.ibp out.bin
  [ "$failures" -eq 0 ] || {
    echo "($1)" >&2
    finish
  }
  expect_files orig.bin good.ibp bad.ibp
}

# flip_at OFFSET...: flips one byte of a fresh copy, for each offset.
flip_at() {
  for off in "$@"; do
    cp good.ibp bad.ibp && "$GEN" flip bad.ibp "$off" || exit 1
    check_bad "byte $off flipped"
  done
}

# Exact messages for typical damage.
cp good.ibp bad.ibp && "$GEN" flip bad.ibp 0
expect_error 1 "ibp: bad.ibp is not an ibp container (bad magic)" verify bad.ibp
cp good.ibp bad.ibp && "$GEN" flip bad.ibp 8
expect_error 1 "ibp: bad.ibp: unsupported container version" decompress bad.ibp out.bin
cp good.ibp bad.ibp && "$GEN" flip bad.ibp 130
expect_error 1 "ibp: bad.ibp: checksum mismatch: data is corrupt" decompress bad.ibp out.bin
head -c $((size - 1)) good.ibp >bad.ibp
expect_error 1 "ibp: bad.ibp: container is truncated" decompress bad.ibp out.bin
expect_files orig.bin good.ibp bad.ibp

# Every header byte, every 5th metadata byte, every 61st payload byte.
offs=""
i=0
while [ $i -lt "$size" ]; do
  offs="$offs $i"
  if [ $i -lt 128 ]; then
    i=$((i + 1))
  elif [ $i -lt $meta_end ]; then
    i=$((i + 5))
  else
    i=$((i + 61))
  fi
done
flip_at $offs $((size - 1))

# Truncated anywhere, or with bytes appended.
for len in 1 7 8 64 127 128 129 $((meta_end - 1)) $meta_end $((meta_end + 1)) \
  $((size / 2)) $((size - 10)) $((size - 1)); do
  head -c "$len" good.ibp >bad.ibp
  check_bad "truncated to $len B"
done
: >bad.ibp
expect_error 1 "ibp: bad.ibp: file is empty" decompress bad.ibp out.bin
{ cat good.ibp && printf 'x'; } >bad.ibp
check_bad "one byte appended"
cat good.ibp good.ibp >bad.ibp
check_bad "container twice"

# The intact container still decodes.
rm -f bad.ibp
expect_ok verify good.ibp --original orig.bin
expect_files orig.bin good.ibp
finish
