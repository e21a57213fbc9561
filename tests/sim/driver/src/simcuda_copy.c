/*
 * Copies and sets in every direction and variant.
 *
 * Every operand is checked before anything is queued (scu_mem_check): a
 * device-side operand must lie inside one device allocation or pinned
 * range, a host operand must be mapped; otherwise CUDA_ERROR_INVALID_VALUE
 * and nothing happens.  Then the copy becomes an operation on a stream:
 *
 *   synchronous entry points (cuMemcpyHtoD_v2, cuMemcpy, cuMemsetD8_v2...)
 *     run on the legacy default stream -- the per-thread one for the _ptds
 *     variants -- and return when the copy is done;
 *   asynchronous ones (..Async) return at once when every host operand is
 *     pinned; with pageable host memory they behave as NVIDIA documents --
 *     the stream is synchronized and the copy is done before the call
 *     returns -- so the caller may reuse its buffer.
 */
#include "simcuda_internal.h"

#include "simclock.h"

typedef enum dir { HTOD, DTOH, DTOD, ANY } dir;

/* The PCIe direction a copy between these operands crosses (the virtual
 * clock's link), SCU_LINK_NONE when both are on one side. */
static uint8_t link_of(const scu_span *dst, const scu_span *src) {
  bool dst_dev = dst->kind == SCU_MEM_DEVICE,
       src_dev = src->kind == SCU_MEM_DEVICE;
  if (dst_dev && !src_dev)
    return SIMCLOCK_LINK_H2D;
  if (src_dev && !dst_dev)
    return SIMCLOCK_LINK_D2H;
  return SCU_LINK_NONE;
}

/* Queues op on the stream named by h (ptds: 0 is the per-thread stream);
 * waits when `sync`. */
static CUresult enqueue(scu_op *op, CUstream h, bool ptds, bool sync) {
  scu_stream *s;
  CUresult r = scu_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS) {
    scu_op_free(op);
    return r;
  }
  if (sync) {
    r = scu_stream_run_sync(s, op);
  } else {
    uint64_t seq;
    r = scu_stream_submit(s, op, &seq);
  }
  scu_stream_put(s);
  return r;
}

/* Checks that a capture, if any, allows this transfer. */
static CUresult capture_rules(CUstream h, bool ptds, bool sync, bool pageable) {
  if (sync)
    return scu_capture_check_unsafe();
  if (!pageable)
    return CUDA_SUCCESS;
  scu_stream *s;
  CUresult r = scu_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS)
    return r;
  if (scu_stream_is_capturing(s)) { /* pageable memory cannot be captured */
    scu_capture_invalidate(s);
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  scu_stream_put(s);
  return r;
}

/* entry: an entry after the first of a batch call (scu_op.batch_entry) */
static CUresult copy1d_op(uintptr_t dst, uintptr_t src, size_t n, CUstream h,
                          bool ptds, bool sync, dir d, bool entry) {
  scu_span ds, ss;
  CUresult r = scu_mem_check(dst, n, d == HTOD || d == DTOD, &ds);
  if (r == CUDA_SUCCESS)
    r = scu_mem_check(src, n, d == DTOH || d == DTOD, &ss);
  if (r != CUDA_SUCCESS)
    return r;
  bool pageable = ds.kind == SCU_MEM_PAGEABLE || ss.kind == SCU_MEM_PAGEABLE;
  if ((r = capture_rules(h, ptds, sync, pageable)) != CUDA_SUCCESS)
    return r;
  scu_op *op = scu_op_new(n ? SCU_OP_COPY : SCU_OP_NOP);
  if (!op)
    return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.copy.dst = ds.access;
  op->u.copy.src = ss.access;
  op->u.copy.bytes = n;
  op->link = link_of(&ds, &ss);
  op->ranges[0] = (scu_range){dst, n, d == HTOD || d == DTOD, ds.access};
  op->ranges[1] = (scu_range){src, n, d == DTOH || d == DTOD, ss.access};
  op->nranges = 2;
  op->batch_entry = entry;
  return enqueue(op, h, ptds, sync || pageable);
}

static CUresult copy1d(uintptr_t dst, uintptr_t src, size_t n, CUstream h,
                       bool ptds, bool sync, dir d) {
  return copy1d_op(dst, src, n, h, ptds, sync, d, false);
}

#define COPY_SYNC(sym, base, d, ptds, dtype, stype, dexpr, sexpr)              \
  CUresult CUDAAPI sym(dtype dst, stype src, size_t ByteCount) {               \
    SCU_API(base);                                                             \
    SCU_RETURN(copy1d(dexpr, sexpr, ByteCount, NULL, ptds, true, d));          \
  }
#define COPY_ASYNC(sym, base, d, ptds, dtype, stype, dexpr, sexpr)             \
  CUresult CUDAAPI sym(dtype dst, stype src, size_t ByteCount,                 \
                       CUstream hStream) {                                     \
    SCU_API(base);                                                             \
    SCU_RETURN(copy1d(dexpr, sexpr, ByteCount, hStream, ptds, false, d));      \
  }
