/* Copies and sets, and their legacy-default-stream exports.
 *
 * Each cudaMemcpyKind goes to the driver entry point NVIDIA's cudart uses for
 * it, so an interposer on the driver sees the same calls it would see under
 * the real runtime:
 *
 *   HostToDevice    cuMemcpyHtoD_v2     / cuMemcpyHtoDAsync_v2
 *   DeviceToHost    cuMemcpyDtoH_v2     / cuMemcpyDtoHAsync_v2
 *   DeviceToDevice  cuMemcpyDtoD_v2     / cuMemcpyDtoDAsync_v2
 *   HostToHost,
 *   Default         cuMemcpy            / cuMemcpyAsync   (unified addressing
 *                                                          classifies both)
 *
 * and in the per-thread builds the _v2_ptds / _v2_ptsz / _ptds / _ptsz
 * variants of the same.  A count of 0 succeeds without reaching the driver;
 * the pointers are validated by the driver, as in the real runtime.
 *
 * 2D copies and batches (the entries cudart 13 looks up for them):
 *
 *   cudaMemcpy2D          cuMemcpy2DUnaligned_v2  (_v2_ptds)
 *   cudaMemcpy2DAsync     cuMemcpy2DAsync_v2      (_v2_ptsz)
 *   cudaMemcpyBatchAsync  cuMemcpyBatchAsync_v2   (_v2_ptsz; CUDA 13, no
 *                                                  failIdx)
 *
 * A 2D copy's kind sets the memory types of its CUDA_MEMCPY2D (Default:
 * CU_MEMORYTYPE_UNIFIED on both sides); a width above either pitch, or a
 * pitch above the device's cudaDevAttrMaxPitch, is cudaErrorInvalidPitchValue
 * before the driver is reached; a zero width or height succeeds without
 * reaching it.  A batch is one driver call, charged once; its attributes are
 * converted to the driver's struct, everything else (zero count, NULL
 * arrays, the legacy NULL stream, attribute indices) is validated by the
 * driver. */
#include "cudart_internal.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

static CUdeviceptr dptr(const void *p) {
  return (CUdeviceptr)(uintptr_t)p;
}

static cudaError_t copy_sync(void *dst, const void *src, size_t n,
                             enum cudaMemcpyKind kind, int pt) {
  switch (kind) {
  case cudaMemcpyHostToDevice:
    return CUDARTSIM_CALL(DRV_PT(MemcpyHtoD, pt), dptr(dst), src, n);
  case cudaMemcpyDeviceToHost:
    return CUDARTSIM_CALL(DRV_PT(MemcpyDtoH, pt), dst, dptr(src), n);
  case cudaMemcpyDeviceToDevice:
    return CUDARTSIM_CALL(DRV_PT(MemcpyDtoD, pt), dptr(dst), dptr(src), n);
  default: /* HostToHost, Default */
    return CUDARTSIM_CALL(DRV_PT(Memcpy, pt), dptr(dst), dptr(src), n);
  }
}

static cudaError_t copy_async(void *dst, const void *src, size_t n,
                              enum cudaMemcpyKind kind, CUstream s, int pt) {
  switch (kind) {
  case cudaMemcpyHostToDevice:
    return CUDARTSIM_CALL(DRV_PT(MemcpyHtoDAsync, pt), dptr(dst), src, n, s);
  case cudaMemcpyDeviceToHost:
    return CUDARTSIM_CALL(DRV_PT(MemcpyDtoHAsync, pt), dst, dptr(src), n, s);
  case cudaMemcpyDeviceToDevice:
    return CUDARTSIM_CALL(DRV_PT(MemcpyDtoDAsync, pt), dptr(dst), dptr(src), n,
                          s);
  default: /* HostToHost, Default */
    return CUDARTSIM_CALL(DRV_PT(MemcpyAsync, pt), dptr(dst), dptr(src), n, s);
  }
}

cudaError_t cudartsim__memcpy(void *dst, const void *src, size_t count,
                              enum cudaMemcpyKind kind, cudaStream_t stream,
                              int async, int pt) {
  if ((unsigned)kind > (unsigned)cudaMemcpyDefault)
    return cudaErrorInvalidMemcpyDirection;
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess || count == 0)
    return e;
  cudartsim__charge_call();
  if (async)
    return copy_async(dst, src, count, kind, (CUstream)stream, pt);
  return copy_sync(dst, src, count, kind, pt);
}

cudaError_t cudartsim__memset(void *dst, int value, size_t count,
                              cudaStream_t stream, int async, int pt) {
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess || count == 0)
    return e;
  cudartsim__charge_call();
  unsigned char byte = (unsigned char)value;
  if (async)
    return CUDARTSIM_CALL(DRV_PT(MemsetD8Async, pt), dptr(dst), byte, count,
                          (CUstream)stream);
  return CUDARTSIM_CALL(DRV_PT(MemsetD8, pt), dptr(dst), byte, count);
}

