#!/bin/sh
# Fail-open under driver fault injection (README.md, "e2e_faults").
#
#   run_faults.sh WORKDIR PRELOAD ENTRY[@PREFIX] SETUP_ONLY -- PROGRAM [ARGS...]
#
# Runs PROGRAM (e2e_random) under SIMCUDA_FAIL=ENTRY:nth (tests/sim/driver/
# README.md: the nth call of ENTRY, counted over all its variants, fails;
# "*" = every call), with LD_PRELOAD=PRELOAD, and judges each run:
#
#   - never wrong bytes (exit 1), a crash, or a hang;
#   - at most one "[ibp]" line on stderr (fail open: one warning;
#     IBP_E2E_FAULT_MAX_WARNINGS changes the limit);
#   - where the injected call can only be libibp's, exit 0;
#   - where it can only be the application's, exactly the failure of the
#     same run with IBP_DISABLE=1 (same exit status, same failed call).
#
# Who makes the nth call is decided from a trace (SIMCUDA_LOG=1) of the run
# with IBP_DISABLE=1: the application makes C calls of ENTRY.
#   C = 0: every nth (1, 2, "*") is libibp's -> exit 0.
#   SETUP_ONLY=1 (all the application's calls of ENTRY come before its
#   first copy, e.g. cudaMalloc): nth <= C is the application's, nth > C
#   libibp's.
#   Otherwise the calls interleave: exit 0, or the application's CUDA error
#   (exit 3) is accepted, since either may be the nth.
# PROGRAM's "--faults" shape (e2e_random.c) keeps C = 0 for most entries;
# when ARGS contain --faults the plain shape is also run (nth 1 and "*") for
# the entries it does not call either.  ENTRY@PREFIX adds SIMCUDA_FAIL items PREFIX (e.g.
# cuModuleLoadData@cuLibraryLoadData:* reaches the module fallback).
# Environment: IBP_E2E_FAULT_COPIES (copies per run, default 48),
# IBP_E2E_FAULT_MAX_WARNINGS (default 1), IBP_E2E_FAULT_PLAIN=0 (skip the
# plain shape).  IBP_TEST_REDUCE > 1 (the sanitizer builds; tests/README.md,
# "Under the sanitizers"): 8 copies, no plain shape, and of nths that only
# repeat a kind of point (1 and 2 of libibp's calls; 1, C, C+1, C+2, C+4
# where they are all the application's or all libibp's) the first of each.
# IBP_E2E_FAULT_TRACE=DIR: the runs without injection of each shape (the
# trace with IBP_DISABLE=1 and, for an ENTRY without @PREFIX, the one with
# libibp), the same for every ENTRY, are made once: ENTRY "trace-only"
# makes them into DIR (= WORKDIR; CTest's FIXTURES_SETUP) and fails unless
# each exits 0; any other ENTRY reads them from DIR (a missing one fails).
set -u -f
if [ $# -lt 6 ] || [ "$5" != "--" ]; then
  echo "usage: run_faults.sh WORKDIR PRELOAD ENTRY[@PREFIX] SETUP_ONLY -- PROGRAM [ARGS...]" >&2
  exit 2
fi
work=$1 preload=$2 item=$3 setup_only=$4
shift 5
entry=${item%%@*}
prefix=
[ "$entry" != "$item" ] && prefix="${item#*@},"
reduce=${IBP_TEST_REDUCE:-1}
copies=48 plain=1
[ "$reduce" -gt 1 ] && copies=8 plain=0
copies=${IBP_E2E_FAULT_COPIES:-$copies}
plain=${IBP_E2E_FAULT_PLAIN:-$plain}
max_warnings=${IBP_E2E_FAULT_MAX_WARNINGS:-1}
mkdir -p "$work" || exit 2
failed=0

# run LABEL DISABLE FAIL LOG ARGS...: one run of ARGS with libibp preloaded
# (only there); sets rc, leaves LABEL.out and LABEL.err
run() {
  label=$1 disable=$2 fail=$3 log=$4
  shift 4
  timeout 60 env IBP_DISABLE="$disable" SIMCUDA_FAIL="$fail" SIMCUDA_LOG="$log" \
    LD_PRELOAD="$preload" "$@" >"$work/$label.out" 2>"$work/$label.err"
  rc=$?
}

# calls FILE: the calls of $entry in a SIMCUDA_LOG trace
calls() {
  grep -cE "^\[simcuda\] ${entry}(_v[0-9]+)?(_ptds|_ptsz)? -> " "$1"
}

failed_call() {
  grep -m1 'CUDA call failed' "$1"
}

fail() {
  echo "FAIL: $*"
  echo "  reproduce: env LD_LIBRARY_PATH='${LD_LIBRARY_PATH:-}' LD_PRELOAD=$preload" \
    "IBP_WAIT_READY=1 SIMCUDA_FAIL='$spec' $prog $copies $shape"
  echo "  --- stderr of the libibp run (last 15 lines):"
  grep -v '^\[simcuda\] cu' "$work/$tag.err" | tail -n 15 | sed 's/^/  | /'
  failed=1
}

# judge NTH: both runs of one injection
judge() {
  nth=$1
  spec="$prefix$entry:$nth"
  tag="$shape_tag-$nth"
  [ "$nth" = "*" ] && tag="$shape_tag-all"
  # The application's own share: libibp disabled, same injection.
  rc_b=0
  if [ "$app" -gt 0 ] || [ -n "$prefix" ]; then
    run "$tag.base" 1 "$spec" 0 "$prog" "$copies" ${shape:+"$shape"}
    rc_b=$rc
  fi
  run "$tag" 0 "$spec" 0 "$prog" "$copies" ${shape:+"$shape"}
  rc_l=$rc
  warnings=$(grep -c '^\[ibp\]' "$work/$tag.err")
  fired=$(grep -c "SIMCUDA_FAIL: .* of $entry)" "$work/$tag.err")
  if [ "$app" -eq 0 ] || { [ "$setup_only" = 1 ] && [ "$nth" != "*" ] && [ "$nth" -gt "$app" ]; }; then
    whose=libibp
  elif [ "$setup_only" = 1 ]; then
    whose=application
  else
    whose=either
  fi
  echo "$entry:$nth $shape_name: application calls $app, injected $fired times" \
    "(the nth is $whose's); IBP_DISABLE=1 exit $rc_b; libibp exit $rc_l," \
    "$warnings [ibp] line(s)"
  case $rc_l in
    124 | 137) fail "$spec: the run hung (killed after 60 s)"; return ;;
    1) fail "$spec: wrong bytes on the device"; return ;;
    0 | 3) ;;
    *) fail "$spec: exit status $rc_l (crash?)"; return ;;
  esac
  if [ "$warnings" -gt "$max_warnings" ]; then
    fail "$spec: $warnings [ibp] warnings (at most $max_warnings)"
    return
  fi
  case $whose in
    libibp)
      if [ "$rc_b" -ne 0 ]; then
        fail "$spec: the run without libibp failed (test bug: the application calls $entry)"
      elif [ "$rc_l" -ne 0 ]; then
        fail "$spec: libibp's own call failed and the application saw an error ($(failed_call "$work/$tag.err"))"
      fi ;;
    application)
      if [ "$rc_l" -ne "$rc_b" ] ||
        [ "$(failed_call "$work/$tag.err")" != "$(failed_call "$work/$tag.base.err")" ]; then
        fail "$spec: the application's call failed: expected exit $rc_b" \
          "'$(failed_call "$work/$tag.base.err")', got exit $rc_l '$(failed_call "$work/$tag.err")'"
      fi ;;
    either)
      [ "$rc_l" -eq 3 ] && echo "  (accepted: the application's call failed: $(failed_call "$work/$tag.err"))" ;;
  esac
}