#define HOSTP(p) ((uintptr_t)(p))

COPY_SYNC(cuMemcpyHtoD_v2, "cuMemcpyHtoD", HTOD, false, CUdeviceptr,
          const void *, dst, HOSTP(src))
COPY_SYNC(cuMemcpyHtoD_v2_ptds, "cuMemcpyHtoD", HTOD, true, CUdeviceptr,
          const void *, dst, HOSTP(src))
COPY_ASYNC(cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync", HTOD, false, CUdeviceptr,
           const void *, dst, HOSTP(src))
COPY_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, "cuMemcpyHtoDAsync", HTOD, true,
           CUdeviceptr, const void *, dst, HOSTP(src))
COPY_SYNC(cuMemcpyDtoH_v2, "cuMemcpyDtoH", DTOH, false, void *, CUdeviceptr,
          HOSTP(dst), src)
COPY_SYNC(cuMemcpyDtoH_v2_ptds, "cuMemcpyDtoH", DTOH, true, void *, CUdeviceptr,
          HOSTP(dst), src)
COPY_ASYNC(cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync", DTOH, false, void *,
           CUdeviceptr, HOSTP(dst), src)
COPY_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, "cuMemcpyDtoHAsync", DTOH, true, void *,
           CUdeviceptr, HOSTP(dst), src)
COPY_SYNC(cuMemcpyDtoD_v2, "cuMemcpyDtoD", DTOD, false, CUdeviceptr,
          CUdeviceptr, dst, src)
COPY_SYNC(cuMemcpyDtoD_v2_ptds, "cuMemcpyDtoD", DTOD, true, CUdeviceptr,
          CUdeviceptr, dst, src)
COPY_ASYNC(cuMemcpyDtoDAsync_v2, "cuMemcpyDtoDAsync", DTOD, false, CUdeviceptr,
           CUdeviceptr, dst, src)
COPY_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, "cuMemcpyDtoDAsync", DTOD, true,
           CUdeviceptr, CUdeviceptr, dst, src)
/* Unified addressing: either side may be host or device memory. */
COPY_SYNC(cuMemcpy, "cuMemcpy", ANY, false, CUdeviceptr, CUdeviceptr, dst, src)
COPY_SYNC(cuMemcpy_ptds, "cuMemcpy", ANY, true, CUdeviceptr, CUdeviceptr, dst,
          src)
COPY_ASYNC(cuMemcpyAsync, "cuMemcpyAsync", ANY, false, CUdeviceptr, CUdeviceptr,
           dst, src)
COPY_ASYNC(cuMemcpyAsync_ptsz, "cuMemcpyAsync", ANY, true, CUdeviceptr,
           CUdeviceptr, dst, src)

/* ---- 2D and 3D copies ---------------------------------------------------- */

/* One side of a 2D or 3D copy (CUDA_MEMCPY2D, CUDA_MEMCPY3D and the peer
 * form describe it alike; `height` is the rows of a slice, 3D only). */
typedef struct operand {
  CUmemorytype type;
  const void *host;
  CUdeviceptr dev;
  CUarray array;
  size_t x, y, z, pitch, height;
} operand;

