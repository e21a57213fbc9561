/* The coding-stage choice (ibp/stage.h, docs/FORMAT.md §9): one decision
 * for `ibp analyze` / `ibp compress` (tools/stage_choice.c) and libibp's
 * region preparation (preload/serve/prepare/compress.c).
 *
 * For each value type the stage could follow (or the one asked): IBP's
 * search, and clusters where asked, on the tensors with the type's field
 * zeroed; the pairs made to fit the stage; a stage per cluster learned on
 * the tensors; the stored bytes measured exactly over the tensors looked
 * at (all of them, or an even sample).  The types are first ranked with
 * one pair each on a scout of those tensors (best_type), the best one
 * measured on all of them, then with the clusters asked. */
#include <stdlib.h>
#include <string.h>

#include "stage_internal.h"

static const uint32_t candidates[] = {IBP_DTYPE_BF16, IBP_DTYPE_F16,
                                      IBP_DTYPE_F32};
/* the types' scout: a quarter of the tensors looked at, at most 1 MiB */
#define SCOUT_SHARE 4
#define SCOUT_MAX_BYTES (1ull << 20)

/* The tensors looked at: the data itself (with its tail), or a copy of an
 * sample of at most `budget` bytes of whole tensors (ibp__sample_jittered). */
typedef struct looked_at {
  const uint8_t *data;
  uint64_t bytes;
  uint8_t *own; /* the sample's copy, or NULL */
} looked_at;

static ibp_status look_at(const uint8_t *data, uint64_t bytes, uint32_t R,
                          uint64_t budget, looked_at *out) {
  const uint64_t n = bytes / R;
  *out = (looked_at){data, bytes, NULL};
  if (!budget || n * R <= budget)
    return IBP_OK;
  ibp__sample smp;
  ibp_status s = ibp__sample_jittered(budget, R, n, &smp);
  if (s != IBP_OK)
    return s;
  out->own = malloc(smp.count * R);
  if (!out->own)
    return IBP_ERR_NO_MEMORY;
  for (uint64_t j = 0; j < smp.count; j++)
    memcpy(out->own + j * R, data + ibp__sample_at(&smp, j) * R, R);
  out->data = out->own;
  out->bytes = smp.count * R;
  return IBP_OK;
}

/* A copy of the tensors with every field zeroed (the tail as is). */
static uint8_t *stripped_copy(const ibp_stage *st, const uint8_t *data,
                              uint64_t bytes, uint32_t R) {
  uint8_t *s = malloc(bytes ? bytes : 1);
  if (!s)
    return NULL;
  const uint64_t n = bytes / R;
  for (uint64_t i = 0; i < n; i++)
    ibp_stage_strip(st, data + i * R, s + i * R, R);
  memcpy(s + n * R, data + n * R, bytes - n * R);
  return s;
}

static ibp_status copy_params(const ibp_params *src, ibp_params *dst) {
  ibp_status st = ibp_params_from_masks(src->tensor_bytes, src->chunk_bytes,
                                        src->mask, src->bitval, dst);
  if (st == IBP_OK)
    dst->threshold = src->threshold;
  return st;
}

/* IBP's search on the tensors looked at, stripped for one value type:
 * kept by ibp_stage_choose, which searches them twice otherwise (one pair,
 * then the cluster search from it: the same search of the same bytes). */
typedef struct searched {
  uint32_t dtype; /* IBP_DTYPE_NONE: nothing kept */
  ibp_params pair;
} searched;

/* The search's pair on the stripped tensors s into *p: kept's copy when it
 * holds dtype's, else searched (and kept when kept is given). */
static ibp_status search_pair(const uint8_t *s, uint64_t n, uint32_t R,
                              const ibp_stage_choose_options *o, uint32_t dtype,
                              searched *kept, ibp_params *p) {
  if (kept && kept->dtype == dtype && dtype != IBP_DTYPE_NONE)
    return copy_params(&kept->pair, p);
  ibp_status st = ibp_search(s, n, R, &o->search, p, NULL);
  if (st == IBP_OK && kept) {
    ibp_params_free(&kept->pair);
    kept->dtype = IBP_DTYPE_NONE;
    st = copy_params(p, &kept->pair);
    kept->dtype = st == IBP_OK ? dtype : IBP_DTYPE_NONE;
  }
  return st;
}

