#!/bin/sh
# check_preload_layers: the dependency rule inside preload/
# (docs/ARCHITECTURE.md, "Dependency rule").  Its directories form layers,
#   base < track < stats < serve < hooks
# and a file may include the headers of its own directory and of the
# directories before it, never of one after it.  registry/ depends on
# nothing of the project's: it includes only its own headers; nor does
# profile/ (its headers are included as "profile/...").  Of the project
# outside its layers, preload/ includes only registry/, config/,
# profile/profile.h, kernels/ibp_kernels.h, kernels/ibp_fatbin.h and
# ibp/ (the public headers).  Includes are
# read from the source with comments stripped.
#   preload_layers.sh <source root>
. "$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)/lib.sh"
root=$1
layers="base track stats serve hooks"

rank() { # rank NAME: position in $layers (1-based), 0 when not a layer
  i=1
  for l in $layers; do
    [ "$l" = "$1" ] && { echo "$i"; return; }
    i=$((i + 1))
  done
  echo 0
}

inc='^[[:space:]]*#[[:space:]]*include[[:space:]]*"'
outside='^(registry/[^/]+|config/[^/]+|profile/profile\.h|kernels/ibp_kernels\.h|kernels/ibp_fatbin\.h|ibp/[^/]+)$'
files "$root/preload" > "$tmp/files"
while read -r f; do
  dir=${f#"$root/preload/"}
  dir=${dir%%/*}
  own=$(rank "$dir")
  if [ "$own" = 0 ]; then
    violation "$f" 1 "not in a layer directory of preload/ ($layers)"
    continue
  fi
  strip "$f" 1 | grep -nE -- "$inc" |
    sed -E 's/^([0-9]+):[^"]*"([^"/]*)\/.*/\1 \2/' > "$tmp/incs"
  while read -r line target; do
    r=$(rank "$target")
    if [ "$r" -gt "$own" ]; then
      violation "$f" "$line" "preload/$dir may not include preload/$target (layers: $layers)"
    fi
  done < "$tmp/incs"
  # Outside preload/: only the modules the dependency rule names.
  strip "$f" 1 | grep -nE -- "$inc"'[^"]*/' |
    sed -E 's/^([0-9]+):[^"]*"([^"]*)".*/\1 \2/' > "$tmp/incs"
  while read -r line header; do
    [ "$(rank "${header%%/*}")" != 0 ] && continue
    printf '%s\n' "$header" | grep -qE -- "$outside" ||
      violation "$f" "$line" "preload/ may include of the project, besides its layers, only registry/, config/, profile/profile.h, kernels/ibp_kernels.h, kernels/ibp_fatbin.h and ibp/ (docs/ARCHITECTURE.md, \"Dependency rule\")"
  done < "$tmp/incs"
done < "$tmp/files"

files "$root/registry" > "$tmp/files"
while read -r f; do
  strip "$f" 1 | grep -nE -- "$inc"'[^"]*/' | cut -d: -f1 > "$tmp/hits"
  while read -r line; do
    violation "$f" "$line" "registry/ depends on nothing of the project's"
  done < "$tmp/hits"
  strip "$f" 1 | grep -nE -- '^[[:space:]]*#[[:space:]]*include[[:space:]]*<ibp/' |
    cut -d: -f1 > "$tmp/hits"
  while read -r line; do
    violation "$f" "$line" "registry/ depends on nothing of the project's"
  done < "$tmp/hits"
done < "$tmp/files"
files "$root/profile" > "$tmp/files"
while read -r f; do
  strip "$f" 1 | grep -nE -- "$inc" |
    grep -vE -- '^[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*"profile/' |
    cut -d: -f1 > "$tmp/hits"
  strip "$f" 1 | grep -nE -- '^[[:space:]]*#[[:space:]]*include[[:space:]]*<ibp/' |
    cut -d: -f1 >> "$tmp/hits"
  while read -r line; do
    violation "$f" "$line" "profile/ depends on nothing of the project's"
  done < "$tmp/hits"
done < "$tmp/files"
finish check_preload_layers "preload/ layers: $layers; registry/ and profile/ stand alone"
