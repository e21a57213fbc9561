/* Compressing a region on the worker thread (serve/prepare/compress.h,
 * docs/ARCHITECTURE.md "No stale byte").
 *
 * Order matters for "no stale byte": the dirty bitmap exists and the pages
 * are write-protected BEFORE the data is read, so a write racing with the
 * compression marks its tensors dirty (served raw from the original).  A
 * device-to-host copy into the region while we compress sets
 * `invalidated`, and then every tensor is marked dirty. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/prepare/compress.h"

#include "base/driver.h"
#include "base/log.h"
#include "serve/choose/gate.h"
#include "serve/compact.h"
#include "serve/dtoh.h"
#include "serve/prepare/device.h"
#include "serve/prepare/pack.h"
#include "serve/region.h"

#define SEARCH_STATS_BYTES (32ull << 20)
#define ESTIMATE_MARGIN 32 /* the streams get the estimate + 1/32 + 1 MiB */
#define SEARCH_EVAL_BYTES (4ull << 20)
#define AUTO_CLUSTERS 16 /* clusters=auto tries K = 1, 2, 4 ... 16 */
/* The cluster search learns on CLUSTER_TRAIN_BYTES of tensors and
 * measures each K on CLUSTER_EVAL_BYTES (the winner confirmed on 4 times
 * as many): smaller than `ibp analyze`'s 8 and 16 MiB, so that it adds a
 * few percent to a region's preparation rather than doubling it, at a
 * fraction of a percent of the region's bytes (docs/ARCHITECTURE.md,
 * "Preparing a region"). */
#define CLUSTER_TRAIN_BYTES (1ull << 20)
#define CLUSTER_EVAL_BYTES (2ull << 20)
/* ... but never fewer tensors than this: a split needs twice the codec's
 * 32 per cluster, and large tensors would leave too few to split */
#define CLUSTER_TRAIN_TENSORS 256
/* The decode plans of a region's clusters live in device memory, at most
 * (4 + 5) * R bytes each: no more than the larger of PLAN_BUDGET_MIN and
 * a PLAN_BUDGET_SHARE-th of the region. */
#define PLAN_BUDGET_MIN (8ull << 20)
#define PLAN_BUDGET_SHARE 16
/* a compact region's refresh room: 1/64 of its streams */
#define COMPACT_ROOM 64
/* the exponent stage's choice looks at this many bytes of tensors (an even
 * sample; the whole region when smaller): as many as the search measures
 * on (32 MiB tripled the preparation of glove_f32_to_bf16 for no byte
 * saved); a choice learnt on a sample is judged on as many other tensors
 * (ibp_stage_choose_options.judge_apart) */
#define STAGE_SAMPLE_BYTES SEARCH_EVAL_BYTES

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* This thread's CPU time (the phases' debug log: a loaded machine
 * stretches their wall time, not this). */
static uint64_t cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void *pinned(const ibp_driver *d, size_t bytes) {
  void *p = NULL;
  if (d->cuMemHostAlloc(&p, bytes,
                        CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE) !=
      CUDA_SUCCESS)
    return NULL;
  return p;
}

/* One warning per process; later regions failing the same way say so at
 * info level (a persistent failure must not flood stderr). */
static int fail(ibp_region_rec *r, const char *why) {
  static int warned;
  ibp__warn_first(&warned, "region '%s': %s; it passes through", r->name, why);
  return -1;
}

/* Dirty bitmap (zero) and, unless track=trust, write protection. */
static int start_tracking(const ibp_driver *d, ibp_region_rec *r,
                          ibp_served_region *s) {
  size_t bytes = (size_t)((s->geometry.tensors + 31) / 32) * 4;
  uint8_t *bits = pinned(d, 2 * bytes); /* dirty, then busy (refresh.c) */
  if (!bits)
    return fail(r, "cannot allocate its dirty bitmap");
  memset(bits, 0, 2 * bytes);
  s->refresh.busy = (_Atomic uint32_t *)(bits + bytes);
  __atomic_store_n(&s->track.dirty, (_Atomic uint32_t *)bits, __ATOMIC_RELEASE);
  if (!ibp__compact_active(s))
    s->track.compact = NULL; /* pinned before it was compressed */
  else                       /* its own tracker, whatever track= says */
    return ibp__track_protect(&s->track) == 0
               ? 0
               : fail(r, "cannot take its pages (userfaultfd)");
  if (r->rule.track == IBP_TRACK_TRUST)
    return 0;
  /* no move between a quiet region's modes while it is prepared: its
   * fingerprint would read the region twice more (0.59 s of CPU for 1 GiB,
   * beside 1.75 s for the preparation) -- only its first sum is taken
   * meanwhile; serve/worker.c lets go, which moves it at once if it was
   * not written (docs/ARCHITECTURE.md, "Quiet regions") */
  ibp__track_hold_moves(&s->track, 1);
  if (ibp__track_install() != 0 || ibp__track_protect(&s->track) != 0)
    return fail(r, "cannot write-protect it (track=trust skips that)");
  return 0;
}

