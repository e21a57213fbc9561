/* The decode plan of a region's Mask/Bitval pairs (ibp_kernels.h; the
 * layout and why: docs/ARCHITECTURE.md "The decode plan").
 *
 * A fitting chunk's payload is the chunk's kept bits (~Mask) packed to its
 * low end; decoding deposits them back.  Kept bit t of a segment (a chunk,
 * or a 32-bit word of an 8-byte chunk) comes from bit r = its rank among
 * the kept bits, so it moves up by d = t - r, the invariant bits below it.
 * The kernel moves it in stages, s = S-1 down to 0: in stage s every bit
 * whose d has bit s set moves up by 2^s.  Before stage s a bit sits at
 * r + (d with bits s and below cleared); stage s's mask has a 1 where a
 * moving bit lands.  d never decreases from one kept bit to the next, so
 * positions stay strictly increasing and no bit lands on another. */
#include <string.h>

#include "ibp_kernels.h"

#include "ibp/chunk_widths.h"

#define BLOCK 16u /* bytes a lane decodes per step */

/* Bits per segment: a chunk, at most a 32-bit word. */
static unsigned segment_bits(uint32_t c) {
  return c >= 4 ? 32u : 8u * c;
}

/* Kept bits of 32-bit word w of a tensor (0 past R). */
static uint32_t keep_word(const uint8_t *mask, uint32_t R, uint64_t w) {
  uint32_t k = 0;
  for (unsigned b = 0; b < 4; b++) {
    uint64_t at = 4 * w + b;
    if (at < R)
      k |= (uint32_t)(uint8_t)~mask[at] << (8 * b);
  }
  return k;
}

/* The kept bits of the segment at bit `base` of `keep`, at its low end. */
static uint32_t segment_keep(uint32_t keep, unsigned base, unsigned seg) {
  return seg == 32 ? keep : (keep >> base) & ((1u << seg) - 1);
}

/* Largest d of the kept bits of word `keep`, segments of `seg` bits: since
 * d never decreases, the d of each segment's highest kept bit. */
static unsigned word_max_shift(uint32_t keep, unsigned seg) {
  unsigned most = 0;
  for (unsigned base = 0; base < 32; base += seg) {
    const uint32_t k = segment_keep(keep, base, seg);
    if (!k)
      continue;
    const unsigned top = 31u - (unsigned)__builtin_clz(k);
    const unsigned d = top + 1u - (unsigned)__builtin_popcount(k);
    most = d > most ? d : most;
  }
  return most;
}

static unsigned bit_length(unsigned v) {
  unsigned n = 0;
  while (v >> n)
    n++;
  return n;
}

unsigned ibp_kernels_plan_stages(const uint8_t *mask, uint32_t stride,
                                 uint32_t K, uint32_t R, uint32_t c) {
  const unsigned seg = segment_bits(c);
  unsigned most = 0;
  for (uint32_t k = 0; k < (K ? K : 1); k++)
    for (uint64_t w = 0; w < ((uint64_t)R + 3) / 4; w++) {
      unsigned d =
          word_max_shift(keep_word(mask + (uint64_t)k * stride, R, w), seg);
      most = d > most ? d : most;
    }
  return bit_length(most);
}

uint64_t ibp_kernels_plan_bytes(uint32_t R, uint32_t K, unsigned S) {
  const uint64_t blocks = ((uint64_t)R + BLOCK - 1) / BLOCK;
  return (K ? K : 1) * blocks * (4 + S) * BLOCK;
}

/* The S stage masks of word `keep`; 0 when S stages are too few.  Visits
 * the kept bits only, and of each only the stages it moves in. */
static int word_stages(uint32_t keep, unsigned seg, unsigned S,
                       uint32_t *stage) {
  for (unsigned s = 0; s < S; s++)
    stage[s] = 0;
  for (unsigned base = 0; base < 32; base += seg) {
    uint32_t k = segment_keep(keep, base, seg);
    for (unsigned rank = 0; k; k &= k - 1, rank++) {
      const unsigned d = (unsigned)__builtin_ctz(k) - rank;
      if (d >> S)
        return 0;
      for (unsigned m = d; m; m &= m - 1) {
        const unsigned s = (unsigned)__builtin_ctz(m);
        /* lands at r + (d with bits below s cleared) */
        stage[s] |= 1u << (base + rank + (d & ~((1u << s) - 1)));
      }
    }
  }
  return 1;
}

/* Per byte of word w: the bits a fitting chunk (inv) and a non-fitting
 * chunk (short) do not carry. */
static void word_counts(const uint8_t *mask, uint32_t R, uint64_t w,
                        uint32_t *inv, uint32_t *shrt) {
  *inv = *shrt = 0;
  for (unsigned b = 0; b < 4; b++) {
    uint64_t at = 4 * w + b;
    unsigned i = at < R ? (unsigned)__builtin_popcount(mask[at]) : 8;
    *inv |= (uint32_t)i << (8 * b);
    *shrt |= (uint32_t)(at < R ? 0 : 8) << (8 * b);
  }
}

static uint32_t bitval_word(const uint8_t *bitval, uint32_t R, uint64_t w) {
  uint32_t v = 0;
  for (unsigned b = 0; b < 4; b++)
    if (4 * w + b < R)
      v |= (uint32_t)bitval[4 * w + b] << (8 * b);
  return v;
}

int ibp_kernels_decode_plan(const uint8_t *mask, const uint8_t *bitval,
                            uint32_t stride, uint32_t K, uint32_t R, uint32_t c,
                            unsigned S, uint32_t *out) {
  if (R == 0 || !ibp_chunk_width_valid(c) || K > 256 || S > IBP_PLAN_MAX_STAGES)
    return -1;
  const unsigned seg = segment_bits(c), groups = 4 + S;
  const uint64_t blocks = ((uint64_t)R + BLOCK - 1) / BLOCK;
  for (uint32_t k = 0; k < (K ? K : 1); k++) {
    const uint8_t *m = mask + (uint64_t)k * stride;
    const uint8_t *v = bitval + (uint64_t)k * stride;
    for (uint64_t b = 0; b < blocks; b++) {
      uint32_t *g = out + (k * blocks + b) * groups * 4;
      for (unsigned i = 0; i < 4; i++) {
        const uint64_t w = 4 * b + i;
        uint32_t stage[IBP_PLAN_MAX_STAGES];
        g[i] = keep_word(m, R, w);
        g[4 + i] = bitval_word(v, R, w);
        word_counts(m, R, w, &g[8 + i], &g[12 + i]);
        if (!word_stages(g[i], seg, S, stage))
          return -1;
        for (unsigned s = 0; s < S; s++)
          g[16 + 4 * s + i] = stage[s];
      }
    }
  }
  return 0;
}
