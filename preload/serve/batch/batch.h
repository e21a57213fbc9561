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

/* ibp__batch_order's argument for "everything held, in every context". */
#define IBP_BATCH_ALL ((CUstream)(uintptr_t)-1)

/* Offers copy c of ready region r (device `dev`, context `ctx`, current;
 * `pcie`: the stored bytes it touches, or an estimate; [alloc, alloc +
 * alloc_bytes): the device allocation its destination lies in) to its
 * stream's batch.  Returns 0
 * when the copy is held (it will be served by the batch's launch, or by
 * the driver's own copy should that fail) or was queued as the driver's
 * copy between two events (the chooser timing the copy alone), 2 when the
 * chooser prefers a copy of its own, 1 when the caller serves it otherwise for
 * another reason (batching off or not possible on its stream). */
int ibp__batch_offer(ibp_region_rec *r, ibp_served_region *s, int dev,
                     CUcontext ctx, const ibp_copy *c, uint64_t pcie,
                     CUdeviceptr alloc, size_t alloc_bytes);

/* The fast path for the second and later copies of a batch: c (region r
 * found for it) goes to its stream's batch when that already holds copies
 * in the current context, its destination lies in the allocation of the
 * batch's last destination, the region is ready on the batch's device and
 * its fit judged -- what serve_region checks with driver queries per copy
 * holds until the stream's next ordering point.  0 when held (or sent to
 * the driver, timed); 2: the chooser prefers a copy of its own (the full
 * path without offering it again); 1: take the full path (serve_region). */
int ibp__batch_hold_more(ibp_region_rec *r, const ibp_copy *c);

/* An ordering point for stream s (CU_STREAM_LEGACY and CU_STREAM_PER_THREAD
 * as the hooks made them explicit): launches what is held on s and on the
 * streams s synchronises with (the legacy stream and the blocking streams
 * of its context), so that whatever runs next on s comes after them.
 * IBP_BATCH_ALL: everything held.  One relaxed load when nothing is held. */
void ibp__batch_order(CUstream s);

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
