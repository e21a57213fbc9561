#!/bin/sh
# check_no_cudart: libibp.so talks only to the driver API, which it opens
# itself (docs/ARCHITECTURE.md, "Interception": it never links cudart).  In
# preload/'s *.c, *.h, *.def: no identifier starting with cuda[A-Z]
# (runtime calls and types; names in string literals are fine), no
# #include of cuda_runtime*.h or other cudart headers; in
# preload/CMakeLists.txt: no cudart library.
# The built library is checked by preload_no_cudart_link.
#   no_cudart.sh <source root>
. "$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)/lib.sh"
root=$1
files "$root/preload" > "$tmp/files"
while read -r f; do
  scan "$f" "${B}cuda[A-Z][A-Za-z0-9_]*" \
    "CUDA runtime identifier: libibp uses the driver API only"
  scan "$f" \
    '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^>"]*(cuda_runtime|cudart)[^>"]*[>"]' \
    "CUDA runtime header: libibp uses the driver API only (cuda.h)" 1
done < "$tmp/files"
cm=$root/preload/CMakeLists.txt
if [ -f "$cm" ]; then
  sed 's/#.*//' "$cm" | grep -niE -- 'cudart' | cut -d: -f1 > "$tmp/hits"
  while read -r line; do
    violation "$cm" "$line" "libibp.so must not link the CUDA runtime"
  done < "$tmp/hits"
fi
finish check_no_cudart "no CUDA runtime in libibp.so"
