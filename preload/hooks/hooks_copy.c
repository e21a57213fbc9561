/* Hooks of the copy and set entry points (hooks.def).
 *
 * Each hook makes stream 0 explicit for its variant (legacy or per-thread
 * default stream), offers the copy to ibp__serve_htod, and otherwise calls
 * the driver's own function.  The fast path for a copy outside every region
 * is the thread-local guard plus one relaxed load (ibp_registry_empty), or
 * a lock-free lookup once regions exist. */
#include <stdint.h>

#include "base/base.h"
#include "base/driver.h"
#include "hooks/hooks.h"
#include "registry/registry.h"
#include "serve/batch/batch.h"
#include "serve/batch/batch_call.h"
#include "serve/batch/batch_rest.h"
#include "serve/dtoh.h"
#include "serve/substitute.h"
#include "stats/discover.h"

static inline CUstream legacy(CUstream s) {
  return s ? s : CU_STREAM_LEGACY;
}
static inline CUstream per_thread(CUstream s) {
  return s ? s : CU_STREAM_PER_THREAD;
}

static inline int quiet(void) {
  return ibp__guard || ibp_registry_empty();
}

/* 0 when served; otherwise the real copy must run (after what is held for
 * batched launches that must run before it: serve/batch/batch.h).  Its
 * call ends its stream's run of copies (batch.h) unless the gate counted
 * it in the run (ibp__serve_htod's 2): a host-synchronous copy, served or
 * not, always does.  A unified copy counted so is a host-to-device one (its
 * source in a region); the step's device-to-host copy is not, and ends the
 * run. */
static int htod(CUdeviceptr dst, const void *src, size_t n, CUstream s,
                int sync, int unified) {
  ibp__discover_copy(src, n, unified);
  int rc = 1;
  if (!quiet()) {
    ibp_copy c = {.dst = dst,
                  .src = src,
                  .bytes = n,
                  .stream = s,
                  .sync = sync,
                  .unified = unified};
    rc = ibp__serve_htod(&c);
  }
  if (!ibp__guard) {
    if (rc == 2 && !sync)
      ibp__batch_order_copy(s);
    else if (rc || sync)
      ibp__batch_order(s);
  }
  return rc;
}

/* Every other operation is an ordering point of batched launches: on its
 * stream, or (host-synchronous variants) everywhere. */
static inline void order(CUstream s) {
  if (!ibp__guard)
    ibp__batch_order(s);
}

/* A copy into host memory: regions it overlaps are invalidated before it
 * is queued; an asynchronous one gets an event so a recompression can wait
 * until its bytes have landed (ibp__dtoh_end). */
static int dtoh(const void *dst, size_t n) {
  return quiet() ? 0 : ibp__dtoh_begin(dst, n);
}

/* The same for a plain copy on stream s (serve/dtoh.h: compact regions
 * stay compact). */
static int dtoh_copy(const void *dst, size_t n, CUstream s) {
  return quiet() ? 0 : ibp__dtoh_begin_copy(dst, n, s);
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
  int t = dtoh_copy((const void *)dst, n, CU_STREAM_LEGACY);
  if (htod(dst, (const void *)src, n, CU_STREAM_LEGACY, 1, 1) == 0)
    return dtoh_done(t, CUDA_SUCCESS, NULL, 0);
  return dtoh_done(t, ibp__real_cuMemcpy(dst, src, n), NULL, 0);
}

CUresult ibp__hook_cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  int t = dtoh_copy((const void *)dst, n, CU_STREAM_PER_THREAD);
  if (htod(dst, (const void *)src, n, CU_STREAM_PER_THREAD, 1, 1) == 0)
    return dtoh_done(t, CUDA_SUCCESS, NULL, 0);
  return dtoh_done(t, ibp__real_cuMemcpy_ptds(dst, src, n), NULL, 0);
}

CUresult ibp__hook_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                 CUstream s) {
  int t = dtoh_copy((const void *)dst, n, legacy(s));
  if (htod(dst, (const void *)src, n, legacy(s), 0, 1) == 0)
    return dtoh_done(t, CUDA_SUCCESS, NULL, 0);
  return dtoh_done(t, ibp__real_cuMemcpyAsync(dst, src, n, s), legacy(s), 1);
}

