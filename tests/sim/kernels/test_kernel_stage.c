/*
 * The exponent stage's device decoder (kernels/stage_exp_dev.cuh, through
 * the ibp_stage_exp kernel; docs/FORMAT.md §9.3, §9.6) against the
 * original bytes.  Each case: bf16, float16 or float32 tensors of 1 value
 * .. 64 KiB (odd counts, edges of segments), 1..5 clusters (one without a
 * stage at times), each cluster's Mask the field alone (no bitmap) or the
 * field and invariant mantissa bits, its stage learned on other tensors
 * (escapes) or on the same; exponents spread, narrow, all equal or
 * uniform; segments of 2^4 .. 2^12 values or one; streams at any byte
 * offset; the destination misaligned, the window the whole tensor or any.
 * The host codec compresses each tensor (ibp_compress_tensor_staged), its
 * reference decoder must give the tensor back; the destination holds what
 * the IBP part decodes to (the tensor with its field zeroed) and the
 * emulated kernel must turn it into the original, byte for byte, touching
 * nothing outside the windows.
 * IBP_TEST_ITERATIONS = cases (default 400); SIMT_SEED / IBP_TEST_SEED.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibp/stage.h"
#include "ibp_kernels.h"
#include "kcase.h"
#include "kernels_emu.h"
#include "test_util.h"

#define MAX_K 5u
#define MAX_BYTES (256u << 10) /* of tensors per case */
#define GUARD 16u

typedef struct dist {
  int mode;        /* 0 spread, 1 narrow, 2 all equal, 3 uniform */
  uint32_t center; /* a field value */
} dist;

static const char *mode_name[] = {"spread", "narrow", "equal", "uniform"};

typedef struct cluster {
  ibp_params p;
  ibp_stage st;
  dist d;
  int staged;
  int omit; /* Mask is the field: the IBP part has no bitmap */
} cluster;

static uint32_t field_of(uint32_t dtype, uint32_t *lo) {
  switch (dtype) {
  case IBP_DTYPE_BF16:
    *lo = 7;
    return 9;
  case IBP_DTYPE_F16:
    *lo = 10;
    return 6;
  default:
    *lo = 23;
    return 9;
  }
}

static uint32_t draw_field(rng *r, const dist *d, uint32_t e) {
  const uint32_t top = (1u << e) - 1;
  switch (d->mode) {
  case 2:
    return d->center;
  case 3:
    return (uint32_t)rng_below(r, top + 1);
  default: { /* the exponent near the center, a geometric fall-off */
    uint32_t f = d->center;
    const double go = d->mode == 0 ? 0.6 : 0.2;
    while (rng_chance(r, go) && f > 0)
      f--;
    if (rng_chance(r, 0.01)) /* a rare value: an escape when unlearned */
      f = (uint32_t)rng_below(r, top + 1);
    return (f & (top >> 1)) | (rng_chance(r, 0.5) ? 1u << (e - 1) : 0);
  }
  }
}

/* A tensor of cluster c: fields from its distribution, the other bits
 * random but its invariant mantissa bits (Bitval) kept in most values. */
static void make_tensor(rng *r, const cluster *c, uint32_t dtype, uint8_t *t) {
  const uint32_t R = c->p.tensor_bytes, vb = ibp_dtype_bytes(dtype);
  uint32_t lo, e = field_of(dtype, &lo);
  const uint32_t fm = ((1u << e) - 1) << lo; /* the field in a value */
  rng_fill(r, t, R);
  const int keep = rng_chance(r, 0.9);
  for (uint32_t v = 0; v < R / vb; v++) {
    for (uint32_t b = v * vb; b < (v + 1) * vb; b++) {
      const uint8_t inv = (uint8_t)(c->p.mask[b] & ~(fm >> (8 * (b - v * vb))));
      if (keep || rng_chance(r, 0.5)) /* else its chunk may not fit */
        t[b] = (uint8_t)((t[b] & ~inv) | (c->p.bitval[b] & inv));
    }
    uint32_t x = 0;
    memcpy(&x, t + v * vb, vb);
    x = (x & ~fm) | draw_field(r, &c->d, e) << lo;
    memcpy(t + v * vb, &x, vb);
  }
}

