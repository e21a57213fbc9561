/* One host-to-device copy as libibp sees it (serve/copy.h). */
#include "serve/copy.h"

#include <stdatomic.h>

#include "base/driver.h"
#include "serve/region.h"

/* What raw-served tensors among [first, last] add: dirty ones, and busy
 * ones while busy bits are in use (`busy` non-NULL). */
static uint64_t raw_extra(const ibp_served_region *s,
                          const _Atomic uint32_t *busy, uint64_t first,
                          uint64_t last) {
  const uint64_t R = s->geometry.tensor_bytes;
  const uint64_t *prefix = s->layout.prefix;
  uint64_t extra = 0;
  for (uint64_t w = first / 32; w <= last / 32; w++) {
    uint32_t m = atomic_load_explicit(&s->track.dirty[w], memory_order_relaxed);
    if (busy)
      m |= atomic_load_explicit(&busy[w], memory_order_relaxed);
    if (w == first / 32)
      m &= UINT32_MAX << (first % 32);
    if (w == last / 32)
      m &= UINT32_MAX >> (31 - last % 32);
    for (; m; m &= m - 1) {
      uint64_t t = w * 32 + (uint64_t)__builtin_ctz(m);
      extra += R - (prefix[t + 1] - prefix[t]);
    }
  }
  return extra;
}

/* Stored bytes of the tensors the copy touches (+ its share of the raw
 * tail; dirty and busy tensors count R): what the kernel reads over PCIe, up to
 * sector rounding. */
uint64_t ibp__stored_bytes(const ibp_served_region *s, uint64_t off,
                           uint64_t len) {
  const uint64_t R = s->geometry.tensor_bytes, n = s->geometry.tensors;
  const uint64_t end = off + len, body = n * R;
  uint64_t bytes = 0;
  if (off < body) {
    uint64_t first = off / R, last = ((end < body ? end : body) - 1) / R;
    /* tensors the fill has not placed yet are raw (serve/prepare/pack.h) */
    const uint64_t filled =
        atomic_load_explicit(&s->layout.filled, memory_order_acquire);
    if (last >= filled) {
      uint64_t from = first > filled ? first : filled;
      bytes += (last + 1 - from) * R;
      if (first >= filled)
        first = last + 1; /* nothing placed in the span */
      else
        last = filled - 1;
    }
    const _Atomic uint32_t *busy =
        atomic_load_explicit(&s->refresh.refreshing, memory_order_relaxed)
            ? s->refresh.busy
            : NULL;
    if (first <= last) {
      bytes += s->layout.prefix[last + 1] - s->layout.prefix[first];
      if (s->track.dirty &&
          (busy ||
           atomic_load_explicit(&s->track.dirty_tensors, memory_order_relaxed)))
        bytes += raw_extra(s, busy, first, last);
    }
  }
  if (end > body)
    bytes += end - (off > body ? off : body);
  return bytes;
}

/* [dst, dst+bytes) lies inside one device allocation.  Otherwise -- NULL,
 * an address in no allocation, a range running past its allocation's end,
 * host memory -- the driver's own copy runs and returns its own error: a
 * kernel would fault or write into a neighbouring allocation. */
int ibp__dst_fits(const ibp_driver *d, CUdeviceptr dst, size_t bytes,
                  CUdeviceptr *base, size_t *size) {
  unsigned type = 0;
  CUpointer_attribute what[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void *out[] = {&type, base, size};
  if (!dst || !d->cuPointerGetAttributes ||
      d->cuPointerGetAttributes(3, what, out, dst) != CUDA_SUCCESS)
    return 0;
  return type == CU_MEMORYTYPE_DEVICE && dst >= *base && bytes <= *size &&
         dst - *base <= *size - bytes;
}