/* IBP's pairs on the stripped tensors: one (clusters_too 0) or the
 * cluster search's. */
static ibp_status find_pairs(const uint8_t *s, const looked_at *in, uint32_t R,
                             const ibp_stage_choose_options *o, uint32_t dtype,
                             searched *kept, int clusters_too,
                             ibp_clusters *out) {
  const uint64_t n = in->bytes / R;
  ibp_params p;
  memset(&p, 0, sizeof p);
  ibp_status st = search_pair(s, n, R, o, dtype, kept, &p);
  if (st == IBP_OK && clusters_too) {
    st = ibp_cluster_search(s, n, &p, &o->cluster, out, NULL);
    ibp_params_free(&p);
    return st;
  }
  if (st == IBP_OK) {
    out->params = malloc(sizeof p);
    st = out->params ? IBP_OK : IBP_ERR_NO_MEMORY;
  }
  if (st == IBP_OK) {
    out->params[0] = p; /* taken over */
    out->count = 1;
    return IBP_OK;
  }
  ibp_params_free(&p);
  return st;
}

/* A choice measured (st) over the tensors looked at: its totals, or freed
 * on an error. */
static ibp_status settle(ibp_stage_choice *c, ibp_status st, uint32_t dtype,
                         const looked_at *in) {
  if (st != IBP_OK) {
    ibp_stage_choice_free(c);
    return st;
  }
  c->dtype = dtype;
  c->measured_bytes = in->bytes;
  c->total = c->exact.compressed_bytes + c->exact.metadata_bytes;
  c->stage_tensors = c->exact.tensors_staged;
  return IBP_OK;
}

/* One type: pairs, stages, exact bytes over the tensors looked at.
 * IBP_OK with c->dtype NONE when the type does not fit R.  kept (NULL:
 * none) holds the search's pair of `in` under o (search_pair). */
static ibp_status measure_dtype(const looked_at *in, uint32_t R,
                                const ibp_stage_choose_options *o,
                                uint32_t dtype, searched *kept,
                                int clusters_too, ibp_stage_choice *c) {
  ibp_stage probe;
  memset(c, 0, sizeof *c);
  if (ibp_stage_init(&probe, IBP_STAGE_EXP, dtype, 0, R) != IBP_OK)
    return IBP_OK;
  uint8_t *s = stripped_copy(&probe, in->data, in->bytes, R);
  if (!s)
    return IBP_ERR_NO_MEMORY;
  ibp_status st =
      find_pairs(s, in, R, o, dtype, kept, clusters_too, &c->clusters);
  free(s);
  const uint32_t k = c->clusters.count;
  if (st == IBP_OK) {
    c->stages = calloc(k, sizeof *c->stages);
    st = c->stages ? IBP_OK : IBP_ERR_NO_MEMORY;
  }
  for (uint32_t i = 0; st == IBP_OK && i < k; i++)
    ibp_stage_fit_params(&probe, &c->clusters.params[i]);
  if (st == IBP_OK)
    st = ibp_stage_learn(c->clusters.params, k, IBP_STAGE_EXP, dtype, in->data,
                         in->bytes / R, 0, o->threads, c->stages);
  if (st == IBP_OK)
    st = ibp_measure_region_staged(c->clusters.params, c->stages, k, in->data,
                                   in->bytes, o->threads, &c->exact);
  return settle(c, st, dtype, in);
}

/* Keeps the smaller of *best and *c (c is freed or taken over). */
static void keep_best(ibp_stage_choice *best, ibp_stage_choice *c) {
  if (c->dtype && (!best->dtype || c->total < best->total)) {
    ibp_stage_choice_free(best);
    *best = *c;
  } else {
    ibp_stage_choice_free(c);
  }
}

