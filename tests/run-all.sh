#!/usr/bin/env bash
# The whole test suite (README command 2): release build + tests, the same
# tests under ASan/UBSan, and a short libFuzzer run of every fuzz target.
#   IBP_QUICK=1    skip the long tests (10^6 round-trips, ~30 s)
#   IBP_NO_FUZZ=1  skip the fuzz build (e.g. without clang)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

step() { printf '\n==== %s ====\n' "$*"; }

step "formatting (clang-format, .clang-format)"
if command -v clang-format >/dev/null; then
  git ls-files '*.c' '*.h' '*.cc' '*.cu' '*.cuh' | xargs clang-format --dry-run --Werror
else
  echo "clang-format not installed: skipped"
fi

step "release build + tests"
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
if [ "${IBP_QUICK:-0}" = 1 ]; then
  ctest --preset release -j "$jobs" -LE long
else
  ctest --preset release -j "$jobs"
fi

step "ASan + UBSan build + tests"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs"

have_libfuzzer() {
  command -v clang >/dev/null && command -v clang++ >/dev/null &&
    ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a \
      >/dev/null 2>&1
}

if [ "${IBP_NO_FUZZ:-0}" != 1 ]; then
  step "libFuzzer targets (short run)"
  if have_libfuzzer; then
    cmake --preset fuzz >/dev/null
    cmake --build --preset fuzz -j "$jobs"
    ctest --preset fuzz -j "$jobs"
  elif [ "${CI:-}" = true ]; then
    echo "clang/libFuzzer missing: CI must run the fuzzers (see .ci/run)" >&2
    exit 1
  else
    echo "skipped: clang + libclang-rt-dev not installed (bash .ci/run installs them)"
  fi
fi
step "all tests passed"
