/* The exponent stage (docs/FORMAT.md §9): the sign+exponent field of each
 * bf16 / float16 / float32 value, coded with a canonical Huffman code of
 * at most IBP_STAGE_MAX_CODE_BITS bits learned per cluster; symbols the
 * code lacks go as an escape code followed by the raw field.  A tensor's
 * values are cut into segments of 2^segment_log2 values whose bit lengths
 * (all but the last) precede the codes, so that segments decode
 * independently (a GPU lane each). */
#include "stage_internal.h"

#define LMAX IBP_STAGE_MAX_CODE_BITS
#define ESC_SYM(st) ((st)->symbols)

typedef struct dtype_info {
  uint32_t bytes, lo, bits;
} dtype_info;

static dtype_info info_of(uint32_t dtype) {
  switch (dtype) {
#define IBP_DTYPE_INFO_(name, value, text, b, l, n)                            \
  case value:                                                                  \
    return (dtype_info){b, l, n};
    IBP_DTYPE_LIST(IBP_DTYPE_INFO_)
#undef IBP_DTYPE_INFO_
  default:
    return (dtype_info){0, 0, 0};
  }
}

/* The field of value j (a whole value: bytes 2 or 4, little-endian). */
static inline uint32_t field_at(const uint8_t *t, uint32_t j, dtype_info d) {
  if (d.bytes == 2)
    return (uint32_t)(t[2 * j] | t[2 * j + 1] << 8) >> d.lo;
  uint32_t v;
  memcpy(&v, t + 4 * (size_t)j, 4);
  return v >> d.lo;
}

static ibp_status exp_init(ibp_stage *st, uint32_t R) {
  dtype_info d = info_of(st->dtype);
  if (d.bytes == 0 || st->dtype == IBP_DTYPE_NONE || R % d.bytes != 0)
    return IBP_ERR_INVALID_ARGUMENT;
  if (st->segment_log2 == 0)
    st->segment_log2 = IBP_STAGE_SEGMENT_LOG2_DEFAULT;
  if (st->segment_log2 < IBP_STAGE_SEGMENT_LOG2_MIN ||
      st->segment_log2 > IBP_STAGE_SEGMENT_LOG2_MAX)
    return IBP_ERR_INVALID_ARGUMENT;
  st->symbols = 1u << d.bits;
  return IBP_OK;
}

static void exp_count(ibp_stage *st, const uint8_t *t, uint32_t R) {
  dtype_info d = info_of(st->dtype);
  for (uint32_t j = 0; j < R / d.bytes; j++)
    st->counts[field_at(t, j, d)]++;
}

/* ---- the code ------------------------------------------------------------ */

/* Huffman code lengths of the m weights w[0..m-1] (m >= 2, sorted
 * ascending, ties by index) by the two-queue method, into len[]. */
static void huffman_lengths(const uint64_t *w, uint32_t m, uint8_t *len) {
  uint64_t wt[2 * (IBP_STAGE_MAX_SYMBOLS + 1)];
  uint32_t parent[2 * (IBP_STAGE_MAX_SYMBOLS + 1)];
  uint32_t leaf = 0, node = m, next = m;
  for (uint32_t i = 0; i < m; i++)
    wt[i] = w[i];
  for (uint32_t made = 0; made + 1 < m; made++) { /* m - 1 merges */
    uint32_t pick[2];
    for (int q = 0; q < 2; q++) {
      if (leaf < m && (node >= next || wt[leaf] <= wt[node]))
        pick[q] = leaf++;
      else
        pick[q] = node++;
    }
    wt[next] = wt[pick[0]] + wt[pick[1]];
    parent[pick[0]] = parent[pick[1]] = next++;
  }
  uint8_t depth[2 * (IBP_STAGE_MAX_SYMBOLS + 1)];
  if (next < 1 || next > sizeof depth)
    return;            /* m >= 2 keeps next in 3 .. 2m - 1 */
  depth[next - 1] = 0; /* the root */
  for (uint32_t i = next - 1; i-- > 0;)
    depth[i] =
        (uint8_t)(depth[parent[i]] + 1 > 255 ? 255 : depth[parent[i]] + 1);
  for (uint32_t i = 0; i < m; i++)
    len[i] = depth[i];
}

