# What the IBP_STATS report says of programs no sample covers
# (report_prog.c; docs/CONFIG.md, "Statistics", "Why a copy was the
# driver's"):
#   - a buffer freed while its compression runs is `freed-early`, also when
#     it was already published to the device, and the total row then saves
#     nothing (it kept nothing compressed); the summary line, of the copies,
#     nothing unless one was served from its published part (a run under
#     load served one: 66.9 % of the copies' bytes saved, the storage none);
#   - a pinned buffer only ever the target of device-to-host copies is
#     `unused`, and the advice about copies does not name it;
#   - regions of one rule are told apart (`w#1`, `w#2`), in both tables;
#   - each copy is counted once: a compact region's copy served in parts is
#     one served copy, not served and passed; the served and passed copies
#     add up to the program's copies;
#   - docs/CONFIG.md lists every reason of stats/reasons.def.
#   sh report.sh IBP GEN WORKDIR PRELOAD SIMDIR KERNEL_PROFILE PROG SRCDIR
# Skipped (77) without libibp.so or the simulated driver.
. "$(dirname "$0")/common.sh"
PRELOAD=$4
SIMDIR=$5
KERNEL_PROFILE=$6
PROG=$7
SRC=$8
for f in "$PRELOAD" "$SIMDIR/libcuda.so.1" "$PROG"; do
  [ -e "$f" ] || { echo "skipped: $f is not built"; exit 77; }
done
export IBP_PRELOAD_LIB="$PRELOAD" IBP_SIM_LIB_DIR="$SIMDIR"
unset IBP_REGIONS IBP_CONFIG IBP_STATS IBP_DISABLE IBP_DISCOVER IBP_PROFILE IBP_WAIT_READY LD_PRELOAD
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0"

# ---- freed while published and still being filled: freed-early -------------
# N copies 10 ms apart, then the 256 MiB buffer is freed: the runs whose
# region was ready for a copy (one the gate judged: "gated" or served) and
# not done ("ready*") freed it between publication and the end of its fill.
# (Under ASan on a busy machine the first chunk was published after 440 ms
# in every run once: the longer runs are tried too.)
hit=0
for n in 6 9 12 15 18 22 26 30 36 44 54 66 80 96 120 150 190; do
  run run --sim --regions 'min=2M,name=src;size=1M,name=dst' --stats 1 -- "$PROG" early 256 10 $n
  expect_eq "early $n: exit status" "$rc" 0
  grep -Eq "^\[ibp\] stats: region 'src': [0-9]+ copies: ([1-9][0-9]* served|.*gated)" "$ERR" || continue
  grep -Eq '^\[ibp\]   src +ready\* ' "$ERR" && continue
  hit=1
  checks=$((checks + 1))
  grep -Eq '^\[ibp\]   src +freed-early\* +256\.0 MiB .* - ' "$ERR" ||
    fail "freed after publication, before its fill ended: not 'freed-early*' with saved '-': $(cat "$ERR")"
  # the total row saves nothing (src kept nothing compressed, dst is
  # unused); the summary line, of the copies, nothing unless one was served
  total=$(sed -n 's/^\[ibp\]   total (2) .* \([0-9.]*%\) .*/\1/p' "$ERR")
  summary=$(sed -n 's/^\[ibp\] stats: requested .* saved \([0-9.]*%\)$/\1/p' "$ERR")
  expect_eq "early $n: total row's saved" "$total" "0.0%"
  grep -Eq "^\[ibp\] stats: region 'src': [0-9]+ copies: [1-9][0-9]* served" "$ERR" ||
    expect_eq "early $n: the summary line's saved, no copy served" "$summary" "0.0%"
  break
done
checks=$((checks + 1))
[ $hit = 1 ] || fail "no run freed the buffer between its publication and the end of its fill: $(cat "$ERR")"

# ---- a device-to-host target: unused, and no advice meant for copies ----------
checks=$((checks + 1))
grep -Eq '^\[ibp\]   dst +unused\* +1\.0 MiB ' "$ERR" &&
  grep -q "^\[ibp\] stats: 1 region (region 'dst') never the source of a host-to-device copy" "$ERR" &&
  ! grep -q "compression had not finished (region 'dst'" "$ERR" &&
  ! grep -Eq "^\[ibp\] stats: region 'dst'" "$ERR" ||
  fail "device-to-host target: not 'unused', or advice that does not apply: $(cat "$ERR")"

# ---- regions of one rule, told apart --------------------------------------------
IBP_WAIT_READY=1 IBP_PROFILE=$KERNEL_PROFILE run run --sim --regions 'min=1M,name=w' --stats 1 -- "$PROG" same 5
expect_eq "same: exit status" "$rc" 0
checks=$((checks + 1))
for k in 1 2 3 4 5; do
  grep -Eq "^\[ibp\]   w#$k +ready\* +2\.0 MiB " "$ERR" || fail "same: no row 'w#$k': $(cat "$ERR")"
done
# no two route rows alike (region, route)
dups=$(sed -n '/^\[ibp\] stats: routes/,$p' "$ERR" | grep '^\[ibp\]   ' | awk '{print $2, $3}' | sort | uniq -d)
expect_eq "same: route rows that repeat" "$dups" ""
checks=$((checks + 1))
grep -q "^\[ibp\] stats: all regions: 15 copies: 15 served (zerocopy 15), 0 to the driver$" "$ERR" ||
  fail "same: copies not counted once each: $(cat "$ERR")"

# ---- a compact region's copy served in parts: one served copy -----------------
IBP_WAIT_READY=1 IBP_PROFILE=$KERNEL_PROFILE run run --sim --regions 'min=1M,mode=compact,name=c' \
  --stats "$FILES/compact.json" -- "$PROG" compact
expect_eq "compact: exit status" "$rc" 0
checks=$((checks + 1))
python3 - "$FILES/compact.json" <<'PY' || fail "compact: copies not counted once: $(cat "$FILES/compact.json")"
import json, sys
r = json.load(open(sys.argv[1]))["regions"][0]
passed = sum(r["passed"].values())
# the program's two copies: the second served in parts
assert r["copies_served"] + passed == 2, (r["copies_served"], r["passed"])
assert r["copies_split"] == 1 and passed == 0, (r["copies_split"], r["passed"])
assert passed == r["copies_passthrough"] + r["copies_gated"] + r["copies_fallback"]
assert r["bytes_requested"] == 16 << 20, r["bytes_requested"]
PY

# ---- a 2D copy's rows: each counted once ------------------------------------
# (made before the region is ready: the first row is the driver's, not
# ready, and so are the rows after it)
run run --sim --regions 'min=1M,name=r' --stats "$FILES/rows.json" -- "$PROG" rows 16
expect_eq "rows: exit status" "$rc" 0
checks=$((checks + 1))
python3 - "$FILES/rows.json" <<'PY' || fail "rows: a 2D copy's rows not counted once each: $(cat "$FILES/rows.json")"
import json, sys
r = json.load(open(sys.argv[1]))["regions"][0]
passed = sum(r["passed"].values())
assert r["copies_served"] + passed == 16, (r["copies_served"], r["passed"])
assert r["passed"]["row-after"] == 16 - 1 - r["copies_served"], r["passed"]
PY

# ---- every reason documented ---------------------------------------------------
for reason in $(sed -n 's/^IBP_REASON([A-Z_]*, "\([a-z-]*\)")$/\1/p' "$SRC/preload/stats/reasons.def"); do
  checks=$((checks + 1))
  grep -q "^| \`$reason\` |" "$SRC/docs/CONFIG.md" || fail "docs/CONFIG.md does not list the reason '$reason'"
done

finish
