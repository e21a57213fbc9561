# The installed tree (cmake/install/): `cmake --install` into an empty
# prefix, then a small program outside the project built against it two
# ways -- CMake's find_package(ibp) (ibp::codec) and pkg-config (ibp.pc) --
# and run; the installed `ibp` finds the installed libibp.so.
#   sh install.sh BUILD_DIR CONSUMER_SRC WORK_DIR LIBDIR CC HAVE_PRELOAD
set -u
BUILD=$1
SRC=$2
WORK=$3
LIBDIR=$4
CC=$5
HAVE_PRELOAD=$6
PREFIX=$WORK/prefix
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# A sanitized build's libraries carry the ASan runtime: a consumer that is
# not sanitized may load it second.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0:detect_leaks=0"

rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" 2>&1 ||
  { cat "$WORK/install.log" >&2; echo "FAIL: cmake --install" >&2; exit 1; }

# ---- what is installed -----------------------------------------------------
for f in bin/ibp include/ibp/codec.h include/ibp/container.h \
  include/ibp/chunk_widths.h "$LIBDIR/libibp_codec.so" \
  "$LIBDIR/cmake/ibp/ibpConfig.cmake" "$LIBDIR/cmake/ibp/ibpConfigVersion.cmake" \
  "$LIBDIR/pkgconfig/ibp.pc"; do
  [ -e "$PREFIX/$f" ] || fail "$f not installed"
done
if [ "$HAVE_PRELOAD" = 1 ]; then
  [ -e "$PREFIX/$LIBDIR/libibp.so" ] || fail "$LIBDIR/libibp.so not installed"
fi
# Only the public names leave libibp_codec.so.
bad=$(nm -D --defined-only "$PREFIX/$LIBDIR/libibp_codec.so" |
  awk '$2 ~ /^[TDBRW]$/ && $3 !~ /^ibp_[a-z]/ { print $3 }')
[ -z "$bad" ] || fail "libibp_codec.so exports $(echo $bad)"
nm -D --defined-only "$PREFIX/$LIBDIR/libibp_codec.so" | grep -q ' T ibp_search$' ||
  fail "libibp_codec.so does not export ibp_search"

# ---- find_package(ibp) -----------------------------------------------------
if cmake -S "$SRC" -B "$WORK/cmake-build" -DCMAKE_C_COMPILER="$CC" \
  -DCMAKE_PREFIX_PATH="$PREFIX" >"$WORK/cmake.log" 2>&1 &&
  cmake --build "$WORK/cmake-build" >>"$WORK/cmake.log" 2>&1; then
  out=$("$WORK/cmake-build/consumer") || fail "consumer (find_package) failed: $out"
  case $out in "consumer: ok "*) ;; *) fail "consumer (find_package) printed: $out" ;; esac
else
  cat "$WORK/cmake.log" >&2
  fail "the consumer does not build with find_package(ibp)"
fi

# ---- pkg-config ------------------------------------------------------------
if command -v pkg-config >/dev/null 2>&1; then
  export PKG_CONFIG_PATH="$PREFIX/$LIBDIR/pkgconfig"
  libdir=$(pkg-config --variable=libdir ibp)
  [ "$(cd "$libdir" 2>/dev/null && pwd -P)" = "$(cd "$PREFIX/$LIBDIR" && pwd -P)" ] ||
    fail "ibp.pc's libdir is '$libdir', expected $PREFIX/$LIBDIR"
  # libibp_codec.so links libxxhash (the container checksum): a static
  # link needs it too (Requires.private)
  pkg-config --print-requires-private ibp | grep -q '^libxxhash' ||
    fail "ibp.pc does not list libxxhash in Requires.private"
  # shellcheck disable=SC2046
  if $CC -o "$WORK/consumer-pc" "$SRC/consumer.c" $(pkg-config --cflags --libs ibp) \
    -Wl,-rpath,"$libdir" 2>"$WORK/pc.log"; then
    out=$("$WORK/consumer-pc") || fail "consumer (pkg-config) failed: $out"
    case $out in "consumer: ok "*) ;; *) fail "consumer (pkg-config) printed: $out" ;; esac
  else
    cat "$WORK/pc.log" >&2
    fail "the consumer does not build with pkg-config"
  fi
else
  fail "pkg-config is not installed (Debian: pkgconf)"
fi

# ---- the installed tool ----------------------------------------------------
"$PREFIX/bin/ibp" --version >/dev/null || fail "installed ibp --version"
if [ "$HAVE_PRELOAD" = 1 ]; then
  want=$(cd "$PREFIX/$LIBDIR" && pwd -P)/libibp.so
  env -u IBP_PRELOAD_LIB "$PREFIX/bin/ibp" run --print-env --sim -- true >"$WORK/env.out" 2>&1
  grep -q "^export LD_PRELOAD='\?$want" "$WORK/env.out" ||
    fail "installed ibp run preloads $(grep LD_PRELOAD "$WORK/env.out"), expected $want"
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures checks failed" >&2
  exit 1
fi
echo "install: ok"
