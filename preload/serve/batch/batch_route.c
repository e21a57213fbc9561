/* A copy that may be held for a batched launch, as the chooser sees it
 * (serve/batch/batch_route.h). */
#include "serve/batch/batch_route.h"

#include <string.h>

#include "base/clock.h"
#include "base/driver.h"
#include "serve/choose/gate.h"
#include "serve/choose/streams.h"
#include "serve/prepare/device.h"
#include "serve/route/batch_model.h"
#include "serve/route/route_batched.h"
#include "serve/route/route_driver.h"
#include "serve/route/table.h"

static ibp_chooser *chooser_at(ibp_region_rec *r, int dev,
                               ibp_served_region **s, ibp_device_slot **slot) {
  *s = r ? ibp__served(r) : NULL;
  if (!*s || dev < 0 || dev >= IBP_MAX_DEVICES)
    return NULL;
  *slot = &(*s)->dev[dev];
  return ibp__chooser_of(*slot);
}

void ibp__batch_want_timing(ibp_batch_timed *t, ibp_region_rec *r,
                            ibp_device_slot *slot, unsigned cls,
                            const ibp_choice *x, const ibp_gate_copy *g,
                            int own_call) {
  if (t->rec) { /* one timing per batch */
    ibp__chooser_untimed(ibp__chooser_of(slot), cls, x);
    return;
  }
  *t = (ibp_batch_timed){r, cls, *x, *g, own_call};
}

void ibp__batch_timing_drop(ibp_batch_timed *t, int dev) {
  ibp_served_region *s;
  ibp_device_slot *slot;
  if (!t->rec)
    return;
  ibp__chooser_untimed(chooser_at(t->rec, dev, &s, &slot), t->cls, &t->choice);
  t->rec = NULL;
}

void ibp__batch_time_begin(ibp_batch_timed *t, int dev, CUcontext ctx,
                           CUstream stream, uint32_t copies, double scan_ns,
                           ibp_batch_timing_run *run) {
  memset(run, 0, sizeof *run);
  run->t.index = -1;
  if (!t->rec)
    return;
  const ibp_driver *d = ibp__driver();
  const ibp_profile *p = ibp__gate_profile(dev);
  run->ch = chooser_at(t->rec, dev, &run->s, &run->slot);
  if (!d || !p || !run->ch || run->slot->ctx != ctx ||
      ibp__device_state(run->s, (unsigned)dev) != IBP_DEVICE_READY) {
    ibp__batch_timing_drop(t, dev);
    run->ch = NULL;
    return;
  }
  /* the model's time for this batch: the flush's calls on the CPU (before
   * its first GPU work), its kernel and job list on the GPU, its copies'
   * calls and holds before them (serve/route/batch_model.h) */
  const ibp_route_cost model =
      ibp__batch_timed_model(p, &t->g, copies, t->own_call, scan_ns);
  /* an exploration's excess is over the choice for as many copies */
  t->choice.choice_ns *= copies ? copies : 1;
  ibp__timing_begin(run->slot, run->ch, p, stream, stream, t->cls, &t->choice,
                    &model, 0, ibp__route_lead_ns(IBP_ROUTE_BATCHED, p),
                    ibp__route_setup_ns(IBP_ROUTE_BATCHED, p), 0, dev, NULL,
                    &run->t);
  t->rec = NULL;
}

void ibp__batch_time_end(ibp_batch_timing_run *run, CUstream stream,
                         int submitted) {
  if (run->ch)
    ibp__timing_end(run->slot, run->ch, stream, &run->t, submitted);
}

int ibp__batch_time_alone(const ibp_route_copy *y, unsigned cls,
                          const ibp_choice *x,
                          const ibp_route_cost prior[IBP_ROUTES]) {
  const ibp_copy *c = y->c;
  const ibp_profile *p = y->p;
  ibp_device_slot *slot = y->slot;
  const int dev = y->dev;
  const ibp_driver *d = ibp__driver();
  ibp_chooser *ch = ibp__chooser_of(slot);
  if (!d || !ch) {
    ibp__chooser_untimed(ch, cls, x);
    return 1;
  }
  /* the calls libibp makes are its CPU time (an entry of the
   * application's batch: its own call is paid either way) */
  const double runtime = c->hold_only ? 0 : 1e3 * p->runtime_call_us;
  const ibp_route_cost model = {.cpu_ns =
                                    runtime + 1e3 * p->driver_copy_call_us,
                                .gpu_ns = prior[IBP_ROUTE_DRIVER].gpu_ns};
  ibp_timing t;
  ibp__timing_begin(slot, ch, p, c->stream, c->stream, cls, x, &model, runtime,
                    ibp__route_lead_ns(IBP_ROUTE_DRIVER, p),
                    ibp__route_setup_ns(IBP_ROUTE_DRIVER, p), 0, dev, NULL, &t);
  if (t.index < 0)
    return 1; /* not timed: the caller goes on as for a copy alone */
  CUresult e = d->cuMemcpyHtoDAsync(c->dst, c->src, c->bytes, c->stream);
  ibp__timing_end(slot, ch, c->stream, &t, e == CUDA_SUCCESS);
  if (e != CUDA_SUCCESS)
    return 1;
  /* what a copy timed on another stream may wait for on the link */
  const double est = x->est_ns[IBP_ROUTE_DRIVER];
  ibp__streams_queued(dev, c->stream, ibp__clock_ns(), est, est, NULL);
  return 0;
}

