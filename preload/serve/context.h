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

#endif /* IBP_PRELOAD_CONTEXT_H */
