/*
 * Per-tensor packing, written once and instantiated per CPU path (like
 * zstd's DYNAMIC_BMI2 bodies).  The including file defines:
 *
 *   PACK_NAME(x)       unique name for this instantiation
 *   PACK_TARGET        function attribute (e.g. target("bmi2,popcnt"))
 *   PACK_PEXT(w, m)    bits of w under m, packed to the low end
 *   PACK_PDEP(v, m)    low bits of v scattered to the set bits of m
 *   PACK_POPCNT(x)     number of set bits
 *
 * The tensor is processed one 64-bit word (8 bytes) at a time.  Every
 * chunk width (IBP_CHUNK_WIDTHS) divides 8 (checked in internal.h), so a
 * word holds k = 8/c whole chunks and its k fit bits never straddle a
 * bitmap byte.  For each word:
 *
 *   x     = (w & mask) ^ bitval        nonzero bytes break their chunk
 *   NF    = 0xFF in the bytes of chunks that do not fit
 *   keep  = ~mask | NF                 the bits that travel in the payload
 *
 * so the payload of a word is pext(w, keep) and decoding is
 * pdep(bits, keep) | (bitval & ~keep).  The last word of a tensor whose
 * size is not a multiple of 8 is zero-padded; padding bytes fit and keep
 * nothing.
 *
 * Stream layout (docs/FORMAT.md): bits [0, nchunks) are the fit bitmap,
 * the payload follows at bit nchunks.
 */
#include "internal.h"

#define PK_LO7 0x7F7F7F7F7F7F7F7FULL
#define PK_HI 0x8080808080808080ULL
#define PK_ONES 0x0101010101010101ULL

/* Bit 7 of each byte set iff the byte is nonzero. */
static inline uint64_t PACK_NAME(nonzero_bytes)(uint64_t x) {
  return (((x & PK_LO7) + PK_LO7) | x) & PK_HI;
}

/* Bit 7 of the first byte of each chunk set iff the chunk has a nonzero
 * byte of x. */
static inline uint64_t PACK_NAME(chunk_nonzero)(uint64_t x, uint32_t c) {
  if (c == 8)
    return x ? 0x80 : 0;
  uint64_t h = PACK_NAME(nonzero_bytes)(x);
  static const uint64_t first_byte[IBP_CHUNK_WIDTH_MAX + 1] = {
      0, PK_HI,  0x0080008000800080ULL, 0, 0x0000008000000080ULL, 0, 0,
      0, 0x80ULL};
  if (c >= 2)
    h |= h >> 8;
  if (c >= 4)
    h |= h >> 16;
  if (c >= 8)
    h |= h >> 32;
  return h & first_byte[c];
}

/* 0xFF in every byte of the flagged chunks. */
static inline uint64_t PACK_NAME(spread_chunks)(uint64_t flagged, uint32_t c) {
  if (c == 8)
    return 0 - (flagged >> 7);
  uint64_t s = flagged >> 7;
  if (c >= 2)
    s |= s << 8;
  if (c >= 4)
    s |= s << 16;
  if (c >= 8)
    s |= s << 32;
  return s * 0xFF;
}

/* The k = 8/c fit bits of a word, chunk 0 in bit 0.  The multiply gathers
 * the per-chunk flags (bit 8*c*i) into bits 64-k+i without carries. */
static inline uint32_t PACK_NAME(fit_bits)(uint64_t flagged, uint32_t c) {
  static const uint64_t gather[IBP_CHUNK_WIDTH_MAX + 1] = {
      0,
      0x0102040810204080ULL,
      0x1000200040008000ULL,
      0,
      0x4000000080000000ULL,
      0,
      0,
      0,
      0x8000000000000000ULL};
  uint32_t k = 8 / c;
  uint32_t nonfit = (uint32_t)(((flagged >> 7) * gather[c]) >> (64 - k));
  return ~nonfit & ((1u << k) - 1);
}

