/* Where served regions end (serve/context.h; docs/ARCHITECTURE.md "No stale
 * byte").  A region whose memory the driver frees -- cuMemFreeHost,
 * cuMemHostUnregister, or the end of the context that owns it
 * (cuCtxDestroy, a primary context's reset, as cudaDeviceReset does) --
 * must be out of the registry before the memory is gone: a later pinned
 * allocation at the same address would "overlap" it, and a copy would be
 * served from freed memory. */
#include "serve/context.h"

#include "serve/choose/streams.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "base/driver.h"
#include "base/log.h"
#include "serve/choose/streams.h"
#include "serve/dtoh.h"
#include "serve/figures.h"
#include "serve/prepare/device.h"
#include "serve/region.h"
#include "serve/worker.h"

static void retire(ibp_region_rec *r) {
  ibp_region_state before = ibp_region_state_get(r);
  ibp_registry_remove((void *)r->base); /* no new compression can start */
  ibp__worker_wait(r, -1);
  ibp_served_region *s = ibp__served(r);
  /* freed before its compression finished: still a candidate or being
   * compressed, or already published to the device (READY) while the fill
   * ran -- the removal stopped it, and `filling` stays set
   * (serve/prepare/compress.c) */
  int early =
      ((before == IBP_REGION_CANDIDATE || before == IBP_REGION_COMPRESSING) &&
       ibp_region_state_get(r) != IBP_REGION_READY) ||
      (before == IBP_REGION_READY && s &&
       atomic_load(&s->refresh.filling) != 0);
  if (s)
    ibp__track_unprotect(&s->track);
  ibp__figures_retire(r, early);
  ibp_region_transition(r, IBP_REGION_READY, IBP_REGION_DEGRADED);
  ibp__log(IBP_LOG_INFO, "region '%s': released", r->name);
}

void ibp__region_released(void *p) {
  ibp_region_rec *r = NULL;
  if (ibp_registry_find(p, 1, &r) == IBP_FIND_FOUND && r->base == (uintptr_t)p)
    retire(r);
  ibp_region_release(r);
}

/* ---- the end of a context -------------------------------------------------
 */

typedef struct dying {
  CUcontext ctx; /* NULL: every context of dev */
  int dev;
  ibp_region_rec **v;
  size_t n, cap;
} dying;

static int dies(const dying *d, CUcontext ctx, int dev) {
  return d->ctx ? ctx == d->ctx : dev == d->dev;
}

/* The device of ctx, or -1. */
static int device_of(const ibp_driver *drv, CUcontext ctx) {
  CUdevice dev = -1;
  if (!ctx || drv->cuCtxPushCurrent(ctx) != CUDA_SUCCESS)
    return -1;
  if (drv->cuCtxGetDevice(&dev) != CUDA_SUCCESS)
    dev = -1;
  CUcontext ignored;
  drv->cuCtxPopCurrent(&ignored);
  return dev;
}

/* Takes a reference on every region (the registry's lock is held here:
 * the work is done after). */
static void collect(const ibp_region_rec *rc, void *ctx) {
  dying *d = ctx;
  if (d->n == d->cap) {
    size_t cap = d->cap ? 2 * d->cap : 16;
    ibp_region_rec **v = realloc(d->v, cap * sizeof *v);
    if (!v)
      return; /* out of memory: this one is not forgotten */
    d->v = v;
    d->cap = cap;
  }
  ibp_region_rec *r = (ibp_region_rec *)rc;
  ibp_region_acquire(r);
  d->v[d->n++] = r;
}

/* The device memory of r's slots there goes with the context: the device
 * passes through for r (and nothing frees that memory again). */
static void forget_slots(const ibp_driver *drv, ibp_served_region *s,
                         const dying *d) {
  for (int i = 0; i < IBP_MAX_DEVICES; i++) {
    ibp_device_slot *slot = &s->dev[i];
    if (ibp__device_state(s, (unsigned)i) != IBP_DEVICE_READY ||
        !dies(d, slot->ctx, d->ctx ? device_of(drv, slot->ctx) : i))
      continue;
    ibp__device_transition(s, (unsigned)i, IBP_DEVICE_READY, IBP_DEVICE_FAILED);
    slot->mem = (ibp_device_memory){0};
    slot->ctx = NULL;
  }
}

static void forget(const ibp_driver *drv, ibp_region_rec *r, const dying *d) {
  ibp_served_region *s = ibp__served(r);
  if (!s)
    return;
  int home = dies(d, s->home_ctx, s->home_dev);
  int shadow =
      s->layout.ctx &&
      dies(d, s->layout.ctx, d->ctx ? -2 : device_of(drv, s->layout.ctx));
  forget_slots(drv, s, d);
  if (!home && !shadow)
    return;
  retire(r);
  if (shadow) { /* freed with the context: not by the release hook */
    s->layout.shadow = NULL;
    s->track.dirty = NULL;
  }
  ibp__log(IBP_LOG_INFO, "region '%s': its context ends; forgotten", r->name);
}

void ibp__forget_context(CUcontext ctx, int dev) {
  const ibp_driver *drv = ibp__driver();
  ibp__streams_forget_device(dev); /* its streams end with it */
  if (!drv || ibp_registry_empty())
    return;
  ibp__dtoh_wait(); /* copies into regions queued there land first */
  dying d = {ctx, dev, NULL, 0, 0};
  ibp_registry_foreach(collect, &d);
  for (size_t i = 0; i < d.n; i++) {
    forget(drv, d.v[i], &d);
    ibp_region_release(d.v[i]);
  }
  free(d.v);
  ibp__device_forget_contexts();
}

/* ---- the application's references on primary contexts ------------------- */

static _Atomic int primary_refs[IBP_MAX_DEVICES];

void ibp__primary_retained(int dev) {
  if (dev >= 0 && dev < IBP_MAX_DEVICES)
    atomic_fetch_add(&primary_refs[dev], 1);
}

int ibp__primary_last(int dev) {
  return dev >= 0 && dev < IBP_MAX_DEVICES &&
         atomic_load(&primary_refs[dev]) == 1;
}

void ibp__primary_released(int dev, int all) {
  if (dev < 0 || dev >= IBP_MAX_DEVICES)
    return;
  if (all)
    atomic_store(&primary_refs[dev], 0);
  else if (atomic_fetch_sub(&primary_refs[dev], 1) <= 0)
    atomic_store(&primary_refs[dev], 0); /* retained before we counted */
}
