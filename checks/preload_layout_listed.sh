#!/bin/sh
# check_preload_layout_listed: every file under preload/ is named in
# docs/ARCHITECTURE.md's "preload/ layout" section -- a file in a folder
# (base/, serve/batch/, ...) on a row of that folder in the layout table,
# a file of preload/ itself (CMakeLists.txt, libibp.map) in the section's
# text -- so that the table stays the map of the tree.  A file added
# without its row is a violation naming the row to write; a row naming a
# file that is not there is one too.
#   preload_layout_listed.sh <source root>
. "$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)/lib.sh"
root=$1
doc=$root/docs/ARCHITECTURE.md
[ -f "$doc" ] || { echo "check_preload_layout_listed: $doc missing"; exit 1; }

# The section, and from its table "line folder/file" for every file a row
# names (`name` in the second column; the folder from the first column,
# or the row above when it is empty).
awk '/^## / { on = ($0 == "## preload/ layout") } on { print NR ": " $0 }' \
  "$doc" > "$tmp/section"
[ -s "$tmp/section" ] || {
  echo "check_preload_layout_listed: no '## preload/ layout' section in $doc"
  exit 1
}
awk -F'|' '
  NF >= 4 && $2 !~ /^[ -]*$/ || NF >= 4 && $3 ~ /`/ {
    line = $1; sub(/:.*/, "", line)
    col = $2; sub(/^[0-9]+: /, "", col)
    if (match(col, /`[^`]+\/`/)) folder = substr(col, RSTART + 1, RLENGTH - 2)
    if (folder == "") next
    files = $3
    while (match(files, /`[^`]+`/)) {
      print line, folder substr(files, RSTART + 1, RLENGTH - 2)
      files = substr(files, RSTART + RLENGTH)
    }
  }' "$tmp/section" > "$tmp/rows"
cut -d' ' -f2 "$tmp/rows" | LC_ALL=C sort -u > "$tmp/listed"

# Files in folders: each on a row of its folder.
(cd "$root/preload" && find . -mindepth 2 -type f | sed 's|^\./||' |
  LC_ALL=C sort) > "$tmp/tree"
while read -r f; do
  if ! grep -qxF -- "$f" "$tmp/listed"; then
    dir=${f%/*}
    violation "$doc" "$(cut -d: -f1 "$tmp/section" | head -n 1)" \
      "preload/$f is not in the layout table: add it to a row of \`$dir/\` with its concern"
  fi
done < "$tmp/tree"
# Rows naming what is not there.
while read -r line f; do
  if ! grep -qxF -- "$f" "$tmp/tree"; then
    violation "$doc" "$line" "the layout table names preload/$f, which does not exist"
  fi
done < "$tmp/rows"
# Files of preload/ itself: named in the section's text.
(cd "$root/preload" && find . -maxdepth 1 -type f | sed 's|^\./||' |
  LC_ALL=C sort) > "$tmp/top"
while read -r f; do
  if ! grep -qF -- "$f" "$tmp/section"; then
    violation "$doc" "$(cut -d: -f1 "$tmp/section" | head -n 1)" \
      "preload/$f is not named in the \"preload/ layout\" section"
  fi
done < "$tmp/top"
finish check_preload_layout_listed "files under preload/ missing from docs/ARCHITECTURE.md's layout table"