/* Values of tensor t whose field the stage sends as an escape. */
static uint64_t escapes_in(const cluster *c, uint32_t dtype, const uint8_t *t) {
  const uint32_t vb = ibp_dtype_bytes(dtype), R = c->p.tensor_bytes;
  uint32_t lo, e = field_of(dtype, &lo);
  uint64_t n = 0;
  for (uint32_t v = 0; v < R / vb; v++) {
    uint32_t x = 0;
    memcpy(&x, t + v * vb, vb);
    n += c->st.lengths[(x >> lo) & ((1u << e) - 1)] == 0;
  }
  return n;
}

/* The cluster's Mask: the field, and at times invariant mantissa bits. */
static void make_cluster(rng *r, cluster *c, uint32_t dtype, uint32_t R) {
  c->p.tensor_bytes = R;
  c->p.chunk_bytes = rng_chunk(r);
  c->p.threshold = 1.0;
  c->p.mask = xcalloc(R);
  c->p.bitval = xcalloc(R);
  c->staged = !rng_chance(r, 0.12);
  uint32_t lo, e = field_of(dtype, &lo);
  const uint32_t vb = ibp_dtype_bytes(dtype);
  c->d.mode = (int)rng_below(r, 4);
  c->d.center = (uint32_t)rng_below(r, 1u << e);
  CHECK_OK(ibp_stage_init(&c->st, c->staged ? IBP_STAGE_EXP : IBP_STAGE_NONE,
                          c->staged ? dtype : IBP_DTYPE_NONE,
                          c->staged ? (rng_chance(r, 0.1)
                                           ? IBP_STAGE_SEGMENT_LOG2_MAX
                                           : (uint32_t)rng_range(r, 4, 12))
                                    : 0,
                          R));
  c->omit = c->staged && rng_chance(r, 0.4);
  if (c->staged)
    ibp_stage_fit_params(&c->st, &c->p);
  if (c->omit)
    return;
  /* a few low mantissa bits of each value invariant */
  const uint32_t extra = (uint32_t)rng_below(r, lo > 6 ? 6 : lo);
  const uint32_t bits = (uint32_t)rng_next(r) & ((1u << extra) - 1);
  for (uint32_t v = 0; v < R / vb; v++)
    for (uint32_t b = 0; b < vb; b++) {
      const uint32_t m = ((1u << extra) - 1) >> (8 * b);
      c->p.mask[v * vb + b] |= (uint8_t)m;
      c->p.bitval[v * vb + b] |= (uint8_t)((bits >> (8 * b)) & m);
    }
  c->omit = c->staged && extra == 0; /* the Mask is the field alone */
}

/* Bits of the IBP part (docs/FORMAT.md §2, §9.1) of stripped tensor s. */
static uint32_t ibp_part_bits(const cluster *c, const uint8_t *s) {
  const ibp_params *p = &c->p;
  const uint32_t R = p->tensor_bytes, w = p->chunk_bytes;
  uint32_t bits = 0;
  if (c->omit) {
    for (uint32_t b = 0; b < R; b++)
      bits += 8 - (uint32_t)__builtin_popcount(p->mask[b]);
    return bits;
  }
  for (uint32_t j = 0; j * w < R; j++) {
    const uint32_t end = (j + 1) * w < R ? (j + 1) * w : R;
    uint32_t fit = 1, carry = 0;
    for (uint32_t b = j * w; b < end; b++) {
      fit &= (s[b] & p->mask[b]) == p->bitval[b];
      carry += 8 - (uint32_t)__builtin_popcount(p->mask[b]);
    }
    bits += 1 + (fit ? carry : 8 * (end - j * w));
  }
  return bits;
}

