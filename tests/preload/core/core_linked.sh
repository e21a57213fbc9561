# Usage: core_linked.sh EXE JSON [--query|--wc] -- runs the directly linked
# program under libibp (environment from CTest) and requires copies served
# in its stats; with --wc (a write-combined buffer) none under the rule as
# it is, one report line saying so, and copies served once the rule adds
# wc=yes; with --query (device questions only, no copy), a report
# that replaced the "no CUDA activity" file `ibp run` leaves beforehand.
exe=$1 json=$2 mode=${3:-}
rm -f "$json"
if [ "$mode" = --query ]; then
  echo '{"version": 1, "no_cuda_activity": true}' >"$json"
  IBP_STATS=$json "$exe" --query || exit 1
  if grep -q '"no_cuda_activity"' "$json" || ! grep -q '"regions"' "$json"; then
    echo "driver calls, yet no report from libibp: $(cat "$json")" >&2
    exit 1
  fi
  echo "core_linked: reported"
  exit 0
fi
if [ "$mode" = --wc ]; then
  # a write-combined buffer: the driver's, unless the rule says wc=yes
  IBP_STATS=$json "$exe" --wc 2>"$json.err" || exit 1
  if grep -q '"copies_served": *[1-9]' "$json" ||
     [ "$(grep -c 'write-combined pinned allocation' "$json.err")" != 1 ]; then
    echo "write-combined buffer served, or not said once: $(cat "$json.err")" >&2
    exit 1
  fi
  IBP_REGIONS="$IBP_REGIONS,wc=yes"
  export IBP_REGIONS
fi
IBP_STATS=$json "$exe" $mode 2>"$json.err" || { cat "$json.err" >&2; exit 1; }
if grep -q 'write-combined' "$json.err"; then
  echo "wc=yes, yet left to the driver: $(cat "$json.err")" >&2
  exit 1
fi
cat "$json.err" >&2
grep -q '"copies_served": *[1-9]' "$json" || {
  echo "no copy served: $(cat "$json" 2>/dev/null)" >&2
  exit 1
}
echo "core_linked: served"
