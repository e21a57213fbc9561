/* Device and pinned host memory, registration, pointer attributes.
 *
 * Runtime flags and driver flags share their values here
 * (cudaHostAlloc* = CU_MEMHOSTALLOC_*, cudaHostRegister* =
 * CU_MEMHOSTREGISTER_*), so flags are validated against the runtime's
 * documented set and passed on. */
#include "cudart_internal.h"

#include <stdint.h>

#define HOST_ALLOC_FLAGS                                                       \
  (cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined)
#define HOST_REGISTER_FLAGS                                                    \
  (cudaHostRegisterPortable | cudaHostRegisterMapped |                         \
   cudaHostRegisterIoMemory | cudaHostRegisterReadOnly)

static cudaError_t device_alloc(void **dev_ptr, size_t size) {
  if (!dev_ptr)
    return cudaErrorInvalidValue;
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess)
    return e;
  if (size == 0) {
    *dev_ptr = NULL;
    return cudaSuccess;
  }
  CUdeviceptr p = 0;
  e = CUDARTSIM_CALL(DRV(MemAlloc), &p, size);
  if (e == cudaSuccess)
    *dev_ptr = (void *)(uintptr_t)p;
  return e;
}

CUDARTSIM_API cudaError_t cudaMalloc(void **devPtr, size_t size) {
  return cudartsim__ret(device_alloc(devPtr, size));
}

CUDARTSIM_API cudaError_t cudaFree(void *devPtr) {
  cudaError_t e = cudartsim__enter(); /* cudaFree(0) initializes the context */
  if (e == cudaSuccess && devPtr)
    e = CUDARTSIM_CALL(DRV(MemFree), (CUdeviceptr)(uintptr_t)devPtr);
  return cudartsim__ret(e);
}

CUDARTSIM_API cudaError_t cudaMemGetInfo(size_t *free, size_t *total) {
  if (!free || !total)
    return cudartsim__ret(cudaErrorInvalidValue);
  cudaError_t e = cudartsim__enter();
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(MemGetInfo), free, total);
  return cudartsim__ret(e);
}

static cudaError_t host_alloc(void **host_ptr, size_t size,
                              unsigned int flags) {
  if (!host_ptr || (flags & ~(unsigned)HOST_ALLOC_FLAGS))
    return cudaErrorInvalidValue;
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess)
    return e;
  if (size == 0) {
    *host_ptr = NULL;
    return cudaSuccess;
  }
  return CUDARTSIM_CALL(DRV(MemHostAlloc), host_ptr, size, flags);
}

CUDARTSIM_API cudaError_t cudaMallocHost(void **ptr, size_t size) {
  return cudartsim__ret(host_alloc(ptr, size, cudaHostAllocDefault));
}

CUDARTSIM_API cudaError_t cudaHostAlloc(void **pHost, size_t size,
                                        unsigned int flags) {
  return cudartsim__ret(host_alloc(pHost, size, flags));
}

CUDARTSIM_API cudaError_t cudaFreeHost(void *ptr) {
  cudaError_t e = cudartsim__enter();
  if (e == cudaSuccess && ptr)
    e = CUDARTSIM_CALL(DRV(MemFreeHost), ptr);
  return cudartsim__ret(e);
}

CUDARTSIM_API cudaError_t cudaHostRegister(void *ptr, size_t size,
                                           unsigned int flags) {
  if (!ptr || size == 0 || (flags & ~(unsigned)HOST_REGISTER_FLAGS))
    return cudartsim__ret(cudaErrorInvalidValue);
  cudaError_t e = cudartsim__enter();
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(MemHostRegister), ptr, size, flags);
  return cudartsim__ret(e);
}

CUDARTSIM_API cudaError_t cudaHostUnregister(void *ptr) {
  cudaError_t e = cudartsim__enter();
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(MemHostUnregister), ptr);
  return cudartsim__ret(e);
}

CUDARTSIM_API cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost,
                                                   unsigned int flags) {
  if (!pDevice || flags != 0)
    return cudartsim__ret(cudaErrorInvalidValue);
  cudaError_t e = cudartsim__enter();
  CUdeviceptr d = 0;
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(MemHostGetDevicePointer), &d, pHost, 0);
  if (e == cudaSuccess)
    *pDevice = (void *)(uintptr_t)d;
  return cudartsim__ret(e);
}

CUDARTSIM_API cudaError_t cudaHostGetFlags(unsigned int *pFlags, void *pHost) {
  if (!pFlags)
    return cudartsim__ret(cudaErrorInvalidValue);
  cudaError_t e = cudartsim__enter();
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(MemHostGetFlags), pFlags, pHost);
  return cudartsim__ret(e);
}

static enum cudaMemoryType memory_type(unsigned int cu_type, int managed) {
  if (managed)
    return cudaMemoryTypeManaged;
  switch (cu_type) {
  case CU_MEMORYTYPE_HOST:
    return cudaMemoryTypeHost;
  case CU_MEMORYTYPE_DEVICE:
  case CU_MEMORYTYPE_ARRAY:
    return cudaMemoryTypeDevice;
  default:
    return cudaMemoryTypeUnregistered;
  }
}

/* One cuPointerGetAttributes query, which (unlike cuPointerGetAttribute)
 * succeeds with default values for memory CUDA does not know: such memory
 * reports cudaMemoryTypeUnregistered, as the runtime has since CUDA 11. */
CUDARTSIM_API cudaError_t cudaPointerGetAttributes(
    struct cudaPointerAttributes *attributes, const void *ptr) {
  if (!attributes)
    return cudartsim__ret(cudaErrorInvalidValue);
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess)
    return cudartsim__ret(e);
  unsigned int type = 0;
  int ordinal = -2;
  CUdeviceptr dptr = 0;
  void *hptr = NULL;
  int managed = 0;
  CUpointer_attribute which[] = {
      CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
      CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_HOST_POINTER,
      CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void *data[] = {&type, &ordinal, &dptr, &hptr, &managed};
  e = CUDARTSIM_CALL(DRV(PointerGetAttributes), 5, which, data,
                     (CUdeviceptr)(uintptr_t)ptr);
  if (e != cudaSuccess)
    return cudartsim__ret(e);
  attributes->type = memory_type(type, managed);
  if (attributes->type == cudaMemoryTypeUnregistered) {
    attributes->device = -2;
    attributes->devicePointer = NULL;
    attributes->hostPointer = NULL;
  } else {
    attributes->device = ordinal;
    attributes->devicePointer = (void *)(uintptr_t)dptr;
    attributes->hostPointer = hptr;
  }
  return cudaSuccess;
}