static uint32_t pick_values(rng *r, uint32_t vb) {
  static const uint32_t edges[] = {1, 2, 15, 16, 17, 255, 256, 257, 4095, 4097};
  const uint32_t most = (64u << 10) / vb;
  if (rng_chance(r, 0.25))
    return edges[rng_below(r, sizeof edges / sizeof *edges)];
  uint32_t n = rng_log_uniform(r, 1, most);
  return rng_chance(r, 0.5) ? (n | 1u) : n;
}

typedef struct tally {
  uint64_t decoded, escapes, omitted, equal, windows, misaligned;
  uint64_t region_coded; /* stage tensors ibp_decompress decoded */
} tally;

static void one_case(simt_entry entry, uint64_t it, tally *y) {
  rng r;
  test_iteration(&r, it);
  static const uint32_t dtypes[] = {IBP_DTYPE_BF16, IBP_DTYPE_F16,
                                    IBP_DTYPE_F32};
  const uint32_t dtype = dtypes[rng_below(&r, 3)];
  const uint32_t vb = ibp_dtype_bytes(dtype);
  const uint32_t n = pick_values(&r, vb), R = n * vb;
  const uint32_t k = (uint32_t)rng_range(&r, 1, MAX_K);
  uint32_t most = MAX_BYTES / R < 8 ? MAX_BYTES / R : 8;
  const uint32_t T = (uint32_t)rng_range(&r, 1, most ? most : 1);
  cluster cl[MAX_K];
  for (uint32_t c = 0; c < k; c++)
    make_cluster(&r, &cl[c], dtype, R);
  /* stages learned on other tensors (unseen values escape) or on these */
  uint8_t *data = xmalloc((size_t)T * R), *tmp = xmalloc(R);
  uint8_t *ids = xmalloc(T);
  const int learn_own = rng_chance(&r, 0.5);
  for (uint32_t t = 0; t < T; t++) {
    ids[t] = (uint8_t)rng_below(&r, k);
    make_tensor(&r, &cl[ids[t]], dtype, data + (size_t)t * R);
  }
  for (uint32_t c = 0; c < k; c++) {
    if (!cl[c].staged)
      continue;
    if (learn_own) {
      for (uint32_t t = 0; t < T; t++)
        if (ids[t] == c)
          ibp_stage_count(&cl[c].st, data + (size_t)t * R, R);
    } else {
      for (uint32_t i = 0, m = (uint32_t)rng_range(&r, 1, 3); i < m; i++) {
        make_tensor(&r, &cl[c], dtype, tmp);
        ibp_stage_count(&cl[c].st, tmp, R);
      }
    }
    CHECK_OK(ibp_stage_finish(&cl[c].st));
  }
  ibp_kernel_stage *ks = xmalloc(MAX_K * sizeof *ks);
  for (uint32_t c = 0; c < k; c++) {
    CHECKF(ibp_kernels_stage_exp(&cl[c].st, cl[c].p.mask, R, &ks[c]) == 0,
           "cluster %u", c);
    CHECK(ks[c].no_bitmap == (uint32_t)cl[c].omit);
  }

  /* the window, the streams (compressed tensors only) at any offset */
  uint32_t w0 = 0, w1 = R;
  if (rng_chance(&r, 0.3)) {
    w0 = (uint32_t)rng_below(&r, R);
    w1 = (uint32_t)rng_range(&r, w0 + 1, R);
  }
  const uint32_t W = w1 - w0;
  uint8_t *streams = xcalloc((size_t)T * (R + 16) + 16);
  uint64_t *offs = xmalloc(T * sizeof *offs);
  uint32_t *lens = xmalloc(T * sizeof *lens), *firsts = xmalloc(T * 4);
  uint8_t *lids = xmalloc(T);
  uint32_t *which = xmalloc(T * 4), count = 0;
  uint64_t at = rng_below(&r, 4);
  for (uint32_t t = 0; t < T; t++) {
    const cluster *c = &cl[ids[t]];
    const uint8_t *src = data + (size_t)t * R;
    int compressed = 0;
    size_t len = ibp_compress_tensor_staged(&c->p, c->staged ? &c->st : NULL,
                                            src, streams + at, &compressed);
    CHECK(len > 0);
    if (!compressed)
      continue; /* stored raw: the kernel never sees it */
    CHECK_OK(ibp_decompress_tensor_staged(&c->p, c->staged ? &c->st : NULL,
                                          streams + at, len, 1, tmp));
    CHECK_MEM(tmp, src, R, "host reference decode");
    if (c->staged) {
      ibp_stage_strip(&c->st, src, tmp, R);
      firsts[count] = ibp_part_bits(c, tmp);
      y->escapes += escapes_in(c, dtype, src);
      y->omitted += c->omit;
      y->equal += c->d.mode == 2;
    } else {
      firsts[count] = 0;
    }
    offs[count] = at;
    lens[count] = (uint32_t)len;
    lids[count] = ids[t];
    which[count++] = t;
    at += len + (rng_chance(&r, 0.5) ? rng_below(&r, 5) : 0);
  }
  const unsigned mis = (unsigned)rng_below(&r, 16);
  const size_t out_bytes = (size_t)count * W + 2 * GUARD + mis;
  uint8_t *dstmem = xmalloc(out_bytes + 16), *want = xmalloc(out_bytes + 16);
  uint8_t *dst = (uint8_t *)(((uintptr_t)dstmem + 15) & ~(uintptr_t)15);
  memset(dst, 0xA5, out_bytes);
  memset(want, 0xA5, out_bytes);
  for (uint32_t i = 0; i < count; i++) {
    const uint32_t t = which[i];
    const cluster *c = &cl[lids[i]];
    const uint8_t *src = data + (size_t)t * R;
    ibp_stage_strip(c->staged ? &c->st : NULL, src, tmp, R);
    memcpy(dst + GUARD + mis + (size_t)i * W, tmp + w0, W);
    memcpy(want + GUARD + mis + (size_t)i * W, src + w0, W);
  }
  test_case("%s n=%u R=%u k=%u T=%u (compressed %u) learn=%s mode0=%s "
            "seg0=%u omit0=%d c0=%u window [%u, %u) dst+%u",
            ibp_dtype_name(dtype), n, R, k, T, count,
            learn_own ? "own" : "other", mode_name[cl[0].d.mode],
            cl[0].st.segment_log2, cl[0].omit, cl[0].p.chunk_bytes, w0, w1,
            mis);
  if (count) {
    ibp_stage_exp_args a;
    memset(&a, 0, sizeof a);
    a.streams = streams;
    a.offsets = offs;
    a.lengths = lens;
    a.first_bits = firsts;
    a.ids = k > 1 || rng_chance(&r, 0.5) ? lids : NULL;
    a.stages = ks;
    a.dst = dst + GUARD + mis;
    a.tensors = count;
    a.k = k;
    a.w0 = w0;
    a.w1 = w1;
    if (!a.ids)
      a.k = 1;
    ibp_kernel_plan plan;
    ibp_kernels_plan_stage_exp(count, a.k, rng_chance(&r, 0.5) ? 1 : 4, &plan);
    simt_launch l = {
        entry, &a, {plan.grid, 1, 1}, {plan.block, 1, 1}, plan.dynamic_shared};
    char err[512] = "";
    simt_set_seed(rng_next(&r) | 1);
    int rc = simt_run(&l, NULL, err, sizeof err);
    CHECKF(rc == 0, "emulator: %s", err);
    CHECK_MEM(dst, want, out_bytes, "decoded windows and guards");
    y->decoded += (uint64_t)count * W;
    y->windows += W < R;
    y->misaligned += (mis % vb) != 0;
  }
  for (uint32_t c = 0; c < k; c++) {
    free(cl[c].p.mask);
    free(cl[c].p.bitval);
  }
  free(data);
  free(tmp);
  free(ids);
  free(ks);
  free(streams);
  free(offs);
  free(lens);
  free(firsts);
  free(lids);
  free(which);
  free(dstmem);
  free(want);
}

