/*
 * Exact compressed size of a whole region without writing it: the sum of
 * ibp_compressed_size over every tensor plus the raw tail, measured by
 * worker threads that take batches of tensors in turn.  Used by
 * `ibp analyze`, whose "space saved" is this exact figure, not an estimate.
 * Nothing here prints.
 */
#ifndef IBP_TOOLS_REGION_MEASURE_H
#define IBP_TOOLS_REGION_MEASURE_H

#include <stdint.h>

#include "ibp/codec.h"

typedef struct region_measure {
  uint64_t tensors;            /* n = bytes / R */
  uint64_t tail_bytes;         /* bytes % R */
  uint64_t tensors_compressed; /* slots shorter than R */
  uint64_t compressed_bytes;   /* sum of slot lengths + tail */
} region_measure;

/* Called on the calling thread with the bytes measured so far. */
typedef void (*measure_progress_fn)(void *ctx, uint64_t bytes_done);

/* Measures the `bytes` bytes at `data` with params `p` on `threads` threads
 * (0 = one per CPU).  `progress` may be NULL.  Errors: IBP_ERR_THREAD. */
ibp_status region_measure_run(const ibp_params *p, const void *data,
                              uint64_t bytes, unsigned threads,
                              measure_progress_fn progress, void *ctx,
                              region_measure *out);

#endif /* IBP_TOOLS_REGION_MEASURE_H */