/* ---- bit writer: appends LSB-first to a byte buffer -------------------- */

typedef struct PACK_NAME(writer) {
  uint8_t *out;
  size_t pos;   /* byte index where acc will be stored */
  uint64_t acc; /* pending bits, the first in bit 0 */
  unsigned n;   /* pending bit count, < 64 */
} PACK_NAME(writer);

/* v must have no bits at or above nbits; nbits <= 64. */
static inline void PACK_NAME(put)(PACK_NAME(writer) * w, uint64_t v,
                                  unsigned nbits) {
  unsigned total = w->n + nbits;
  w->acc |= v << w->n;
  if (total >= 64) {
    ibp__store64(w->out + w->pos, w->acc);
    w->pos += 8;
    w->acc = w->n ? v >> (64 - w->n) : 0;
    w->n = total - 64;
  } else {
    w->n = total;
  }
}

/* As put, without a data-dependent branch: stores the accumulator every
 * time (so it may write zero bytes past the stream, up to pos+8) while
 * that stays below `cap`, the buffer's size. */
static inline void PACK_NAME(put_fast)(PACK_NAME(writer) * w, uint64_t v,
                                       unsigned nbits, size_t cap) {
  if (w->pos + 8 > cap) {
    PACK_NAME(put)(w, v, nbits);
    return;
  }
  unsigned total = w->n + nbits;
  uint64_t acc = w->acc | (v << w->n);
  uint64_t carry = (v >> 1) >> (63 - w->n); /* bits of v past the word */
  ibp__store64(w->out + w->pos, acc);
  unsigned full = total >> 6;
  w->pos += 8 * full;
  w->acc = full ? carry : acc;
  w->n = total & 63;
}

static inline void PACK_NAME(flush)(PACK_NAME(writer) * w) {
  for (unsigned b = 0; b < w->n; b += 8)
    w->out[w->pos++] = (uint8_t)(w->acc >> b);
  w->acc = 0;
  w->n = 0;
}

/* ---- bounded bit reader ------------------------------------------------- */

/* Reads nbits (<= 64) at bit *pos of src[0, len) into the low bits of
 * *out; bits above nbits are unspecified (pdep ignores them).  Returns 0
 * when the bits would run past len. */
static inline int PACK_NAME(get)(const uint8_t *src, size_t len, size_t *pos,
                                 unsigned nbits, uint64_t *out) {
  size_t q = *pos >> 3;
  unsigned sh = (unsigned)(*pos & 7);
  uint64_t v;
  if (q + 9 <= len) {
    v = (ibp__load64(src + q) >> sh) |
        (((uint64_t)src[q + 8] << 1) << (63 - sh)); /* no branch on sh */
  } else if (nbits == 0) {
    v = 0;
  } else {
    size_t last = (*pos + nbits - 1) >> 3;
    if (last >= len)
      return 0;
    v = 0;
    for (size_t i = q; i <= last && i < q + 8; i++)
      v |= (uint64_t)src[i] << (8 * (i - q));
    v >>= sh;
    if (last == q + 8)
      v |= (uint64_t)src[q + 8] << (64 - sh);
  }
  *out = v;
  *pos += nbits;
  return 1;
}

/* ---- word geometry ------------------------------------------------------- */

/* The word at byte b of tensor, mask or bitval; partial words zero-padded. */
static inline uint64_t PACK_NAME(word)(const uint8_t *p, uint32_t b,
                                       uint32_t R) {
  return b + 8 <= R ? ibp__load64(p + b) : ibp__load_partial(p + b, R - b);
}

/* Bytes of the word at byte b that exist in the tensor. */
static inline uint64_t PACK_NAME(valid)(uint32_t b, uint32_t R) {
  return b + 8 <= R ? ~0ULL : (1ULL << (8 * (R - b))) - 1;
}

/* Chunks of the word at byte b. */
static inline uint32_t PACK_NAME(word_chunks)(uint32_t b, uint32_t R,
                                              uint32_t c) {
  uint32_t bytes = b + 8 <= R ? 8 : R - b;
  return (bytes + c - 1) / c;
}

