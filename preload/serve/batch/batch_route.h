/*
 * How a copy that may be held for a batched launch is timed (batch_route.c;
 * docs/ARCHITECTURE.md "The gate"): a batched launch as a whole, or a copy
 * sent alone, so that the chooser learns what holding really costs where
 * it runs (serve/choose/chooser.h).  The routes' priors for such a copy
 * are the routes' own (serve/route/table.h, route_batched.h).
 *
 * Classes: IBP_CLASS_BATCHED for a copy of a runtime call of its own,
 * IBP_CLASS_APP_BATCH for an entry of the application's cuMemcpyBatchAsync
 * or a row of a 2D copy (whose call the application pays either way, and
 * whose alternative is the copy engine).  A batched launch is timed as a
 * whole, from the job list's copy to the kernel, against the model's GPU
 * time for its copies; a copy explored alone is the driver's copy, timed
 * by two events around it after what the batch held was launched.
 */
#ifndef IBP_PRELOAD_BATCH_ROUTE_H
#define IBP_PRELOAD_BATCH_ROUTE_H

#include <cuda.h>
#include <stdint.h>

#include "profile/profile.h"
#include "registry/registry.h"
#include "serve/choose/chooser.h"
#include "serve/choose/gate.h"
#include "serve/copy.h"
#include "serve/region.h"
#include "serve/route/route.h"

/* A batched launch to be timed: the copy whose decision asked for it. */
typedef struct ibp_batch_timed {
  ibp_region_rec *rec; /* NULL: not timed; else referenced by the batch */
  unsigned cls;
  ibp_choice choice;
  ibp_gate_copy g;
  int own_call;
} ibp_batch_timed;

/* Asks for the batch to be timed for copy c of region r decided as *x in
 * class cls (x->timed, route BATCHED); a batch already timed keeps its
 * request (an exploration of this one is settled untimed). */
void ibp__batch_want_timing(ibp_batch_timed *t, ibp_region_rec *r,
                            ibp_device_slot *slot, unsigned cls,
                            const ibp_choice *x, const ibp_gate_copy *g,
                            int own_call);

/* Drops a timing request that will not be met (its exploration's charge
 * stands). */
void ibp__batch_timing_drop(ibp_batch_timed *t, int dev);

/* Times the launch of a batch of `copies` copies on `stream` of device
 * `dev` in context ctx (current; not capturing) for request t: _begin
 * before its first call, _end after its last (submitted: it was queued);
 * scan_ns: the write tracker's scan the flush paid before it (held like
 * the copies' holds, serve/route/batch_model.h).  t is cleared. */
typedef struct ibp_batch_timing_run {
  ibp_served_region *s;
  ibp_device_slot *slot;
  ibp_chooser *ch;
  ibp_timing t;
} ibp_batch_timing_run;
void ibp__batch_time_begin(ibp_batch_timed *t, int dev, CUcontext ctx,
                           CUstream stream, uint32_t copies, double scan_ns,
                           ibp_batch_timing_run *run);
void ibp__batch_time_end(ibp_batch_timing_run *run, CUstream stream,
                         int submitted);

/* Copy y (its c, slot, dev and p), decided alone as *x (route DRIVER,
 * x->timed) in class cls with model costs prior[]: the driver's copy between
 * two events on its stream (the stream's held batch stays held unless
 * their destinations overlap: the caller's make_way), entered in the
 * streams table once queued.  0 when queued; 1: nothing was (the caller
 * goes on as for a copy alone). */
int ibp__batch_time_alone(const ibp_route_copy *y, unsigned cls,
                          const ibp_choice *x,
                          const ibp_route_cost prior[IBP_ROUTES]);

/* The driver's part of an application's batch call (cuMemcpyBatchAsync,
 * serve/batch/batch_call.h), timed whole: an entry the driver copies
 * within the call is set up in ce_batch_setup_us, a copy of its own call
 * in ce_setup_us, so a lone copy's timing says little of an entry's cost
 * (an H200: 2.3 against ~0.75 us).  One entry's decision asks for it (the
 * driver's route timed or explored, in class cls); the span covers every
 * entry the driver copies in the call, against their model
 * (route_driver.h), as a launch of the call's entries (what the class's
 * prior for an entry is of, so that the two are alike).  An exploration is
 * explored as a call: its class's later entries in the call join the
 * driver's part (ibp__call_joins), or its span would stand for a launch
 * of one.  rec: NULL until asked (then acquired until ended). */
typedef struct ibp_call_timing {
  ibp_region_rec *rec;
  int dev;
  unsigned cls;
  int joining; /* an exploration: the class's later entries join it */
  ibp_choice choice;
  ibp_served_region *s;
  ibp_device_slot *slot;
  ibp_chooser *ch;
  ibp_timing t;
  double est_ns;  /* the driver's estimate for the call's entries */
  size_t entries; /* the call's (the launch its entries' prior is of) */
  size_t decided; /* entries the gate gave the driver (ibp__call_decided),
                     whether or not timing was asked yet */
} ibp_call_timing;

/* Entry y of the call timed by t (NULL: none), decided as *x (route
 * DRIVER, x->timed) in class cls: the call's driver part is timed for it.
 * 1 when taken; 0 when t already times another entry's class (the caller
 * times y alone). */
int ibp__call_want_timing(ibp_call_timing *t, const ibp_route_copy *y,
                          unsigned cls, const ibp_choice *x);

/* An entry of the call timed by t (NULL: none) goes to the driver by the
 * gate's decision.  Only a driver part made of such entries alone is
 * timed: another entry (one outside every region, another direction)
 * is not what the model costs. */
void ibp__call_decided(ibp_call_timing *t);

/* Whether entry y of class cls joins the driver's part of its call: the
 * call times an exploration of the driver by y's class. */
int ibp__call_joins(const ibp_call_timing *t, const ibp_route_copy *y,
                    unsigned cls);

/* The set-up probe timing t asks for (choose.h, IBP_CHOOSE_PROBE_EVERY;
 * IBP_PROBE_NONE: none): the driver's call with entries halved
 * (ibp__batch_call_halve), or made as two calls, the second so
 * (IBP_PROBE_PAIRED: ibp__call_time_pair). */
int ibp__call_probes(const ibp_call_timing *t);

/* The set-up probe timing t asks for is not made (the call timed as it
 * is): no longer under way, no try spent. */
void ibp__call_probe_release(ibp_call_timing *t);

/* A paired probe: t (asked for a call of `count` entries) times the
 * call's first `first` entries whole, *second (its region acquired too)
 * the rest, as a probe of their own -- each timed around its own driver
 * call.  Returns 0 where t times nothing of this call (*second then asks
 * for nothing). */
int ibp__call_time_pair(ibp_call_timing *t, size_t count, size_t first,
                        ibp_call_timing *second);

/* Around the driver's call for the call's `count` entries of sizes[] on
 * `stream` (the application's context current), `halved` of them copied
 * as two halves (a set-up probe; 0: none): _begin before it, _end after
 * (submitted: it was queued); _drop when no call follows.  Each does
 * nothing where nothing was asked. */
void ibp__call_time_begin(ibp_call_timing *t, const size_t *sizes, size_t count,
                          size_t halved, CUstream stream);
void ibp__call_time_end(ibp_call_timing *t, CUstream stream, int submitted);
void ibp__call_time_drop(ibp_call_timing *t);

#endif /* IBP_PRELOAD_BATCH_ROUTE_H */