/* ---- the driver's part of an application's batch call -------------------
 */

int ibp__call_want_timing(ibp_call_timing *t, const ibp_route_copy *y,
                          unsigned cls, const ibp_choice *x) {
  if (!t || t->rec)
    return 0; /* one span per call */
  ibp_region_acquire(y->r);
  const size_t decided = t->decided;
  *t = (ibp_call_timing){.rec = y->r,
                         .dev = y->dev,
                         .cls = cls,
                         .joining = x->explore,
                         .choice = *x,
                         .entries = y->c->entries,
                         .decided = decided};
  t->t.index = -1;
  return 1;
}

void ibp__call_decided(ibp_call_timing *t) {
  if (t)
    t->decided++;
}

int ibp__call_joins(const ibp_call_timing *t, const ibp_route_copy *y,
                    unsigned cls) {
  return t && t->rec == y->r && t->dev == y->dev && t->cls == cls && t->joining;
}

void ibp__call_time_drop(ibp_call_timing *t) {
  if (!t->rec)
    return;
  ibp_served_region *s;
  ibp_device_slot *slot;
  ibp__chooser_untimed(chooser_at(t->rec, t->dev, &s, &slot), t->cls,
                       &t->choice);
  ibp_region_release(t->rec);
  t->rec = NULL;
}

int ibp__call_probes(const ibp_call_timing *t) {
  return t && t->rec ? t->choice.probe : IBP_PROBE_NONE;
}

void ibp__call_probe_release(ibp_call_timing *t) {
  ibp_served_region *s;
  ibp_device_slot *slot;
  if (!t || !t->rec || !t->choice.probe)
    return;
  const ibp_choice c = t->choice;
  t->choice.probe = IBP_PROBE_NONE;
  ibp__chooser_untimed(chooser_at(t->rec, t->dev, &s, &slot), t->cls, &c);
}

int ibp__call_time_pair(ibp_call_timing *t, size_t count, size_t first,
                        ibp_call_timing *second) {
  *second = (ibp_call_timing){0};
  second->t.index = -1;
  if (!t->rec || t->decided != count || !first || first >= count)
    return 0;
  ibp_region_acquire(t->rec);
  *second = *t;
  second->decided = count - first;
  second->choice.probe = IBP_PROBE_HALVED;
  t->decided = first;
  t->choice.probe = IBP_PROBE_NONE; /* the probe's: second's to settle */
  return 1;
}

void ibp__call_time_begin(ibp_call_timing *t, const size_t *sizes, size_t count,
                          size_t halved, CUstream stream) {
  t->t.index = -1;
  if (!t->rec)
    return;
  const ibp_driver *d = ibp__driver();
  const ibp_profile *p = ibp__gate_profile(t->dev);
  t->ch = chooser_at(t->rec, t->dev, &t->s, &t->slot);
  CUcontext ctx = NULL;
  if (!d || !p || !t->ch || !count || !sizes || t->decided != count ||
      d->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || t->slot->ctx != ctx ||
      ibp__device_state(t->s, (unsigned)t->dev) != IBP_DEVICE_READY) {
    ibp__call_time_drop(t);
    return;
  }
  /* every entry the call gives the driver, as the route's prior costs an
   * entry; its CPU, the call's: not a copy call's (the entries' own CPU
   * is not modelled), so not folded into what every class believes of
   * the calls (engine 0) */
  double gpu = 0;
  for (size_t i = 0; i < count; i++)
    gpu += ibp__route_driver_entry_ns(p, sizes[i], count);
  const size_t n = t->entries > count ? t->entries : count;
  /* a set-up probe's halves: the same bytes, as many more set-ups */
  const double added =
      halved ? ibp__route_driver_call_setup_ns(p, count + halved) -
                   ibp__route_driver_call_setup_ns(p, count)
             : 0;
  t->choice.probe_base_ns = gpu;
  t->choice.probe_setup_ns = added;
  const ibp_route_cost model = {
      .cpu_ns = 1e3 * p->driver_copy_call_us,
      .gpu_ns = gpu + added,
      .copies = (uint32_t)(n < UINT32_MAX ? n : UINT32_MAX)};
  /* an exploration's excess is over the choice for as many entries */
  t->choice.choice_ns *= (double)count;
  t->est_ns = t->choice.est_ns[IBP_ROUTE_DRIVER] * (double)count;
  ibp__timing_begin(t->slot, t->ch, p, stream, stream, t->cls, &t->choice,
                    &model, 0, ibp__route_lead_ns(IBP_ROUTE_DRIVER, p),
                    ibp__route_setup_ns(IBP_ROUTE_DRIVER, p), 0, t->dev, NULL,
                    &t->t);
  /* settled by its sample, or dropped with it */
  t->choice.explore = t->choice.probe = 0;
}

void ibp__call_time_end(ibp_call_timing *t, CUstream stream, int submitted) {
  if (!t->rec)
    return;
  if (t->t.index >= 0) {
    ibp__timing_end(t->slot, t->ch, stream, &t->t, submitted);
    if (submitted) { /* what a copy timed on another stream may wait for */
      ibp__streams_queued(t->dev, stream, ibp__clock_ns(), t->est_ns, t->est_ns,
                          NULL);
    }
  }
  ibp_region_release(t->rec);
  t->rec = NULL;
}
