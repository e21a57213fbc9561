#!/usr/bin/env bash
# bench/truths.sh -- the learning gate against simulated GPUs on which the
# model is wrong (issue M; docs/PROFILE.md, "The truth apart from the
# model").  For each prior of --priors and each truth file
# profile/truth/PRIOR-*.prof (or --truths), runs `bench/ab --quick
# --no-codecs --no-results --profiles PRIOR --truth TRUTH`, then prints one
# table: per prior and truth, the worst line's speedup (B over A) and the
# lines more than 2 % slower with libibp than without.
#
#   bash bench/truths.sh [--priors LIST] [--truths LIST] [--runs N]
#                        [--build DIR] [--only SAMPLE,...] [--out DIR]
#
#   --priors L   built-in profiles (default a100-pcie4,h100-pcie5)
#   --truths L   truth names or files, comma separated, for every prior
#                (default: each prior's profile/truth/PRIOR-*.prof, and the
#                prior itself: truth = prior)
#   --runs N     runs of each A and B (default 2: the simulated GPU's
#                figures are deterministic, two runs show it)
#   --build DIR  build directory (bench/ab's default)
#   --only L     only these samples
#   --out DIR    results (default build/truths): DIR/PRIOR/TRUTH/ is
#                bench/ab's --out, DIR/truths.csv the table
#
# The acceptance rule (issue M): no line more than 2 % slower than A under
# any prior and truth.  The last line printed says whether it holds; it
# never changes the exit status (a failed bench/ab run does).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PROG=truths
# shellcheck source=bench/lib/common.sh
. bench/lib/common.sh

priors=a100-pcie4,h100-pcie5 truths='' out=build/truths runs=2 pass=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --priors | --truths | --runs | --build | --only | --out)
      [[ $# -ge 2 ]] || die "$1 needs a value"
      case $1 in
        --priors) priors=$2 ;;
        --truths) truths=$2 ;;
        --runs) runs=$2 ;;
        --out) out=${2%/} ;;
        *) pass+=("$1" "$2") ;;
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
[[ $out != *[[:space:]]* ]] || die "--out may not hold spaces: $out"
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs wants a positive number: $runs"
need_tools python3:python3

start=$EPOCHREALTIME
IFS=, read -r -a plist <<<"$priors"
rows=()
for prior in "${plist[@]}"; do
  if [[ -n $truths ]]; then
    IFS=, read -r -a tlist <<<"$truths"
  else
    tlist=("$prior")
    for f in profile/truth/"$prior"-*.prof; do
      [[ -e $f ]] && tlist+=("$f")
    done
  fi
  for truth in "${tlist[@]}"; do
    name=$(basename "$truth" .prof)
    dir=$out/$prior/$name
    mkdir -p "$dir"
    log "prior $prior, truth $name: bench/ab --quick --runs $runs --out $dir"
    bash bench/ab --quick --no-codecs --no-results --runs "$runs" \
      --profiles "$prior" --truth "$truth" "${pass[@]}" --out "$dir" \
      >"$dir.log" 2>&1 || die "bench/ab failed (prior $prior, truth $name): $dir.log"
    rows+=("$prior" "$name" "$dir/ab.csv")
  done
done
log "the runs took $(echo "$start $EPOCHREALTIME" | awk '{ printf "%.0f", $2 - $1 }') s"
python3 -B bench/lib/truths_collect.py "$out/truths.csv" "${rows[@]}"
