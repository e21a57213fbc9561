# Shared by the check scripts (POSIX sh).  Each check prints one line per
# violation, "file:line: what is wrong", followed by the offending source
# line, and exits 1 when there was any.
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
violations=0

# strip FILE [keep_strings]: FILE without comments (and string contents).
strip() {
  awk -v keep_strings="${2:-0}" -f "$here/strip_c.awk" "$1"
}

# violation FILE LINE MESSAGE
violation() {
  violations=$((violations + 1))
  printf '%s:%s: %s\n' "$1" "$2" "$3"
  sed -n "$2{s/^[[:space:]]*/    /;p;}" "$1"
}

# scan FILE ERE MESSAGE [keep_strings]: a violation for every line of the
# stripped FILE that matches ERE.
scan() {
  strip "$1" "${4:-0}" | grep -nE -- "$2" | cut -d: -f1 > "$tmp/hits"
  while read -r line; do
    violation "$1" "$line" "$3"
  done < "$tmp/hits"
}

# files DIR...: the C sources and headers (and .def X-macro files) of DIRs
# and their subdirectories.
files() {
  for d in "$@"; do
    [ -d "$d" ] || continue
    find "$d" -type f \( -name '*.c' -o -name '*.h' -o -name '*.def' \) |
      LC_ALL=C sort
  done
}

# finish NAME WHAT: the verdict.
finish() {
  if [ "$violations" -gt 0 ]; then
    printf '%s: FAILED, %d violation(s): %s\n' "$1" "$violations" "$2"
    exit 1
  fi
  printf '%s: ok\n' "$1"
  exit 0
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ibp-check.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
# identifier boundary before a name: start of line or a non-identifier char
B='(^|[^A-Za-z0-9_])'
