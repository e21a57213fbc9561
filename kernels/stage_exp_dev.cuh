/*
 * The exponent stage's device decoder (docs/FORMAT.md §9.3; the design is
 * §9.6): a warp routine that ORs one tensor's sign+exponent field, coded
 * in the stage part of its stream, into the window of the tensor that its
 * IBP part already decoded (the field's bits 0 there).  Part of
 * ibp_decompress.cu (included there, after bits_at); ibp_dev_* only.
 *
 * Lane l decodes segments l, l + 32, ... of the tensor.  A round of 32
 * segments reads their stored lengths (one per lane) and finds each one's
 * first code with a warp scan, carried across rounds; then every lane runs
 * on its own: two values a step, the two codes looked up in the decode
 * table (global memory, L1-cached, from ibp_decompress; shared memory from
 * ibp_stage_exp) from one peek of 32 stream bits (two word loads and a
 * funnel shift: no bit buffer to refill), their fields -- in place in
 * the table's entries -- merged by one prmt and ORed into the pair of
 * values with one word read-modify-write; an escape's raw field is taken
 * from a peek of its own (rare).  Values at the window's edges, or a
 * lone one before or after the pairs, go one by one.  The last round --
 * a tensor's only one up to 16 segments -- splits each segment's bits
 * among the lanes it leaves idle (stage_split), whose counts of the codes
 * in their bits take the count table's look-ups: all the codes that start
 * and end in the next 11 bits at once.  Segments that end before the
 * window are only summed, not decoded.
 *
 * Never writes outside the window.  Stream reads clamp at the stream's
 * end bit, so a corrupt stream gives wrong bytes but reads no word past
 * the one after its last: the caller keeps that word readable (a staging
 * buffer, or padding).
 */

/* One tensor's stage decode. */
struct stage_exp_job {
  const uint32_t *sw;     /* the stream's words (4-byte aligned) */
  const uint16_t *table;  /* the cluster's decode table (stage_plan.c) */
  const uint32_t *counts; /* ... and its count table */
  uint8_t *dst;           /* where window byte w0 goes */
  uint32_t bit0;          /* the stage part's first bit, from sw */
  uint32_t end;           /* the stream's end bit, from sw */
  uint32_t last;          /* the last bit a read starts at (stage_clamp;
                             set by stage_exp_warp) */
  uint32_t w0, w1;        /* the window of the tensor, w0 < w1 */
  uint32_t values;        /* R / value bytes */
  uint32_t segment_log2;  /* values per segment: 2^segment_log2 */
  uint32_t length_bits;   /* W, 1 .. 32 */
};

/* The dtypes of docs/FORMAT.md §9.3 (ibp/stage.h IBP_DTYPE_LIST): value
 * bytes, the field's lowest bit, its bits, and its lowest bit in the
 * value's top 16 bits (where a table entry holds it). */
template <unsigned D> struct stage_dtype;
template <> struct stage_dtype<1> { /* bf16 */
  enum { VB = 2, LO = 7, E = 9, LO16 = 7 };
};
template <> struct stage_dtype<2> { /* float16 */
  enum { VB = 2, LO = 10, E = 6, LO16 = 10 };
};
template <> struct stage_dtype<3> { /* float32 */
  enum { VB = 4, LO = 23, E = 9, LO16 = 7 };
};

/* Values [full0, full0 + fulls) of the tensor lie whole in the window
 * and land aligned: one typed read-modify-write each. */
struct stage_exp_full {
  uint32_t full0, fulls;
};

/* The values whole in the window, where it lands aligned. */
template <unsigned VB>
IBP_DEV stage_exp_full stage_full(const stage_exp_job &j) {
  stage_exp_full w = {(j.w0 + VB - 1) / VB, 0};
  if ((((uintptr_t)j.dst - j.w0) & (VB - 1)) == 0 && j.w1 / VB > w.full0)
    w.fulls = j.w1 / VB - w.full0;
  return w;
}

/* A decoded field word as it is ORed into the values (one place: the
 * broken-stage variant of tests/sim/kernels/CMakeLists.txt changes this
 * function's return to test that libibp's self-test catches it). */
