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

static CUresult copy1d(uintptr_t dst, uintptr_t src, size_t n, CUstream h,
                       bool ptds, bool sync, dir d) {
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
  return enqueue(op, h, ptds, sync || pageable);
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

/* ---- 2D copies --------------------------------------------------------- */

/* One side of a CUDA_MEMCPY2D: its first byte and whether it must be
 * device-accessible. */
static CUresult side(CUmemorytype type, const void *hostp, CUdeviceptr devp,
                     CUarray array, size_t x, size_t y, size_t pitch,
                     uintptr_t *start, bool *device_side) {
  uintptr_t base;
  switch (type) {
  case CU_MEMORYTYPE_HOST:
    base = (uintptr_t)hostp;
    *device_side = false;
    break;
  case CU_MEMORYTYPE_DEVICE:
    base = devp;
    *device_side = true;
    break;
  case CU_MEMORYTYPE_UNIFIED:
    base = devp;
    *device_side = false;
    break;
  case CU_MEMORYTYPE_ARRAY:
    (void)array;
    return CUDA_ERROR_NOT_SUPPORTED; /* no CUDA arrays here */
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!base || (y && pitch > (UINTPTR_MAX - base - x) / y))
    return CUDA_ERROR_INVALID_VALUE;
  *start = base + y * pitch + x;
  return CUDA_SUCCESS;
}

/* Bytes spanned by `height` rows of `width` at `pitch`. */
static bool extent(size_t width, size_t height, size_t pitch, size_t *out) {
  if (height == 0 || width == 0) {
    *out = 0;
    return true;
  }
  if (height > 1 && pitch < width)
    return false;
  if (pitch && height - 1 > (SIZE_MAX - width) / pitch)
    return false;
  *out = (height - 1) * pitch + width;
  return true;
}

static CUresult copy2d(const CUDA_MEMCPY2D *p, CUstream h, bool ptds,
                       bool sync) {
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  uintptr_t dst, src;
  bool ddev, sdev;
  size_t dbytes, sbytes;
  CUresult r = side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray,
                    p->dstXInBytes, p->dstY, p->dstPitch, &dst, &ddev);
  if (r == CUDA_SUCCESS)
    r = side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray,
             p->srcXInBytes, p->srcY, p->srcPitch, &src, &sdev);
  if (r != CUDA_SUCCESS)
    return r;
  if (!extent(p->WidthInBytes, p->Height, p->dstPitch, &dbytes) ||
      !extent(p->WidthInBytes, p->Height, p->srcPitch, &sbytes))
    return CUDA_ERROR_INVALID_VALUE;
  scu_span ds, ss;
  if ((r = scu_mem_check(dst, dbytes, ddev, &ds)) != CUDA_SUCCESS ||
      (r = scu_mem_check(src, sbytes, sdev, &ss)) != CUDA_SUCCESS)
    return r;
  bool pageable = ds.kind == SCU_MEM_PAGEABLE || ss.kind == SCU_MEM_PAGEABLE;
  if ((r = capture_rules(h, ptds, sync, pageable)) != CUDA_SUCCESS)
    return r;
  scu_op *op = scu_op_new(dbytes ? SCU_OP_COPY2D : SCU_OP_NOP);
  if (!op)
    return CUDA_ERROR_OUT_OF_MEMORY;
  op->u.copy2d.dst = ds.access;
  op->u.copy2d.src = ss.access;
  op->link = link_of(&ds, &ss);
  op->u.copy2d.dpitch = p->dstPitch;
  op->u.copy2d.spitch = p->srcPitch;
  op->u.copy2d.width = p->WidthInBytes;
  op->u.copy2d.height = p->Height;
  op->ranges[0] = (scu_range){dst, dbytes, ddev, ds.access};
  op->ranges[1] = (scu_range){src, sbytes, sdev, ss.access};
  op->nranges = 2;
  return enqueue(op, h, ptds, sync || pageable);
}

CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy) {
  SCU_API("cuMemcpy2D");
  SCU_RETURN(copy2d(pCopy, NULL, false, true));
}

CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy) {
  SCU_API("cuMemcpy2D");
  SCU_RETURN(copy2d(pCopy, NULL, true, true));
}

CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy) {
  SCU_API("cuMemcpy2DUnaligned");
  SCU_RETURN(copy2d(pCopy, NULL, false, true));
}

CUresult CUDAAPI cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy) {
  SCU_API("cuMemcpy2DUnaligned");
  SCU_RETURN(copy2d(pCopy, NULL, true, true));
}

CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy,
                                    CUstream hStream) {
  SCU_API("cuMemcpy2DAsync");
  SCU_RETURN(copy2d(pCopy, hStream, false, false));
}

CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy,
                                         CUstream hStream) {
  SCU_API("cuMemcpy2DAsync");
  SCU_RETURN(copy2d(pCopy, hStream, true, false));
}

/* ---- sets ---------------------------------------------------------------- */

static CUresult set2d(CUdeviceptr dst, size_t pitch, unsigned value,
                      unsigned elem, size_t width, size_t height, CUstream h,
                      bool ptds, bool sync) {
  if (dst % elem != 0 || (height > 1 && pitch % elem != 0))
    return CUDA_ERROR_INVALID_VALUE;
  if (width > SIZE_MAX / elem)
    return CUDA_ERROR_INVALID_VALUE;
  size_t bytes;
  if (!extent(width * elem, height, pitch, &bytes))
    return CUDA_ERROR_INVALID_VALUE;
  scu_span ds;
  CUresult r = scu_mem_check(dst, bytes, true, &ds);
  if (r == CUDA_SUCCESS && bytes && !dst)
    r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS)
    r = capture_rules(h, ptds, sync, false);
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