/* Lays the region out in a pinned, device-mapped shadow (docs/FORMAT.md
 * §3; serve/prepare/pack.h): tables of n entries (every tensor raw until the
 * fill places its stream) and the shadow, sized from an estimate of the packed
 * streams plus a margin, followed by room for streams a refresh moves
 * (refresh.c): a quarter of the packed bytes, plus R for every tensor that
 * is all zero now (not written yet: a KV cache's free blocks), whose
 * stream will grow once it is.  Nothing as large as the region is
 * allocated but the shadow. */
static ibp_status lay_out(const ibp_driver *d, const ibp_region_rec *r,
                          ibp_served_region *s, uint64_t n) {
  ibp_layout *l = &s->layout;
  const uint32_t R = s->geometry.tensor_bytes;
  l->offsets = calloc((size_t)n + 1, sizeof *l->offsets);
  l->lengths = calloc((size_t)n ? (size_t)n : 1, sizeof *l->lengths);
  l->prefix = calloc((size_t)n + 1, sizeof *l->prefix);
  if (!l->offsets || !l->lengths || !l->prefix)
    return IBP_ERR_NO_MEMORY;
  ibp_pack p = {.params = l->clusters.params,
                .clusters = l->clusters.count,
                .stages = l->stages,
                .data = (const uint8_t *)r->base,
                .n = n};
  uint64_t zero = 0, est = ibp__pack_estimate(&p, &zero);
  uint64_t streams = est + est / ESTIMATE_MARGIN + (1u << 20);
  uint64_t cap = streams + est / 4 + zero * R;
  if (ibp__compact_active(s)) {
    /* the shadow is all a compact region keeps: measured, not estimated
     * (a tensor written meanwhile is dirty, its stream not needed), and a
     * small room for rewritten streams (a stream that finds none keeps its
     * tensor dirty and its pages resident) */
    streams = ibp__pack_exact(&p);
    cap = streams + streams / COMPACT_ROOM + 4096;
  }
  /* never 0 bytes: the kernel's host pointer must be a real mapping */
  l->shadow = pinned(d, cap ? cap : 1);
  l->shadow_bytes = cap;
  l->stream_capacity = streams < cap ? streams : cap;
  if (!l->shadow)
    return IBP_ERR_NO_MEMORY;
  /* what preparing it takes beyond the region: the shadow, its tables and
   * the bitmaps, one chunk's streams */
  uint64_t words = (n + 31) / 32;
  ibp__count(&s->counters, prepare_peak_bytes,
             cap + (n + 1) * (sizeof *l->offsets + sizeof *l->prefix) +
                 n * sizeof *l->lengths + 3 * 4 * words + (8u << 20));
  return IBP_OK;
}

/* The most clusters whose decode plans fit the region's budget. */
static uint32_t plan_bound(const ibp_region_rec *r, uint32_t R) {
  uint64_t budget = r->bytes / PLAN_BUDGET_SHARE;
  budget = budget > PLAN_BUDGET_MIN ? budget : PLAN_BUDGET_MIN;
  uint64_t k = budget / ibp_kernels_plan_bytes(R, 1, IBP_PLAN_MAX_STAGES);
  return k < 1 ? 1 : k > IBP_MAX_CLUSTERS ? IBP_MAX_CLUSTERS : (uint32_t)k;
}

/* The cluster search's options for r (n tensors of R bytes) on the budgets
 * above, bounded by plan_bound; 0 when no search is wanted (clusters=1,
 * one tensor, or room for one plan only). */