IBP_DEV uint32_t stage_out(uint32_t f) {
  return f;
}

/* ORs f (the field in place, f < 2^(8 VB)) into value v of the window
 * (values outside it: nothing). */
template <unsigned VB>
IBP_DEV void stage_field_or(const stage_exp_job &j, const stage_exp_full &w,
                            uint32_t v, uint32_t f) {
  const uint32_t at = v * VB;
  f = stage_out(f);
  if (v - w.full0 < w.fulls) {
    if (VB == 2) {
      uint16_t *d = (uint16_t *)(j.dst + (at - j.w0));
      *d = (uint16_t)(*d | f);
    } else {
      uint32_t *d = (uint32_t *)(j.dst + (at - j.w0));
      *d = *d | f;
    }
    return;
  }
  IBP_NO_UNROLL /* the window's edges or a misaligned destination: rare */
      for (uint32_t b = 0; b < VB; b++) {
    IBP_MARK(MARK_EXP_BYTES);
    if (at + b >= j.w0 && at + b < j.w1)
      j.dst[at + b - j.w0] |= (uint8_t)(f >> (8 * b));
  }
}

/* Bit p clamped for a read (two words from p's): at the stream's end, or
 * one bit before it where the stream ends on a word's edge -- so that the
 * second word is at most the one after the stream's last, the only one past
 * it the caller keeps readable (clamped at end, a stream of a whole number
 * of words was read two words past: a 4 KiB bf16 tensor's 2724-byte stream
 * faulted on a guard page).  Bits from end on are never decoded. */
IBP_DEV uint32_t stage_last(uint32_t end) {
  return (end & 31u) || !end ? end : end - 1u;
}
IBP_DEV uint32_t stage_clamp(const stage_exp_job &j, uint32_t p) {
  return p < j.last ? p : j.last;
}

/* The 32 stream bits from bit p on, p at most stage_clamp's bit (so the
 * second word read is at most the one after the stream's last). */
IBP_DEV uint32_t stage_peek(const stage_exp_job &j, uint32_t p) {
  return bits_at_lea(j.sw, p);
}

/* The table entry of the code at the peek x: its field in place in the
 * value's top 16 bits | IBP_KERNEL_STAGE_ESC | its bits, an escape's
 * code's and raw field's together (IBP_KERNEL_STAGE_BITS; stage_plan.c). */
IBP_DEV uint32_t stage_entry(const stage_exp_job &j, uint32_t x) {
  return ibp_dev_ld_u16(j.table, x & (IBP_KERNEL_STAGE_TABLE - 1u));
}

/* The bits of the code of entry e (of either table). */
IBP_DEV uint32_t stage_bits(uint32_t e) {
  return e & IBP_KERNEL_STAGE_BITS;
}

/* The count table's entry at the peek x (stage_plan.c): the codes that
 * start and end in the next 11 bits, their bits (IBP_KERNEL_STAGE_BITS),
 * where they start (bit 5 + o: one at x's bit o) and their count << 16. */
IBP_DEV uint32_t stage_counts(const stage_exp_job &j, uint32_t x) {
  return *(const uint32_t *)ibp_dev_at((const uint8_t *)j.counts,
                                       x & (IBP_KERNEL_STAGE_TABLE - 1u), 4);
}

/* Steps p over the codes that start in [p, pe) by count-table look-ups,
 * while p < pe (pe + 10 <= bn: every code a step steps over starts before
 * bn); adds their count to c and (KEEP) ORs into kept the positions of
 * those that start before b + 27 (bit 5 + i: one at b + i). */
template <bool KEEP>
IBP_DEV void stage_count_steps(const stage_exp_job &j, uint32_t &p, uint32_t pe,
                               uint32_t b, uint32_t &c, uint32_t &kept) {
  IBP_NO_UNROLL
  for (; p < pe;) {
    IBP_MARK(KEEP ? MARK_EXP_SCOUT : MARK_EXP_COUNT);
    const uint32_t e = stage_counts(j, stage_peek(j, p));
    if (KEEP)
      kept |= ibp_dev_shl_clamp(e & 0xFFE0u, p - b);
    c += e >> 16;
    p += stage_bits(e);
  }
}

