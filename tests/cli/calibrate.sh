# `ibp calibrate` on the simulated GPU: it recovers the profile the
# simulated GPU's clock runs on (IBP_PROFILE=TARGET) within 5 % for every
# parameter it measures, keeps the base profile's values for the others,
# and writes a profile `ibp profile` reads; usage errors.
#   sh calibrate.sh IBP GEN WORKDIR SIMDIR TARGET
# SIMDIR: this build's sim/lib; without its libcuda.so.1, or in an ibp
# built without cuda.h and nvcc, the test is skipped (77).
. "$(dirname "$0")/common.sh"
SIMDIR=$4
TARGET=$5
# The running decompress kernels' build (kernels/ibp_kernels.h).
BUILD=$(sed -n 's/^#define IBP_DECODER_BUILD "\(.*\)"$/\1/p' \
  "$(dirname "$0")/../../kernels/ibp_kernels.h")
[ -n "$BUILD" ] || fail "no IBP_DECODER_BUILD in kernels/ibp_kernels.h"

# The simulated GPU reports 132 SMs whatever its profile says, and its
# clock runs a kernel on the profile's: TARGET has 132, so that the decode
# rate, which is per SM, can be recovered.  runtime_call_us, ibp_hold_us,
# batch_deadline_us and sector_bytes are not measured at all.
MEASURED="ce_h2d_gbps ce_d2h_gbps ce_setup_us ce_batch_setup_us
driver_copy_call_us driver_launch_call_us driver_call_us launch_latency_us sm_h2d_gbps
sm_read_rtt_us sm_inflight_bytes dram_gbps decode_gbps_per_sm decode_tensor_us decode_h2d_gbps"
KEPT="runtime_call_us ibp_hold_us batch_deadline_us sector_bytes
stage_decode_gbps_per_sm stage_tensor_us"

# value KEY FILE: the value of KEY in a profile file.
value() {
  sed -n "s/^$1 = //p" "$2"
}

# ---- help, usage errors -----------------------------------------------------
expect_ok calibrate --help
grep -q '^Usage: ibp calibrate \[options\]' "$OUT" || fail "ibp calibrate --help: no usage line"
expect_ok --help
grep -q '^  calibrate ' "$OUT" || fail "ibp --help does not list calibrate"
expect_error 2 "ibp: unexpected argument 'x' (see 'ibp calibrate --help')" calibrate x
expect_error 2 "ibp: unknown option '--frob' (see 'ibp calibrate --help')" calibrate --frob
expect_error 2 "ibp: --device: 'one' is not a device number (see 'ibp calibrate --help')" \
  calibrate --device one
expect_error 2 "ibp: --name: 'a b' is not a profile name (1 to 63 printable characters, no spaces) (see 'ibp calibrate --help')" \
  calibrate --name 'a b'
expect_error 2 "ibp: option --sim takes no value (see 'ibp calibrate --help')" calibrate --sim=1

# ---- on the simulated GPU ---------------------------------------------------
if [ ! -e "$SIMDIR/libcuda.so.1" ]; then
  echo "no simulated driver in $SIMDIR: skipped"
  exit 77
fi
export IBP_SIM_LIB_DIR=$SIMDIR IBP_PROFILE=$TARGET
run calibrate --quick --sim --out cal.prof
if [ "$rc" -ne 0 ] && grep -q 'cannot calibrate' "$ERR"; then
  echo "ibp was built without calibration: skipped"
  exit 77
fi
expect_eq "exit status of ibp calibrate --quick --sim" "$rc" 0
# The base (a100-pcie4, below) has decode terms of another build: said
# once, before anything is measured.
expect_eq "stderr of ibp calibrate (its progress)" "$(sed 's/ (simulated.*//' "$ERR")" \
  "ibp calibrate: a100-pcie4: decode terms unmeasured for this decoder (its decoder_build: word-pdep; this decoder: $BUILD): re-measuring
ibp calibrate: [1/4] the driver's calls
ibp calibrate: [2/4] the copy engine's copies
ibp calibrate: [3/4] SM reads of host memory
ibp calibrate: [4/4] the decompress kernel"
expect_eq "stdout of ibp calibrate --out" "$(cat "$OUT")" ""

# A valid profile, which reads back to itself.
expect_ok profile ./cal.prof
grep -v '^#' cal.prof | grep . >body.prof
grep -v '^#' "$OUT" | grep . >back.prof
cmp -s body.prof back.prof || fail "ibp profile cal.prof does not read back the same values"

