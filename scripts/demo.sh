#!/usr/bin/env bash
# README command (1), the A/B demo: what libibp saves on host-to-GPU copies,
# without changing the program that makes them.
#
# samples/weight_stream streams the weights of an LLM-like model (bf16, one
# pinned buffer, layer by layer on two streams) to the GPU and checks every
# byte that arrives.  It runs through `ibp run` with libibp loaded but
# disabled (A, the baseline), and with libibp serving its weight buffer
# compressed (B, IBP_REGIONS='min=64M,name=weights'), where libibp's gate
# models the decompress kernel faster than the driver's copy.  The demo
# prints both results and whether they match, the time of the copies (the
# sample's CUDA events), what the gate chose (copies served, left to the
# driver, passed through) and the bytes that crossed PCIe, from libibp's
# statistics; and what `ibp analyze` predicts for the same bytes.
#
# On the real GPU when nvidia-smi finds one (times measured), else on the
# simulated GPU (tests/sim): its CUDA events read a virtual clock, so the
# times there are MODELLED on a device cost profile (docs/PROFILE.md), and
# A and B run once per built-in profile (a100-pcie4, h100-pcie5; IBP_PROFILE
# set: that one only).  The emulator's own speed is never shown.
#
#   bash scripts/demo.sh [--real-data]
#
#   --real-data   also build a small real data set from Debian/npm packages
#                 (bench/data/build.sh --small) and run `ibp analyze` on it
#
# Environment: DEMO_SIZE, DEMO_LAYERS, DEMO_EPOCHS (weight_stream's --size,
# --layers, --epochs; default 1G/32/10 on a GPU, 64M/16/4 simulated),
# IBP_PROFILE (one profile instead of both built-ins),
# DEMO_BUILD_DIR (default build/release, the release preset's), DEMO_BUILD=0
# (skip the build).  Files go to build/demo/.
# What it installs when missing (apt-get, sudo when not root): the build
# group of scripts/deps.sh (IBP_NO_INSTALL=1: only say what is missing).
# Exit status: 0 when every run succeeds, their outputs match and copies
# reached libibp's region (served, or left to the driver by the gate); 1
# otherwise (a failed build or install included); 2 for a bad argument.
set -eEuo pipefail
trap 'echo "demo.sh: failed (line $LINENO)" >&2; exit 1' ERR
cd "$(dirname "$0")/.."

real_data=0
for arg in "$@"; do
  case $arg in
  --real-data) real_data=1 ;;
  -h | --help)
    sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'
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
# scripts/deps.sh: the one list of Debian packages (its build group).
# shellcheck source=scripts/deps.sh
. scripts/deps.sh
ibp_deps_install build || die "cannot build without them"
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
  size=${DEMO_SIZE:-64M} layers=${DEMO_LAYERS:-16} epochs=${DEMO_EPOCHS:-4}
  targets=(ibp ibp_preload weight_stream simcuda simcudart)
fi

build=${DEMO_BUILD_DIR:-build/release}
jobs=$(nproc 2>/dev/null || echo 2)
if [ "${DEMO_BUILD:-1}" != 0 ]; then
  echo "building ($build, samples on the $runtime runtime) ..."
  if [ -z "${DEMO_BUILD_DIR:-}" ]; then
    cmake --preset release -DIBP_SAMPLES_RUNTIME=$runtime >/dev/null ||
      die "cmake could not configure $build (above: why)"
    cmake --build --preset release -j "$jobs" --target "${targets[@]}" >/dev/null ||
      die "the build failed (above: why)"
  else
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DIBP_SAMPLES_RUNTIME=$runtime >/dev/null ||
      die "cmake could not configure $build (above: why)"
    cmake --build "$build" -j "$jobs" --target "${targets[@]}" >/dev/null ||
      die "the build failed (above: why)"
  fi
fi
ibp=$build/tools/ibp
ws=$build/samples/weight_stream
if [ ! -x "$ibp" ] || [ ! -x "$ws" ]; then
  die "$ibp or $ws is missing: build them first"
fi

demo=build/demo
mkdir -p "$demo"
rm -f "$demo"/stats*.json "$demo"/stats*.tsv "$demo"/baseline*.txt "$demo"/ibp*.txt \
  "$demo/weights.bin"
# The first pass is not timed: it includes libibp's compression of the
# region (IBP_WAIT_READY=1 makes the first copy wait for it).
warmup=1
[ "$epochs" -gt 1 ] || warmup=0
args=(--size "$size" --layers "$layers" --epochs "$epochs" --warmup "$warmup")
rule='min=64M,name=weights'

# stats_tsv FILE: one line per region of libibp's JSON statistics (the
# objects with "name" and "bytes_requested" members: those of "regions",
# not "totals"):
#   name bytes tensors saved_fraction copies_served copies_gated
#   copies_passthrough copies_fallback bytes_requested bytes_read_pcie
#   compress_seconds state
fields="name bytes tensors saved_fraction copies_served copies_gated copies_passthrough copies_fallback bytes_requested bytes_read_pcie compress_seconds state copies_staged"
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