/* Limits lengths (sorted by ascending weight) to LMAX and keeps the Kraft
 * sum <= 1: clamp, then lengthen the longest codes still short of LMAX
 * (the rarest first) until it fits, then shorten the most frequent codes
 * while the slack allows. */
static void limit_lengths(uint8_t *len, uint32_t m) {
  const uint32_t one = 1u << LMAX;
  uint32_t kraft = 0;
  for (uint32_t i = 0; i < m; i++) {
    if (len[i] > LMAX)
      len[i] = LMAX;
    kraft += one >> len[i];
  }
  while (kraft > one) {
    uint32_t best = m;
    for (uint32_t i = 0; i < m; i++) /* the longest below LMAX, rarest */
      if (len[i] < LMAX && (best == m || len[i] > len[best]))
        best = i;
    kraft -= one >> (len[best] + 1);
    len[best]++;
  }
  for (uint32_t i = m; i-- > 0;) /* most frequent last in the order */
    while (len[i] > 1 && kraft + (one >> len[i]) <= one) {
      kraft += one >> len[i];
      len[i]--;
    }
}

static uint32_t bit_reverse(uint32_t c, uint32_t n) {
  uint32_t r = 0;
  for (uint32_t i = 0; i < n; i++)
    r |= ((c >> i) & 1u) << (n - 1 - i);
  return r;
}

/* Canonical codes from st->lengths (Kraft <= 1 checked by the caller):
 * the encode pairs and the decode table. */
static void derive_tables(ibp_stage *st) {
  const uint32_t e = info_of(st->dtype).bits, ns = st->symbols;
  uint32_t code = 0, codes[IBP_STAGE_MAX_SYMBOLS + 1] = {0};
  memset(st->decode, 0, sizeof st->decode);
  for (uint32_t l = 1; l <= LMAX; l++) {
    for (uint32_t s = 0; s <= ns; s++) {
      if (st->lengths[s] != l)
        continue;
      uint32_t r = bit_reverse(code++, l);
      codes[s] = r;
      for (uint32_t h = 0; h < (1u << (LMAX - l)); h++)
        st->decode[r | h << l] = (uint16_t)(s | l << 10);
    }
    code <<= 1;
  }
  const uint32_t esc_len = st->lengths[ns];
  st->longest = (uint8_t)(esc_len ? esc_len + e : 0);
  for (uint32_t s = 0; s < ns; s++)
    if (st->lengths[s] > st->longest)
      st->longest = st->lengths[s];
  for (uint32_t s = 0; s < ns; s++) {
    if (st->lengths[s]) {
      st->enc_len[s] = st->lengths[s];
      st->enc[s] = codes[s];
    } else if (esc_len) { /* escape + raw field */
      st->enc_len[s] = (uint8_t)(esc_len + e);
      st->enc[s] = codes[ns] | s << esc_len;
    } else { /* no escape: never written */
      st->enc_len[s] = 0;
      st->enc[s] = 0;
    }
  }
}

static ibp_status exp_finish(ibp_stage *st) {
  const uint32_t ns = st->symbols;
  uint32_t idx[IBP_STAGE_MAX_SYMBOLS + 1], m = 0;
  uint64_t w[IBP_STAGE_MAX_SYMBOLS + 1];
  uint64_t total = 0, escaped = 1; /* the escape weighs at least 1 */
  for (uint32_t s = 0; s < ns; s++)
    total += st->counts[s];
  /* a symbol whose own code would be longer than LMAX - 1 bits goes as
   * the escape + raw field: rare symbols would otherwise take a share of
   * the code space far above their weight once lengths are limited */
  int need_escape = 0;
  for (uint32_t s = 0; s < ns; s++) {
    uint64_t c = st->counts[s];
    if (c && (c << (LMAX - 1)) >= total) {
      idx[m++] = s;
    } else {
      need_escape = 1;
      escaped += c;
    }
  }
  if (need_escape)
    idx[m++] = ns; /* the escape */
  if (m == 1)      /* one symbol: give it a second, unused partner */
    idx[m++] = idx[0] == ns ? 0 : ns;
  /* insertion sort by (weight, index): m <= 513, once per cluster */
  for (uint32_t i = 1; i < m; i++) {
    uint32_t v = idx[i], j = i;
    uint64_t wv = v == ns ? escaped : st->counts[v];
    while (j > 0) {
      uint32_t u = idx[j - 1];
      uint64_t wu = u == ns ? escaped : st->counts[u];
      if (wu < wv || (wu == wv && u < v))
        break;
      idx[j] = u;
      j--;
    }
    idx[j] = v;
  }
  for (uint32_t i = 0; i < m; i++)
    w[i] = idx[i] == ns          ? escaped
           : !st->counts[idx[i]] ? 1
                                 : st->counts[idx[i]];
  uint8_t len[IBP_STAGE_MAX_SYMBOLS + 1];
  huffman_lengths(w, m, len);
  limit_lengths(len, m);
  memset(st->lengths, 0, sizeof st->lengths);
  for (uint32_t i = 0; i < m; i++)
    st->lengths[idx[i]] = len[i];
  derive_tables(st);
  return IBP_OK;
}