CUresult ibp__hook_cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src,
                                      size_t n, CUstream s) {
  int t = dtoh_copy((const void *)dst, n, per_thread(s));
  if (htod(dst, (const void *)src, n, per_thread(s), 0, 1) == 0)
    return dtoh_done(t, CUDA_SUCCESS, NULL, 0);
  return dtoh_done(t, ibp__real_cuMemcpyAsync_ptsz(dst, src, n, s),
                   per_thread(s), 1);
}

/* ---- device to host: invalidate, then copy ------------------------------- */

CUresult ibp__hook_cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
  order(IBP_BATCH_ALL);
  int t = dtoh_copy(dst, n, CU_STREAM_LEGACY);
  return dtoh_done(t, ibp__real_cuMemcpyDtoH_v2(dst, src, n), NULL, 0);
}

CUresult ibp__hook_cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n) {
  order(IBP_BATCH_ALL);
  int t = dtoh_copy(dst, n, CU_STREAM_PER_THREAD);
  return dtoh_done(t, ibp__real_cuMemcpyDtoH_v2_ptds(dst, src, n), NULL, 0);
}

CUresult ibp__hook_cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n,
                                        CUstream s) {
  order(legacy(s));
  int t = dtoh_copy(dst, n, legacy(s));
  return dtoh_done(t, ibp__real_cuMemcpyDtoHAsync_v2(dst, src, n, s), legacy(s),
                   1);
}

CUresult ibp__hook_cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src,
                                             size_t n, CUstream s) {
  order(per_thread(s));
  int t = dtoh_copy(dst, n, per_thread(s));
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
    order(IBP_BATCH_ALL);                                                      \
    int t = dtoh((const void *)dst, written(n, width));                        \
    return dtoh_done(t, ibp__real_##sym(dst, v, n), NULL, 0);                  \
  }
#define DEVICE_WRITE_ASYNC(sym, vtype, width, explicit_stream)                 \
  CUresult ibp__hook_##sym(CUdeviceptr dst, vtype v, size_t n, CUstream s) {   \
    order(explicit_stream(s));                                                 \
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

/* Discovery sees a 2D copy from host memory to the device as libibp
 * serves it: row by row (stats/discover.h). */
static void discover_2d(const CUDA_MEMCPY2D *p) {
  if (!atomic_load_explicit(&ibp__discovering, memory_order_relaxed) || !p ||
      (p->srcMemoryType != CU_MEMORYTYPE_HOST &&
       p->srcMemoryType != CU_MEMORYTYPE_UNIFIED) ||
      (p->dstMemoryType != CU_MEMORYTYPE_DEVICE &&
       p->dstMemoryType != CU_MEMORYTYPE_UNIFIED))
    return;
  uintptr_t s = p->srcMemoryType == CU_MEMORYTYPE_HOST
                    ? (uintptr_t)p->srcHost
                    : (uintptr_t)p->srcDevice;
  for (size_t y = 0; y < p->Height; y++)
    ibp__discover_copy_slow(
        (const void *)(s + (p->srcY + y) * p->srcPitch + p->srcXInBytes),
        p->WidthInBytes, p->srcMemoryType == CU_MEMORYTYPE_UNIFIED);
}

/* The hooks of hooks.def's 2D copies: from a region, served row by row
 * through the stream's batch (serve/batch/batch_call.h). */
static int serve_2d(const CUDA_MEMCPY2D *p, CUstream s, int sync) {
  discover_2d(p);
  if (quiet())
    return 1;
  ibp__guard++;
  int rc = ibp__serve_2d(p, s, sync);
  ibp__guard--;
  return rc;
}

#define COPY_2D(sym, explicit_stream)                                          \
  CUresult ibp__hook_##sym(const CUDA_MEMCPY2D *p) {                           \
    if (serve_2d(p, explicit_stream(NULL), 1) == 0)                            \
      return CUDA_SUCCESS;                                                     \
    order(IBP_BATCH_ALL);                                                      \
    int t = dtoh_2d(p);                                                        \
    return dtoh_done(t, ibp__real_##sym(p), NULL, 0);                          \
  }
#define COPY_2D_ASYNC(sym, explicit_stream)                                    \
  CUresult ibp__hook_##sym(const CUDA_MEMCPY2D *p, CUstream s) {               \
    if (serve_2d(p, explicit_stream(s), 0) == 0)                               \
      return CUDA_SUCCESS;                                                     \
    order(explicit_stream(s));                                                 \
    int t = dtoh_2d(p);                                                        \
    return dtoh_done(t, ibp__real_##sym(p, s), explicit_stream(s), 1);         \
  }

COPY_2D(cuMemcpy2D_v2, legacy)
COPY_2D(cuMemcpy2D_v2_ptds, per_thread)
COPY_2D(cuMemcpy2DUnaligned_v2, legacy)
COPY_2D(cuMemcpy2DUnaligned_v2_ptds, per_thread)
COPY_2D_ASYNC(cuMemcpy2DAsync_v2, legacy)
COPY_2D_ASYNC(cuMemcpy2DAsync_v2_ptsz, per_thread)

/* ---- 2D memsets, 3D, peer and batch copies -------------------------------
 */

static int dtoh_rows(uintptr_t base, size_t pitch, size_t width,
                     size_t height) {
  const void *dst = NULL;
  size_t bytes =
      quiet() ? 0
              : ibp__span_rows(base, 0, 0, 0, pitch, 0, width, height, 1, &dst);
  return bytes ? ibp__dtoh_begin(dst, bytes) : 0;
}

/* The hooks of hooks.def's 2D memsets: (dst, pitch, value, width in
 * elements, height) and the asynchronous ones with their stream. */
#define MEMSET_2D(sym, vtype, width)                                           \
  CUresult ibp__hook_##sym(CUdeviceptr dst, size_t pitch, vtype v, size_t w,   \
                           size_t h) {                                         \
    order(IBP_BATCH_ALL);                                                      \
    int t = dtoh_rows(dst, pitch, written(w, width), h);                       \
    return dtoh_done(t, ibp__real_##sym(dst, pitch, v, w, h), NULL, 0);        \
  }
#define MEMSET_2D_ASYNC(sym, vtype, width, explicit_stream)                    \
  CUresult ibp__hook_##sym(CUdeviceptr dst, size_t pitch, vtype v, size_t w,   \
                           size_t h, CUstream s) {                             \
    order(explicit_stream(s));                                                 \
    int t = dtoh_rows(dst, pitch, written(w, width), h);                       \
    return dtoh_done(t, ibp__real_##sym(dst, pitch, v, w, h, s),               \
                     explicit_stream(s), 1);                                   \
  }

