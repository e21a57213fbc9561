/* Per-bit statistics: for every bit position, how many sampled tensors
 * have it set.
 *
 * Counting is bit-sliced: for each tensor word and bit b, the eight byte
 * lanes of one accumulator add bit b of eight bytes at once; the 8-bit
 * lanes are flushed into the 64-bit counters every 255 tensors.  Threads
 * split the tensors (each with private counters) when R is small, and the
 * bytes of the tensor (disjoint counters) when it is large. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"
#include "params_internal.h"

#define BATCH 255 /* tensors per flush: an 8-bit lane cannot overflow */

ibp_status ibp__sample_make(const ibp_sampling *sampling, uint64_t n,
                            ibp__sample *out) {
  *out = (ibp__sample){n, n, 1, 0};
  if (!sampling)
    return IBP_OK;
  if (sampling->stride) {
    out->stride = sampling->stride;
    out->count = n ? (n - 1) / sampling->stride + 1 : 0;
    return IBP_OK;
  }
  if (sampling->fraction == 0)
    return IBP_OK;
  if (!(sampling->fraction > 0 && sampling->fraction <= 1))
    return IBP_ERR_SAMPLE;
  uint64_t count = (uint64_t)((long double)n * sampling->fraction);
  out->count = n == 0 ? 0 : count < 1 ? 1 : count > n ? n : count;
  out->stride = out->count == n ? 1 : 0;
  return IBP_OK;
}

ibp_status ibp__sample_spread(uint64_t budget, uint32_t R, uint64_t n,
                              ibp__sample *out) {
  uint64_t want = budget / R ? budget / R : 1;
  ibp_sampling sampling = {.fraction = 0};
  if (want < n)
    sampling.fraction = (double)want / (double)n;
  return ibp__sample_make(&sampling, n, out);
}

ibp_status ibp__sample_jittered(uint64_t budget, uint32_t R, uint64_t n,
                                ibp__sample *out) {
  ibp_status s = ibp__sample_spread(budget, R, n, out);
  out->jitter = out->stride == 0;
  return s;
}

ibp_status ibp_bitstats_init(ibp_bitstats *st, uint32_t tensor_bytes) {
  if (!st)
    return IBP_ERR_INVALID_ARGUMENT;
  *st = (ibp_bitstats){0};
  if (tensor_bytes == 0 || tensor_bytes > IBP_MAX_TENSOR_BYTES)
    return IBP_ERR_TENSOR_BYTES;
  st->ones = calloc(8 * (size_t)tensor_bytes, sizeof *st->ones);
  if (!st->ones)
    return IBP_ERR_NO_MEMORY;
  st->tensor_bytes = tensor_bytes;
  return IBP_OK;
}

void ibp_bitstats_free(ibp_bitstats *st) {
  if (!st)
    return;
  free(st->ones);
  *st = (ibp_bitstats){0};
}

typedef struct count_job {
  const uint8_t *data;
  uint32_t R;
  const ibp__sample *sample;
  uint64_t j0, j1; /* sampled tensors [j0, j1) */
  uint32_t w0, w1; /* words [w0, w1) of each tensor */
  uint64_t *ones;  /* 8*R counters to add to */
  uint64_t *acc;   /* 8*(w1-w0) lane accumulators */
} count_job;

static void flush_lanes(const count_job *jb) {
  for (uint32_t w = jb->w0; w < jb->w1; w++) {
    for (uint32_t lane = 0; lane < 8 && 8 * w + lane < jb->R; lane++) {
      uint64_t *out = jb->ones + 8 * (8 * (size_t)w + lane);
      const uint64_t *acc = jb->acc + 8 * (size_t)(w - jb->w0);
      for (unsigned b = 0; b < 8; b++)
        out[b] += (acc[b] >> (8 * lane)) & 0xFF;
    }
  }
}

static inline void add_word(uint64_t *acc, uint64_t x) {
  for (unsigned b = 0; b < 8; b++)
    acc[b] += (x >> b) & 0x0101010101010101ULL;
}

