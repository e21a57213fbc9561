/* Threshold and chunk-width search.
 *
 * Masks are nested: sorting the bits by how many tensors agree on their
 * majority value ("agree"), the mask at any threshold is a prefix of that
 * order.  The search measures the exact stored bytes (bitmap and byte
 * rounding included) of the evaluation tensors for
 *   - the paper's grid: agree > T*n for T = 0.50, 0.51, ..., 0.99,
 *   - finer thresholds up to 1.00 (unanimous bits only) and the report's
 *     table thresholds (agree >= ceil(T*n)),
 * then refines between the grid neighbours of the best prefix, per chunk
 * width, and keeps the prefix and width that store the fewest bytes. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"
#include "params_internal.h"

#define EVAL_DEFAULT_BYTES (64ull << 20)
#define CONFIRM_FACTOR 16 /* finalists are re-measured on 16x more data */
#define FINALISTS_PER_WIDTH 2
/* finalists more than 1/200 behind the best on the evaluation sample are
 * not re-measured (a 4 MiB sample's chunk width 2 % behind stayed so on
 * 64 MiB; their confirmation was half a region's search) */
#define CONFIRM_MARGIN 200
#define SCOUT_DIVISOR 8   /* the scout sample is 1/8 of the evaluation's */
#define SCOUT_WINDOW 0.05 /* thresholds re-measured around the scout's best */
#define SCOUT_MARGIN 50   /* widths within 1/50 of the scout's best go on */
#define REFINE_STEPS 24

static const double table_t[IBP_REPORT_THRESHOLDS] = {0.5, 0.6,  0.7,  0.8,
                                                      0.9, 0.95, 0.99, 1.0};

typedef struct search_ctx {
  const uint8_t *data;
  uint32_t R;
  ibp__sample scout;   /* tensors the whole grid is measured on */
  ibp__sample eval;    /* tensors the search measures */
  ibp__sample confirm; /* tensors the finalists are re-measured on */
  unsigned threads;
  const ibp_bitstats *st;
  ibp__agreement ag;      /* st's, for the masks built */
  uint64_t *agree_sorted; /* distinct agree values, descending */
  size_t n_agree;
} search_ctx;

/* ---- evaluation: stored bytes of the evaluation tensors ------------------ */

typedef struct eval_job {
  const search_ctx *cx;
  const ibp__sample *sample;
  const ibp_params *p;
  uint64_t j0, j1;
  uint64_t bytes; /* out */
} eval_job;

static void eval_task(void *arg) {
  eval_job *jb = arg;
  const ibp__pack_ops *pack = ibp__pack();
  for (uint64_t j = jb->j0; j < jb->j1; j++) {
    const uint8_t *t = jb->cx->data + ibp__sample_at(jb->sample, j) * jb->cx->R;
    jb->bytes += pack->stored_size(jb->p, t);
  }
}

/* Stored bytes of the sampled tensors with invariant bits = {agree >= K}
 * at chunk width c; UINT64_MAX when out of memory. */
static uint64_t measure(const search_ctx *cx, const ibp__sample *sample,
                        uint64_t K, uint32_t c) {
  ibp_params p;
  eval_job jobs[64];
  unsigned t = cx->threads > 64 ? 64 : cx->threads;
  uint64_t total = 0;
  if (ibp__params_build_agreement(&cx->ag, K, c, &p) != IBP_OK)
    return UINT64_MAX;
  if (t > sample->count)
    t = (unsigned)sample->count;
  for (unsigned i = 0; i < t; i++)
    jobs[i] = (eval_job){
        cx, sample, &p, sample->count * i / t, sample->count * (i + 1) / t, 0};
  ibp__run_parallel(eval_task, jobs, sizeof *jobs, t);
  for (unsigned i = 0; i < t; i++)
    total += jobs[i].bytes;
  ibp_params_free(&p);
  return total;
}

static double saved_share(const search_ctx *cx, const ibp__sample *sample,
                          uint64_t stored) {
  return 1.0 - (double)stored / ((double)sample->count * cx->R);
}