/* ---- the field ----------------------------------------------------------- */

static void exp_field(const ibp_stage *st, uint8_t *field, uint32_t R) {
  dtype_info d = info_of(st->dtype);
  uint32_t m = ((1u << d.bits) - 1) << d.lo;
  for (uint32_t b = 0; b < R; b++)
    field[b] = (uint8_t)(m >> (8 * (b % d.bytes)));
}

static void exp_strip(const ibp_stage *st, const uint8_t *t, uint8_t *out,
                      uint32_t R) {
  dtype_info d = info_of(st->dtype);
  if (d.bytes == 2) {
    const uint16_t keep = (uint16_t)((1u << d.lo) - 1);
    const uint64_t k4 = keep * 0x0001000100010001ULL;
    uint32_t b = 0;
    for (; b + 8 <= R; b += 8)
      ibp__store64(out + b, ibp__load64(t + b) & k4);
    for (; b < R; b += 2) {
      out[b] = (uint8_t)(t[b] & keep);
      out[b + 1] = (uint8_t)(t[b + 1] & (keep >> 8));
    }
  } else {
    const uint64_t k2 = ((1ULL << d.lo) - 1) * 0x0000000100000001ULL;
    uint32_t b = 0;
    for (; b + 8 <= R; b += 8)
      ibp__store64(out + b, ibp__load64(t + b) & k2);
    for (; b < R; b += 4) {
      uint32_t v;
      memcpy(&v, t + b, 4);
      v &= (1u << d.lo) - 1;
      memcpy(out + b, &v, 4);
    }
  }
}

/* ---- segments ------------------------------------------------------------ */

/* Bits of a segment length field: enough for a whole segment's worst
 * case (every value at the longest code or escape). */
static uint32_t field_width(const ibp_stage *st, uint32_t values) {
  uint32_t seg = 1u << st->segment_log2;
  uint64_t most = (uint64_t)(values < seg ? values : seg) * st->longest;
  uint32_t w = 1;
  while (w < 63 && (most >> w) != 0)
    w++;
  return w;
}

static uint32_t segments(const ibp_stage *st, uint32_t values) {
  return (values + (1u << st->segment_log2) - 1) >> st->segment_log2;
}

static uint64_t exp_field_bits(const ibp_stage *st, uint32_t R) {
  dtype_info d = info_of(st->dtype);
  return (uint64_t)(R / d.bytes) * d.bits;
}

/* The hot loops take the value type's geometry as constants: one copy per
 * type, chosen by BY_DTYPE (the field is a value's top bits, so a shift
 * alone extracts it). */
#define EXP_INLINE static inline __attribute__((always_inline))
#define BY_DTYPE(st, CALL)                                                     \
  switch ((st)->dtype) {                                                       \
  case IBP_DTYPE_BF16:                                                         \
    return CALL(2, 7);                                                         \
  case IBP_DTYPE_F16:                                                          \
    return CALL(2, 10);                                                        \
  default:                                                                     \
    return CALL(4, 23);                                                        \
  }
_Static_assert(7 + 9 == 16 && 10 + 6 == 16 && 23 + 9 == 32,
               "BY_DTYPE: IBP_DTYPE_LIST's fields are the values' top bits");

