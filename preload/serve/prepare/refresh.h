/*
 * Recompressing written tensors (refresh.c; protocol there and in
 * docs/ARCHITECTURE.md, "No stale byte").
 */
#ifndef IBP_PRELOAD_REFRESH_H
#define IBP_PRELOAD_REFRESH_H

#include "registry/registry.h"

/* From the copy path of a READY region: 1 when a recompression of its
 * dirty tensors is due (enough of them are dirty; a compact region's
 * pages that came back are due for release) and none is pending -- it is
 * pending from now on, and the caller queues it (ibp__worker_refresh);
 * 0 otherwise. */
int ibp__refresh_due(ibp_region_rec *r);

/* Worker: recompresses r's dirty tensors into their places. */
void ibp__refresh_region(ibp_region_rec *r);

#endif /* IBP_PRELOAD_REFRESH_H */
