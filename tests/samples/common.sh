# Shared helpers of the sample tests (POSIX sh), sourced by each script.
# $gpu = 1: the samples use NVIDIA's runtime and need a GPU (skip, 77,
# without one); 0: they run on the simulated GPU (LD_LIBRARY_PATH is set by
# CTest).
set -u
failures=0
checks=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

need_gpu_or_skip() {
  if [ "$1" = 1 ] && ! nvidia-smi -L >/dev/null 2>&1; then
    echo "skipped: the samples are built against NVIDIA's runtime and there is no GPU"
    exit 77
  fi
}

finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures of $checks checks failed" >&2
    exit 1
  fi
  echo "all $checks checks passed"
  exit 0
}

# run EXE ARGS...: stdout in $TMP_OUT, stderr in $TMP_ERR, status in $rc.
run() {
  checks=$((checks + 1))
  "$@" >"$TMP_OUT" 2>"$TMP_ERR"
  rc=$?
}

# The result line of a sample: "NAME: ok bytes=N copies=N checksum=0x<16 hex>".
result_regex() {
  echo "$1: ok bytes=[0-9]+ copies=[0-9]+ checksum=0x[0-9a-f]{16}"
}

# expect_success NAME EXE ARGS...: exit 0, nothing on stderr, the result
# line first and throughput_gbps last.
expect_success() {
  name=$1
  shift
  run "$@"
  if [ "$rc" -ne 0 ]; then
    fail "$*: exit $rc; stdout: $(cat "$TMP_OUT"); stderr: $(cat "$TMP_ERR")"
    return 1
  fi
  [ -s "$TMP_ERR" ] && fail "$*: stderr: $(cat "$TMP_ERR")"
  head -n 1 "$TMP_OUT" | grep -Eqx "$(result_regex "$name")" ||
    fail "$*: first line is '$(head -n 1 "$TMP_OUT")'"
  tail -n 1 "$TMP_OUT" | grep -Eqx 'throughput_gbps=[0-9]+\.[0-9]{3}' ||
    fail "$*: last line is '$(tail -n 1 "$TMP_OUT")'"
  return 0
}

# route NAME FIELD: the first region's routes.NAME.FIELD in $json (libibp's
# statistics, IBP_STATS)
route() {
  python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["regions"][0]["routes"]
print(r[sys.argv[2]][sys.argv[3]])' "$json" "$1" "$2"
}

# region FIELD: the first region's FIELD in $json (libibp's statistics).
region() {
  python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["regions"][0][sys.argv[2]])' "$json" "$1"
}

# truth_run TRUTH PROFILE REGIONS EXE ARGS...: EXE on the simulated GPU
# behaving as TRUTH (a profile file), first with libibp disabled (its
# result line), then served ($lib) under IBP_PROFILE=PROFILE and
# IBP_REGIONS=REGIONS, its statistics in $json: a failure unless it exits 0
# with the same result line.
truth_run() {
  _truth=$1 _profile=$2 _regions=$3
  shift 3
  SIMCUDA_PROFILE=$_truth IBP_DISABLE=1 LD_PRELOAD=$lib run "$@"
  _base=$(head -n 1 "$TMP_OUT")
  rm -f "$json"
  SIMCUDA_PROFILE=$_truth IBP_PROFILE=$_profile IBP_REGIONS=$_regions \
    IBP_WAIT_READY=1 IBP_STATS=$json LD_PRELOAD=$lib run "$@"
  [ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP_ERR")"
  [ "$(head -n 1 "$TMP_OUT")" = "$_base" ] ||
    fail "result differs: $(head -n 1 "$TMP_OUT") vs $_base"
}
