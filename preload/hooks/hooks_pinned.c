/* Hooks of the pinned-memory entry points: where regions come from (an
 * allocation or registration matching an IBP_REGIONS rule) and where they
 * go (free, unregister).  The driver's call always runs; a region is only
 * recorded after it succeeded, and forgotten before the memory is gone. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"
#include "base/driver.h"
#include "base/log.h"
#include "hooks/hooks.h"
#include "serve/batch/batch.h"
#include "serve/compact.h"
#include "serve/context.h"
#include "serve/region.h"
#include "stats/discover.h"
#include "stats/stats.h"
#include "track/track.h"

static _Atomic uint64_t pinned_allocations; /* for rules with nth= */
static int warned_inplace, warned_add, warned_shared, warned_compact;

static void region_from_rule(const ibp_rule *rule, ibp_region_rule *out) {
  *out = (ibp_region_rule){
      .tensor_bytes = rule->tensor_bytes,
      .chunk = rule->chunk,
      .threshold = rule->threshold,
      .sample = rule->sample,
      .clusters = rule->clusters,
      .mode = (uint8_t)rule->mode,
      .track = (uint8_t)rule->track,
      .index = rule->index,
  };
}

/* Nonzero when part of [p, p+n) is a shared mapping: it may be written
 * through another mapping (or process) that write protection cannot see. */
static int shared_mapping(const void *p, size_t n) {
  FILE *f = fopen("/proc/self/maps", "re");
  if (!f)
    return 1; /* cannot tell: assume the worst */
  uintptr_t lo = (uintptr_t)p, hi = lo + n, a, b;
  char perms[8], line[512];
  int shared = 0;
  while (!shared && fgets(line, sizeof line, f))
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s", &a, &b, perms) == 3 &&
        a < hi && lo < b && perms[3] == 's')
      shared = 1;
  fclose(f);
  return shared;
}

/* The context (and device) current while the memory is pinned: the memory
 * goes when it ends (serve/context.c). */
static void home_of(ibp_served_region *s) {
  const ibp_driver *d = ibp__driver();
  CUdevice dev = -1;
  if (d && d->cuCtxGetCurrent(&s->home_ctx) == CUDA_SUCCESS && s->home_ctx &&
      d->cuCtxGetDevice(&dev) == CUDA_SUCCESS)
    s->home_dev = dev;
}

/* The rule a new pinned range of n bytes matches, or NULL (counting it
 * for nth=). */
static const ibp_rule *rule_for(size_t n) {
  if (ibp__guard || !ibp__active() || n == 0)
    return NULL;
  uint64_t nth = atomic_fetch_add(&pinned_allocations, 1) + 1;
  return ibp_config_match(&ibp__cfg, n, nth);
}

/* A pinned range [p, p+n) now exists and matched `rule` (NULL: none):
 * make it a region if it can be.  `registered`: the application's own
 * memory (cuMemHostRegister); `compact`: memory serve/compact.c gave for a
 * compact rule.  Returns 1 when a region was made. */
static int pinned_created(void *p, size_t n, const ibp_rule *rule,
                          int registered, int compact) {
  ibp__discover_pinned(p, n, registered);
  if (!rule || !p || n == 0)
    return 0;
  if (rule->mode == IBP_MODE_INPLACE) {
    ibp__warn_once(&warned_inplace,
                   "IBP_REGIONS rule %u: mode=inplace is not supported yet; "
                   "its regions pass through",
                   rule->index);
    return 0;
  }
  if (rule->mode == IBP_MODE_COMPACT && registered)
    ibp__log(IBP_LOG_INFO,
             "IBP_REGIONS rule %u: mode=compact applies to allocations; "
             "memory the application registers (%p) is an ordinary region",
             rule->index, p);
  if (registered && rule->track == IBP_TRACK_PROTECT && shared_mapping(p, n)) {
    ibp__warn_once(&warned_shared,
                   "pinned memory at %p (%zu bytes) is a shared mapping whose "
                   "writes cannot be tracked; it passes through (track=trust "
                   "serves it anyway)",
                   p, n);
    return 0;
  }
  ibp_region_rule rr;
  region_from_rule(rule, &rr);
  ibp__guard++;
  char name[IBP_REGISTRY_NAME_MAX];
  if (rule->name[0])
    snprintf(name, sizeof name, "%s", rule->name);
  else
    snprintf(name, sizeof name, "region@%p", p);
  int64_t id = ibp_registry_add(p, n, &rr, name);
  ibp_region_rec *r = NULL;
  ibp_served_region *s = NULL;
  if (id > 0 && ibp_registry_find(p, n, &r) == IBP_FIND_FOUND &&
      (s = ibp__served_new(r)) != NULL) {
    home_of(s);
    if (compact)
      ibp__compact_attach(s);
    ibp_region_set_owner(r, s);
    char size[32];
    ibp__human_bytes(n, size, sizeof size);
    char label[32];
    ibp__log(IBP_LOG_INFO, "region '%s' (%s at %p): tracked (%s%s)", r->name,
             size, p, ibp__rule_label(rule->index, label, sizeof label),
             compact ? ", compact" : "");
  } else if (id > 0) {
    ibp__warn_once(&warned_add, "out of memory; pinned memory not tracked");
    ibp_registry_remove(p);
    s = NULL;
  } else {
    ibp__warn_once(
        &warned_add, "pinned memory at %p (%zu bytes) not tracked: %s", p, n,
        id == IBP_REGISTRY_EOVERLAP ? "overlaps a region" : "registry error");
  }
  ibp_region_release(r);
  ibp__guard--;
  return s != NULL;
}

