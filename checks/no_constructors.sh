#!/bin/sh
# check_no_constructors: nothing of libibp.so may run at load time
# (docs/ARCHITECTURE.md, "Interception": lazy init under pthread_once, no
# CUDA call in a constructor).  Scans every directory linked into libibp.so for
#   - __attribute__((constructor)), __constructor__, [[gnu::constructor]];
#   - a function placed in .init_array / .preinit_array / .ctors by hand;
#   - a linker -init= option in preload/CMakeLists.txt.
# Comments and string contents are ignored.  The built library is checked
# by preload_no_init_array.
#   no_constructors.sh <source root>
. "$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)/lib.sh"
root=$1
files "$root/preload" "$root/codec" "$root/config" "$root/registry" \
  "$root/profile" "$root/kernels" > "$tmp/files"
while read -r f; do
  scan "$f" "${B}(__)?constructor(__)?([^A-Za-z0-9_]|$)" \
    "constructor: runs at load time; initialise lazily (pthread_once)"
  scan "$f" '\.(pre)?init_array|\.ctors' \
    "function placed in an init section: runs at load time" 1
done < "$tmp/files"
cm=$root/preload/CMakeLists.txt
if [ -f "$cm" ]; then
  sed 's/#.*//' "$cm" | grep -nE -- '-init[=,]' | cut -d: -f1 > "$tmp/hits"
  while read -r line; do
    violation "$cm" "$line" "linker -init option: runs a function at load time"
  done < "$tmp/hits"
fi
finish check_no_constructors "libibp.so must not run code at load time"
