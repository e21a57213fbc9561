/* Compressing a region on the worker thread (DESIGN.md section 3).
 *
 * Order matters for "no stale byte": the dirty bitmap exists and the pages
 * are write-protected BEFORE the data is read, so a write racing with the
 * compression marks its tensors dirty (served raw from the original).  A
 * device-to-host copy into the region while we compress sets
 * priv->invalidated, and then every tensor is marked dirty. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "preload.h"

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
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
static int start_tracking(const ibp_driver *d, ibp_region_rec *r, uint64_t n) {
  size_t bytes = (size_t)((n + 31) / 32) * 4;
  uint8_t *bits = pinned(d, 2 * bytes); /* dirty, then busy (refresh.c) */
  if (!bits)
    return fail(r, "cannot allocate its dirty bitmap");
  memset(bits, 0, 2 * bytes);
  r->busy = (_Atomic uint32_t *)(bits + bytes);
  __atomic_store_n(&r->dirty, (_Atomic uint32_t *)bits, __ATOMIC_RELEASE);
  if (r->rule.track == IBP_TRACK_TRUST)
    return 0;
  if (ibp__track_install() != 0 || ibp__track_protect(r) != 0)
    return fail(r, "cannot write-protect it (track=trust skips that)");
  return 0;
}

/* prefix[i]: stored bytes of tensors 0..i-1 (raw ones count R). */
static int build_prefix(ibp_region_rec *r, uint64_t n, uint32_t R) {
  uint64_t *prefix = malloc((size_t)(n + 1) * sizeof *prefix);
  if (!prefix)
    return -1;
  prefix[0] = 0;
  for (uint64_t i = 0; i < n; i++)
    prefix[i + 1] = prefix[i] + (r->lengths[i] ? r->lengths[i] : R);
  r->prefix = prefix;
  return 0;
}

static int all_zero(const uint8_t *p, uint32_t len) {
  for (uint32_t i = 0; i < len; i++)
    if (p[i])
      return 0;
  return 1;
}

/* Room after the packed streams for streams a refresh moves (refresh.c):
 * a quarter of the packed bytes, plus R for every tensor that is all zero
 * now (not written yet: a KV cache's free blocks), whose stream will grow
 * once it is. */
static uint64_t spill_room(const uint8_t *data, uint64_t n, uint32_t R,
                           uint64_t packed) {
  uint64_t room = packed / 4;
  for (uint64_t i = 0; i < n; i++)
    if (all_zero(data + i * R, R))
      room += R;
  return room;
}

/* Compresses the region into slots (a temporary copy of its layout) and
 * packs the streams into a pinned, device-mapped shadow (docs/FORMAT.md
 * §3) followed by the spill room. */
static ibp_status compress_packed(const ibp_driver *d, ibp_region_rec *r,
                                  const ibp_params *params, const void *data,
                                  uint64_t n, ibp_region_summary *summary) {
  const uint32_t R = params->tensor_bytes;
  uint8_t *slots = malloc(r->bytes);
  r->offsets = malloc((size_t)(n + 1) * sizeof *r->offsets);
  r->lengths = malloc((size_t)n * sizeof *r->lengths);
  if (!slots || !r->offsets || !r->lengths) {
    free(slots);
    return IBP_ERR_NO_MEMORY;
  }
  ibp_status st =
      ibp_compress_region(params, data, r->bytes, slots, r->flags, 0, summary);
  ibp_region reg = {params, slots, r->bytes, r->flags};
  if (st == IBP_OK)
    st = ibp_region_pack_offsets(&reg, r->offsets);
  if (st == IBP_OK) {
    for (uint64_t i = 0; i < n; i++)
      r->lengths[i] = (uint32_t)(r->offsets[i + 1] - r->offsets[i]);
    uint64_t packed = r->offsets[n];
    uint64_t cap = packed + spill_room(data, n, R, packed);
    /* never 0 bytes: the kernel's host pointer must be a real mapping */
    r->shadow = pinned(d, cap ? cap : 1);
    r->shadow_bytes = cap;
    st = r->shadow ? ibp_region_pack(&reg, r->offsets, r->shadow)
                   : IBP_ERR_NO_MEMORY;
  }
  free(slots);
  return st;
}

static void mark_all_dirty(ibp_region_rec *r, uint64_t n) {
  for (uint64_t w = 0; w < (n + 31) / 32; w++)
    atomic_fetch_or(&r->dirty[w], 0xffffffffu);
  atomic_store(&r->dirty_tensors, n);
}

int ibp__compress_region(ibp_region_rec *r) {
  const ibp_driver *d = ibp__driver();
  const uint64_t t0 = now_ns();
  const uint32_t R =
      r->rule.tensor_bytes ? r->rule.tensor_bytes : IBP_CONFIG_DEFAULT_TENSOR;
  const uint64_t n = r->bytes / R;
  const void *data = (const void *)r->base;
  if (n == 0)
    return fail(r, "it is smaller than one tensor");
  if (start_tracking(d, r, n) != 0)
    return -1;
  /* copies into the region queued before now (even while it was only a
   * candidate) must have landed before we read it; later ones set
   * priv->invalidated */
  if (ibp__dtoh_wait() != 0)
    return fail(r, "a device-to-host copy into pinned memory could not be "
                   "followed (e.g. under stream capture)");
  ibp_search_options opt = {
      .chunk_bytes = r->rule.chunk,
      .threshold = r->rule.threshold > 0 ? r->rule.threshold : -1,
      .sampling = {.fraction = r->rule.sample},
  };
  ibp_params params;
  ibp_status st = ibp_search(data, n, R, &opt, &params, NULL);
  if (st != IBP_OK)
    return fail(r, ibp_status_message(st));
  uint64_t flag_bytes = (ibp_region_flag_bytes(&params, r->bytes) + 3) & ~3ull;
  r->flags = calloc(1, flag_bytes ? flag_bytes : 4);
  ibp_region_summary summary;
  st = r->flags ? compress_packed(d, r, &params, data, n, &summary)
                : IBP_ERR_NO_MEMORY;
  if (st != IBP_OK) {
    ibp_params_free(&params);
    return fail(r, ibp_status_message(st));
  }
  /* published for the stats and the device setup; the registry frees it */
  r->params = params;
  r->summary = summary;
  /* on the GPU: Mask, Bitval, flags and the streams' offsets and lengths */
  r->summary.metadata_bytes += n * (sizeof *r->offsets + sizeof *r->lengths);
  if (build_prefix(r, n, R) != 0)
    return fail(r, "out of memory");
  ibp_region_priv *p = r->priv;
  if (atomic_load(&p->invalidated))
    mark_all_dirty(r, n);
  atomic_fetch_add(&r->counters.compress_ns, now_ns() - t0);
  ibp__log(
      IBP_LOG_INFO,
      "region '%s': %llu tensors of %u B, chunk %u, threshold %.3f, "
      "%.1f%% saved",
      r->name, (unsigned long long)n, R, params.chunk_bytes, params.threshold,
      100.0 * (1.0 - (double)r->summary.compressed_bytes / (double)r->bytes));
  return 0;
}
