#!/bin/sh
# Runs one end-to-end program (tests/preload/e2e/README.md) and checks what
# libibp reported about it.
#
#   e2e_run.sh [--preload LIB] [--stats CMAKE CHECK_SCRIPT REGIONS]
#              [--also CHECK_SCRIPT ARG]... -- PROGRAM [ARGS...]
#
# LIB is put in LD_PRELOAD of PROGRAM only (never of this shell or of cmake:
# a process that loads libibp writes IBP_STATS when it exits, which would
# overwrite the program's report).  The IBP_* and SIMCUDA_* variables come
# from the environment (CTest sets them).  IBP_STATS is removed before the
# run; with --stats, CHECK_SCRIPT (check_stats.cmake) then checks that every
# region named in REGIONS (comma-separated) was served and saved space;
# each --also CHECK_SCRIPT then checks the report too, given -DREGIONS=ARG
# (check_staged.cmake: copies were staged).
# The exit status is the program's (77 = skip), or 1 when the stats check
# fails.
set -u
preload=
cmake=
check=
regions=
also=
while [ $# -gt 0 ]; do
  case $1 in
    --preload) preload=$2; shift 2 ;;
    --stats) cmake=$2; check=$3; regions=$4; shift 4 ;;
    --also) also="$also $2=$3"; shift 3 ;;
    --) shift; break ;;
    *) echo "e2e_run.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "e2e_run.sh: no program" >&2; exit 2; }

vars=$(env | grep -E '^(LD_LIBRARY_PATH|IBP_[A-Z0-9_]*|SIMCUDA_[A-Z0-9_]*)=' |
  sed "s/=\(.*\)/='\1'/" | tr '\n' ' ')
echo "e2e_run: reproduce with: env $vars${preload:+LD_PRELOAD=$preload }$*"

if [ -n "${IBP_STATS:-}" ]; then
  rm -f "$IBP_STATS"
fi
if [ -n "$preload" ]; then
  LD_PRELOAD=$preload "$@"
else
  "$@"
fi
rc=$?
if [ $rc -ne 0 ]; then
  echo "e2e_run: $1 exited with status $rc"
  exit $rc
fi
if [ -n "$check" ]; then
  "$cmake" -DSTATS="${IBP_STATS:-}" -DREGIONS="$regions" -P "$check" || exit 1
  for item in $also; do
    "$cmake" -DSTATS="${IBP_STATS:-}" -DREGIONS="${item#*=}" -P "${item%%=*}" ||
      exit 1
  done
fi
exit 0