/* ---- candidate thresholds ------------------------------------------------ */

static int desc_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The bits' agreement (cx->ag) and their distinct agree values,
 * descending: each is a distinct mask. */
static ibp_status collect_agree(search_ctx *cx) {
  const size_t bits = 8 * (size_t)cx->R;
  ibp_status s = ibp__agreement_make(cx->st, &cx->ag);
  uint64_t *v = s == IBP_OK ? malloc(bits * sizeof *v) : NULL;
  if (!v)
    return s == IBP_OK ? IBP_ERR_NO_MEMORY : s;
  memcpy(v, cx->ag.agree, bits * sizeof *v);
  qsort(v, bits, sizeof *v, desc_u64);
  size_t m = 0;
  for (size_t k = 0; k < bits; k++)
    if (m == 0 || v[m - 1] != v[k])
      v[m++] = v[k];
  cx->agree_sorted = v;
  cx->n_agree = m;
  return IBP_OK;
}

/* The smallest distinct agree value >= K: the same mask as K, measured
 * once.  0 when the mask at K is empty. */
static uint64_t canonical_k(const search_ctx *cx, uint64_t K) {
  uint64_t found = 0;
  for (size_t i = 0; i < cx->n_agree && cx->agree_sorted[i] >= K; i++)
    found = cx->agree_sorted[i];
  return found;
}

/* Candidate K values of the coarse grid, ascending mask size. */
static size_t grid(const search_ctx *cx, uint64_t *ks) {
  const uint64_t n = cx->st->tensors;
  size_t m = 0;
  ks[m++] = n; /* unanimous bits */
  static const double fine[] = {0.9999, 0.9995, 0.999, 0.998, 0.997, 0.996,
                                0.995,  0.994,  0.993, 0.992, 0.991};
  for (size_t i = 0; i < sizeof fine / sizeof *fine; i++)
    ks[m++] = (uint64_t)floor(fine[i] * (double)n) + 1;
  for (int pct = 99; pct >= 50; pct--) /* the paper's rule: agree > T*n */
    ks[m++] = (uint64_t)floor(pct / 100.0 * (double)n) + 1;
  for (int i = IBP_REPORT_THRESHOLDS - 1; i >= 0; i--)
    ks[m++] = ibp__min_agree(table_t[i], n);
  for (size_t i = 0; i < m; i++)
    if (ks[i] > n)
      ks[i] = n;
  return m;
}

/* ---- the search ---------------------------------------------------------- */

typedef struct best_t {
  uint64_t stored;
  uint64_t K;
  uint32_t c;
} best_t;

/* A tiny memo so that the grid, the table and the refinement never
 * measure the same mask twice. */
typedef struct memo {
  const ibp__sample *sample; /* the tensors measured */
  uint64_t K[256];
  uint64_t stored[256];
  size_t n;
} memo;

static uint64_t eval_memo(const search_ctx *cx, memo *mo, uint64_t K,
                          uint32_t c) {
  K = canonical_k(cx, K);
  if (K == 0)
    K = cx->st->tensors + 1; /* empty mask */
  for (size_t i = 0; i < mo->n; i++)
    if (mo->K[i] == K)
      return mo->stored[i];
  uint64_t stored = measure(cx, mo->sample, K, c);
  if (mo->n < 256) {
    mo->K[mo->n] = K;
    mo->stored[mo->n++] = stored;
  }
  return stored;
}

static void consider(best_t *b, uint64_t stored, uint64_t K, uint32_t c) {
  if (stored < b->stored)
    *b = (best_t){stored, K, c};
}

/* Between the best grid point and its neighbours, tries the distinct
 * masks that lie there (up to REFINE_STEPS of them, evenly spread). */
