/*
 * Copies into regions that write protection does not see (dtoh.c):
 * device-to-host copies, whose bytes land later by DMA.
 */
#ifndef IBP_PRELOAD_DTOH_H
#define IBP_PRELOAD_DTOH_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

/* Around a device-to-host copy into host memory: begin invalidates the
 * tensors of every region [dst, dst+bytes) overlaps and returns nonzero
 * when a region was touched; end is
 * then called once the driver accepted (or refused) the copy, with the
 * stream of an asynchronous copy that was queued, else NULL. */
int ibp__dtoh_begin(const void *dst, size_t bytes);
void ibp__dtoh_end(CUstream stream, int async);

/* ibp__dtoh_begin for a copy the driver makes into [dst, dst+bytes) on
 * `stream` (cuMemcpyDtoH and the unified cuMemcpy): a compact region there
 * stays compact (its pages are written like pageable memory) unless the
 * stream is capturing; a device-side write (ibp__dtoh_begin) pins it. */
int ibp__dtoh_begin_copy(const void *dst, size_t bytes, CUstream stream);

/* The bytes from the first to the last byte written by `depth` slices of
 * `height` rows of `width` bytes, rows `pitch` apart and slices
 * `slice_rows` rows apart, starting at row (z * slice_rows + y), byte x of
 * `base` (2D and 3D copies, 2D memsets, graph nodes): a superset of what
 * the operation writes, its first byte in *dst.  0 when it writes nothing
 * or the figures overflow (the driver refuses those). */
static inline size_t ibp__span_rows(uintptr_t base, size_t x, size_t y,
                                    size_t z, size_t pitch, size_t slice_rows,
                                    size_t width, size_t height, size_t depth,
                                    const void **dst) {
  size_t row, off, last, bytes;
  if (!base || !width || !height || !depth ||
      __builtin_mul_overflow(z, slice_rows, &row) ||
      __builtin_add_overflow(row, y, &row) ||
      __builtin_mul_overflow(row, pitch, &off) ||
      __builtin_add_overflow(off, x, &off) ||
      __builtin_mul_overflow(depth - 1, slice_rows, &last) ||
      __builtin_add_overflow(last, height - 1, &last) ||
      __builtin_mul_overflow(last, pitch, &last) ||
      __builtin_add_overflow(last, width, &bytes) || base + off < base)
    return 0;
  *dst = (const void *)(base + off);
  return bytes;
}

/* Worker: waits until every device-to-host copy into a region queued so
 * far has landed.  Returns 0, or -1 when that cannot be known. */
int ibp__dtoh_wait(void);

/* Child after fork. */
void ibp__dtoh_after_fork_child(void);

#endif /* IBP_PRELOAD_DTOH_H */
