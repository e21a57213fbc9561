/* Clusters: K Mask/Bitval pairs per region (docs/FORMAT.md §4, "Clusters").
 *
 * The search grows the clusters from the single-cluster result: each round
 * splits the largest clusters in two by bit similarity (along the
 * principal direction of the bits that are neither random nor invariant,
 * then hard EM of two per-bit Bernoulli models over those bits; two such
 * proposals, the one whose halves store the tensors in fewer bytes wins,
 * and a split that saves nothing is not made), then refines them
 * Lloyd-style
 * with the real objective: every training tensor goes to the pair that
 * stores it in the fewest bytes, and every pair is rebuilt from its
 * tensors (the threshold that stores them in the fewest bytes, or the old
 * pair when it is better).  Neither step can grow the training bytes.
 * Each K is then measured on the evaluation sample in exact stored bytes
 * and charged its metadata; the best K wins, and a K > 1 is kept only when
 * it also beats one cluster on the larger confirmation sample. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"
#include "params_internal.h"

#define TRAIN_DEFAULT_BYTES (8ull << 20)
#define EVAL_DEFAULT_BYTES (16ull << 20)
#define CONFIRM_FACTOR 4
#define AUTO_MAX_CLUSTERS 16u
#define MIN_TRAIN_PER_CLUSTER 32u /* a split leaves at least this many */
#define LLOYD_ROUNDS 3
#define MODES_ROUNDS 3     /* hard EM rounds of a split */
#define PRINCIPAL_ROUNDS 6 /* power iterations of a split */
#define SPLIT_TENSORS 256  /* tensors a split learns its halves on */
#define SPLIT_BITS 512     /* feature bits it looks at */

/* ---- ids ----------------------------------------------------------------- */

uint32_t ibp_cluster_id_bits(uint32_t k) {
  if (k <= 1 || k > IBP_MAX_CLUSTERS)
    return 0;
  return k <= 2 ? 1 : k <= 4 ? 2 : k <= 16 ? 4 : 8;
}

uint64_t ibp_cluster_id_bytes(uint32_t k, uint64_t n) {
  return (n * ibp_cluster_id_bits(k) + 7) / 8;
}

uint32_t ibp_cluster_id(const uint8_t *ids, uint32_t k, uint64_t i) {
  const uint32_t bits = ibp_cluster_id_bits(k);
  if (!bits || !ids)
    return 0;
  const uint64_t at = i * bits;
  return (ids[at / 8] >> (at % 8)) & ((1u << bits) - 1);
}

uint64_t ibp_cluster_metadata_bytes(uint32_t k, uint32_t tensor_bytes,
                                    uint64_t n) {
  return 2ull * tensor_bytes * (k ? k : 1) + (n + 7) / 8 +
         ibp_cluster_id_bytes(k, n);
}

void ibp_clusters_free(ibp_clusters *cl) {
  if (!cl)
    return;
  for (uint32_t i = 0; cl->params && i < cl->count; i++)
    ibp_params_free(&cl->params[i]);
  free(cl->params);
  *cl = (ibp_clusters){0};
}

ibp_status ibp_clusters_check(const ibp_params *params, uint32_t k) {
  if (!params || k == 0 || k > IBP_MAX_CLUSTERS)
    return IBP_ERR_INVALID_ARGUMENT;
  for (uint32_t i = 0; i < k; i++) {
    ibp_status s = ibp_params_check(&params[i]);
    if (s != IBP_OK)
      return s;
    if (params[i].tensor_bytes != params[0].tensor_bytes ||
        params[i].chunk_bytes != params[0].chunk_bytes)
      return IBP_ERR_INVALID_ARGUMENT;
  }
  return IBP_OK;
}

uint32_t ibp__best_cluster(const ibp__pack_ops *pack, const ibp_params *p,
                           uint32_t k, const uint8_t *t, size_t *stored) {
  uint32_t best = 0;
  size_t least = pack->stored_size(&p[0], t);
  for (uint32_t c = 1; c < k; c++) {
    size_t len = pack->stored_size(&p[c], t);
    if (len < least) {
      least = len;
      best = c;
    }
  }
  *stored = least;
  return best;
}

uint32_t ibp_cluster_best(const ibp_params *params, uint32_t k,
                          const void *tensor, size_t *stored) {
  size_t least = 0;
  uint32_t id = ibp__best_cluster(ibp__pack(), params, k ? k : 1,
                                  (const uint8_t *)tensor, &least);
  if (stored)
    *stored = least;
  return id;
}