EXP_INLINE uint32_t field_c(const uint8_t *t, uint32_t j, uint32_t bytes,
                            uint32_t lo) {
  if (bytes == 2) {
    uint16_t v;
    memcpy(&v, t + 2 * (size_t)j, 2);
    return (uint32_t)v >> lo;
  }
  uint32_t v;
  memcpy(&v, t + 4 * (size_t)j, 4);
  return v >> lo;
}

/* Bits the stage writes, or 2^40 when a value has no code. */
EXP_INLINE uint64_t bits_c(const ibp_stage *st, const uint8_t *t, uint32_t R,
                           uint32_t bytes, uint32_t lo) {
  const uint32_t values = R / bytes, S = segments(st, values);
  uint64_t bits = (uint64_t)(S - 1) * field_width(st, values);
  if (st->lengths[st->symbols]) { /* an escape: every value has its bits */
    uint32_t b0 = 0, b1 = 0, b2 = 0, b3 = 0, j = 0;
    for (; j + 4 <= values; j += 4) {
      b0 += st->enc_len[field_c(t, j, bytes, lo)];
      b1 += st->enc_len[field_c(t, j + 1, bytes, lo)];
      b2 += st->enc_len[field_c(t, j + 2, bytes, lo)];
      b3 += st->enc_len[field_c(t, j + 3, bytes, lo)];
    }
    for (; j < values; j++)
      b0 += st->enc_len[field_c(t, j, bytes, lo)];
    return bits + b0 + b1 + b2 + b3;
  }
  unsigned uncoded = 0;
  for (uint32_t j = 0; j < values; j++) {
    uint32_t l = st->enc_len[field_c(t, j, bytes, lo)];
    uncoded |= l == 0;
    bits += l;
  }
  return uncoded ? 1ULL << 40 : bits;
}

static uint64_t exp_bits(const ibp_stage *st, const uint8_t *t, uint32_t R) {
#define BITS_CALL(bytes, lo) bits_c(st, t, R, bytes, lo)
  BY_DTYPE(st, BITS_CALL)
#undef BITS_CALL
}

/* ---- bit I/O ------------------------------------------------------------- */

/* Appends LSB-first from byte pos, bit n; stores 32 bits at a time. */
typedef struct bit_out {
  uint8_t *out;
  size_t pos;   /* byte where acc goes */
  uint64_t acc; /* pending bits, the first in bit 0 */
  unsigned n;   /* pending bits, < 32 between calls */
} bit_out;

/* Starts at bit `at`, keeping (keep_low) or zeroing the bits below it in
 * its byte. */
static inline bit_out out_at(uint8_t *out, uint64_t at, int keep_low) {
  bit_out o = {out, (size_t)(at >> 3), 0, (unsigned)(at & 7)};
  if (keep_low && o.n)
    o.acc = out[o.pos] & ((1u << o.n) - 1);
  return o;
}

/* v < 2^nbits, nbits <= 32.  Returns 0 instead of storing a word that
 * would end past bit `limit` (the stream cannot end there). */
static inline int put_bits(bit_out *o, uint64_t v, unsigned nbits,
                           uint64_t limit) {
  o->acc |= v << o->n;
  o->n += nbits;
  if (o->n < 32)
    return 1;
  if (8 * ((uint64_t)o->pos + 4) > limit)
    return 0;
  uint32_t w = (uint32_t)o->acc;
  memcpy(o->out + o->pos, &w, 4);
  o->pos += 4;
  o->acc >>= 32;
  o->n -= 32;
  return 1;
}

/* Stores the pending bits (the last byte zero-padded above them, or ORed
 * into the byte when `or_last`). */
static inline void put_flush(bit_out *o, int or_last) {
  for (unsigned b = 0; b < o->n; b += 8, o->pos++) {
    uint8_t v = (uint8_t)(o->acc >> b);
    if (or_last && b + 8 >= o->n)
      o->out[o->pos] |= v;
    else
      o->out[o->pos] = v;
  }
  o->n = 0;
  o->acc = 0;
}

/* The four fields of values [j, j + 4) into s[0..3]. */
EXP_INLINE void fields4(const uint8_t *t, uint32_t j, uint32_t bytes,
                        uint32_t lo, uint32_t *s) {
  if (bytes == 2) { /* the four values in one load */
    const uint64_t q = ibp__load64(t + 2 * (size_t)j);
    const uint32_t f = (1u << (16 - lo)) - 1;
    s[0] = (uint32_t)(q >> lo) & f;
    s[1] = (uint32_t)(q >> (16 + lo)) & f;
    s[2] = (uint32_t)(q >> (32 + lo)) & f;
    s[3] = (uint32_t)(q >> (48 + lo));
  } else {
    for (unsigned k = 0; k < 4; k++)
      s[k] = field_c(t, j + k, bytes, lo);
  }
}

