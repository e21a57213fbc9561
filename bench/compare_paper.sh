#!/usr/bin/env bash
# Space saved by `ibp analyze` (defaults: threshold and chunk searched)
# against the paper's algorithm at its best settings (bench/paper/paper_ibp:
# threshold 0.50-0.99, best of 1/2/4/8-byte chunks, byte-aligned tensors) on
# every data set of bench/data (built first if missing).
#   bench/compare_paper.sh [DATA_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-bench/data/out}
[ -f "$dir/MANIFEST.tsv" ] || bash bench/data/build.sh --out "$dir"
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target ibp paper_ibp >/dev/null
ibp=build/release/tools/ibp
paper=build/release/bench/paper/paper_ibp

field() { grep -o "\"$1\": *[-0-9.eE+]*" | head -1 | sed 's/.*: *//'; }

echo "| data set | R (B) | tensors | paper saved | paper T, c | ibp saved | ibp T, c | bytes ibp saves beyond the paper |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
fail=0
while IFS=$'\t' read -r name file r _rest; do
  pj=$("$paper" "$dir/$file" --tensor-bytes "$r" --json)
  ij=$("$ibp" analyze "$dir/$file" --tensor-bytes "$r" --json)
  pb=$(field compressed_bytes <<<"$pj"); ib=$(field compressed_bytes <<<"$ij")
  total=$(field original_bytes <<<"$ij")
  pt=$(field best_threshold <<<"$pj"); pc=$(field best_chunk_bytes <<<"$pj")
  it=$(field threshold <<<"$ij"); ic=$(field chunk_bytes <<<"$ij")
  n=$(field tensors <<<"$ij")
  # the paper's tool ignores a tail; count it as stored raw, as ibp does
  awk -v a="$name" -v r="$r" -v n="$n" -v pb="$pb" -v ib="$ib" -v t="$total" \
      -v pt="$pt" -v pc="$pc" -v it="$it" -v ic="$ic" 'BEGIN {
    tail = t - n * r; pb += tail
    printf "| %s | %s | %s | %.4f%% | %.2f, %s | %.4f%% | %.4f, %s | %+d B |\n",
      a, r, n, 100 * (1 - pb / t), pt, pc, 100 * (1 - ib / t), it, ic, pb - ib }'
  [ "$ib" -le $((pb + total - n * r)) ] || fail=1
done < <(tail -n +2 "$dir/MANIFEST.tsv")
[ "$fail" = 0 ] || { echo "ibp saves less than the paper on some data set" >&2; exit 1; }
