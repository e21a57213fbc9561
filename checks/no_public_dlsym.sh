#!/bin/sh
# check_no_public_dlsym: inside libibp.so the name `dlsym` is our own hook
# (exported by preload/hooks/resolve.c), so calling it -- or taking its
# address -- from preload/ code would recurse into the hook.  The C
# library's dlsym is reached only through ibp__real_dlsym
# (preload/base/real.c, found with dlvsym).  Allowed: the hook's own
# definition or declaration in preload/hooks/resolve.c,
#   [IBP_EXPORT IBP_NO_SANITIZE ...] void *dlsym(void *handle, const char *name)
# Anything else naming dlsym in preload/'s *.c, *.h, *.def is a violation;
# comments and string literals ("dlsym" as a name to look up) are ignored.
#   no_public_dlsym.sh <source root>
. "$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)/lib.sh"
root=$1
decl='^[[:space:]]*((IBP_[A-Z_]+|extern|__attribute__[[:space:]]*\(\([^;{]*\)\))[[:space:]]+)*void[[:space:]]*\*[[:space:]]*dlsym[[:space:]]*\('
use="${B}dlsym([^A-Za-z0-9_]|$)"
files "$root/preload" > "$tmp/files"
while read -r f; do
  strip "$f" > "$tmp/stripped"
  if [ "$(basename "$f")" != resolve.c ]; then
    grep -nE -- "$decl" "$tmp/stripped" | cut -d: -f1 > "$tmp/hits"
    while read -r line; do
      violation "$f" "$line" \
        "dlsym declared or defined outside preload/hooks/resolve.c"
    done < "$tmp/hits"
  fi
  # blank the declaration form, then look for any other use of the name
  sed -E "s/$decl/ HOOK_DEFINITION(/" "$tmp/stripped" > "$tmp/rest"
  grep -nE -- "$use" "$tmp/rest" | cut -d: -f1 > "$tmp/hits"
  while read -r line; do
    violation "$f" "$line" \
      "public dlsym used (it is libibp's own hook); call ibp__real_dlsym"
  done < "$tmp/hits"
done < "$tmp/files"
finish check_no_public_dlsym "preload/ must reach the C library's dlsym through ibp__real_dlsym"