prog=$1
shift
shapes="$*"
shared=
[ "$entry" != trace-only ] && shared=${IBP_E2E_FAULT_TRACE:-}
for shape_arg in "$shapes" plain; do
  if [ "$shape_arg" = plain ]; then
    case " $shapes " in *" --faults "*) ;; *) continue ;; esac
    [ "$plain" = 1 ] || continue
    shape=
    shape_name="(plain shape)"
    shape_tag=plain
  else
    shape=$shape_arg
    shape_name="(${shape:-plain} shape)"
    shape_tag=main
  fi
  traces=$work
  if [ -n "$shared" ]; then
    traces=$shared
    for t in trace-base trace; do
      [ -s "$traces/$shape_tag.$t.err" ] || {
        echo "FAIL: no $traces/$shape_tag.$t.err (the trace-only run did not pass)"
        exit 1
      }
    done
  else
    run "$shape_tag.trace-base" 1 "" 1 "$prog" "$copies" ${shape:+"$shape"}
    if [ "$rc" -ne 0 ]; then
      echo "FAIL: $prog $copies $shape with IBP_DISABLE=1 exits $rc"
      tail -n 5 "$work/$shape_tag.trace-base.err"
      exit 1
    fi
  fi
  if [ "$entry" = trace-only ]; then
    run "$shape_tag.trace" 0 "" 1 "$prog" "$copies" ${shape:+"$shape"}
    echo "$shape_name: the runs without injection exit 0 (IBP_DISABLE=1)" \
      "and $rc (libibp)"
    [ "$rc" -eq 0 ] || { echo "FAIL: exit $rc with libibp and no injection"; exit 1; }
    continue
  fi
  app=$(calls "$traces/$shape_tag.trace-base.err")
  if [ "$shape_tag" = plain ] && [ "$app" -gt 0 ]; then
    continue # the plain shape calls it: covered by the --faults shape
  fi
  if [ -n "$shared" ] && [ -z "$prefix" ]; then
    rc=0 # the trace-only run passed
  else
    traces=$work
    run "$shape_tag.trace" 0 "$prefix" 1 "$prog" "$copies" ${shape:+"$shape"}
  fi
  total=$(calls "$traces/$shape_tag.trace.err")
  echo "$entry $shape_name: the application calls it $app times, with libibp" \
    "there are $total calls (libibp exit $rc without injection)"
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: exit $rc with libibp and no injection of $entry"
    failed=1
  fi
  if [ "$total" -le "$app" ]; then
    echo "  note: libibp made no call of $entry in this run"
  fi
  if [ "$shape_tag" = plain ]; then
    nths="1 *"
  elif [ "$app" -eq 0 ] && [ "$reduce" -gt 1 ]; then
    nths="1 *"
  elif [ "$app" -eq 0 ]; then
    nths="1 2 *"
  elif [ "$setup_only" = 1 ] && [ "$reduce" -gt 1 ]; then
    nths="1 $((app + 1))"
  elif [ "$setup_only" = 1 ]; then
    nths="1 $app $((app + 1)) $((app + 2)) $((app + 4))"
  else
    nths="$((app / 3 + 1)) $((app + 1)) $(((app + total) / 2)) $total"
  fi
  for nth in $(echo "$nths" | tr ' ' '\n' | awk '!seen[$0]++' | tr '\n' ' '); do
    judge "$nth"
  done
done
[ "$entry" = trace-only ] && exit 0
[ "$failed" -eq 0 ] && echo "all injections into $entry handled"
exit $failed
