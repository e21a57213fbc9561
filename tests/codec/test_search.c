/*
 * ibp_search on small data sets (every tensor evaluated):
 *   - the result is valid params whose Mask/Bitval are those of
 *     ibp_params_build at the chosen threshold and chunk width;
 *   - with fixed chunk width and/or threshold it returns exactly those;
 *   - property: the bytes it saves, measured with the reference encoder, are
 *     >= those of every (chunk in {1,2,4,8}, threshold in 0.50..0.99 step
 *     0.01) combination of the paper's grid (with the same fixed choices);
 *   - the report counts and its per-width best/table values agree with the
 *     reference measurements.
 * IBP_TEST_ITERATIONS = data sets.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_data.h"
#include "ref_codec.h"

typedef struct dataset {
  uint32_t R;
  uint64_t n;
  uint8_t *data;
  uint64_t *ones; /* counts over every tensor */
} dataset;

/* Reference bytes saved with the rule's masks at `need`, chunk width c. */
static uint64_t saved_at_need(const dataset *d, uint32_t c, uint64_t need) {
  uint8_t *mask = xmalloc(d->R), *bitval = xmalloc(d->R);
  ref_masks_from_counts(d->R, d->ones, d->n, need, mask, bitval);
  ref_params p = {d->R, c, mask, bitval};
  uint64_t saved = ref_saved_bytes(&p, d->data, d->n);
  free(mask);
  free(bitval);
  return saved;
}

/* Best saved bytes over the grid for chunk width c (0 = every width),
 * threshold percent (0 = every percent in 50..99). */
static uint64_t grid_best(const dataset *d, uint32_t c, unsigned percent) {
  uint64_t best = 0;
  for (unsigned w = 0; w < IBP_CHUNK_WIDTH_COUNT; w++) {
    uint32_t cc = ibp_chunk_width(w);
    if (c && cc != c)
      continue;
    uint64_t last_need = UINT64_MAX, last_saved = 0;
    for (unsigned pct = 50; pct <= 99; pct++) {
      if (percent && pct != percent)
        continue;
      uint64_t need = ref_need_percent(pct, d->n);
      if (need != last_need)
        last_saved = saved_at_need(d, cc, need);
      last_need = need;
      best = last_saved > best ? last_saved : best;
    }
  }
  return best;
}

static uint64_t saved_by(const dataset *d, const ibp_params *p) {
  ref_params rp = {d->R, p->chunk_bytes, p->mask, p->bitval};
  return ref_saved_bytes(&rp, d->data, d->n);
}

/* The search result is ibp_params_build of its own threshold and width. */
static void check_built(const dataset *d, const ibp_params *p) {
  CHECK_OK(ibp_params_check(p));
  CHECK_U64(p->tensor_bytes, d->R);
  CHECK(p->chunk_bytes == 1 || p->chunk_bytes == 2 || p->chunk_bytes == 4 ||
        p->chunk_bytes == 8);
  CHECKF(p->threshold >= 0.5 && p->threshold <= 1.0, "threshold %.17g",
         p->threshold);
  ibp_bitstats st = {0};
  CHECK_OK(ibp_bitstats_init(&st, d->R));
  CHECK_OK(ibp_bitstats_add(&st, d->data, d->n, &(ibp_sampling){0}, 1));
  ibp_params q = {0};
  CHECK_OK(ibp_params_build(&st, p->threshold, p->chunk_bytes, &q));
  CHECK_MEM(p->mask, q.mask, d->R, "search mask vs params_build");
  CHECK_MEM(p->bitval, q.bitval, d->R, "search bitval vs params_build");
  ibp_params_free(&q);
  ibp_bitstats_free(&st);
}

