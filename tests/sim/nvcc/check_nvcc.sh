#!/bin/sh
# Programs built the way users build them, run on the simulated GPU
# (docs/USING.md, "Running your own program on the simulated GPU").
#
# usage: check_nvcc.sh MODE NVCC SRC_DIR WORK_DIR SIM_LIB_DIR LIBIBP IBP
#   MODE static      memcpy_only.cu built `nvcc x.cu` (NVIDIA's static
#                    cudart): it cannot run, so it must stop -- nonzero exit
#                    -- with exactly one line from the simulated driver that
#                    names the cause and the rebuild (-cudart shared), the
#                    same with libibp (`ibp run --sim`) and without
#        shared      memcpy_only.cu built `nvcc -cudart shared x.cu`
#        cxx_shared  memcpy_only.cu built `nvcc -x c++ -cudart shared x.cu`
#                    (both: exit 0 and every byte back on the simulated
#                    runtime, with nothing on stderr; under
#                    LD_PRELOAD=libibp.so with a region rule and
#                    IBP_WAIT_READY=1 the same output and its four
#                    host-to-device copies served; the same through
#                    `ibp run --sim`)
#        kernel      kernel_launch.cu built -cudart shared, legacy and
#                    --default-stream per-thread: <<<>>> and cudaLaunchKernel
#                    fail with cudaErrorNoKernelImageForDevice (not exit 127,
#                    not a crash), one line on stderr says why, copies work
#                    afterwards
# Exit 77 (skipped) when NVCC is not an executable.  In a sanitizer build
# IBP_NVCC_TEST_PRELOAD names the sanitizer runtimes, preloaded into every
# run (the programs are not instrumented; the libraries they load are).
set -u
mode=$1 nvcc=$2 src=$3 work=$4 simlib=$5 libibp=$6 ibp=$7
if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then
  echo "skipped: no nvcc (IBP_NVCC='$nvcc')"
  exit 77