/* Steps p over the codes that start in [p, bn) (bn at most the stream's
 * end bit: no read clamped); returns how many, and ORs into kept the
 * positions of those that start before b + 27 (bit 5 + i: one at b + i).
 * While p + 10 < bn, a step takes all the codes that start and end in the
 * next 11 bits (the count table: all start before bn), the positions kept
 * only while p < b + 27; then a step takes those of them that start
 * before bn and stops at the first that starts at or past it. */
IBP_DEV uint32_t stage_count(const stage_exp_job &j, uint32_t &p, uint32_t b,
                             uint32_t bn, uint32_t &kept) {
  uint32_t c = 0;
  const uint32_t bm = bn > 10u ? bn - 10u : 0u;
  stage_count_steps<true>(j, p, bm < b + 27u ? bm : b + 27u, b, c, kept);
  IBP_MARK(MARK_EXP_SCOUT_STOP);
  stage_count_steps<false>(j, p, bm, b, c, kept);
  IBP_MARK(MARK_EXP_COUNT_STOP);
  IBP_NO_UNROLL
  for (; p < bn;) { /* (bn - p <= 10) */
    IBP_MARK(MARK_EXP_COUNT_TAIL);
    const uint32_t e = stage_counts(j, stage_peek(j, p));
    const uint32_t st = e & 0xFFE0u, lim = (32u << (bn - p)) - 32u;
    const uint32_t in = st & lim, out = st & ~lim;
    c += ibp_dev_popc(in);
    kept |= ibp_dev_shl_clamp(in, p - b);
    /* (out: the first code at or past bn is its lowest bit's) */
    p += out ? ibp_dev_popc((out & (0u - out)) - 1u) - 5u : stage_bits(e);
  }
  IBP_MARK(MARK_EXP_COUNT_END);
  return c;
}

/* The field of entry e, the code at the peek x, in place in the value's top
 * 16 bits: the entry's, or an escape's raw field (which ends its bits). */
template <unsigned D> IBP_DEV uint32_t stage_field(uint32_t e, uint32_t x) {
  typedef stage_dtype<D> T;
  if (e & IBP_KERNEL_STAGE_ESC)
    return ((x >> (stage_bits(e) - T::E)) & ((1u << T::E) - 1u)) << T::LO16;
  return e & (((1u << T::E) - 1u) << T::LO16);
}

/* Decodes the value at bit p (moved on), its field in place in the
 * value's top 16 bits. */
template <unsigned D>
IBP_DEV uint32_t stage_next(const stage_exp_job &j, uint32_t &p) {
  const uint32_t x = stage_peek(j, stage_clamp(j, p));
  const uint32_t e = stage_entry(j, x);
  p += stage_bits(e);
  return stage_field<D>(e, x);
}

/* Values [v, ve) at the window's edges or landing misaligned: checked one
 * by one. */
template <unsigned D>
IBP_DEV void stage_edge(const stage_exp_job &j, const stage_exp_full &w,
                        uint32_t &p, uint32_t v, uint32_t ve) {
  typedef stage_dtype<D> T;
  IBP_NO_UNROLL
  for (; v < ve; v++) {
    IBP_MARK(MARK_EXP_EDGE);
    stage_field_or<T::VB>(j, w, v,
                          stage_next<D>(j, p) << (T::VB == 4 ? 16 : 0));
  }
}

/* The fields of the next two values, each in place in a value's top 16
 * bits, the first's in the word's low half, the second's in its high half
 * (other bits set too: stage_pair_or keeps the fields): the two codes'
 * look-ups from one peek (a code takes at most 11 bits, so the second's
 * 11 are in it), or, where either is an escape, one value at a time (rare:
 * a writer codes every value of share 2^-10 or more). */