static void count_task(void *arg) {
  count_job *jb = arg;
  const size_t lanes = 8 * (size_t)(jb->w1 - jb->w0);
  const uint32_t full_end = jb->R / 8 < jb->w1 ? jb->R / 8 : jb->w1;
  for (uint64_t j = jb->j0; j < jb->j1; j += BATCH) {
    uint64_t stop = j + BATCH < jb->j1 ? j + BATCH : jb->j1;
    memset(jb->acc, 0, lanes * sizeof *jb->acc);
    for (uint64_t s = j; s < stop; s++) {
      const uint8_t *t = jb->data + ibp__sample_at(jb->sample, s) * jb->R;
      uint32_t w = jb->w0;
      for (; w < full_end; w++)
        add_word(jb->acc + 8 * (size_t)(w - jb->w0), ibp__load64(t + 8 * w));
      if (w < jb->w1) /* the last, partial word */
        add_word(jb->acc + 8 * (size_t)(w - jb->w0),
                 ibp__load_partial(t + 8 * w, jb->R - 8 * w));
    }
    flush_lanes(jb);
  }
}

/* Splits the work over `threads` jobs; row split jobs get private
 * counters (merged by the caller). */
static ibp_status plan_jobs(ibp_bitstats *st, const uint8_t *data,
                            const ibp__sample *sample, unsigned threads,
                            count_job *jobs, int *by_rows) {
  const uint32_t R = st->tensor_bytes, words = (R + 7) / 8;
  *by_rows = words < 64 * threads;
  for (unsigned i = 0; i < threads; i++) {
    count_job *jb = &jobs[i];
    jb->data = data;
    jb->R = R;
    jb->sample = sample;
    if (*by_rows) {
      jb->j0 = sample->count * i / threads;
      jb->j1 = sample->count * (i + 1) / threads;
      jb->w0 = 0;
      jb->w1 = words;
      jb->ones = calloc(8 * (size_t)R, sizeof *jb->ones);
    } else {
      jb->j0 = 0;
      jb->j1 = sample->count;
      jb->w0 = (uint32_t)((uint64_t)words * i / threads);
      jb->w1 = (uint32_t)((uint64_t)words * (i + 1) / threads);
      jb->ones = st->ones;
    }
    jb->acc = malloc(8 * (size_t)(jb->w1 - jb->w0 + 1) * sizeof *jb->acc);
    if (!jb->acc || !jb->ones)
      return IBP_ERR_NO_MEMORY;
  }
  return IBP_OK;
}

ibp_status ibp_bitstats_add(ibp_bitstats *st, const void *data, uint64_t n,
                            const ibp_sampling *sampling, unsigned threads) {
  if (!st || !st->ones || (!data && n))
    return IBP_ERR_INVALID_ARGUMENT;
  ibp__sample sample;
  ibp_status s = ibp__sample_make(sampling, n, &sample);
  if (s != IBP_OK || sample.count == 0)
    return s;
  threads = ibp__threads(threads);
  if (threads > sample.count)
    threads = (unsigned)sample.count;
  count_job *jobs = calloc(threads, sizeof *jobs);
  int by_rows = 0;
  if (!jobs)
    return IBP_ERR_NO_MEMORY;
  s = plan_jobs(st, data, &sample, threads, jobs, &by_rows);
  if (s == IBP_OK)
    s = ibp__run_parallel(count_task, jobs, sizeof *jobs, threads);
  for (unsigned i = 0; i < threads; i++) {
    if (by_rows && jobs[i].ones) {
      if (s == IBP_OK)
        for (size_t k = 0; k < 8 * (size_t)st->tensor_bytes; k++)
          st->ones[k] += jobs[i].ones[k];
      free(jobs[i].ones);
    }
    free(jobs[i].acc);
  }
  free(jobs);
  if (s == IBP_OK)
    st->tensors += sample.count;
  return s;
}

double ibp_bitstats_invariant_fraction(const ibp_bitstats *st, double share) {
  if (!st || !st->ones || st->tensors == 0 || st->tensor_bytes == 0)
    return 0.0;
  const uint64_t n = st->tensors;
  const uint64_t need = ibp__min_agree(share < 0.5 ? 0.5 : share, n);
  uint64_t hits = 0;
  for (size_t k = 0; k < 8 * (size_t)st->tensor_bytes; k++) {
    uint64_t ones = st->ones[k];
    uint64_t agree = ones > n - ones ? ones : n - ones;
    hits += agree >= need;
  }
  return (double)hits / (double)(8 * (uint64_t)st->tensor_bytes);
}

double ibp_bitstats_entropy_bits(const ibp_bitstats *st) {
  if (!st || !st->ones || st->tensors == 0 || st->tensor_bytes == 0)
    return 0.0;
  const double n = (double)st->tensors;
  double bits = 0.0;
  for (size_t k = 0; k < 8 * (size_t)st->tensor_bytes; k++) {
    double p = (double)st->ones[k] / n;
    if (p > 0.0 && p < 1.0)
      bits -= p * log2(p) + (1.0 - p) * log2(1.0 - p);
  }
  return bits;
}
