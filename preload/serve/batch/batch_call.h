/*
 * The application's own batches (serve/batch/batch_call.c; docs/ARCHITECTURE.md
 * "Batched launches"): the entries of a cuMemcpyBatchAsync that copy from
 * ready regions to the device join the stream's batch; the others go to
 * the driver in one call of their own.  The rows of a 2D copy likewise.
 */
#ifndef IBP_PRELOAD_BATCH_CALL_H
#define IBP_PRELOAD_BATCH_CALL_H

#include <cuda.h>
#include <stddef.h>

#include "serve/batch/batch_route.h"

/* The arguments of a cuMemcpyBatchAsync (12.8 and 13 forms). */
typedef struct ibp_batch_call {
  CUdeviceptr *dsts, *srcs;
  size_t *sizes;
  size_t count;
  CUmemcpyAttributes *attrs;
  size_t *attr_idxs;
  size_t nattrs;
  size_t *orig; /* the rest's: each entry's index in the application's call */
} ibp_batch_call;

/* Holds the entries of `in` (on stream s, explicit) that libibp serves
 * and fills `rest` with the others, in order, with their attributes.
 * Entries whose attributes let the application reuse the source after the
 * call (CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL) are never held; a call
 * with arguments the driver would refuse holds nothing.  Returns the
 * number held; when it is 0, *rest is *in (nothing allocated); when all
 * are held, *rest is empty; else rest's arrays are allocated
 * (ibp__batch_call_free).  timing (cleared by the caller): set when an
 * entry's decision asks for the driver's part of the call to be timed
 * (batch_route.h: the caller brackets that part with
 * ibp__call_time_begin and _end, or drops it). */
size_t ibp__batch_call_split(const ibp_batch_call *in, CUstream s,
                             ibp_batch_call *rest, ibp_call_timing *timing);

/* The driver's call `in` as a set-up probe makes it (choose.h,
 * IBP_CHOOSE_PROBE_EVERY): some entries copied as two halves, the same
 * bytes to the same places, with their attributes -- the second halves
 * after the call's other entries; out->orig maps each to
 * the application's entry (in->orig's, or in's index).  Returns the
 * entries halved; 0: *out is *in (none large enough, or no memory). */
size_t ibp__batch_call_halve(const ibp_batch_call *in, ibp_batch_call *out);

/* Entries [from, to) of the driver's call `in` as a call of their own
 * (a paired set-up probe's parts: choose.h, IBP_PROBE_PAIRED), with their
 * attributes; out->orig maps each to the application's entry.  Returns 1
 * when made (ibp__batch_call_free(in, out)); 0: *out is *in. */
int ibp__batch_call_part(const ibp_batch_call *in, size_t from, size_t to,
                         ibp_batch_call *out);

/* Frees what ibp__batch_call_split allocated into c (if anything). */
void ibp__batch_call_free(const ibp_batch_call *in, ibp_batch_call *c);

/* A 2D copy (on stream s, explicit; sync: the host-synchronous variant)
 * from a ready region to the device: its rows join the stream's batch (a
 * row libibp cannot hold is copied by the driver, after what is held).
 * Returns 0 when served (for sync: done), 1 when the driver's own 2D copy
 * must run -- a source or destination of another kind, arguments the
 * driver would refuse, or a first row libibp does not hold. */
int ibp__serve_2d(const CUDA_MEMCPY2D *p, CUstream s, int sync);

#endif /* IBP_PRELOAD_BATCH_CALL_H */
