#!/usr/bin/env bash
# bench/kernel_sass.sh -- a static look at the decompress kernel's machine
# code (docs/ARCHITECTURE.md "Counting a tensor's instructions";
# bench/README.md).
#
#   bench/kernel_sass.sh [--fetch] [build-dir]     (default build/release)
#
# Prints, for sm_90:
#
# 1. All in, per tensor size R and chunk width W (R in 256, 400, 1024,
#    4096, 65536; W in 1 and 8):
#      size=R width=W instructions_per_byte_all_in=X path=P loop_instructions_per_byte=L
#    X = the SASS warp-instructions of everything a copy of whole R-byte
#    tensors runs (kernel entry, walks, unit look-ups, staging, waits,
#    state saves and restores, decode entries, every step R needs, partial
#    ones too, the block path's pre-pass and rounds) / the bytes copied.
#    The kernel is built with its count marks (-DIBP_KERNEL_SASS_MARKS:
#    each IBP_MARK one PMTRIG instruction); bench/lib/sass_marks.py counts
#    the code each mark starts (every instruction reachable from it before
#    the next mark, branches not taken counted as taken, a copied mark as
#    its largest copy: an upper bound per pass; a loop without a mark fails
#    the count), and the emulator runs the same source on such a copy
#    (tests/sim/kernels/count_marks, from the build directory) and reports
#    how often each warp passed each mark.  P is the path tensors of R
#    bytes take (warp: a warp per tensor; block: R >= 16 KiB) and L its
#    full decode step's instructions / 512 (a step of two blocks a lane,
#    MARK_GROUP_TSTEP2: / 1024).  Then the same for regions
#    with the exponent stage (R in 1024 and 4096; the block path has no
#    stage, so none of 16 KiB or more):
#      stage=exp dtype=bf16 size=R width=W instructions_per_byte_all_in=X path=warp loop_instructions_per_byte=L
#    X all in as above, the IBP part and the stage's decode together; the
#    data bf16 values ~ N(0, 0.02^2), prepared as libibp prepares them
#    (count_marks.c's header; the codec picks W = 8 there).
# 2. The full-path loop of the unmarked build per chunk width W (the
#    figure this script printed before the all-in count):
#      width=W instructions_per_byte=X
#    X = one trip of the smallest loop with a warp scan and a 16-byte
#    global store (bench/lib/sass_loop.py) / 512, each width built on its
#    own (-DIBP_KERNEL_ONLY_WIDTH=W) with the fatbin's source and flags.
#    The deposit's stages are predicated on the region's S, so every stage
#    is counted: X holds for any S.
# 3. One line per kernel and architecture of the fatbin:
#      arch=sm_A kernel=K registers=N spill_stores=N spill_loads=N stack=N
#    from ptxas -v (cmake/nvcc_fatbin.cmake's build).
#
# Needs nvcc (/usr/local/cuda/bin or PATH) and nvdisasm, which CUDA 13's
# toolkit here lacks: $NVDISASM, nvdisasm on PATH, or the one --fetch put
# in ~/.cache/ibp (Debian's non-free nvidia-cuda-toolkit -- 11.8 on
# bookworm -- downloaded from the machine's own apt sources, with the
# non-free component added to a private copy of them, and unpacked there;
# nothing installed, the system's apt configuration untouched).  nvdisasm
# 11.8 reads CUDA 13's sm_90 cubins once their ELF ABI version and flags
# are rewritten to the old values (done on a copy).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/ibp