/* Its first byte and whether it must be device-accessible. */
static CUresult side(const operand *o, uintptr_t *start, bool *device_side) {
  uintptr_t base;
  switch (o->type) {
  case CU_MEMORYTYPE_HOST:
    base = (uintptr_t)o->host;
    *device_side = false;
    break;
  case CU_MEMORYTYPE_DEVICE:
    base = o->dev;
    *device_side = true;
    break;
  case CU_MEMORYTYPE_UNIFIED:
    base = o->dev;
    *device_side = false;
    break;
  case CU_MEMORYTYPE_ARRAY:
    return CUDA_ERROR_NOT_SUPPORTED; /* no CUDA arrays here */
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
  size_t row, off;
  if (!base || __builtin_mul_overflow(o->z, o->height, &row) ||
      __builtin_add_overflow(row, o->y, &row) ||
      __builtin_mul_overflow(row, o->pitch, &off) ||
      __builtin_add_overflow(off, o->x, &off) || base + off < base)
    return CUDA_ERROR_INVALID_VALUE;
  *start = base + off;
  return CUDA_SUCCESS;
}

/* Bytes spanned by `depth` slices of `height` rows of `width` at `pitch`,
 * a slice being `slice_rows` rows (3D) -- or 0 when it copies nothing. */
static bool extent(size_t width, size_t height, size_t depth, size_t pitch,
                   size_t slice_rows, size_t *out) {
  if (height == 0 || width == 0 || depth == 0) {
    *out = 0;
    return true;
  }
  if (height > 1 && pitch < width)
    return false;
  if (depth > 1 && slice_rows < height)
    return false;
  size_t last_row, slice, bytes;
  if (__builtin_mul_overflow(height - 1, pitch, &last_row) ||
      __builtin_mul_overflow(pitch, depth > 1 ? slice_rows : 0, &slice) ||
      __builtin_mul_overflow(depth - 1, slice, &bytes) ||
      __builtin_add_overflow(bytes, last_row, &bytes) ||
      __builtin_add_overflow(bytes, width, &bytes))
    return false;
  *out = bytes;
  return true;
}

/* The operation of a 2D/3D copy, its operands checked; `pageable` when a
 * side is pageable host memory. */
static CUresult build_nd(const operand *d, const operand *sr, size_t width,
                         size_t height, size_t depth, scu_op **out,
                         bool *pageable) {
  uintptr_t dst, src;
  bool ddev, sdev;
  size_t dbytes, sbytes;
  CUresult r = side(d, &dst, &ddev);
  if (r == CUDA_SUCCESS)
    r = side(sr, &src, &sdev);
  if (r != CUDA_SUCCESS)
    return r;
  if (!extent(width, height, depth, d->pitch, d->height, &dbytes) ||
      !extent(width, height, depth, sr->pitch, sr->height, &sbytes))
    return CUDA_ERROR_INVALID_VALUE;
  scu_span ds, ss;
  if ((r = scu_mem_check(dst, dbytes, ddev, &ds)) != CUDA_SUCCESS ||
      (r = scu_mem_check(src, sbytes, sdev, &ss)) != CUDA_SUCCESS)
    return r;
  *pageable = ds.kind == SCU_MEM_PAGEABLE || ss.kind == SCU_MEM_PAGEABLE;
  scu_op *op = scu_op_new(dbytes ? SCU_OP_COPY2D : SCU_OP_NOP);
  if (!op)
    return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.copy2d.dst = ds.access;
  op->u.copy2d.src = ss.access;
  op->link = link_of(&ds, &ss);
  op->u.copy2d.dpitch = d->pitch;
  op->u.copy2d.spitch = sr->pitch;
  op->u.copy2d.width = width;
  op->u.copy2d.height = height;
  op->u.copy2d.depth = depth;
  op->u.copy2d.dslice = depth > 1 ? d->pitch * d->height : 0;
  op->u.copy2d.sslice = depth > 1 ? sr->pitch * sr->height : 0;
  op->ranges[0] = (scu_range){dst, dbytes, ddev, ds.access};
  op->ranges[1] = (scu_range){src, sbytes, sdev, ss.access};
  op->nranges = 2;
  *out = op;
  return CUDA_SUCCESS;
}

static CUresult copy_nd(const operand *d, const operand *sr, size_t width,
                        size_t height, size_t depth, CUstream h, bool ptds,
                        bool sync) {
  scu_op *op = NULL;
  bool pageable = false;
  CUresult r = build_nd(d, sr, width, height, depth, &op, &pageable);
  if (r == CUDA_SUCCESS)
    r = capture_rules(h, ptds, sync, pageable);
  if (r != CUDA_SUCCESS) {
    scu_op_free(op);
    return r;
  }
  return enqueue(op, h, ptds, sync || pageable);
}

static CUresult copy2d(const CUDA_MEMCPY2D *p, CUstream h, bool ptds,
                       bool sync) {
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  operand d = {p->dstMemoryType,
               p->dstHost,
               p->dstDevice,
               p->dstArray,
               p->dstXInBytes,
               p->dstY,
               0,
               p->dstPitch,
               0};
  operand s = {p->srcMemoryType,
               p->srcHost,
               p->srcDevice,
               p->srcArray,
               p->srcXInBytes,
               p->srcY,
               0,
               p->srcPitch,
               0};
  return copy_nd(&d, &s, p->WidthInBytes, p->Height, 1, h, ptds, sync);
}

/* The operands of a CUDA_MEMCPY3D or CUDA_MEMCPY3D_PEER (same fields). */
#define OPERANDS_3D(p, d, s)                                                   \
  operand d = {(p)->dstMemoryType, (p)->dstHost,     (p)->dstDevice,           \
               (p)->dstArray,      (p)->dstXInBytes, (p)->dstY,                \
               (p)->dstZ,          (p)->dstPitch,    (p)->dstHeight};          \
  operand s = {(p)->srcMemoryType, (p)->srcHost,     (p)->srcDevice,           \
               (p)->srcArray,      (p)->srcXInBytes, (p)->srcY,                \
               (p)->srcZ,          (p)->srcPitch,    (p)->srcHeight}

static CUresult copy3d(const CUDA_MEMCPY3D *p, CUstream h, bool ptds,
                       bool sync) {
  if (!p || p->reserved0 || p->reserved1 || p->srcLOD || p->dstLOD)
    return CUDA_ERROR_INVALID_VALUE;
  OPERANDS_3D(p, d, s);
  return copy_nd(&d, &s, p->WidthInBytes, p->Height, p->Depth, h, ptds, sync);
}

CUresult scu_copy3d_op(const CUDA_MEMCPY3D *p, scu_op **out) {
  *out = NULL;
  if (!p || p->reserved0 || p->reserved1 || p->srcLOD || p->dstLOD)
    return CUDA_ERROR_INVALID_VALUE;
  OPERANDS_3D(p, d, s);
  bool pageable = false;
  CUresult r =
      build_nd(&d, &s, p->WidthInBytes, p->Height, p->Depth, out, &pageable);
  if (r == CUDA_SUCCESS && pageable) { /* a graph replays pinned memory only */
    scu_op_free(*out);
    *out = NULL;
    r = CUDA_ERROR_INVALID_VALUE;
  }
  return r;
}

/* A context argument of a peer copy: it must be a live context. */
static CUresult peer_ctx(CUcontext c) {
  scu_ctx *x;
  if (!c)
    return CUDA_ERROR_INVALID_CONTEXT;
  CUresult r = scu_ctx_resolve(c, &x);
  if (r == CUDA_SUCCESS)
    scu_ctx_put(x);
  return r;
}

static CUresult copy3d_peer(const CUDA_MEMCPY3D_PEER *p, CUstream h, bool ptds,
                            bool sync) {
  if (!p || p->srcLOD || p->dstLOD)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = peer_ctx(p->dstContext);
  if (r == CUDA_SUCCESS)
    r = peer_ctx(p->srcContext);
  if (r != CUDA_SUCCESS)
    return r;
  OPERANDS_3D(p, d, s);
  return copy_nd(&d, &s, p->WidthInBytes, p->Height, p->Depth, h, ptds, sync);
}

#define COPY_STRUCT(sym, base, fn, type, ptds)                                 \
  CUresult CUDAAPI sym(const type *pCopy) {                                    \
    SCU_API(base);                                                             \
    SCU_RETURN(fn(pCopy, NULL, ptds, true));                                   \
  }
#define COPY_STRUCT_ASYNC(sym, base, fn, type, ptds)                           \
  CUresult CUDAAPI sym(const type *pCopy, CUstream hStream) {                  \
    SCU_API(base);                                                             \
    SCU_RETURN(fn(pCopy, hStream, ptds, false));                               \
  }

COPY_STRUCT(cuMemcpy2D_v2, "cuMemcpy2D", copy2d, CUDA_MEMCPY2D, false)
COPY_STRUCT(cuMemcpy2D_v2_ptds, "cuMemcpy2D", copy2d, CUDA_MEMCPY2D, true)
COPY_STRUCT(cuMemcpy2DUnaligned_v2, "cuMemcpy2DUnaligned", copy2d,
            CUDA_MEMCPY2D, false)
COPY_STRUCT(cuMemcpy2DUnaligned_v2_ptds, "cuMemcpy2DUnaligned", copy2d,
            CUDA_MEMCPY2D, true)
COPY_STRUCT_ASYNC(cuMemcpy2DAsync_v2, "cuMemcpy2DAsync", copy2d, CUDA_MEMCPY2D,
                  false)
COPY_STRUCT_ASYNC(cuMemcpy2DAsync_v2_ptsz, "cuMemcpy2DAsync", copy2d,
                  CUDA_MEMCPY2D, true)
COPY_STRUCT(cuMemcpy3D_v2, "cuMemcpy3D", copy3d, CUDA_MEMCPY3D, false)
COPY_STRUCT(cuMemcpy3D_v2_ptds, "cuMemcpy3D", copy3d, CUDA_MEMCPY3D, true)
COPY_STRUCT_ASYNC(cuMemcpy3DAsync_v2, "cuMemcpy3DAsync", copy3d, CUDA_MEMCPY3D,
                  false)
COPY_STRUCT_ASYNC(cuMemcpy3DAsync_v2_ptsz, "cuMemcpy3DAsync", copy3d,
                  CUDA_MEMCPY3D, true)
COPY_STRUCT(cuMemcpy3DPeer, "cuMemcpy3DPeer", copy3d_peer, CUDA_MEMCPY3D_PEER,
            false)
COPY_STRUCT(cuMemcpy3DPeer_ptds, "cuMemcpy3DPeer", copy3d_peer,
            CUDA_MEMCPY3D_PEER, true)
COPY_STRUCT_ASYNC(cuMemcpy3DPeerAsync, "cuMemcpy3DPeerAsync", copy3d_peer,
                  CUDA_MEMCPY3D_PEER, false)
COPY_STRUCT_ASYNC(cuMemcpy3DPeerAsync_ptsz, "cuMemcpy3DPeerAsync", copy3d_peer,
                  CUDA_MEMCPY3D_PEER, true)

/* ---- peer copies --------------------------------------------------------- */

/* Device memory of one context to device memory of another: with every
 * device in one address space (unified addressing), a device-to-device
 * copy once both contexts are checked. */
static CUresult copy_peer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                          CUcontext sctx, size_t n, CUstream h, bool ptds,
                          bool sync) {
  CUresult r = peer_ctx(dctx);
  if (r == CUDA_SUCCESS)
    r = peer_ctx(sctx);
  return r == CUDA_SUCCESS ? copy1d(dst, src, n, h, ptds, sync, DTOD) : r;
}

CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext,
                              CUdeviceptr srcDevice, CUcontext srcContext,
                              size_t ByteCount) {
  SCU_API("cuMemcpyPeer");
  SCU_RETURN(copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount,
                       NULL, false, true));
}

CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext,
                                   CUdeviceptr srcDevice, CUcontext srcContext,
                                   size_t ByteCount) {
  SCU_API("cuMemcpyPeer");
  SCU_RETURN(copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount,
                       NULL, true, true));
}

CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
                                   CUdeviceptr srcDevice, CUcontext srcContext,
                                   size_t ByteCount, CUstream hStream) {
  SCU_API("cuMemcpyPeerAsync");
  SCU_RETURN(copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount,
                       hStream, false, false));
}

CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice,
                                        CUcontext dstContext,
                                        CUdeviceptr srcDevice,
                                        CUcontext srcContext, size_t ByteCount,
                                        CUstream hStream) {
  SCU_API("cuMemcpyPeerAsync");
  SCU_RETURN(copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount,
                       hStream, true, false));
}

/* ---- batches ---------------------------------------------------------------
 */

/* Batches refuse the legacy NULL stream (0 in the default-stream variant,
 * or CU_STREAM_LEGACY). */
static bool legacy_null(CUstream h, bool ptds) {
  return (!h && !ptds) || h == CU_STREAM_LEGACY;
}