MEMSET_2D(cuMemsetD2D8_v2, unsigned char, 1)
MEMSET_2D(cuMemsetD2D8_v2_ptds, unsigned char, 1)
MEMSET_2D_ASYNC(cuMemsetD2D8Async, unsigned char, 1, legacy)
MEMSET_2D_ASYNC(cuMemsetD2D8Async_ptsz, unsigned char, 1, per_thread)
MEMSET_2D(cuMemsetD2D16_v2, unsigned short, 2)
MEMSET_2D(cuMemsetD2D16_v2_ptds, unsigned short, 2)
MEMSET_2D_ASYNC(cuMemsetD2D16Async, unsigned short, 2, legacy)
MEMSET_2D_ASYNC(cuMemsetD2D16Async_ptsz, unsigned short, 2, per_thread)
MEMSET_2D(cuMemsetD2D32_v2, unsigned int, 4)
MEMSET_2D(cuMemsetD2D32_v2_ptds, unsigned int, 4)
MEMSET_2D_ASYNC(cuMemsetD2D32Async, unsigned int, 4, legacy)
MEMSET_2D_ASYNC(cuMemsetD2D32Async_ptsz, unsigned int, 4, per_thread)

/* A CUDA_MEMCPY3D or CUDA_MEMCPY3D_PEER (the same destination fields):
 * the destination's span, by its host address or its device pointer (a
 * region's mapped pointer is its host address); none for an array. */
#define DTOH_3D(p)                                                             \
  ((p) && !quiet() && (p)->dstMemoryType != CU_MEMORYTYPE_ARRAY                \
       ? dtoh_3d_span((p)->dstMemoryType == CU_MEMORYTYPE_HOST                 \
                          ? (uintptr_t)(p)->dstHost                            \
                          : (uintptr_t)(p)->dstDevice,                         \
                      (p)->dstXInBytes, (p)->dstY, (p)->dstZ, (p)->dstPitch,   \
                      (p)->dstHeight, (p)->WidthInBytes, (p)->Height,          \
                      (p)->Depth)                                              \
       : 0)

