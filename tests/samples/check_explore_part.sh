# Usage: check_explore_part.sh LIBIBP WORK_DIR KV_OFFLOAD DECODE4X DECODE3XFAST
# A large copy is explored on a part of it (docs/ARCHITECTURE.md, "The
# gate"; ibp__choose_explore_part): KV prefix restores of 15 MiB from a
# region of 4 KiB tensors on h100-pcie5, whose staged route is guessed (its
# decode terms unmeasured) and explored early, from libibp's statistics;
# every run prints the same result line as IBP_DISABLE=1 (the part from the
# shadow and the rest by the driver's copy, beside it, arrive whole):
#   - on a simulated GPU whose decodes are 4x slower than the profile says
#     (DECODE4X, a truth profile): the staged route is explored on a part,
#     and no copy is staged whole after it (the part measured worse);
#   - decodes 3x faster (DECODE3XFAST): explored on a part, and then
#     whole copies are staged (what the part measured stands for them).
. "$(dirname "$0")/common.sh"
lib=$1 work=$2 kv=$3 decode4x=$4 decode3xfast=$5
mkdir -p "$work"
TMP_OUT=$work/part.out
TMP_ERR=$work/part.err
json=$work/part.json
args="--blocks 256 --prefill 240 --block-bytes 64K --steps 8 --window 16
  --warmup 2 --fetch prefix"
# part_run TRUTH: kv_offload under truth TRUTH, its result checked
# shellcheck disable=SC2086 # $args: the sample's arguments, split
part_run() {
  truth_run "$1" h100-pcie5 min=8M,tensor=4K,name=kv "$kv" $args
}

part_run "$decode4x"
checks=$((checks + 1))
[ "$(region copies_explored_part)" -ge 1 ] &&
  [ "$(region copies_staged)" -eq "$(region copies_explored_part)" ] ||
  fail "decodes 4x slower: not explored on a part, or staged whole: $(cat "$json")"

part_run "$decode3xfast"
checks=$((checks + 1))
[ "$(region copies_explored_part)" -ge 1 ] &&
  [ "$(region copies_staged)" -gt "$(region copies_explored_part)" ] ||
  fail "decodes 3x faster: not explored on a part, or never staged whole: $(cat "$json")"
finish
