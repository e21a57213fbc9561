#!/bin/sh
# core_filling, then (unless IBP_DISABLE=1) its stats must show copies
# served -- some of them while the region was still filling is what the
# program checks the bytes of.
#   core_filling.sh PROGRAM
set -eu
"$1"
[ "${IBP_DISABLE:-0}" = 1 ] && exit 0
served=$(grep -o '"copies_served": [0-9]*' "$IBP_STATS" | head -1 |
  sed 's/.*: //')
echo "core_filling: ${served:-0} copies served"
[ "${served:-0}" -gt 0 ]
