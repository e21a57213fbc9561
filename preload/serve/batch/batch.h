/*
 * Batched launches (serve/batch/batch.c; docs/ARCHITECTURE.md "Batched
 * launches"): consecutive asynchronous host-to-device copies from ready
 * regions on one stream are held and served by one launch of
 * ibp_decompress_batch at the stream's next ordering point.
 */
#ifndef IBP_PRELOAD_BATCH_H
#define IBP_PRELOAD_BATCH_H

#include <cuda.h>
#include <stdint.h>

#include "registry/registry.h"
#include "serve/copy.h"
#include "serve/region.h"
#include "serve/route/route.h"

/* ibp__batch_order's argument for "everything held, in every context". */
#define IBP_BATCH_ALL ((CUstream)(uintptr_t)-1)
/* The same, where no stream's copies are ordered -- switching contexts
 * (the runtime may, at any of its calls): what is held is launched all the
 * same, and no stream's run ends (batch.c, a batch's expected size). */
#define IBP_BATCH_WAIT ((CUstream)(uintptr_t)-2)

/* What an offer answers. */
enum {
  IBP_BATCH_HELD = 0,  /* held: served by the batch's launch, or by the
                          driver's own copy should that fail */
  IBP_BATCH_NOT = 1,   /* not offered, or batching off or not possible on
                          its stream: the caller serves it otherwise */
  IBP_BATCH_ALONE = 2, /* the chooser prefers a copy of its own */
  IBP_BATCH_TIMED = 3  /* queued as the driver's copy between two events
                          (the chooser timing the copy alone); the caller
                          counts it passed to the driver (gated) */
};

/* Offers copy x, described and located by the copy path (x->c, x->r,
 * x->s, and its current device x->dev, context x->ctx, profile x->p;
 * `pcie`: the stored bytes it touches, or an estimate; [alloc, alloc +
 * alloc_bytes): the device allocation its destination lies in), to its
 * stream's batch: IBP_BATCH_*. */
int ibp__batch_offer(ibp_route_copy *x, uint64_t pcie, CUdeviceptr alloc,
                     size_t alloc_bytes);

/* The fast path for the second and later copies of a batch: x (only
 * x->c, x->r, x->s described) goes to its stream's batch when that already
 * holds copies in the current context, its destination lies in the
 * allocation of the batch's last destination, the region is ready on the
 * batch's device and its fit judged -- what serve_region checks with
 * driver queries per copy holds until the stream's next ordering point.
 * Offered, x is located on the batch's device (x->ctx, x->dev, x->slot,
 * x->p).  IBP_BATCH_*: NOT, take the full path (serve_region); ALONE, the
 * full path without offering it again. */
int ibp__batch_hold_more(ibp_route_copy *x);

/* An ordering point for stream s (CU_STREAM_LEGACY and CU_STREAM_PER_THREAD
 * as the hooks made them explicit): launches what is held on s and on the
 * streams s synchronises with (the legacy stream and the blocking streams
 * of its context), so that whatever runs next on s comes after them.
 * IBP_BATCH_ALL: everything held.  Counted for the stream's runs of copies
 * once any stream has had a batch (a relaxed load; then a relaxed atomic
 * add, and the current context for the legacy and per-thread streams,
 * which every context has), then one relaxed load when nothing is held. Returns
 * whether anything was held (then launched, or left on other streams), 0 when
 * nothing was. */
int ibp__batch_order(CUstream s);

/* The same before a host-to-device copy's own call to the driver (one not
 * held): it ends no run of the stream's copies (batch.c, a batch's
 * expected size).  One relaxed load when nothing is held. */
int ibp__batch_order_copy(CUstream s);

/* Stream s's ordering points so far (on s -- the legacy and per-thread
 * streams' in context ctx, the current one -- and everywhere), as its runs
 * count them, but for the legacy stream's, which a blocking stream's run
 * counts too; 0 until a stream has had a batch.  A quiet run of single
 * copies ends where it moves (serve/substitute.c): the copies it leaves to
 * the driver are counted in the run they came in. */
uint64_t ibp__batch_order_mark(CUstream s, CUcontext ctx);

/* Stream s is destroyed: what it holds is launched and its batch
 * forgotten (a later stream may get the same handle). */
void ibp__batch_stream_end(CUstream s);

/* Context ctx ends (destroy, reset, last release; NULL: the primary
 * context of device `dev`, whose handle is not at hand -- taken as every
 * context on that device): what is held in it is launched first, then its
 * batches and staging are forgotten (the context takes its memory with
 * it). */
void ibp__batch_context_end(CUcontext ctx, int dev);

/* Child after fork: nothing held, no staging (the child has no GPU
 * state). */
void ibp__batch_after_fork_child(void);

#endif /* IBP_PRELOAD_BATCH_H */