static int dtoh_3d_span(uintptr_t base, size_t x, size_t y, size_t z,
                        size_t pitch, size_t slice_rows, size_t width,
                        size_t height, size_t depth) {
  const void *dst = NULL;
  size_t bytes = ibp__span_rows(base, x, y, z, pitch, slice_rows, width, height,
                                depth, &dst);
  return bytes ? ibp__dtoh_begin(dst, bytes) : 0;
}

#define COPY_3D(sym, type)                                                     \
  CUresult ibp__hook_##sym(const type *p) {                                    \
    order(IBP_BATCH_ALL);                                                      \
    int t = DTOH_3D(p);                                                        \
    return dtoh_done(t, ibp__real_##sym(p), NULL, 0);                          \
  }
#define COPY_3D_ASYNC(sym, type, explicit_stream)                              \
  CUresult ibp__hook_##sym(const type *p, CUstream s) {                        \
    order(explicit_stream(s));                                                 \
    int t = DTOH_3D(p);                                                        \
    return dtoh_done(t, ibp__real_##sym(p, s), explicit_stream(s), 1);         \
  }

COPY_3D(cuMemcpy3D_v2, CUDA_MEMCPY3D)
COPY_3D(cuMemcpy3D_v2_ptds, CUDA_MEMCPY3D)
COPY_3D_ASYNC(cuMemcpy3DAsync_v2, CUDA_MEMCPY3D, legacy)
COPY_3D_ASYNC(cuMemcpy3DAsync_v2_ptsz, CUDA_MEMCPY3D, per_thread)
COPY_3D(cuMemcpy3DPeer, CUDA_MEMCPY3D_PEER)
COPY_3D(cuMemcpy3DPeer_ptds, CUDA_MEMCPY3D_PEER)
COPY_3D_ASYNC(cuMemcpy3DPeerAsync, CUDA_MEMCPY3D_PEER, legacy)
COPY_3D_ASYNC(cuMemcpy3DPeerAsync_ptsz, CUDA_MEMCPY3D_PEER, per_thread)

#define COPY_PEER(sym)                                                         \
  CUresult ibp__hook_##sym(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,   \
                           CUcontext sctx, size_t n) {                         \
    order(IBP_BATCH_ALL);                                                      \
    int t = dtoh((const void *)dst, n);                                        \
    return dtoh_done(t, ibp__real_##sym(dst, dctx, src, sctx, n), NULL, 0);    \
  }
#define COPY_PEER_ASYNC(sym, explicit_stream)                                  \
  CUresult ibp__hook_##sym(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,   \
                           CUcontext sctx, size_t n, CUstream s) {             \
    order(explicit_stream(s));                                                 \
    int t = dtoh((const void *)dst, n);                                        \
    return dtoh_done(t, ibp__real_##sym(dst, dctx, src, sctx, n, s),           \
                     explicit_stream(s), 1);                                   \
  }

COPY_PEER(cuMemcpyPeer)
COPY_PEER(cuMemcpyPeer_ptds)
COPY_PEER_ASYNC(cuMemcpyPeerAsync, legacy)
COPY_PEER_ASYNC(cuMemcpyPeerAsync_ptsz, per_thread)

/* Batches: every destination in a region is invalidated (count of regions'
 * destinations touched returned); after the call one event follows the
 * batch on its stream and the other touches end. */
static size_t dtoh_batch(const CUdeviceptr *dsts, const size_t *sizes,
                         size_t count) {
  size_t t = 0;
  for (size_t i = 0; dsts && sizes && !quiet() && i < count; i++)
    t += dtoh((const void *)dsts[i], sizes[i]);
  return t;
}

static size_t dtoh_batch_3d(const CUDA_MEMCPY3D_BATCH_OP *ops, size_t n) {
  size_t t = 0;
  for (size_t i = 0; ops && !quiet() && i < n; i++) {
    const CUDA_MEMCPY3D_BATCH_OP *o = &ops[i];
    if (o->dst.type != CU_MEMCPY_OPERAND_TYPE_POINTER)
      continue;
    size_t row = o->dst.op.ptr.rowLength ? o->dst.op.ptr.rowLength
                                         : o->extent.width,
           layer = o->dst.op.ptr.layerHeight ? o->dst.op.ptr.layerHeight
                                             : o->extent.height;
    t += dtoh_3d_span(o->dst.op.ptr.ptr, 0, 0, 0, row, layer, o->extent.width,
                      o->extent.height, o->extent.depth);
  }
  return t;
}

