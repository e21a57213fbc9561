#!/bin/sh
# preload_exports: libibp.so exports exactly the symbols of the global:
# section of preload/libibp.map -- nothing more (a leaked internal symbol
# could interpose on the application's or be interposed on), nothing less
# (a listed hook that is not defined is silently not exported by ld).
#   exports.sh <nm> <libibp.so> <libibp.map>
. "$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)/lib.sh"
nm=$1 lib=$2 map=$3
[ -f "$lib" ] || { echo "preload_exports: $lib not built"; exit 1; }
# The map: comments removed; names of global: sections; version node names.
awk '
  { text = text $0 "\n" }
  END {
    gsub(/\/\*([^*]|\*+[^*\/])*\*+\//, " ", text)   # C comments
    gsub(/#[^\n]*/, " ", text)                       # # comments
    gsub(/[{};]/, " & ", text)
    n = split(text, tok, /[ \t\n]+/)
    section = ""
    for (i = 1; i <= n; i++) {
      t = tok[i]
      if (t == "") continue
      if (t == "global:") { section = "global"; continue }
      if (t == "local:") { section = "local"; continue }
      if (t == "{") { depth++; continue }
      if (t == "}") { depth--; section = ""; continue }
      if (t == ";") continue
      if (depth == 0) { print "node " t; continue }
      if (section == "global" || section == "") print "sym " t
    }
  }' "$map" > "$tmp/map"
sed -n 's/^sym //p' "$tmp/map" | sort -u > "$tmp/want"
sed -n 's/^node //p' "$tmp/map" | sort -u > "$tmp/nodes"
if grep -nE '[*?[]|"' "$tmp/want" > /dev/null; then
  echo "$map: wildcards or extern \"C++\" in global: are not supported by this check"
  exit 1
fi
# The library: defined dynamic symbols, version suffix removed; absolute
# (A) entries that are version node names are not symbols.
"$nm" -D --defined-only "$lib" > "$tmp/nm" || exit 1
awk 'NF >= 2 { name = $NF; type = $(NF - 1); sub(/@.*/, "", name);
               print type, name }' "$tmp/nm" > "$tmp/typed"
awk -v nodes=" $(tr '\n' ' ' < "$tmp/nodes")" \
  '!($1 == "A" && index(nodes, " " $2 " ")) { print $2 }' "$tmp/typed" |
  sort -u > "$tmp/have"
comm -13 "$tmp/want" "$tmp/have" > "$tmp/extra"
comm -23 "$tmp/want" "$tmp/have" > "$tmp/missing"
while read -r s; do
  violations=$((violations + 1))
  echo "$lib: exports '$s', which $map does not list (make it static or hidden)"
done < "$tmp/extra"
while read -r s; do
  violations=$((violations + 1))
  echo "$lib: does not export '$s', which $map lists (not defined, or hidden?)"
done < "$tmp/missing"
[ "$violations" -eq 0 ] && echo "exports: $(tr '\n' ' ' < "$tmp/have")"
finish preload_exports "exports differ from $map"
