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
 * even sample of at most `budget` bytes of whole tensors. */
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
  ibp_status s = ibp__sample_spread(budget, R, n, &smp);
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

/* IBP's pairs on the stripped tensors: one (clusters_too 0) or the
 * cluster search's. */
static ibp_status find_pairs(const uint8_t *s, const looked_at *in, uint32_t R,
                             const ibp_stage_choose_options *o,
                             int clusters_too, ibp_clusters *out) {
  const uint64_t n = in->bytes / R;
  ibp_params p;
  memset(&p, 0, sizeof p);
  ibp_status st = ibp_search(s, n, R, &o->search, &p, NULL);
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

/* One type: pairs, stages, exact bytes over the tensors looked at.
 * IBP_OK with c->dtype NONE when the type does not fit R. */
static ibp_status measure_dtype(const looked_at *in, uint32_t R,
                                const ibp_stage_choose_options *o,
                                uint32_t dtype, int clusters_too,
                                ibp_stage_choice *c) {
  ibp_stage probe;
  memset(c, 0, sizeof *c);
  if (ibp_stage_init(&probe, IBP_STAGE_EXP, dtype, 0, R) != IBP_OK)
    return IBP_OK;
  uint8_t *s = stripped_copy(&probe, in->data, in->bytes, R);
  if (!s)
    return IBP_ERR_NO_MEMORY;
  ibp_status st = find_pairs(s, in, R, o, clusters_too, &c->clusters);
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
  if (st != IBP_OK) {
    ibp_stage_choice_free(c);
    return st;
  }
  c->dtype = dtype;
  c->measured_bytes = in->bytes;
  c->total = c->exact.compressed_bytes + c->exact.metadata_bytes;
  return IBP_OK;
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
                            const ibp_stage_choose_options *o,
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
    st = measure_dtype(&scout, R, &so, candidates[i], 0, &c);
    if (st == IBP_OK)
      keep_best(out, &c);
  }
  if (st == IBP_OK && scout.own && out->dtype) { /* the best, on `in` */
    const uint32_t dtype = out->dtype;
    ibp_stage_choice_free(out);
    st = measure_dtype(in, R, o, dtype, 0, out);
  }
  free(scout.own);
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
  ibp_status st = look_at(data, bytes, tensor_bytes, o->sample_bytes, &in);
  if (st == IBP_OK)
    st = best_type(&in, tensor_bytes, o, out);
  if (st == IBP_OK && out->dtype && o->cluster.clusters != 1) {
    ibp_stage_choice k;
    st = measure_dtype(&in, tensor_bytes, o, out->dtype, 1, &k);
    if (st == IBP_OK)
      keep_best(out, &k);
  }
  if (st == IBP_OK && o->versus) {
    ibp_region_summary v;
    st = ibp_measure_region_clustered(o->versus->params, o->versus->count,
                                      in.data, in.bytes, o->threads, &v);
    out->versus_total = v.compressed_bytes + v.metadata_bytes;
  }
  free(in.own);
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
