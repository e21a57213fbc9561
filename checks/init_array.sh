#!/bin/sh
# preload_no_init_array: the built libibp.so runs no code of ours at load
# time.  A shared library made by this toolchain carries a fixed number of
# .init_array entries of its own (crtbegin's frame_dummy); the reference is
# a minimal library built with the same compiler and flags.  Fails when
#   - libibp.so has more INIT_ARRAY / PREINIT_ARRAY bytes than the reference;
#   - DT_INIT points anywhere but the start of .init (a linker -init=fn);
#   - an object of ibp_preload, or of a static library linked into it,
#     has an .init_array / .preinit_array / .ctors section (names the file).
#   init_array.sh <readelf> <libibp.so> <reference.so> <objects/archives...>
. "$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)/lib.sh"
readelf=$1 lib=$2 ref=$3
shift 3
for f in "$lib" "$ref"; do
  [ -f "$f" ] || { echo "preload_no_init_array: $f not built"; exit 1; }
done

# dyn_size FILE TAG: the value of dynamic tag TAG (0 if absent).
dyn_size() {
  "$readelf" -dW "$1" | awk -v tag="($2)" '$2 == tag { v = $3 } END { print v + 0 }'
}
for tag in INIT_ARRAYSZ PREINIT_ARRAYSZ; do
  have=$(dyn_size "$lib" "$tag") want=$(dyn_size "$ref" "$tag")
  if [ "$have" -gt "$want" ]; then
    violations=$((violations + 1))
    echo "$lib: $tag is $have bytes, a minimal library has $want: $(((have - want) / 8)) load-time function(s) of ours"
  fi
done
init=$("$readelf" -dW "$lib" | awk '$2 == "(INIT)" { print $3 }')
sec=$("$readelf" -SW "$lib" | sed 's/^ *\[ *[0-9]*\] *//' |
  awk '$1 == ".init" { print $3 }')
if [ -n "$init" ] && [ -n "$sec" ] &&
   [ "$(printf '%d' "$init")" -ne "$(printf '%d' "0x$sec")" ]; then
  violations=$((violations + 1))
  echo "$lib: DT_INIT is $init, not the start of .init (0x$sec): a linker -init function"
fi

# Objects and archives: any init section, with the member that holds it.
# CTest passes $<TARGET_OBJECTS:...> as one ';'-separated argument.
for arg in "$@"; do
  old_ifs=$IFS IFS=';'
  # shellcheck disable=SC2086
  set -f; set -- $arg; set +f
  IFS=$old_ifs
  printf '%s\n' "$@"
done > "$tmp/objects"
while read -r o; do
  [ -f "$o" ] || { echo "note: $o not found"; continue; }
  "$readelf" -SW "$o" 2>/dev/null | awk -v top="$o" '
    /^File: / { file = $2 }
    { line = $0; sub(/^ *\[ *[0-9]+\] */, "", line); split(line, f, " ")
      if (f[1] ~ /^\.(init_array|preinit_array|ctors)([.].*)?$/)
        print (file != "" ? file : top) ": section " f[1] }' |
    sort -u > "$tmp/sections"
  while read -r s; do
    violations=$((violations + 1))
    echo "$s: a constructor (runs when libibp.so is loaded)"
  done < "$tmp/sections"
done < "$tmp/objects"
finish preload_no_init_array "libibp.so runs code at load time"