/* ---- exact bytes of a sample under k pairs ------------------------------- */

typedef struct assign_job {
  const uint8_t *data;
  uint32_t R;
  const ibp__sample *sample;
  const ibp_params *p;
  uint32_t k;
  uint8_t *ids; /* per sampled tensor, or NULL */
  uint64_t j0, j1;
  uint64_t bytes; /* out */
} assign_job;

static void assign_task(void *arg) {
  assign_job *jb = arg;
  const ibp__pack_ops *pack = ibp__pack();
  for (uint64_t j = jb->j0; j < jb->j1; j++) {
    const uint8_t *t = jb->data + ibp__sample_at(jb->sample, j) * jb->R;
    size_t least;
    uint32_t id = ibp__best_cluster(pack, jb->p, jb->k, t, &least);
    if (jb->ids)
      jb->ids[j] = (uint8_t)id;
    jb->bytes += least;
  }
}

/* Stored bytes of the sampled tensors, each with its best pair (written
 * to ids[j] when ids is not NULL). */
static uint64_t assign(const uint8_t *data, uint32_t R, const ibp__sample *s,
                       const ibp_params *p, uint32_t k, uint8_t *ids,
                       unsigned threads) {
  assign_job jobs[64];
  unsigned t = threads > 64 ? 64 : threads;
  if (t > s->count)
    t = s->count ? (unsigned)s->count : 1;
  for (unsigned i = 0; i < t; i++)
    jobs[i] = (assign_job){
        data, R, s, p, k, ids, s->count * i / t, s->count * (i + 1) / t, 0};
  ibp__run_parallel(assign_task, jobs, sizeof *jobs, t);
  uint64_t total = 0;
  for (unsigned i = 0; i < t; i++)
    total += jobs[i].bytes;
  return total;
}

/* ---- the training set ---------------------------------------------------- */

typedef struct train_set {
  uint32_t R, c;
  unsigned threads;
  uint64_t m;     /* training tensors */
  uint8_t *data;  /* m x R, gathered */
  uint8_t *ids;   /* m: cluster of each */
  uint8_t *buf;   /* m x R: one cluster's tensors, gathered */
  uint32_t k;     /* clusters */
  ibp_params *p;  /* IBP_MAX_CLUSTERS slots, k used */
  uint64_t bytes; /* training bytes stored under p */
} train_set;

static ibp__sample all_of(uint64_t m) {
  return (ibp__sample){m, m, 1, 0};
}

/* Gathers the tensors of cluster c into ts->buf; returns their count. */
static uint64_t gather(const train_set *ts, uint32_t c) {
  uint64_t cnt = 0;
  for (uint64_t j = 0; j < ts->m; j++)
    if (ts->ids[j] == c)
      memcpy(ts->buf + cnt++ * ts->R, ts->data + j * ts->R, ts->R);
  return cnt;
}

/* Thresholds a rebuilt pair may take (agree >= ceil(T * members)). */
static const double rebuild_t[] = {1.0,  0.999, 0.995, 0.99, 0.98,
                                   0.97, 0.95,  0.92,  0.9,  0.85,
                                   0.8,  0.75,  0.7,   0.6,  0.5};

/* The pair for the cnt tensors in buf that stores them in the fewest
 * bytes: `cur` (kept when it is best and `keep` is set) or one built from
 * their counters.  Replaces *cur; returns the bytes, UINT64_MAX when out
 * of memory. */
static uint64_t rebuild(const train_set *ts, const uint8_t *buf, uint64_t cnt,
                        ibp_params *cur, int keep) {
  ibp__sample s = all_of(cnt);
  uint64_t best =
      keep ? assign(buf, ts->R, &s, cur, 1, NULL, ts->threads) : UINT64_MAX;
  ibp_bitstats st;
  if (ibp_bitstats_init(&st, ts->R) != IBP_OK)
    return UINT64_MAX;
  ibp_status e = ibp_bitstats_add(&st, buf, cnt, NULL, ts->threads);
  ibp__agreement ag = {0};
  if (e == IBP_OK)
    e = ibp__agreement_make(&st, &ag);
  uint64_t last_k = 0;
  for (size_t i = 0; e == IBP_OK && i < sizeof rebuild_t / sizeof *rebuild_t;
       i++) {
    uint64_t K = ibp__min_agree(rebuild_t[i], cnt);
    ibp_params q;
    if (K == last_k)
      continue;
    last_k = K;
    e = ibp__params_build_agreement(&ag, K, ts->c, &q);
    if (e != IBP_OK)
      break;
    uint64_t bytes = assign(buf, ts->R, &s, &q, 1, NULL, ts->threads);
    if (bytes < best) {
      best = bytes;
      ibp_params_free(cur);
      *cur = q;
    } else {
      ibp_params_free(&q);
    }
  }
  ibp__agreement_free(&ag);
  ibp_bitstats_free(&st);
  return e == IBP_OK ? best : UINT64_MAX;
}

