/* The statistics of served regions (serve/figures.h): one ibp_stat_row per
 * region, from its registry record and its served region.
 *
 * Fields written by the compressing thread (layout.clusters, layout.summary)
 * are read only when the region is not COMPRESSING (acquire load of the
 * state); a region still compressing at exit is reported as not
 * compressed.  The live regions are read with ibp_registry_foreach, which
 * takes the registry's writer mutex; that mutex is only ever held inside
 * registry calls (never across a call into the application), and
 * ibp_registry_reset_after_fork re-initialises it in a child, so the wait
 * is bounded. */
#include "serve/figures.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "serve/choose/chooser.h"
#include "serve/region.h"
#include "stats/stats.h"

static uint64_t load64(const _Atomic uint64_t *p) {
  return atomic_load_explicit((_Atomic uint64_t *)p, memory_order_relaxed);
}

/* Why the region's coding stage is what it is (serve/region.h). */
static const char *stage_pick_name(ibp_stage_pick pick) {
  switch (pick) {
  case IBP_STAGE_PICK_NO_FIT:
    return "no-fit";
  case IBP_STAGE_PICK_BYTES:
    return "bytes";
  case IBP_STAGE_PICK_TIME:
    return "time";
  case IBP_STAGE_PICK_EXP:
    return "exp";
  case IBP_STAGE_PICK_UNTRIED:
    break;
  }
  return "untried";
}

/* The exponent stage: why, and on how many of the clusters. */
static void fill_stage(ibp_stat_row *w, const ibp_layout *l) {
  w->stage_pick = stage_pick_name(l->stage_pick);
  for (uint32_t k = 0; l->stages && k < l->clusters.count; k++)
    w->stage_clusters += l->stages[k].kind != IBP_STAGE_NONE;
}

/* Compressed: the summary counts tensors, or (a region smaller than one
 * tensor) Mask/Bitval exist and the summary counts its raw tail.  A
 * compression that failed half-way leaves no summary: not compressed. */
static void fill_codec(ibp_stat_row *w, const ibp_layout *l) {
  const ibp_params *p = l->clusters.count ? &l->clusters.params[0] : NULL;
  w->compressed = l->summary.tensors > 0 ||
                  (p && p->mask != NULL && l->summary.compressed_bytes > 0);
  if (!w->compressed || !p)
    return;
  if (p->tensor_bytes)
    w->tensor_bytes = p->tensor_bytes;
  w->chunk_bytes = p->chunk_bytes;
  w->threshold = p->threshold;
  w->clusters = l->clusters.count;
  w->tensors = l->summary.tensors;
  w->tensors_compressed = l->summary.tensors_compressed;
  w->compressed_bytes = l->summary.compressed_bytes;
  w->metadata_bytes = l->summary.metadata_bytes;
  w->saved_fraction = 1.0 - (double)w->compressed_bytes / (double)w->bytes;
  fill_stage(w, l);
}

static void fill_row(ibp_stat_row *w, const ibp_region_rec *r) {
  memset(w, 0, sizeof *w);
  w->id = r->id;
  w->seq = UINT64_MAX;
  w->base = r->base;
  w->bytes = r->bytes ? r->bytes : 1;
  if (r->name[0])
    snprintf(w->name, sizeof w->name, "%.*s", IBP_REGISTRY_NAME_MAX - 1,
             r->name);
  else
    snprintf(w->name, sizeof w->name, "region@0x%" PRIxPTR, r->base);
  w->rule_chunk = r->rule.chunk;
  w->rule_threshold = r->rule.threshold;
  w->state = ibp_region_state_get(r);
  w->tracker = "none";
  w->mode = "none";
  const ibp_served_region *s = ibp__served(r);
  if (!s)
    return;
  w->tracker = ibp__track_kind_name(&s->track);
  w->mode = ibp__track_mode_name(&s->track);
  w->tensor_bytes = s->geometry.tensor_bytes;
  w->copy_gcd = load64(&s->gate.gcd);
  if (w->state != IBP_REGION_COMPRESSING)
    fill_codec(w, &s->layout);
#define IBP_COUNTER(key, unit, column) w->key = load64(&s->counters.key);
#define IBP_GAUGE(key, unit, column, from) w->key = load64(&s->from);
#include "stats/stats.def"
#undef IBP_COUNTER
#undef IBP_GAUGE
  for (int i = 0; i < IBP_PASSED_REASONS; i++)
    w->passed[i] = load64(&s->counters.passed[i]);
  for (int i = 0; i < IBP_MAX_DEVICES; i++)
    ibp__chooser_figures(
        atomic_load((struct ibp_chooser * _Atomic *)&s->dev[i].chooser),
        w->route);
}

void ibp__figures_retire(const ibp_region_rec *r, int freed_early) {
  if (r == NULL)
    return;
  ibp_stat_row row;
  fill_row(&row, r);
  if (freed_early) /* what a half-done compression left is no figure */
    row.freed_early = 1, row.compressed = 0, row.saved_fraction = 0;
  ibp__stats_keep_retired(&row);
}

typedef struct live_rows {
  ibp_stat_row *v;
  size_t n, cap;
  int oom;
} live_rows;

static void collect_live(const ibp_region_rec *r, void *ctx) {
  live_rows *l = ctx;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    ibp_stat_row *v = realloc(l->v, cap * sizeof *v);
    if (v == NULL) {
      l->oom = 1;
      return;
    }
    l->v = v;
    l->cap = cap;
  }
  fill_row(&l->v[l->n++], r);
}

void ibp__figures_report(void) {
  if (!ibp__stats_wanted())
    return;
  int saved_errno = errno;
  ibp__guard++;
  live_rows l = {0};
  ibp_registry_foreach(collect_live, &l);
  ibp__stats_write(l.v, l.n, l.oom);
  free(l.v);
  ibp__guard--;
  errno = saved_errno;
}