/* A region of K clusters with a stage each (docs/FORMAT.md §9), laid out
 * as libibp lays it out (kcase), copied by the emulated ibp_decompress:
 * each tensor's IBP part decoded with its cluster's plan (with or without
 * a bitmap), then its stage (stage_exp_dev.cuh), any range, walk and
 * destination alignment, against the original. */
static void region_case(simt_entry entry, uint64_t it, tally *y) {
  rng r;
  test_iteration(&r, it);
  static const uint32_t dtypes[] = {IBP_DTYPE_BF16, IBP_DTYPE_F16,
                                    IBP_DTYPE_F32};
  const uint32_t dtype = dtypes[rng_below(&r, 3)];
  const uint32_t vb = ibp_dtype_bytes(dtype);
  kcase_shape sh;
  kcase_random_shape(&r, &sh, 64);
  sh.R = vb * rng_log_uniform(&r, 1, (IBP_KERNEL_BLOCK_R - 1) / vb);
  const uint64_t most = 262144 / sh.R < 64 ? 262144 / sh.R : 64;
  sh.n = 1 + rng_below(&r, most);
  sh.tail = rng_chance(&r, 0.2) ? rng_below(&r, sh.R) : 0;
  sh.clusters = rng_chance(&r, 0.3) ? (unsigned)rng_range(&r, 2, 4) : 1;
  sh.dirty_share = rng_chance(&r, 0.2) ? 0.1 : 0;
  sh.adjacent = 1;
  kcase k;
  kcase_build(&k, &r, &sh);
  const uint32_t R = k.R, K = k.clusters, stride = (R + 15) & ~15u;
  /* float values: fields from one distribution, the lowest `extra`
   * mantissa bits 0 in most values */
  uint32_t lo, e = field_of(dtype, &lo);
  const uint32_t fm = ((1u << e) - 1) << lo;
  const uint32_t extra = (uint32_t)rng_below(&r, 4);
  const dist d = {(int)rng_below(&r, 4), (uint32_t)rng_below(&r, 1u << e)};
  for (uint64_t v = 0; v < k.n * R / vb; v++) {
    uint32_t x = (uint32_t)rng_next(&r);
    if (!rng_chance(&r, 0.02))
      x &= ~((1u << extra) - 1);
    x = (x & ~fm) | draw_field(&r, &d, e) << lo;
    memcpy(k.orig + v * vb, &x, vb);
  }
  /* each cluster's Mask: the field alone (no bitmap) or with those bits */
  ibp_params *p = K > 1 ? k.cl : &k.params;
  uint32_t omitted = 0;
  for (uint32_t c = 0; c < K; c++) {
    const int omit = rng_chance(&r, 0.5);
    uint8_t *m = k.mask + (size_t)c * stride,
            *b = k.bitval + (size_t)c * stride;
    for (uint32_t i = 0; i < R; i++) {
      const uint32_t in =
          ((fm | (omit ? 0 : (1u << extra) - 1)) >> (8 * (i % vb)));
      m[i] = (uint8_t)in;
      b[i] = 0;
    }
    memcpy(p[c].mask, m, R);
    memcpy(p[c].bitval, b, R);
    omitted += omit || extra == 0;
  }
  ibp_stage *stages = xmalloc(K * sizeof *stages);
  const uint64_t learn = rng_chance(&r, 0.5) ? k.n : (k.n + 1) / 2;
  CHECK_OK(ibp_stage_learn(p, K, IBP_STAGE_EXP, dtype, k.orig, learn,
                           (uint64_t)R * rng_range(&r, 1, learn), 1, stages));
  k.stages = stages;
  kcase_compress(&k);
  uint64_t coded = 0;
  for (uint64_t i = 0; i < k.n; i++)
    coded += kcase_stored(&k, i) < R;
  uint64_t off = 0, len = k.bytes, mismatch = 0;
  if (rng_chance(&r, 0.5))
    kcase_pick_range(&r, &k, &off, &len);
  k.walk = rng_chance(&r, 0.3) ? (unsigned)rng_range(&r, 1, k.n + 2) : 0;
  k.grid_cap = rng_chance(&r, 0.3) ? 1 : 0;
  k.dst_misalign = rng_chance(&r, 0.7) ? 0 : (unsigned)rng_below(&r, 16);
  test_case("region %s R=%u c=%u n=%llu tail=%llu K=%u no-bitmap %u/%u "
            "extra=%u %s learned on %llu, %llu coded; copy [%llu, +%llu) "
            "walk=%u grid_cap=%u dst+%u",
            ibp_dtype_name(dtype), R, k.c, (unsigned long long)k.n,
            (unsigned long long)k.tail, K, omitted, K, extra, mode_name[d.mode],
            (unsigned long long)learn, (unsigned long long)coded,
            (unsigned long long)off, (unsigned long long)len, k.walk,
            k.grid_cap, k.dst_misalign);
  char err[512] = "";
  simt_set_seed(rng_next(&r) | 1);
  int rc = kcase_run(&k, entry, off, len, k.packed_bytes, NULL, &mismatch, err,
                     sizeof err);
  CHECKF(rc == 0, "emulator: %s", err);
  CHECKF(mismatch == 0, "copy differs from the original at byte %llu",
         (unsigned long long)(mismatch - 1));
  y->region_coded += coded;
  k.stages = NULL;
  kcase_free(&k);
  free(stages);
}