/* Drops clusters without tensors (renumbering the ids). */
static void drop_empty(train_set *ts) {
  uint64_t count[IBP_MAX_CLUSTERS] = {0};
  uint8_t remap[IBP_MAX_CLUSTERS];
  for (uint64_t j = 0; j < ts->m; j++)
    count[ts->ids[j]]++;
  uint32_t k = 0;
  for (uint32_t c = 0; c < ts->k; c++) {
    if (!count[c]) {
      ibp_params_free(&ts->p[c]);
      continue;
    }
    remap[c] = (uint8_t)k;
    ts->p[k++] = ts->p[c];
  }
  for (uint32_t c = k; c < ts->k; c++)
    ts->p[c] = (ibp_params){0};
  for (uint64_t j = 0; j < ts->m; j++)
    ts->ids[j] = remap[ts->ids[j]];
  ts->k = k;
}

/* Lloyd rounds with exact bytes: assign, then rebuild every pair. */
static ibp_status refine(train_set *ts) {
  ibp__sample s = all_of(ts->m);
  for (int round = 0; round < LLOYD_ROUNDS; round++) {
    uint64_t before = ts->bytes;
    ts->bytes = assign(ts->data, ts->R, &s, ts->p, ts->k, ts->ids, ts->threads);
    drop_empty(ts);
    uint64_t total = 0;
    for (uint32_t c = 0; c < ts->k; c++) {
      uint64_t b = rebuild(ts, ts->buf, gather(ts, c), &ts->p[c], 1);
      if (b == UINT64_MAX)
        return IBP_ERR_NO_MEMORY;
      total += b;
    }
    ts->bytes = total;
    if (round && ts->bytes >= before)
      break;
  }
  return IBP_OK;
}

/* ---- splitting one cluster by bit similarity ----------------------------- */

/* A split learns its two halves on a bounded view of the cluster: at most
 * SPLIT_TENSORS of its tensors spread over it, and at most SPLIT_BITS of
 * their feature bits spread over those (docs/FORMAT.md §4 leaves the
 * search free; the halves are only a start that the exact-bytes rebuild
 * and refine then judge).  This keeps a split's cost independent of the
 * cluster's size and of R, where walking every bit of every tensor
 * several times over made the search cost seconds per region. */
typedef struct split_view {
  uint64_t S;           /* tensors viewed */
  uint32_t nb;          /* feature bits viewed */
  uint8_t *sub;         /* S x R: the tensors */
  uint32_t *bits;       /* 8R slots: bit positions of the features */
  uint8_t *x;           /* S x SPLIT_BITS: their feature bits, 0 or 1 */
  double *mean, *v, *u; /* SPLIT_BITS each: the power iteration */
  double *ones;         /* 2 x SPLIT_BITS: each half's counts */
  double *w;            /* 2 x SPLIT_BITS: each half's log-odds */
  double base[2];       /* each half's cost of a tensor of zeros */
} split_view;

static void view_free(split_view *sv) {
  free(sv->sub);
  free(sv->bits);
  free(sv->x);
  free(sv->mean);
  free(sv->w);
}

/* A view of buf[0..cnt): one tensor from each of S equal runs, at a
 * pseudo-random place in its run (a fixed stride would see only one kind
 * of tensor in data that alternates with that period). */
