#!/bin/sh
# core_remap with libibp (the environment CTest sets) and with
# IBP_DISABLE=1: the outputs must be equal.
#   core_remap.sh PROGRAM
set -eu
with=$("$1")
without=$(IBP_DISABLE=1 "$1")
if [ "$with" != "$without" ]; then
  echo "core_remap: outputs differ"
  printf '%s\n' "$with" >with.txt
  printf '%s\n' "$without" >without.txt
  diff without.txt with.txt || true
  exit 1
fi
printf '%s\n' "$with" | tail -1
echo "core_remap: same output"