static void refine(const search_ctx *cx, memo *mo, best_t *b, uint64_t k_hi,
                   uint64_t k_lo, uint32_t c) {
  size_t first = cx->n_agree, last = 0;
  for (size_t i = 0; i < cx->n_agree; i++) {
    uint64_t a = cx->agree_sorted[i];
    if (a <= k_hi && a >= k_lo) {
      if (first == cx->n_agree)
        first = i;
      last = i;
    }
  }
  if (first == cx->n_agree)
    return;
  size_t span = last - first + 1;
  size_t steps = span < REFINE_STEPS ? span : REFINE_STEPS;
  for (size_t s = 0; s < steps; s++) {
    size_t i = first + (steps > 1 ? s * (span - 1) / (steps - 1) : 0);
    uint64_t K = cx->agree_sorted[i];
    consider(b, eval_memo(cx, mo, K, c), K, c);
  }
}

/* The masks of the memo that stored the fewest bytes, best first. */
static size_t finalists(const memo *mo, uint32_t c, best_t *out) {
  size_t m = 0;
  for (size_t f = 0; f < FINALISTS_PER_WIDTH; f++) {
    best_t b = {UINT64_MAX, 0, c};
    for (size_t i = 0; i < mo->n; i++) {
      int taken = 0;
      for (size_t j = 0; j < m; j++)
        taken |= out[j].K == mo->K[i];
      if (!taken)
        consider(&b, mo->stored[i], mo->K[i], c);
    }
    if (b.stored != UINT64_MAX)
      out[m++] = b;
  }
  return m;
}

/* Measures the candidate K values, then the masks between the best and
 * its neighbours among them. */
static void search_grid(const search_ctx *cx, memo *mo, best_t *b,
                        const uint64_t *ks, size_t m, uint32_t c) {
  const uint64_t n = cx->st->tensors;
  for (size_t i = 0; i < m; i++)
    consider(b, eval_memo(cx, mo, ks[i], c), ks[i], c);
  uint64_t hi = n, lo = 1;
  for (size_t i = 0; i < m; i++) {
    if (ks[i] > b->K && ks[i] < hi)
      hi = ks[i];
    if (ks[i] < b->K && ks[i] > lo)
      lo = ks[i];
  }
  refine(cx, mo, b, hi, lo, c);
}

/* The grid values whose threshold lies within SCOUT_WINDOW of K's. */
static size_t window(const search_ctx *cx, const uint64_t *ks, size_t m,
                     uint64_t K, uint64_t *out) {
  const double n = (double)cx->st->tensors, t = (double)K / n;
  size_t w = 0;
  out[w++] = K;
  for (size_t i = 0; i < m; i++)
    if (fabs((double)ks[i] / n - t) <= SCOUT_WINDOW)
      out[w++] = ks[i];
  return w;
}

/* The search of one chunk width. */
typedef struct width_search {
  uint32_t c;
  int wi;     /* index in IBP_CHUNK_WIDTHS and in the report */
  memo scout; /* the whole grid, on the scout sample */
  memo final; /* the window around the scout's best, on the eval sample */
  memo *last; /* the memo the finalists come from */
  best_t best;
} width_search;

/* Stage 1: the grid (or the given threshold) on the first sample. */
static void search_first(const search_ctx *cx, width_search *ws,
                         const ibp_search_options *opt,
                         ibp_search_report *rep) {
  const uint64_t n = cx->st->tensors;
  const int scouting = cx->scout.count < cx->eval.count;
  ws->scout = (memo){scouting ? &cx->scout : &cx->eval, {0}, {0}, 0};
  ws->final = (memo){&cx->eval, {0}, {0}, 0};
  ws->best = (best_t){UINT64_MAX, 0, ws->c};
  if (opt->threshold >= 0) { /* fixed: measured on the eval sample */
    uint64_t K = ibp__min_agree(opt->threshold, n);
    ws->last = &ws->final;
    consider(&ws->best, eval_memo(cx, ws->last, K, ws->c), K, ws->c);
    return;
  }
  uint64_t ks[128];
  size_t m = grid(cx, ks);
  ws->last = &ws->scout;
  search_grid(cx, &ws->scout, &ws->best, ks, m, ws->c);
  for (int i = 0; rep && i < IBP_REPORT_THRESHOLDS; i++)
    rep->table_saved[ws->wi][i] = saved_share(
        cx, ws->scout.sample,
        eval_memo(cx, &ws->scout, ibp__min_agree(table_t[i], n), ws->c));
}

