/* Finding the driver, the way NVIDIA's cudart 13 does.
 *
 *   dlopen("libcuda.so.1", RTLD_NOW)
 *   dlsym(handle, "cuGetProcAddress_v2")            -- the only dlsym
 *   cuGetProcAddress_v2("cuGetProcAddress", 12000, 0) -- cudart resolves the
 *                                                        resolver itself too
 *   cuGetProcAddress(name, version, flags) for every driver_table.def entry
 *
 * The handle is local (no RTLD_GLOBAL; NVIDIA does not document its flags,
 * and local is the stricter choice): the driver's symbols stay out of the
 * global scope, so an interposer that looks them up with RTLD_DEFAULT or
 * RTLD_NEXT instead of its own dlopen(RTLD_NOLOAD) handle fails here.
 *
 * All lookups happen at first use, under pthread_once; no constructor runs
 * CUDA code.  libibp intercepts exactly at this boundary
 * (docs/ARCHITECTURE.md, "Interception"), so nothing here may take a
 * shortcut around it.
 */
#include "cudart_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*get_proc_fn)(const char *symbol, void **pfn, int version,
                                cuuint64_t flags,
                                CUdriverProcAddressQueryResult *status);

struct cudartsim__driver cudartsim__drv;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static cudaError_t load_status = cudaErrorInsufficientDriver;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static cudaError_t init_status = cudaErrorInitializationError;
static int device_count;

void cudartsim__log(const char *fmt, ...) {
  const char *v = getenv("CUDARTSIM_LOG");
  if (!v || !*v || strcmp(v, "0") == 0)
    return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[cudart-sim] %s\n", line);
}

/* One lookup; stores NULL unless the driver reports success. */
static void resolve(get_proc_fn gpa, const char *name, int version,
                    cuuint64_t flags, void *slot) {
  void *fn = NULL;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult r = gpa(name, &fn, version, flags, &status);
  if (r != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS) {
    cudartsim__log("lookup %s ver=%d flags=%llu failed (result %d, status %d)",
                   name, version, (unsigned long long)flags, (int)r,
                   (int)status);
    fn = NULL;
  }
  memcpy(slot, &fn, sizeof fn);
}

static void fill_table(get_proc_fn gpa) {
#define X(slot, pfn, name, version, ptds_version)                              \
  resolve(gpa, name, version, CU_GET_PROC_ADDRESS_DEFAULT,                     \
          &cudartsim__drv.slot[CUDARTSIM_LEGACY]);                             \
  if (ptds_version)                                                            \
    resolve(gpa, name, ptds_version,                                           \
            CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,                     \
            &cudartsim__drv.slot[CUDARTSIM_PTDS]);
#include "driver_table.def"
#undef X
}

static void load(void) {
  void *handle = dlopen("libcuda.so.1", RTLD_NOW);
  if (!handle) {
    cudartsim__log("dlopen(libcuda.so.1): %s", dlerror());
    return;
  }
  get_proc_fn boot = NULL;
  void *sym = dlsym(handle, "cuGetProcAddress_v2");
  memcpy(&boot, &sym, sizeof sym);
  if (!boot) {
    cudartsim__log("libcuda.so.1 has no cuGetProcAddress_v2");
    return;
  }
  get_proc_fn gpa = NULL;
  resolve(boot, "cuGetProcAddress", 12000, CU_GET_PROC_ADDRESS_DEFAULT, &gpa);
  fill_table(gpa ? gpa : boot);
  load_status = cudaSuccess;
}

cudaError_t cudartsim__load_driver(void) {
  pthread_once(&load_once, load);
  return load_status;
}

/* Entry points without which nothing works: missing ones mean the driver is
 * not one this runtime can use. */
static int have_essentials(void) {
  return DRV(Init) && DRV(DriverGetVersion) && DRV(DeviceGet) &&
         DRV(DeviceGetCount) && DRV(DevicePrimaryCtxRetain) &&
         DRV(CtxSetCurrent) && DRV(CtxGetCurrent);
}

static void init(void) {
  cudaError_t e = cudartsim__load_driver();
  if (e == cudaSuccess && !have_essentials())
    e = cudaErrorInsufficientDriver;
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(Init), 0);
  int version = 0;
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(DriverGetVersion), &version);
  if (e == cudaSuccess && version < CUDART_VERSION) {
    cudartsim__log("driver version %d < runtime version %d", version,
                   CUDART_VERSION);
    e = cudaErrorInsufficientDriver;
  }
  int count = 0;
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(DeviceGetCount), &count);
  if (e == cudaSuccess && count <= 0)
    e = cudaErrorNoDevice;
  if (e == cudaSuccess)
    device_count =
        count < CUDARTSIM_MAX_DEVICES ? count : CUDARTSIM_MAX_DEVICES;
  init_status = e;
}

cudaError_t cudartsim__init(void) {
  pthread_once(&init_once, init);
  return init_status;
}

int cudartsim__device_count(void) {
  return device_count;
}
