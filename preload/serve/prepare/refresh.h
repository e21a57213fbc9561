/*
 * Recompressing written tensors (refresh.c; protocol there and in
 * docs/ARCHITECTURE.md, "No stale byte").
 */
#ifndef IBP_PRELOAD_REFRESH_H
#define IBP_PRELOAD_REFRESH_H

#include "registry/registry.h"

/* From the copy path of a READY region: queues a recompression of its
 * dirty tensors when enough of them are dirty (at most one pending). */
void ibp__refresh_maybe(ibp_region_rec *r);

/* Worker: recompresses r's dirty tensors into their places. */
void ibp__refresh_region(ibp_region_rec *r);

#endif /* IBP_PRELOAD_REFRESH_H */
