/*
 * Per-device work on the worker thread (device.c): loading the kernels,
 * the built-in self-test, and uploading a region's metadata.
 */
#ifndef IBP_PRELOAD_DEVICE_H
#define IBP_PRELOAD_DEVICE_H

#include <cuda.h>

#include "base/driver.h"
#include "registry/registry.h"
#include "serve/region.h"

/* Sets up r (READY) on device `dev` in the current context: kernels
 * loaded, device self-test passed, Mask/Bitval/flags/offsets/lengths
 * uploaded, launch template planned (r's served region, dev[dev]).  Worker
 * thread only.  Returns 0, or -1 (logged). */
int ibp__device_setup(ibp_region_rec *r, int dev, CUstream stream);

/* The fill placed tensors [t0, t1) (t0 a multiple of 32; compress.c):
 * their flags, offsets and lengths are copied to every device s is READY
 * on, then every kernel launched there before has finished (it may have
 * read the old ones; cuCtxSynchronize).  Worker thread, in any context.
 * Returns 0, or -1. */
int ibp__device_publish_range(ibp_served_region *s, uint64_t t0, uint64_t t1);

/* Frees the device memory of m (in the current context, the one it was
 * allocated in) and zeroes m. */
void ibp__device_memory_free(const ibp_driver *d, ibp_device_memory *m);

/* A context is about to end (context.c): forgets the kernels found in
 * every context (they are looked up again at the next setup). */
void ibp__device_forget_contexts(void);

/* ibp_decompress_batch in the current context (loaded with
 * ibp_decompress, cached per context); NULL when it cannot be loaded. */
CUfunction ibp__device_batch_function(void);

/* Child after fork: forgets loaded kernels and self-test results. */
void ibp__device_after_fork_child(void);

#endif /* IBP_PRELOAD_DEVICE_H */