static int cluster_options(const ibp_region_rec *r, uint64_t n, uint32_t R,
                           ibp_cluster_options *opt) {
  const uint32_t bound = plan_bound(r, R), want = r->rule.clusters;
  const uint64_t train =
      (uint64_t)CLUSTER_TRAIN_TENSORS * R > CLUSTER_TRAIN_BYTES
          ? (uint64_t)CLUSTER_TRAIN_TENSORS * R
          : CLUSTER_TRAIN_BYTES;
  *opt = (ibp_cluster_options){
      .clusters = want > bound ? bound : want,
      .max_clusters =
          want ? 0 : (AUTO_CLUSTERS < bound ? AUTO_CLUSTERS : bound),
      .train_max_bytes = train,
      .eval_max_bytes =
          2 * train > CLUSTER_EVAL_BYTES ? 2 * train : CLUSTER_EVAL_BYTES,
      .threads = ibp__pack_threads(),
  };
  return want != 1 && bound > 1 && n > 1;
}

/* The region's pairs (docs/FORMAT.md §4): `base` alone under clusters=1,
 * else the codec's cluster search from it on the budgets above
 * (clusters=auto: the K of 1, 2, 4 ... that stores the region in the
 * fewest bytes, metadata included),
 * bounded by plan_bound.  Takes base over; a failed search leaves the one
 * pair (logged). */
static ibp_status find_clusters(const ibp_region_rec *r, uint64_t n,
                                ibp_params *base, ibp_clusters *out) {
  ibp_cluster_options opt;
  *out = (ibp_clusters){0};
  if (cluster_options(r, n, base->tensor_bytes, &opt)) {
    ibp_status st =
        ibp_cluster_search((const void *)r->base, n, base, &opt, out, NULL);
    if (st == IBP_OK) {
      ibp_params_free(base);
      return IBP_OK;
    }
    ibp__log(IBP_LOG_INFO, "region '%s': no clusters (%s); one Mask/Bitval",
             r->name, ibp_status_message(st));
  }
  out->params = malloc(sizeof *out->params);
  if (!out->params)
    return IBP_ERR_NO_MEMORY;
  out->params[0] = *base; /* taken over */
  *base = (ibp_params){0};
  out->count = 1;
  return IBP_OK;
}

/* Where c's totals were measured, for the log. */
static const char *where_measured(const ibp_stage_choice *c) {
  return c->judged_tensors ? "in the region (estimated on tensors it did "
                             "not learn on)"
                           : "on a sample";
}

/* The stage stores no fewer bytes than IBP alone (on the sample, or only
 * once judged apart: learnt on the sample, it looked to pay); said as the
 * other reasons are, so that the log tells this one from the profile's. */
static void refuse_on_bytes(const ibp_region_rec *r, const ibp_stage_choice *c,
                            ibp_layout *l) {
  l->stage_pick = IBP_STAGE_PICK_BYTES;
  ibp__log(IBP_LOG_INFO,
           "region '%s': no exponent stage: %.1f%% of IBP alone's bytes %s",
           r->name, 100.0 * (double)c->total / (double)c->versus_total,
           where_measured(c));
}

/* Says once, at preparation, why the stage is not tried for r. */
static void say_untried(const ibp_region_rec *r, const ibp_served_region *s,
                        uint32_t R) {
  if (R >= IBP_KERNEL_BLOCK_R)
    ibp__log(IBP_LOG_INFO,
             "region '%s': exponent stage not tried: its tensors of %u B (%u B "
             "or more) are decoded by the kernel's block path, which has no "
             "stage (docs/FORMAT.md §9.6)",
             r->name, R, IBP_KERNEL_BLOCK_R);
  else if (ibp__compact_active(s))
    ibp__log(IBP_LOG_INFO,
             "region '%s': exponent stage not tried: a compact region's "
             "pages are rebuilt on the host, without a stage "
             "(docs/FORMAT.md §9.6)",
             r->name);
}

/* Whether the region is stored with the exponent stage after IBP
 * (docs/FORMAT.md §9), the choice `ibp analyze` makes (ibp_stage_choose,
 * ibp_stage_pays, ibp_profile_stage_pays) on STAGE_SAMPLE_BYTES of its
 * tensors, against the pairs found above on the same tensors, under
 * device dev's profile (docs/PROFILE.md "Whether the stage pays": its
 * decode charged on the tensors it codes, c.stage_tensors); a
 * choice learnt on a sample is judged on the region, estimated on other
 * tensors (judge_apart: an even sample may hold one kind of tensor only,
 * docs/ARCHITECTURE.md "Preparing a region"); when it
 * pays, its pairs and stages replace l's.  l->stage_pick says why.  Never for a
 * region the kernel could not decode so (R >= IBP_KERNEL_BLOCK_R: its block
 * path has no stage, ibp_kernels.h) or whose pages the host decoder rebuilds
 * (compact: compact.c decodes parts of tensors without a stage). */