/* The types compared: each measured with one pair on `in`, or, when more
 * than one type fits and `in` is larger than a scout, on the scout (an
 * even sample of SCOUT_SHARE of its tensors, at most SCOUT_MAX_BYTES) and
 * the best of them then measured on `in`.  Types that store the tensors
 * in bytes some percent apart rank alike on the scout; it costs a fraction
 * of measuring each type on all the tensors looked at. */
static ibp_status best_type(const looked_at *in, uint32_t R,
                            const ibp_stage_choose_options *o, searched *kept,
                            ibp_stage_choice *out) {
  looked_at scout = *in;
  scout.own = NULL;
  uint32_t fits = 0;
  for (unsigned i = 0; i < sizeof candidates / sizeof *candidates; i++)
    fits += (!o->dtype || o->dtype == candidates[i]) &&
            R % ibp_dtype_bytes(candidates[i]) == 0;
  uint64_t budget = in->bytes / SCOUT_SHARE;
  budget = budget < SCOUT_MAX_BYTES ? budget : SCOUT_MAX_BYTES;
  ibp_status st = IBP_OK;
  ibp_stage_choose_options so = *o; /* the search sized to the scout */
  if (fits > 1 && budget >= R)
    st = look_at(in->data, in->bytes, R, budget, &scout);
  if (scout.own)
    so.search.eval_max_bytes = scout.bytes;
  for (unsigned i = 0;
       st == IBP_OK && i < sizeof candidates / sizeof *candidates; i++) {
    if (o->dtype && o->dtype != candidates[i])
      continue;
    ibp_stage_choice c;
    /* (on `in` itself when not scouted: so is then o) */
    st = measure_dtype(&scout, R, &so, candidates[i], scout.own ? NULL : kept,
                       0, &c);
    if (st == IBP_OK)
      keep_best(out, &c);
  }
  if (st == IBP_OK && scout.own && out->dtype) { /* the best, on `in` */
    const uint32_t dtype = out->dtype;
    ibp_stage_choice_free(out);
    st = measure_dtype(in, R, o, dtype, kept, 0, out);
  }
  free(scout.own);
  return st;
}

/* ---- the stage per cluster (docs/FORMAT.md §9.5) -------------------------
 *
 * A stage is kept only on the clusters whose tensors it stores in fewer
 * bytes.  The candidates are IBP alone's pairs (o->versus, stage none,
 * first: a tensor stored alike either way takes the cheaper decode) and
 * the stage's, all at one chunk width (a region has one: a pair's Mask
 * does not depend on it, so either set's width is tried where they
 * differ).  Each tensor of an even sample goes to the candidate that
 * stores it best, and candidates are dropped one at a time, the one whose
 * tensors lose least by moving to their next best (scaled to the tensors
 * looked at) against the metadata it costs (its pair, descriptor and id
 * bits), while that saves bytes or K is above the clusters asked.  The set
 * left, measured exactly, is the choice when it stores fewer bytes than
 * both pure sets; IBP alone's when that stores no more than the stage
 * (so the choice never stores more than IBP alone). */
#define MIX_SAMPLE_BYTES (4ull << 20)

/* The candidates: pairs (shallow copies, at one chunk width) and their
 * stages; which stay (alive) and the bytes they store, estimated. */
typedef struct mix_set {
  ibp_params *params;
  ibp_stage *stages;
  uint8_t *alive;
  uint32_t m;
  double estimate;
} mix_set;

/* Bytes one candidate costs beyond the tensors it stores. */
static uint64_t candidate_bytes(const mix_set *s, uint32_t c) {
  return 2ull * s->params[c].tensor_bytes +
         ibp_stage_descriptor_bytes(&s->stages[c]);
}

/* Drops the candidate of s->alive (*k of them) whose loss of bytes over
 * the sample's tensors (sizes: ns x m), scaled to n tensors, least exceeds
 * what it costs; returns 1 when one was dropped (because that saves bytes,
 * or *k > limit), 0 otherwise (s->estimate then the set's bytes). */
