#!/usr/bin/env bash
# Runs paper_ibp on every data set listed in a MANIFEST.tsv written by
# bench/data/build.sh and prints a Markdown table of the best setting.
#   bench/paper/run_all.sh [DATA_DIR] [PATH_TO_paper_ibp]
# DATA_DIR defaults to bench/data/out; without a binary, paper_ibp is built
# into a temporary directory.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here/../data/out}
bin=${2:-}
manifest=$dir/MANIFEST.tsv
[[ -f $manifest ]] || {
  echo "run_all.sh: no $manifest (run bench/data/build.sh first)" >&2
  exit 1
}
if [[ -z $bin ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  bin=$tmp/paper_ibp
  ${CC:-cc} -O2 -std=c11 -Wall -Wextra -Werror -pthread -o "$bin" "$here/paper_ibp.c"
fi

echo "| data set | dtype | R (bytes) | tensors | best T | best c (bytes) | saved fraction | seconds |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
tail -n +2 "$manifest" | while IFS=$'\t' read -r name file r dtype _rest; do
  start=$(date +%s.%N)
  json=$("$bin" "$dir/$file" --tensor-bytes "$r" --json)
  secs=$(echo "$start $(date +%s.%N)" | awk '{ printf "%.1f", $2 - $1 }')
  # {"tensor_bytes":R,"tensors":n,"best_threshold":T,"best_chunk_bytes":c,...}
  echo "$json" | awk -F'[:,}]' -v name="$name" -v dtype="$dtype" -v secs="$secs" '{
    printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n",
      name, dtype, $2, $4, $6, $8, $10, secs }'
done
