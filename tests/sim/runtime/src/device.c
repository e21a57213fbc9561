/* Devices, primary contexts, versions, device-wide synchronization and reset.
 *
 * Like cudart, the runtime works in each device's primary context: the first
 * use of a device retains it (cuDevicePrimaryCtxRetain, once per process) and
 * each thread makes it current with cuCtxSetCurrent before its first call on
 * that device.  A context that the application made current itself through
 * the driver API is respected (driver/runtime interoperability). */
#include "cudart_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

struct device_state {
  _Atomic(CUcontext) ctx; /* retained primary context, or NULL */
  atomic_int sticky;      /* sticky cudaError_t, or cudaSuccess */
};

static struct device_state devices[CUDARTSIM_MAX_DEVICES];
static pthread_mutex_t retain_lock = PTHREAD_MUTEX_INITIALIZER;

static _Thread_local int current_device;
static _Thread_local CUcontext
    bound_ctx; /* what this thread last made current */

int cudartsim__current_device(void) {
  return current_device;
}

void cudartsim__set_sticky(int dev, cudaError_t e) {
  if (dev < 0 || dev >= CUDARTSIM_MAX_DEVICES)
    return;
  int expected = cudaSuccess;
  atomic_compare_exchange_strong(&devices[dev].sticky, &expected, (int)e);
}

cudaError_t cudartsim__sticky(int dev) {
  if (dev < 0 || dev >= CUDARTSIM_MAX_DEVICES)
    return cudaSuccess;
  return (cudaError_t)atomic_load(&devices[dev].sticky);
}

static cudaError_t check_device(int dev) {
  cudaError_t e = cudartsim__init();
  if (e != cudaSuccess)
    return e;
  return dev >= 0 && dev < cudartsim__device_count() ? cudaSuccess
                                                     : cudaErrorInvalidDevice;
}

/* The primary context of `dev`, retained on first use. */
static cudaError_t primary_ctx(int dev, CUcontext *out) {
  CUcontext ctx = atomic_load(&devices[dev].ctx);
  cudaError_t e = cudaSuccess;
  if (!ctx) {
    pthread_mutex_lock(&retain_lock);
    ctx = atomic_load(&devices[dev].ctx);
    if (!ctx) {
      CUdevice cu_dev;
      e = CUDARTSIM_CALL(DRV(DeviceGet), &cu_dev, dev);
      if (e == cudaSuccess)
        e = CUDARTSIM_CALL(DRV(DevicePrimaryCtxRetain), &ctx, cu_dev);
      if (e == cudaSuccess)
        atomic_store(&devices[dev].ctx, ctx);
    }
    pthread_mutex_unlock(&retain_lock);
  }
  *out = ctx;
  return e;
}

static cudaError_t make_current(CUcontext ctx) {
  cudaError_t e = CUDARTSIM_CALL(DRV(CtxSetCurrent), ctx);
  if (e == cudaSuccess)
    bound_ctx = ctx;
  return e;
}

cudaError_t cudartsim__enter(void) {
  cudaError_t e = cudartsim__init();
  if (e != cudaSuccess)
    return e;
  int dev = current_device;
  e = cudartsim__sticky(dev);
  if (e != cudaSuccess)
    return e;
  CUcontext primary;
  e = primary_ctx(dev, &primary);
  if (e != cudaSuccess)
    return e;
  CUcontext cur = NULL;
  e = CUDARTSIM_CALL(DRV(CtxGetCurrent), &cur);
  if (e != cudaSuccess)
    return e;
  if (cur == primary) {
    bound_ctx = primary;
    return cudaSuccess;
  }
  /* Someone else's context is current (not one we bound): use it. */
  if (cur != NULL && cur != bound_ctx)
    return cudaSuccess;
  return make_current(primary);
}

CUDARTSIM_API cudaError_t cudaGetDeviceCount(int *count) {
  if (!count)
    return cudartsim__ret(cudaErrorInvalidValue);
  cudaError_t e = cudartsim__init();
  *count = e == cudaSuccess ? cudartsim__device_count() : 0;
  return cudartsim__ret(e);
}

