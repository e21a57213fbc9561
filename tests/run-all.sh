#!/usr/bin/env bash
# The whole test suite (README command 2): release build + tests, the same
# tests under ASan/UBSan, and a short libFuzzer run of every fuzz target.
#
#   bash tests/run-all.sh
#
#   IBP_QUICK=1    skip the long tests (10^6 round-trips, ~30 s)
#   IBP_NO_FUZZ=1  skip the fuzz build (e.g. without clang)
#   IBP_TEST_TIMEOUT_SCALE=N  multiply every test's timeout by N (default:
#                  2 in release, 4 under the sanitizers; tests/README.md)
#
# What it installs when missing (apt-get, sudo when not root): the build,
# test and fuzz groups of scripts/deps.sh (IBP_NO_INSTALL=1: only say what
# is missing; IBP_NO_FUZZ=1: not the fuzz group; the fuzz group failing to
# install skips the fuzz step, except under CI=true).
# Exit status: 0 when every step passes; 1 when one fails (an install, the
# formatting, a build or a test); 2 for a bad argument.
set -eEuo pipefail
trap 'echo "run-all.sh: failed (line $LINENO)" >&2; exit 1' ERR
cd "$(dirname "$0")/.."
for arg in "$@"; do
  case $arg in
  -h | --help)
    sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "run-all.sh: unknown argument '$arg' (see --help)" >&2
    exit 2
    ;;
  esac
done
jobs=$(nproc 2>/dev/null || echo 2)

step() { printf '\n==== %s ====\n' "$*"; }

step "what the tests need (scripts/deps.sh)"
# shellcheck source=scripts/deps.sh
. scripts/deps.sh
ibp_deps_install build test
# without clang's libFuzzer the fuzz step below says what it skips
[ "${IBP_NO_FUZZ:-0}" = 1 ] || ibp_deps_install fuzz || true

step "formatting (clang-format, .clang-format)"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z '*.c' '*.h' '*.cc' '*.cu' '*.cuh' |
    xargs -0 clang-format --dry-run --Werror
else
  echo "not a git checkout (no file list): skipped"
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
# the kernels' fatbin is the release build's (nvcc once: kernels/CMakeLists.txt)
cmake --preset asan -DIBP_FATBIN_FROM="$PWD/build/release" >/dev/null
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