static ibp_status view_init(const train_set *ts, uint64_t cnt, split_view *sv) {
  const uint32_t R = ts->R;
  *sv = (split_view){.S = cnt < SPLIT_TENSORS ? cnt : SPLIT_TENSORS};
  sv->sub = malloc(sv->S * R);
  sv->bits = malloc(8 * (size_t)R * sizeof *sv->bits);
  sv->x = malloc(sv->S * SPLIT_BITS);
  sv->mean = malloc(5 * SPLIT_BITS * sizeof *sv->mean);
  sv->w = malloc(2 * SPLIT_BITS * sizeof *sv->w);
  if (!sv->sub || !sv->bits || !sv->x || !sv->mean || !sv->w) {
    view_free(sv);
    return IBP_ERR_NO_MEMORY;
  }
  sv->v = sv->mean + SPLIT_BITS;
  sv->u = sv->v + SPLIT_BITS;
  sv->ones = sv->u + SPLIT_BITS;
  uint64_t h = 0x9E3779B97F4A7C15ull; /* fixed: the search is repeatable */
  for (uint64_t s = 0; s < sv->S; s++) {
    uint64_t lo = s * cnt / sv->S, hi = (s + 1) * cnt / sv->S;
    h ^= h << 13, h ^= h >> 7, h ^= h << 17;
    memcpy(sv->sub + s * R, ts->buf + (lo + h % (hi - lo)) * R, R);
  }
  return IBP_OK;
}

/* Feature bits f of the viewed tensors: neither (nearly) random nor
 * invariant. */
static ibp_status features(const train_set *ts, const split_view *sv,
                           double share, uint8_t *f) {
  const uint64_t cnt = sv->S;
  ibp_bitstats st;
  ibp_status e = ibp_bitstats_init(&st, ts->R);
  if (e == IBP_OK)
    e = ibp_bitstats_add(&st, sv->sub, cnt, NULL, 1);
  memset(f, 0, ts->R);
  for (uint32_t k = 0; e == IBP_OK && k < 8 * ts->R; k++) {
    uint64_t ones = st.ones[k], agree = ones > cnt - ones ? ones : cnt - ones;
    if (agree < cnt && (double)agree >= share * (double)cnt)
      f[k / 8] |= (uint8_t)(1u << (k % 8));
  }
  ibp_bitstats_free(&st);
  return e;
}

/* Bit positions of f, listed; at most `cap` of them, spread over all. */
static uint32_t list_bits(const uint8_t *f, uint32_t R, uint32_t *out,
                          uint32_t cap) {
  uint32_t m = 0;
  for (uint32_t k = 0; k < 8 * R; k++)
    if ((f[k / 8] >> (k % 8)) & 1)
      out[m++] = k;
  if (m <= cap)
    return m;
  for (uint32_t i = 0; i < cap; i++) /* i * m / cap >= i: in place */
    out[i] = out[(uint64_t)i * m / cap];
  return cap;
}

static int bit_of(const uint8_t *t, uint32_t k) {
  return (t[k / 8] >> (k % 8)) & 1;
}

/* sv->x from the viewed tensors and the listed bits. */
static void gather_bits(split_view *sv, uint32_t R) {
  for (uint64_t s = 0; s < sv->S; s++)
    for (uint32_t i = 0; i < sv->nb; i++)
      sv->x[s * sv->nb + i] = (uint8_t)bit_of(sv->sub + s * R, sv->bits[i]);
}

/* y . (x_s - mean) */
static double project(const split_view *sv, uint64_t s, const double *y) {
  const uint8_t *x = sv->x + s * sv->nb;
  double d = 0;
  for (uint32_t i = 0; i < sv->nb; i++)
    d += (x[i] - sv->mean[i]) * y[i];
  return d;
}

/* side[s] = which side of the mean viewed tensor s lies on along the
 * principal direction of the feature bits (power iteration on their
 * covariance, from the first tensor's deviation). */
static void principal_split(split_view *sv, uint8_t *side) {
  const uint32_t nb = sv->nb;
  memset(sv->mean, 0, nb * sizeof *sv->mean);
  for (uint64_t s = 0; s < sv->S; s++)
    for (uint32_t i = 0; i < nb; i++)
      sv->mean[i] += sv->x[s * nb + i];
  for (uint32_t i = 0; i < nb; i++) {
    sv->mean[i] /= (double)sv->S;
    sv->v[i] = sv->x[i] - sv->mean[i];
  }
  for (int it = 0; it < PRINCIPAL_ROUNDS; it++) {
    double norm = 0;
    memset(sv->u, 0, nb * sizeof *sv->u);
    for (uint64_t s = 0; s < sv->S; s++) {
      const uint8_t *x = sv->x + s * nb;
      double y = project(sv, s, sv->v);
      for (uint32_t i = 0; i < nb; i++)
        sv->u[i] += y * (x[i] - sv->mean[i]);
    }
    for (uint32_t i = 0; i < nb; i++)
      norm += sv->u[i] * sv->u[i];
    if (!(norm > 0))
      break;
    for (uint32_t i = 0; i < nb; i++)
      sv->v[i] = sv->u[i] / sqrt(norm);
  }
  for (uint64_t s = 0; s < sv->S; s++)
    side[s] = project(sv, s, sv->v) > 0;
}

