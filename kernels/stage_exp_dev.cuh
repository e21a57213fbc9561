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
 * on its own through a bit buffer (stage_reader): per value a funnel-shift
 * peek, one look-up of the decode table (global memory, L1-cached, from
 * ibp_decompress; shared memory from ibp_stage_exp), an escape's raw field
 * taken from the same peek, and the field ORed into the value's bytes (one
 * typed read-modify-write where the value lies whole in the window and
 * aligned, byte by byte at the window's edges); a refill is one word load
 * every 32 bits.  The last round -- a tensor's only one up to 16 segments
 * -- splits each segment's bits among the lanes it leaves idle
 * (stage_split).  Segments that end before the window are only summed, not
 * decoded.
 *
 * Never writes outside the window.  Stream reads clamp at the stream's
 * end bit, so a corrupt stream gives wrong bytes but reads no word past
 * the one after its last: the caller keeps that word readable (a staging
 * buffer, or padding).
 */

/* One tensor's stage decode. */
struct stage_exp_job {
  const uint32_t *sw;    /* the stream's words (4-byte aligned) */
  const uint16_t *table; /* the cluster's decode table (shared memory) */
  uint8_t *dst;          /* where window byte w0 goes */
  uint32_t bit0;         /* the stage part's first bit, from sw */
  uint32_t end;          /* the stream's end bit, from sw */
  uint32_t w0, w1;       /* the window of the tensor, w0 < w1 */
  uint32_t values;       /* R / value bytes */
  uint32_t segment_log2; /* values per segment: 2^segment_log2 */
  uint32_t length_bits;  /* W, 1 .. 32 */
};

/* The dtypes of docs/FORMAT.md §9.3 (ibp/stage.h IBP_DTYPE_LIST): value
 * bytes, the field's lowest bit, its bits. */
