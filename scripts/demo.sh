#!/usr/bin/env bash
# README command (1): what IBP saves on real data.  Builds the tool, builds a
# small real data set from Debian/npm packages (bench/data/build.sh --small),
# and runs `ibp analyze` on each of its files.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs" --target ibp >/dev/null
out=build/demo-data
bash bench/data/build.sh --small --out "$out"

# MANIFEST.tsv: name file tensor_bytes dtype rows package version source licence description
tail -n +2 "$out/MANIFEST.tsv" | while IFS=$'\t' read -r name file r dtype rows pkg ver src lic desc; do
  printf '\n### %s — %s (%s %s, %s rows of %s B, from %s %s)\n' \
    "$name" "$desc" "$dtype" "$lic" "$rows" "$r" "$pkg" "$ver"
  build/release/tools/ibp analyze "$out/$file" --tensor-bytes "$r"
done