# Every measured parameter within 5 % of the simulated GPU's.
for key in $MEASURED; do
  got=$(value "$key" cal.prof)
  want=$(value "$key" "$TARGET")
  expect_true "$key: measured $got, configured $want" \
    "\"$got\" != \"\" && $got >= 0.95 * $want && $got <= 1.05 * $want"
done
# A batch's later entries closer still: the simulated clock charges each
# exactly, and with N entries (50 with --quick) an off-by-one divisor
# ((time - ce_setup_us) / N for / (N - 1)) is 1/N off.
got=$(value ce_batch_setup_us cal.prof)
want=$(value ce_batch_setup_us "$TARGET")
expect_true "ce_batch_setup_us: measured $got, configured $want (0.5 %)" \
  "\"$got\" != \"\" && $got >= 0.995 * $want && $got <= 1.005 * $want"
# The rest from the base: the built-in the device's name names, else
# a100-pcie4 (the simulated GPU's name names none).
expect_ok profile a100-pcie4
for key in $KEPT; do
  expect_eq "$key (kept)" "$(value "$key" cal.prof)" "$(value "$key" "$OUT")"
done
expect_eq "sms (the device's)" "$(value sms cal.prof)" 132
expect_eq "name" "$(value name cal.prof)" "calibrated-libibp-simulated-GPU-sm_90"
# Its decode terms are this decoder's.
expect_eq "decoder_build (this decoder's)" "$(value decoder_build cal.prof)" "$BUILD"

# The header says where it was measured, and what was measured and kept.
grep -q '^# device 0: libibp simulated GPU (sm_90) (the simulated GPU)$' cal.prof ||
  fail "header: no device line"
grep -q "^# measured: $(echo $MEASURED) sms\$" cal.prof || fail "header: no measured line"
grep -q "^# kept from a100-pcie4: $(echo $KEPT)\$" cal.prof || fail "header: no kept line"

# Without --sim the driver LD_LIBRARY_PATH finds is measured; --base and
# --name; stdout.
LD_LIBRARY_PATH=$SIMDIR run calibrate --quick --base h100-pcie5 --name mine
expect_eq "exit status of ibp calibrate --base --name" "$rc" 0
expect_eq "stderr of ibp calibrate --base --name: progress and one line" \
  "$(grep -v '^ibp calibrate: \[[1-4]/4\] ' "$ERR")" \
  "ibp calibrate: h100-pcie5: decode terms unmeasured for this decoder (its decoder_build: word-pdep; this decoder: $BUILD): re-measuring"
expect_eq "decoder_build (--base h100-pcie5)" "$(value decoder_build "$OUT")" "$BUILD"
expect_eq "name (--name)" "$(value name "$OUT")" mine
expect_eq "sector_bytes (--base h100-pcie5)" "$(value sector_bytes "$OUT")" 32
expect_eq "runtime_call_us (--base h100-pcie5)" "$(value runtime_call_us "$OUT")" 0.3
expect_eq "ce_h2d_gbps (without --sim)" "$(value ce_h2d_gbps "$OUT")" "$(value ce_h2d_gbps cal.prof)"
grep -q '^# kept from h100-pcie5:' "$OUT" || fail "header: not kept from h100-pcie5"

# A base measured with this decoder: nothing to say.  A base without the
# key (TARGET, written before it): unknown, said.
LD_LIBRARY_PATH=$SIMDIR run calibrate --quick --base ./cal.prof
expect_eq "exit status of ibp calibrate --base cal.prof" "$rc" 0
expect_eq "stderr of ibp calibrate --base cal.prof: progress only" \
  "$(grep -cv '^ibp calibrate: \[[1-4]/4\] ' "$ERR")" 0
LD_LIBRARY_PATH=$SIMDIR run calibrate --quick --base "$TARGET"
expect_eq "stderr of ibp calibrate --base TARGET: its line" \
  "$(grep -v '^ibp calibrate: \[[1-4]/4\] ' "$ERR")" \
  "ibp calibrate: $TARGET: decode terms unmeasured for this decoder (its decoder_build: unknown; this decoder: $BUILD): re-measuring"
expect_eq "decoder_build (--base TARGET)" "$(value decoder_build "$OUT")" "$BUILD"

# Errors: a base that cannot be read, a device that does not exist.
expect_error 1 "ibp: nosuch: not a built-in profile, and cannot be opened: No such file or directory" \
  calibrate --quick --sim --base nosuch
expect_error 1 "ibp calibrate: no device 3 (the driver sees 1)" calibrate --quick --sim --device 3

rm -f cal.prof body.prof back.prof
expect_files
finish