value() { sed -n "s/^$1=//p" "$2"; }
# timing FILE: "N.NNN ms (G GB/s)" from the sample's event timing.
timing() {
  awk -v s="$(value h2d_seconds "$1")" -v g="$(value throughput_gbps "$1")" \
    'BEGIN { if (s == "") print "no timing"; else printf "%.3f ms of copies (%s GB/s)", 1e3 * s, g }'
}

# region_report TSV: what libibp did with the region (from stats_tsv);
# fails when no copy reached it.
region_report() {
  awk -F '\t' '
    function mib(b) { return sprintf("%.1f MiB", b / 1048576) }
    {
      printf "  region %s: %s, %s tensors, space saved %.1f%%, compressed in %.3f s, %s\n",
        $1, mib($2), $3, 100 * $4, $11, $12
      printf "  gate: %s copies served by the decompress kernel (%s of them staged:\n", $5, $13
      printf "        the copy engine moved the compressed bytes), %s left to the driver\n", $6
      printf "        (its copy modelled faster), %s passed through, %s fell back\n", $7, $8
      req += $9; pcie += $10; seen += $5 + $6 + $7 + $8
    }
    END {
      if (NR == 0) exit 1
      if (req > 0)
        printf "  served copies: %.1f MiB requested, %.1f MiB over PCIe (%.1f%% saved)\n",
          req / 1048576, pcie / 1048576, 100 * (req - pcie) / req
      if (seen == 0) { print "  no copy reached the region"; exit 1 }
    }' "$1"
}

# ---- the runs: A and B under each profile --------------------------------------------
# On the simulated GPU the samples' CUDA events read its virtual clock: the
# times are modelled on a device cost profile (IBP_PROFILE; docs/PROFILE.md),
# the same profile libibp's gate decides with.  On a GPU they are measured,
# and the profile only steers the gate (none set: libibp picks the built-in
# the GPU's name names).
if [ -n "${IBP_PROFILE:-}" ]; then
  profiles=("$IBP_PROFILE")
elif [ "$runtime" = sim ]; then
  profiles=(a100-pcie4 h100-pcie5)
else
  profiles=("")
fi
echo
echo "== weight_stream ${args[*]} on the $backend"
if [ "$runtime" = sim ]; then
  echo "   times: MODELLED by the simulated GPU's virtual clock on each profile"
  echo "   (docs/PROFILE.md), not the emulator's speed; the first pass is not timed"
else
  echo "   times: measured (CUDA events); the first pass is not timed"
fi
status=0 first_line=''
for prof in "${profiles[@]}"; do
  tag=${prof:+.${prof##*/}}
  if [ "$runtime" = sim ]; then
    echo
    echo "-- modelled on profile $prof"
  else
    echo
    gate_on=''
    [ -z "$prof" ] || gate_on=" (the gate of libibp on profile $prof)"
    echo "-- measured$gate_on"
  fi
  penv=()
  [ -z "$prof" ] || penv=(IBP_PROFILE="$prof")
  rc_a=0 rc_b=0
  env "${penv[@]}" "$ibp" run "${sim_flag[@]}" --disable -- "$ws" "${args[@]}" \
    >"$demo/baseline$tag.txt" || rc_a=$?
  env "${penv[@]}" IBP_WAIT_READY=1 "$ibp" run "${sim_flag[@]}" --regions "$rule" \
    --stats "$demo/stats$tag.json" -- "$ws" "${args[@]}" >"$demo/ibp$tag.txt" || rc_b=$?
  line_a=$(head -n 1 "$demo/baseline$tag.txt")
  line_b=$(head -n 1 "$demo/ibp$tag.txt")
  printf '  A, libibp disabled: exit %s, %s\n' "$rc_a" "$line_a"
  printf '     %s\n' "$(timing "$demo/baseline$tag.txt")"
  printf '  B, libibp on:       exit %s, %s\n' "$rc_b" "$line_b"
  printf '     %s' "$(timing "$demo/ibp$tag.txt")"
  awk -v a="$(value h2d_seconds "$demo/baseline$tag.txt")" \
    -v b="$(value h2d_seconds "$demo/ibp$tag.txt")" \
    'BEGIN { if (a > 0 && b > 0) printf ", speedup A/B %.3f", a / b; print "" }'
  if [ "$rc_a" != 0 ] || [ "$rc_b" != 0 ] || [ -z "$line_a" ] || [ "$line_a" != "$line_b" ] ||
    { [ -n "$first_line" ] && [ "$line_a" != "$first_line" ]; }; then
    echo "  outputs match: NO"
    status=1
  else
    echo "  outputs match: yes"
  fi
  first_line=${first_line:-$line_a}
  if [ ! -s "$demo/stats$tag.json" ]; then
    echo "  libibp wrote no statistics"
    status=1
    continue
  fi
  stats_tsv "$demo/stats$tag.json" >"$demo/stats$tag.tsv" || true
  region_report "$demo/stats$tag.tsv" || {
    [ -s "$demo/stats$tag.tsv" ] || echo "  no region in libibp's statistics"
    status=1
  }
done

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