static bool access_order_ok(CUmemcpySrcAccessOrder o) {
  return o == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
         o == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL ||
         o == CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
}

/* After a batch whose sources must be read before the call returns. */
static CUresult finish_batch(CUstream h, bool ptds, bool during_call) {
  if (!during_call)
    return CUDA_SUCCESS;
  scu_stream *s;
  CUresult r = scu_stream_resolve(h, ptds, &s);
  if (r == CUDA_SUCCESS) {
    if (!scu_stream_is_capturing(s))
      r = scu_stream_sync(s);
    scu_stream_put(s);
  }
  return r;
}

static CUresult batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                      size_t count, CUmemcpyAttributes *attrs,
                      size_t *attrs_idxs, size_t nattrs, size_t *fail_idx,
                      CUstream h, bool ptds) {
  if (fail_idx)
    *fail_idx = SIZE_MAX;
  if (!dsts || !srcs || !sizes || !count || !attrs || !attrs_idxs || !nattrs ||
      nattrs > count || attrs_idxs[0] != 0 || legacy_null(h, ptds))
    return CUDA_ERROR_INVALID_VALUE;
  bool during_call = false;
  for (size_t k = 0; k < nattrs; k++) {
    if ((k && attrs_idxs[k] <= attrs_idxs[k - 1]) || attrs_idxs[k] >= count ||
        !access_order_ok(attrs[k].srcAccessOrder))
      return CUDA_ERROR_INVALID_VALUE;
    during_call |=
        attrs[k].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
  }
  for (size_t i = 0; i < count; i++) { /* every operand first */
    scu_span sp;
    CUresult r = scu_mem_check(dsts[i], sizes[i], false, &sp);
    if (r == CUDA_SUCCESS)
      r = scu_mem_check(srcs[i], sizes[i], false, &sp);
    if (r != CUDA_SUCCESS) {
      if (fail_idx)
        *fail_idx = i;
      return r;
    }
  }
  for (size_t i = 0; i < count; i++) {
    CUresult r =
        copy1d_op(dsts[i], srcs[i], sizes[i], h, ptds, false, ANY, i > 0);
    if (r != CUDA_SUCCESS) {
      if (fail_idx)
        *fail_idx = i;
      return r;
    }
  }
  return finish_batch(h, ptds, during_call);
}

/* A pointer operand of a 3D batch copy (elements are bytes). */
static CUresult batch_operand(const CUmemcpy3DOperand *o, const CUextent3D *e,
                              operand *out) {
  if (o->type == CU_MEMCPY_OPERAND_TYPE_ARRAY)
    return CUDA_ERROR_NOT_SUPPORTED; /* no CUDA arrays here */
  if (o->type != CU_MEMCPY_OPERAND_TYPE_POINTER ||
      (o->op.ptr.rowLength && o->op.ptr.rowLength < e->width) ||
      (o->op.ptr.layerHeight && o->op.ptr.layerHeight < e->height))
    return CUDA_ERROR_INVALID_VALUE;
  *out = (operand){CU_MEMORYTYPE_UNIFIED,
                   NULL,
                   o->op.ptr.ptr,
                   NULL,
                   0,
                   0,
                   0,
                   o->op.ptr.rowLength ? o->op.ptr.rowLength : e->width,
                   o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e->height};
  return CUDA_SUCCESS;
}

