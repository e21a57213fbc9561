#!/usr/bin/env bash
# bench/codecs.sh -- IBP against zstd and lz4 on the same bytes: every data
# set of bench/data, per row (random access: each row compressed on its
# own) and whole file, space saved and speed on one core.  Writes
# OUT/codecs.csv and the raw outputs under OUT/codecs/.  bench/ab runs it;
# docs/RESULTS.md explains the method.
#
#   bench/codecs.sh [--quick] [--build DIR] [--data DIR] [--out DIR]
#                   [--sets NAME,...] [--limit SIZE]
#
#   --quick       one timed pass per measurement (zstd/lz4 -i0, ibp bench
#                 --seconds 0.05) instead of the best over 3 s (-i3,
#                 --seconds 0.5); the space saved is the same
#   --build DIR   where `ibp` is (default build/release; built if missing)
#   --data DIR    data sets (default bench/data/out; built if missing)
#   --out DIR     default build/ab
#   --sets LIST   only these data sets
#   --limit SIZE  only the first SIZE bytes of each data set (whole rows)
#
# What runs, per data set of row size R (FILE: the data set or its prefix):
#   ibp analyze FILE --tensor-bytes R --json      space saved (metadata in)
#   ibp bench FILE --tensor-bytes R --threads 1   compress/decompress speed
#   zstd -b1 -B<R> FILE, zstd -b3 -B<R> FILE, lz4 -b1 -B<R> FILE   per row
#   zstd -b1 FILE, zstd -b3 FILE, lz4 -b1 FILE                     whole file
# (zstd's and lz4's benchmark modes: -B cuts the input into independent
# blocks, each compressed on its own -- a zstd frame, an lz4 block.)
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PROG=codecs
# shellcheck source=bench/lib/common.sh
. bench/lib/common.sh

quick=0 build=build/release data=bench/data/out out=build/ab sets='' limit=''
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=1 ;;
    --build | --data | --out | --sets | --limit)
      [[ $# -ge 2 ]] || die "$1 needs a value"
      case $1 in
        --build) build=${2%/} ;;
        --data) data=${2%/} ;;
        --out) out=${2%/} ;;
        --sets) sets=$2 ;;
        --limit) limit=$2 ;;
      esac
      shift
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
if [[ $quick == 1 ]]; then
  iters=0 ibp_seconds=0.05
else
  iters=3 ibp_seconds=0.5
fi

need_tools python3:python3 zstd:zstd lz4:lz4
ensure_build "$build" - ibp
ibp=$build/tools/ibp
if [[ -n $sets ]]; then
  IFS=, read -r -a names <<<"$sets"
else
  mapfile -t names < <(bash bench/data/build.sh --list)
fi
ensure_data "$data" "${names[@]}"

raw=$out/codecs
rm -rf "$raw"
mkdir -p "$raw"

# cli_bench NAME TAG CMD...: zstd's or lz4's benchmark mode; keeps the
# output (progress lines end in CR; the parser takes the last result).
cli_bench() {
  local name=$1 tag=$2
  shift 2
  "$@" >"$raw/$name.$tag.txt" 2>&1 || die "$* failed (see $raw/$name.$tag.txt)"
}

t0=$EPOCHREALTIME
for n in "${names[@]}"; do
  r=$(manifest_row "$data" "$n" | cut -f 3)
  [[ -n $r ]] || die "no data set $n in $data/MANIFEST.tsv"
  f=$data/$n.bin
  [[ -z $limit ]] || f=$(prefix_file "$data" "$n" "$limit" "$out/data")
  printf 'name\t%s\nfile\t%s\nbytes\t%s\ntensor_bytes\t%s\nlimit\t%s\niterations\t%s\n' \
    "$n" "$f" "$(stat -c %s "$f")" "$r" "${limit:-none}" "$iters" >"$raw/$n.meta"
  echo "$n" >>"$raw/sets.txt"
  log "$n: $(stat -c %s "$f") bytes, rows of $r"
  "$ibp" analyze "$f" --tensor-bytes "$r" --json >"$raw/$n.ibp-analyze.json" ||
    die "ibp analyze failed on $f"
  "$ibp" bench "$f" --tensor-bytes "$r" --threads 1 --seconds "$ibp_seconds" \
    --json >"$raw/$n.ibp-bench.json" || die "ibp bench failed on $f"
  cli_bench "$n" zstd1-row zstd -b1 -i"$iters" -B"$r" "$f"
  cli_bench "$n" zstd3-row zstd -b3 -i"$iters" -B"$r" "$f"
  cli_bench "$n" lz4-row lz4 -b1 -i"$iters" -B"$r" "$f"
  cli_bench "$n" zstd1-file zstd -b1 -i"$iters" "$f"
  cli_bench "$n" zstd3-file zstd -b3 -i"$iters" "$f"
  cli_bench "$n" lz4-file lz4 -b1 -i"$iters" "$f"
done
{
  echo "zstd_version=$(zstd --version | sed -n 's/.* v\([0-9.]*\),.*/v\1/p' | head -n 1)"
  echo "lz4_version=$(lz4 --version 2>&1 | sed -n 's/.* v\([0-9.]*\),.*/v\1/p' | head -n 1)"
  echo "limit=${limit:-none}"
  echo "iterations=$iters"
  echo "ibp_seconds=$ibp_seconds"
  echo "seconds=$(echo "$t0 $EPOCHREALTIME" | awk '{ printf "%.0f", $2 - $1 }')"
} >"$raw/meta.env"
python3 -B bench/lib/codecs_collect.py "$out"
log "done: $out/codecs.csv"