/* ---- size and compress --------------------------------------------------- */

/* Stored length of the tensor: its compressed length if < R, else R.
 * Counts payload bits only; stops as soon as the tensor cannot save. */
static inline __attribute__((always_inline)) uint64_t
PACK_NAME(measure_bits)(const ibp_params *p, const uint8_t *t, uint32_t c,
                        uint64_t limit) {
  const uint32_t R = p->tensor_bytes;
  uint64_t bits = ibp__nchunks(R, c);
  if (bits > limit)
    return limit + 1;
  uint32_t b = 0;
  for (; b + 16 <= R; b += 16) { /* two whole words a step */
    const uint64_t m0 = ibp__load64(p->mask + b);
    const uint64_t m1 = ibp__load64(p->mask + b + 8);
    const uint64_t f0 = PACK_NAME(chunk_nonzero)(
        (ibp__load64(t + b) & m0) ^ ibp__load64(p->bitval + b), c);
    const uint64_t f1 = PACK_NAME(chunk_nonzero)(
        (ibp__load64(t + b + 8) & m1) ^ ibp__load64(p->bitval + b + 8), c);
    bits += (uint64_t)PACK_POPCNT(~m0 | PACK_NAME(spread_chunks)(f0, c)) +
            (uint64_t)PACK_POPCNT(~m1 | PACK_NAME(spread_chunks)(f1, c));
    if (bits > limit)
      return limit + 1;
  }
  for (; b < R; b += 8) {
    uint64_t w = PACK_NAME(word)(t, b, R);
    uint64_t m = PACK_NAME(word)(p->mask, b, R);
    uint64_t v = PACK_NAME(word)(p->bitval, b, R);
    uint64_t flagged = PACK_NAME(chunk_nonzero)((w & m) ^ v, c);
    uint64_t keep =
        (~m | PACK_NAME(spread_chunks)(flagged, c)) & PACK_NAME(valid)(b, R);
    bits += (uint64_t)PACK_POPCNT(keep);
    if (bits > limit)
      return limit + 1;
  }
  return bits;
}

static inline __attribute__((always_inline)) size_t
PACK_NAME(measure)(const ibp_params *p, const uint8_t *t, uint32_t c) {
  const uint32_t R = p->tensor_bytes;
  const uint64_t limit = 8 * (uint64_t)(R - 1); /* bits that still save */
  uint64_t bits = PACK_NAME(measure_bits)(p, t, c, limit);
  return bits > limit ? R : (size_t)((bits + 7) / 8);
}

/* One pass: the bitmap goes to bits [0, nchunks) and the payload, whose
 * start is known in advance, to bits nchunks onwards.  The two writers
 * share one byte, which the bitmap's final flush merges.  Returns the
 * stream's bits (its last byte zero-padded); if the stream reaches R bytes
 * the tensor is copied raw instead and the result is more than 8 (R - 1). */
