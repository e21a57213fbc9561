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
#include "serve/context.h"
#include "serve/region.h"
#include "stats/discover.h"

static _Atomic uint64_t pinned_allocations; /* for rules with nth= */
static int warned_inplace, warned_add, warned_shared;

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

/* A pinned range [p, p+n) now exists: make it a region if a rule says so.
 * `registered`: the application's own memory (cuMemHostRegister). */
static void pinned_created(void *p, size_t n, int registered) {
  ibp__discover_pinned(p, n);
  if (ibp__guard || !ibp__active() || !p || n == 0)
    return;
  uint64_t nth = atomic_fetch_add(&pinned_allocations, 1) + 1;
  const ibp_rule *rule = ibp_config_match(&ibp__cfg, n, nth);
  if (!rule)
    return;
  if (rule->mode == IBP_MODE_INPLACE) {
    ibp__warn_once(&warned_inplace,
                   "IBP_REGIONS rule %u: mode=inplace is not supported yet; "
                   "its regions pass through",
                   rule->index);
    return;
  }
  if (registered && rule->track == IBP_TRACK_PROTECT && shared_mapping(p, n)) {
    ibp__warn_once(&warned_shared,
                   "pinned memory at %p (%zu bytes) is a shared mapping whose "
                   "writes cannot be tracked; it passes through (track=trust "
                   "serves it anyway)",
                   p, n);
    return;
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
    ibp_region_set_owner(r, s);
    char size[32];
    ibp__human_bytes(n, size, sizeof size);
    char label[32];
    ibp__log(IBP_LOG_INFO, "region '%s' (%s at %p): tracked (%s)", r->name,
             size, p, ibp__rule_label(rule->index, label, sizeof label));
  } else if (id > 0) {
    ibp__warn_once(&warned_add, "out of memory; pinned memory not tracked");
    ibp_registry_remove(p);
  } else {
    ibp__warn_once(
        &warned_add, "pinned memory at %p (%zu bytes) not tracked: %s", p, n,
        id == IBP_REGISTRY_EOVERLAP ? "overlaps a region" : "registry error");
  }
  ibp_region_release(r);
  ibp__guard--;
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

CUresult ibp__hook_cuMemHostAlloc(void **pp, size_t n, unsigned flags) {
  CUresult res = ibp__real_cuMemHostAlloc(pp, n, flags);
  if (res == CUDA_SUCCESS && pp)
    pinned_created(*pp, n, 0);
  return res;
}

CUresult ibp__hook_cuMemAllocHost_v2(void **pp, size_t n) {
  CUresult res = ibp__real_cuMemAllocHost_v2(pp, n);
  if (res == CUDA_SUCCESS && pp)
    pinned_created(*pp, n, 0);
  return res;
}

CUresult ibp__hook_cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
  CUresult res = ibp__real_cuMemHostRegister_v2(p, n, flags);
  if (res == CUDA_SUCCESS)
    pinned_created(p, n, 1);
  return res;
}

CUresult ibp__hook_cuMemFreeHost(void *p) {
  if (!ibp__guard)
    ibp__batch_order(IBP_BATCH_ALL); /* copies held from it run first */
  pinned_released(p);
  return ibp__real_cuMemFreeHost(p);
}

CUresult ibp__hook_cuMemHostUnregister(void *p) {
  if (!ibp__guard)
    ibp__batch_order(IBP_BATCH_ALL);
  pinned_released(p);
  return ibp__real_cuMemHostUnregister(p);
}
