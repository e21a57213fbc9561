/*
 * Where served regions end (context.c): the application frees or
 * unregisters their memory, or the context that owns it ends.
 */
#ifndef IBP_PRELOAD_CONTEXT_H
#define IBP_PRELOAD_CONTEXT_H

#include <cuda.h>

/* [p, ...) is about to stop being pinned: the region starting at p (if
 * any) is removed from the registry, its compression finished and its
 * pages writable, its figures kept for the report, before the driver frees
 * or unregisters the memory. */
void ibp__region_released(void *p);

/* Context `ctx` is about to be destroyed (ctx != NULL), or the primary
 * context of device `dev` reset (ctx == NULL): the driver frees its memory.
 * Forgets every region whose pinned memory or compressed shadow was
 * allocated there (as if released), the device state of the others there
 * (that device passes through for them), the kernels looked up, and waits
 * for the device-to-host copies into regions queued so far.  Call it
 * before the real destroy or reset, under the recursion guard. */
void ibp__forget_context(CUcontext ctx, int dev);

/* The application's references on each device's primary context
 * (cuDevicePrimaryCtxRetain / Release; a reset drops them all): a release
 * that drops the last one destroys the context and frees its memory, like
 * a reset.  retained: after a successful retain; last: before a release,
 * nonzero when it would drop the last reference; released: after a
 * successful release (reset: every reference).  Devices past
 * IBP_MAX_DEVICES are not counted (last says 0). */
void ibp__primary_retained(int dev);
int ibp__primary_last(int dev);
void ibp__primary_released(int dev, int all);

#endif /* IBP_PRELOAD_CONTEXT_H */
