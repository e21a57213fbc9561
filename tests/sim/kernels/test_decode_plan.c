/*
 * The decode plan (kernels/decode_plan.c) against a bit-by-bit deposit:
 * random Masks of every chunk width and kind of sparsity (top bits, runs,
 * scattered, all or none invariant) and R from 1 to 64 B.  Every 32-bit
 * word of the plan, applied as the kernel applies it (stages S-1 down to 0,
 * then the fit select), must give for random payload bits exactly what
 * depositing them into the kept bits of each chunk segment gives; S must
 * be the fewest stages that work (S - 1 is refused); inv and short must
 * count what a fitting and a non-fitting chunk do not carry, and the bit
 * planes must hold each chunk's invariant bits.
 * IBP_TEST_ITERATIONS = Masks (default 2 x 10^4).
 */
#include <stdio.h>
#include <string.h>

#include "ibp_kernels.h"
#include "test_util.h"

#define MAX_R 64u

/* Bit-by-bit deposit of the low bits of x into the set bits of keep. */
static uint32_t deposit(uint32_t x, uint32_t keep) {
  uint32_t out = 0;
  for (unsigned t = 0, r = 0; t < 32; t++)
    if ((keep >> t) & 1)
      out |= ((x >> r++) & 1) << t;
  return out;
}

/* The kernel's staged deposit of one word (kernels/ibp_decompress.cu). */
static uint32_t staged(uint32_t e, const uint32_t *stage, unsigned S) {
  for (int s = (int)S - 1; s >= 0; s--)
    e = (e & ~stage[s]) | ((e << (1u << s)) & stage[s]);
  return e;
}

/* The sum of v's four bytes. */
static unsigned byte_total(uint32_t v) {
  return (v & 0xFF) + ((v >> 8) & 0xFF) + ((v >> 16) & 0xFF) + (v >> 24);
}

static void random_mask(rng *r, uint8_t *mask, uint32_t R) {
  switch (rng_below(r, 5)) {
  case 0: /* the top bits of each c-byte value, as floats have them */
    for (uint32_t b = 0; b < R; b++)
      mask[b] = (uint8_t)(0xFFu << rng_below(r, 9));
    break;
  case 1: /* runs */
    for (uint32_t b = 0; b < R; b++)
      mask[b] = (uint8_t)(((1u << rng_below(r, 9)) - 1) << rng_below(r, 4));
    break;
  case 2: /* scattered */
    rng_fill(r, mask, R);
    break;
  case 3:
    memset(mask, 0xFF, R);
    break;
  default:
    memset(mask, 0, R);
  }
}