CUDARTSIM_API cudaError_t cudaSetDevice(int device) {
  cudaError_t e = check_device(device);
  if (e != cudaSuccess)
    return cudartsim__ret(e);
  current_device = device;
  CUcontext primary;
  e = primary_ctx(device, &primary);
  if (e == cudaSuccess)
    e = make_current(primary);
  return cudartsim__ret(e);
}

CUDARTSIM_API cudaError_t cudaGetDevice(int *device) {
  if (!device)
    return cudartsim__ret(cudaErrorInvalidValue);
  cudaError_t e = cudartsim__init();
  if (e == cudaSuccess)
    *device = current_device;
  return cudartsim__ret(e);
}

CUDARTSIM_API cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  cudaError_t e = cudartsim__init();
  if (e != cudaSuccess)
    return cudartsim__ret(e);
  CUdevice cu_dev;
  e = CUDARTSIM_CALL(DRV(DeviceGet), &cu_dev, current_device);
  /* cudaDevice* flags have the CU_CTX_* values. */
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(DevicePrimaryCtxSetFlags), cu_dev, flags);
  return cudartsim__ret(e);
}

CUDARTSIM_API cudaError_t cudaGetDeviceFlags(unsigned int *flags) {
  if (!flags)
    return cudartsim__ret(cudaErrorInvalidValue);
  cudaError_t e = cudartsim__enter();
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(CtxGetFlags), flags);
  return cudartsim__ret(e);
}

CUDARTSIM_API cudaError_t cudaDeviceGetAttribute(int *value,
                                                 enum cudaDeviceAttr attr,
                                                 int device) {
  if (!value)
    return cudartsim__ret(cudaErrorInvalidValue);
  cudaError_t e = check_device(device);
  CUdevice cu_dev;
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(DeviceGet), &cu_dev, device);
  /* cudaDeviceAttr and CUdevice_attribute share their values. */
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(DeviceGetAttribute), value, (CUdevice_attribute)attr,
                       cu_dev);
  return cudartsim__ret(e);
}

static int attribute(CUdevice dev, CUdevice_attribute attr) {
  int v = 0;
  if (CUDARTSIM_CALL(DRV(DeviceGetAttribute), &v, attr, dev) != cudaSuccess)
    v = 0;
  return v;
}

/* cudaDeviceProp field <- driver attribute; attributes the driver does not
 * know leave the field 0. */
