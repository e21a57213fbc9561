/* Fat binaries, kernel and variable registration, launches.
 *
 * nvcc compiles every .cu with a host stub that registers its fat binary
 * before main, whether or not the program launches a kernel: a constructor
 * calls __cudaRegisterFatBinary, then one __cudaRegisterFunction per
 * __global__ function and one __cudaRegisterVar per __device__ variable,
 * then __cudaRegisterFatBinaryEnd, and registers __cudaUnregisterFatBinary
 * with atexit.  A <<<grid, block>>> launch is __cudaPushCallConfiguration at
 * the call site, then in the kernel's stub __cudaGetKernel (once),
 * __cudaPopCallConfiguration and __cudaLaunchKernel (_ptsz under
 * --default-stream per-thread).  The declarations are the toolkit's
 * crt/host_runtime.h and crt/device_functions.h, which only nvcc's C++
 * compilation sees; they are repeated below.
 *
 * The simulated runtime accepts all of this and keeps the kernels' names,
 * but it runs no program's device code (the SIMT emulator runs only
 * libibp's kernels, built for it): every launch returns
 * cudaErrorNoKernelImageForDevice, recorded as the last error, and the first
 * one in the process says why in one line on stderr.  Registration never
 * touches the driver, so it is safe in constructors.
 *
 * Threading: the registry is a list under one mutex (modules may be
 * dlopen'ed on any thread); the launch configurations are a per-thread
 * stack. */
#include "cudart_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- the declarations nvcc's generated code uses ------------------------ */

CUDARTSIM_API void **__cudaRegisterFatBinary(void *fatCubin);
CUDARTSIM_API void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
CUDARTSIM_API void __cudaUnregisterFatBinary(void **fatCubinHandle);
CUDARTSIM_API void __cudaRegisterFunction(void **fatCubinHandle,
                                          const char *hostFun, char *deviceFun,
                                          const char *deviceName,
                                          int thread_limit, uint3 *tid,
                                          uint3 *bid, dim3 *bDim, dim3 *gDim,
                                          int *wSize);
CUDARTSIM_API void __cudaRegisterVar(void **fatCubinHandle, char *hostVar,
                                     char *deviceAddress,
                                     const char *deviceName, int ext,
                                     size_t size, int constant, int global);
CUDARTSIM_API char __cudaInitModule(void **fatCubinHandle);
CUDARTSIM_API unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim,
                                                   size_t sharedMem,
                                                   struct CUstream_st *stream);
CUDARTSIM_API cudaError_t __cudaPopCallConfiguration(dim3 *gridDim,
                                                     dim3 *blockDim,
                                                     size_t *sharedMem,
                                                     void *stream);
CUDARTSIM_API cudaError_t __cudaGetKernel(cudaKernel_t *kernel,
                                          const void *hostFun);
CUDARTSIM_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim,
                                             dim3 blockDim, void **args,
                                             size_t sharedMem,
                                             cudaStream_t stream);
CUDARTSIM_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel,
                                                  dim3 gridDim, dim3 blockDim,
                                                  void **args, size_t sharedMem,
                                                  cudaStream_t stream);

/* ---- registry ------------------------------------------------------------ */

typedef struct kernel_rec {
  struct kernel_rec *next;
  struct fatbin_rec *owner;
  const void *host_fun; /* the host stub: what cudaLaunchKernel is given */
  const char *name;     /* mangled device name, in the program's image */
} kernel_rec;

/* handle is what the program holds: &rec->handle is its void **. */
typedef struct fatbin_rec {
  void *handle; /* the fat binary wrapper nvcc passed */
  struct fatbin_rec *next;
} fatbin_rec;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static fatbin_rec *fatbins;
static kernel_rec *kernels;

static fatbin_rec *fatbin_of(void **handle) {
  return (fatbin_rec *)(void *)handle; /* handle is the first member */
}

CUDARTSIM_API void **__cudaRegisterFatBinary(void *fatCubin) {
  fatbin_rec *f = calloc(1, sizeof *f);
  if (!f) { /* a static stand-in: registrations into it are dropped */
    static void *no_memory;
    return &no_memory;
  }
  f->handle = fatCubin;
  pthread_mutex_lock(&reg_lock);
  f->next = fatbins;
  fatbins = f;
  pthread_mutex_unlock(&reg_lock);
  return &f->handle;
}

static int is_registered(void **handle) {
  for (fatbin_rec *f = fatbins; f; f = f->next)
    if (&f->handle == handle)
      return 1;
  return 0;
}

CUDARTSIM_API void __cudaRegisterFatBinaryEnd(void **fatCubinHandle) {
  (void)fatCubinHandle; /* nothing is loaded: launches are refused */
}

CUDARTSIM_API void __cudaUnregisterFatBinary(void **fatCubinHandle) {
  pthread_mutex_lock(&reg_lock);
  if (!is_registered(fatCubinHandle)) {
    pthread_mutex_unlock(&reg_lock);
    return;
  }
  fatbin_rec *gone = fatbin_of(fatCubinHandle);
  for (kernel_rec **k = &kernels; *k;) {
    kernel_rec *rec = *k;
    if (rec->owner == gone) {
      *k = rec->next;
      free(rec);
    } else {
      k = &rec->next;
    }
  }
  for (fatbin_rec **f = &fatbins; *f; f = &(*f)->next)
    if (*f == gone) {
      *f = gone->next;
      break;
    }
  pthread_mutex_unlock(&reg_lock);
  free(gone);
}

