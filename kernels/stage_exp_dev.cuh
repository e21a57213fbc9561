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
 * on its own: per value a 32-bit peek of the stream (two word loads and a
 * funnel shift), one look-up of the decode table (shared memory), an
 * escape's raw field taken from the same peek, and the field ORed into the
 * value's bytes (one typed read-modify-write where the value lies whole in
 * the window and aligned, byte by byte at the window's edges).  Segments
 * that end before the window are only summed, not decoded.
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

/* ORs f (the field in place, f < 2^(8 VB)) into value v of the window
 * (values outside it: nothing). */
template <unsigned VB>
IBP_DEV void stage_field_or(const stage_exp_job &j, uint32_t v, uint32_t f) {
  const uint32_t at = v * VB;
  const bool aligned = (((uintptr_t)j.dst - j.w0) & (VB - 1)) == 0;
  if (aligned && at >= j.w0 && at + VB <= j.w1) {
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

/* Decodes values [v, ve) of a segment whose first code is at bit p, ORing
 * those in the window into it. */
template <unsigned D>
IBP_DEV void stage_segment(const stage_exp_job &j, uint32_t p, uint32_t v,
                           uint32_t ve) {
  typedef stage_dtype<D> T;
  const uint32_t *sw = j.sw;
  const uint16_t *table = j.table;
  const uint32_t end = j.end;
  IBP_NO_UNROLL
  for (; v < ve; v++) {
    IBP_MARK(MARK_EXP_VALUE);
    const uint32_t x = bits_at(sw, p < end ? p : end);
    const uint32_t e = table[x & (IBP_KERNEL_STAGE_TABLE - 1u)];
    const uint32_t l = e >> 10;
    uint32_t f = e & 0x3FFu;
    p += l;
    if (f == 1u << T::E) { /* the escape: the raw field follows its code */
      f = (x >> l) & ((1u << T::E) - 1u);
      p += T::E;
    }
    stage_field_or<T::VB>(j, v, f << T::LO);
  }
}

/* The whole tensor's stage part (docs/FORMAT.md §9.3): S - 1 lengths of W
 * bits, then the segments' codes.  Called by the whole warp. */
template <unsigned D> IBP_DEV void stage_exp_decode(const stage_exp_job &j) {
  typedef stage_dtype<D> T;
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
        s + 1 < S ? bits_at(j.sw, q < j.end ? q : j.end) & wmask : 0u;
    unsigned total;
    const uint32_t p = at + ibp_dev_warp_exclusive_scan(len, &total);
    at += total;
    const uint32_t v = s << L; /* s < S <= 2^20 / 2^L: no overflow */
    if (s < s1 && v + (1u << L) > v0)
      stage_segment<D>(j, p, v, n - v < (1u << L) ? n : v + (1u << L));
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