template <unsigned D> struct stage_dtype;
template <> struct stage_dtype<1> { /* bf16 */
  enum { VB = 2, LO = 7, E = 9 };
};
template <> struct stage_dtype<2> { /* float16 */
  enum { VB = 2, LO = 10, E = 6 };
};
template <> struct stage_dtype<3> { /* float32 */
  enum { VB = 4, LO = 23, E = 9 };
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

/* ORs f (the field in place, f < 2^(8 VB)) into value v of the window
 * (values outside it: nothing). */
template <unsigned VB>
IBP_DEV void stage_field_or(const stage_exp_job &j, const stage_exp_full &w,
                            uint32_t v, uint32_t f) {
  const uint32_t at = v * VB;
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

/* A lane's reader of the stream: bits from pos on, lo and hi the words
 * lim / 32 - 1 and lim / 32 (lim - 32 <= pos < lim + 32; pos < lim once
 * stage_fill has run, which a peek needs); the peek is one funnel shift,
 * a refill one word load, clamped at the stream's end as bits_at is.
 * A loop tests "refill due or end" once per code, its refill under a
 * mark of its own: counted where it runs (docs/ARCHITECTURE.md
 * "Counting a tensor's instructions"). */
struct stage_reader {
  uint32_t lo, hi, pos, lim;
};

/* Bit p clamped for a read (two words from p's): at the stream's end, or
 * one bit before it where the stream ends on a word's edge -- so that the
 * second word is at most the one after the stream's last, the only one past
 * it the caller keeps readable (clamped at end, a stream of a whole number
 * of words was read two words past: a 4 KiB bf16 tensor's 2724-byte stream
 * faulted on a guard page).  Bits from end on are never decoded. */
IBP_DEV uint32_t stage_clamp(const stage_exp_job &j, uint32_t p) {
  return p < j.end ? p : (j.end & 31u) || !j.end ? j.end : j.end - 1u;
}

IBP_DEV stage_reader stage_reader_at(const stage_exp_job &j, uint32_t p) {
  const uint32_t *q = j.sw + (stage_clamp(j, p) >> 5);
  stage_reader r = {q[0], q[1], p, (p | 31u) + 1u};
  return r;
}

/* The next 32 bits (pos < lim; the funnel shift takes pos mod 32). */
IBP_DEV uint32_t stage_peek(const stage_reader &r) {
  return ibp_dev_funnel_r(r.lo, r.hi, r.pos);
}

/* Moves lo and hi one word on. */
IBP_DEV void stage_refill(const stage_exp_job &j, stage_reader &r) {
  const uint32_t w = (r.lim >> 5) + 1u, last = (j.end + 31u) >> 5;
  r.lo = r.hi;
  r.hi = j.sw[w < last ? w : last];
  r.lim += 32u;
}

/* ... where pos has passed lim. */
IBP_DEV void stage_fill(const stage_exp_job &j, stage_reader &r) {
  if (r.pos >= r.lim) {
    IBP_MARK(MARK_EXP_REFILL);
    stage_refill(j, r);
  }
}

/* The table entry of the code at pos: symbol | bits << 10, bits the
 * code's and an escape's raw field together (stage_plan.c). */
IBP_DEV uint32_t stage_entry(const stage_exp_job &j, uint32_t x) {
  return ibp_dev_ld_u16(j.table, x & (IBP_KERNEL_STAGE_TABLE - 1u));
}

/* Steps over one code (its raw field included). */
IBP_DEV void stage_skip(const stage_exp_job &j, stage_reader &r) {
  r.pos += stage_entry(j, stage_peek(r)) >> 10;
}

/* Steps over the codes that start before bit bn; returns how many. */
IBP_DEV uint32_t stage_count(const stage_exp_job &j, stage_reader &r,
                             uint32_t bn) {
  /* (one test per code: the next refill or bn, whichever comes first) */
  uint32_t c = 0;
  IBP_NO_UNROLL
  for (;;) {
    const uint32_t stop = r.lim < bn ? r.lim : bn;
    IBP_NO_UNROLL
    for (; r.pos < stop; c++) {
      IBP_MARK(MARK_EXP_COUNT);
      stage_skip(j, r);
    }
    IBP_MARK(MARK_EXP_COUNT_STOP);
    if (r.pos >= bn)
      return c;
    stage_refill(j, r); /* (pos >= lim: stop was lim) */
  }
}

/* Decodes one value's field (not yet in place). */
template <unsigned D>
IBP_DEV uint32_t stage_next(const stage_exp_job &j, stage_reader &r) {
  typedef stage_dtype<D> T;
  const uint32_t x = stage_peek(r);
  const uint32_t e = stage_entry(j, x), l = e >> 10;
  uint32_t f = e & 0x3FFu;
  if (f == 1u << T::E) /* the escape: the raw field ends its bits */
    f = (x >> (l - T::E)) & ((1u << T::E) - 1u);
  r.pos += l;
  return f;
}

/* Values [v, ve) at the window's edges or landing misaligned: checked one
 * by one. */
template <unsigned D>
IBP_DEV void stage_edge(const stage_exp_job &j, const stage_exp_full &w,
                        stage_reader &r, uint32_t v, uint32_t ve) {
  typedef stage_dtype<D> T;
  IBP_NO_UNROLL
  for (; v < ve; v++) {
    stage_fill(j, r);
    IBP_MARK(MARK_EXP_EDGE);
    stage_field_or<T::VB>(j, w, v, stage_next<D>(j, r) << T::LO);
  }
}

/* Decodes values [v, ve) from the reader, ORing those in the window into
 * it: those whole in it and aligned with one typed read-modify-write
 * each, the others at the edges one by one. */
template <unsigned D>
IBP_DEV void stage_values(const stage_exp_job &j, stage_reader &r, uint32_t v,
                          uint32_t ve) {
  typedef stage_dtype<D> T;
  const stage_exp_full w = stage_full<T::VB>(j);
  const uint32_t f1 = w.full0 + w.fulls;
  const uint32_t h = v >= w.full0 ? v : w.full0 < ve ? w.full0 : ve;
  const uint32_t m = f1 < ve ? (f1 > h ? f1 : h) : ve;
  stage_edge<D>(j, w, r, v, h);
  IBP_MARK(MARK_EXP_RUN);
  uint8_t *d = j.dst + (T::VB * h - j.w0); /* (used where h >= full0) */
  /* (one test per value: a refill due or the run's end) */
  uint32_t i = 0;
  IBP_NO_UNROLL
  for (;;) {
    IBP_NO_UNROLL
    for (; r.pos < r.lim && i != m - h; i++) {
      IBP_MARK(MARK_EXP_VALUE);
      const uint32_t f = stage_next<D>(j, r) << T::LO;
      if (T::VB == 2) {
        uint16_t *o = (uint16_t *)d + i;
        *o = (uint16_t)(*o | f);
      } else {
        uint32_t *o = (uint32_t *)d + i;
        *o = *o | f;
      }
    }
    IBP_MARK(MARK_EXP_VALUE_STOP);
    if (i == m - h)
      break;
    stage_refill(j, r);
  }
  IBP_MARK(MARK_EXP_RUN_END);
  stage_edge<D>(j, w, r, m, ve);
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
  stage_reader r = stage_reader_at(j, b);
  uint32_t c = 0, kept = 0;
  const uint32_t sc = bn - b < 32u ? bn : b + 32u;
  /* (one test per code: the next refill or sc, whichever comes first) */
  IBP_NO_UNROLL
  for (;;) {
    const uint32_t stop = r.lim < sc ? r.lim : sc;
    IBP_NO_UNROLL
    for (; r.pos < stop; c++) {
      IBP_MARK(MARK_EXP_SCOUT);
      kept |= 1u << (r.pos - b);
      stage_skip(j, r);
    }
    IBP_MARK(MARK_EXP_SCOUT_STOP);
    if (r.pos >= sc)
      break;
    stage_refill(j, r); /* (pos >= lim: stop was lim) */
  }
  c += stage_count(j, r, bn);
  IBP_MARK(MARK_EXP_SPLIT);
  /* the lane's count c and exit q (its first code start at or past bn)
   * from its true start t0 on: lane k - 1's exit, final once that lane's
   * is */
  uint32_t q = r.pos, t0 = k ? ~0u : b;
  bool bad = false;
  for (;;) {
    IBP_MARK(MARK_EXP_SYNC_ROUND);
    const uint32_t in = ibp_dev_shfl(q, lane ? (int)lane - 1 : 0);
    const bool todo = k && cap && !bad && in != t0;
    if (!ibp_dev_ballot(todo))
      break;
    if (!todo)
      continue;
    t0 = in;
    /* (a short walk: a peek per code, no reader kept live; c counts
     * the codes walked on from the decode's count) */
    uint32_t t = in;
    IBP_NO_UNROLL
    for (; t - b < sc - b && !((kept >> (t - b)) & 1u); c++) {
      IBP_MARK(MARK_EXP_SYNC);
      t += stage_entry(j, bits_at(j.sw, stage_clamp(j, t))) >> 10;
    }
    IBP_MARK(MARK_EXP_SYNCED);
    if (t - b < sc - b) { /* at a kept position: the decode above from here */
      c -= ibp_dev_popc(kept & ((1u << (t - b)) - 1u));
    } else if (t < b) { /* a corrupt stream */
      bad = true;
    } else { /* past them: the count from t0 */
      stage_reader w = stage_reader_at(j, t0);
      c = stage_count(j, w, bn);
      q = w.pos;
    }
    kept = 0; /* c and q final unless t0 moves */
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
  /* the lane's values: [vb, vb + c) of the segment's, from t0 on */
  const uint32_t vb = v + (ex - g0);
  if (cap && (whole ? k == 0 : vb < ve)) { /* whole: by its first lane */
    r = stage_reader_at(j, whole ? P : t0);
    stage_values<D>(j, r, whole ? v : vb, whole || ve - vb < c ? ve : vb + c);
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
      stage_reader r = stage_reader_at(j, p);
      stage_values<D>(j, r, v, n - v < (1u << L) ? n : v + (1u << L));
    }
  }
  ibp_dev_syncwarp(); /* the warp's bytes are final */
  IBP_MARK(MARK_EXP_END);
}

/* Dispatch on the stage's dtype (1 .. 3; others decode nothing). */
IBP_DEV void stage_exp_warp(const stage_exp_job &j, uint32_t dtype) {
  switch (dtype) {
  case 1:
    stage_exp_decode<1>(j);
    break;
  case 2:
    stage_exp_decode<2>(j);
    break;
  case 3:
    stage_exp_decode<3>(j);
    break;
  default:
    break;
  }
}