#define CUDARTSIM_PROP_ATTRIBUTES(P)                                           \
  P(sharedMemPerBlock, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)        \
  P(regsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)                 \
  P(warpSize, CU_DEVICE_ATTRIBUTE_WARP_SIZE)                                   \
  P(memPitch, CU_DEVICE_ATTRIBUTE_MAX_PITCH)                                   \
  P(maxThreadsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)             \
  P(maxThreadsDim[0], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)                     \
  P(maxThreadsDim[1], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)                     \
  P(maxThreadsDim[2], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)                     \
  P(maxGridSize[0], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)                        \
  P(maxGridSize[1], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)                        \
  P(maxGridSize[2], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)                        \
  P(totalConstMem, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY)                  \
  P(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)                       \
  P(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)                       \
  P(textureAlignment, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT)                   \
  P(texturePitchAlignment, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT)        \
  P(multiProcessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)             \
  P(integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED)                                \
  P(canMapHostMemory, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)                 \
  P(surfaceAlignment, CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT)                   \
  P(concurrentKernels, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS)                 \
  P(ECCEnabled, CU_DEVICE_ATTRIBUTE_ECC_ENABLED)                               \
  P(pciBusID, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)                                  \
  P(pciDeviceID, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)                            \
  P(pciDomainID, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)                            \
  P(tccDriver, CU_DEVICE_ATTRIBUTE_TCC_DRIVER)                                 \
  P(asyncEngineCount, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)                  \
  P(unifiedAddressing, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING)                 \
  P(memoryBusWidth, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)               \
  P(l2CacheSize, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)                            \
  P(persistingL2CacheMaxSize,                                                  \
    CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE)                          \
  P(maxThreadsPerMultiProcessor,                                               \
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)                        \
  P(streamPrioritiesSupported,                                                 \
    CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED)                           \
  P(globalL1CacheSupported, CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED)     \
  P(localL1CacheSupported, CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED)       \
  P(sharedMemPerMultiprocessor,                                                \
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)                  \
  P(regsPerMultiprocessor,                                                     \
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)                      \
  P(managedMemory, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)                         \
  P(isMultiGpuBoard, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD)                      \
  P(multiGpuBoardGroupID, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID)        \
  P(hostNativeAtomicSupported,                                                 \
    CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED)                          \
  P(pageableMemoryAccess, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS)          \
  P(concurrentManagedAccess, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS)    \
  P(computePreemptionSupported,                                                \
    CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED)                          \
  P(canUseHostPointerForRegisteredMem,                                         \
    CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM)               \
  P(cooperativeLaunch, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)                 \
  P(sharedMemPerBlockOptin,                                                    \
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)                     \
  P(pageableMemoryAccessUsesHostPageTables,                                    \
    CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES)          \
  P(directManagedMemAccessFromHost,                                            \
    CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST)                   \
  P(maxBlocksPerMultiProcessor,                                                \
    CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)                         \
  P(accessPolicyMaxWindowSize,                                                 \
    CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE)                         \
  P(reservedSharedMemPerBlock,                                                 \
    CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)                      \
  P(hostRegisterSupported, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED)        \
  P(sparseCudaArraySupported, CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED) \
  P(hostRegisterReadOnlySupported,                                             \
    CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED)                     \
  P(timelineSemaphoreInteropSupported,                                         \
    CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED)                  \
  P(memoryPoolsSupported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)          \
  P(gpuDirectRDMASupported, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED)     \
  P(gpuDirectRDMAFlushWritesOptions,                                           \
    CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS)                  \
  P(gpuDirectRDMAWritesOrdering,                                               \
    CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING)                       \
  P(memoryPoolSupportedHandleTypes,                                            \
    CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES)                        \
  P(deferredMappingCudaArraySupported,                                         \
    CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED)                 \
  P(ipcEventSupported, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED)                \
  P(clusterLaunch, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)                         \
  P(unifiedFunctionPointers, CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS)    \
  P(deviceNumaConfig, CU_DEVICE_ATTRIBUTE_NUMA_CONFIG)                         \
  P(deviceNumaId, CU_DEVICE_ATTRIBUTE_NUMA_ID)                                 \
  P(mpsEnabled, CU_DEVICE_ATTRIBUTE_MPS_ENABLED)                               \
  P(hostNumaId, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID)                              \
  P(gpuPciDeviceID, CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID)                     \
  P(gpuPciSubsystemID, CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID)               \
  P(hostNumaMultinodeIpcSupported,                                             \
    CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED)

static cudaError_t fill_properties(struct cudaDeviceProp *prop, CUdevice dev) {
  memset(prop, 0, sizeof *prop);
  cudaError_t e = CUDARTSIM_CALL(DRV(DeviceGetName), prop->name,
                                 (int)sizeof prop->name, dev);
  if (e != cudaSuccess)
    return e;
  e = CUDARTSIM_CALL(DRV(DeviceTotalMem), &prop->totalGlobalMem, dev);
  if (e != cudaSuccess)
    return e;
  CUuuid uuid;
  if (CUDARTSIM_CALL(DRV(DeviceGetUuid), &uuid, dev) == cudaSuccess)
    memcpy(&prop->uuid, &uuid, sizeof prop->uuid);
#define P(field, attr) prop->field = attribute(dev, attr);
  CUDARTSIM_PROP_ATTRIBUTES(P)
#undef P
  return cudaSuccess;
}

CUDARTSIM_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop,
                                                  int device) {
  if (!prop)
    return cudartsim__ret(cudaErrorInvalidValue);
  cudaError_t e = check_device(device);
  CUdevice cu_dev;
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(DeviceGet), &cu_dev, device);
  if (e == cudaSuccess)
    e = fill_properties(prop, cu_dev);
  return cudartsim__ret(e);
}