static CUresult batch_done(size_t touched, CUresult res, CUstream s) {
  for (size_t i = 0; i < touched; i++)
    ibp__dtoh_end(i == 0 && res == CUDA_SUCCESS ? s : NULL, i == 0);
  return res;
}

/* The entries libibp serves join the stream's batch (serve/batch/batch_call.h);
 * the others go to the driver in one call, after what is held.  The
 * driver refuses the legacy stream (stream 0 of the legacy variants, or
 * CU_STREAM_LEGACY): such a call goes to it whole. */
static size_t batch_split(ibp_batch_call *in, CUstream raw, CUstream s,
                          int null_ok, ibp_batch_call *rest,
                          ibp_call_timing *timing) {
  /* discovery sees every entry (sources by their unified address) */
  for (size_t i = 0; in->srcs && in->sizes && i < in->count; i++)
    ibp__discover_copy((const void *)in->srcs[i], in->sizes[i], 1);
  *rest = *in;
  if (quiet() || (!raw && !null_ok) || s == CU_STREAM_LEGACY)
    return 0; /* the driver refuses the legacy stream: its answer */
  ibp__guard++;
  size_t held = ibp__batch_call_split(in, s, rest, timing);
  ibp__guard--;
  return held;
}

/* After the driver's call for the rest: its failure index in the
 * application's terms, the rest freed, the touches ended. */
static CUresult batch_rest_done(ibp_batch_call *in, ibp_batch_call *rest,
                                size_t touched, CUresult res, size_t *fail,
                                CUstream s) {
  if (res != CUDA_SUCCESS && fail && rest->orig && *fail < rest->count)
    *fail = rest->orig[*fail];
  ibp__batch_call_free(in, rest);
  return batch_done(touched, res, s);
}

/* The two ABIs of cuMemcpyBatchAsync: the 12.8 one with a failure index
 * (FAIL_PARAM, FAIL_ARG: `, size_t *fail`, `, fail`), CUDA 13's without. */
#define COMMA ,
#define COPY_BATCH_ANY(sym, explicit_stream, null_ok, FAIL_PARAM, FAIL_ARG,    \
                       FAIL_PTR)                                               \
  static CUresult real_##sym(const ibp_batch_call *c, size_t *fail,            \
                             CUstream s) {                                     \
    (void)fail;                                                                \
    return ibp__real_##sym(c->dsts, c->srcs, c->sizes, c->count, c->attrs,     \
                           c->attr_idxs, c->nattrs FAIL_ARG, s);               \
  }                                                                            \
  CUresult ibp__hook_##sym(CUdeviceptr *dsts, CUdeviceptr *srcs,               \
                           size_t *sizes, size_t count,                        \
                           CUmemcpyAttributes *attrs, size_t *idxs,            \
                           size_t nattrs FAIL_PARAM, CUstream s) {             \
    ibp_batch_call in = {dsts, srcs, sizes, count, attrs, idxs, nattrs, NULL}; \
    ibp_batch_call r;                                                          \
    ibp_call_timing ct = {0};                                                  \
    size_t held = batch_split(&in, s, explicit_stream(s), null_ok, &r, &ct);   \
    if (held == count && held) {                                               \
      ibp__call_time_drop(&ct);                                                \
      return CUDA_SUCCESS;                                                     \
    }                                                                          \
    order(explicit_stream(s));                                                 \
    size_t t = dtoh_batch(r.dsts, r.sizes, r.count);                           \
    CUresult res = ibp__batch_call_rest(&ct, &r, real_##sym, FAIL_PTR, s,      \
                                        explicit_stream(s));                   \
    return batch_rest_done(&in, &r, t, res, FAIL_PTR, explicit_stream(s));     \
  }
#define COPY_BATCH_3D(sym, explicit_stream)                                    \
  CUresult ibp__hook_##sym(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops,              \
                           size_t *fail, unsigned long long flags,             \
                           CUstream s) {                                       \
    order(explicit_stream(s));                                                 \
    size_t t = dtoh_batch_3d(ops, n);                                          \
    return batch_done(t, ibp__real_##sym(n, ops, fail, flags, s),              \
                      explicit_stream(s));                                     \
  }