static int drop_one(mix_set *s, const uint32_t *sizes, uint64_t ns, uint64_t n,
                    uint32_t limit, uint32_t *k, double *loss) {
  const uint32_t m = s->m;
  const double scale = (double)n / (double)ns;
  double stored = 0, meta = (double)ibp_cluster_id_bytes(*k, n);
  for (uint32_t c = 0; c < m; c++) {
    loss[c] = 0;
    meta += s->alive[c] ? (double)candidate_bytes(s, c) : 0;
  }
  for (uint64_t i = 0; i < ns; i++) {
    const uint32_t *z = sizes + i * m;
    uint32_t best = UINT32_MAX, second = UINT32_MAX, id = 0;
    for (uint32_t c = 0; c < m; c++) {
      if (!s->alive[c])
        continue;
      if (z[c] < best) {
        second = best;
        best = z[c];
        id = c;
      } else if (z[c] < second) {
        second = z[c];
      }
    }
    stored += best;
    loss[id] += second == UINT32_MAX ? 1e300 : (double)(second - best);
  }
  s->estimate = stored * scale + meta;
  if (*k <= 1)
    return 0;
  const double ids =
      (double)(ibp_cluster_id_bytes(*k, n) - ibp_cluster_id_bytes(*k - 1, n));
  uint32_t worst = m;
  double least = 0;
  for (uint32_t c = 0; c < m; c++) {
    if (!s->alive[c])
      continue;
    const double d = loss[c] * scale - (double)candidate_bytes(s, c) - ids;
    if (worst == m || d < least) {
      worst = c;
      least = d;
    }
  }
  if (least >= 0 && *k <= limit)
    return 0;
  s->alive[worst] = 0;
  (*k)--;
  return 1;
}

/* Which candidates stay (s->alive), judged on the sample smp of the n
 * tensors looked at. */
static ibp_status prune(mix_set *s, const looked_at *smp, uint64_t n,
                        uint32_t limit) {
  const uint32_t R = s->params[0].tensor_bytes, m = s->m;
  const uint64_t ns = smp->bytes / R;
  uint32_t *sizes = malloc((ns ? ns : 1) * m * sizeof *sizes);
  uint8_t *scratch = malloc(R);
  double *loss = malloc(m * sizeof *loss);
  ibp_status st = sizes && scratch && loss ? IBP_OK : IBP_ERR_NO_MEMORY;
  const ibp__pack_ops *pack = ibp__pack();
  for (uint64_t i = 0; st == IBP_OK && i < ns; i++)
    for (uint32_t c = 0; c < m; c++)
      sizes[i * m + c] = (uint32_t)ibp__staged_size(
          pack, &s->params[c], &s->stages[c], smp->data + i * R, scratch);
  uint32_t k = m;
  memset(s->alive, 1, m);
  while (st == IBP_OK && ns && drop_one(s, sizes, ns, n, limit, &k, loss))
    ;
  free(loss);
  free(scratch);
  free(sizes);
  return st;
}

/* A choice of the candidates s->alive (deep copies), measured on `in`
 * unless `exact` gives its figures. */
static ibp_status take(const mix_set *s, const looked_at *in,
                       const ibp_stage_choose_options *o, uint32_t dtype,
                       const ibp_region_summary *exact, ibp_stage_choice *c) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < s->m; i++)
    k += s->alive[i];
  memset(c, 0, sizeof *c);
  c->clusters.params = calloc(k, sizeof *c->clusters.params);
  c->stages = calloc(k, sizeof *c->stages);
  ibp_status st = c->clusters.params && c->stages ? IBP_OK : IBP_ERR_NO_MEMORY;
  for (uint32_t i = 0; st == IBP_OK && i < s->m; i++) {
    if (!s->alive[i])
      continue;
    st = copy_params(&s->params[i], &c->clusters.params[c->clusters.count]);
    if (st == IBP_OK)
      c->stages[c->clusters.count++] = s->stages[i];
  }
  if (st == IBP_OK && exact)
    c->exact = *exact;
  else if (st == IBP_OK)
    st = ibp_measure_region_staged(c->clusters.params, c->stages, k, in->data,
                                   in->bytes, o->threads, &c->exact);
  return settle(c, st, dtype, in);
}

