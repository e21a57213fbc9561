#!/usr/bin/env bash
# bench/gpu_lease.sh -- the measured A/B for a short loan of a GPU machine
# with no network (bench/README.md, "On a GPU"): what bench/gpu.sh does,
# cut to fit minutes and to need nothing but a built tree.
#
#   bash bench/gpu_lease.sh [--build DIR] [--out DIR] [--runs N]
#                           [--budget SECONDS] [--data DIR]
#
#   --build DIR     a build with the samples on NVIDIA's runtime
#                   (cmake -DIBP_SAMPLES_RUNTIME=toolkit; default
#                   build/gpu); it is not rebuilt
#   --out DIR       results (default build/gpu-lease): lease.csv (one row
#                   per run: line, side, h2d_seconds, result line), the
#                   calibrated profile, each run's output and statistics
#   --runs N        runs of each A and B per line (default 3)
#   --budget S      start no new line after S seconds (default 300)
#   (the lines: generated data unless named; B's own environment after the
#   profile, so a line may steer the gate with another one)
#   --data DIR      where cnn_f32_to_bf16.bin lies, if anywhere (its line
#                   is skipped without it); every other line generates its
#                   own data
#   --only LIST     only these lines (ids, comma separated)
#   --sim           rehearse on the simulated GPU (build/release's samples,
#                   `ibp run --sim`; slow: use --only with a small line)
#
# Steps: nvidia-smi; `ibp calibrate` (the GPU's profile, which then steers
# libibp's gate; the built-in h100-pcie5 when calibration fails); then per
# line, N times: A (libibp loaded, IBP_DISABLE=1) and B (IBP_REGIONS, the
# calibrated profile, IBP_WAIT_READY=1), each the sample's own CUDA event
# timing of its copies after warm-up.  A result line (bytes, copies,
# checksum) that differs between A and B is reported as a FAILURE (and the
# exit status is 1); every sample also checks its device bytes itself.
# The last lines printed are the table: median A, median B, A/B.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
PROG=gpu_lease # for common.sh's messages
# shellcheck source=bench/lib/common.sh
. bench/lib/common.sh

build=build/gpu out=build/gpu-lease runs=3 budget=300 data=bench/data/out
only='' sim=() cal=()
argv_all="$*"
while [[ $# -gt 0 ]]; do
  case $1 in
    --build | --out | --runs | --budget | --data | --only)
      [[ $# -ge 2 ]] || die "$1 needs a value"
      case $1 in
        --build) build=$2 ;;
        --out) out=$2 ;;
        --runs) runs=$2 ;;
        --budget) budget=$2 ;;
        --data) data=$2 ;;
        --only) only=$2 ;;
      esac
      shift 2
      ;;
    --sim)
      sim=(--sim) cal=(--sim --quick)
      shift
      ;;
    -h | --help)
      sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument '$1'" ;;
  esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs must be a whole number >= 1"
