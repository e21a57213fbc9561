/*
 * Initialization and the one simulated device: an sm_90-class GPU (H100-like
 * figures) with 80 GiB of device memory (SIMCUDA_DEVICE_MEM=size to change).
 *
 * cuInit also dlopens the kernel libraries named in SIMCUDA_KERNELS
 * (colon-separated paths): shared objects that register emulated kernels
 * with simt_kernel_register from a constructor, linked against this library
 * for the simt_* functions.  SIMCUDA_NO_DEVICE=1 makes cuInit answer
 * CUDA_ERROR_NO_DEVICE (a machine without a GPU).
 */
#include "simcuda_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

_Thread_local int scu_tls_worker;

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int initialized;
static atomic_int forked_after_init;

SCU_HIDDEN CUresult scu_mem_init(void);
SCU_HIDDEN CUresult scu_ctx_init(void);

bool scu_initialized(void) {
  return atomic_load(&initialized) != 0;
}
bool scu_forked(void) {
  return atomic_load(&forked_after_init) != 0;
}

uint64_t scu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The child of a fork gets no worker threads and inconsistent locks: it may
 * not use what the parent initialized (as with NVIDIA's driver). */
static void atfork_child(void) {
  if (atomic_load(&initialized))
    atomic_store(&forked_after_init, 1);
}

static void load_kernel_libraries(void) {
  const char *env = getenv("SIMCUDA_KERNELS");
  if (!env || !*env)
    return;
  char *copy = strdup(env);
  if (!copy)
    return;
  for (char *save = NULL, *path = strtok_r(copy, ":", &save); path;
       path = strtok_r(NULL, ":", &save)) {
    if (!dlopen(path, RTLD_NOW | RTLD_GLOBAL))
      scu_log("SIMCUDA_KERNELS: cannot load %s: %s", path, dlerror());
    else
      scu_trace("loaded kernel library %s", path);
  }
  free(copy);
}

static int ndevices = 1;

int scu_device_count(void) {
  return ndevices;
}

/* SIMCUDA_DEVICES: 1 .. SCU_MAX_DEVICES; anything else is reported once
 * and means 1. */
static void read_device_count(void) {
  const char *e = getenv("SIMCUDA_DEVICES");
  if (!e || !*e)
    return;
  char *end;
  long n = strtol(e, &end, 10);
  if (*end || n < 1 || n > SCU_MAX_DEVICES)
    scu_log("SIMCUDA_DEVICES=%s: not 1..%d; one device", e, SCU_MAX_DEVICES);
  else
    ndevices = (int)n;
}

static CUresult init_once(void) {
  const char *nodev = getenv("SIMCUDA_NO_DEVICE");
  if (nodev && *nodev && strcmp(nodev, "0") != 0)
    return CUDA_ERROR_NO_DEVICE;
  read_device_count();
  CUresult r = scu_mem_init();
  if (r == CUDA_SUCCESS)
    r = scu_ctx_init();
  if (r != CUDA_SUCCESS)
    return r;
  pthread_atfork(NULL, NULL, atfork_child);
  load_kernel_libraries();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuInit(unsigned int Flags) {
  SCU_API_NOINIT("cuInit");
  if (Flags != 0)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&init_lock);
  if (!atomic_load(&initialized)) {
    r = init_once();
    if (r == CUDA_SUCCESS)
      atomic_store(&initialized, 1);
  }
  pthread_mutex_unlock(&init_lock);
  SCU_RETURN(r);
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion) {
  SCU_API_NOINIT("cuDriverGetVersion");
  if (!driverVersion)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  *driverVersion = SCU_DRIVER_VERSION;
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult scu_check_device(CUdevice dev) {
  return dev >= 0 && dev < ndevices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* ---- device queries ------------------------------------------------------ */

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal) {
  SCU_API("cuDeviceGet");
  if (!device)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  if (scu_check_device(ordinal) != CUDA_SUCCESS)
    SCU_RETURN(CUDA_ERROR_INVALID_DEVICE);
  *device = ordinal;
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGetCount(int *count) {
  SCU_API("cuDeviceGetCount");
  if (!count)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  *count = ndevices;
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev) {
  SCU_API("cuDeviceGetName");
  if (!name || len <= 0)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  CUresult r = scu_check_device(dev);
  if (r == CUDA_SUCCESS)
    snprintf(name, (size_t)len, "%s", SCU_DEVICE_NAME);
  SCU_RETURN(r);
}

static CUresult total_mem(size_t *bytes, CUdevice dev) {
  if (!bytes)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = scu_check_device(dev);
  if (r == CUDA_SUCCESS)
    *bytes = scu_mem_total();
  return r;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  SCU_API("cuDeviceTotalMem");
  SCU_RETURN(total_mem(bytes, dev));
}

CUresult CUDAAPI cuDeviceComputeCapability(int *major, int *minor,
                                           CUdevice dev) {
  SCU_API("cuDeviceComputeCapability");
  if (!major || !minor)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  CUresult r = scu_check_device(dev);
  if (r == CUDA_SUCCESS) {
    *major = 9;
    *minor = 0;
  }
  SCU_RETURN(r);
}

/* cuDeviceGetAttribute: H100 SXM figures where a feature is simulated,
 * 0 where it is not (cooperative and cluster launch, IPC, VMM, ...). */
#define A(name) [CU_DEVICE_ATTRIBUTE_##name]
static const int attributes[CU_DEVICE_ATTRIBUTE_MAX] = {
    A(MAX_THREADS_PER_BLOCK) = 1024,
    A(MAX_BLOCK_DIM_X) = 1024,
    A(MAX_BLOCK_DIM_Y) = 1024,
    A(MAX_BLOCK_DIM_Z) = 64,
    A(MAX_GRID_DIM_X) = 2147483647,
    A(MAX_GRID_DIM_Y) = 65535,
    A(MAX_GRID_DIM_Z) = 65535,
    A(MAX_SHARED_MEMORY_PER_BLOCK) = 49152,
    A(TOTAL_CONSTANT_MEMORY) = 65536,
    A(WARP_SIZE) = 32,
    A(MAX_PITCH) = 2147483647,
    A(MAX_REGISTERS_PER_BLOCK) = 65536,
    A(CLOCK_RATE) = 1980000,
    A(TEXTURE_ALIGNMENT) = 512,
    A(GPU_OVERLAP) = 1,
    A(MULTIPROCESSOR_COUNT) = 132,
    A(KERNEL_EXEC_TIMEOUT) = 0,
    A(INTEGRATED) = 0,
    A(CAN_MAP_HOST_MEMORY) = 1,
    A(COMPUTE_MODE) = CU_COMPUTEMODE_DEFAULT,
    A(MAXIMUM_TEXTURE1D_WIDTH) = 131072,
    A(MAXIMUM_TEXTURE2D_WIDTH) = 131072,
    A(MAXIMUM_TEXTURE2D_HEIGHT) = 65536,
    A(MAXIMUM_TEXTURE3D_WIDTH) = 16384,
    A(MAXIMUM_TEXTURE3D_HEIGHT) = 16384,
    A(MAXIMUM_TEXTURE3D_DEPTH) = 16384,
    A(MAXIMUM_TEXTURE2D_LAYERED_WIDTH) = 32768,
    A(MAXIMUM_TEXTURE2D_LAYERED_HEIGHT) = 32768,
    A(MAXIMUM_TEXTURE2D_LAYERED_LAYERS) = 2048,
    A(SURFACE_ALIGNMENT) = 512,
    A(CONCURRENT_KERNELS) = 1,
    A(ECC_ENABLED) = 1,
    A(PCI_BUS_ID) = SCU_PCI_BUS,
    A(PCI_DEVICE_ID) = SCU_PCI_DEVICE,
    A(TCC_DRIVER) = 0,
    A(MEMORY_CLOCK_RATE) = 2619000,
    A(GLOBAL_MEMORY_BUS_WIDTH) = 5120,
    A(L2_CACHE_SIZE) = 52428800,
    A(MAX_THREADS_PER_MULTIPROCESSOR) = 2048,
    A(ASYNC_ENGINE_COUNT) = 2,
    A(UNIFIED_ADDRESSING) = 1,
    A(MAXIMUM_TEXTURE1D_LAYERED_WIDTH) = 32768,
    A(MAXIMUM_TEXTURE1D_LAYERED_LAYERS) = 2048,
    A(CAN_TEX2D_GATHER) = 1,
    A(MAXIMUM_TEXTURE2D_GATHER_WIDTH) = 32768,
    A(MAXIMUM_TEXTURE2D_GATHER_HEIGHT) = 32768,
    A(MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE) = 8192,
    A(MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE) = 8192,
    A(MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE) = 32768,
    A(PCI_DOMAIN_ID) = SCU_PCI_DOMAIN,
    A(TEXTURE_PITCH_ALIGNMENT) = 32,
    A(MAXIMUM_TEXTURECUBEMAP_WIDTH) = 32768,
    A(MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH) = 32768,
    A(MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS) = 2046,
    A(MAXIMUM_SURFACE1D_WIDTH) = 32768,
    A(MAXIMUM_SURFACE2D_WIDTH) = 131072,
    A(MAXIMUM_SURFACE2D_HEIGHT) = 65536,
    A(MAXIMUM_SURFACE3D_WIDTH) = 16384,
    A(MAXIMUM_SURFACE3D_HEIGHT) = 16384,
    A(MAXIMUM_SURFACE3D_DEPTH) = 16384,
    A(MAXIMUM_SURFACE1D_LAYERED_WIDTH) = 32768,
    A(MAXIMUM_SURFACE1D_LAYERED_LAYERS) = 2048,
    A(MAXIMUM_SURFACE2D_LAYERED_WIDTH) = 32768,
    A(MAXIMUM_SURFACE2D_LAYERED_HEIGHT) = 32768,
    A(MAXIMUM_SURFACE2D_LAYERED_LAYERS) = 2048,
    A(MAXIMUM_SURFACECUBEMAP_WIDTH) = 32768,
    A(MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH) = 32768,
    A(MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS) = 2046,
    A(MAXIMUM_TEXTURE1D_LINEAR_WIDTH) = 268435456,
    A(MAXIMUM_TEXTURE2D_LINEAR_WIDTH) = 131072,
    A(MAXIMUM_TEXTURE2D_LINEAR_HEIGHT) = 65000,
    A(MAXIMUM_TEXTURE2D_LINEAR_PITCH) = 2097120,
    A(MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH) = 32768,
    A(MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT) = 32768,
    A(COMPUTE_CAPABILITY_MAJOR) = 9,
    A(COMPUTE_CAPABILITY_MINOR) = 0,
    A(MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH) = 32768,
    A(STREAM_PRIORITIES_SUPPORTED) = 1,
    A(GLOBAL_L1_CACHE_SUPPORTED) = 1,
    A(LOCAL_L1_CACHE_SUPPORTED) = 1,
    A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR) = 233472,
    A(MAX_REGISTERS_PER_MULTIPROCESSOR) = 65536,
    A(MANAGED_MEMORY) = 1,
    A(MULTI_GPU_BOARD) = 0,
    A(MULTI_GPU_BOARD_GROUP_ID) = 0,
    A(HOST_NATIVE_ATOMIC_SUPPORTED) = 0,
    A(SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO) = 2,
    A(PAGEABLE_MEMORY_ACCESS) = 0,
    A(CONCURRENT_MANAGED_ACCESS) = 1,
    A(COMPUTE_PREEMPTION_SUPPORTED) = 1,
    A(CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM) = 1,
    A(COOPERATIVE_LAUNCH) = 0,
    A(COOPERATIVE_MULTI_DEVICE_LAUNCH) = 0,
    A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN) = SCU_MAX_SHARED_OPTIN,
    A(CAN_FLUSH_REMOTE_WRITES) = 0,
    A(HOST_REGISTER_SUPPORTED) = 1,
    A(PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES) = 0,
    A(DIRECT_MANAGED_MEM_ACCESS_FROM_HOST) = 0,
    A(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) = 0,
    A(MAX_BLOCKS_PER_MULTIPROCESSOR) = 32,
    A(RESERVED_SHARED_MEMORY_PER_BLOCK) = 1024,
    A(READ_ONLY_HOST_REGISTER_SUPPORTED) = 1,
    A(MEMORY_POOLS_SUPPORTED) = 1,
    A(MEM_SYNC_DOMAIN_COUNT) = 1,
    A(NUMA_ID) = -1,
    A(HOST_NUMA_ID) = -1,
    A(GPU_PCI_DEVICE_ID) = 0x233010de,
    A(GPU_PCI_SUBSYSTEM_ID) = 0x16c110de,
};
#undef A

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib,
                                      CUdevice dev) {
  SCU_API("cuDeviceGetAttribute");
  if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  CUresult r = scu_check_device(dev);
  if (r == CUDA_SUCCESS)
    *pi = attributes[attrib];
  SCU_RETURN(r);
}