/* The candidates: v's pairs (stage none), then out's with their stages,
 * every pair at chunk width `chunk` (0: as they are). */
static ibp_status make_set(const ibp_clusters *v, const ibp_stage_choice *out,
                           uint32_t chunk, mix_set *s) {
  const uint32_t kv = v->count, m = kv + out->clusters.count;
  const uint32_t R = v->params[0].tensor_bytes;
  *s = (mix_set){calloc(m, sizeof *s->params), calloc(m, sizeof *s->stages),
                 malloc(m), m, 0};
  ibp_status st =
      s->params && s->stages && s->alive ? IBP_OK : IBP_ERR_NO_MEMORY;
  for (uint32_t c = 0; st == IBP_OK && c < m; c++) {
    s->params[c] = c < kv ? v->params[c] : out->clusters.params[c - kv];
    s->params[c].chunk_bytes = chunk ? chunk : s->params[c].chunk_bytes;
    s->alive[c] = 1;
    if (c >= kv)
      s->stages[c] = out->stages[c - kv];
    else
      st = ibp_stage_init(&s->stages[c], IBP_STAGE_NONE, IBP_DTYPE_NONE, 0, R);
  }
  return st;
}

static void free_set(mix_set *s) {
  free(s->params);
  free(s->stages);
  free(s->alive);
  memset(s, 0, sizeof *s);
}

/* The largest K the clusters asked allow. */
static uint32_t cluster_limit(const ibp_stage_choose_options *o) {
  return o->cluster.clusters ? o->cluster.clusters : IBP_MAX_CLUSTERS;
}

/* The best mix of v's and out's pairs at either set's chunk width, as
 * pruned on an even sample of `in`: into *best (its alive flags; m 0 when
 * none is a true mix, both kinds of cluster in it). */
static ibp_status best_mix(const looked_at *in,
                           const ibp_stage_choose_options *o,
                           const ibp_clusters *v, const ibp_stage_choice *out,
                           mix_set *best) {
  const uint32_t R = v->params[0].tensor_bytes, kv = v->count;
  const uint32_t widths[2] = {v->params[0].chunk_bytes,
                              out->clusters.params[0].chunk_bytes};
  memset(best, 0, sizeof *best);
  looked_at smp;
  ibp_status st = look_at(in->data, in->bytes, R, MIX_SAMPLE_BYTES, &smp);
  for (int w = 0; st == IBP_OK && w < 2; w++) {
    if (w == 1 && widths[1] == widths[0])
      break;
    mix_set s;
    st = make_set(v, out, widths[w], &s);
    if (st == IBP_OK)
      st = prune(&s, &smp, in->bytes / R, cluster_limit(o));
    uint32_t on = 0, off = 0;
    for (uint32_t c = 0; st == IBP_OK && c < s.m; c++) {
      on += c >= kv && s.alive[c];
      off += c < kv && s.alive[c];
    }
    if (on && off && (!best->m || s.estimate < best->estimate)) {
      free_set(best);
      *best = s;
    } else {
      free_set(&s);
    }
  }
  free(smp.own);
  if (st != IBP_OK)
    free_set(best);
  return st;
}

/* The stage per cluster, against IBP alone's pairs v (measured on `in` in
 * versus).  *out becomes the best of itself, the mix and v (stage none on
 * every cluster). */