CUDARTSIM_API cudaError_t cudaDriverGetVersion(int *driverVersion) {
  if (!driverVersion)
    return cudartsim__ret(cudaErrorInvalidValue);
  /* No driver: version 0 and success, as documented. */
  if (cudartsim__load_driver() != cudaSuccess || !DRV(DriverGetVersion)) {
    *driverVersion = 0;
    return cudaSuccess;
  }
  return cudartsim__ret(CUDARTSIM_CALL(DRV(DriverGetVersion), driverVersion));
}

CUDARTSIM_API cudaError_t cudaRuntimeGetVersion(int *runtimeVersion) {
  if (!runtimeVersion)
    return cudartsim__ret(cudaErrorInvalidValue);
  *runtimeVersion = CUDART_VERSION;
  return cudaSuccess;
}

CUDARTSIM_API cudaError_t cudaDeviceSynchronize(void) {
  cudaError_t e = cudartsim__enter();
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(CtxSynchronize));
  return cudartsim__ret(e);
}

CUDARTSIM_API cudaError_t
cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority) {
  cudaError_t e = cudartsim__enter();
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(CtxGetStreamPriorityRange), leastPriority,
                       greatestPriority);
  return cudartsim__ret(e);
}

/* Releases the runtime's reference on the current device's primary context
 * and resets it: every allocation, stream and event of the device is gone,
 * and the sticky error is cleared.  The next call retains a fresh one. */
CUDARTSIM_API cudaError_t cudaDeviceReset(void) {
  cudaError_t e = cudartsim__init();
  if (e != cudaSuccess)
    return cudartsim__ret(e);
  int dev = current_device;
  CUdevice cu_dev;
  e = CUDARTSIM_CALL(DRV(DeviceGet), &cu_dev, dev);
  if (e != cudaSuccess)
    return cudartsim__ret(e);
  pthread_mutex_lock(&retain_lock);
  CUcontext ctx = atomic_exchange(&devices[dev].ctx, (CUcontext)NULL);
  if (ctx) {
    e = CUDARTSIM_CALL(DRV(DevicePrimaryCtxRelease), cu_dev);
    if (e == cudaSuccess)
      e = CUDARTSIM_CALL(DRV(DevicePrimaryCtxReset), cu_dev);
  }
  atomic_store(&devices[dev].sticky, cudaSuccess);
  pthread_mutex_unlock(&retain_lock);
  return cudartsim__ret(e);
}

/* ---- peer access between devices ------------------------------------------
 */

cudaError_t cudartsim__primary_of(int dev, CUcontext *out) {
  cudaError_t e = check_device(dev);
  return e == cudaSuccess ? primary_ctx(dev, out) : e;
}

CUDARTSIM_API cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer,
                                                  int device, int peerDevice) {
  if (!canAccessPeer)
    return cudartsim__ret(cudaErrorInvalidValue);
  cudaError_t e = check_device(device);
  if (e == cudaSuccess)
    e = check_device(peerDevice);
  CUdevice a, b;
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(DeviceGet), &a, device);
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(DeviceGet), &b, peerDevice);
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(DeviceCanAccessPeer), canAccessPeer, a, b);
  return cudartsim__ret(e);
}

/* The current device's context gains (or loses) access to peerDevice's
 * primary context. */
static cudaError_t peer_access(int peer, unsigned flags, int enable) {
  cudaError_t e = cudartsim__enter();
  CUcontext pc = NULL;
  if (e == cudaSuccess && peer == current_device)
    e = cudaErrorInvalidDevice;
  if (e == cudaSuccess)
    e = cudartsim__primary_of(peer, &pc);
  if (e != cudaSuccess)
    return e;
  if (enable)
    return CUDARTSIM_CALL(DRV(CtxEnablePeerAccess), pc, flags);
  return CUDARTSIM_CALL(DRV(CtxDisablePeerAccess), pc);
}

CUDARTSIM_API cudaError_t cudaDeviceEnablePeerAccess(int peerDevice,
                                                     unsigned int flags) {
  return cudartsim__ret(peer_access(peerDevice, flags, 1));
}

CUDARTSIM_API cudaError_t cudaDeviceDisablePeerAccess(int peerDevice) {
  return cudartsim__ret(peer_access(peerDevice, 0, 0));
}