/* Stage 2: thresholds near the scout's best, on the eval sample. */
static void search_final(const search_ctx *cx, width_search *ws) {
  uint64_t ks[128], near[130];
  size_t w = window(cx, ks, grid(cx, ks), ws->best.K, near);
  ws->best = (best_t){UINT64_MAX, 0, ws->c};
  ws->last = &ws->final;
  search_grid(cx, &ws->final, &ws->best, near, w, ws->c);
}

static void report_width(const search_ctx *cx, const width_search *ws,
                         ibp_search_report *rep) {
  const uint64_t n = cx->st->tensors;
  rep->best_threshold[ws->wi] =
      ws->best.K > n ? 1.0 : (double)ws->best.K / (double)n;
  rep->best_saved[ws->wi] = saved_share(cx, ws->last->sample, ws->best.stored);
}

/* Runs both stages over the chunk widths; only widths whose scout result
 * is within SCOUT_MARGIN of the best one go on to stage 2 and to the
 * finalists. */
static size_t search_widths(const search_ctx *cx, const ibp_search_options *opt,
                            best_t *fin, ibp_search_report *rep) {
  width_search ws[IBP_CHUNK_WIDTH_COUNT];
  size_t nw = 0, nfin = 0;
  uint64_t top = UINT64_MAX;
  for (int w = (int)IBP_CHUNK_WIDTH_COUNT - 1; w >= 0; w--) {
    const uint32_t c = ibp_chunk_width((unsigned)w);
    if (opt->chunk_bytes && opt->chunk_bytes != c)
      continue;
    ws[nw] = (width_search){.c = c, .wi = w};
    search_first(cx, &ws[nw], opt, rep);
    if (ws[nw].best.stored < top)
      top = ws[nw].best.stored;
    nw++;
  }
  for (size_t i = 0; i < nw; i++) {
    int near_top = ws[i].best.stored <= top + top / SCOUT_MARGIN;
    if (ws[i].last == &ws[i].scout && ws[i].scout.sample != &cx->eval &&
        near_top)
      search_final(cx, &ws[i]);
    if (rep)
      report_width(cx, &ws[i], rep);
    if (near_top || ws[i].last->sample == &cx->eval)
      nfin += finalists(ws[i].last, ws[i].c, fin + nfin);
  }
  return nfin;
}

/* Re-measures the finalists on the (larger) confirmation sample when the
 * search looked at fewer tensors -- those within CONFIRM_MARGIN of the
 * best there -- and returns the best; ties go to the wider chunk (fewer
 * bitmap bits to parse on the GPU). */
static best_t pick(const search_ctx *cx, best_t *fin, size_t nfin) {
  best_t best = {UINT64_MAX, 0, 0};
  int confirm = cx->confirm.count > cx->eval.count && nfin > 1;
  uint64_t least = UINT64_MAX; /* on the evaluation sample */
  for (size_t i = 0; i < nfin; i++)
    least = fin[i].stored < least ? fin[i].stored : least;
  for (size_t i = 0; i < nfin; i++) {
    if (confirm && fin[i].stored - least > least / CONFIRM_MARGIN)
      continue; /* too far behind to be worth the larger sample */
    if (confirm)
      fin[i].stored = measure(cx, &cx->confirm, fin[i].K, fin[i].c);
    if (fin[i].stored < best.stored ||
        (fin[i].stored == best.stored && fin[i].c > best.c))
      best = fin[i];
  }
  return best;
}

