# `ibp profile`: the built-in list, printing a profile (built-in or file,
# which read back the same), and one message for a profile that cannot be
# read.
. "$(dirname "$0")/common.sh"
# The running decompress kernels' build (kernels/ibp_kernels.h).
BUILD=$(sed -n 's/^#define IBP_DECODER_BUILD "\(.*\)"$/\1/p' \
  "$(dirname "$0")/../../kernels/ibp_kernels.h")
[ -n "$BUILD" ] || fail "no IBP_DECODER_BUILD in kernels/ibp_kernels.h"

expect_ok profile --help
grep -q '^Usage: ibp profile \[NAME|FILE\]' "$OUT" || fail "ibp profile --help: no usage line"
expect_ok help profile
grep -q '^Usage: ibp profile' "$OUT" || fail "ibp help profile: no usage line"
expect_ok --help
grep -q '^  profile ' "$OUT" || fail "ibp --help does not list profile"

# The built-in names, one a line.
expect_ok profile
expect_eq "built-in list" "$(cat "$OUT")" "a100-pcie4
h100-pcie5"

# A built-in printed, then read back from a file: the same text.
for name in a100-pcie4 h100-pcie5; do
  expect_ok profile "$name"
  cp "$OUT" "$name.prof"
  expect_eq "name line of $name" "$(grep '^name = ' "$OUT")" "name = $name"
  expect_eq "parameter lines of $name" "$(grep -c '^[a-z0-9_]* = ' "$OUT")" 25
  # The built-ins' decode terms are the old kernel's: flagged unmeasured.
  expect_eq "decoder_build of $name" "$(grep '^decoder_build = ' "$OUT")" \
    "decoder_build = word-pdep"
  expect_eq "first line of $name" "$(head -n 1 "$OUT")" \
    "# decode terms: unmeasured for this decoder (decoder_build word-pdep; this decoder: $BUILD)"
  expect_ok profile "./$name.prof"
  cmp -s "$OUT" "$name.prof" || fail "ibp profile ./$name.prof differs from ibp profile $name"
done
grep -qx 'ce_h2d_gbps = 25.5' a100-pcie4.prof || fail "a100-pcie4: ce_h2d_gbps"
grep -qx 'sms = 114' h100-pcie5.prof || fail "h100-pcie5: sms"

# An edited copy: the parser's message, with the file and the line.
sed 's/^sms = 108$/sms = 0/' a100-pcie4.prof >edited.prof
line=$(grep -n '^sms = 0$' edited.prof | cut -d: -f1)
expect_error 1 "ibp: edited.prof:$line: sms: 0 is out of range [1, 4096]" profile edited.prof
# A profile without decoder_build (written before the key): unknown.
grep -v '^decoder_build = ' a100-pcie4.prof >old.prof
expect_ok profile ./old.prof
expect_eq "decoder_build of a file without it" "$(grep '^decoder_build = ' "$OUT")" \
  "decoder_build = unknown"
expect_eq "first line of a file without decoder_build" "$(head -n 1 "$OUT")" \
  "# decode terms: unmeasured for this decoder (decoder_build unknown; this decoder: $BUILD)"
# One measured with this decoder.
sed "s/^decoder_build = .*/decoder_build = $BUILD/" a100-pcie4.prof >mine.prof
expect_ok profile ./mine.prof
expect_eq "first line of a profile of this decoder" "$(head -n 1 "$OUT")" \
  "# decode terms: measured with this decoder ($BUILD)"
printf 'name = x\nfoo = 1\n' >bad.prof
expect_error 1 "ibp: bad.prof:2: foo: unknown key" profile bad.prof

# Not a profile at all.
expect_error 1 "ibp: nosuch: not a built-in profile, and cannot be opened: No such file or directory" \
  profile nosuch
mkdir adir
expect_error 1 "ibp: adir: not a regular file (a directory)" profile adir
expect_error 1 "ibp: /dev/null: not a regular file (a character device)" profile /dev/null

# Usage errors.
expect_error 2 "ibp: unexpected argument 'b' (see 'ibp profile --help')" profile a b
expect_error 2 "ibp: unknown option '--frob' (see 'ibp profile --help')" profile --frob

rm -r a100-pcie4.prof h100-pcie5.prof edited.prof old.prof mine.prof bad.prof adir
expect_files
finish
