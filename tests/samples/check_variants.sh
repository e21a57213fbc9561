# check_variants.sh SAMPLE NEED_GPU EXE1 EXE2 EXE3 EXE4 [ARGS...]
# Runs the four builds of SAMPLE with ARGS: each succeeds, and all print the
# same result line (bytes, copies, checksum).  On the simulated driver also
# checks, with SIMCUDA_LOG, that the host-to-device copies went through the
# legacy entry point (cuMemcpyHtoDAsync_v2; cuMemcpyBatchAsync_v2 for
# kv_blocks) in a legacy build and through the per-thread one (..._ptsz) in
# a per-thread-default-stream build (not under a wrapper).  SAMPLES_WRAPPER, when set, is put in front of every
# command (split at spaces), e.g. "/path/ibp run --regions min=1M --" to
# run them under libibp.
. "$(dirname "$0")/common.sh"
sample=$1
gpu=$2
exes="$3 $4 $5 $6"
shift 6
need_gpu_or_skip "$gpu"

work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
TMP_OUT=$work/out
TMP_ERR=$work/err

first=""
for exe in $exes; do
  # shellcheck disable=SC2086 # the wrapper's words
  expect_success "$sample" ${SAMPLES_WRAPPER:-} "$exe" "$@" || continue
  line=$(head -n 1 "$TMP_OUT")
  echo "$(basename "$exe"): $line"
  if [ -z "$first" ]; then
    first=$line
  else
    checks=$((checks + 1))
    [ "$line" = "$first" ] || fail "$(basename "$exe") prints '$line', the first build '$first'"
  fi
  # --quiet: the result line and the throughput only.
  # shellcheck disable=SC2086
  run ${SAMPLES_WRAPPER:-} "$exe" "$@" --quiet
  checks=$((checks + 1))
  [ "$rc" -eq 0 ] && [ "$(wc -l <"$TMP_OUT")" -eq 2 ] &&
    [ "$(head -n 1 "$TMP_OUT")" = "$first" ] ||
    fail "$(basename "$exe") --quiet: exit $rc, stdout: $(cat "$TMP_OUT")"

  # (Under a wrapper such as libibp, copies may be served by kernels.)
  [ "$gpu" = 1 ] || [ -n "${SAMPLES_WRAPPER:-}" ] && continue
  run env SIMCUDA_LOG=1 "$exe" "$@" --quiet
  case $sample in
  kv_blocks) entry=cuMemcpyBatchAsync_v2 ;; # one cudaMemcpyBatchAsync a step
  *) entry=cuMemcpyHtoDAsync_v2 ;;
  esac
  case $exe in
  *_ptds) want=${entry}_ptsz not="$entry " ;;
  *) want="$entry " not=${entry}_ptsz ;;
  esac
  checks=$((checks + 1))
  grep -q "\] $want" "$TMP_ERR" || fail "$(basename "$exe"): no copy through $want"
  checks=$((checks + 1))
  grep -q "\] $not" "$TMP_ERR" && fail "$(basename "$exe"): a copy went through $not"
done
finish
