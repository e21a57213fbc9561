/*
 * Statistics and params against naive counting:
 *   - ibp_bitstats_add counters == per-bit counts over the sampled tensors,
 *     for every tensor, a stride, a fraction (stride winning over fraction),
 *     threads 1..4, and repeated adds accumulating;
 *   - the tensors a fraction keeps are found exactly with one-hot tensors:
 *     about fraction*n of them, evenly spaced, the same for any thread count;
 *   - ibp_params_build == the format's rule computed naively (majority 1 iff
 *     ones > tensors - ones; invariant iff >= ceil(threshold*tensors) agree);
 *   - ibp_bitstats_invariant_fraction == the naive share.
 * IBP_TEST_ITERATIONS = data sets.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_data.h"
#include "ref_codec.h"

/* Which of n tensors `sampling` keeps (sel[i] = 0/1), found by counting
 * one-hot tensors (tensor i has only bit i set).  Returns how many. */
static uint64_t sampled_set(uint64_t n, const ibp_sampling *s, unsigned threads,
                            uint8_t *sel) {
  uint32_t R = (uint32_t)((n + 7) / 8);
  uint8_t *data = xcalloc((size_t)n * R);
  for (uint64_t i = 0; i < n; i++)
    ref_put_bit(data + i * R, i, 1);
  ibp_bitstats st = {0};
  CHECK_OK(ibp_bitstats_init(&st, R));
  CHECK_OK(ibp_bitstats_add(&st, data, n, s, threads));
  uint64_t count = 0;
  for (uint64_t k = 0; k < 8 * (uint64_t)R; k++) {
    CHECKF(st.ones[k] <= 1 && (k < n || st.ones[k] == 0),
           "one-hot counter %llu = %llu", (unsigned long long)k,
           (unsigned long long)st.ones[k]);
    if (k < n)
      sel[k] = (uint8_t)st.ones[k];
    count += st.ones[k];
  }
  CHECK_U64(st.tensors, count);
  ibp_bitstats_free(&st);
  free(data);
  return count;
}

static void check_fraction_shape(uint64_t n, double f, const uint8_t *sel,
                                 uint64_t count) {
  double want = f * (double)n, slack = 1.0 + 0.02 * (double)n;
  CHECKF(count >= 1 && (double)count >= want - slack &&
             (double)count <= want + slack,
         "fraction %.4f of %llu tensors kept %llu", f, (unsigned long long)n,
         (unsigned long long)count);
  uint64_t prev = UINT64_MAX, gmin = UINT64_MAX, gmax = 0;
  for (uint64_t i = 0; i < n; i++) {
    if (!sel[i])
      continue;
    if (prev != UINT64_MAX) {
      uint64_t gap = i - prev;
      gmin = gap < gmin ? gap : gmin;
      gmax = gap > gmax ? gap : gmax;
    }
    prev = i;
  }
  CHECKF(count < 3 || gmax - gmin <= 1,
         "fraction %.4f of %llu: gaps %llu..%llu are not even", f,
         (unsigned long long)n, (unsigned long long)gmin,
         (unsigned long long)gmax);
}

/* Naive counters over the tensors with sel[i] set. */
static uint64_t naive_counts(uint32_t R, const uint8_t *data, uint64_t n,
                             const uint8_t *sel, uint64_t *ones) {
  uint64_t counted = 0;
  memset(ones, 0, 8 * (size_t)R * sizeof *ones);
  for (uint64_t i = 0; i < n; i++)
    if (sel[i])
      counted += ref_count_bits(R, data + i * R, 1, 0, 1, ones);
  return counted;
}

static void check_counts(uint32_t R, const uint8_t *data, uint64_t n,
                         const ibp_sampling *s, unsigned threads,
                         const uint8_t *sel, uint64_t *ones) {
  uint64_t counted = naive_counts(R, data, n, sel, ones);
  ibp_bitstats st = {0};
  CHECK_OK(ibp_bitstats_init(&st, R));
  CHECK_U64(st.tensor_bytes, R);
  CHECK_U64(st.tensors, 0);
  for (int rep = 1; rep <= 2; rep++) { /* a second add accumulates */
    CHECK_OK(ibp_bitstats_add(&st, data, n, s, threads));
    CHECK_U64(st.tensors, rep * counted);
    for (uint64_t k = 0; k < 8 * (uint64_t)R; k++)
      CHECKF(st.ones[k] == rep * ones[k],
             "threads=%u add #%d: ones[%llu] = %llu, want %llu", threads, rep,
             (unsigned long long)k, (unsigned long long)st.ones[k],
             (unsigned long long)(rep * ones[k]));
  }
  ibp_bitstats_free(&st);
}

static void check_sampling(rng *r, uint32_t R, const uint8_t *data, uint64_t n,
                           uint64_t *ones) {
  ibp_sampling s = {0};
  int mode = (int)rng_below(r, 4);
  if (mode == 1 || mode == 3)
    s.stride = 1 + rng_below(r, 9);
  if (mode == 2 || mode == 3)
    s.fraction = rng_chance(r, 0.2) ? 1.0 : 0.01 + 0.99 * rng_unit(r);
  test_case("bitstats R=%u n=%llu stride=%llu fraction=%.4f", R,
            (unsigned long long)n, (unsigned long long)s.stride, s.fraction);
  uint8_t *sel = xmalloc(n), *sel2 = xmalloc(n);
  if (s.stride) { /* every stride-th tensor, fraction or not */
    for (uint64_t i = 0; i < n; i++)
      sel[i] = i % s.stride == 0;
    uint64_t count = sampled_set(n, &s, 1, sel2);
    CHECK_U64(count, (n + s.stride - 1) / s.stride);
    CHECK_MEM(sel2, sel, n, "tensors kept by the stride");
  } else if (s.fraction > 0) {
    uint64_t count = sampled_set(n, &s, 1, sel);
    check_fraction_shape(n, s.fraction, sel, count);
  } else {
    memset(sel, 1, n);
  }
  for (unsigned threads = 1; threads <= 4; threads++) {
    sampled_set(n, &s, threads, sel2);
    CHECK_MEM(sel2, sel, n, "kept tensors depend on the thread count");
    check_counts(R, data, n, &s, threads, sel, ones);
  }
  free(sel);
  free(sel2);
}