fi
failures=0 checks=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
mkdir -p "$work" || exit 1
rm -f "$work"/*
out=$work/out err=$work/err
# a CUDA library path of its own only: the simulated driver and runtime
export LD_LIBRARY_PATH="$simlib"
unset LD_PRELOAD
san=${IBP_NVCC_TEST_PRELOAD:-}
profile=$(dirname "$0")/../../preload/kernel_path.profile

build() { # build EXE NVCC-ARGS...
  exe=$work/$1
  shift
  checks=$((checks + 1))
  if ! "$nvcc" -o "$exe" "$@" >"$work/build.log" 2>&1; then
    fail "nvcc $*: $(cat "$work/build.log")"
    return 1
  fi
}
run() { # run ENV-ASSIGNMENTS... -- EXE: stdout, stderr, exit in $rc
  checks=$((checks + 1))
  env ${san:+"LD_PRELOAD=$san"} "$@" >"$out" 2>"$err"
  rc=$?
}
served() { # the totals' copies_served of stats file $1
  sed -n '/"totals"/,$p' "$1" 2>/dev/null |
    grep -o '"copies_served": *[0-9]*' | head -n 1 | grep -o '[0-9]*$'
}

# one run of the static build: how = plain | libibp; its exit in $rc
static_run() {
  how=$1
  if [ "$how" = plain ]; then
    run "$exe"
  else
    run IBP_WAIT_READY=1 "$ibp" run --sim --regions nth=1,name=user \
      --stats "$work/static.json" -- "$exe"
  fi
  [ "$rc" -ne 0 ] || fail "$how: exit 0 with NVIDIA's static runtime"
  if [ "$rc" -eq 127 ] || [ "$rc" -ge 128 ]; then
    fail "$how: exit $rc"
  fi
  n=$(grep -c '^\[simcuda\]' "$err")
  [ "$n" -eq 1 ] || fail "$how: $n simulated-driver lines: $(cat "$err")"
  grep -q "\\[simcuda\\] this program uses NVIDIA's CUDA runtime .*'nvcc -cudart shared'" "$err" ||
    fail "$how: no explanation: $(cat "$err")"
  cp "$out" "$work/static.$how.out"
}

check_static() {
  build memcpy_static "$src/memcpy_only.cu" || return
  static_run plain
  rc_plain=$rc
  static_run libibp
  [ "$rc_plain" = "$rc" ] || fail "exit $rc_plain without libibp, $rc with"
  cmp -s "$work/static.plain.out" "$work/static.libibp.out" ||
    fail "stdout differs with libibp"
}

expect_ok() { # what: exit 0, the result line, an empty stderr
  [ "$rc" -eq 0 ] || fail "$1: exit $rc: $(cat "$out" "$err")"
  grep -Eqx "memcpy_only: ok device='.*' bytes=4194304 copies=8" "$out" ||
    fail "$1: stdout '$(cat "$out")'"
  [ ! -s "$err" ] || fail "$1: stderr: $(cat "$err")"
}

check_shared() { # NAME NVCC-ARGS...
  name=$1
  shift
  build "$name" "$@" || return
  run "$exe"
  expect_ok "without libibp"
  cp "$out" "$work/$name.base"
  json=$work/$name.json
  # the rule names the copies' source only (nth=1): the device-to-host
  # target would be a region never copied from, which the report notes on
  # stderr (docs/USING.md, "When it does not help")
  run LD_PRELOAD="$libibp${san:+:$san}" IBP_REGIONS=nth=1,name=user IBP_WAIT_READY=1 \
    IBP_PROFILE="$profile" IBP_STATS="$json" "$exe"
  expect_ok "LD_PRELOAD=libibp.so"
  cmp -s "$out" "$work/$name.base" || fail "LD_PRELOAD: stdout differs"
  n=$(served "$json")
  [ "${n:-0}" -eq 4 ] || fail "LD_PRELOAD: $n of 4 copies served: $(cat "$json")"
  # as the guide says it: ibp run --sim, the default profile
  json=$work/$name.run.json
  run IBP_WAIT_READY=1 "$ibp" run --sim --regions nth=1,name=user \
    --stats "$json" -- "$exe"
  expect_ok "ibp run --sim"
  cmp -s "$out" "$work/$name.base" || fail "ibp run --sim: stdout differs"
  n=$(served "$json")
  [ "${n:-0}" -gt 0 ] || fail "ibp run --sim: no copy served: $(cat "$json")"
  echo "$name: $(cat "$out") (served under libibp)"
}

check_kernel() { # NAME LAUNCH-SYMBOL NVCC-ARGS...
  name=$1 entry=$2
  shift 2
  build "$name" "$@" || return
  nm -D --undefined-only "$exe" | grep -q " $entry@" ||
    fail "$name does not call $entry"
  run "$exe"
  [ "$rc" -eq 3 ] || fail "$name: exit $rc (3: both launches refused): $(cat "$err")"
  printf '%s\n' "<<<>>>: cudaErrorNoKernelImageForDevice" \
    "cudaLaunchKernel: cudaErrorNoKernelImageForDevice" "after: ok" >"$work/want"
  cmp -s "$out" "$work/want" || fail "$name: stdout '$(cat "$out")'"
  n=$(wc -l <"$err")
  [ "$n" -eq 1 ] || fail "$name: $n lines on stderr: $(cat "$err")"
  grep -q '^\[cudart-sim\] kernel _Z5scalePff not launched: the simulated GPU runs only libibp' "$err" ||
    fail "$name: stderr '$(cat "$err")'"
}

case $mode in
  static) check_static ;;
  shared) check_shared memcpy_shared -cudart shared "$src/memcpy_only.cu" ;;
  cxx_shared) check_shared memcpy_cxx -x c++ -cudart shared "$src/memcpy_only.cu" ;;
  kernel)
    check_kernel kernel_legacy __cudaLaunchKernel -cudart shared \
      "$src/kernel_launch.cu"
    check_kernel kernel_ptsz __cudaLaunchKernel_ptsz -cudart shared \
      --default-stream per-thread "$src/kernel_launch.cu" ;;
  *) echo "usage: check_nvcc.sh static|shared|cxx_shared|kernel NVCC SRC_DIR WORK_DIR SIM_LIB_DIR LIBIBP IBP" >&2
     exit 2 ;;
esac
if [ "$failures" -ne 0 ]; then
  echo "$failures failures in $checks checks" >&2
  exit 1
fi
echo "all $checks checks passed"