static void pick_stage(const ibp_region_rec *r, const ibp_served_region *s,
                       int dev, const ibp_search_options *search,
                       ibp_layout *l) {
  const uint32_t R = s->geometry.tensor_bytes;
  const uint64_t n = s->geometry.tensors;
  l->stage_pick = IBP_STAGE_PICK_UNTRIED;
  if (R >= IBP_KERNEL_BLOCK_R || ibp__compact_active(s)) {
    say_untried(r, s, R);
    return;
  }
  ibp__gate_setup_device(dev);
  const ibp_profile *p = ibp__gate_profile(dev);
  if (!p)
    return;
  ibp_stage_choose_options o = {.search = *search,
                                .sample_bytes = STAGE_SAMPLE_BYTES,
                                .versus = &l->clusters,
                                .judge_apart = 1,
                                .threads = ibp__pack_threads()};
  o.search.sampling.fraction = 0; /* every tensor of the sample */
  if (!cluster_options(r, n, R, &o.cluster))
    o.cluster.clusters = 1;
  ibp_stage_choice c;
  ibp_status st = ibp_stage_choose((const void *)r->base, n * R, R, &o, &c);
  if (st != IBP_OK) {
    ibp__log(IBP_LOG_INFO, "region '%s': no exponent stage (%s)", r->name,
             ibp_status_message(st));
    return;
  }
  if (!c.dtype)
    l->stage_pick = IBP_STAGE_PICK_NO_FIT;
  else if (!ibp_stage_pays(&c, c.versus_total))
    refuse_on_bytes(r, &c, l);
  else if (!ibp_profile_stage_pays(p, c.measured_bytes, R, c.versus_total,
                                   c.total, c.stage_tensors,
                                   ibp__cfg.max_sms)) {
    l->stage_pick = IBP_STAGE_PICK_TIME;
    ibp__log(IBP_LOG_INFO,
             "region '%s': no exponent stage: %.1f%% of IBP alone's bytes %s, "
             "but its decode costs more than it saves (on %" PRIu64
             " of %" PRIu64 " tensors) under profile %s%s",
             r->name, 100.0 * (double)c.total / (double)c.versus_total,
             where_measured(&c), c.stage_tensors, c.measured_bytes / R, p->name,
             ibp_profile_stage_measured(p, IBP_STAGE_BUILD)
                 ? ""
                 : " (its stage terms an unmeasured estimate)");
  } else {
    uint32_t on = 0; /* the clusters it is on (docs/FORMAT.md §9.5) */
    for (uint32_t k = 0; k < c.clusters.count; k++)
      on += c.stages[k].kind != IBP_STAGE_NONE;
    l->stage_pick = IBP_STAGE_PICK_EXP;
    ibp__log(IBP_LOG_INFO,
             "region '%s': exponent stage on %s values, on %u of %u "
             "cluster(s), %" PRIu64 " of %" PRIu64
             " tensors: %.1f%% of IBP alone's bytes %s",
             r->name, ibp_dtype_name(c.dtype), on, c.clusters.count,
             c.stage_tensors, c.measured_bytes / R,
             100.0 * (double)c.total / (double)c.versus_total,
             where_measured(&c));
    ibp_clusters_free(&l->clusters);
    l->clusters = c.clusters; /* taken over */
    l->stages = c.stages;
    c.clusters = (ibp_clusters){0};
    c.stages = NULL;
  }
  ibp_stage_choice_free(&c);
}

/* Flags and, with clusters, ids: zeroed, padded to whole 32-bit words (the
 * kernel reads words). */
static ibp_status alloc_bitmaps(ibp_layout *l, uint64_t n, uint64_t bytes) {
  const ibp_params *p = &l->clusters.params[0];
  uint64_t flag_bytes = (ibp_region_flag_bytes(p, bytes) + 3) & ~3ull;
  l->flags = calloc(1, flag_bytes ? flag_bytes : 4);
  if (!l->flags)
    return IBP_ERR_NO_MEMORY;
  if (l->clusters.count > 1) {
    uint64_t id_bytes =
        (ibp_cluster_id_bytes(l->clusters.count, n) + 3) & ~3ull;
    l->ids = calloc(1, id_bytes ? id_bytes : 4);
    if (!l->ids)
      return IBP_ERR_NO_MEMORY;
  }
  return IBP_OK;
}

