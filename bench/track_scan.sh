#!/usr/bin/env bash
# The CPU time of the userfaultfd write tracker's scan before a copy (one
# PAGEMAP_SCAN over its pages), per call and per page: the constants
# IBP_TRACK_SCAN_CALL_NS and IBP_TRACK_SCAN_PAGE_NS (preload/track/track.h)
# that the simulated GPU's clock charges for every scan (docs/PROFILE.md,
# "The virtual clock").  Runs bench_track_scan 5 times and prints each
# run's fit and the medians.  Needs a kernel with asynchronous userfaultfd
# write protection and PAGEMAP_SCAN (Linux >= 6.7).
# Then the faulting mode of quiet regions (bench_track_fault, 5 runs and
# the medians): a copy's sync, a write fault (IBP_TRACK_FAULT_NS) beside
# the scanning mode's in-kernel one, re-protection per call and page, and
# a move between the modes per page (docs/ARCHITECTURE.md, "Quiet
# regions").  Needs a userfaultfd that serves kernel-mode faults.
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

fault=$build/tests/preload/track/bench_track_fault
[[ -x $fault ]] || exit 0
declare -A col
keys=(sync_ns fault_ns async_fault_ns rearm_call_ns rearm_page_ns move_page_ns)
for _ in 1 2 3 4 5; do
  set +e
  out=$(TRACK_TEST_TRACKER=userfaultfd TRACK_TEST_QUIET=3600000 "$fault")
  rc=$?
  set -e
  [[ $rc == 77 ]] && {
    echo "track_scan.sh: $out"
    exit 0
  }
  [[ $rc == 0 ]] || exit 1
  line=$(tail -1 <<<"$out")
  echo "$line"
  for k in "${keys[@]}"; do
    col[$k]+="$(sed -n "s/.*\b$k=\([0-9.]*\).*/\1/p" <<<"$line") "
  done
done
printf 'median:'
for k in "${keys[@]}"; do
  # shellcheck disable=SC2086
  printf ' %s=%s' "$k" "$(median ${col[$k]})"
done
echo
