/* Hooks of the copy and set entry points (hooks.def).
 *
 * Each hook makes stream 0 explicit for its variant (legacy or per-thread
 * default stream), offers the copy to ibp__serve_htod, and otherwise calls
 * the driver's own function.  The fast path for a copy outside every region
 * is the thread-local guard plus one relaxed load (ibp_registry_empty), or
 * a lock-free lookup once regions exist. */
#include <stdint.h>

#include "base/base.h"
#include "hooks/hooks.h"
#include "registry/registry.h"
#include "serve/dtoh.h"
#include "serve/substitute.h"

static inline CUstream legacy(CUstream s) {
  return s ? s : CU_STREAM_LEGACY;
}
static inline CUstream per_thread(CUstream s) {
  return s ? s : CU_STREAM_PER_THREAD;
}

static inline int quiet(void) {
  return ibp__guard || ibp_registry_empty();
}

/* 0 when served; 1 when the real copy must run. */
static int htod(CUdeviceptr dst, const void *src, size_t n, CUstream s,
                int sync, int unified) {
  if (quiet())
    return 1;
  ibp_copy c = {dst, src, n, s, sync, unified};
  return ibp__serve_htod(&c);
}

/* A copy into host memory: regions it overlaps are invalidated before it
 * is queued; an asynchronous one gets an event so a recompression can wait
 * until its bytes have landed (ibp__dtoh_end). */
static int dtoh(const void *dst, size_t n) {
  return quiet() ? 0 : ibp__dtoh_begin(dst, n);
}

static CUresult dtoh_done(int touched, CUresult res, CUstream s, int async) {
  if (touched)
    ibp__dtoh_end(res == CUDA_SUCCESS && async ? s : NULL, async);
  return res;
}

/* ---- host to device ------------------------------------------------------ */

CUresult ibp__hook_cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
  if (htod(dst, src, n, CU_STREAM_LEGACY, 1, 0) == 0)
    return CUDA_SUCCESS;
  return ibp__real_cuMemcpyHtoD_v2(dst, src, n);
}

CUresult ibp__hook_cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src,
                                        size_t n) {
  if (htod(dst, src, n, CU_STREAM_PER_THREAD, 1, 0) == 0)
    return CUDA_SUCCESS;
  return ibp__real_cuMemcpyHtoD_v2_ptds(dst, src, n);
}

CUresult ibp__hook_cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src,
                                        size_t n, CUstream s) {
  if (htod(dst, src, n, legacy(s), 0, 0) == 0)
    return CUDA_SUCCESS;
  return ibp__real_cuMemcpyHtoDAsync_v2(dst, src, n, s);
}

CUresult ibp__hook_cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src,
                                             size_t n, CUstream s) {
  if (htod(dst, src, n, per_thread(s), 0, 0) == 0)
    return CUDA_SUCCESS;
  return ibp__real_cuMemcpyHtoDAsync_v2_ptsz(dst, src, n, s);
}

/* ---- unified: classify both pointers ------------------------------------- */

CUresult ibp__hook_cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  int t = dtoh((const void *)dst, n);
  if (htod(dst, (const void *)src, n, CU_STREAM_LEGACY, 1, 1) == 0)
    return dtoh_done(t, CUDA_SUCCESS, NULL, 0);
  return dtoh_done(t, ibp__real_cuMemcpy(dst, src, n), NULL, 0);
}

CUresult ibp__hook_cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  int t = dtoh((const void *)dst, n);
  if (htod(dst, (const void *)src, n, CU_STREAM_PER_THREAD, 1, 1) == 0)
    return dtoh_done(t, CUDA_SUCCESS, NULL, 0);
  return dtoh_done(t, ibp__real_cuMemcpy_ptds(dst, src, n), NULL, 0);
}

CUresult ibp__hook_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                 CUstream s) {
  int t = dtoh((const void *)dst, n);
  if (htod(dst, (const void *)src, n, legacy(s), 0, 1) == 0)
    return dtoh_done(t, CUDA_SUCCESS, NULL, 0);
  return dtoh_done(t, ibp__real_cuMemcpyAsync(dst, src, n, s), legacy(s), 1);
}

CUresult ibp__hook_cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src,
                                      size_t n, CUstream s) {
  int t = dtoh((const void *)dst, n);
  if (htod(dst, (const void *)src, n, per_thread(s), 0, 1) == 0)
    return dtoh_done(t, CUDA_SUCCESS, NULL, 0);
  return dtoh_done(t, ibp__real_cuMemcpyAsync_ptsz(dst, src, n, s),
                   per_thread(s), 1);
}

/* ---- device to host: invalidate, then copy ------------------------------- */

CUresult ibp__hook_cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
  int t = dtoh(dst, n);
  return dtoh_done(t, ibp__real_cuMemcpyDtoH_v2(dst, src, n), NULL, 0);
}

CUresult ibp__hook_cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n) {
  int t = dtoh(dst, n);
  return dtoh_done(t, ibp__real_cuMemcpyDtoH_v2_ptds(dst, src, n), NULL, 0);
}

CUresult ibp__hook_cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n,
                                        CUstream s) {
  int t = dtoh(dst, n);
  return dtoh_done(t, ibp__real_cuMemcpyDtoHAsync_v2(dst, src, n, s), legacy(s),
                   1);
}

CUresult ibp__hook_cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src,
                                             size_t n, CUstream s) {
  int t = dtoh(dst, n);
  return dtoh_done(t, ibp__real_cuMemcpyDtoHAsync_v2_ptsz(dst, src, n, s),
                   per_thread(s), 1);
}