static const CUuuid device_uuid = {{(char)0x5c, 0x1b, (char)0x90, 0x00, 0x51,
                                    0x4d, 0x43, (char)0xda, (char)0x9a, 0x0b,
                                    0x11, (char)0xb9, 0x00, 0x00, 0x00, 0x01}};

static CUresult get_uuid(CUuuid *uuid, CUdevice dev) {
  if (!uuid)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = scu_check_device(dev);
  if (r == CUDA_SUCCESS) {
    *uuid = device_uuid;
    uuid->bytes[15] = (char)(dev + 1);
  }
  return r;
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
  SCU_API("cuDeviceGetUuid");
  SCU_RETURN(get_uuid(uuid, dev));
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
  SCU_API("cuDeviceGetUuid");
  SCU_RETURN(get_uuid(uuid, dev));
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev) {
  SCU_API("cuDeviceGetPCIBusId");
  if (!pciBusId || len <= 0)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  CUresult r = scu_check_device(dev);
  if (r == CUDA_SUCCESS)
    snprintf(pciBusId, (size_t)len, "%08X:%02X:%02X.0", SCU_PCI_DOMAIN,
             SCU_PCI_BUS + dev, SCU_PCI_DEVICE);
  SCU_RETURN(r);
}

/* Accepts [domain:]bus:device[.function] in hex, as the driver does. */
CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId) {
  SCU_API("cuDeviceGetByPCIBusId");
  if (!dev || !pciBusId)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  unsigned a = 0, b = 0, c = 0, fn = 0;
  unsigned domain, bus, device;
  char tail = 0;
  int n = sscanf(pciBusId, "%x:%x:%x.%x%c", &a, &b, &c, &fn, &tail);
  if (n >= 3 && n <= 4) {
    domain = a, bus = b, device = c;
  } else {
    n = sscanf(pciBusId, "%x:%x.%x%c", &a, &b, &fn, &tail);
    if (n < 2 || n > 3)
      SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
    domain = 0, bus = a, device = b;
  }
  if (domain != SCU_PCI_DOMAIN || bus < SCU_PCI_BUS ||
      scu_check_device((CUdevice)(bus - SCU_PCI_BUS)) != CUDA_SUCCESS ||
      device != SCU_PCI_DEVICE || fn != 0)
    SCU_RETURN(CUDA_ERROR_INVALID_DEVICE);
  *dev = (CUdevice)(bus - SCU_PCI_BUS);
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGetP2PAttribute(int *value,
                                         CUdevice_P2PAttribute attrib,
                                         CUdevice srcDevice,
                                         CUdevice dstDevice) {
  SCU_API("cuDeviceGetP2PAttribute");
  if (!value)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  CUresult r = scu_check_device(srcDevice);
  if (r == CUDA_SUCCESS)
    r = scu_check_device(dstDevice);
  if (r == CUDA_SUCCESS && srcDevice == dstDevice)
    r = CUDA_ERROR_INVALID_DEVICE; /* a device is not its own peer */
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  switch (attrib) { /* every pair is peer-capable over the same switch */
  case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
    *value = 0;
    break;
  case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
    *value = 1;
    break;
  default: /* atomics, CUDA arrays: not simulated */
    *value = 0;
    break;
  }
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev,
                                       CUdevice peerDev) {
  SCU_API("cuDeviceCanAccessPeer");
  if (!canAccessPeer)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  CUresult r = scu_check_device(dev);
  if (r == CUDA_SUCCESS)
    r = scu_check_device(peerDev);
  if (r == CUDA_SUCCESS)
    *canAccessPeer = dev != peerDev;
  SCU_RETURN(r);
}
