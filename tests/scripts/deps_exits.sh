# The fresh-machine plumbing (scripts/deps.sh, README "Quick start"):
#   - scripts/deps.sh names what is missing with the Debian package, and
#     does not install under IBP_NO_INSTALL=1 (exit 1);
#   - the README commands' exit codes as their --help says: 2 for a bad
#     argument; 1 when the build fails (a cmake that fails stands in);
#   - CMake's configure step names a missing header with its package
#     (cmake/dependencies.cmake; /usr/include hidden from find_path).
#   sh deps_exits.sh SOURCE_DIR WORK_DIR
set -u
SRC=$1
WORK=$2
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
rm -rf "$WORK" && mkdir -p "$WORK/bin" || exit 1
BASH=$(command -v bash)

# ---- scripts/deps.sh -----------------------------------------------------------
out=$(env PATH="$WORK/bin" IBP_NO_INSTALL=1 "$BASH" -c \
  ". '$SRC/scripts/deps.sh'; ibp_deps_install build" 2>&1)
rc=$?
[ "$rc" = 1 ] || fail "ibp_deps_install with nothing on PATH: exit $rc, expected 1"
case $out in
*"missing: cmake make gcc g++"*"IBP_NO_INSTALL=1"*) ;;
*) fail "ibp_deps_install printed: $out" ;;
esac
"$BASH" "$SRC/scripts/deps.sh" --missing bench build >/dev/null 2>&1
rc=$?
[ "$rc" -le 1 ] || fail "deps.sh --missing: exit $rc"

# ---- exit codes ------------------------------------------------------------------
for s in scripts/demo.sh tests/run-all.sh scripts/deps.sh; do
  "$BASH" "$SRC/$s" --no-such-option >"$WORK/out" 2>&1
  rc=$?
  [ "$rc" = 2 ] || fail "$s --no-such-option: exit $rc, expected 2"
  "$BASH" "$SRC/$s" --help >"$WORK/help" 2>&1 || fail "$s --help failed"
  grep -q "2 for a bad argument\|exit 1 when" "$WORK/help" ||
    fail "$s --help does not state its exit status"
done
# A build that fails (cmake exits 2, as make does) makes the demo exit 1.
printf '#!/bin/sh\necho "fake cmake: failing" >&2\nexit 2\n' >"$WORK/bin/cmake"
chmod +x "$WORK/bin/cmake"
env PATH="$WORK/bin:$PATH" DEMO_BUILD_DIR="$WORK/demo-build" \
  "$BASH" "$SRC/scripts/demo.sh" >"$WORK/demo.out" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "demo.sh with a failing build: exit $rc, expected 1 ($(tail -n 3 "$WORK/demo.out"))"

# ---- the CMake check ---------------------------------------------------------------
cmake -S "$SRC" -B "$WORK/cmake" -DCMAKE_IGNORE_PATH=/usr/include \
  -DBUILD_TESTING=OFF >"$WORK/cmake.out" 2>&1
rc=$?
[ "$rc" != 0 ] || fail "cmake configured without uthash.h"
grep -q "uthash.h (Debian package uthash-dev)" "$WORK/cmake.out" ||
  fail "cmake's message does not name uthash-dev: $(tail -n 8 "$WORK/cmake.out")"
grep -q "sudo apt-get install .*uthash-dev" "$WORK/cmake.out" ||
  fail "cmake's message does not say how to install uthash-dev"

if [ "$failures" -ne 0 ]; then
  echo "$failures checks failed" >&2
  exit 1
fi
echo "deps_exits: ok"