static ibp_status per_cluster(const looked_at *in,
                              const ibp_stage_choose_options *o,
                              const ibp_clusters *v,
                              const ibp_region_summary *versus,
                              ibp_stage_choice *out) {
  const uint64_t vt = versus->compressed_bytes + versus->metadata_bytes;
  ibp_status st = IBP_OK;
  mix_set s = {0};
  ibp_stage_choice c;
  if (v->count + out->clusters.count <= IBP_MAX_CLUSTERS &&
      cluster_limit(o) > 1)
    st = best_mix(in, o, v, out, &s);
  if (st == IBP_OK && s.m) { /* a true mix, measured */
    st = take(&s, in, o, out->dtype, NULL, &c);
    if (st == IBP_OK)
      keep_best(out, &c);
  }
  free_set(&s);
  if (st == IBP_OK && vt <= out->total) { /* IBP alone, every cluster */
    st = make_set(v, out, 0, &s);
    if (st == IBP_OK) {
      memset(s.alive + v->count, 0, out->clusters.count);
      /* as IBP alone stores it: version 3, no descriptors */
      st = take(&s, in, o, out->dtype, versus, &c);
    }
    if (st == IBP_OK) {
      ibp_stage_choice_free(out);
      *out = c;
    }
    free_set(&s);
  }
  return st;
}

/* ---- judged apart (judge_apart, ibp/stage.h) -----------------------------
 *
 * look_at's sample is one tensor per stratum of the region
 * (ibp__sample_jittered), so no period of the data lines up
 * with it; the judge still measures the choice on other tensors, as the
 * region will be stored: per gap between two tensors of the sample, one
 * of the gap's other tensors at random. */
#define JUDGE_SEED 0x9e3779b97f4a7c15ull

/* A copy of one tensor of every gap of look_at's sample of `budget` bytes
 * of the n tensors at data (nothing when that sample is every tensor). */
static ibp_status look_apart(const uint8_t *data, uint64_t n, uint32_t R,
                             uint64_t budget, looked_at *out) {
  *out = (looked_at){NULL, 0, NULL};
  ibp__sample smp;
  ibp_status s = ibp__sample_jittered(budget, R, n, &smp);
  if (s != IBP_OK || smp.count >= n)
    return s;
  out->own = malloc(smp.count * R);
  if (!out->own)
    return IBP_ERR_NO_MEMORY;
  uint64_t judged = 0;
  for (uint64_t j = 0; j < smp.count; j++) {
    const uint64_t first = ibp__sample_at(&smp, j);
    const uint64_t end = j + 1 < smp.count ? ibp__sample_at(&smp, j + 1) : n;
    if (end - first < 2)
      continue;
    const uint64_t t =
        first + 1 + ibp__mix64(JUDGE_SEED ^ j) % (end - first - 1);
    memcpy(out->own + judged++ * R, data + t * R, R);
  }
  out->data = out->own;
  out->bytes = judged * R;
  return IBP_OK;
}

/* The stored bytes of n tensors with pairs p (k of them) and stages st
 * (NULL: IBP alone), estimated: the tensors learnt on as measured there
 * (`learnt`), the others as the tensors judged, metadata for n tensors;
 * `staged` (NULL: not asked) the tensors the stage codes, likewise. */
static ibp_status estimate(const ibp_params *p, const ibp_stage *st, uint32_t k,
                           const ibp_region_summary *learnt,
                           const looked_at *judged, uint64_t n,
                           unsigned threads, uint64_t *total,
                           uint64_t *staged) {
  ibp_region_summary j;
  ibp_status s = ibp_measure_region_staged(p, st, k, judged->data,
                                           judged->bytes, threads, &j);
  if (s != IBP_OK)
    return s;
  const uint64_t rest = n - learnt->tensors;
  const double share = j.tensors ? (double)rest / (double)j.tensors : 0.0;
  const double others = (double)j.compressed_bytes * share;
  *total = learnt->compressed_bytes + (uint64_t)(others + 0.5) +
           ibp_cluster_metadata_bytes(k, p->tensor_bytes, n) +
           (st ? ibp_stage_metadata_bytes(st, k) : 0);
  if (staged)
    *staged = learnt->tensors_staged +
              (uint64_t)((double)j.tensors_staged * share + 0.5);
  return IBP_OK;
}

static uint32_t stages_on(const ibp_stage_choice *c) {
  uint32_t on = 0;
  for (uint32_t k = 0; c->stages && k < c->clusters.count; k++)
    on += c->stages[k].kind != IBP_STAGE_NONE;
  return on;
}

/* c (learnt and measured on look_at's sample of the n tensors at data)
 * and IBP alone (measured there into `versus`): their totals become the
 * whole region's, estimated on the tensors judged apart. */