static void mark_all_dirty(ibp_tracked *t, uint64_t n) {
  atomic_fetch_add(&t->writes_seen, 1); /* a write seen (track.h) */
  for (uint64_t w = 0; w < (n + 31) / 32; w++)
    atomic_fetch_or(&t->dirty[w], 0xffffffffu);
  atomic_store(&t->dirty_tensors, n);
}

int ibp__compress_region(ibp_region_rec *r, int dev) {
  const ibp_driver *d = ibp__driver();
  ibp_served_region *s = ibp__served(r);
  ibp_layout *l = &s->layout;
  const uint64_t t0 = now_ns(), c0 = cpu_ns();
  const uint32_t R = s->geometry.tensor_bytes;
  const uint64_t n = s->geometry.tensors;
  const void *data = (const void *)r->base;
  if (n == 0)
    return fail(r, "it is smaller than one tensor");
  if (start_tracking(d, r, s) != 0)
    return -1;
  /* copies into the region queued before now (even while it was only a
   * candidate) must have landed before we read it; later ones set
   * `invalidated` */
  if (ibp__dtoh_wait() != 0)
    return fail(r, "a device-to-host copy into pinned memory could not be "
                   "followed (e.g. under stream capture)");
  /* landed now, unseen by write protection: an early sum taken before
   * would hold older bytes than we read (track.h) */
  ibp__track_landed(&s->track);
  /* the search looks at a bounded sample: its statistics on at most
   * SEARCH_STATS_BYTES of tensors unless the rule says sample=, its
   * measurements on SEARCH_EVAL_BYTES (docs/ARCHITECTURE.md, "Preparing a
   * region") */
  double fraction = r->rule.sample;
  if (fraction <= 0 && r->bytes > SEARCH_STATS_BYTES)
    fraction = (double)SEARCH_STATS_BYTES / (double)r->bytes;
  ibp_search_options opt = {
      .chunk_bytes = r->rule.chunk,
      .threshold = r->rule.threshold > 0 ? r->rule.threshold : -1,
      .sampling = {.fraction = fraction},
      .eval_max_bytes = SEARCH_EVAL_BYTES,
      .threads = ibp__pack_threads(),
  };
  ibp_params params;
  ibp_status st = ibp_search(data, n, R, &opt, &params, NULL);
  if (st != IBP_OK)
    return fail(r, ibp_status_message(st));
  const uint64_t t_search = cpu_ns();
  /* published for the stats and the device setup; freed with s (so is
   * whatever a failure below leaves).  Until the fill, every tensor is raw
   * (flag 0) and busy. */
  st = find_clusters(r, n, &params, &l->clusters);
  ibp_params_free(&params);
  const uint64_t t_clusters = cpu_ns();
  if (st == IBP_OK)
    pick_stage(r, s, dev, &opt, l);
  const uint64_t t_stage = cpu_ns();
  if (st == IBP_OK)
    st = alloc_bitmaps(l, n, r->bytes);
  if (st == IBP_OK)
    st = lay_out(d, r, s, n);
  if (st != IBP_OK)
    return fail(r, ibp_status_message(st));
  ibp__log(IBP_LOG_DEBUG,
           "region '%s': CPU seconds of this thread: search %.3f, clusters "
           "%.3f, stage's choice %.3f, layout %.3f",
           r->name, 1e-9 * (double)(t_search - c0),
           1e-9 * (double)(t_clusters - t_search),
           1e-9 * (double)(t_stage - t_clusters),
           1e-9 * (double)(cpu_ns() - t_stage));
  const uint32_t K = l->clusters.count;
  l->summary = (ibp_region_summary){
      .tensors = n,
      .tail_bytes = r->bytes % R,
      .compressed_bytes = r->bytes,
      /* on the GPU: the pairs (as their decode plans), flags, cluster ids,
       * the streams' offsets and lengths */
      .metadata_bytes = ibp_cluster_metadata_bytes(K, R, n) +
                        n * (sizeof *l->offsets + sizeof *l->lengths) +
                        (l->stages ? K * sizeof(ibp_kernel_stage) : 0)};
  if (atomic_load(&s->invalidated))
    mark_all_dirty(&s->track, n);
  /* every tensor busy until ibp__compress_fill wrote its stream: kernels
   * serve it raw meanwhile, and no refresh starts */
  for (uint64_t w = 0; w < (n + 31) / 32; w++)
    atomic_store(&s->refresh.busy[w], UINT32_MAX);
  s->refresh.fill_started_ns = t0;
  atomic_store(&s->refresh.pending, 1);
  atomic_store(&s->refresh.filling, 1);
  atomic_store(&s->refresh.refreshing, 1);
  ibp__count(&s->counters, compress_seconds, now_ns() - t0);
  return 0;
}