/* Each half's per-bit Bernoulli model from the viewed tensors' sides:
 * cost(t) = sum over bits of -log2 P(bit); the part that depends on t is
 * sum of x * log2((1-p)/p), plus a constant per half.  0 when a half is
 * empty. */
static int models(split_view *sv, const uint8_t *side) {
  const uint32_t nb = sv->nb;
  uint64_t n[2] = {0, 0};
  double *ones = sv->ones;
  memset(ones, 0, 2 * (size_t)nb * sizeof *ones);
  for (uint64_t s = 0; s < sv->S; s++) {
    const uint8_t *x = sv->x + s * nb;
    double *o = ones + side[s] * (size_t)nb;
    n[side[s]]++;
    for (uint32_t i = 0; i < nb; i++)
      o[i] += x[i];
  }
  if (n[0] == 0 || n[1] == 0)
    return 0;
  for (int h = 0; h < 2; h++) {
    sv->base[h] = 0;
    for (uint32_t i = 0; i < nb; i++) {
      double p = (ones[h * (size_t)nb + i] + 0.5) / ((double)n[h] + 1);
      sv->w[h * (size_t)nb + i] = log2((1 - p) / p);
      sv->base[h] -= log2(1 - p);
    }
  }
  return 1;
}

/* The half whose model codes tensor t's feature bits in fewer bits. */
static uint8_t closer(const split_view *sv, const uint8_t *t) {
  double c0 = sv->base[0], c1 = sv->base[1];
  for (uint32_t i = 0; i < sv->nb; i++)
    if (bit_of(t, sv->bits[i])) {
      c0 += sv->w[i];
      c1 += sv->w[sv->nb + i];
    }
  return c1 < c0;
}

/* Two halves of buf[0..cnt) (side[j], all 0 when there are none): first
 * the view along the principal direction of the feature bits, then hard
 * EM of two per-bit Bernoulli models over them (each viewed tensor goes
 * to the model under which its bits cost fewer bits, each model is its
 * half's bit frequencies); the last models then place every tensor. */
static void two_halves(const train_set *ts, uint64_t cnt, split_view *sv,
                       const uint8_t *f, uint8_t *side) {
  sv->nb = list_bits(f, ts->R, sv->bits, SPLIT_BITS);
  gather_bits(sv, ts->R);
  principal_split(sv, side); /* side[0..S) is the view's */
  for (int round = 0; round < MODES_ROUNDS; round++) {
    if (!models(sv, side)) {
      memset(side, 0, cnt);
      return;
    }
    for (uint64_t s = 0; round + 1 < MODES_ROUNDS && s < sv->S; s++)
      side[s] = closer(sv, sv->sub + s * ts->R);
  }
  for (uint64_t j = 0; j < cnt; j++)
    side[j] = closer(sv, ts->buf + j * ts->R);
}

/* The feature bits of a split are those whose majority share lies in
 * [share, 1); each of these shares proposes a split, and the one whose
 * halves store the cluster's tensors in the fewest bytes wins. */
static const double feature_share[] = {0.55, 0.8};

/* A proposed split of buf[0..cnt): its sides, and a fresh pair per half. */
typedef struct proposal {
  uint8_t *side;
  ibp_params half[2];
  uint64_t bytes;
} proposal;

/* Proposes a split of buf[0..cnt) with feature share `share` into *pr
 * (bytes UINT64_MAX when a half would be too small). */