/* Two values' codes joined, *len their bits (at most 2 x 18, under 2^40):
 * a code and its length are two look-ups (enc, enc_len), no field cut out
 * of one entry. */
EXP_INLINE uint64_t pair_code(const uint32_t *enc, const uint8_t *enc_len,
                              uint32_t s0, uint32_t s1, unsigned *len) {
  const unsigned l0 = enc_len[s0];
  *len = l0 + enc_len[s1];
  return (uint64_t)enc[s0] | (uint64_t)enc[s1] << l0;
}

/* Appends c's `bits` bits (c < 2^bits, bits <= 56) to the n < 8 pending
 * ones, stores them and keeps the last n < 8. */
EXP_INLINE void put_store(uint8_t *out, size_t *pos, uint64_t *acc, unsigned *n,
                          uint64_t c, unsigned bits) {
  *acc |= c << *n;
  *n += bits;
  ibp__store64(out + *pos, *acc);
  *pos += *n >> 3;
  *acc >>= *n & ~7u;
  *n &= 7;
}

/* Two pairs: one store when their bits fit 56, else two. */
EXP_INLINE void put_pairs(uint8_t *out, size_t *pos, uint64_t *acc, unsigned *n,
                          uint64_t c01, unsigned l01, uint64_t c23,
                          unsigned l23) {
  if (l01 + l23 <= 56) {
    put_store(out, pos, acc, n, c01 | c23 << l01, l01 + l23);
  } else {
    put_store(out, pos, acc, n, c01, l01); /* n < 8, c01 < 2^40 */
    put_store(out, pos, acc, n, c23, l23);
  }
}

/* The codes of values [j, j + 8) joined, *bits their bits: one running
 * shift, in a few registers (joined as a tree of pairs, with a code's
 * length cut out of its entry, they took twice as many and spilled: the
 * encode of 16 MiB of bench_prepare's weights 110.8 -> 82.3 million
 * instructions, callgrind).  Valid only where *bits <= 56; past that the
 * shifts wrap (& 63, free with shlx) and the caller joins them as pairs. */
EXP_INLINE uint64_t eight_codes(const uint32_t *enc, const uint8_t *enc_len,
                                const uint8_t *t, uint32_t j, uint32_t bytes,
                                uint32_t lo, unsigned *bits) {
  const uint8_t *v = t + (size_t)j * bytes; /* (constant offsets below) */
  const uint32_t s0 = field_c(v, 0, bytes, lo);
  uint64_t c = enc[s0];
  unsigned at = enc_len[s0];
  for (uint32_t k = 1; k < 8; k++) {
    const uint32_t sk = field_c(v, k, bytes, lo);
    c |= (uint64_t)enc[sk] << (at & 63);
    at += enc_len[sk];
  }
  *bits = at;
  return c;
}

/* A segment's values [j, j1) with no check: every value has a code or the
 * escape, and the codes end inside out's R bytes with 8 to spare.  Eight
 * values a store where their codes fit 56 bits (bf16 weights: about 34),
 * else as pairs, four or two a store; codes are joined before they meet
 * the stream (one shift by the stream's bit count per store).  The stream
 * is the same whichever way its codes were stored. */
