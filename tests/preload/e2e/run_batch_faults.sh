#!/bin/sh
# Fail-open of libibp's batched launch (README.md, "e2e_batch") and staged
# copies ("e2e_staged") under driver fault injection:
#
#   run_batch_faults.sh WORKDIR PRELOAD ENTRY -- PROGRAM [ARGS...]
#
# Counts the application's calls of ENTRY (C, a SIMCUDA_LOG trace with
# IBP_DISABLE=1) and all calls with libibp (T), then fails the nth call
# (SIMCUDA_FAIL=ENTRY:nth) for nth in C+1, C+2, T-1, T (the last
# calls: the staging allocated at the first flush, the last batch), those
# IBP_E2E_FAULT_BEFORE marks (below) and "*" when C = 0; C+2 and T-1 not
# when IBP_TEST_REDUCE > 1.  Every run must exit 0 (correct bytes) with at most one "[ibp]"
# line -- or, since the program's calls and libibp's interleave (the nth
# may be the program's own), exit 3 with the program's CUDA call of the
# same kind failing, as it would without libibp.  Wrong bytes (exit 1), a
# crash or a hang always fail.
#
# IBP_E2E_FAULT_TRACE=DIR: the two runs without injection (the trace with
# IBP_DISABLE=1 and the one with libibp) are made once for every ENTRY
# that shares PROGRAM, its arguments and its environment: ENTRY
# "trace-only" makes them into DIR (= WORKDIR; CTest's FIXTURES_SETUP) and
# checks that both exit 0; any other ENTRY reads them from DIR instead of
# running them again (a missing one fails).
set -u -f
if [ $# -lt 5 ] || [ "$4" != "--" ]; then
  echo "usage: run_batch_faults.sh WORKDIR PRELOAD ENTRY -- PROGRAM [ARGS...]" >&2
  exit 2
fi
work=$1 preload=$2 entry=$3
shift 4
mkdir -p "$work" || exit 2
run() { # LABEL DISABLE FAIL LOG PROGRAM [ARGS...]
  label=$1 disable=$2 fail=$3 log=$4
  shift 4
  timeout 120 env IBP_DISABLE="$disable" SIMCUDA_FAIL="$fail" \
    SIMCUDA_LOG="$log" LD_PRELOAD="$preload" "$@" \
    >"$work/$label.out" 2>"$work/$label.err"
}
calls() {
  grep -cE "^\[simcuda\] ${entry}(_v[0-9]+)?(_ptds|_ptsz)? -> " "$1"
}
traces=$work
if [ -n "${IBP_E2E_FAULT_TRACE:-}" ] && [ "$entry" != trace-only ]; then
  traces=$IBP_E2E_FAULT_TRACE
  for t in base trace; do
    [ -s "$traces/$t.err" ] ||
      { echo "FAIL: no $traces/$t.err (the trace-only run did not pass)"; exit 1; }
  done
  echo "the runs without injection: $traces (IBP_E2E_FAULT_TRACE)"
else
  run base 1 "" 1 "$@" || { echo "FAIL: IBP_DISABLE=1 run fails"; exit 1; }
  run trace 0 "" 1 "$@" ||
    { echo "FAIL: the run without injection fails"; exit 1; }
  if [ "$entry" = trace-only ]; then
    echo "the runs without injection pass: $work/base.err, $work/trace.err"
    exit 0
  fi
fi
app=$(calls "$traces/base.err")
total=$(calls "$traces/trace.err")
echo "$entry: the application calls it $app times, $total with libibp"
# IBP_E2E_FAULT_BEFORE=E: also each call of ENTRY that the trace shows
# right before a call of E (other entries but cuCtxGet* between them end
# the match), e.g. the staging ring's cuMemAlloc before its cuStreamCreate.
marked=
if [ -n "${IBP_E2E_FAULT_BEFORE:-}" ]; then
  marked=$(awk -v e="$entry" -v b="$IBP_E2E_FAULT_BEFORE" '
    !/^\[simcuda\] cu[A-Za-z_0-9]* -> / { next }
    { sym = $2; sub(/(_v[0-9]+)?(_ptds|_ptsz)?$/, "", sym) }
    sym == e { n++; last = n; next }
    sym == b { if (last) print last; last = 0; next }
    sym !~ /^cuCtxGet/ { last = 0 }' "$traces/trace.err")
fi
# IBP_TEST_REDUCE > 1 (the sanitizer builds): the first and the last call
# only, not their neighbours too (tests/README.md, "Under the sanitizers")
second=$((app + 2)) penultimate=$((total - 1))
if [ "${IBP_TEST_REDUCE:-1}" -gt 1 ]; then
  second='' penultimate=''
fi
nths=
for n in $((app + 1)) $second $penultimate $total $marked; do
  [ "$n" -gt "$app" ] && [ "$n" -le "$total" ] && nths="$nths $n"
done
[ "$app" -eq 0 ] && nths="$nths *"
# Where libibp makes no more calls of ENTRY than the application (it serves
# the application's own, e.g. a batched launch's one job-list copy for
# many rows), no nth above the application's count exists: calls spread
# over 1..T (all of them up to 32), of which libibp must have handled one
# (exit 0, its one warning -- one that matches IBP_E2E_FAULT_PROVE, an
# extended regex, where set: the first calls are its set-up's, the
# decoder's self-test and the regions' uploads, not the path under test).
replaced=0
if [ "$total" -le "$app" ]; then
  replaced=1
  picks=32
  [ "${IBP_TEST_REDUCE:-1}" -gt 1 ] && picks=8
  nths=$(awk -v t="$total" -v k="$picks" 'BEGIN {
    if (t <= k) { for (i = 1; i <= t; i++) print i; exit }
    for (i = 0; i < k; i++) print 1 + int(i * (t - 1) / (k - 1)) }')
fi
handled=0 fired=0
failed=0
for nth in $(echo "$nths" | tr ' ' '\n' | awk '!seen[$0]++'); do
  tag=nth-$(echo "$nth" | tr '*' a)
  run "$tag" 0 "$entry:$nth" 0 "$@"
  rc=$?
  warnings=$(grep -c '^\[ibp\]' "$work/$tag.err")
  echo "$entry:$nth: exit $rc, $warnings [ibp] line(s)" \
    "$(grep -m1 '^\[ibp\]' "$work/$tag.err")"
  own=0 # the program's own call of this kind failed (cudaXxx <- cuXxx;
  # cudaMemcpy* <- cuMemcpy*)
  kind=$(echo "$entry" | sed -E 's/^cuMemcpy.*/Memcpy/; s/^cu(Mem)?//;
    s/(_v[0-9]+|Async)+$//')
  [ $rc -eq 3 ] && grep -q "CUDA call failed: cuda[A-Za-z]*${kind}" \
    "$work/$tag.err" && own=1
  if { [ $rc -ne 0 ] && [ $own -eq 0 ]; } || [ "$warnings" -gt 1 ]; then
    echo "FAIL: SIMCUDA_FAIL=$entry:$nth; reproduce: env" \
      "LD_LIBRARY_PATH='${LD_LIBRARY_PATH:-}'" \
      "$(env | grep -E '^IBP_[A-Z_]*=' | sed "s/=\(.*\)/='\1'/" | tr '\n' ' ')" \
      "SIMCUDA_FAIL='$entry:$nth' LD_PRELOAD=$preload $*"
    grep -v '^\[simcuda\] cu' "$work/$tag.err" | tail -n 8 | sed 's/^/  | /'
    failed=1
  fi
  # an injection the run never reached (its calls vary from run to run)
  # tested nothing: counted, and at least one must have fired
  if grep -q "^\[simcuda\] SIMCUDA_FAIL: " "$work/$tag.err"; then
    fired=$((fired + 1))
  else
    echo "  note: $entry:$nth did not fire (this run made fewer calls)"
  fi
  [ $rc -eq 0 ] && [ "$warnings" -eq 1 ] &&
    grep '^\[ibp\]' "$work/$tag.err" | grep -qE "${IBP_E2E_FAULT_PROVE:-.}" &&
    handled=$((handled + 1))
done
if [ $fired -eq 0 ]; then
  echo "FAIL: no injection into $entry fired"
  failed=1
fi
if [ $replaced -eq 1 ] && [ $handled -eq 0 ]; then
  echo "FAIL: no injection into $entry met a call of libibp's own" \
    "${IBP_E2E_FAULT_PROVE:+(no warning matching '$IBP_E2E_FAULT_PROVE')}"
  failed=1
fi
[ $failed -eq 0 ] && echo "all injections into $entry handled"
exit $failed