static inline __attribute__((always_inline)) uint64_t
PACK_NAME(compress_c)(const ibp_params *p, const uint8_t *t, uint8_t *slot,
                      uint32_t c) {
  const uint32_t R = p->tensor_bytes;
  const uint64_t limit = 8 * (uint64_t)(R - 1);
  const uint32_t nch = ibp__nchunks(R, c);
  uint64_t bits = nch;
  PACK_NAME(writer) bm = {slot, 0, 0, 0};
  PACK_NAME(writer) pw = {slot, nch / 8, 0, nch % 8};
  uint32_t b = 0;
  /* two whole words a step: their payloads one put where they fit 64 bits,
   * their 2 k fit bits one put (as fit_put_body) */
  for (; b + 16 <= R; b += 16) {
    const uint64_t w0 = ibp__load64(t + b), w1 = ibp__load64(t + b + 8);
    const uint64_t m0 = ibp__load64(p->mask + b);
    const uint64_t m1 = ibp__load64(p->mask + b + 8);
    const uint64_t f0 =
        PACK_NAME(chunk_nonzero)((w0 & m0) ^ ibp__load64(p->bitval + b), c);
    const uint64_t f1 =
        PACK_NAME(chunk_nonzero)((w1 & m1) ^ ibp__load64(p->bitval + b + 8), c);
    const uint64_t k0 = ~m0 | PACK_NAME(spread_chunks)(f0, c);
    const uint64_t k1 = ~m1 | PACK_NAME(spread_chunks)(f1, c);
    const unsigned n0 = (unsigned)PACK_POPCNT(k0);
    const unsigned n1 = (unsigned)PACK_POPCNT(k1);
    bits += n0 + n1;
    if (bits > limit) {
      memcpy(slot, t, R);
      return limit + 1;
    }
    const uint64_t v0 = PACK_PEXT(w0, k0), v1 = PACK_PEXT(w1, k1);
    if (n0 + n1 <= 64) { /* (v1 << n0: n0 < 64 here unless n1 is 0) */
      PACK_NAME(put_fast)(&pw, n0 < 64 ? v0 | v1 << n0 : v0, n0 + n1, R);
    } else {
      PACK_NAME(put_fast)(&pw, v0, n0, R);
      PACK_NAME(put_fast)(&pw, v1, n1, R);
    }
    const uint32_t k = 8 / c;
    PACK_NAME(put)
    (&bm,
     PACK_NAME(fit_bits)(f0, c) | (uint64_t)PACK_NAME(fit_bits)(f1, c) << k,
     2 * k);
  }
  for (; b < R; b += 8) {
    uint64_t w = PACK_NAME(word)(t, b, R);
    uint64_t m = PACK_NAME(word)(p->mask, b, R);
    uint64_t v = PACK_NAME(word)(p->bitval, b, R);
    uint64_t flagged = PACK_NAME(chunk_nonzero)((w & m) ^ v, c);
    uint64_t keep =
        (~m | PACK_NAME(spread_chunks)(flagged, c)) & PACK_NAME(valid)(b, R);
    unsigned n = (unsigned)PACK_POPCNT(keep);
    bits += n;
    if (bits > limit) {
      memcpy(slot, t, R);
      return limit + 1;
    }
    PACK_NAME(put_fast)(&pw, PACK_PEXT(w, keep), n, R);
    PACK_NAME(put)
    (&bm, PACK_NAME(fit_bits)(flagged, c), PACK_NAME(word_chunks)(b, R, c));
  }
  PACK_NAME(flush)(&pw);
  if (nch % 8) { /* merge the shared byte: bitmap low bits, payload high */
    uint8_t shared = slot[nch / 8];
    PACK_NAME(flush)(&bm);
    slot[nch / 8] = (uint8_t)((slot[nch / 8] & ((1u << (nch % 8)) - 1)) |
                              (shared & ~((1u << (nch % 8)) - 1)));
  } else {
    PACK_NAME(flush)(&bm);
  }
  return bits;
}

/* ---- the payload alone (every chunk fits) -------------------------------- */

/* The stream of a tensor whose every chunk fits, without its bitmap (a
 * staged stream leaves it out when Mask is exactly the stage's field,
 * docs/FORMAT.md §9): the bits of t outside Mask, from bit 0 of out (the
 * last byte zero-padded).  t's bits under Mask are ignored.  Returns the
 * bits, or limit + 1 as soon as they exceed limit (out then unspecified);
 * writes below byte R only. */