template <unsigned D>
IBP_DEV uint32_t stage_pair(const stage_exp_job &j, uint32_t &p) {
  const uint32_t x = stage_peek(j, stage_clamp(j, p));
  const uint32_t e0 = stage_entry(j, x), l0 = stage_bits(e0);
  const uint32_t e1 = stage_entry(j, x >> l0);
  if ((e0 | e1) & IBP_KERNEL_STAGE_ESC) {
    IBP_MARK(MARK_EXP_PAIR_ESC);
    const uint32_t f0 = stage_next<D>(j, p);
    return f0 | stage_next<D>(j, p) << 16;
  }
  p += l0 + stage_bits(e1);
  /* (e0's low half, e1's high: one prmt) */
  return ibp_dev_prmt(e0, e1, 0x5410u);
}

/* Decodes the value at d (2-byte values: a field in place; 4-byte: its top
 * 16 bits), whole in the window, into it (an odd one before or after
 * stage_values' pairs). */
template <unsigned D>
IBP_DEV void stage_one_or(const stage_exp_job &j, uint32_t &p, uint8_t *d) {
  typedef stage_dtype<D> T;
  const uint32_t f = stage_out(stage_next<D>(j, p));
  if (T::VB == 2) {
    uint16_t *o = (uint16_t *)d;
    *o = (uint16_t)(*o | f);
  } else {
    uint32_t *o = (uint32_t *)d;
    *o = *o | f << 16;
  }
}

/* ORs the fields of a pair (stage_pair: its field bits) into the two
 * values at d (aligned to the pair's size: a word of two 2-byte values,
 * or 8 bytes of two 4-byte ones). */
template <unsigned D> IBP_DEV void stage_pair_or(uint8_t *d, uint32_t f) {
  typedef stage_dtype<D> T;
  f = stage_out(f & ((((1u << T::E) - 1u) << T::LO16) * 0x10001u));
  if (T::VB == 2) {
    uint32_t *o = (uint32_t *)d;
    *o = *o | f;
  } else {
    uint64_t *o = (uint64_t *)d;
    *o = *o | ((uint64_t)(f & 0xFFFF0000u) << 32 | f << 16);
  }
}

/* Decodes values [v, ve) from bit p, ORing those in the window into it:
 * those whole in it and aligned two at a time, one read-modify-write per
 * pair, from the first whose pair is aligned to its size (a value before
 * it, or an odd one after the pairs, on its own); those at the window's
 * edges one by one. */
template <unsigned D>
IBP_DEV void stage_values(const stage_exp_job &j, uint32_t p, uint32_t v,
                          uint32_t ve) {
  typedef stage_dtype<D> T;
  const stage_exp_full w = stage_full<T::VB>(j);
  const uint32_t f1 = w.full0 + w.fulls;
  uint32_t h = v >= w.full0 ? v : w.full0 < ve ? w.full0 : ve;
  const uint32_t m = f1 < ve ? (f1 > h ? f1 : h) : ve;
  stage_edge<D>(j, w, p, v, h);
  IBP_MARK(MARK_EXP_RUN);
  uint8_t *d = j.dst + (T::VB * h - j.w0); /* (used where h < m) */
  if (h < m && ((uintptr_t)d & (2u * T::VB - 1u)) != 0) {
    IBP_MARK(MARK_EXP_ODD);
    stage_one_or<D>(j, p, d);
    h++;
    d += T::VB;
  }
  const uint32_t pairs = (m - h) / 2;
  IBP_NO_UNROLL
  for (uint32_t i = 0; i != pairs; i++) {
    IBP_MARK(T::VB == 2 ? MARK_EXP_VALUE : MARK_EXP_VALUE4);
    stage_pair_or<D>(d + 2u * T::VB * i, stage_pair<D>(j, p));
  }
  IBP_MARK(MARK_EXP_RUN_END);
  if ((m - h) & 1u) {
    IBP_MARK(MARK_EXP_ODD);
    stage_one_or<D>(j, p, d + 2u * T::VB * pairs);
  }
  stage_edge<D>(j, w, p, m, ve);
}

