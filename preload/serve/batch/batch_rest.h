/*
 * The driver's part of an application's batch call (serve/batch/batch_rest.c;
 * docs/ARCHITECTURE.md "The gate"): the entries libibp does not hold, made
 * in one driver call, or two where a set-up probe asks for it.
 */
#ifndef IBP_PRELOAD_BATCH_REST_H
#define IBP_PRELOAD_BATCH_REST_H

#include <cuda.h>
#include <stddef.h>

#include "serve/batch/batch_call.h"
#include "serve/batch/batch_route.h"

/* The driver's batch call (12.8 or 13 ABI) for c on stream s; fail: the
 * failure index where the ABI has one. */
typedef CUresult (*ibp_batch_call_fn)(const ibp_batch_call *c, size_t *fail,
                                      CUstream s);

/* The driver's call for the rest r (ibp__batch_call_split's, with its
 * timing), by `real` on stream s (es: s made explicit): timed whole where
 * an entry's decision asked for it; a paired set-up probe makes it two
 * calls, r's first half whole, then its second probed.  A probe's call the
 * driver refuses is made again as the application's (the copies are the
 * same bytes): its answer, and the failure index *fail, are the driver's
 * for r -- a reshaped call's own index never reaches *fail.  A pair whose
 * second call is refused has had its first queued: where the call made
 * again is refused too, the application sees the driver's error for r
 * though half of r's entries were copied (CUDA says nothing of what a
 * refused batch leaves at its destinations). */
CUresult ibp__batch_call_rest(ibp_call_timing *timing, const ibp_batch_call *r,
                              ibp_batch_call_fn real, size_t *fail, CUstream s,
                              CUstream es);

#endif /* IBP_PRELOAD_BATCH_REST_H */
