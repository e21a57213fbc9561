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

/* Bytes 4w .. 4w+3 of a tensor of R bytes as a little-endian word, 0 past
 * R. */
static uint32_t load_word(const uint8_t *p, uint32_t R, uint64_t w) {
  const uint64_t at = 4 * w;
  if (at + 4 <= R)
    return (uint32_t)p[at] | (uint32_t)p[at + 1] << 8 |
           (uint32_t)p[at + 2] << 16 | (uint32_t)p[at + 3] << 24;
  uint32_t v = 0;
  for (unsigned b = 0; at + b < R; b++)
    v |= (uint32_t)p[at + b] << (8 * b);
  return v;
}

/* The bytes of word w that lie inside the tensor, all ones. */
static uint32_t inside_word(uint32_t R, uint64_t w) {
  const uint64_t at = 4 * w;
  if (at >= R)
    return 0;
  return at + 4 <= R ? ~0u : (1u << (8 * (R - at))) - 1;
}

/* Kept bits of 32-bit word w of a tensor (0 past R). */
static uint32_t keep_word(const uint8_t *mask, uint32_t R, uint64_t w) {
  return ~load_word(mask, R, w) & inside_word(R, w);
}

/* The set bits of each byte of x, in that byte (SWAR: no popcnt
 * instruction is assumed, and libgcc's is a call). */
static uint32_t byte_popcounts(uint32_t x) {
  x -= (x >> 1) & 0x55555555u;
  x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
  return (x + (x >> 4)) & 0x0F0F0F0Fu;
}

