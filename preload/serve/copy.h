/*
 * One host-to-device copy as libibp sees it (copy.c; docs/ARCHITECTURE.md
 * "The copy path"): what the application asked for, whether its
 * destination is one device allocation, and the stored bytes of the
 * tensors it touches -- what every route and the batches share.
 */
#ifndef IBP_PRELOAD_COPY_H
#define IBP_PRELOAD_COPY_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

/* One host-to-device copy as the application asked for it.  `stream` is
 * already explicit: 0 was mapped to CU_STREAM_LEGACY or
 * CU_STREAM_PER_THREAD by the hook according to its variant. */
struct ibp_call_timing; /* serve/batch/batch_route.h */

typedef struct ibp_copy {
  CUdeviceptr dst;
  const void *src;
  size_t bytes;
  CUstream stream;
  int sync;       /* host-synchronous entry point */
  int unified;    /* cuMemcpy*: dst may be host memory (every destination is
                     checked to lie in one device allocation anyway) */
  int hold_only;  /* served only if held for a batched launch (an entry of
                     the application's own batch: serve/batch/batch_call.h) */
  size_t arrive;  /* copies arriving with it (the entries of the
                     application's batch, the rows of a 2D copy), or 0 */
  int part;       /* a part of a compact region's copy served in parts:
                     counted with that copy, not on its own */
  size_t entries; /* an entry of the application's cuMemcpyBatchAsync of
                     this many entries (hold_only; a row of a 2D copy: 0):
                     the driver copies it within that call */
  struct ibp_call_timing *call; /* that call's timing, or NULL */
  int probeable; /* that call's entries all of one size, each large enough
                    for a set-up probe to halve (choose.h,
                    IBP_CHOOSE_PROBE_EVERY) */
} ibp_copy;

/* Stored bytes of the tensors [off, off+len) of region s touches (+ its
 * share of the raw tail; dirty, busy and not yet placed tensors count R):
 * what the kernel reads over PCIe for it, up to sector rounding. */
struct ibp_served_region;
uint64_t ibp__stored_bytes(const struct ibp_served_region *s, uint64_t off,
                           uint64_t len);

/* Whether [dst, dst+bytes) lies inside one device allocation (*base,
 * *size: that allocation).  Otherwise -- NULL, an address in no
 * allocation, a range past its allocation's end, host memory -- the
 * driver's own copy must run and give its own answer. */
struct ibp_driver;
int ibp__dst_fits(const struct ibp_driver *d, CUdeviceptr dst, size_t bytes,
                  CUdeviceptr *base, size_t *size);

#endif /* IBP_PRELOAD_COPY_H */