/* ---- device-side writes: invalidate, then write ------------------------- */

/* n elements of `width` bytes, saturated. */
static size_t written(size_t n, size_t width) {
  size_t bytes;
  return __builtin_mul_overflow(n, width, &bytes) ? SIZE_MAX : bytes;
}

/* The hooks of hooks.def's device-side writes: (dst, value or source, n)
 * and the asynchronous ones with their stream. */
#define DEVICE_WRITE(sym, vtype, width)                                        \
  CUresult ibp__hook_##sym(CUdeviceptr dst, vtype v, size_t n) {               \
    int t = dtoh((const void *)dst, written(n, width));                        \
    return dtoh_done(t, ibp__real_##sym(dst, v, n), NULL, 0);                  \
  }
#define DEVICE_WRITE_ASYNC(sym, vtype, width, explicit_stream)                 \
  CUresult ibp__hook_##sym(CUdeviceptr dst, vtype v, size_t n, CUstream s) {   \
    int t = dtoh((const void *)dst, written(n, width));                        \
    return dtoh_done(t, ibp__real_##sym(dst, v, n, s), explicit_stream(s), 1); \
  }

DEVICE_WRITE(cuMemsetD8_v2, unsigned char, 1)
DEVICE_WRITE(cuMemsetD8_v2_ptds, unsigned char, 1)
DEVICE_WRITE_ASYNC(cuMemsetD8Async, unsigned char, 1, legacy)
DEVICE_WRITE_ASYNC(cuMemsetD8Async_ptsz, unsigned char, 1, per_thread)
DEVICE_WRITE(cuMemsetD16_v2, unsigned short, 2)
DEVICE_WRITE(cuMemsetD16_v2_ptds, unsigned short, 2)
DEVICE_WRITE_ASYNC(cuMemsetD16Async, unsigned short, 2, legacy)
DEVICE_WRITE_ASYNC(cuMemsetD16Async_ptsz, unsigned short, 2, per_thread)
DEVICE_WRITE(cuMemsetD32_v2, unsigned int, 4)
DEVICE_WRITE(cuMemsetD32_v2_ptds, unsigned int, 4)
DEVICE_WRITE_ASYNC(cuMemsetD32Async, unsigned int, 4, legacy)
DEVICE_WRITE_ASYNC(cuMemsetD32Async_ptsz, unsigned int, 4, per_thread)
DEVICE_WRITE(cuMemcpyDtoD_v2, CUdeviceptr, 1)
DEVICE_WRITE(cuMemcpyDtoD_v2_ptds, CUdeviceptr, 1)
DEVICE_WRITE_ASYNC(cuMemcpyDtoDAsync_v2, CUdeviceptr, 1, legacy)
DEVICE_WRITE_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, CUdeviceptr, 1, per_thread)

/* ---- 2D copies ------------------------------------------------------------
 */

/* The bytes a 2D copy's destination spans: from its first row's first byte
 * to its last row's end (the rows between included: a superset).  Host or
 * unified destinations by their host address, device ones by theirs (a
 * region's mapped pointer is its host address); 0 bytes when it writes
 * nothing or an array. */
static size_t span_2d(const CUDA_MEMCPY2D *p, const void **dst) {
  size_t bytes = 0, off = 0, last = 0;
  if (!p || !p->WidthInBytes || !p->Height ||
      p->dstMemoryType == CU_MEMORYTYPE_ARRAY ||
      __builtin_mul_overflow(p->dstY, p->dstPitch, &off) ||
      __builtin_add_overflow(off, p->dstXInBytes, &off) ||
      __builtin_mul_overflow(p->Height - 1, p->dstPitch, &last) ||
      __builtin_add_overflow(last, p->WidthInBytes, &bytes))
    return 0;
  uintptr_t base = p->dstMemoryType == CU_MEMORYTYPE_HOST
                       ? (uintptr_t)p->dstHost
                       : (uintptr_t)p->dstDevice;
  *dst = (const void *)(base + off);
  return bytes;
}

static int dtoh_2d(const CUDA_MEMCPY2D *p) {
  const void *dst = NULL;
  size_t bytes = quiet() ? 0 : span_2d(p, &dst);
  return bytes ? ibp__dtoh_begin(dst, bytes) : 0;
}

/* The hooks of hooks.def's 2D copies. */
#define COPY_2D(sym)                                                           \
  CUresult ibp__hook_##sym(const CUDA_MEMCPY2D *p) {                           \
    int t = dtoh_2d(p);                                                        \
    return dtoh_done(t, ibp__real_##sym(p), NULL, 0);                          \
  }
#define COPY_2D_ASYNC(sym, explicit_stream)                                    \
  CUresult ibp__hook_##sym(const CUDA_MEMCPY2D *p, CUstream s) {               \
    int t = dtoh_2d(p);                                                        \
    return dtoh_done(t, ibp__real_##sym(p, s), explicit_stream(s), 1);         \
  }

COPY_2D(cuMemcpy2D_v2)
COPY_2D(cuMemcpy2D_v2_ptds)
COPY_2D(cuMemcpy2DUnaligned_v2)
COPY_2D(cuMemcpy2DUnaligned_v2_ptds)
COPY_2D_ASYNC(cuMemcpy2DAsync_v2, legacy)
COPY_2D_ASYNC(cuMemcpy2DAsync_v2_ptsz, per_thread)
