# Shared helpers of the ibp CLI tests (POSIX sh), sourced by each test:
#   sh TEST.sh IBP GEN WORKDIR
# The test runs in WORKDIR/files (emptied first); the output of the last
# `run` is in $OUT and $ERR, its exit status in $rc.
set -u

IBP=$1
GEN=$2
WORK=$3
OUT=$WORK/stdout
ERR=$WORK/stderr
FILES=$WORK/files
failures=0
checks=0

rm -rf "$WORK" && mkdir -p "$FILES" && cd "$FILES" || exit 1

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# finish: ends the test with the verdict.
finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures of $checks checks failed" >&2
    exit 1
  fi
  echo "all $checks checks passed"
  exit 0
}

# run ARGS...: runs ibp, capturing stdout, stderr and the exit status.
run() {
  checks=$((checks + 1))
  "$IBP" "$@" >"$OUT" 2>"$ERR"
  rc=$?
}

# The command line of the last run, for messages.
shown() {
  echo "ibp $*"
}

# expect_ok ARGS...: exit 0 and nothing on stderr.
expect_ok() {
  run "$@"
  if [ "$rc" -ne 0 ] || [ -s "$ERR" ]; then
    fail "$(shown "$@"): exit $rc, stderr: $(cat "$ERR")"
    return 1
  fi
  return 0
}

# expect_error CODE MESSAGE ARGS...: exit CODE, nothing on stdout, and
# exactly the one line MESSAGE on stderr.
expect_error() {
  code=$1
  message=$2
  shift 2
  run "$@"
  if [ "$rc" -ne "$code" ]; then
    fail "$(shown "$@"): exit $rc, expected $code (stderr: $(cat "$ERR"))"
  elif [ -s "$OUT" ]; then
    fail "$(shown "$@"): unexpected stdout: $(cat "$OUT")"
  elif [ "$(cat "$ERR")" != "$message" ] || [ "$(wc -l <"$ERR")" -ne 1 ]; then
    fail "$(shown "$@"): stderr is
  $(cat "$ERR")
expected
  $message"
  fi
}

# expect_error_like CODE REGEX ARGS...: as expect_error, with the one line
# on stderr matching the extended regular expression REGEX.
expect_error_like() {
  code=$1
  regex=$2
  shift 2
  run "$@"
  if [ "$rc" -ne "$code" ]; then
    fail "$(shown "$@"): exit $rc, expected $code (stderr: $(cat "$ERR"))"
  elif [ -s "$OUT" ]; then
    fail "$(shown "$@"): unexpected stdout: $(cat "$OUT")"
  elif [ "$(wc -l <"$ERR")" -ne 1 ] || ! grep -Eqx -- "$regex" "$ERR"; then
    fail "$(shown "$@"): stderr is
  $(cat "$ERR")
expected a line matching
  $regex"
  fi
}

# expect_files NAME...: the current directory holds exactly these entries
# (hidden ones included: a stray temporary file fails the check).
expect_files() {
  checks=$((checks + 1))
  want=$(printf '%s\n' "$@" | sort)
  have=$(ls -A | sort)
  if [ "$want" != "$have" ]; then
    fail "directory holds [$(echo $have)], expected [$(echo $want)]"
  fi
}

# json_get KEY: value of a top-level member of the JSON in $OUT.
json_get() {
  sed -n "s/^  \"$1\": \\(.*\\)\$/\\1/p" "$OUT" | sed 's/,$//'
}

# expect_json_valid: $OUT is one valid JSON object (when python3 can check).
expect_json_valid() {
  checks=$((checks + 1))
  if python3 -c 'import json' >/dev/null 2>&1; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert isinstance(d, dict)' "$OUT" ||
      fail "stdout is not one JSON object: $(cat "$OUT")"
  fi
  [ "$(head -c 1 "$OUT")" = "{" ] || fail "JSON does not start with {"
  [ "$(tail -n 1 "$OUT")" = "}" ] || fail "JSON does not end with }"
}

# expect_eq WHAT GOT WANT
expect_eq() {
  checks=$((checks + 1))
  [ "$2" = "$3" ] || fail "$1 is '$2', expected '$3'"
}

# expect_true WHAT AWK-CONDITION: e.g. expect_true "saved" "$s > 0 && $s < 1"
expect_true() {
  checks=$((checks + 1))
  awk "BEGIN { exit !($2) }" || fail "$1: not true: $2"
}
