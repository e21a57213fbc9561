#!/usr/bin/env bash
# bench/paths.sh -- does the gate find the fastest route?  Runs bench/ab
# once with IBP_PATH=auto (the gate chooses per copy) and once with each
# route forced (IBP_FORCE_ROUTE=zerocopy, staged, batched: libibp takes
# that route for every copy it can, no choice left) set for every libibp
# run (B), then bench/lib/paths_collect.py compares them line by line,
# and with the driver alone (A, libibp disabled: the same in every run).
# See bench/README.md ("bench/paths.sh").
#
#   bash bench/paths.sh [--quick | --full] [--runs N] [--profiles LIST]
#                       [--build DIR] [--only SAMPLE,...] [--out DIR]
#                       [--truth NAME|FILE]
#
#   --quick        the quick tier of bench/lib/ab_plan.tsv (the default)
#   --full         the full tier
#   --runs N       runs of each A and B per line (bench/ab's default: 5)
#   --profiles L   device cost profiles (default a100-pcie4)
#   --build DIR    build directory (bench/ab's default: build/release)
#   --only LIST    only these samples
#   --out DIR      results (default build/paths): DIR/<run>/ is bench/ab's
#                  --out for each run (its plan in DIR/<run>/plan.tsv),
#                  DIR/paths.csv the comparison
#   --truth P      the simulated GPU's own costs (bench/ab --truth): the
#                  profiles are then only libibp's model of it
#
# Each bench/ab run is `--no-codecs --no-results`: no codec comparison, and
# docs/RESULTS.md is left alone.  gate_vs_best: the best of the forced
# routes and A over auto's time.  Two rules, each printed with whether it
# holds (neither changes the exit status): on every line libibp under
# IBP_PATH=auto takes at most 2 % more modelled time than the best of them
# (where the prior is right), and gate_vs_best >= 0.95 (issue R's bound
# under a truth the prior departs from).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PROG=paths
# shellcheck source=bench/lib/common.sh
. bench/lib/common.sh

# the runs: auto, then each route forced
PATHS=(auto zerocopy staged batched)
tier=--quick profiles=a100-pcie4 out=build/paths pass=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) tier=--quick ;;
    --full) tier='' ;;
    --runs | --profiles | --build | --only | --out | --truth)
      [[ $# -ge 2 ]] || die "$1 needs a value"
      case $1 in
        --profiles) profiles=$2 ;;
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
need_tools python3:python3
# The plan sets IBP_PATH / IBP_FORCE_ROUTE for B; one from the caller
# would reach A too.
unset IBP_PATH IBP_FORCE_ROUTE

# write_plan RUN FILE: bench/lib/ab_plan.tsv with the run's setting
# (IBP_PATH=auto, or IBP_FORCE_ROUTE=RUN) appended to every line's env column (the column made where a line has none; a
# later assignment wins, so it overrides one the line sets).  Comments are
# dropped: bench/ab skips them anyway.
write_plan() {
  local set=IBP_FORCE_ROUTE=$1
  [[ $1 == auto ]] && set=IBP_PATH=auto
  awk -F '\t' -v OFS='\t' -v set="$set" '
    /^#/ || NF == 0 { next }
    NF < 5 { printf "bad plan line %d: %d fields\n", NR, NF > "/dev/stderr"; exit 1 }
    { $6 = ($6 == "" ? set : $6 " " set); print }' bench/lib/ab_plan.tsv >"$2.tmp" ||
    die "could not write $2"
  mv "$2.tmp" "$2"
}

# All three plans first: the runs compare the same lines even if
# bench/lib/ab_plan.tsv changes while they run.
for p in "${PATHS[@]}"; do
  mkdir -p "$out/$p"
  write_plan "$p" "$out/$p/plan.tsv"
done
start=$EPOCHREALTIME
for p in "${PATHS[@]}"; do
  log "$p: bench/ab ${tier:+$tier }--profiles $profiles ${pass[*]} --out $out/$p"
  bash bench/ab ${tier:+"$tier"} --no-codecs --no-results --profiles "$profiles" \
    "${pass[@]}" --plan "$out/$p/plan.tsv" --out "$out/$p" ||
    die "bench/ab failed for run $p (its messages above; runs in $out/$p/runs)"
done
log "the ${#PATHS[@]} runs took $(echo "$start $EPOCHREALTIME" | awk '{ printf "%.0f", $2 - $1 }') s"
python3 -B bench/lib/paths_collect.py "$out" "${PATHS[@]}"