CUDARTSIM_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                                     enum cudaMemcpyKind kind) {
  return cudartsim__ret(
      cudartsim__memcpy(dst, src, count, kind, 0, 0, CUDARTSIM_LEGACY));
}

CUDARTSIM_API cudaError_t cudaMemcpyAsync(void *dst, const void *src,
                                          size_t count,
                                          enum cudaMemcpyKind kind,
                                          cudaStream_t stream) {
  return cudartsim__ret(
      cudartsim__memcpy(dst, src, count, kind, stream, 1, CUDARTSIM_LEGACY));
}

CUDARTSIM_API cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
  return cudartsim__ret(
      cudartsim__memset(devPtr, value, count, 0, 0, CUDARTSIM_LEGACY));
}

CUDARTSIM_API cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count,
                                          cudaStream_t stream) {
  return cudartsim__ret(
      cudartsim__memset(devPtr, value, count, stream, 1, CUDARTSIM_LEGACY));
}

/* Between devices: cuMemcpyPeer(Async) with both devices' primary
 * contexts, as cudart does. */
static cudaError_t copy_peer(void *dst, int ddev, const void *src, int sdev,
                             size_t count, cudaStream_t stream, int async) {
  cudaError_t e = cudartsim__enter();
  CUcontext dc = NULL, sc = NULL;
  if (e == cudaSuccess)
    e = cudartsim__primary_of(ddev, &dc);
  if (e == cudaSuccess)
    e = cudartsim__primary_of(sdev, &sc);
  if (e != cudaSuccess || count == 0)
    return e;
  cudartsim__charge_call();
  if (async)
    return CUDARTSIM_CALL(DRV(MemcpyPeerAsync), dptr(dst), dc, dptr(src), sc,
                          count, (CUstream)stream);
  return CUDARTSIM_CALL(DRV(MemcpyPeer), dptr(dst), dc, dptr(src), sc, count);
}

CUDARTSIM_API cudaError_t cudaMemcpyPeer(void *dst, int dstDevice,
                                         const void *src, int srcDevice,
                                         size_t count) {
  return cudartsim__ret(copy_peer(dst, dstDevice, src, srcDevice, count, 0, 0));
}

CUDARTSIM_API cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice,
                                              const void *src, int srcDevice,
                                              size_t count,
                                              cudaStream_t stream) {
  return cudartsim__ret(
      copy_peer(dst, dstDevice, src, srcDevice, count, stream, 1));
}

/* ---- 2D copies ------------------------------------------------------------
 */

/* cudaDevAttrMaxPitch of the current device, asked once per device; 0 when
 * the driver does not say. */
static size_t max_pitch(void) {
  static atomic_int cached[CUDARTSIM_MAX_DEVICES];
  int dev = cudartsim__current_device();
  if (dev < 0 || dev >= CUDARTSIM_MAX_DEVICES)
    return 0;
  int v = atomic_load_explicit(&cached[dev], memory_order_relaxed);
  if (v > 0)
    return (size_t)v;
  CUdevice cu_dev;
  if (CUDARTSIM_CALL(DRV(DeviceGet), &cu_dev, dev) != cudaSuccess ||
      CUDARTSIM_CALL(DRV(DeviceGetAttribute), &v, CU_DEVICE_ATTRIBUTE_MAX_PITCH,
                     cu_dev) != cudaSuccess ||
      v <= 0)
    return 0;
  atomic_store_explicit(&cached[dev], v, memory_order_relaxed);
  return (size_t)v;
}

static CUDA_MEMCPY2D params_2d(void *dst, size_t dpitch, const void *src,
                               size_t spitch, size_t width, size_t height,
                               enum cudaMemcpyKind kind) {
  CUmemorytype st = CU_MEMORYTYPE_UNIFIED, dt = CU_MEMORYTYPE_UNIFIED;
  switch (kind) {
  case cudaMemcpyHostToHost:
    st = dt = CU_MEMORYTYPE_HOST;
    break;
  case cudaMemcpyHostToDevice:
    st = CU_MEMORYTYPE_HOST;
    dt = CU_MEMORYTYPE_DEVICE;
    break;
  case cudaMemcpyDeviceToHost:
    st = CU_MEMORYTYPE_DEVICE;
    dt = CU_MEMORYTYPE_HOST;
    break;
  case cudaMemcpyDeviceToDevice:
    st = dt = CU_MEMORYTYPE_DEVICE;
    break;
  default: /* Default: unified addressing classifies both */
    break;
  }
  CUDA_MEMCPY2D p = {0};
  p.srcMemoryType = st;
  if (st == CU_MEMORYTYPE_HOST)
    p.srcHost = src;
  else
    p.srcDevice = dptr(src);
  p.dstMemoryType = dt;
  if (dt == CU_MEMORYTYPE_HOST)
    p.dstHost = dst;
  else
    p.dstDevice = dptr(dst);
  p.srcPitch = spitch;
  p.dstPitch = dpitch;
  p.WidthInBytes = width;
  p.Height = height;
  return p;
}