static void check_report(const dataset *d, const ibp_params *p,
                         const ibp_search_report *rep) {
  CHECK_U64(rep->tensors, d->n);
  CHECK_U64(rep->stat_tensors, d->n);
  CHECK_U64(rep->eval_tensors, d->n);
  double total = (double)d->n * d->R;
  double chosen = (double)saved_by(d, p) / total;
  int ci = ibp_chunk_width_index(p->chunk_bytes);
  CHECKF(fabs(rep->best_saved[ci] - chosen) < 1e-9,
         "report best_saved[%d] = %.17g, reference %.17g", ci,
         rep->best_saved[ci], chosen);
  for (int k = 0; k < (int)IBP_CHUNK_WIDTH_COUNT; k++) {
    uint32_t c = ibp_chunk_width((unsigned)k);
    double grid = (double)grid_best(d, c, 0) / total;
    CHECKF(rep->best_saved[k] >= grid - 1e-9,
           "report best_saved[%d] = %.17g < grid best %.17g", k,
           rep->best_saved[k], grid);
    for (int t = 0; t < IBP_REPORT_THRESHOLDS; t++) {
      double thr = rep->table_thresholds[t], got = rep->table_saved[k][t];
      if (got < 0)
        continue;
      double want = (double)saved_at_need(d, c, ref_need_double(thr, d->n));
      CHECKF(fabs(got - want / total) < 1e-9,
             "report table_saved[c=%u][thr=%.4f] = %.17g, reference %.17g", c,
             thr, got, want / total);
    }
  }
}

static void run_search(const dataset *d, uint32_t c, double thr,
                       unsigned threads, ibp_params *out,
                       ibp_search_report *rep) {
  ibp_search_options opt = {0};
  opt.chunk_bytes = c;
  opt.threshold = thr;
  opt.threads = threads;
  CHECK_OK(ibp_search(d->data, d->n, d->R, &opt, out, rep));
  check_built(d, out);
  if (c)
    CHECK_U64(out->chunk_bytes, c);
  if (thr >= 0)
    CHECKF(out->threshold == thr, "threshold %.17g, asked for %.17g",
           out->threshold, thr);
}

static void check_dataset(rng *r, const dataset *d) {
  ibp_params p = {0};
  ibp_search_report rep;
  unsigned threads = 1 + (unsigned)rng_below(r, 3);
  run_search(d, 0, -1.0, threads, &p, &rep);
  uint64_t saved = saved_by(d, &p), grid = grid_best(d, 0, 0);
  CHECKF(saved >= grid, "search saves %llu bytes, the grid %llu",
         (unsigned long long)saved, (unsigned long long)grid);
  check_report(d, &p, &rep);
  ibp_params_free(&p);

  uint32_t c = rng_chunk(r);
  unsigned pct = (unsigned)rng_range(r, 50, 99);
  run_search(d, c, -1.0, threads, &p, NULL); /* width fixed */
  CHECK(saved_by(d, &p) >= grid_best(d, c, 0));
  ibp_params_free(&p);
  run_search(d, 0, pct / 100.0, threads, &p, NULL); /* threshold fixed */
  CHECK(saved_by(d, &p) >= grid_best(d, 0, pct));
  ibp_params_free(&p);
  run_search(d, c, pct / 100.0, threads, &p, NULL); /* both fixed */
  ibp_params_free(&p);
}

int main(void) {
  uint64_t iters = test_begin("test_search", 100);
  for (uint64_t it = 0; it < iters; it++) {
    rng r;
    test_iteration(&r, it);
    dataset d;
    d.R = rng_log_uniform(&r, 1, 256);
    d.n = rng_range(&r, 4, 64);
    data_kind dk = (data_kind)rng_below(&r, DATA_KINDS);
    test_case("search R=%u n=%llu data=%s", d.R, (unsigned long long)d.n,
              data_kind_name(dk));
    d.data = xmalloc((size_t)d.n * d.R);
    gen_data(&r, dk, d.R, d.n, d.data);
    d.ones = xcalloc(8 * (size_t)d.R * sizeof *d.ones);
    ref_count_bits(d.R, d.data, d.n, 0, 1, d.ones);
    check_dataset(&r, &d);
    free(d.ones);
    free(d.data);
  }
  return test_end();
}
