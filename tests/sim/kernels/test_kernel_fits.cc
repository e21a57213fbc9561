// The decode step's helpers for chunks of 1 and 2 bytes, as the emulator
// runs them (kernels/ibp_decompress.cu, kernels/ibp_dev.h), against plain
// references: the left clamped funnel shift (ibp_dev_funnel_lc) for every
// amount 0..40, and a word pair read by the bits its first word drops
// (bits_pair_short) against the pair read by its second word's offset
// (bits_pair).
#include "ibp_decompress.cu"

#include <stdio.h>
#include <stdlib.h>

namespace {

int failures = 0;

void expect(bool ok, const char *what, unsigned a, unsigned b) {
  if (!ok && failures++ < 10)
    fprintf(stderr, "test_kernel_fits: %s (%u, %u)\n", what, a, b);
}

uint64_t rng = 0x9E3779B97F4A7C15ull;
uint32_t next() {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)rng;
}

} // namespace

int main() {
  for (unsigned k = 0; k < 100000; k++) {
    const uint32_t lo = next(), hi = next(), sh = k % 41;
    const uint64_t v = ((uint64_t)hi << 32) | lo;
    const uint32_t want = (uint32_t)((v << (sh < 32 ? sh : 32)) >> 32);
    expect(ibp_dev_funnel_lc(lo, hi, sh) == want, "funnel_lc", sh, k);
  }
  uint32_t sw[8];
  for (unsigned k = 0; k < 100000; k++) {
    for (unsigned w = 0; w < 8; w++)
      sw[w] = next();
    const uint32_t p = next() % 160, d = k % 33;
    uint32_t a0, b0, a1, b1;
    bits_pair(sw, p, 32 - d, a0, b0);
    bits_pair_short(sw, p, d, a1, b1);
    expect(a0 == a1 && b0 == b1, "bits_pair_short", p, d);
  }
  if (failures) {
    fprintf(stderr, "test_kernel_fits: %d failures\n", failures);
    return 1;
  }
  printf("test_kernel_fits: ok\n");
  return 0;
}
