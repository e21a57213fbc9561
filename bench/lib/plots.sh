#!/usr/bin/env bash
# bench/lib/plots.sh OUT -- draws OUT/ab_bytes.png, OUT/ab_speedup.png and
# OUT/codecs_saved.png from the plot_*.dat files (plots.gp, gnuplot).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: plots.sh OUT}
gpu=0 gbps=25
if [[ -f $out/meta.env ]]; then
  grep -q '^backend=gpu$' "$out/meta.env" && gpu=1
  gbps=$(sed -n 's/^pcie_gbps=//p' "$out/meta.env")
fi
term=png # gnuplot-nox has pngcairo; a build without cairo has libgd's png
gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1 && term=pngcairo
rm -f "$out"/ab_bytes.png "$out"/ab_speedup.png "$out"/codecs_saved.png
gnuplot -e "dir='$out'; term='$term'; gpu=$gpu; gbps=${gbps:-25}" "$here/plots.gp"
