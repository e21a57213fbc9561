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
 * before its first call, _end after its last (submitted: it was queued).
 * t is cleared. */
typedef struct ibp_batch_timing_run {
  ibp_served_region *s;
  ibp_device_slot *slot;
  ibp_chooser *ch;
  ibp_timing t;
} ibp_batch_timing_run;
void ibp__batch_time_begin(ibp_batch_timed *t, int dev, CUcontext ctx,
                           CUstream stream, uint32_t copies,
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

#endif /* IBP_PRELOAD_BATCH_ROUTE_H */