#define COPY_BATCH_3D_V2(sym, explicit_stream)                                 \
  CUresult ibp__hook_##sym(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops,              \
                           unsigned long long flags, CUstream s) {             \
    order(explicit_stream(s));                                                 \
    size_t t = dtoh_batch_3d(ops, n);                                          \
    return batch_done(t, ibp__real_##sym(n, ops, flags, s),                    \
                      explicit_stream(s));                                     \
  }

/* (symbols straight into the macro that pastes them: cuda.h renames
 * cuMemcpyBatchAsync by macro, which an argument passed on would get) */
COPY_BATCH_ANY(cuMemcpyBatchAsync, legacy, 0, COMMA size_t *fail, COMMA fail,
               fail)
COPY_BATCH_ANY(cuMemcpyBatchAsync_ptsz, per_thread, 1, COMMA size_t *fail,
               COMMA fail, fail)
COPY_BATCH_ANY(cuMemcpyBatchAsync_v2, legacy, 0, , , NULL)
COPY_BATCH_ANY(cuMemcpyBatchAsync_v2_ptsz, per_thread, 1, , , NULL)
COPY_BATCH_3D(cuMemcpy3DBatchAsync, legacy)
COPY_BATCH_3D(cuMemcpy3DBatchAsync_ptsz, per_thread)
COPY_BATCH_3D_V2(cuMemcpy3DBatchAsync_v2, legacy)
COPY_BATCH_3D_V2(cuMemcpy3DBatchAsync_v2_ptsz, per_thread)

/* ---- stream memory operations --------------------------------------------
 */

#define WRITE_VALUE(sym, vtype, explicit_stream)                               \
  CUresult ibp__hook_##sym(CUstream s, CUdeviceptr addr, vtype v,              \
                           unsigned flags) {                                   \
    order(explicit_stream(s));                                                 \
    int t = dtoh((const void *)addr, sizeof(vtype));                           \
    return dtoh_done(t, ibp__real_##sym(s, addr, v, flags),                    \
                     explicit_stream(s), 1);                                   \
  }

WRITE_VALUE(cuStreamWriteValue32, cuuint32_t, legacy)
WRITE_VALUE(cuStreamWriteValue32_ptsz, cuuint32_t, per_thread)
WRITE_VALUE(cuStreamWriteValue32_v2, cuuint32_t, legacy)
WRITE_VALUE(cuStreamWriteValue64, cuuint64_t, legacy)
WRITE_VALUE(cuStreamWriteValue64_ptsz, cuuint64_t, per_thread)
WRITE_VALUE(cuStreamWriteValue64_v2, cuuint64_t, legacy)

/* The write operations of a batch (waits, flushes and barriers write
 * nothing). */
static size_t dtoh_mem_ops(const CUstreamBatchMemOpParams *ops, unsigned n) {
  size_t t = 0;
  for (unsigned i = 0; ops && !quiet() && i < n; i++) {
    CUstreamBatchMemOpType op = ops[i].operation;
    if (op == CU_STREAM_MEM_OP_WRITE_VALUE_32 ||
        op == CU_STREAM_MEM_OP_WRITE_VALUE_64)
      t += dtoh((const void *)ops[i].writeValue.address,
                op == CU_STREAM_MEM_OP_WRITE_VALUE_64 ? 8 : 4);
  }
  return t;
}

#define BATCH_MEM_OP(sym, explicit_stream)                                     \
  CUresult ibp__hook_##sym(CUstream s, unsigned n,                             \
                           CUstreamBatchMemOpParams *ops, unsigned flags) {    \
    order(explicit_stream(s));                                                 \
    size_t t = dtoh_mem_ops(ops, n);                                           \
    return batch_done(t, ibp__real_##sym(s, n, ops, flags),                    \
                      explicit_stream(s));                                     \
  }

BATCH_MEM_OP(cuStreamBatchMemOp, legacy)
BATCH_MEM_OP(cuStreamBatchMemOp_ptsz, per_thread)
BATCH_MEM_OP(cuStreamBatchMemOp_v2, legacy)