EXP_INLINE void encode_run(const uint32_t *enc, const uint8_t *enc_len,
                           const uint8_t *t, uint32_t j, uint32_t j1,
                           uint8_t *out, size_t *pos_io, uint64_t *acc_io,
                           unsigned *n_io, uint32_t bytes, uint32_t lo) {
  size_t pos = *pos_io;
  uint64_t acc = *acc_io;
  unsigned n = *n_io;
  for (; j + 8 <= j1; j += 8) {
    unsigned bits;
    const uint64_t c = eight_codes(enc, enc_len, t, j, bytes, lo, &bits);
    if (__builtin_expect(bits <= 56, 1)) {
      put_store(out, &pos, &acc, &n, c, bits);
      continue;
    }
    uint32_t s[8];
    unsigned l01, l23, l45, l67;
    fields4(t, j, bytes, lo, s);
    fields4(t, j + 4, bytes, lo, s + 4);
    const uint64_t c01 = pair_code(enc, enc_len, s[0], s[1], &l01);
    const uint64_t c23 = pair_code(enc, enc_len, s[2], s[3], &l23);
    const uint64_t c45 = pair_code(enc, enc_len, s[4], s[5], &l45);
    const uint64_t c67 = pair_code(enc, enc_len, s[6], s[7], &l67);
    const unsigned la = l01 + l23, lb = l45 + l67;
    if (la + lb <= 56) {
      const uint64_t ca = c01 | c23 << l01, cb = c45 | c67 << l45;
      put_store(out, &pos, &acc, &n, ca | cb << la, la + lb);
    } else {
      put_pairs(out, &pos, &acc, &n, c01, l01, c23, l23);
      put_pairs(out, &pos, &acc, &n, c45, l45, c67, l67);
    }
  }
  for (; j + 4 <= j1; j += 4) {
    uint32_t s[4];
    unsigned l01, l23;
    fields4(t, j, bytes, lo, s);
    const uint64_t c01 = pair_code(enc, enc_len, s[0], s[1], &l01);
    const uint64_t c23 = pair_code(enc, enc_len, s[2], s[3], &l23);
    put_pairs(out, &pos, &acc, &n, c01, l01, c23, l23);
  }
  for (; j + 2 <= j1; j += 2) {
    const uint32_t s0 = field_c(t, j, bytes, lo);
    const uint32_t s1 = field_c(t, j + 1, bytes, lo);
    const unsigned l0 = enc_len[s0], l1 = enc_len[s1];
    const uint64_t c = (uint64_t)enc[s0] | (uint64_t)enc[s1] << l0;
    acc |= c << n; /* n < 8, c < 2^40 */
    n += l0 + l1;
    ibp__store64(out + pos, acc);
    pos += n >> 3;
    acc >>= n & ~7u;
    n &= 7;
  }
  if (j < j1) {
    const uint32_t s0 = field_c(t, j, bytes, lo);
    acc |= (uint64_t)enc[s0] << n;
    n += enc_len[s0];
    ibp__store64(out + pos, acc);
    pos += n >> 3;
    acc >>= n & ~7u;
    n &= 7;
  }
  *pos_io = pos;
  *acc_io = acc;
  *n_io = n;
}

/* One pass: the codes go from bit c0, after the S - 1 segment lengths,
 * whose size is known in advance; each length follows its segment into
 * the header writer.  The two share c0's byte: the codes' writer leaves
 * its low bits 0 and the header's last flush ORs them in (as pack_body.h's
 * bitmap and payload).  A segment whose codes surely end 8 bytes before
 * out's R bytes do, when every value can be sent (the code has an escape),
 * goes through encode_run; any other, value by value: 8-byte stores while
 * they stay inside out, a byte at a time near the end, where it also stops
 * once the stream passes `limit`. */