/* The last round's m <= 16 segments (from s0; p: each one's first code,
 * len: its stored length, on lane s - s0), G = 32 / m (a power of two,
 * rounded down) lanes each: lane k of a segment takes the k-th G-th of
 * its bits [b, bn).  Lane k > 0 does not know where in its bits a code
 * starts: it decodes from b anyway, counting the codes that start before
 * bn and keeping the positions it passes in its first 32 bits.  Then,
 * from the true start of its first code -- where lane k - 1's decode left
 * its bits -- it decodes until a kept position: from there on its decode
 * was the true one (a prefix code resynchronises), so its count is known.
 * A segment where a lane finds no such position, or whose counts do not
 * add up to its values, is decoded whole by its first lane.  Then each
 * lane decodes its values, from the true start on.  (Every table entry
 * moves on by a bit at least, stage_plan.c; a segment's bits are capped
 * at 32 per value, so a corrupt stream's counts end.) */
template <unsigned D>
IBP_DEV void stage_split(const stage_exp_job &j, uint32_t s0, uint32_t m,
                         uint32_t p, uint32_t len, uint32_t v0) {
  typedef stage_dtype<D> T;
  const unsigned lane = ibp_dev_lane();
  const uint32_t L = j.segment_log2, n = j.values;
  const uint32_t S = ((n - 1) >> L) + 1;
  const unsigned lg = m <= 1 ? 5 : m <= 2 ? 4 : m <= 4 ? 3 : m <= 8 ? 2 : 1;
  const uint32_t g = lane >> lg, k = lane & ((1u << lg) - 1u), s = s0 + g;
  const uint32_t P = ibp_dev_shfl(p, (int)g);
  const uint32_t sl = ibp_dev_shfl(len, (int)g);
  const uint32_t v = s << L, ve = n - v < (1u << L) ? n : v + (1u << L);
  /* 0: a segment past the round's or before the window */
  const uint32_t cap = g >= m || v + (1u << L) <= v0 ? 0u : ve - v;
  /* (at most to the stream's end, and 32 bits per value) */
  const uint32_t most = P < j.end ? j.end - P : 0u;
  uint32_t bits = s + 1 < S && sl < most ? sl : most;
  bits = bits < cap * 32u ? bits : cap * 32u;
  const uint32_t b = P + ((k * bits) >> lg);
  const uint32_t bn = P + (((k + 1) * bits) >> lg);
  uint32_t kept = 0, q = b;
  uint32_t c = stage_count(j, q, b, bn, kept);
  /* (the kept positions: [b, sc)) */
  const uint32_t sc = bn - b < 27u ? bn : b + 27u;
  IBP_MARK(MARK_EXP_SPLIT);
  /* the lane's count c and exit q (its first code start at or past bn)
   * from its true start t0 on: lane k - 1's exit, final once that lane's
   * is */
  uint32_t t0 = k ? ~0u : b;
  bool bad = false;
  /* (a round again only where a lane's exit moved: a count from t0) */
  for (;;) {
    IBP_MARK(MARK_EXP_SYNC_ROUND);
    const uint32_t in = ibp_dev_shfl(q, lane ? (int)lane - 1 : 0);
    bool moved = false;
    if (k && cap && !bad && in != t0) {
      t0 = in;
      /* (a short walk: a peek per code; c counts the codes walked on
       * from the decode's count) */
      uint32_t t = in;
      IBP_NO_UNROLL
      for (; t - b < sc - b && !((kept >> (t - b + 5u)) & 1u); c++) {
        IBP_MARK(MARK_EXP_SYNC);
        t += stage_bits(stage_entry(j, stage_peek(j, t))); /* t < sc */
      }
      IBP_MARK(MARK_EXP_SYNCED);
      if (t - b < sc - b) { /* at a kept position: the count above holds */
        c -= ibp_dev_popc(kept & ((1u << (t - b + 5u)) - 1u));
      } else if (t < b) { /* a corrupt stream */
        bad = true;
      } else { /* past them: the count from t0 */
        q = t0;
        c = stage_count(j, q, t0, bn, kept);
        moved = true;
      }
      kept = 0; /* c and q final unless t0 moves */
    }
    if (!ibp_dev_ballot(moved))
      break;
  }
  IBP_MARK(MARK_EXP_SUMS);
  /* (a corrupt lane's count 2^24: more than a segment's codes, < 2^17,
   * so its segment is decoded whole) */
  c = !cap ? 0u : bad ? 1u << 24 : c;
  unsigned total;
  const uint32_t ex = ibp_dev_warp_exclusive_scan(c, &total);
  const uint32_t first = g << lg; /* the segment's first lane */
  const uint32_t g0 = ibp_dev_shfl(ex, (int)first);
  const uint32_t sum =
      ibp_dev_shfl(ex + c, (int)(first + (1u << lg) - 1u)) - g0;
  const bool whole = sum >= 1u << 24 || (s + 1 < S ? sum != cap : sum < cap);
  /* the lane's values: [vb, vb + c) of the segment's, from t0 on -- but
   * where a lane's first value is a pair's second (stage_values), the
   * lane before it takes that value, its last pair whole, and the lane
   * steps over its code: no value on its own between two lanes */
  const uint32_t vb = v + (ex - g0);
  if (cap && (whole ? k == 0 : vb < ve)) { /* whole: by its first lane */
    uint32_t pb = whole ? P : t0, va = whole ? v : vb;
    uint32_t vz = whole || ve - vb < c ? ve : vb + c;
    const uint32_t par =
        (uint32_t)(((uintptr_t)j.dst - j.w0) / T::VB) & (whole ? 0u : 1u);
    if (va > v && ((va + par) & 1u)) {
      pb += stage_bits(stage_entry(j, stage_peek(j, stage_clamp(j, pb))));
      va++;
    }
    if (vz < ve && ((vz + par) & 1u))
      vz++;
    stage_values<D>(j, pb, va, vz);
  }
}