static ibp_status propose(const train_set *ts, uint64_t cnt, double share,
                          split_view *sv, uint8_t *f, uint8_t *tmp,
                          proposal *pr) {
  const uint32_t R = ts->R;
  pr->bytes = UINT64_MAX;
  ibp_status e = features(ts, sv, share, f);
  if (e != IBP_OK)
    return e;
  two_halves(ts, cnt, sv, f, pr->side);
  uint64_t n1 = 0;
  for (uint64_t j = 0; j < cnt; j++)
    n1 += pr->side[j];
  if (n1 < MIN_TRAIN_PER_CLUSTER || cnt - n1 < MIN_TRAIN_PER_CLUSTER)
    return IBP_OK;
  uint64_t n0 = 0; /* side 0's tensors first, then side 1's */
  for (uint64_t j = 0; j < cnt; j++)
    if (!pr->side[j])
      memcpy(tmp + n0++ * R, ts->buf + j * R, R);
  for (uint64_t j = 0, at = n0; j < cnt; j++)
    if (pr->side[j])
      memcpy(tmp + at++ * R, ts->buf + j * R, R);
  uint64_t b0 = rebuild(ts, tmp, n0, &pr->half[0], 0);
  uint64_t b1 = rebuild(ts, tmp + n0 * R, n1, &pr->half[1], 0);
  if (b0 == UINT64_MAX || b1 == UINT64_MAX)
    return IBP_ERR_NO_MEMORY;
  pr->bytes = b0 + b1;
  return IBP_OK;
}
static void proposal_clear(proposal *pr) {
  ibp_params_free(&pr->half[0]);
  ibp_params_free(&pr->half[1]);
}

/* Splits cluster c in two (the new one is ts->k, then ts->k + 1 clusters)
 * when a proposed split stores its tensors in fewer bytes than the
 * cluster's pair does; leaves it whole otherwise.  Both halves get pairs
 * of their own (the old one would take every tensor back: ties go to the
 * lower id). */
static ibp_status split(train_set *ts, uint32_t c) {
  const uint32_t R = ts->R;
  uint64_t cnt = gather(ts, c);
  if (cnt < 2 * MIN_TRAIN_PER_CLUSTER)
    return IBP_OK;
  uint8_t *f = malloc(R), *tmp = malloc(cnt * R);
  proposal best = {malloc(cnt), {{0}, {0}}, UINT64_MAX};
  proposal pr = {malloc(cnt), {{0}, {0}}, 0};
  split_view sv = {0};
  ibp_status e = f && tmp && best.side && pr.side ? IBP_OK : IBP_ERR_NO_MEMORY;
  if (e == IBP_OK)
    e = view_init(ts, cnt, &sv);
  for (size_t i = 0;
       e == IBP_OK && i < sizeof feature_share / sizeof *feature_share; i++) {
    e = propose(ts, cnt, feature_share[i], &sv, f, tmp, &pr);
    if (e == IBP_OK && pr.bytes < best.bytes) {
      proposal t = best;
      best = pr;
      pr = t;
    }
    proposal_clear(&pr);
  }
  if (e == IBP_OK && best.bytes != UINT64_MAX) {
    for (uint64_t j = 0, q = 0; j < ts->m; j++)
      if (ts->ids[j] == c && best.side[q++])
        ts->ids[j] = (uint8_t)ts->k;
    ibp_params_free(&ts->p[c]);
    ts->p[c] = best.half[0];
    ts->p[ts->k++] = best.half[1];
    best.half[0] = best.half[1] = (ibp_params){0};
  }
  proposal_clear(&best);
  view_free(&sv);
  free(best.side);
  free(pr.side);
  free(f);
  free(tmp);
  return e;
}

/* Splits the largest clusters until there are `target` (or none can be
 * split), then refines. */
static ibp_status grow(train_set *ts, uint32_t target) {
  uint64_t count[IBP_MAX_CLUSTERS] = {0};
  uint8_t tried[IBP_MAX_CLUSTERS] = {0};
  for (uint64_t j = 0; j < ts->m; j++)
    count[ts->ids[j]]++;
  while (ts->k < target) {
    uint32_t pick = IBP_MAX_CLUSTERS;
    for (uint32_t c = 0; c < ts->k; c++)
      if (!tried[c] && (pick == IBP_MAX_CLUSTERS || count[c] > count[pick]))
        pick = c;
    if (pick == IBP_MAX_CLUSTERS)
      break;
    tried[pick] = 1;
    ibp_status e = split(ts, pick);
    if (e != IBP_OK)
      return e;
  }
  return refine(ts);
}

/* ---- the search ---------------------------------------------------------- */

typedef struct candidate {
  uint32_t k;
  uint64_t total; /* estimated stored + metadata, whole region */
} candidate;

