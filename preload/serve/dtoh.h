/*
 * Copies into regions that write protection does not see (dtoh.c):
 * device-to-host copies, whose bytes land later by DMA.
 */
#ifndef IBP_PRELOAD_DTOH_H
#define IBP_PRELOAD_DTOH_H

#include <cuda.h>
#include <stddef.h>

/* Around a device-to-host copy into host memory: begin invalidates the
 * tensors of every region [dst, dst+bytes) overlaps and returns nonzero
 * when a region was touched; end is
 * then called once the driver accepted (or refused) the copy, with the
 * stream of an asynchronous copy that was queued, else NULL. */
int ibp__dtoh_begin(const void *dst, size_t bytes);
void ibp__dtoh_end(CUstream stream, int async);

/* Worker: waits until every device-to-host copy into a region queued so
 * far has landed.  Returns 0, or -1 when that cannot be known. */
int ibp__dtoh_wait(void);

/* Child after fork. */
void ibp__dtoh_after_fork_child(void);

#endif /* IBP_PRELOAD_DTOH_H */
