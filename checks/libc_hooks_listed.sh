#!/bin/sh
# check_libc_hooks_listed: every row of preload/track/libc_hooks.def, of
# preload/hooks/hooks.def and of preload/hooks/order.def names a symbol listed in the global: section of
# preload/libibp.map.  hooks_libc.c and hooks/exports.c define a function
# for each row, but ld exports only what the map lists: a row missing there
# is silently a dead hook (and preload_exports, which compares the map with
# the built library, cannot see it).  The map stays hand-written; this
# keeps it complete.
#   libc_hooks_listed.sh <source root>
. "$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)/lib.sh"
root=$1
def=$root/preload/track/libc_hooks.def
map=$root/preload/libibp.map
for f in "$def" "$map"; do
  [ -f "$f" ] || { echo "check_libc_hooks_listed: $f missing"; exit 1; }
done
# The map's global: names, one a line.
strip "$map" | awk '
  { gsub(/[{};]/, " & ") }
  {
    for (i = 1; i <= NF; i++) {
      if ($i == "global:") { global = 1; continue }
      if ($i == "local:" || $i == "}") { global = 0; continue }
      if (global && $i != ";" && $i != "{") print $i
    }
  }' | sort -u > "$tmp/listed"
# rows DEF ROW_ERE: "line name" for every row, the name on the line of the
# macro, then a violation for each name not listed.
rows() {
  strip "$1" | grep -nE -- "$2" |
    sed -E "s/^([0-9]+):.*$2[[:space:]]*([A-Za-z_][A-Za-z0-9_]*)?.*/\\1 \\2/" \
    > "$tmp/rows"
  while read -r line name; do
    if [ -z "$name" ]; then
      violation "$1" "$line" \
        "row without its name on this line (the check reads it from here)"
    elif ! grep -qxF -- "$name" "$tmp/listed"; then
      violation "$1" "$line" \
        "'$name' is not in the global: section of $map: add it there (hooks are exported only when listed)"
    fi
  done < "$tmp/rows"
}
rows "$def" 'IBP_LIBC_[A-Z]+[[:space:]]*\('
rows "$root/preload/hooks/hooks.def" 'IBP_HOOK[[:space:]]*\('
rows "$root/preload/hooks/order.def" 'IBP_ORDER[[:space:]]*\('
finish check_libc_hooks_listed "libc_hooks.def or hooks.def rows missing from libibp.map"