static CUresult batch3d(size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops,
                        size_t *fail_idx, unsigned long long flags, CUstream h,
                        bool ptds) {
  if (fail_idx)
    *fail_idx = SIZE_MAX;
  if (!nops || !ops || flags || legacy_null(h, ptds))
    return CUDA_ERROR_INVALID_VALUE;
  bool during_call = false;
  for (size_t i = 0; i < nops; i++) {
    const CUDA_MEMCPY3D_BATCH_OP *b = &ops[i];
    operand d, s;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (b->extent.width && b->extent.height && b->extent.depth &&
        access_order_ok(b->srcAccessOrder) &&
        (r = batch_operand(&b->dst, &b->extent, &d)) == CUDA_SUCCESS &&
        (r = batch_operand(&b->src, &b->extent, &s)) == CUDA_SUCCESS)
      r = copy_nd(&d, &s, b->extent.width, b->extent.height, b->extent.depth, h,
                  ptds, false);
    if (r != CUDA_SUCCESS) {
      if (fail_idx)
        *fail_idx = i;
      return r;
    }
    during_call |=
        b->srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
  }
  return finish_batch(h, ptds, during_call);
}

CUresult CUDAAPI cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs,
                                    size_t *sizes, size_t count,
                                    CUmemcpyAttributes *attrs,
                                    size_t *attrsIdxs, size_t numAttrs,
                                    size_t *failIdx, CUstream hStream) {
  SCU_API("cuMemcpyBatchAsync");
  SCU_RETURN(batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs,
                   failIdx, hStream, false));
}

CUresult CUDAAPI cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs,
                                         size_t *sizes, size_t count,
                                         CUmemcpyAttributes *attrs,
                                         size_t *attrsIdxs, size_t numAttrs,
                                         size_t *failIdx, CUstream hStream) {
  SCU_API("cuMemcpyBatchAsync");
  SCU_RETURN(batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs,
                   failIdx, hStream, true));
}

CUresult CUDAAPI cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs,
                                       size_t *sizes, size_t count,
                                       CUmemcpyAttributes *attrs,
                                       size_t *attrsIdxs, size_t numAttrs,
                                       CUstream hStream) {
  SCU_API("cuMemcpyBatchAsync");
  SCU_RETURN(batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL,
                   hStream, false));
}

CUresult CUDAAPI cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts,
                                            CUdeviceptr *srcs, size_t *sizes,
                                            size_t count,
                                            CUmemcpyAttributes *attrs,
                                            size_t *attrsIdxs, size_t numAttrs,
                                            CUstream hStream) {
  SCU_API("cuMemcpyBatchAsync");
  SCU_RETURN(batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL,
                   hStream, true));
}

CUresult CUDAAPI cuMemcpy3DBatchAsync(size_t numOps,
                                      CUDA_MEMCPY3D_BATCH_OP *opList,
                                      size_t *failIdx, unsigned long long flags,
                                      CUstream hStream) {
  SCU_API("cuMemcpy3DBatchAsync");
  SCU_RETURN(batch3d(numOps, opList, failIdx, flags, hStream, false));
}

CUresult CUDAAPI cuMemcpy3DBatchAsync_ptsz(size_t numOps,
                                           CUDA_MEMCPY3D_BATCH_OP *opList,
                                           size_t *failIdx,
                                           unsigned long long flags,
                                           CUstream hStream) {
  SCU_API("cuMemcpy3DBatchAsync");
  SCU_RETURN(batch3d(numOps, opList, failIdx, flags, hStream, true));
}

CUresult CUDAAPI cuMemcpy3DBatchAsync_v2(size_t numOps,
                                         CUDA_MEMCPY3D_BATCH_OP *opList,
                                         unsigned long long flags,
                                         CUstream hStream) {
  SCU_API("cuMemcpy3DBatchAsync");
  SCU_RETURN(batch3d(numOps, opList, NULL, flags, hStream, false));
}

CUresult CUDAAPI cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps,
                                              CUDA_MEMCPY3D_BATCH_OP *opList,
                                              unsigned long long flags,
                                              CUstream hStream) {
  SCU_API("cuMemcpy3DBatchAsync");
  SCU_RETURN(batch3d(numOps, opList, NULL, flags, hStream, true));
}

/* ---- sets ---------------------------------------------------------------- */

