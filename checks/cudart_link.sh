#!/bin/sh
# preload_no_cudart_link: the built libibp.so neither needs the CUDA runtime
# or driver library (DT_NEEDED) nor references a CUDA symbol to be bound by
# the dynamic linker: the driver is opened with dlopen and reached through
# cuGetProcAddress (docs/ARCHITECTURE.md, "Interception").
#   cudart_link.sh <nm> <readelf> <libibp.so>
. "$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)/lib.sh"
nm=$1 readelf=$2 lib=$3
[ -f "$lib" ] || { echo "preload_no_cudart_link: $lib not built"; exit 1; }
"$readelf" -dW "$lib" | awk '$2 == "(NEEDED)" { print $NF }' |
  tr -d '[]' | grep -E '^lib(cudart|cuda)[._]' > "$tmp/needed"
while read -r s; do
  violations=$((violations + 1))
  echo "$lib: needs $s (link nothing of CUDA; the driver is dlopen()ed)"
done < "$tmp/needed"
"$nm" -D --undefined-only "$lib" | awk '{ n = $NF; sub(/@.*/, "", n); print n }' |
  grep -E '^cu(da)?[A-Z]' > "$tmp/undef"
while read -r s; do
  violations=$((violations + 1))
  echo "$lib: references $s through the dynamic linker"
done < "$tmp/undef"
finish preload_no_cudart_link "libibp.so links CUDA"
