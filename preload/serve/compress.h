/*
 * Compressing a region (compress.c), on the worker thread.
 */
#ifndef IBP_PRELOAD_COMPRESS_H
#define IBP_PRELOAD_COMPRESS_H

#include "registry/registry.h"

/* Compresses r (COMPRESSING, owned by the calling worker) in the current
 * context: dirty bitmap, write protection (track=protect), Mask/Bitval
 * search, the compressed streams packed into a pinned mapped shadow with
 * their offsets, flags, per-tensor prefix sums.
 * Returns 0, or -1 (logged; the caller degrades the region). */
int ibp__compress_region(ibp_region_rec *r);

#endif /* IBP_PRELOAD_COMPRESS_H */