/* ---- params_build and invariant_fraction --------------------------------- */

/* Defensible readings of "ceil(threshold * tensors)" in floating point:
 * the double product, the smallest a with a/T >= threshold, and the
 * product less 1e-6 (robust to a threshold computed as K/T).  The library
 * may use any of them; where they agree the check is exact. */
static int need_candidates(double thr, uint64_t T, uint64_t *need) {
  need[0] = ref_need_double(thr, T);
  uint64_t a = 0;
  while (a < T && (double)a / (double)T < thr)
    a++;
  need[1] = a;
  need[2] = (uint64_t)ceill((long double)thr * (long double)T - 1e-6L);
  return 3;
}

static void check_params(rng *r, const ibp_bitstats *st, double thr) {
  uint32_t R = st->tensor_bytes, c = rng_chunk(r);
  test_case("params R=%u tensors=%llu threshold=%.17g c=%u", R,
            (unsigned long long)st->tensors, thr, c);
  ibp_params p = {0};
  CHECK_OK(ibp_params_build(st, thr, c, &p));
  CHECK_OK(ibp_params_check(&p));
  CHECK_U64(p.tensor_bytes, R);
  CHECK_U64(p.chunk_bytes, c);
  CHECK(p.threshold == thr);
  uint8_t *mask = xmalloc(R), *bitval = xmalloc(R);
  uint64_t need[3];
  int ok = 0, ncand = need_candidates(thr, st->tensors, need);
  for (int i = 0; i < ncand && !ok; i++) {
    ref_masks_from_counts(R, st->ones, st->tensors, need[i], mask, bitval);
    ok = !memcmp(mask, p.mask, R) && !memcmp(bitval, p.bitval, R);
  }
  if (!ok) {
    ref_masks_from_counts(R, st->ones, st->tensors, need[0], mask, bitval);
    CHECK_MEM(p.mask, mask, R, "params mask");
    CHECK_MEM(p.bitval, bitval, R, "params bitval");
  }
  free(mask);
  free(bitval);
  ibp_params_free(&p);
  ibp_params_free(&p); /* freeing twice is allowed */
}

/* Share of bits whose majority is held by >= share*T tensors, with the
 * same readings of the product as need_candidates. */
static void check_invariant_fraction(const ibp_bitstats *st, double share) {
  uint64_t bits = 8 * (uint64_t)st->tensor_bytes, T = st->tensors;
  uint64_t need[3], hits[3] = {0};
  int ncand = need_candidates(share, T, need);
  for (uint64_t k = 0; k < bits; k++) {
    uint64_t ones = st->ones[k], agree = ones > T - ones ? ones : T - ones;
    for (int i = 0; i < ncand; i++)
      hits[i] += agree >= need[i];
  }
  double got = ibp_bitstats_invariant_fraction(st, share);
  int ok = 0;
  for (int i = 0; i < ncand; i++)
    ok |= fabs(got - (double)hits[i] / (double)bits) < 1e-12;
  CHECKF(ok,
         "invariant_fraction(%.17g) over %llu tensors = %.17g, want %.17g "
         "(bits whose majority holds in >= %llu tensors)",
         share, (unsigned long long)T, got, (double)hits[0] / (double)bits,
         (unsigned long long)need[0]);
}

static void check_params_all(rng *r, uint32_t R, const uint8_t *data,
                             uint64_t n) {
  ibp_bitstats st = {0};
  CHECK_OK(ibp_bitstats_init(&st, R));
  CHECK_OK(ibp_bitstats_add(&st, data, n, &(ibp_sampling){0}, 1));
  CHECK_U64(st.tensors, n);
  check_params(r, &st, 0.5);
  check_params(r, &st, 1.0);
  check_params(r, &st, 0.5 + 0.5 * rng_unit(r));
  check_params(r, &st, (double)rng_range(r, 50, 99) / 100.0);
  check_invariant_fraction(&st, 0.8);
  check_invariant_fraction(&st, 0.5 + 0.5 * rng_unit(r));
  check_invariant_fraction(&st, 1.0);
  ibp_bitstats_free(&st);
  ibp_bitstats_free(&st);
}

int main(void) {
  uint64_t iters = test_begin("test_bitstats", 200);
  for (uint64_t it = 0; it < iters; it++) {
    rng r;
    test_iteration(&r, it);
    uint32_t R = rng_log_uniform(&r, 1, 2048);
    uint64_t n = rng_log_uniform(&r, 1, 400);
    data_kind dk = (data_kind)rng_below(&r, DATA_KINDS);
    test_case("R=%u n=%llu data=%s", R, (unsigned long long)n,
              data_kind_name(dk));
    uint8_t *data = xmalloc((size_t)n * R);
    gen_data(&r, dk, R, n, data);
    uint64_t *ones = xmalloc(8 * (size_t)R * sizeof *ones);
    check_sampling(&r, R, data, n, ones);
    check_params_all(&r, R, data, n);
    free(ones);
    free(data);
  }
  return test_end();
}
