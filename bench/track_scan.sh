#!/usr/bin/env bash
# The CPU time of the userfaultfd write tracker's scan before a copy (one
# PAGEMAP_SCAN over its pages), per call and per page: the constants
# IBP_TRACK_SCAN_CALL_NS and IBP_TRACK_SCAN_PAGE_NS (preload/track/track.h)
# that the simulated GPU's clock charges for every scan (docs/PROFILE.md,
# "The virtual clock").  Runs bench_track_scan 5 times and prints each
# run's fit and the medians.  Needs a kernel with asynchronous userfaultfd
# write protection and PAGEMAP_SCAN (Linux >= 6.7).
#   bash bench/track_scan.sh [build-dir]        (default build/release)
set -euo pipefail
build=${1:-build/release}
bench=$build/tests/preload/track/bench_track_scan
[[ -x $bench ]] || {
  echo "track_scan.sh: build first: cmake --build --preset release" >&2
  exit 2
}
calls=() pages=()
for _ in 1 2 3 4 5; do
  set +e
  out=$(TRACK_TEST_TRACKER=userfaultfd "$bench")
  rc=$?
  set -e
  [[ $rc == 77 ]] && {
    echo "track_scan.sh: $out"
    exit 0
  }
  [[ $rc == 0 ]] || exit 1
  fit=$(tail -1 <<<"$out")
  echo "$fit"
  calls+=("$(sed -n 's/^scan_call_ns=\([0-9.]*\).*/\1/p' <<<"$fit")")
  pages+=("$(sed -n 's/.*scan_page_ns=\([0-9.]*\)$/\1/p' <<<"$fit")")
done
median() { printf '%s\n' "$@" | sort -g | sed -n 3p; }
echo "median: scan_call_ns=$(median "${calls[@]}") scan_page_ns=$(median "${pages[@]}")"