static ibp_status copy_params(const ibp_params *p, uint32_t k,
                              ibp_clusters *out) {
  out->params = calloc(k, sizeof *out->params);
  if (!out->params)
    return IBP_ERR_NO_MEMORY;
  out->count = k;
  for (uint32_t i = 0; i < k; i++) {
    ibp_status s =
        ibp_params_from_masks(p[i].tensor_bytes, p[i].chunk_bytes, p[i].mask,
                              p[i].bitval, &out->params[i]);
    if (s != IBP_OK)
      return s;
    out->params[i].threshold = p[i].threshold;
  }
  return IBP_OK;
}

typedef struct search_state {
  const uint8_t *data;
  uint64_t n;
  uint32_t R;
  unsigned threads;
  ibp__sample eval, confirm;
  train_set ts;
  ibp_params best[IBP_MAX_CLUSTERS];
  candidate chosen;
} search_state;

/* Whole-region estimate of k pairs from the evaluation sample. */
static uint64_t estimate(const search_state *ss, const ibp_params *p,
                         uint32_t k) {
  uint64_t bytes = assign(ss->data, ss->R, &ss->eval, p, k, NULL, ss->threads);
  long double scaled =
      (long double)bytes * (long double)ss->n / (long double)ss->eval.count;
  return (uint64_t)(scaled + 0.5L) +
         ibp_cluster_metadata_bytes(k, ss->R, ss->n);
}

static void report_step(ibp_cluster_report *rep, const search_state *ss,
                        uint32_t k, uint64_t total) {
  if (!rep || rep->steps >= IBP_REPORT_CLUSTER_STEPS)
    return;
  uint64_t meta = ibp_cluster_metadata_bytes(k, ss->R, ss->n);
  rep->k[rep->steps] = k;
  rep->metadata[rep->steps] = meta;
  rep->stored[rep->steps] = total - meta;
  rep->steps++;
}

/* Keeps ts's pairs as the best so far when they beat it. */
static ibp_status consider(search_state *ss, uint64_t total) {
  if (total >= ss->chosen.total)
    return IBP_OK;
  for (uint32_t c = 0; c < ss->chosen.k; c++)
    ibp_params_free(&ss->best[c]);
  ss->chosen = (candidate){ss->ts.k, total};
  ibp_clusters tmp = {0};
  ibp_status s = copy_params(ss->ts.p, ss->ts.k, &tmp);
  if (s == IBP_OK)
    memcpy(ss->best, tmp.params, ss->ts.k * sizeof *tmp.params);
  free(tmp.params);
  return s;
}

static ibp_status train_init(search_state *ss, const ibp_params *base,
                             uint64_t budget) {
  train_set *ts = &ss->ts;
  ibp__sample s;
  ibp_status e = ibp__sample_jittered(budget, ss->R, ss->n, &s);
  if (e != IBP_OK)
    return e;
  *ts = (train_set){
      .R = ss->R, .c = base->chunk_bytes, .threads = ss->threads, .m = s.count};
  ts->data = malloc(s.count * ss->R);
  ts->buf = malloc(s.count * ss->R);
  ts->ids = calloc(s.count, 1);
  ts->p = calloc(IBP_MAX_CLUSTERS, sizeof *ts->p);
  if (!ts->data || !ts->buf || !ts->ids || !ts->p)
    return IBP_ERR_NO_MEMORY;
  for (uint64_t j = 0; j < s.count; j++)
    memcpy(ts->data + j * ss->R, ss->data + ibp__sample_at(&s, j) * ss->R,
           ss->R);
  ts->k = 1;
  return ibp_params_from_masks(ss->R, base->chunk_bytes, base->mask,
                               base->bitval, &ts->p[0]);
}

static void train_free(train_set *ts) {
  for (uint32_t c = 0; ts->p && c < ts->k; c++)
    ibp_params_free(&ts->p[c]);
  free(ts->p);
  free(ts->data);
  free(ts->buf);
  free(ts->ids);
}

/* Grows K step by step (doubling, up to `top`) and measures each; with
 * `exact`, only the last step is a candidate. */
