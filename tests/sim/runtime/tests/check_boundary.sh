#!/bin/sh
# Runs a runtime test program under rt_boundary_shim.so and checks that the
# runtime reached the driver exactly as NVIDIA's cudart 13 does:
#
#  1. exactly one dlsym on the libcuda.so.1 handle, for cuGetProcAddress_v2,
#     and no dlsym of any other driver symbol on any handle;
#  2. the first lookup is cuGetProcAddress itself (version 12000, flags 0);
#  3. every (name, version, flags) lookup appears in NVIDIA's list
#     (cudart13-driver-lookups.txt) and succeeded;
#  4. lookups with flags 2 of the copy/set entry points returned a _ptds/_ptsz
#     variant, lookups with flags 0 a legacy one;
#  5. the program's copies and sets went through the legacy variants only
#     (mode "legacy") or the per-thread variants only (mode "ptds").
#
# usage: check_boundary.sh <program> <shim.so> <lookups.txt> legacy|ptds [preload...]
# Extra preload libraries (the sanitizer runtimes) go before the shim.
set -u
prog=$1 shim=$2 ref=$3 mode=$4
shift 4
pre="$*"

work=$(mktemp -d "${TMPDIR:-/tmp}/rt_boundary.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
log=$work/log

fail=0
die() { echo "FAIL: $*"; fail=1; }

RT_BOUNDARY_LOG=$log LD_PRELOAD="${pre:+$pre }$shim" "$prog" >"$work/out" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  cat "$work/out"
  die "$prog exited with $rc under the shim"
fi
[ -s "$log" ] || { echo "FAIL: the shim logged nothing"; exit 1; }

# 1. dlsym
cuda_dlsyms=$(grep '^dlsym libcuda\.so\.1 ' "$log")
if [ "$cuda_dlsyms" != "dlsym libcuda.so.1 cuGetProcAddress_v2" ]; then
  echo "$cuda_dlsyms" | sed 's/^/  /'
  die "dlsym on the libcuda.so.1 handle: expected exactly one, for cuGetProcAddress_v2"
fi
other=$(grep -E '^dlsym [^ ]+ cu[A-Z]' "$log" | grep -v '^dlsym libcuda\.so\.1 cuGetProcAddress_v2$')
if [ -n "$other" ]; then
  echo "$other" | sed 's/^/  /'
  die "driver symbols looked up with dlsym"
fi

# 2. the resolver resolves itself first
first=$(grep '^gpa ' "$log" | head -n 1)
case "$first" in
  "gpa cuGetProcAddress 12000 0 0 "*) ;;
  *) die "first lookup is not cuGetProcAddress 12000 flags 0: $first" ;;
esac

# 3, 4: every lookup against the reference; variants of the copy family
awk -v ref="$ref" '
  BEGIN {
    while ((getline line < ref) > 0) {
      split(line, f, " ")
      v = f[2]; sub(/^ver=/, "", v); g = f[3]; sub(/^flags=/, "", g)
      known[f[1] " " v " " g] = 1
    }
    copy["cuMemcpyHtoD"]; copy["cuMemcpyHtoDAsync"]; copy["cuMemcpyDtoH"]
    copy["cuMemcpyDtoHAsync"]; copy["cuMemcpyDtoD"]; copy["cuMemcpyDtoDAsync"]
    copy["cuMemcpy"]; copy["cuMemcpyAsync"]; copy["cuMemsetD8"]; copy["cuMemsetD8Async"]
    copy["cuMemcpy2DUnaligned"]; copy["cuMemcpy2DAsync"]; copy["cuMemcpyBatchAsync"]
    bad = 0
  }
  $1 == "gpa" {
    n++
    key = $2 " " $3 " " $4
    if (!(key in known)) { print "  lookup not made by cudart 13: " $0; bad = 1 }
    if ($5 != 0) { print "  lookup failed: " $0; bad = 1 }
    if ($2 in copy) {
      per = ($6 ~ /_pt(ds|sz)/)
      if ($4 == 2 && !per) { print "  flags 2 answered with a legacy variant: " $0; bad = 1 }
      if ($4 == 0 && per) { print "  flags 0 answered with a per-thread variant: " $0; bad = 1 }
      if ($6 == "unexported" || $6 == "-") { print "  not an exported driver function: " $0; bad = 1 }
    }
  }
  END { printf "  %d lookups checked\n", n; exit bad }
' "$log" || die "lookups differ from what cudart 13 asks the driver"

# 5. which variants carried the copies
echo "  copies and sets by driver variant:"
grep '^calls ' "$log" | awk '{ printf "    %-22s flags=%s %-28s %s calls\n", $2, $3, $4, $5 }'
if [ "$mode" = ptds ]; then
  wrong=$(awk '$1 == "calls" && $3 == 0 && $5 > 0' "$log")
  used=$(awk '$1 == "calls" && $3 == 2 && $5 > 0' "$log")
else
  wrong=$(awk '$1 == "calls" && $3 == 2 && $5 > 0' "$log")
  used=$(awk '$1 == "calls" && $3 == 0 && $5 > 0' "$log")
fi
[ -z "$wrong" ] || die "$mode program called the other default-stream variant: $wrong"
[ -n "$used" ] || die "no copy reached the expected ($mode) driver variants"
for fn in cuMemcpyHtoD cuMemcpyHtoDAsync cuMemcpyDtoH cuMemcpyDtoHAsync cuMemcpyDtoD \
          cuMemcpyDtoDAsync cuMemcpy cuMemcpyAsync cuMemsetD8 cuMemsetD8Async \
          cuMemcpy2DUnaligned cuMemcpy2DAsync cuMemcpyBatchAsync; do
  echo "$used" | grep -q "^calls $fn " || die "$fn was never called in $mode mode"
done

[ $fail -eq 0 ] && echo "PASS: $prog reaches the driver only through cuGetProcAddress ($mode)"
exit $fail