static inline __attribute__((always_inline)) uint64_t
PACK_NAME(fit_put_body)(const ibp_params *p, const uint8_t *t, uint8_t *out,
                        uint64_t limit) {
  const uint32_t R = p->tensor_bytes;
  PACK_NAME(writer) pw = {out, 0, 0, 0};
  uint64_t bits = 0;
  uint32_t b = 0;
  /* two whole words a put where their bits fit one: half the writer's
   * dependent steps (fit_put of bf16 weights: 28 + 28 bits a pair) */
  for (; b + 16 <= R; b += 16) {
    const uint64_t k0 = ~ibp__load64(p->mask + b);
    const uint64_t k1 = ~ibp__load64(p->mask + b + 8);
    const unsigned n0 = (unsigned)PACK_POPCNT(k0);
    const unsigned n1 = (unsigned)PACK_POPCNT(k1);
    bits += n0 + n1;
    if (bits > limit)
      return limit + 1;
    const uint64_t v0 = PACK_PEXT(ibp__load64(t + b), k0);
    const uint64_t v1 = PACK_PEXT(ibp__load64(t + b + 8), k1);
    if (n0 + n1 <= 64) { /* (v1 << n0: n0 < 64 here unless n1 is 0) */
      PACK_NAME(put_fast)(&pw, n0 < 64 ? v0 | v1 << n0 : v0, n0 + n1, R);
    } else {
      PACK_NAME(put_fast)(&pw, v0, n0, R);
      PACK_NAME(put_fast)(&pw, v1, n1, R);
    }
  }
  for (; b < R; b += 8) {
    uint64_t keep = ~PACK_NAME(word)(p->mask, b, R) & PACK_NAME(valid)(b, R);
    unsigned n = (unsigned)PACK_POPCNT(keep);
    bits += n;
    if (bits > limit)
      return limit + 1;
    PACK_NAME(put_fast)(&pw, PACK_PEXT(PACK_NAME(word)(t, b, R), keep), n, R);
  }
  PACK_NAME(flush)(&pw);
  return bits;
}

/* fit_put_body where Mask is ~keep in every word (a staged stream's Mask
 * is the stage's field, docs/FORMAT.md §9): the same bits, each word's
 * count known in advance.  Where g words' bits make whole bytes and fit
 * one store (bf16: 2 x 28 bits, f16: 40), they go as one store at a byte,
 * no bit count carried; the rest through the writer (16 MiB of
 * bench_prepare's bf16 weights: 56.3 -> 23.4 million instructions,
 * callgrind). */
static inline __attribute__((always_inline)) uint64_t
PACK_NAME(fit_put_word_body)(uint64_t keep, const uint8_t *t, uint32_t R,
                             uint8_t *out, uint64_t limit) {
  const unsigned n = (unsigned)PACK_POPCNT(keep);
  const uint32_t full = R / 8; /* whole words */
  const uint64_t tail_keep = keep & PACK_NAME(valid)(8 * full, R);
  const uint64_t bits =
      (uint64_t)full * n + (R % 8 ? PACK_POPCNT(tail_keep) : 0);
  if (bits > limit)
    return limit + 1;
  unsigned g = 1; /* words a store: g n a whole number of bytes, <= 64 */
  while (g < 8 && (g * n) % 8 != 0)
    g *= 2;
  uint32_t w = 0;
  size_t pos = 0;
  if (n && (g * n) % 8 == 0 && g * n <= 64) {
    const size_t step = g * n / 8;
    for (; w + g <= full && pos + 8 <= R; w += g, pos += step) {
      uint64_t v = PACK_PEXT(ibp__load64(t + 8 * (size_t)w), keep);
      for (unsigned k = 1; k < g; k++)
        v |= PACK_PEXT(ibp__load64(t + 8 * (size_t)(w + k)), keep) << (k * n);
      ibp__store64(out + pos, v);
    }
  }
  PACK_NAME(writer) pw = {out, pos, 0, 0};
  for (; w < full; w++)
    PACK_NAME(put_fast)
  (&pw, PACK_PEXT(ibp__load64(t + 8 * (size_t)w), keep), n, R);
  if (R % 8)
    PACK_NAME(put_fast)
  (&pw, PACK_PEXT(PACK_NAME(word)(t, 8 * full, R), tail_keep),
   (unsigned)PACK_POPCNT(tail_keep), R);
  PACK_NAME(flush)(&pw);
  return bits;
}