static ibp_status run_steps(search_state *ss, uint32_t top, int exact,
                            ibp_cluster_report *rep) {
  uint32_t target = 1;
  uint64_t total = UINT64_MAX;
  while (target < top) {
    target = 2 * target < top ? 2 * target : top;
    uint32_t before = ss->ts.k;
    ibp_status s = grow(&ss->ts, target);
    if (s != IBP_OK)
      return s;
    if (ss->ts.k <= before)
      break; /* nothing left to split */
    total = estimate(ss, ss->ts.p, ss->ts.k);
    report_step(rep, ss, ss->ts.k, total);
    if (!exact) {
      s = consider(ss, total);
      if (s != IBP_OK)
        return s;
    }
  }
  return exact && ss->ts.k > 1 ? consider(ss, total) : IBP_OK;
}

/* A K > 1 must beat one cluster on the confirmation sample too. */
static int confirmed(const search_state *ss, const ibp_params *base) {
  if (ss->confirm.count <= ss->eval.count)
    return 1;
  uint64_t one =
      assign(ss->data, ss->R, &ss->confirm, base, 1, NULL, ss->threads);
  uint64_t many = assign(ss->data, ss->R, &ss->confirm, ss->best, ss->chosen.k,
                         NULL, ss->threads);
  long double scale = (long double)ss->n / (long double)ss->confirm.count;
  uint64_t extra = ibp_cluster_metadata_bytes(ss->chosen.k, ss->R, ss->n) -
                   ibp_cluster_metadata_bytes(1, ss->R, ss->n);
  return (long double)many * scale + (long double)extra <
         (long double)one * scale;
}

static ibp_status check_args(const void *data, uint64_t n,
                             const ibp_params *base,
                             const ibp_cluster_options *opt,
                             const ibp_clusters *out) {
  if (!out || !base || (!data && n))
    return IBP_ERR_INVALID_ARGUMENT;
  ibp_status s = ibp_params_check(base);
  if (s != IBP_OK)
    return s;
  if (n == 0)
    return IBP_ERR_NO_TENSORS;
  if (opt->clusters > IBP_MAX_CLUSTERS || opt->max_clusters > IBP_MAX_CLUSTERS)
    return IBP_ERR_INVALID_ARGUMENT;
  return IBP_OK;
}

ibp_status ibp_cluster_search(const void *data, uint64_t n,
                              const ibp_params *base,
                              const ibp_cluster_options *options,
                              ibp_clusters *out, ibp_cluster_report *report) {
  const ibp_cluster_options none = {0};
  const ibp_cluster_options *opt = options ? options : &none;
  if (out)
    *out = (ibp_clusters){0};
  ibp_status s = check_args(data, n, base, opt, out);
  if (s != IBP_OK)
    return s;
  search_state ss = {.data = data,
                     .n = n,
                     .R = base->tensor_bytes,
                     .threads = ibp__threads(opt->threads)};
  uint64_t eval =
      opt->eval_max_bytes ? opt->eval_max_bytes : EVAL_DEFAULT_BYTES;
  s = ibp__sample_jittered(eval, ss.R, n, &ss.eval);
  if (s == IBP_OK)
    s = ibp__sample_jittered(eval * CONFIRM_FACTOR, ss.R, n, &ss.confirm);
  if (report)
    *report = (ibp_cluster_report){.eval_tensors = ss.eval.count};
  uint64_t one = s == IBP_OK ? estimate(&ss, base, 1) : 0;
  report_step(report, &ss, 1, one);
  ss.chosen = (candidate){0, UINT64_MAX};
  uint32_t top = opt->clusters       ? opt->clusters
                 : opt->max_clusters ? opt->max_clusters
                                     : AUTO_MAX_CLUSTERS;
  if (s == IBP_OK && top > 1)
    s = train_init(&ss, base,
                   opt->train_max_bytes ? opt->train_max_bytes
                                        : TRAIN_DEFAULT_BYTES);
  if (s == IBP_OK && top > 1)
    s = run_steps(&ss, top, opt->clusters != 0, report);
  train_free(&ss.ts);
  int many = s == IBP_OK && ss.chosen.k > 1 && ss.chosen.total < one &&
             confirmed(&ss, base);
  if (s == IBP_OK)
    s = many ? copy_params(ss.best, ss.chosen.k, out)
             : copy_params(base, 1, out);
  for (uint32_t c = 0; c < ss.chosen.k; c++)
    ibp_params_free(&ss.best[c]);
  if (s != IBP_OK)
    ibp_clusters_free(out);
  else if (report)
    report->chosen = out->count;
  return s;
}
