#!/bin/sh
# Checks the built runtime libraries' symbols:
#  - libcudart.so.13: SONAME libcudart.so.13; exports exactly the names in
#    libcudart.map, under version node libcudart.so.13; no DT_NEEDED on
#    libcuda and no undefined driver (cu*) symbol: it reaches the driver only
#    through dlopen/dlsym;
#  - the static archive: no undefined driver symbol either, and every global
#    symbol it defines is a CUDA API name (or one of the __cuda* names
#    nvcc's generated code calls) or carries the internal prefix
#    (sanitizer builds add their own __asan/__odr_asan symbols).
# usage: check_exports.sh <libcudart.so.13> <libcudart.map> <libcudart_sim_static.a>
set -u
lib=$1 map=$2 archive=$3
fail=0
die() { echo "FAIL: $*"; fail=1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/rt_exports.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = libcudart.so.13 ] || die "SONAME is '$soname'"
if readelf -d "$lib" | grep NEEDED | grep -q libcuda; then
  die "libcudart.so.13 links libcuda directly"
fi

# expected exports: the global: section of the map
sed -n '/global:/,/local:/p' "$map" | sed 's,/\*.*\*/,,' | tr -d ' \t' |
  grep -E '^[A-Za-z_][A-Za-z0-9_]*;$' | tr -d ';' | sort >"$work/expected"
nm -D --defined-only "$lib" | awk '$2 ~ /^[TWDBRV]$/ { print $3 }' |
  grep -v '^libcudart\.so\.13$' >"$work/raw"
sed 's/@.*//' "$work/raw" | sort -u >"$work/actual"
if ! cmp -s "$work/expected" "$work/actual"; then
  diff "$work/expected" "$work/actual" | sed 's/^/  /'
  die "exported symbols differ from libcudart.map (< map only, > library only)"
fi
unversioned=$(grep -v '@@libcudart\.so\.13$' "$work/raw")
[ -z "$unversioned" ] || die "exports without version libcudart.so.13: $unversioned"

cu_undef=$(nm -D --undefined-only "$lib" | awk '{ print $NF }' | grep -E '^cu[A-Z]')
[ -z "$cu_undef" ] || die "libcudart.so.13 references driver symbols: $cu_undef"

cu_undef=$(nm --undefined-only "$archive" 2>/dev/null | awk 'NF { print $NF }' | grep -E '^cu[A-Z]')
[ -z "$cu_undef" ] || die "the static archive references driver symbols: $cu_undef"
stray=$(nm --defined-only -g "$archive" 2>/dev/null | awk 'NF == 3 { print $3 }' |
  grep -Ev '^((__)?cuda[A-Z][A-Za-z0-9]*(_ptds|_ptsz)?|cudartsim__[a-z0-9_]+)$' |
  grep -Ev '^__(odr_asan|asan|ubsan|sanitizer)')  # sanitizer instrumentation
[ -z "$stray" ] || die "the static archive defines unprefixed globals: $stray"

[ $fail -eq 0 ] && echo "PASS: $(wc -l <"$work/expected") exports, no direct driver references"
exit $fail
