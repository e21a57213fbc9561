# ibp top-level usage, --help of every subcommand, --version.
. "$(dirname "$0")/common.sh"

expect_ok --help
grep -q '^Usage: ibp COMMAND' "$OUT" || fail "ibp --help: no usage line"
for cmd in analyze compress decompress verify bench; do
  grep -q "^  $cmd " "$OUT" || fail "ibp --help does not list $cmd"
done

expect_ok -h
expect_ok help
grep -q '^Usage: ibp COMMAND' "$OUT" || fail "ibp help: no usage line"

expect_ok --version
grep -Eqx 'ibp [0-9]+\.[0-9]+\.[0-9]+ \(container format [0-9]+, codec (portable|bmi2)\)' "$OUT" ||
  fail "ibp --version prints: $(cat "$OUT")"

for cmd in analyze compress decompress verify bench; do
  expect_ok "$cmd" --help
  grep -q "^Usage: ibp $cmd" "$OUT" || fail "ibp $cmd --help: no usage line"
  expect_ok "$cmd" -h
  grep -q "^Usage: ibp $cmd" "$OUT" || fail "ibp $cmd -h: no usage line"
  expect_ok help "$cmd"
  grep -q "^Usage: ibp $cmd" "$OUT" || fail "ibp help $cmd: no usage line"
done

# The bench help documents the data generator.
expect_ok bench --help
grep -q 'Box-Muller' "$OUT" || fail "ibp bench --help does not describe the generator"

# No command: usage on stderr, exit 2.
run
expect_eq "exit status of 'ibp'" "$rc" 2
grep -q '^Usage: ibp COMMAND' "$ERR" || fail "ibp: no usage on stderr"
[ -s "$OUT" ] && fail "ibp: unexpected stdout"

expect_error 2 "ibp: unknown command 'frobnicate' (see 'ibp --help')" frobnicate
expect_error 2 "ibp: unknown option '--frob' (see 'ibp --help')" --frob
expect_error 2 "ibp: unknown command 'frob' (see 'ibp --help')" help frob

expect_files
finish