/* ---- decode -------------------------------------------------------------- */

/* keep for the word at byte b, from its fit bits in the bitmap. */
static inline uint64_t PACK_NAME(keep_from_bitmap)(const uint8_t *src,
                                                   uint32_t b, uint32_t R,
                                                   uint32_t c, uint64_t m,
                                                   const uint64_t *nft) {
  uint32_t k = 8 / c;
  uint32_t first = (b / 8) * k; /* index of the word's first chunk */
  uint32_t fit = (src[first >> 3] >> (first & 7)) & ((1u << k) - 1);
  uint32_t have = PACK_NAME(word_chunks)(b, R, c);
  fit |= ((1u << k) - 1) & ~((1u << have) - 1); /* padding chunks fit */
  return (~m | nft[fit]) & PACK_NAME(valid)(b, R);
}

/* Checks the end of a fully parsed stream at bit `end`. */
static inline ibp_status PACK_NAME(check_end)(const uint8_t *src,
                                              size_t src_len, size_t end,
                                              uint32_t R) {
  size_t len = (end + 7) / 8;
  if (len >= R || len > src_len)
    return IBP_ERR_CORRUPT;
  if ((end & 7) && (src[end >> 3] >> (end & 7)) != 0)
    return IBP_ERR_CORRUPT; /* padding bits must be zero */
  return IBP_OK;
}

static inline __attribute__((always_inline)) ibp_status
PACK_NAME(decode_c)(const ibp_params *p, const uint8_t *src, size_t src_len,
                    uint32_t off, uint32_t len, uint8_t *dst, size_t *end_bit,
                    uint32_t c) {
  const uint32_t R = p->tensor_bytes;
  const uint32_t nch = ibp__nchunks(R, c);
  const uint32_t end = off + len;
  const uint64_t *nft = ibp__nonfit_table(c);
  size_t pos = nch;
  uint32_t b = 0;
  if ((nch + 7) / 8 > src_len || (nch + 7) / 8 >= R)
    return IBP_ERR_CORRUPT;
  for (; b + 8 <= off; b += 8) /* skip whole words before the window */
    pos += (size_t)PACK_POPCNT(PACK_NAME(keep_from_bitmap)(
        src, b, R, c, PACK_NAME(word)(p->mask, b, R), nft));
  for (; b < end; b += 8) {
    if (b >= off && b + 8 <= end && b + 8 <= R && (pos >> 3) + 9 <= src_len) {
      /* the common case: a whole word, far from the end of src */
      uint64_t m = ibp__load64(p->mask + b);
      uint32_t first = (b / 8) * (8 / c);
      uint32_t fit = (src[first >> 3] >> (first & 7)) & ((1u << (8 / c)) - 1);
      uint64_t keep = ~m | nft[fit];
      uint64_t bits =
          (ibp__load64(src + (pos >> 3)) >> (pos & 7)) |
          (((uint64_t)src[(pos >> 3) + 8] << 1) << (63 - (pos & 7)));
      pos += (size_t)PACK_POPCNT(keep);
      ibp__store64(dst + (b - off), PACK_PDEP(bits, keep) |
                                        (ibp__load64(p->bitval + b) & ~keep));
      continue;
    }
    uint64_t m = PACK_NAME(word)(p->mask, b, R);
    uint64_t keep = PACK_NAME(keep_from_bitmap)(src, b, R, c, m, nft);
    uint64_t bits, out;
    if (!PACK_NAME(get)(src, src_len, &pos, (unsigned)PACK_POPCNT(keep), &bits))
      return IBP_ERR_CORRUPT;
    out = PACK_PDEP(bits, keep) | (PACK_NAME(word)(p->bitval, b, R) & ~keep);
    if (b >= off && b + 8 <= end) { /* a whole word of the window */
      ibp__store64(dst + (b - off), out);
    } else {
      uint32_t lo = b > off ? b : off, hi = b + 8 < end ? b + 8 : end;
      for (uint32_t i = lo; i < hi; i++)
        dst[i - off] = (uint8_t)(out >> (8 * (i - b)));
    }
  }
  if (end_bit) { /* a stage's bits follow (stage.c checks the end) */
    *end_bit = pos;
    return IBP_OK;
  }
  if (b >= R) /* the window reached the end: validate the whole stream */
    return PACK_NAME(check_end)(src, src_len, pos, R);
  return IBP_OK;
}