/* The operation of a set, its destination checked. */
static CUresult build_set(CUdeviceptr dst, size_t pitch, uint64_t value,
                          unsigned elem, size_t width, size_t height,
                          scu_op **out) {
  if (dst % elem != 0 || (height > 1 && pitch % elem != 0))
    return CUDA_ERROR_INVALID_VALUE;
  if (width > SIZE_MAX / elem)
    return CUDA_ERROR_INVALID_VALUE;
  size_t bytes;
  if (!extent(width * elem, height, 1, pitch, 0, &bytes))
    return CUDA_ERROR_INVALID_VALUE;
  scu_span ds;
  CUresult r = scu_mem_check(dst, bytes, true, &ds);
  if (r == CUDA_SUCCESS && bytes && !dst)
    r = CUDA_ERROR_INVALID_VALUE;
  if (r != CUDA_SUCCESS)
    return r;
  scu_op *op = scu_op_new(bytes ? SCU_OP_SET : SCU_OP_NOP);
  if (!op)
    return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.set.dst = ds.access;
  op->u.set.pitch = pitch;
  op->u.set.width = width;
  op->u.set.height = height;
  op->u.set.value = value;
  op->u.set.elem = elem;
  op->ranges[0] = (scu_range){dst, bytes, true, ds.access};
  op->nranges = 1;
  *out = op;
  return CUDA_SUCCESS;
}

CUresult scu_memset_op(const CUDA_MEMSET_NODE_PARAMS *p, scu_op **out) {
  *out = NULL;
  if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4))
    return CUDA_ERROR_INVALID_VALUE;
  unsigned mask = p->elementSize == 4 ? ~0u : (1u << (8 * p->elementSize)) - 1;
  return build_set(p->dst, p->pitch, p->value & mask, p->elementSize, p->width,
                   p->height, out);
}

static CUresult set2d(CUdeviceptr dst, size_t pitch, unsigned value,
                      unsigned elem, size_t width, size_t height, CUstream h,
                      bool ptds, bool sync) {
  scu_op *op = NULL;
  CUresult r = build_set(dst, pitch, value, elem, width, height, &op);
  if (r == CUDA_SUCCESS)
    r = capture_rules(h, ptds, sync, false);
  if (r != CUDA_SUCCESS) {
    scu_op_free(op);
    return r;
  }
  return enqueue(op, h, ptds, sync);
}

#define SET1D(sym, base, vtype, elem, ptds)                                    \
  CUresult CUDAAPI sym(CUdeviceptr dstDevice, vtype v, size_t N) {             \
    SCU_API(base);                                                             \
    SCU_RETURN(set2d(dstDevice, 0, v, elem, N, 1, NULL, ptds, true));          \
  }
#define SET1D_ASYNC(sym, base, vtype, elem, ptds)                              \
  CUresult CUDAAPI sym(CUdeviceptr dstDevice, vtype v, size_t N,               \
                       CUstream hStream) {                                     \
    SCU_API(base);                                                             \
    SCU_RETURN(set2d(dstDevice, 0, v, elem, N, 1, hStream, ptds, false));      \
  }
#define SET2D(sym, base, vtype, elem, ptds)                                    \
  CUresult CUDAAPI sym(CUdeviceptr dstDevice, size_t dstPitch, vtype v,        \
                       size_t Width, size_t Height) {                          \
    SCU_API(base);                                                             \
    SCU_RETURN(                                                                \
        set2d(dstDevice, dstPitch, v, elem, Width, Height, NULL, ptds, true)); \
  }
#define SET2D_ASYNC(sym, base, vtype, elem, ptds)                              \
  CUresult CUDAAPI sym(CUdeviceptr dstDevice, size_t dstPitch, vtype v,        \
                       size_t Width, size_t Height, CUstream hStream) {        \
    SCU_API(base);                                                             \
    SCU_RETURN(set2d(dstDevice, dstPitch, v, elem, Width, Height, hStream,     \
                     ptds, false));                                            \
  }

SET1D(cuMemsetD8_v2, "cuMemsetD8", unsigned char, 1, false)
SET1D(cuMemsetD8_v2_ptds, "cuMemsetD8", unsigned char, 1, true)
SET1D(cuMemsetD16_v2, "cuMemsetD16", unsigned short, 2, false)
SET1D(cuMemsetD16_v2_ptds, "cuMemsetD16", unsigned short, 2, true)
SET1D(cuMemsetD32_v2, "cuMemsetD32", unsigned int, 4, false)
SET1D(cuMemsetD32_v2_ptds, "cuMemsetD32", unsigned int, 4, true)
SET1D_ASYNC(cuMemsetD8Async, "cuMemsetD8Async", unsigned char, 1, false)
SET1D_ASYNC(cuMemsetD8Async_ptsz, "cuMemsetD8Async", unsigned char, 1, true)
SET1D_ASYNC(cuMemsetD16Async, "cuMemsetD16Async", unsigned short, 2, false)
SET1D_ASYNC(cuMemsetD16Async_ptsz, "cuMemsetD16Async", unsigned short, 2, true)
SET1D_ASYNC(cuMemsetD32Async, "cuMemsetD32Async", unsigned int, 4, false)
SET1D_ASYNC(cuMemsetD32Async_ptsz, "cuMemsetD32Async", unsigned int, 4, true)
SET2D(cuMemsetD2D8_v2, "cuMemsetD2D8", unsigned char, 1, false)
SET2D(cuMemsetD2D8_v2_ptds, "cuMemsetD2D8", unsigned char, 1, true)
SET2D(cuMemsetD2D16_v2, "cuMemsetD2D16", unsigned short, 2, false)
SET2D(cuMemsetD2D16_v2_ptds, "cuMemsetD2D16", unsigned short, 2, true)
SET2D(cuMemsetD2D32_v2, "cuMemsetD2D32", unsigned int, 4, false)
SET2D(cuMemsetD2D32_v2_ptds, "cuMemsetD2D32", unsigned int, 4, true)
SET2D_ASYNC(cuMemsetD2D8Async, "cuMemsetD2D8Async", unsigned char, 1, false)
SET2D_ASYNC(cuMemsetD2D8Async_ptsz, "cuMemsetD2D8Async", unsigned char, 1, true)
SET2D_ASYNC(cuMemsetD2D16Async, "cuMemsetD2D16Async", unsigned short, 2, false)
SET2D_ASYNC(cuMemsetD2D16Async_ptsz, "cuMemsetD2D16Async", unsigned short, 2,
            true)
