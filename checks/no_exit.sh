#!/bin/sh
# check_no_exit: library code never ends the process (docs/ARCHITECTURE.md,
# "Fail open").  Scans the C sources and headers of codec/, config/,
# registry/, profile/, preload/ and the host C files of
# kernels/ for calls to exit, _exit, _Exit, quick_exit, abort, assert and
# __builtin_trap, and for <err.h> (err/errx exit).  static_assert and
# _Static_assert are fine; comments and strings are ignored.
#   no_exit.sh <source root>
. "$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)/lib.sh"
root=$1
{
  files "$root/codec" "$root/config" "$root/registry" "$root/profile" \
    "$root/preload"
  for f in "$root"/kernels/*.c; do [ -f "$f" ] && printf '%s\n' "$f"; done
} > "$tmp/files"
while read -r f; do
  scan "$f" \
    "${B}(exit|_exit|_Exit|quick_exit|abort|assert|__builtin_trap)[[:space:]]*\\(" \
    "ends the process: library code must return an error instead"
  scan "$f" '^[[:space:]]*#[[:space:]]*include[[:space:]]*<err\.h>' \
    "<err.h>: err()/errx() end the process"
done < "$tmp/files"
finish check_no_exit "library code must not exit, abort or assert"