/* End bit of the IBP part of a stream, parsed from its bitmap; the bitmap
 * must lie within src_len and leave the stream shorter than R. */
static inline __attribute__((always_inline)) ibp_status
PACK_NAME(bits_c)(const ibp_params *p, const uint8_t *src, size_t src_len,
                  size_t *end, uint32_t c) {
  const uint32_t R = p->tensor_bytes;
  const uint32_t nch = ibp__nchunks(R, c);
  const uint64_t *nft = ibp__nonfit_table(c);
  size_t pos = nch;
  if ((nch + 7) / 8 > src_len || (nch + 7) / 8 >= R)
    return IBP_ERR_CORRUPT;
  for (uint32_t b = 0; b < R; b += 8)
    pos += (size_t)PACK_POPCNT(PACK_NAME(keep_from_bitmap)(
        src, b, R, c, PACK_NAME(word)(p->mask, b, R), nft));
  *end = pos;
  return IBP_OK;
}

static inline __attribute__((always_inline)) ibp_status
PACK_NAME(length_c)(const ibp_params *p, const uint8_t *src, size_t src_len,
                    size_t *out, uint32_t c) {
  const uint32_t R = p->tensor_bytes;
  size_t pos = 0;
  ibp_status s = PACK_NAME(bits_c)(p, src, src_len, &pos, c);
  if (s == IBP_OK)
    s = PACK_NAME(check_end)(src, src_len, pos, R);
  if (s == IBP_OK)
    *out = (pos + 7) / 8;
  return s;
}

/* The inverse of fit_put_body: t's bytes from src[0, src_len) (Bitval
 * under Mask), *end the bit where the payload ends.  IBP_ERR_CORRUPT when
 * src is too short. */
static inline __attribute__((always_inline)) ibp_status
PACK_NAME(fit_get_body)(const ibp_params *p, const uint8_t *src, size_t src_len,
                        uint8_t *dst, size_t *end) {
  const uint32_t R = p->tensor_bytes;
  size_t pos = 0;
  for (uint32_t b = 0; b < R; b += 8) {
    if (b + 8 <= R && (pos >> 3) + 9 <= src_len) { /* as decode_c */
      uint64_t keep = ~ibp__load64(p->mask + b);
      uint64_t bits =
          (ibp__load64(src + (pos >> 3)) >> (pos & 7)) |
          (((uint64_t)src[(pos >> 3) + 8] << 1) << (63 - (pos & 7)));
      pos += (size_t)PACK_POPCNT(keep);
      ibp__store64(dst + b, PACK_PDEP(bits, keep) |
                                (ibp__load64(p->bitval + b) & ~keep));
      continue;
    }
    uint64_t keep = ~PACK_NAME(word)(p->mask, b, R) & PACK_NAME(valid)(b, R);
    uint64_t bits;
    if (!PACK_NAME(get)(src, src_len, &pos, (unsigned)PACK_POPCNT(keep), &bits))
      return IBP_ERR_CORRUPT;
    uint64_t out =
        PACK_PDEP(bits, keep) | (PACK_NAME(word)(p->bitval, b, R) & ~keep);
    for (uint32_t i = b; i < R && i < b + 8; i++)
      dst[i] = (uint8_t)(out >> (8 * (i - b)));
  }
  *end = pos;
  return IBP_OK;
}

/* ---- entry points: dispatch on c so each body sees a constant ------------ */

/* One case per chunk width; any other c (params are checked before) takes
 * the widest. */