cudaError_t cudartsim__memcpy_2d(void *dst, size_t dpitch, const void *src,
                                 size_t spitch, size_t width, size_t height,
                                 enum cudaMemcpyKind kind, cudaStream_t stream,
                                 int async, int pt) {
  if ((unsigned)kind > (unsigned)cudaMemcpyDefault)
    return cudaErrorInvalidMemcpyDirection;
  if (width > dpitch || width > spitch)
    return cudaErrorInvalidPitchValue;
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess || width == 0 || height == 0)
    return e;
  size_t limit = max_pitch();
  if (limit && (dpitch > limit || spitch > limit))
    return cudaErrorInvalidPitchValue;
  CUDA_MEMCPY2D p = params_2d(dst, dpitch, src, spitch, width, height, kind);
  cudartsim__charge_call();
  if (async)
    return CUDARTSIM_CALL(DRV_PT(Memcpy2DAsync, pt), &p, (CUstream)stream);
  return CUDARTSIM_CALL(DRV_PT(Memcpy2DUnaligned, pt), &p);
}

CUDARTSIM_API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch,
                                       const void *src, size_t spitch,
                                       size_t width, size_t height,
                                       enum cudaMemcpyKind kind) {
  return cudartsim__ret(cudartsim__memcpy_2d(
      dst, dpitch, src, spitch, width, height, kind, 0, 0, CUDARTSIM_LEGACY));
}

CUDARTSIM_API cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch,
                                            const void *src, size_t spitch,
                                            size_t width, size_t height,
                                            enum cudaMemcpyKind kind,
                                            cudaStream_t stream) {
  return cudartsim__ret(cudartsim__memcpy_2d(dst, dpitch, src, spitch, width,
                                             height, kind, stream, 1,
                                             CUDARTSIM_LEGACY));
}

/* ---- batches --------------------------------------------------------------
 */

/* The pointer arrays go to the driver as they are (void * and CUdeviceptr
 * have one representation here), as cudart passes them. */
_Static_assert(sizeof(void *) == sizeof(CUdeviceptr),
               "a pointer is a CUdeviceptr");

#define BATCH_ATTRS_ON_STACK 8

static CUmemcpyAttributes to_cu_attr(const struct cudaMemcpyAttributes *a) {
  CUmemcpyAttributes c = {0};
  c.srcAccessOrder = (CUmemcpySrcAccessOrder)a->srcAccessOrder;
  c.srcLocHint.type = (CUmemLocationType)a->srcLocHint.type;
  c.srcLocHint.id = a->srcLocHint.id;
  c.dstLocHint.type = (CUmemLocationType)a->dstLocHint.type;
  c.dstLocHint.id = a->dstLocHint.id;
  c.flags = a->flags;
  return c;
}

cudaError_t cudartsim__memcpy_batch(void *const *dsts, const void *const *srcs,
                                    const size_t *sizes, size_t count,
                                    struct cudaMemcpyAttributes *attrs,
                                    size_t *attrs_idxs, size_t num_attrs,
                                    cudaStream_t stream, int pt) {
  /* attrs is read here: it must hold num_attrs (<= count) entries */
  if (num_attrs > count || (num_attrs && !attrs))
    return cudaErrorInvalidValue;
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess)
    return e;
  CUmemcpyAttributes stack[BATCH_ATTRS_ON_STACK], *cu = NULL;
  if (attrs) {
    cu = num_attrs <= BATCH_ATTRS_ON_STACK ? stack
                                           : malloc(num_attrs * sizeof *cu);
    if (!cu)
      return cudaErrorMemoryAllocation;
    for (size_t k = 0; k < num_attrs; k++)
      cu[k] = to_cu_attr(&attrs[k]);
  }
  cudartsim__charge_call();
  e = CUDARTSIM_CALL(DRV_PT(MemcpyBatchAsync, pt),
                     (CUdeviceptr *)(uintptr_t)dsts,
                     (CUdeviceptr *)(uintptr_t)srcs, (size_t *)(uintptr_t)sizes,
                     count, cu, attrs_idxs, num_attrs, (CUstream)stream);
  if (cu != stack)
    free(cu);
  return e;
}

CUDARTSIM_API cudaError_t cudaMemcpyBatchAsync(
    void *const *dsts, const void *const *srcs, const size_t *sizes,
    size_t count, struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
    size_t numAttrs, cudaStream_t stream) {
  return cudartsim__ret(cudartsim__memcpy_batch(dsts, srcs, sizes, count, attrs,
                                                attrsIdxs, numAttrs, stream,
                                                CUDARTSIM_LEGACY));
}