static ibp_status check_options(const void *data, uint64_t n, uint32_t R,
                                const ibp_search_options *opt,
                                const ibp_params *out) {
  if (!out || (!data && n))
    return IBP_ERR_INVALID_ARGUMENT;
  if (R == 0 || R > IBP_MAX_TENSOR_BYTES)
    return IBP_ERR_TENSOR_BYTES;
  if (n == 0)
    return IBP_ERR_NO_TENSORS;
  if (opt->chunk_bytes && !ibp_chunk_width_valid(opt->chunk_bytes))
    return IBP_ERR_CHUNK_BYTES;
  if (opt->threshold >= 0 && !(opt->threshold >= 0.5 && opt->threshold <= 1))
    return IBP_ERR_THRESHOLD;
  if (opt->threshold < 0 && opt->threshold != opt->threshold)
    return IBP_ERR_THRESHOLD; /* NaN */
  return IBP_OK;
}

static void report_init(ibp_search_report *rep, uint64_t n) {
  *rep = (ibp_search_report){.tensors = n};
  for (unsigned w = 0; w < IBP_CHUNK_WIDTH_COUNT; w++) {
    rep->best_threshold[w] = -1;
    rep->best_saved[w] = -1;
    for (int i = 0; i < IBP_REPORT_THRESHOLDS; i++)
      rep->table_saved[w][i] = -1;
  }
  for (int i = 0; i < IBP_REPORT_THRESHOLDS; i++)
    rep->table_thresholds[i] = table_t[i];
}

static ibp_status run_search(search_ctx *cx, const ibp_search_options *opt,
                             ibp_params *out, ibp_search_report *rep) {
  ibp_status s = collect_agree(cx);
  if (s != IBP_OK) {
    ibp__agreement_free(&cx->ag);
    return s;
  }
  best_t fin[IBP_CHUNK_WIDTH_COUNT * FINALISTS_PER_WIDTH];
  size_t nfin = search_widths(cx, opt, fin, rep);
  best_t best = pick(cx, fin, nfin);
  free(cx->agree_sorted);
  s = best.stored == UINT64_MAX
          ? IBP_ERR_NO_MEMORY
          : ibp__params_build_agreement(&cx->ag, best.K, best.c, out);
  ibp__agreement_free(&cx->ag);
  if (s == IBP_OK && opt->threshold >= 0)
    out->threshold = opt->threshold;
  return s;
}

ibp_status ibp_search(const void *data, uint64_t n, uint32_t tensor_bytes,
                      const ibp_search_options *options, ibp_params *out,
                      ibp_search_report *report) {
  const ibp_search_options none = {.threshold = -1};
  const ibp_search_options *opt = options ? options : &none;
  if (out)
    *out = (ibp_params){0};
  ibp_status s = check_options(data, n, tensor_bytes, opt, out);
  if (s != IBP_OK)
    return s;
  ibp_bitstats st;
  s = ibp_bitstats_init(&st, tensor_bytes);
  if (s == IBP_OK)
    s = ibp_bitstats_add(&st, data, n, &opt->sampling, opt->threads);
  if (s != IBP_OK) {
    ibp_bitstats_free(&st);
    return s;
  }
  uint64_t budget =
      opt->eval_max_bytes ? opt->eval_max_bytes : EVAL_DEFAULT_BYTES;
  search_ctx cx = {
      data, tensor_bytes, {0},  {0}, {0}, ibp__threads(opt->threads),
      &st,  {0},          NULL, 0};
  s = ibp__sample_spread(budget / SCOUT_DIVISOR, tensor_bytes, n, &cx.scout);
  if (s == IBP_OK)
    s = ibp__sample_spread(budget, tensor_bytes, n, &cx.eval);
  if (s == IBP_OK)
    s = ibp__sample_spread(budget * CONFIRM_FACTOR, tensor_bytes, n,
                           &cx.confirm);
  if (report) {
    report_init(report, n);
    report->stat_tensors = st.tensors;
    report->eval_tensors = cx.eval.count;
    report->table_tensors = cx.scout.count;
    report->invariant80_fraction = ibp_bitstats_invariant_fraction(&st, 0.8);
  }
  if (s == IBP_OK)
    s = run_search(&cx, opt, out, report);
  ibp_bitstats_free(&st);
  return s;
}
