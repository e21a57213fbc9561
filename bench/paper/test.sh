#!/usr/bin/env bash
# Tests for paper_ibp: the hand-computed example from README.md, argument
# errors, and the fast sweep against the literal (--naive) definition on
# generated files with biased bits.
#   bench/paper/test.sh [PATH_TO_paper_ibp]
# Without an argument it builds paper_ibp into a temporary directory.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bin=${1:-}
if [[ -z $bin ]]; then
  bin=$tmp/paper_ibp
  ${CC:-cc} -O2 -std=c11 -Wall -Wextra -Werror -o "$bin" "$here/paper_ibp.c"
fi

passed=0 failed=0
check() { # name, expected, actual
  if [[ $2 == "$3" ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    printf 'FAIL %s\n  expected: %s\n  actual:   %s\n' "$1" "$2" "$3"
  fi
}

# --- the worked example of README.md: 4 tensors of 2 bytes (+1 tail byte)
printf '\x0f\x00\x0f\x01\x0e\x00\x8f\x00\xff' >"$tmp/example.bin"
check "example json" \
  '{"tensor_bytes":2,"tensors":4,"best_threshold":0.75,"best_chunk_bytes":1,"saved_fraction":0.500000,"compressed_bytes":4}' \
  "$("$bin" "$tmp/example.bin" --tensor-bytes 2 --json)"
table=$("$bin" "$tmp/example.bin" --tensor-bytes 2)
check "example T=0.74" "0.74    0.1250   0.1250" "$(grep '^0.74 ' <<<"$table")"
check "example T=0.75" "0.75    0.5000   0.5000" "$(grep '^0.75 ' <<<"$table")"
check "example T=0.99" "0.99    0.5000   0.5000" "$(grep '^0.99 ' <<<"$table")"
check "example R=1 json" \
  '{"tensor_bytes":1,"tensors":9,"best_threshold":0.50,"best_chunk_bytes":1,"saved_fraction":0.000000,"compressed_bytes":9}' \
  "$("$bin" "$tmp/example.bin" --tensor-bytes 1 --json)"

# --- argument and input errors exit non-zero
for args in "" "--tensor-bytes 2" "$tmp/example.bin" \
  "$tmp/example.bin --tensor-bytes 0" "$tmp/example.bin --tensor-bytes x" \
  "$tmp/example.bin --tensor-bytes 65537" "$tmp/example.bin --tensor-bytes 10" \
  "$tmp/missing.bin --tensor-bytes 2" "$tmp/example.bin --tensor-bytes 2 --bogus"; do
  # shellcheck disable=SC2086
  if "$bin" $args >/dev/null 2>&1; then rc=0; else rc=$?; fi
  check "error exit for '$args'" nonzero "$([[ $rc -ne 0 ]] && echo nonzero || echo zero)"
done

# --- fast sweep == literal definition on generated data
# Each bit position flips away from a per-position base value with one of a
# few probabilities, so every threshold band and partial chunk fit occurs.
gen() { # tensors, tensor_bytes, seed, file
  awk -v n="$1" -v r="$2" -v seed="$3" 'BEGIN {
    srand(seed); split("0 0.01 0.04 0.12 0.22 0.3 0.4 0.5", pr, " ")
    for (i = 0; i < n; i++) {
      s = ""
      for (p = 0; p < r; p++) {
        x = (p * 37 + 11) % 256
        for (k = 0; k < 8; k++)
          if (rand() < pr[1 + (p * 8 + k) % 8]) {
            b = 2 ^ k
            x += (int(x / b) % 2) ? -b : b
          }
        s = s sprintf("\\%03o", x)
      }
      print s
    }
  }' | while IFS= read -r line; do printf '%b' "$line"; done >"$4"
}
for spec in "300 1 1" "257 3 2" "400 8 3" "200 24 4" "120 64 5" "64 200 6" "3 16 7"; do
  read -r n r seed <<<"$spec"
  gen "$n" "$r" "$seed" "$tmp/gen.bin"
  fast=$("$bin" "$tmp/gen.bin" --tensor-bytes "$r")
  naive=$("$bin" "$tmp/gen.bin" --tensor-bytes "$r" --naive)
  check "fast == naive (n=$n R=$r)" "$naive" "$fast"
  one=$("$bin" "$tmp/gen.bin" --tensor-bytes "$r" --threads 1)
  check "1 thread == 2 threads (n=$n R=$r)" "$fast" "$one"
done

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
