#!/usr/bin/env bash
# bench/kernel_sass.sh -- a static look at the decompress kernel's machine
# code (docs/ARCHITECTURE.md "The decode plan"; bench/README.md).
#
#   bench/kernel_sass.sh [--fetch]
#
# Prints, for sm_90 and each chunk width W, one line
#   width=W instructions_per_byte=X
# X = the SASS warp-instructions of one trip through the kernel's full-path
# decode loop (32 lanes x 16 bytes = 512 output bytes) / 512.  Each width
# is built on its own (-DIBP_KERNEL_ONLY_WIDTH=W, the same source and
# flags as the fatbin) so that the kernel holds one such loop;
# bench/lib/sass_loop.py finds it in the control-flow graph (the smallest
# loop with a warp scan and a 16-byte global store) and counts it.  The deposit's stages are
# predicated on the region's S, so every stage is counted: X holds for
# any S.  Then one line per kernel and architecture of the fatbin:
#   arch=sm_A kernel=K registers=N spill_stores=N spill_loads=N stack=N
# from ptxas -v (cmake/nvcc_fatbin.cmake's build).
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

[[ ${1:-} == --fetch ]] && fetch_nvdisasm
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
NVDISASM=${NVDISASM:-$(command -v nvdisasm || echo "$CACHE/nvdisasm")}
[[ -x $NVCC ]] || { echo "kernel_sass: no nvcc" >&2; exit 2; }
[[ -x $NVDISASM ]] || {
  echo "kernel_sass: no nvdisasm (set NVDISASM, or run with --fetch)" >&2
  exit 2
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for w in 1 2 4 8; do
  "$NVCC" -cubin -O3 -std=c++17 -arch=sm_90 -DIBP_KERNEL_ONLY_WIDTH=$w \
    -Ikernels -o "$work/w$w.cubin" kernels/ibp_decompress.cu
  python3 - "$work/w$w.cubin" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
b[8] = 7                                   # ELF ABI version nvdisasm 11.8 knows
struct.pack_into("<I", b, 0x30, 0x005A055A)  # its e_flags for sm_90
open(sys.argv[1], "wb").write(b)
PY
  "$NVDISASM" -c -hex "$work/w$w.cubin" >"$work/w$w.sass"
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