/* The whole tensor's stage part (docs/FORMAT.md §9.3): S - 1 lengths of W
 * bits, then the segments' codes.  Called by the whole warp. */
template <unsigned D> IBP_DEV void stage_exp_decode(const stage_exp_job &j) {
  typedef stage_dtype<D> T;
  IBP_MARK(MARK_EXP_START);
  const unsigned lane = ibp_dev_lane();
  const uint32_t L = j.segment_log2, n = j.values, W = j.length_bits;
  const uint32_t S = ((n - 1) >> L) + 1;
  const uint32_t wmask = W >= 32 ? ~0u : (1u << W) - 1u;
  /* the values the window touches, the segments up to the last of them */
  const uint32_t v0 = j.w0 / T::VB, v1 = (j.w1 - 1) / T::VB + 1;
  const uint32_t s1 = ((v1 - 1) >> L) + 1;
  uint32_t at = j.bit0 + (S - 1) * W; /* segment s0's first code */
  ibp_dev_syncwarp();                 /* every lane's IBP bytes are in dst */
  for (uint32_t s0 = 0; s0 < s1; s0 += 32) {
    IBP_MARK(MARK_EXP_ROUND);
    const uint32_t s = s0 + lane;
    const uint32_t q = j.bit0 + s * W;
    const uint32_t len =
        s + 1 < S ? bits_at(j.sw, stage_clamp(j, q)) & wmask : 0u;
    unsigned total;
    const uint32_t p = at + ibp_dev_warp_exclusive_scan(len, &total);
    at += total;
    if (s1 - s0 <= 16) { /* the last round, lanes to spare */
      stage_split<D>(j, s0, s1 - s0, p, len, v0);
      break;
    }
    IBP_MARK(MARK_EXP_SEGMENT);
    const uint32_t v = s << L; /* s < S <= 2^20 / 2^L: no overflow */
    if (s < s1 && v + (1u << L) > v0) {
      stage_values<D>(j, p, v, n - v < (1u << L) ? n : v + (1u << L));
    }
  }
  ibp_dev_syncwarp(); /* the warp's bytes are final */
  IBP_MARK(MARK_EXP_END);
}

/* Dispatch on the stage's dtype (1 .. 3; others decode nothing); j.last
 * is set here. */
IBP_DEV void stage_exp_warp(const stage_exp_job &j, uint32_t dtype) {
  stage_exp_job k = j;
  k.last = stage_last(j.end);
  switch (dtype) {
  case 1:
    stage_exp_decode<1>(k);
    break;
  case 2:
    stage_exp_decode<2>(k);
    break;
  case 3:
    stage_exp_decode<3>(k);
    break;
  default:
    break;
  }
}