[[ $budget =~ ^[0-9]+$ ]] || die "--budget must be a number of seconds"
ibp=$build/tools/ibp
[[ -x $ibp && -f $build/preload/libibp.so ]] || die "$build has no tools/ibp or preload/libibp.so"
mkdir -p "$out/runs"
start=$SECONDS
failed=0
if [[ ${#sim[@]} -eq 0 ]]; then
  gpu_present || die "nvidia-smi lists no GPU"
  log "GPU: $(nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader | head -n 1)"
  nvidia-smi >"$out/nvidia-smi.txt" 2>&1
fi

# 1. the GPU's profile
profile=h100-pcie5
if timeout 120 "$ibp" calibrate "${cal[@]}" --out "$out/profile.txt" 2>"$out/calibrate.err"; then
  profile=$(realpath "$out/profile.txt")
  log "calibrated: $out/profile.txt"
  grep -E '^(# decode|decode_gbps|sm_h2d|ce_h2d|launch_lat)' "$out/profile.txt" >&2
else
  log "ibp calibrate failed (exit $?; $out/calibrate.err): the gate uses h100-pcie5"
fi

# 2. the lines: id TAB sample TAB regions TAB args TAB B's extra env
rnd=$out/random_u8.bin
head -c 67108864 /dev/urandom >"$rnd"
emb=$'emb_gather\tmin=64M,tensor=400,name=emb\t--rows 341479 --dim 100 --batches 64 --batch-rows 2048 --warmup 4'
weights=$'weight_stream\tmin=128M,tensor=4K,name=weights\t--size 128M --dtype bf16 --layers 32 --epochs 60 --warmup 6'
prefix=$'kv_offload\tmin=64M,tensor=4K,name=kv\t--blocks 2048 --prefill 2000 --block-bytes 64K --steps 16 --window 32 --warmup 4 --fetch prefix'
# Most telling first (the budget cuts the last).  The *_staged / _zerocopy
# lines force one GPU path, the gate steered by the built-in h100-pcie5:
# what that path gives on this GPU.
lines=(
  "emb_glove400"$'\t'"$emb"$'\t'
  "weight_gen_bf16"$'\t'"$weights"$'\t'
  "kv_prefix"$'\t'"$prefix"$'\t'
  $'kv_blocks\tkv_blocks\tmin=16M,tensor=256,name=kv\t--blocks 1024 --slots 64 --steps 65 --window 16 --warmup 1\t'
  "weight_bf16_staged"$'\t'"$weights"$'\tIBP_PROFILE=h100-pcie5 IBP_PATH=staged'
  $'kv_window\tkv_offload\tmin=64M,tensor=4K,name=kv\t--blocks 1024 --prefill 1024 --block-bytes 64K --steps 256 --window 32 --warmup 16\t'
  $'feature_gen\tfeature_gather\tmin=64M,tensor=1K,name=features\t--rows 100000 --dim 256 --batches 32 --batch-nodes 1024 --fanout 10 --warmup 2\t'
  $'emb_random400\temb_gather\tmin=32M,tensor=400,name=emb\t--data '"$rnd"$' --row-bytes 400 --batches 64 --batch-rows 2048 --warmup 4\t'
  "emb_glove400_mprotect"$'\t'"$emb"$'\tIBP_TRACKER=mprotect'
  "emb_glove400_scanners4"$'\t'"$emb"$'\tIBP_SCANNERS=4'
  $'weight_random\tweight_stream\tmin=32M,tensor=4K,name=weights\t--data '"$rnd"$' --layers 16 --epochs 50 --warmup 5\t'
  "weight_bf16_zerocopy"$'\t'"$weights"$'\tIBP_PROFILE=h100-pcie5 IBP_PATH=zerocopy'
  "weight_bf16_staged132"$'\t'"$weights"$'\tIBP_PROFILE=h100-pcie5 IBP_PATH=staged IBP_MAX_SMS=132'
  "kv_prefix_staged132"$'\t'"$prefix"$'\tIBP_PROFILE=h100-pcie5 IBP_PATH=staged IBP_MAX_SMS=132'
)
if [[ -f $data/cnn_f32_to_bf16.bin ]]; then
  lines+=($'weight_cnn_bf16\tweight_stream\tmin='"$(stat -c %s "$data/cnn_f32_to_bf16.bin")"$',tensor=1024,name=weights\t--data '"$data"$'/cnn_f32_to_bf16.bin --layers 32 --epochs 50 --warmup 5\t')
fi

value() { sed -n "s/^$1=//p" "$2" | head -n 1; }
echo "line,side,run,h2d_seconds,exit,result" >"$out/lease.csv"
for line in "${lines[@]}"; do
  IFS=$'\t' read -r id sample reg args envs <<<"$line"
  [[ -z $only || ,$only, == *,$id,* ]] || continue
  if ((SECONDS - start > budget)); then
    log "budget of $budget s spent: $id not run"
    continue
  fi
  bin=$build/samples/$sample
  [[ -x $bin ]] || {
    log "$bin missing: $id not run"
    continue
  }
  read -r -a sargs <<<"$args"
  read -r -a benv <<<"${envs:-IBP_BATCH=1}"
  for k in $(seq 1 "$runs"); do
    p=$out/runs/$id.$k
    timeout 60 "$ibp" run "${sim[@]}" --disable -- "$bin" "${sargs[@]}" >"$p.A.out" 2>"$p.A.err"
    rc_a=$?
    timeout 60 env IBP_PROFILE="$profile" "${benv[@]}" IBP_WAIT_READY=1 "$ibp" run \
      "${sim[@]}" --regions "$reg" --stats "$p.B.json" -- "$bin" "${sargs[@]}" >"$p.B.out" 2>"$p.B.err"
    rc_b=$?
    la=$(head -n 1 "$p.A.out") lb=$(head -n 1 "$p.B.out")
    echo "$id,A,$k,$(value h2d_seconds "$p.A.out"),$rc_a,\"$la\"" >>"$out/lease.csv"
    echo "$id,B,$k,$(value h2d_seconds "$p.B.out"),$rc_b,\"$lb\"" >>"$out/lease.csv"
    if [[ $rc_a -ne 0 || $rc_b -ne 0 || $la != *": ok "* || $la != "$lb" ]]; then
      log "FAILED: $id run $k: A exit $rc_a '$la', B exit $rc_b '$lb' ($p.{A,B}.err)"
      tail -n 5 "$p.B.err" >&2
      failed=1
    fi
  done
  log "$id done ($((SECONDS - start)) s)"
done

# 3. the table (summary.csv) and what ran (meta.env)
{
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo ?)"
  echo "gpu=$([[ ${#sim[@]} -eq 0 ]] && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1 || echo simulated)"
  echo "profile=$([[ -f $profile ]] && sed -n 's/^name = //p' "$profile" || echo "$profile")"
  echo "runs=$runs"
  echo "command=bash bench/gpu_lease.sh${argv_all:+ $argv_all}"
} >"$out/meta.env"
python3 -B bench/lib/gpu_lease_collect.py "$out"
log "done in $((SECONDS - start)) s"
exit $failed