/* pack.h's publish: tensors [t0, t1) on every device the region is set up
 * on, then no kernel launched before still runs (device.c). */
static int publish_range(void *ctx, uint64_t t0, uint64_t t1) {
  return ibp__device_publish_range((ibp_served_region *)ctx, t0, t1);
}

int ibp__compress_fill(ibp_region_rec *r) {
  ibp_served_region *s = ibp__served(r);
  ibp_layout *l = &s->layout;
  const uint64_t t1 = now_ns(), n = s->geometry.tensors;
  const uint32_t R = s->geometry.tensor_bytes;
  ibp_pack p = {.params = l->clusters.params,
                .clusters = l->clusters.count,
                .stages = l->stages,
                .ids = l->ids,
                .data = (const uint8_t *)r->base,
                .n = n,
                .flags = l->flags,
                .lengths = l->lengths,
                .offsets = l->offsets,
                .prefix = l->prefix,
                .filled = &l->filled,
                .shadow = l->shadow,
                .capacity = l->stream_capacity,
                .busy = s->refresh.busy,
                .stop = &r->removed,
                .publish = publish_range,
                .publish_ctx = s};
  const uint64_t c1 = cpu_ns();
  int rc = ibp__pack_fill(&p);
  const uint64_t t2 = now_ns(), t0 = s->refresh.fill_started_ns;
  ibp__log(IBP_LOG_DEBUG, "region '%s': CPU seconds of this thread: fill %.3f",
           r->name, 1e-9 * (double)(cpu_ns() - c1));
  const uint64_t filled = atomic_load(&l->filled);
  uint64_t first = atomic_load(&p.first_chunk_ns);
  ibp__count(&s->counters, compress_seconds, t2 - t1);
  ibp__count(&s->counters, first_chunk_seconds, (first ? first : t2) - t0);
  ibp__count(&s->counters, ready_seconds, t2 - t0);
  l->summary.tensors_compressed = p.compressed_tensors;
  l->summary.compressed_bytes =
      l->prefix[filled] + (n - filled) * R + l->summary.tail_bytes;
  if (p.overflow_tensors)
    ibp__log(IBP_LOG_INFO,
             "region '%s': %llu tensors stored raw (the shadow, sized from a "
             "sample, was full)",
             r->name, (unsigned long long)p.overflow_tensors);
  if (rc == 0) { /* busy bits are all clear: kernels may stop reading them */
    atomic_store(&s->refresh.refreshing, 0);
    atomic_store(&s->refresh.filling, 0);
    /* host memory now: the pinned bitmaps and shadow, and the region's
     * own bytes -- a compact region's only where not released */
    const int compact = ibp__compact_active(s);
    const uint64_t bitmaps = 2 * 4 * ((n + 31) / 32);
    atomic_store(&s->host.pinned_bytes,
                 l->shadow_bytes + bitmaps + (compact ? 0 : r->bytes));
    atomic_store(&s->host.resident_bytes, r->bytes);
    ibp__compact_release(r); /* still `pending`: nothing unprotects it */
    if (compact)
      atomic_store(&s->host.release_ns, now_ns() - t0);
  }
  atomic_store(&s->refresh.pending, 0);
  if (rc != 0 && !atomic_load(&r->removed))
    return fail(r, "out of memory, or a device update failed, while "
                   "compressing");
  ibp__log(IBP_LOG_INFO,
           "region '%s': %llu tensors of %u B, chunk %u, threshold %.3f, "
           "%u cluster(s)%s, %.1f%% saved",
           r->name, (unsigned long long)n, R, l->clusters.params[0].chunk_bytes,
           l->clusters.params[0].threshold, l->clusters.count,
           l->stages ? " + exponent stage" : "",
           100.0 *
               (1.0 - (double)l->summary.compressed_bytes / (double)r->bytes));
  return rc;
}
