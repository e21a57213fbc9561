#!/usr/bin/env bash
# bench/lib/plots.sh OUT -- draws OUT/ab_bytes.png, OUT/ab_speedup.png and
# OUT/codecs_saved.png from the plot_*.dat files (plots.gp, gnuplot).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: plots.sh OUT}
gpu=0 profiles=''
if [[ -f $out/meta.env ]]; then
  grep -q '^backend=gpu$' "$out/meta.env" && gpu=1
  profiles=$(sed -n 's/^profiles=//p' "$out/meta.env" | tr , ' ')
fi
term=png # gnuplot-nox has pngcairo; a build without cairo has libgd's png
gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1 && term=pngcairo
rm -f "$out"/ab_bytes.png "$out"/ab_speedup.png "$out"/codecs_saved.png
gnuplot -e "dir='$out'; term='$term'; gpu=$gpu; profiles='$profiles'" "$here/plots.gp"
