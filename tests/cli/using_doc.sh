# docs/USING.md runs as written: every ```sh block, in order, from a
# directory where build/release is this build (a symbolic link), on the
# simulated GPU.  Also: the discovery report and the statistics line the
# guide quotes are what those commands print.
#   sh using_doc.sh IBP GEN WORKDIR BUILD_DIR USING_MD
# Skipped (77) without libibp.so, the simulated driver or the samples.
. "$(dirname "$0")/common.sh"
BUILD=$4
DOC=$5
for f in "$BUILD/preload/libibp.so" "$BUILD/sim/lib/libcuda.so.1" \
  "$BUILD/samples/weight_stream" "$BUILD/samples/emb_gather"; do
  [ -e "$f" ] || { echo "skipped: $f is not built"; exit 77; }
done
unset IBP_REGIONS IBP_CONFIG IBP_STATS IBP_DISABLE IBP_DISCOVER IBP_PROFILE \
  IBP_WAIT_READY IBP_PRELOAD_LIB IBP_SIM_LIB_DIR LD_PRELOAD RANK LOCAL_RANK
# (A sanitizer build's libibp.so brings the ASan runtime along.)
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0"

mkdir -p "$WORK/blocks" build && ln -s "$BUILD" build/release || exit 1
# one file per ```sh block; the first ```text block that quotes a
# discovery report goes to quoted.txt
awk -v dir="$WORK/blocks" '
  /^ *```sh$/ { n++; f = sprintf("%s/%02d.sh", dir, n); inblock = 1; next }
  /^ *```text$/ { text = 1; tl = 0; next }
  /^ *```/ { inblock = 0; text = 0; next }
  inblock { print > f }
  text && tl == 0 && /^\[ibp\] discover:/ && !quoted { quoted = 1; tq = 1 }
  text && tq { print > (dir "/quoted.txt") }
  text { tl++ }
  !text { tq = 0 }
' "$DOC"
nblocks=$(ls "$WORK/blocks"/*.sh 2>/dev/null | wc -l)
expect_true "sh blocks in docs/USING.md" "$nblocks >= 8"

: >"$WORK/all.err"
for b in "$WORK/blocks"/*.sh; do
  checks=$((checks + 1))
  if ! sh -e "$b" >"$OUT" 2>"$ERR"; then
    fail "docs/USING.md block $(basename "$b" .sh) failed:
$(cat "$b")
--- stderr:
$(cat "$ERR")"
  fi
  cat "$ERR" >>"$WORK/all.err"
done

# what the guide quotes
checks=$((checks + 1))
if [ ! -s "$WORK/blocks/quoted.txt" ]; then
  fail "no quoted discovery report found in docs/USING.md"
else
  while IFS= read -r line; do
    grep -qxF -- "$line" "$WORK/all.err" || fail "docs/USING.md quotes a line no command printed: $line"
  done <"$WORK/blocks/quoted.txt"
fi
checks=$((checks + 1))
# one of the statistics' summaries the guide quotes, as its command
# printed it (which depends on how soon the region went quiet: the guide
# says why)
# (the first two: the third is IBP_TRACK_QUIET=0's)
summaries=$(grep -o 'requested [0-9.]* MiB, read over PCIe [0-9.]* MiB, saved [0-9.]*%' "$DOC" | head -n 2)
printed=
old_ifs=$IFS
IFS='
'
for summary in $summaries; do
  grep -qF -- "$summary" "$WORK/all.err" && printed=1
done
IFS=$old_ifs
[ -n "$printed" ] ||
  fail "docs/USING.md quotes no statistics summary its command printed: $summaries"

# the blocks clean up after themselves
rm build/release && rmdir build
expect_files
finish
