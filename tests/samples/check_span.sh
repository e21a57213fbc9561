# Usage: check_span.sh LIBIBP WORK_DIR KV_OFFLOAD LINKTHIRD
# A timed copy whose stream ran dry before its calls queued it is not
# charged for those calls (serve/choose/chooser.c, span_gpu_ns; the marker,
# docs/ARCHITECTURE.md "The gate"): a KV window's 64 KiB driver copies on
# h100-pcie5, the simulated GPU behaving as the profile says, each queued
# about as the one before it ends, measure at their model -- read without
# the marker, those whose stream was still busy at the query before their
# first event measured 1.35x it.  And where the stream is still busy as the
# calls end (LINKTHIRD, a profile whose link is a third as wide, as truth
# and prior: each copy 3x its calls), the calls are not taken off a span
# that never held them (0.7x).  Every run prints the same result line as
# IBP_DISABLE=1.
. "$(dirname "$0")/common.sh"
lib=$1 work=$2 kv=$3 linkthird=$4
mkdir -p "$work"
TMP_OUT=$work/span.out
TMP_ERR=$work/span.err
json=$work/span.json
# span_run PROFILE: the window under PROFILE, as truth and prior; the
# driver's copies timed and measured at their model
span_run() {
  # shellcheck disable=SC2086 # the sample's arguments, split
  truth_run "$1" "$1" min=8M,tensor=4K,name=kv "$kv" \
    --blocks 256 --prefill 240 --block-bytes 64K --steps 48 --window 32 \
    --warmup 2
  timed=$(route driver timed)
  ratio=$(python3 -c 'import sys
print(float(sys.argv[1]) / float(sys.argv[2]))' \
    "$(route driver measured_seconds)" "$(route driver model_seconds)")
  echo "check_span: $1: $timed driver copies timed, measured/modelled $ratio"
  checks=$((checks + 1))
  [ "$timed" -ge 3 ] ||
    fail "$1: fewer than 3 driver copies timed: $(cat "$json")"
  checks=$((checks + 1))
  python3 -c 'import sys; sys.exit(not 0.9 <= float(sys.argv[1]) <= 1.1)' \
    "$ratio" || fail "$1: the driver's copies measured $ratio of their model"
}

span_run h100-pcie5
span_run "$linkthird"
finish
