/*
 * Compressing a region (compress.c), on the worker thread.
 */
#ifndef IBP_PRELOAD_COMPRESS_H
#define IBP_PRELOAD_COMPRESS_H

#include "registry/registry.h"

/* Prepares r (COMPRESSING, owned by the calling worker) in the current
 * context, for device dev (whose cost profile decides the exponent stage):
 * dirty bitmap, write protection (track=protect), Mask/Bitval search, every
 * tensor's size, flag and offset, a pinned mapped shadow of the final size,
 * per-tensor prefix sums -- everything the device setup needs -- with every
 * tensor busy (served raw) and refresh held off. Returns 0, or -1 (logged; the
 * caller degrades the region). */
int ibp__compress_region(ibp_region_rec *r, int dev);

/* Then, with r READY (its copies served meanwhile): writes the streams
 * into the shadow, each 32-tensor word made usable as soon as it is in
 * place; stops early when r is removed.  Returns 0, or -1 (logged; the
 * caller degrades the region). */
int ibp__compress_fill(ibp_region_rec *r);

#endif /* IBP_PRELOAD_COMPRESS_H */
