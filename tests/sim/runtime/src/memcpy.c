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
 * the pointers are validated by the driver, as in the real runtime. */
#include "cudart_internal.h"

#include <stdint.h>

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