static void check_mask(rng *r, uint32_t R, uint32_t c, const uint8_t *mask,
                       const uint8_t *bitval) {
  const unsigned S = ibp_kernels_plan_stages(mask, R, 1, R, c);
  static uint32_t plan[(MAX_R / 16 + 1) * (4 + IBP_PLAN_MAX_STAGES) * 4];
  CHECK(S <= IBP_PLAN_MAX_STAGES && S <= (c == 1 ? 3u : c == 2 ? 4u : 5u));
  CHECK(ibp_kernels_plan_bytes(R, 1, S) <= sizeof plan);
  CHECK(ibp_kernels_decode_plan(mask, bitval, R, 1, R, c, S, plan) == 0);
  CHECK(c != 1 || S == 3); /* 1-byte chunks: always their most */
  if (S > 0 && c != 1)     /* the fewest stages */
    CHECK(ibp_kernels_decode_plan(mask, bitval, R, 1, R, c, S - 1, plan) == -1);
  CHECK(ibp_kernels_decode_plan(mask, bitval, R, 1, R, c, S, plan) == 0);
  /* the bit planes after the blocks: chunk k's invariant bits inside R */
  const uint32_t *planes = plan + (R + 15) / 16 * (4 + S) * 4;
  const unsigned pw = IBP_PLAN_PLANE_WORDS(c);
  for (uint32_t k = 0; k < (R + 32 * c - 1) / (32 * c) * 32; k++) {
    unsigned want = 0, got = 0;
    for (uint32_t at = k * c; at < (k + 1) * c && at < R; at++)
      want += (unsigned)__builtin_popcount(mask[at]);
    for (unsigned j = 0; j < pw; j++)
      got |= ((planes[k / 32 * pw + j] >> (k % 32)) & 1u) << j;
    CHECKF(got == want, "R=%u c=%u chunk %u: planes %u, invariant bits %u", R,
           c, k, got, want);
  }
  const unsigned seg = c >= 4 ? 32 : 8 * c;
  for (uint32_t w = 0; w < (R + 3) / 4; w++) {
    const uint32_t *g = plan + (w / 4) * (4 + S) * 4 + w % 4;
    uint32_t keep = 0, val = 0, inv = 0, shrt = 0, stage[5];
    for (unsigned b = 0; b < 4; b++) {
      const uint32_t at = 4 * w + b;
      keep |= (uint32_t)(at < R ? (uint8_t)~mask[at] : 0) << (8 * b);
      val |= (uint32_t)(at < R ? bitval[at] : 0) << (8 * b);
      inv |= (uint32_t)(at < R ? __builtin_popcount(mask[at]) : 8) << (8 * b);
      shrt |= (uint32_t)(at < R ? 0 : 8) << (8 * b);
    }
    CHECK(g[0] == keep && g[4] == val);
    if (c < 4) {
      CHECK(g[8] == inv && g[12] == shrt);
    } else { /* the block's counts words: byte w % 4 is this word's */
      const unsigned sh = 8 * (w % 4);
      const uint32_t *k = g - w % 4 + 8;
      CHECK(((k[0] >> sh) & 0xFF) == 32 - byte_total(shrt));
      CHECK(((k[1] >> sh) & 0xFF) == byte_total(inv) - byte_total(shrt));
      CHECK(k[2] == 0 && k[3] == 0 && k[4] == 0 && k[5] == 0 && k[6] == 0 &&
            k[7] == 0);
    }
    for (unsigned s = 0; s < S; s++)
      stage[s] = g[16 + 4 * IBP_PLAN_STAGE_ROW(s, S)];
    for (int k = 0; k < 8; k++) {
      const uint32_t x = (uint32_t)rng_next(r);
      uint32_t want = 0;
      for (unsigned base = 0; base < 32; base += seg) {
        const uint32_t m = seg == 32 ? ~0u : ((1u << seg) - 1) << base;
        want |= deposit(x >> base, (keep & m) >> base) << base;
      }
      CHECKF((staged(x, stage, S) & keep) == want,
             "R=%u c=%u S=%u word %u keep %08x x %08x", R, c, S, w, keep, x);
    }
  }
}

int main(void) {
  uint64_t iters = test_begin("test_decode_plan", 20000);
  uint8_t mask[MAX_R], bitval[MAX_R];
  unsigned most[4] = {0};
  for (uint64_t i = 0; i < iters; i++) {
    rng r;
    test_iteration(&r, i);
    const uint32_t R = (uint32_t)rng_range(&r, 1, MAX_R), c = rng_chunk(&r);
    test_case("R=%u c=%u", R, c);
    random_mask(&r, mask, R);
    rng_fill(&r, bitval, R);
    for (uint32_t b = 0; b < R; b++)
      bitval[b] &= mask[b];
    check_mask(&r, R, c, mask, bitval);
    const unsigned S = ibp_kernels_plan_stages(mask, R, 1, R, c);
    unsigned *m = &most[c == 1 ? 0 : c == 2 ? 1 : c == 4 ? 2 : 3];
    *m = S > *m ? S : *m;
  }
  /* every width reached its largest S: the stages were all exercised */
  if (iters >= 2000)
    CHECK(most[0] == 3 && most[1] == 4 && most[2] == 5 && most[3] == 5);
  printf("test_decode_plan: %llu Masks, 0 mismatches\n",
         (unsigned long long)iters);
  return test_end();
}