/* [p, ...) is about to stop being pinned (serve/context.c). */
static void pinned_released(void *p) {
  ibp__discover_released(p);
  if (ibp__guard || ibp_registry_empty() || !p)
    return;
  ibp__guard++;
  ibp__region_released(p);
  ibp__guard--;
}

/* A pinned allocation (flags: cuMemHostAlloc's): libibp's own memory for
 * a compact rule where it can keep one here, else the driver's.  A
 * write-combined one is the driver's alone unless its rule says wc=yes
 * (the CPU reads it uncached: preparing it would crawl). */
static CUresult host_alloc(void **pp, size_t n, unsigned flags, int legacy) {
  const ibp_rule *rule = pp ? rule_for(n) : NULL;
  if (rule && (flags & CU_MEMHOSTALLOC_WRITECOMBINED) && !rule->wc) {
    ibp__stats_left_write_combined(n);
    rule = NULL;
  }
  CUcontext ctx = NULL;
  const ibp_driver *d = ibp__driver();
  /* the driver's answer without a context is its own error */
  if (rule && rule->mode == IBP_MODE_COMPACT && d &&
      d->cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx) {
    CUdevice dev = -1;
    d->cuCtxGetDevice(&dev);
    void *p = ibp__compact_alloc(n, flags, ctx, (int)dev);
    if (p && pinned_created(p, n, rule, 0, 1)) {
      *pp = p;
      return CUDA_SUCCESS;
    }
    if (p)
      ibp__compact_free(p);
    else if (!ibp__track_compact_available())
      ibp__warn_once(&warned_compact,
                     "IBP_REGIONS rule %u: mode=compact needs userfaultfd "
                     "with write protection (Linux >= 5.7, not forbidden "
                     "here); its regions are ordinary (docs/CONFIG.md)",
                     rule->index);
    else
      ibp__warn_once(&warned_compact,
                     "IBP_REGIONS rule %u: libibp could not map memory for "
                     "a compact region of %zu bytes; it is an ordinary one",
                     rule->index, n);
  }
  CUresult res = legacy ? ibp__real_cuMemAllocHost_v2(pp, n)
                        : ibp__real_cuMemHostAlloc(pp, n, flags);
  if (res == CUDA_SUCCESS && pp)
    pinned_created(*pp, n, rule, 0, 0);
  return res;
}

CUresult ibp__hook_cuMemHostAlloc(void **pp, size_t n, unsigned flags) {
  return host_alloc(pp, n, flags, 0);
}

CUresult ibp__hook_cuMemAllocHost_v2(void **pp, size_t n) {
  return host_alloc(pp, n, 0, 1);
}

CUresult ibp__hook_cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
  /* a part of a compact region registered again: the application needs
   * it pinned (the driver then answers as it would have) */
  if (!ibp__guard)
    ibp__compact_pin_range(p, n, "a part of it is registered again");
  CUresult res = ibp__real_cuMemHostRegister_v2(p, n, flags);
  if (res == CUDA_SUCCESS)
    pinned_created(p, n, rule_for(n), 1, 0);
  return res;
}

CUresult ibp__hook_cuMemFreeHost(void *p) {
  if (!ibp__guard)
    ibp__batch_order(IBP_BATCH_ALL); /* copies held from it run first */
  const int ours = ibp__compact_is_base(p);
  if (ours)
    ibp__compact_discard(p); /* its bytes need no rebuilding */
  pinned_released(p);
  if (ours && ibp__compact_free(p))
    return CUDA_SUCCESS;
  return ibp__real_cuMemFreeHost(p);
}

CUresult ibp__hook_cuMemHostUnregister(void *p) {
  if (!ibp__guard)
    ibp__batch_order(IBP_BATCH_ALL);
  if (ibp__compact_owns(p, 1)) /* never registered: the driver says so */
    return ibp__real_cuMemHostUnregister(p);
  pinned_released(p);
  return ibp__real_cuMemHostUnregister(p);
}
