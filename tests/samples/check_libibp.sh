# Usage: check_libibp.sh LIBIBP STATS_DIR NAME EXE ARGS...
# One sample build under LD_PRELOAD=libibp.so (the issue's A/B contract):
#   - with IBP_DISABLE=1 and with libibp on (IBP_REGIONS=$SAMPLE_REGIONS,
#     default min=1M,name=sample; IBP_WAIT_READY=1) the sample exits 0 and prints the same result line
#     (bytes, copies, checksum of everything that arrived on the device);
#   - the stats JSON of the libibp run shows copies served and space saved
#     (and, for kv_offload, tensors recompressed after being written);
#   - nothing but "[ibp]"-free output on stderr (no warning);
#   - the libibp run uses tests/preload/kernel_path.profile, under which the
#     gate serves every copy with the kernel; a third run under each
#     built-in profile (the gate choosing by its model) prints the same
#     result line too.
# Static-runtime builds reach the driver only through dlsym, so a served
# copy there proves the dlsym route.
. "$(dirname "$0")/common.sh"
lib=$1 stats_dir=$2 name=$3
shift 3
regions=${SAMPLE_REGIONS:-min=1M,name=sample}
mkdir -p "$stats_dir"
TMP_OUT=$stats_dir/$name.out
TMP_ERR=$stats_dir/$name.err
json=$stats_dir/$name.json
rm -f "$json"

IBP_DISABLE=1 LD_PRELOAD=$lib run "$@"
[ "$rc" -eq 0 ] || fail "IBP_DISABLE=1 run: exit $rc: $(cat "$TMP_ERR")"
base=$(head -n 1 "$TMP_OUT")

kernel_path=$(dirname "$0")/../preload/kernel_path.profile
IBP_REGIONS=$regions IBP_WAIT_READY=1 IBP_STATS=$json \
  IBP_PROFILE=$kernel_path LD_PRELOAD=$lib run "$@"
[ "$rc" -eq 0 ] || fail "libibp run: exit $rc: $(cat "$TMP_ERR")"
got=$(head -n 1 "$TMP_OUT")
[ "$got" = "$base" ] || fail "result differs: '$got' vs '$base'"
if grep -q '^\[ibp\]' "$TMP_ERR"; then
  fail "libibp warned: $(grep '^\[ibp\]' "$TMP_ERR")"
fi

checks=$((checks + 1))
if [ ! -s "$json" ]; then
  fail "no stats file $json"
else
  # one region object per line is not guaranteed: pull the numbers out
  served=$(grep -o '"copies_served": *[0-9]*' "$json" | head -n 1 | grep -o '[0-9]*$')
  saved=$(grep -o '"saved_fraction": *[0-9.eE+-]*' "$json" | head -n 1 | sed 's/.*: *//')
  [ "${served:-0}" -gt 0 ] || fail "no copy served: $(cat "$json")"
  awk -v s="${saved:-0}" 'BEGIN { exit !(s > 0) }' ||
    fail "saved_fraction not > 0: $(cat "$json")"
  # kv_offload appends blocks into the compressed cache: they must be
  # recompressed (preload/serve/prepare/refresh.c), not only served raw
  case $name in kv_offload*)
    again=$(grep -o '"tensors_recompressed": *[0-9]*' "$json" | head -n 1 | grep -o '[0-9]*$')
    [ "${again:-0}" -gt 0 ] || fail "no tensor recompressed: $(cat "$json")"
    echo "$name: recompressed=$again" ;;
  esac
  echo "$name: $got served=$served saved_fraction=$saved"
fi

# The gate on the built-in profiles: whatever it chooses, the same bytes.
for profile in a100-pcie4 h100-pcie5; do
  IBP_REGIONS=$regions IBP_WAIT_READY=1 IBP_PROFILE=$profile \
    LD_PRELOAD=$lib run "$@"
  [ "$rc" -eq 0 ] || fail "libibp run ($profile): exit $rc: $(cat "$TMP_ERR")"
  got=$(head -n 1 "$TMP_OUT")
  [ "$got" = "$base" ] || fail "result differs ($profile): '$got' vs '$base'"
done
finish
