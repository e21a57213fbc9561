/*
 * The background worker (worker.c): one thread that does everything slow
 * or allocating -- compressing a region, setting it up on a device,
 * recompressing written tensors, freeing what a released region held -- so
 * the application's copies never wait for it (unless IBP_WAIT_READY=1).
 */
#ifndef IBP_PRELOAD_WORKER_H
#define IBP_PRELOAD_WORKER_H

#include <cuda.h>

#include "registry/registry.h"

/* Asks the worker to compress r (the caller moved it CANDIDATE ->
 * COMPRESSING) and then to set it up on the device of `ctx`.  Takes its own
 * reference on r. */
void ibp__worker_compress(ibp_region_rec *r, CUcontext ctx, int dev);

/* Asks the worker to set up READY region r on device `dev` of `ctx` (the
 * caller moved the device slot ABSENT -> UPLOADING). */
void ibp__worker_setup_device(ibp_region_rec *r, CUcontext ctx, int dev);

/* Asks the worker for a refresh job (the caller set refresh.pending). */
void ibp__worker_refresh(ibp_region_rec *r);

/* The registry's release hook: hands the pinned and device memory of r's
 * served region to the worker to free and frees its host memory (r is
 * freed when this returns). */
void ibp__worker_release(ibp_region_rec *r, void *ctx);

/* Waits (bounded) until r is no longer COMPRESSING, has no refresh
 * pending, and its slot for `dev` (any slot when dev < 0) is not
 * UPLOADING.  For IBP_WAIT_READY and region removal. */
void ibp__worker_wait(ibp_region_rec *r, int dev);

/* Child after fork: the worker thread does not exist there. */
void ibp__worker_after_fork_child(void);

#endif /* IBP_PRELOAD_WORKER_H */
