#!/bin/sh
# Runs e2e_batch once per case (README.md, "e2e_batch"), each with its own
# libibp report, batched and with IBP_BATCH=0:
#
#   run_batch.sh WORKDIR PRELOAD CMAKE E2E_DIR -- PROGRAM [ARGS...]
#
# With batching every case must pass, every region must have been served
# (check_stats.cmake) and copies must have been batched (check_batch.cmake:
# copies_batched > 0, batch_launches > 0), so a case that passes because
# nothing was held fails here.  With IBP_BATCH=0 the same case (same seed,
# same expected bytes) must pass with nothing batched.  Case malformed
# makes only calls the driver refuses: nothing may be held, batched or
# not.  Case steps runs under batch_long.profile (a deadline of a second:
# a loaded machine's timer launches nothing) and must batch 288 of its 384
# rows, 12 a launch or more.  ARGS follow the case name (e.g. a count).  IBP_E2E_BATCH_CASES
# overrides the list.
set -u
if [ $# -lt 6 ] || [ "$5" != "--" ]; then
  echo "usage: run_batch.sh WORKDIR PRELOAD CMAKE E2E_DIR -- PROGRAM [ARGS...]" >&2
  exit 2
fi
work=$1 preload=$2 cmake=$3 dir=$4
shift 5
prog=$1
shift
cases=${IBP_E2E_BATCH_CASES:-event stream legacy hostfunc query steps overwrite overlap deadline calls malformed rows2d written random}
mkdir -p "$work" || exit 2
vars=$(env | grep -E '^(LD_LIBRARY_PATH|IBP_[A-Z0-9_]*|SIMCUDA_[A-Z0-9_]*)=' |
  sed "s/=\(.*\)/='\1'/" | tr '\n' ' ')
failed=0
for c in $cases; do
  for batch in 1 0; do
    stats=$work/$c.batch$batch.json
    rm -f "$stats"
    echo "run_batch: env $vars IBP_BATCH=$batch IBP_STATS=$stats" \
      "LD_PRELOAD=$preload $prog $c $*"
    if [ "$c" = steps ]; then # the timer (a deadline of real time) apart
      IBP_PROFILE=$dir/batch_long.profile IBP_BATCH=$batch IBP_STATS=$stats \
        LD_PRELOAD=$preload "$prog" "$c" "$@"
    else
      IBP_BATCH=$batch IBP_STATS=$stats LD_PRELOAD=$preload "$prog" "$c" "$@"
    fi
    rc=$?
    if [ $rc -eq 77 ]; then
      exit 77
    elif [ $rc -ne 0 ]; then
      echo "run_batch: FAIL: case $c, IBP_BATCH=$batch: exit status $rc"
      failed=1
      continue
    fi
    want=$batch
    [ "$c" = malformed ] && want=0 # refused calls: nothing held
    if [ $want = 1 ]; then
      "$cmake" -DSTATS="$stats" -DREGIONS=rows256,rows1k,rows768 \
        -P "$dir/check_stats.cmake" || failed=1
    fi
    least= # steps: batches as large as its steps (16 rows), most rows held
    [ "$c" = steps ] && [ $want = 1 ] &&
      least="-DMIN_PER_LAUNCH=12 -DMIN_BATCHED=288"
    # shellcheck disable=SC2086 # two settings or none
    "$cmake" -DSTATS="$stats" -DBATCHED=$want $least -P "$dir/check_batch.cmake" ||
      { echo "run_batch: FAIL: case $c, IBP_BATCH=$batch: batching stats"; failed=1; }
  done
done
[ $failed -eq 0 ] && echo "run_batch: every case passed, batched and not"
exit $failed