EXP_INLINE uint64_t encode_c(const ibp_stage *st, const uint8_t *t, uint32_t R,
                             uint8_t *out, uint64_t at, uint64_t limit,
                             uint32_t bytes, uint32_t lo) {
  const uint32_t values = R / bytes, S = segments(st, values);
  const uint32_t W = field_width(st, values), V = 1u << st->segment_log2;
  const uint64_t c0 = at + (uint64_t)(S - 1) * W;
  if (c0 > limit)
    return limit + 1;
  bit_out hdr = out_at(out, at, 1);
  size_t pos = (size_t)(c0 >> 3); /* the codes: pending bits acc, n < 8 */
  unsigned n = (unsigned)(c0 & 7);
  uint64_t acc = S == 1 && n ? out[pos] & ((1u << n) - 1) : 0;
  const size_t fast_end = R >= 8 ? R - 8 : 0; /* 8-byte stores up to here */
  const uint32_t *enc = st->enc;
  const int sendable = st->lengths[st->symbols] != 0; /* an escape */
  uint32_t uncoded = 0;
  for (uint32_t s = 0; s < S; s++) {
    const uint32_t j0 = s * V, j1 = s + 1 < S ? j0 + V : values;
    const uint64_t from = 8 * (uint64_t)pos + n;
    uint32_t j = j0;
    if (sendable && R >= 8 &&
        pos + (7 + (uint64_t)(j1 - j0) * st->longest) / 8 <= fast_end) {
      encode_run(enc, st->enc_len, t, j0, j1, out, &pos, &acc, &n, bytes, lo);
      j = j1;
    }
    /* two values per store: n + 2 * 20 < 64 */
    for (; j + 2 <= j1 && R >= 8 && pos <= fast_end; j += 2) {
      const uint32_t s0 = field_c(t, j, bytes, lo);
      const uint32_t s1 = field_c(t, j + 1, bytes, lo);
      const uint32_t l0 = st->enc_len[s0], l1 = st->enc_len[s1];
      uncoded |= (l0 - 1) | (l1 - 1); /* bit 31: a value without code */
      acc |= (uint64_t)enc[s0] << n;
      acc |= (uint64_t)enc[s1] << (n + l0);
      n += l0 + l1;
      ibp__store64(out + pos, acc);
      pos += n >> 3;
      acc >>= n & ~7u;
      n &= 7;
    }
    for (; j < j1; j++) { /* the rest, near the end of out a byte at a time */
      const uint32_t s0 = field_c(t, j, bytes, lo), l = st->enc_len[s0];
      uncoded |= l - 1;
      acc |= (uint64_t)enc[s0] << n;
      for (n += l; n >= 8; n -= 8, acc >>= 8) {
        if (8 * ((uint64_t)pos + 1) > limit)
          return limit + 1;
        out[pos++] = (uint8_t)acc;
      }
    }
    if (uncoded >> 31)
      return limit + 1; /* a value the code cannot send: stored raw */
    const uint64_t len = 8 * (uint64_t)pos + n - from;
    if (s + 1 < S)
      put_bits(&hdr, len, W, limit); /* ends by c0 <= limit */
  }
  const uint64_t end = 8 * (uint64_t)pos + n;
  if (end > limit)
    return limit + 1;
  if (n)
    out[pos] = (uint8_t)acc;
  if (S > 1)
    put_flush(&hdr, (c0 & 7) != 0);
  return end;
}

#define ENCODE_CALL(bytes, lo) encode_c(st, t, R, out, at, limit, bytes, lo)
static uint64_t encode_portable(const ibp_stage *st, const uint8_t *t,
                                uint32_t R, uint8_t *out, uint64_t at,
                                uint64_t limit) {
  BY_DTYPE(st, ENCODE_CALL)
}

/* The same body where the codec packs with BMI2 (dispatch.c): its
 * shifts by a register (shlx, shrx) are one instruction each, not three
 * (1 GiB of bf16 weights in cache: 0.49 -> 0.41 CPU s). */
__attribute__((target("bmi2"))) static uint64_t
encode_bmi2(const ibp_stage *st, const uint8_t *t, uint32_t R, uint8_t *out,
            uint64_t at, uint64_t limit) {
  BY_DTYPE(st, ENCODE_CALL)
}
#undef ENCODE_CALL

static uint64_t exp_encode(const ibp_stage *st, const uint8_t *t, uint32_t R,
                           uint8_t *out, uint64_t at, uint64_t limit) {
  return ibp__pack() == &ibp__pack_bmi2
             ? encode_bmi2(st, t, R, out, at, limit)
             : encode_portable(st, t, R, out, at, limit);
}

/* The next `n` (<= 57) bits at bit pos of src[0, len); bits past the end
 * read as 0 (the caller checks the position afterwards). */
static inline uint64_t peek_bits(const uint8_t *src, size_t len, size_t pos,
                                 unsigned n) {
  size_t q = pos >> 3;
  uint64_t v = 0;
  if (q + 8 <= len)
    v = ibp__load64(src + q);
  else if (q < len)
    memcpy(&v, src + q, len - q);
  return (v >> (pos & 7)) & ((1ULL << n) - 1);
}

