#!/bin/sh
# checks/mutate_chooser.sh -- do the chooser's tests pin it down?  Applies
# each one-line mutant of checks/mutants_chooser.tsv (a changed operator or
# constant, a removed statement) to a copy of the chooser's files, builds
# tests/preload/serve/test_choose.c against it and runs it -- and for a
# mutant of chooser.c or beside.c (timing, contention, spans) the three
# tests that link them, tests/preload/serve/test_chooser_{mark,serial,quiet}.c,
# and for one of streams.c (the streams table: busy per stream, what a copy
# is queued behind) tests/preload/serve/test_streams_own.c -- these need
# CUDA's headers (CUDA_INCLUDE, default /usr/local/cuda/include; without
# them those mutants are skipped, and said so): a mutant a test fails on
# (or that runs past its time) is killed.  Run from the
# repository root (or give it as the first argument):
#
#   sh checks/mutate_chooser.sh [REPO] [--verbose]
#
# Prints one line per surviving mutant (all with --verbose), and last
# `mutants=N killed=K`.  Exit status: 0 when K/N >= 0.9 and N >= 25; 1
# when fewer are killed; 2 when the check itself is broken (the unmutated
# test fails, a mutant's text is no longer in its file, a mutant does not
# compile).  Needs sh, cc, awk; works in a temporary directory.
set -eu
repo=. verbose=0
for a in "$@"; do
  case $a in
    --verbose) verbose=1 ;;
    -*) echo "mutate_chooser: unknown option $a" >&2; exit 2 ;;
    *) repo=$a ;;
  esac
done
cd "$repo"
list=checks/mutants_chooser.tsv
[ -f "$list" ] || { echo "mutate_chooser: run it from the repository root ($list missing)" >&2; exit 2; }
cc=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mutate_chooser.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# the copy of the tree the mutants are applied to: what test_choose builds
# from
files="preload/serve/choose/choose.c preload/serve/choose/choose.h
preload/stats/routes.def tests/preload/serve/test_choose.c
tests/preload/serve/check.h
preload/serve/choose/chooser.c preload/serve/choose/beside.c
preload/serve/choose/streams.c"
for f in $files; do
  mkdir -p "$tmp/tree/$(dirname "$f")"
  cp "$f" "$tmp/tree/$f"
done

build_and_run() { # $1: the tree; 0 when the test passes
  "$cc" -std=c11 -O1 -w -I"$1/preload" -o "$tmp/test" \
    "$1/tests/preload/serve/test_choose.c" "$1/preload/serve/choose/choose.c" \
    -lm 2>"$tmp/cc.err" || return 3
  timeout 60 "$tmp/test" >/dev/null 2>&1
}

# chooser.c's tests, its copy in $1 built with the repository's headers
cuda=${CUDA_INCLUDE:-/usr/local/cuda/include}
build_and_run_chooser() { # $1: the tree; 0 when every test passes
  for t in mark serial quiet; do
    "$cc" -std=c11 -O1 -w -I"$repo" -I"$repo/preload" -I"$repo/kernels" \
      -I"$repo/include" -isystem "$cuda" -o "$tmp/test_$t" \
      "$repo/tests/preload/serve/test_chooser_$t.c" \
      "$1/preload/serve/choose/chooser.c" "$1/preload/serve/choose/choose.c" \
      "$1/preload/serve/choose/beside.c" \
      -lm -lpthread 2>"$tmp/cc.err" || return 3
    timeout 60 "$tmp/test_$t" >/dev/null 2>&1 || return 1
  done
}

# streams.c's test, its copy in $1
build_and_run_streams() { # $1: the tree; 0 when the test passes
  "$cc" -std=c11 -O1 -w -I"$repo" -I"$repo/preload" -I"$repo/kernels" \
    -I"$repo/include" -isystem "$cuda" -o "$tmp/test_streams" \
    "$repo/tests/preload/serve/test_streams_own.c" \
    "$1/preload/serve/choose/streams.c" -lpthread 2>"$tmp/cc.err" || return 3
  timeout 60 "$tmp/test_streams" >/dev/null 2>&1
}

if ! build_and_run "$tmp/tree"; then
  echo "mutate_chooser: the unmutated test fails (or does not build): $(cat "$tmp/cc.err")" >&2
  exit 2
fi
chooser=1
if [ ! -f "$cuda/cuda.h" ]; then
  chooser=0
  echo "mutate_chooser: no $cuda/cuda.h (CUDA_INCLUDE): chooser.c's mutants skipped" >&2
elif ! build_and_run_chooser "$tmp/tree"; then
  echo "mutate_chooser: the unmutated chooser tests fail (or do not build): $(cat "$tmp/cc.err")" >&2
  exit 2
elif ! build_and_run_streams "$tmp/tree"; then
  echo "mutate_chooser: the unmutated streams test fails (or does not build): $(cat "$tmp/cc.err")" >&2
  exit 2
fi

n=0 killed=0 broken=0
# one mutant a line: file <TAB> text <TAB> replacement <TAB> what it breaks
# (the text's first occurrence is replaced; "-" as the replacement removes
# it); '#' lines are comments
while IFS='	' read -r file old new what; do
  case $file in '' | '#'*) continue ;; esac
  run=build_and_run
  case $file in
    */chooser.c | */beside.c)
      [ "$chooser" = 1 ] || continue
      run=build_and_run_chooser
      ;;
    */streams.c)
      [ "$chooser" = 1 ] || continue
      run=build_and_run_streams
      ;;
  esac
  n=$((n + 1))
  rm -rf "$tmp/m"
  cp -r "$tmp/tree" "$tmp/m"
  [ "$new" = - ] && new=
  if ! OLD=$old NEW=$new awk '
      BEGIN { old = ENVIRON["OLD"]; new = ENVIRON["NEW"]; done = 0 }
      !done && (i = index($0, old)) {
        $0 = substr($0, 1, i - 1) new substr($0, i + length(old)); done = 1 }
      { print }
      END { exit done ? 0 : 1 }' "$tmp/tree/$file" >"$tmp/m/$file"; then
    echo "mutant $n ($what): text not found in $file: $old" >&2
    broken=$((broken + 1))
    continue
  fi
  set +e
  $run "$tmp/m"
  rc=$?
  set -e
  if [ "$rc" = 3 ]; then
    echo "mutant $n ($what): does not compile: $(head -n 3 "$tmp/cc.err")" >&2
    broken=$((broken + 1))
  elif [ "$rc" != 0 ]; then
    killed=$((killed + 1))
    [ "$verbose" = 0 ] || echo "killed   $n: $what"
  else
    echo "SURVIVED $n: $what ($file: '$old' -> '$new')"
  fi
done <"$list"

echo "mutants=$n killed=$killed"
[ "$broken" = 0 ] || exit 2
[ "$n" -ge 25 ] && [ $((10 * killed)) -ge $((9 * n)) ] || exit 1