SET2D_ASYNC(cuMemsetD2D32Async, "cuMemsetD2D32Async", unsigned int, 4, false)
SET2D_ASYNC(cuMemsetD2D32Async_ptsz, "cuMemsetD2D32Async", unsigned int, 4,
            true)

/* ---- stream memory operations: writes of a 32- or 64-bit value ----------- */

/* Queued like an asynchronous 1-element set (device memory or mapped
 * pinned memory, aligned to the value's size). */
static CUresult write_value(CUstream h, CUdeviceptr addr, uint64_t v,
                            unsigned elem, unsigned flags, bool ptds) {
  if (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER || !addr)
    return CUDA_ERROR_INVALID_VALUE;
  scu_op *op = NULL;
  CUresult r = build_set(addr, 0, v, elem, 1, 1, &op);
  if (r == CUDA_SUCCESS)
    r = capture_rules(h, ptds, false, false);
  if (r != CUDA_SUCCESS) {
    scu_op_free(op);
    return r;
  }
  return enqueue(op, h, ptds, false);
}

/* Write operations only (waits, flushes and barriers are not simulated:
 * CUDA_ERROR_NOT_SUPPORTED before anything is queued). */
static CUresult batch_mem_op(CUstream h, unsigned count,
                             CUstreamBatchMemOpParams *ops, unsigned flags,
                             bool ptds) {
  if (!count || !ops || flags)
    return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < count; i++)
    if (ops[i].operation != CU_STREAM_MEM_OP_WRITE_VALUE_32 &&
        ops[i].operation != CU_STREAM_MEM_OP_WRITE_VALUE_64)
      return CUDA_ERROR_NOT_SUPPORTED;
  for (unsigned i = 0; i < count; i++) {
    const struct CUstreamMemOpWriteValueParams_st *w = &ops[i].writeValue;
    bool wide = w->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
    CUresult r = write_value(h, w->address, wide ? w->value64 : w->value,
                             wide ? 8 : 4, w->flags, ptds);
    if (r != CUDA_SUCCESS)
      return r;
  }
  return CUDA_SUCCESS;
}

#define WRITE_VALUE(sym, vtype, elem, ptds)                                    \
  CUresult CUDAAPI sym(CUstream stream, CUdeviceptr addr, vtype value,         \
                       unsigned int flags) {                                   \
    SCU_API(elem == 4 ? "cuStreamWriteValue32" : "cuStreamWriteValue64");      \
    SCU_RETURN(write_value(stream, addr, value, elem, flags, ptds));           \
  }
#define BATCH_MEM_OP(sym, ptds)                                                \
  CUresult CUDAAPI sym(CUstream stream, unsigned int count,                    \
                       CUstreamBatchMemOpParams *paramArray,                   \
                       unsigned int flags) {                                   \
    SCU_API("cuStreamBatchMemOp");                                             \
    SCU_RETURN(batch_mem_op(stream, count, paramArray, flags, ptds));          \
  }

WRITE_VALUE(cuStreamWriteValue32, cuuint32_t, 4, false)
WRITE_VALUE(cuStreamWriteValue32_ptsz, cuuint32_t, 4, true)
WRITE_VALUE(cuStreamWriteValue32_v2, cuuint32_t, 4, false)
WRITE_VALUE(cuStreamWriteValue64, cuuint64_t, 8, false)
WRITE_VALUE(cuStreamWriteValue64_ptsz, cuuint64_t, 8, true)
WRITE_VALUE(cuStreamWriteValue64_v2, cuuint64_t, 8, false)
BATCH_MEM_OP(cuStreamBatchMemOp, false)
BATCH_MEM_OP(cuStreamBatchMemOp_ptsz, true)
BATCH_MEM_OP(cuStreamBatchMemOp_v2, false)
