# Usage: core_linked.sh EXE JSON -- runs the directly linked program under
# libibp (environment from CTest) and requires copies served in its stats.
exe=$1 json=$2
rm -f "$json"
IBP_STATS=$json "$exe" || exit 1
grep -q '"copies_served": *[1-9]' "$json" || {
  echo "no copy served: $(cat "$json" 2>/dev/null)" >&2
  exit 1
}
echo "core_linked: served"