#define PK_CASE(w)                                                             \
  case w:                                                                      \
    return PK_CALL(w);
#define PACK_BY_CHUNK(c)                                                       \
  switch (c) {                                                                 \
    IBP_CHUNK_WIDTHS(PK_CASE)                                                  \
  default:                                                                     \
    return PK_CALL(IBP_CHUNK_WIDTH_MAX);                                       \
  }

PACK_TARGET static size_t PACK_NAME(stored_size)(const ibp_params *p,
                                                 const uint8_t *t){
#define PK_CALL(c) PACK_NAME(measure)(p, t, c)
    PACK_BY_CHUNK(p->chunk_bytes)
#undef PK_CALL
}

PACK_TARGET static uint64_t
    PACK_NAME(compress_bits)(const ibp_params *p, const uint8_t *t,
                             uint8_t *slot){
#define PK_CALL(c) PACK_NAME(compress_c)(p, t, slot, c)
        PACK_BY_CHUNK(p->chunk_bytes)
#undef PK_CALL
    }

PACK_TARGET static size_t
    PACK_NAME(compress)(const ibp_params *p, const uint8_t *t, uint8_t *slot) {
  const uint32_t R = p->tensor_bytes;
  uint64_t bits = PACK_NAME(compress_bits)(p, t, slot);
  return bits > 8 * (uint64_t)(R - 1) ? R : (size_t)((bits + 7) / 8);
}

PACK_TARGET static uint64_t PACK_NAME(fit_put)(const ibp_params *p,
                                               const uint8_t *t, uint8_t *out,
                                               uint64_t limit) {
  return PACK_NAME(fit_put_body)(p, t, out, limit);
}

PACK_TARGET static uint64_t PACK_NAME(fit_put_word)(uint64_t keep,
                                                    const uint8_t *t,
                                                    uint32_t R, uint8_t *out,
                                                    uint64_t limit) {
  return PACK_NAME(fit_put_word_body)(keep, t, R, out, limit);
}

PACK_TARGET static ibp_status PACK_NAME(fit_get)(const ibp_params *p,
                                                 const uint8_t *src,
                                                 size_t src_len, uint8_t *dst,
                                                 size_t *end) {
  return PACK_NAME(fit_get_body)(p, src, src_len, dst, end);
}

PACK_TARGET static uint64_t
PACK_NAME(stored_bits)(const ibp_params *p, const uint8_t *t, uint64_t limit){
#define PK_CALL(c) PACK_NAME(measure_bits)(p, t, c, limit)
    PACK_BY_CHUNK(p->chunk_bytes)
#undef PK_CALL
}

PACK_TARGET static ibp_status
    PACK_NAME(decode)(const ibp_params *p, const uint8_t *src, size_t src_len,
                      uint32_t off, uint32_t len, uint8_t *dst,
                      size_t *end_bit){
#define PK_CALL(c)                                                             \
  PACK_NAME(decode_c)(p, src, src_len, off, len, dst, end_bit, c)
        PACK_BY_CHUNK(p->chunk_bytes)
#undef PK_CALL
    }

PACK_TARGET static ibp_status
    PACK_NAME(ibp_bits)(const ibp_params *p, const uint8_t *src, size_t src_len,
                        size_t *end){
#define PK_CALL(c) PACK_NAME(bits_c)(p, src, src_len, end, c)
        PACK_BY_CHUNK(p->chunk_bytes)
#undef PK_CALL
    }

PACK_TARGET static ibp_status
    PACK_NAME(length)(const ibp_params *p, const uint8_t *src, size_t src_len,
                      size_t *out) {
#define PK_CALL(c) PACK_NAME(length_c)(p, src, src_len, out, c)
  PACK_BY_CHUNK(p->chunk_bytes)
#undef PK_CALL
}

#undef PACK_BY_CHUNK
#undef PK_CASE
#undef PK_LO7
#undef PK_HI
#undef PK_ONES
