#!/usr/bin/env bash
# bench/results.sh -- writes docs/RESULTS.md and docs/results/*.png from
# what bench/ab left in OUT (default build/ab).  bench/ab runs it at the
# end; run it alone to rebuild the page from earlier results.  The page is
# generated: never edit it by hand.
#   bench/results.sh [OUT]
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PROG=results
# shellcheck source=bench/lib/common.sh
. bench/lib/common.sh

out=${1:-build/ab}
out=${out%/}
for f in meta.env datasets.csv codecs.csv codecs/meta.env ab.csv \
  ab_bytes.png ab_speedup.png codecs_saved.png; do
  [[ -s $out/$f ]] || die "$out/$f is missing: run bench/ab first"
done
need_tools python3:python3

mkdir -p docs/results
python3 -B bench/lib/results_md.py results "$out" results >docs/.RESULTS.md.tmp ||
  die "could not write docs/RESULTS.md"
for png in ab_bytes ab_speedup codecs_saved; do
  cp "$out/$png.png" "docs/results/.$png.png.tmp"
  mv "docs/results/.$png.png.tmp" "docs/results/$png.png"
done
mv docs/.RESULTS.md.tmp docs/RESULTS.md
log "wrote docs/RESULTS.md and docs/results/{ab_bytes,ab_speedup,codecs_saved}.png"