static ibp_status judge(const uint8_t *data, uint64_t n, uint32_t R,
                        const ibp_stage_choose_options *o,
                        const ibp_region_summary *versus, ibp_stage_choice *c) {
  looked_at j;
  uint64_t with = 0, alone = 0, staged = 0;
  ibp_status st = look_apart(data, n, R, o->sample_bytes, &j);
  if (st == IBP_OK && j.bytes)
    st = estimate(c->clusters.params, c->stages, c->clusters.count, &c->exact,
                  &j, n, o->threads, &with, &staged);
  if (st == IBP_OK && j.bytes)
    st = estimate(o->versus->params, NULL, o->versus->count, versus, &j, n,
                  o->threads, &alone, NULL);
  if (st == IBP_OK && j.bytes) {
    c->total = with;
    c->stage_tensors = staged < n ? staged : n;
    c->versus_total = alone;
    c->measured_bytes = n * R;
    c->judged_tensors = j.bytes / R;
  }
  free(j.own);
  return st;
}

ibp_status ibp_stage_choose(const void *data, uint64_t bytes,
                            uint32_t tensor_bytes,
                            const ibp_stage_choose_options *o,
                            ibp_stage_choice *out) {
  if (!out)
    return IBP_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  if (!data || !o || tensor_bytes == 0 || tensor_bytes > IBP_MAX_TENSOR_BYTES ||
      bytes < tensor_bytes)
    return IBP_ERR_INVALID_ARGUMENT;
  looked_at in;
  searched kept = {IBP_DTYPE_NONE, {0}};
  ibp_status st = look_at(data, bytes, tensor_bytes, o->sample_bytes, &in);
  if (st == IBP_OK)
    st = best_type(&in, tensor_bytes, o, &kept, out);
  if (st == IBP_OK && out->dtype && o->cluster.clusters != 1) {
    ibp_stage_choice k;
    st = measure_dtype(&in, tensor_bytes, o, out->dtype, &kept, 1, &k);
    if (st == IBP_OK)
      keep_best(out, &k);
  }
  if (st == IBP_OK && o->versus) {
    ibp_region_summary v;
    st = ibp_measure_region_clustered(o->versus->params, o->versus->count,
                                      in.data, in.bytes, o->threads, &v);
    if (st == IBP_OK && out->dtype)
      st = per_cluster(&in, o, o->versus, &v, out);
    out->versus_total = v.compressed_bytes + v.metadata_bytes;
    if (st == IBP_OK && o->judge_apart && in.own && stages_on(out))
      st = judge(data, bytes / tensor_bytes, tensor_bytes, o, &v, out);
  }
  free(in.own);
  ibp_params_free(&kept.pair);
  if (st != IBP_OK)
    ibp_stage_choice_free(out);
  return st;
}

int ibp_stage_pays(const ibp_stage_choice *c, uint64_t ibp_total) {
  return c && c->dtype && c->total < ibp_total;
}

void ibp_stage_choice_free(ibp_stage_choice *c) {
  if (!c)
    return;
  ibp_clusters_free(&c->clusters);
  free(c->stages);
  memset(c, 0, sizeof *c);
}

/* ---- libibp's per-tensor helpers ----------------------------------------- */

uint32_t ibp_cluster_best_staged(const ibp_params *params,
                                 const ibp_stage *stages, uint32_t k,
                                 const void *tensor, void *scratch,
                                 size_t *stored) {
  size_t least = 0;
  uint32_t id = ibp__best_cluster_staged(ibp__pack(), params, stages, k ? k : 1,
                                         tensor, scratch, &least);
  if (stored)
    *stored = least;
  return id;
}

size_t ibp_compress_tensor_staged_with(const ibp_params *p, const ibp_stage *st,
                                       const void *tensor, void *slot,
                                       void *scratch, int *compressed) {
  size_t n = ibp__staged_compress(ibp__pack(), p, st, tensor, slot, scratch);
  if (compressed)
    *compressed = n < p->tensor_bytes;
  return n;
}