# The machine's apt sources (one-line .list and deb822 .sources files), as
# apt reads them, copied to dir $1 with "non-free" added to every entry
# that has the "main" component: the same archives, one component more.
private_sources() {
  local out=$1 etc f
  etc=$(apt-config shell E Dir::Etc/d | sed "s/^E='\(.*\)'$/\1/")
  etc=${etc:-/etc/apt/}
  mkdir -p "$out/parts"
  : >"$out/sources.list"
  [[ -f ${etc}sources.list ]] && add_non_free <"${etc}sources.list" \
    >"$out/sources.list"
  for f in "${etc}"sources.list.d/*.list "${etc}"sources.list.d/*.sources; do
    [[ -f $f ]] && add_non_free <"$f" >"$out/parts/$(basename "$f")"
  done
  return 0
}

add_non_free() {
  sed -E \
    -e '/^[[:space:]]*deb(-src)?[[:space:]]/{/[[:space:]]main([[:space:]]|$)/{/[[:space:]]non-free([[:space:]]|$)/!s/[[:space:]]*$/ non-free/}}' \
    -e '/^Components:/{/[[:space:]]main([[:space:]]|$)/{/[[:space:]]non-free([[:space:]]|$)/!s/[[:space:]]*$/ non-free/}}'
}

fetch_nvdisasm() {
  local tmp
  tmp=$(mktemp -d)
  mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$CACHE"
  private_sources "$tmp/etc"
  local opts=(-o "Dir::Etc::sourcelist=$tmp/etc/sources.list"
    -o "Dir::Etc::sourceparts=$tmp/etc/parts" -o "Dir::State::Lists=$tmp/lists"
    -o "Dir::Cache=$tmp/cache")
  apt-get "${opts[@]}" update >/dev/null
  (cd "$tmp" && apt-get "${opts[@]}" download nvidia-cuda-toolkit >/dev/null)
  dpkg -x "$tmp"/nvidia-cuda-toolkit_*.deb "$tmp/x"
  cp "$tmp/x/usr/bin/nvdisasm" "$CACHE/nvdisasm"
  rm -rf "$tmp"
}

if [[ ${1:-} == --fetch ]]; then
  fetch_nvdisasm
  shift
fi
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
NVDISASM=${NVDISASM:-$(command -v nvdisasm || echo "$CACHE/nvdisasm")}
[[ -x $NVCC ]] || { echo "kernel_sass: no nvcc" >&2; exit 2; }
[[ -x $NVDISASM ]] || {
  echo "kernel_sass: no nvdisasm (set NVDISASM, or run with --fetch)" >&2
  exit 2
}
build=${1:-build/release}
count=$build/tests/sim/kernels/count_marks
[[ -x $count ]] || {
  echo "kernel_sass: no $count (cmake --build --preset release" \
    "--target count_marks)" >&2
  exit 2
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The sm_90 cubin of the kernels for chunk width $1 (nvcc flags after $2)
# as nvdisasm -hex's listing in $2.
sass() {
  local w=$1 out=$2
  shift 2
  "$NVCC" -cubin -O3 -std=c++17 -arch=sm_90 -DIBP_KERNEL_ONLY_WIDTH="$w" "$@" \
    -Ikernels -o "$out.cubin" kernels/ibp_decompress.cu
  python3 - "$out.cubin" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
b[8] = 7                                   # ELF ABI version nvdisasm 11.8 knows
struct.pack_into("<I", b, 0x30, 0x005A055A)  # its e_flags for sm_90
open(sys.argv[1], "wb").write(b)
PY
  "$NVDISASM" -c -hex "$out.cubin" >"$out"
}

for w in 1 8; do
  sass "$w" "$work/m$w.sass" -DIBP_KERNEL_SASS_MARKS
  python3 bench/lib/sass_marks.py regions ibp_decompress "$work/m$w.sass" \
    >"$work/m$w.regions"
  "$count" --sizes 256,400,1024,4096,65536 --widths "$w" \
    --stage-sizes 1024,4096 >"$work/m$w.hits"
  python3 bench/lib/sass_marks.py combine "$work/m$w.regions" \
    "$work/m$w.hits" ${IBP_SASS_DETAIL:+--detail}
done

for w in 1 2 4 8; do
  sass "$w" "$work/w$w.sass"
  n=$(python3 bench/lib/sass_loop.py ibp_decompress "$work/w$w.sass" |
    sed -n 's/^instructions=\([0-9]*\).*/\1/p')
  awk -v w="$w" -v n="$n" \
    'BEGIN { printf "width=%s instructions_per_byte=%.3f\n", w, n / 512 }'
done

cmake -DNVCC="$NVCC" -DSRC=kernels/ibp_decompress.cu -DOUT="$work/k.fatbin" \
  -DREPORT="$work/ptxas.txt" -DINCLUDES=kernels \
  -P cmake/nvcc_fatbin.cmake >/dev/null 2>&1 || true
awk '
  /Compiling entry function/ {
    match($0, /function .[a-z_]+/); k = substr($0, RSTART + 10, RLENGTH - 10)
    match($0, /for .sm_[0-9]+/); a = substr($0, RSTART + 5, RLENGTH - 5)
  }
  /bytes stack frame/ { st = $1; ss = $5; sl = $9 }
  /Used [0-9]+ registers/ {
    match($0, /Used [0-9]+/); r = substr($0, RSTART + 5, RLENGTH - 5)
    printf "arch=%s kernel=%s registers=%s spill_stores=%s spill_loads=%s stack=%s\n", a, k, r, ss, sl, st
  }' "$work/ptxas.txt"