int main(void) {
  uint64_t iters = test_begin("test_kernel_stage", 400);
  simt_entry entry = ibp_emu_entry(IBP_KERNEL_STAGE_EXP);
  CHECK(entry != NULL);
  tally y = {0, 0, 0, 0, 0, 0, 0};
  for (uint64_t it = 0; it < iters; it++)
    one_case(entry, it, &y);
  printf("test_kernel_stage: %llu bytes decoded by the emulated kernel; "
         "%llu escaped values, %llu tensors without a bitmap, %llu of equal "
         "exponents; %llu cases of a part window, %llu misaligned\n",
         (unsigned long long)y.decoded, (unsigned long long)y.escapes,
         (unsigned long long)y.omitted, (unsigned long long)y.equal,
         (unsigned long long)y.windows, (unsigned long long)y.misaligned);
  if (iters >= 100) /* the cases above ran, not only the easy ones */
    CHECK(y.escapes && y.omitted && y.equal && y.windows && y.misaligned);

  /* ibp_decompress over regions prepared with the stage */
  simt_entry dec = ibp_emu_entry(IBP_KERNEL_DECOMPRESS);
  CHECK(dec != NULL);
  for (uint64_t it = 0; it < iters; it++)
    region_case(dec, iters + it, &y);
  printf("test_kernel_stage: %llu stage tensors decoded by ibp_decompress\n",
         (unsigned long long)y.region_coded);
  if (iters >= 100)
    CHECK(y.region_coded > 0);
  /* a block decode stages rounds, not the stage's part: refused */
  ibp_decompress_args big;
  memset(&big, 0, sizeof big);
  big.tensor_bytes = IBP_KERNEL_BLOCK_R;
  big.chunk_bytes = 1;
  big.stages = (const ibp_kernel_stage *)(uintptr_t)16;
  ibp_kernel_plan bp;
  CHECK(ibp_kernels_plan_decompress(&big, 227 * 1024, 4, &bp) == -1);
  return test_end();
}