static unsigned popcount32(uint32_t x) {
  return (byte_popcounts(x) * 0x01010101u) >> 24;
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
    const unsigned d = top + 1u - popcount32(k);
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
  if (c == 1) /* (ibp_kernels.h) */
    return 3;
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

/* Bytes of one pair's blocks (4 + S groups of 16 bytes each): its bit
 * planes follow them. */
static uint64_t blocks_bytes(uint32_t R, unsigned S) {
  return ((uint64_t)R + BLOCK - 1) / BLOCK * (4 + S) * BLOCK;
}

/* Groups of 32 chunks of a tensor: its bit planes' groups. */
static uint64_t plane_groups(uint32_t R, uint32_t c) {
  return ((uint64_t)R + 32u * c - 1) / (32u * c);
}

uint64_t ibp_kernels_plan_bytes(uint32_t R, uint32_t K, unsigned S) {
  uint64_t planes = 0; /* (room for any chunk width's) */
  for (uint32_t c = 1; c <= 8; c *= 2) {
    const uint64_t b = plane_groups(R, c) * IBP_PLAN_PLANE_WORDS(c) * 4;
    planes = b > planes ? b : planes;
  }
  return (K ? K : 1) * (blocks_bytes(R, S) + planes);
}

/* The S stage masks of word `keep`; 0 when S stages are too few.  Stage
 * s's mask is where the kept bits whose d has bit s set sit before step s
 * of the reverse operation, a compress that moves them down by 2^s in
 * steps s = 0, 1, ... (Hacker's Delight, 7-4, "compress" with precomputed
 * masks): the deposit's stage s moves them back up onto it.  All segments
 * of the word at once: mp's bit j is the parity of the invariant bits
 * below j in its segment whose count step s has not yet moved past (d's
 * bits s and up), the prefix sums stopping at each segment's first bit.
 * A bit moving in step S or later needs more than S stages. */
static int word_stages(uint32_t keep, unsigned seg, unsigned S,
                       uint32_t *stage) {
  const uint32_t first = seg == 8 ? 0x01010101u : seg == 16 ? 0x00010001u : 1u;
  uint32_t m = keep;
  uint32_t mk = (~keep << 1) & ~first; /* invariant bits, at the bit above */
  for (unsigned s = 0; (1u << s) < seg; s++) {
    uint32_t mp = mk; /* parallel prefix parity within each segment */
    for (unsigned k = 1; k < seg; k <<= 1)
      mp ^= (mp << k) & ~(first * ((1u << k) - 1));
    const uint32_t mv = mp & m; /* the bits that move in step s */
    if (s < S)
      stage[s] = mv;
    else if (mv)
      return 0;
    m = (m ^ mv) | (mv >> (1u << s)); /* never below its segment's start */
    mk &= ~mp;
  }
  for (unsigned s = seg == 8 ? 3 : seg == 16 ? 4 : 5; s < S; s++)
    stage[s] = 0;
  return 1;
}

/* Per byte of word w: the bits a fitting chunk (inv) and a non-fitting
 * chunk (short) do not carry (8 for each byte past R). */
static void word_counts(const uint8_t *mask, uint32_t R, uint64_t w,
                        uint32_t *inv, uint32_t *shrt) {
  const uint32_t past = ~inside_word(R, w) & 0x08080808u;
  *inv = byte_popcounts(load_word(mask, R, w)) | past;
  *shrt = past;
}

/* Chunks of 4 and 8 bytes: the counts words of block b (groups 2 and 3):
 * byte i of word 0 the payload bits of word i when its chunk does not
 * fit, of word 1 its invariant bits inside R (what fitting takes off);
 * the rest 0. */
static void block_counts(const uint8_t *mask, uint32_t R, uint64_t b,
                         uint32_t *g) {
  memset(g, 0, 8 * sizeof *g);
  for (unsigned i = 0; i < 4; i++) {
    const uint64_t w = 4 * b + i;
    const uint32_t inside = inside_word(R, w);
    g[0] |= (uint32_t)(popcount32(inside)) << (8 * i);
    g[1] |= (uint32_t)popcount32(load_word(mask, R, w) & inside) << (8 * i);
  }
}

/* The bit planes of the Mask m (chunk width c) to out (plane_groups x
 * IBP_PLAN_PLANE_WORDS(c) words). */
static void chunk_planes(const uint8_t *m, uint32_t R, uint32_t c,
                         uint32_t *out) {
  const unsigned pw = IBP_PLAN_PLANE_WORDS(c);
  memset(out, 0, plane_groups(R, c) * pw * 4);
  for (uint64_t k = 0; k * c < R; k++) {
    unsigned inv = 0;
    for (uint64_t at = k * c; at < (k + 1) * c && at < R; at++)
      inv += popcount32(m[at]);
    for (unsigned j = 0; inv >> j; j++)
      out[(k / 32) * pw + j] |= ((inv >> j) & 1u) << (k % 32);
  }
}

int ibp_kernels_decode_plan(const uint8_t *mask, const uint8_t *bitval,
                            uint32_t stride, uint32_t K, uint32_t R, uint32_t c,
                            unsigned S, uint32_t *out) {
  if (R == 0 || !ibp_chunk_width_valid(c) || K > 256 || S > IBP_PLAN_MAX_STAGES)
    return -1;
  const unsigned seg = segment_bits(c), groups = 4 + S;
  const uint64_t blocks = ((uint64_t)R + BLOCK - 1) / BLOCK;
  const uint64_t one = ibp_kernels_plan_bytes(R, 1, S) / 4; /* words */
  for (uint32_t k = 0; k < (K ? K : 1); k++) {
    const uint8_t *m = mask + (uint64_t)k * stride;
    const uint8_t *v = bitval + (uint64_t)k * stride;
    memset(out + k * one, 0, one * 4);
    chunk_planes(m, R, c, out + k * one + blocks_bytes(R, S) / 4);
    for (uint64_t b = 0; b < blocks; b++) {
      uint32_t *g = out + k * one + b * groups * 4;
      for (unsigned i = 0; i < 4; i++) {
        const uint64_t w = 4 * b + i;
        uint32_t stage[IBP_PLAN_MAX_STAGES];
        g[i] = keep_word(m, R, w);
        g[4 + i] = load_word(v, R, w);
        if (c < 4)
          word_counts(m, R, w, &g[8 + i], &g[12 + i]);
        if (!word_stages(g[i], seg, S, stage))
          return -1;
        for (unsigned s = 0; s < S; s++) /* the top one first */
          g[16 + 4 * IBP_PLAN_STAGE_ROW(s, S) + i] = stage[s];
      }
      if (c >= 4)
        block_counts(m, R, b, g + 8);
    }
  }
  return 0;
}