CUDARTSIM_API void __cudaRegisterFunction(void **fatCubinHandle,
                                          const char *hostFun, char *deviceFun,
                                          const char *deviceName,
                                          int thread_limit, uint3 *tid,
                                          uint3 *bid, dim3 *bDim, dim3 *gDim,
                                          int *wSize) {
  (void)deviceFun, (void)thread_limit, (void)tid, (void)bid, (void)bDim;
  (void)gDim, (void)wSize;
  kernel_rec *k = calloc(1, sizeof *k);
  if (!k)
    return; /* launching it says "invalid device function" */
  k->host_fun = hostFun;
  k->name = deviceName ? deviceName : "(unnamed)";
  pthread_mutex_lock(&reg_lock);
  if (is_registered(fatCubinHandle)) {
    k->owner = fatbin_of(fatCubinHandle);
    k->next = kernels;
    kernels = k;
    k = NULL;
  }
  pthread_mutex_unlock(&reg_lock);
  free(k); /* a handle this runtime did not give out */
}

/* __device__ and __constant__ variables: no device image is loaded, so
 * there is nothing to bind them to (cudaMemcpyToSymbol and friends are not
 * implemented). */
CUDARTSIM_API void __cudaRegisterVar(void **fatCubinHandle, char *hostVar,
                                     char *deviceAddress,
                                     const char *deviceName, int ext,
                                     size_t size, int constant, int global) {
  (void)fatCubinHandle, (void)hostVar, (void)deviceAddress, (void)deviceName;
  (void)ext, (void)size, (void)constant, (void)global;
}

/* The stub's "managed runtime initialized" flag: nonzero, so it asks once. */
CUDARTSIM_API char __cudaInitModule(void **fatCubinHandle) {
  (void)fatCubinHandle;
  return 1;
}

/* The kernel whose host stub is `fun`, or NULL. */
static kernel_rec *kernel_of_stub(const void *fun) {
  kernel_rec *found = NULL;
  pthread_mutex_lock(&reg_lock);
  for (kernel_rec *k = kernels; k && !found; k = k->next)
    if (k->host_fun == fun)
      found = k;
  pthread_mutex_unlock(&reg_lock);
  return found;
}

/* `k` if it is a kernel handle this runtime gave out, else NULL. */
static kernel_rec *kernel_of_handle(cudaKernel_t handle) {
  kernel_rec *found = NULL;
  pthread_mutex_lock(&reg_lock);
  for (kernel_rec *k = kernels; k && !found; k = k->next)
    if ((cudaKernel_t)(void *)k == handle)
      found = k;
  pthread_mutex_unlock(&reg_lock);
  return found;
}

CUDARTSIM_API cudaError_t __cudaGetKernel(cudaKernel_t *kernel,
                                          const void *hostFun) {
  if (!kernel)
    return cudartsim__ret(cudaErrorInvalidValue);
  kernel_rec *k = kernel_of_stub(hostFun);
  *kernel = k ? (cudaKernel_t)(void *)k : NULL;
  return cudartsim__ret(k ? cudaSuccess : cudaErrorInvalidDeviceFunction);
}

/* ---- launch configurations (<<<...>>>) ----------------------------------- */

#define CONFIG_DEPTH 8 /* launches nested in a launch's arguments */

typedef struct launch_config {
  dim3 grid, block;
  size_t shared_mem;
  cudaStream_t stream;
} launch_config;

static _Thread_local launch_config configs[CONFIG_DEPTH];
static _Thread_local int config_count;

CUDARTSIM_API unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim,
                                                   size_t sharedMem,
                                                   struct CUstream_st *stream) {
  if (config_count == CONFIG_DEPTH)
    return 1; /* nonzero: the call site skips the launch */
  configs[config_count++] =
      (launch_config){gridDim, blockDim, sharedMem, (cudaStream_t)stream};
  return 0;
}

CUDARTSIM_API cudaError_t __cudaPopCallConfiguration(dim3 *gridDim,
                                                     dim3 *blockDim,
                                                     size_t *sharedMem,
                                                     void *stream) {
  if (config_count == 0)
    return cudaErrorMissingConfiguration;
  launch_config c = configs[--config_count];
  if (gridDim)
    *gridDim = c.grid;
  if (blockDim)
    *blockDim = c.block;
  if (sharedMem)
    *sharedMem = c.shared_mem;
  if (stream)
    *(cudaStream_t *)stream = c.stream;
  return cudaSuccess;
}

/* ---- launches ------------------------------------------------------------ */

/* Every launch of a known kernel: the runtime cannot run it.  The first one
 * in the process explains, in one line. */
static cudaError_t refuse(const kernel_rec *k) {
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess)
    return e;
  if (!k)
    return cudaErrorInvalidDeviceFunction;
  static int told;
  if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
    fprintf(stderr,
            "[cudart-sim] kernel %s not launched: the simulated GPU runs "
            "only libibp's own kernels, not a program's "
            "(cudaErrorNoKernelImageForDevice; docs/USING.md, \"Running your "
            "own program on the simulated GPU\")\n",
            k->name);
  return cudaErrorNoKernelImageForDevice;
}

CUDARTSIM_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim,
                                             dim3 blockDim, void **args,
                                             size_t sharedMem,
                                             cudaStream_t stream) {
  (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
  return cudartsim__ret(refuse(kernel_of_handle(kernel)));
}

CUDARTSIM_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel,
                                                  dim3 gridDim, dim3 blockDim,
                                                  void **args, size_t sharedMem,
                                                  cudaStream_t stream) {
  return __cudaLaunchKernel(kernel, gridDim, blockDim, args, sharedMem, stream);
}

cudaError_t cudartsim__launch_stub(const void *func) {
  return cudartsim__ret(refuse(kernel_of_stub(func)));
}

CUDARTSIM_API cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim,
                                           dim3 blockDim, void **args,
                                           size_t sharedMem,
                                           cudaStream_t stream) {
  (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
  return cudartsim__launch_stub(func);
}