/* Decodes `count` values from bit *pos into dst's values [j0, j0+count). */
static ibp_status decode_segment(const ibp_stage *st, dtype_info d,
                                 const uint8_t *src, size_t src_len,
                                 size_t *pos, uint8_t *dst, uint32_t j0,
                                 uint32_t count) {
  const uint64_t end = 8 * (uint64_t)src_len;
  size_t p = *pos;
  for (uint32_t j = j0; j < j0 + count; j++) {
    uint16_t e = st->decode[peek_bits(src, src_len, p, LMAX)];
    uint32_t l = e >> 10, s = e & 0x3FF;
    if (l == 0)
      return IBP_ERR_CORRUPT;
    p += l;
    if (s == ESC_SYM(st)) {
      s = (uint32_t)peek_bits(src, src_len, p, d.bits);
      p += d.bits;
    }
    if (p > end)
      return IBP_ERR_CORRUPT;
    if (dst) {
      uint32_t v = s << d.lo;
      for (uint32_t b = 0; b < d.bytes; b++)
        dst[(size_t)j * d.bytes + b] |= (uint8_t)(v >> (8 * b));
    }
  }
  *pos = p;
  return IBP_OK;
}

static ibp_status exp_decode(const ibp_stage *st, const uint8_t *src,
                             size_t src_len, size_t *pos, uint8_t *dst,
                             uint32_t R) {
  dtype_info d = info_of(st->dtype);
  const uint32_t values = R / d.bytes, S = segments(st, values);
  const uint32_t W = field_width(st, values), V = 1u << st->segment_log2;
  const uint64_t end = 8 * (uint64_t)src_len;
  size_t p = *pos, at;
  if ((uint64_t)(S - 1) * W > end - (p < end ? p : end))
    return IBP_ERR_CORRUPT;
  at = p + (size_t)(S - 1) * W; /* the first segment's codes */
  for (uint32_t s = 0; s < S; s++) {
    uint32_t count = s + 1 < S ? V : values - s * V;
    size_t q = at;
    ibp_status r = decode_segment(st, d, src, src_len, &q, dst, s * V, count);
    if (r != IBP_OK)
      return r;
    if (s + 1 < S && q - at != peek_bits(src, src_len, p + (size_t)s * W, W))
      return IBP_ERR_CORRUPT; /* the segment does not end where it says */
    at = q;
  }
  *pos = at;
  return IBP_OK;
}

/* ---- descriptor ---------------------------------------------------------- */

static size_t exp_table_bytes(const ibp_stage *st) {
  return 2 + (st->symbols + 2) / 2; /* dtype, segment_log2, nibbles */
}

static void exp_write(const ibp_stage *st, uint8_t *out) {
  out[0] = (uint8_t)st->dtype;
  out[1] = (uint8_t)st->segment_log2;
  memset(out + 2, 0, (st->symbols + 2) / 2);
  for (uint32_t s = 0; s <= st->symbols; s++)
    out[2 + s / 2] |= (uint8_t)(st->lengths[s] << (4 * (s % 2)));
}

static ibp_status exp_read(ibp_stage *st, const uint8_t *src, size_t avail,
                           uint32_t R) {
  if (avail < 2)
    return IBP_ERR_CORRUPT;
  st->dtype = src[0];
  st->segment_log2 = src[1];
  if (src[1] == 0 || exp_init(st, R) != IBP_OK)
    return IBP_ERR_CORRUPT;
  const size_t nb = (st->symbols + 2) / 2;
  if (avail < 2 + nb)
    return IBP_ERR_CORRUPT;
  uint32_t kraft = 0, codes = 0;
  for (uint32_t s = 0; s <= st->symbols; s++) {
    uint32_t l = (src[2 + s / 2] >> (4 * (s % 2))) & 15u;
    if (l > LMAX)
      return IBP_ERR_CORRUPT;
    st->lengths[s] = (uint8_t)l;
    kraft += l ? (1u << LMAX) >> l : 0;
    codes += l != 0;
  }
  if ((st->symbols + 1) % 2 && (src[2 + nb - 1] >> 4))
    return IBP_ERR_CORRUPT; /* the unused nibble */
  if (codes == 0 || kraft > (1u << LMAX))
    return IBP_ERR_CORRUPT;
  derive_tables(st);
  return IBP_OK;
}

const ibp__stage_ops ibp__stage_exp = {
    exp_init,   exp_count,       exp_finish,     exp_field,
    exp_strip,  exp_bits,        exp_field_bits, exp_encode,
    exp_decode, exp_table_bytes, exp_write,      exp_read,
};
