/* The route to the driver (DESIGN.md section 4).
 *
 * Programs reach the driver in two ways: dlsym on the handle of
 * libcuda.so.1 (cudart 13 does exactly one, for cuGetProcAddress_v2), and
 * cuGetProcAddress lookups by name, version and flags.  Both come through
 * here: the real lookup runs first, and when it returns the driver's own
 * address of a variant listed in hooks.def we return our hook for exactly
 * that variant instead.  Anything else -- unknown names, other ABIs, and
 * cuGetExportTable -- goes back untouched.
 *
 * The driver is found with dlopen("libcuda.so.1", RTLD_NOLOAD): whatever the
 * application loaded, never RTLD_NEXT (the driver is linked -Bsymbolic and
 * cudart opens it RTLD_LOCAL, so it is not in the global scope). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "preload.h"

#define IBP_HOOK(sym, params, args) CUresult(*ibp__real_##sym) params;
#include "hooks.def"
#undef IBP_HOOK

typedef struct hook_row {
  const char *name;
  void **real; /* &ibp__real_<sym> */
  void *hook;
} hook_row;

static const hook_row hook_rows[] = {
#define IBP_HOOK(sym, params, args)                                            \
  {#sym, (void **)&ibp__real_##sym, (void *)ibp__hook_##sym},
#include "hooks.def"
#undef IBP_HOOK
};
#define N_HOOKS (sizeof hook_rows / sizeof hook_rows[0])

static pthread_mutex_t bind_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int bound; /* 1 once the driver's addresses are known */
static ibp_driver driver;

/* ---- the driver table ---------------------------------------------------- */

typedef struct driver_row {
  const char *name;
  int version;
  size_t offset;
} driver_row;

#define ROW(field, ver)                                                        \
  { #field, ver, offsetof(ibp_driver, field) }
static const driver_row driver_rows[] = {
    ROW(cuCtxGetCurrent, 4000),
    ROW(cuCtxGetDevice, 2000),
    ROW(cuCtxPushCurrent, 4000),
    ROW(cuCtxPopCurrent, 4000),
    ROW(cuDeviceGetAttribute, 2000),
    ROW(cuMemAlloc, 3020),
    ROW(cuMemFree, 3020),
    ROW(cuMemHostAlloc, 2020),
    ROW(cuMemFreeHost, 2000),
    ROW(cuMemHostGetDevicePointer, 3020),
    ROW(cuMemcpyHtoDAsync, 3020),
    ROW(cuMemcpyDtoHAsync, 3020),
    ROW(cuMemcpyHtoD, 3020),
    ROW(cuMemcpyDtoH, 3020),
    ROW(cuPointerGetAttribute, 4000),
    ROW(cuStreamCreate, 2000),
    ROW(cuStreamDestroy, 4000),
    ROW(cuStreamSynchronize, 2000),
    ROW(cuStreamIsCapturing, 10000),
    ROW(cuThreadExchangeStreamCaptureMode, 10010),
    ROW(cuLibraryLoadData, 12000),
    ROW(cuLibraryGetKernel, 12000),
    ROW(cuKernelGetFunction, 12000),
    ROW(cuModuleLoadData, 2000),
    ROW(cuModuleGetFunction, 2000),
    ROW(cuFuncSetAttribute, 9000),
    ROW(cuEventCreate, 2000),
    ROW(cuEventRecord, 2000),
    ROW(cuEventSynchronize, 2000),
    ROW(cuEventDestroy, 4000),
    ROW(cuCtxSynchronize, 2000),
    ROW(cuLaunchKernel, 4000),
};
#undef ROW

typedef CUresult (*getproc_v2_fn)(const char *, void **, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult *);

static void fill_driver(getproc_v2_fn getproc) {
  for (size_t i = 0; i < sizeof driver_rows / sizeof driver_rows[0]; i++) {
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    if (getproc(driver_rows[i].name, &p, driver_rows[i].version, 0, &st) !=
            CUDA_SUCCESS ||
        st != CU_GET_PROC_ADDRESS_SUCCESS)
      p = NULL;
    memcpy((char *)&driver + driver_rows[i].offset, &p, sizeof p);
  }
}

/* Records the driver's address of every hooked variant and fills the driver
 * table, once the application has loaded libcuda.so.1. */
static int bind_driver(void) {
  if (atomic_load_explicit(&bound, memory_order_acquire))
    return 1;
  pthread_mutex_lock(&bind_lock);
  if (!atomic_load_explicit(&bound, memory_order_relaxed)) {
    void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    void *getproc = h ? ibp__real_dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (getproc) {
      for (size_t i = 0; i < N_HOOKS; i++)
        *hook_rows[i].real = ibp__real_dlsym(h, hook_rows[i].name);
      fill_driver((getproc_v2_fn)getproc);
      atomic_store_explicit(&bound, 1, memory_order_release);
    }
    /* the handle stays open: the driver is never unloaded under us */
  }
  pthread_mutex_unlock(&bind_lock);
  return atomic_load_explicit(&bound, memory_order_acquire);
}

const ibp_driver *ibp__driver(void) {
  return bind_driver() ? &driver : NULL;
}

/* Our hook for the driver's function at `p`, or p itself. */
static void *substitute(void *p) {
  if (!p || !bind_driver())
    return p;
  for (size_t i = 0; i < N_HOOKS; i++)
    if (*hook_rows[i].real == p)
      return hook_rows[i].hook;
  return p;
}

/* ---- dlsym --------------------------------------------------------------- */

/* dlsym(RTLD_NEXT, name) means "the next definition after the object that
 * called dlsym", which glibc finds from its return address -- calling it
 * from a C hook would make that libibp.  So RTLD_NEXT lookups reach the
 * real dlsym by a tail jump that keeps the caller's return address (ASan's
 * runtime resolves its interceptors that way, before it is even
 * initialised: this path runs no instrumented code).  They are never
 * substituted: the driver is not in the global scope, cudart opens it
 * RTLD_LOCAL.  Every other handle goes through ibp__dlsym_hook. */
IBP_HIDDEN void *(*ibp__next_dlsym)(void *, const char *);

IBP_HIDDEN IBP_NO_SANITIZE void *ibp__real_dlsym_address(void) {
  if (!ibp__next_dlsym)
    ibp__next_dlsym = (void *(*)(void *, const char *))ibp__real_dlsym_fn();
  return (void *)ibp__next_dlsym;
}

IBP_HIDDEN IBP_NO_SANITIZE void *ibp__dlsym_hook(void *handle,
                                                 const char *name) {
  void *p = ibp__real_dlsym(handle, name);
  if (p && name[0] == 'c' && name[1] == 'u' && !ibp__guard && ibp__active())
    p = substitute(p);
  return p;
}

#if defined(__x86_64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "  cmpq $-1, %rdi\n" /* RTLD_NEXT */
        "  jne ibp__dlsym_hook\n"
        "  movq ibp__next_dlsym(%rip), %rax\n"
        "  testq %rax, %rax\n"
        "  jnz 1f\n"
        "  pushq %rdi\n"
        "  pushq %rsi\n"
        "  subq $8, %rsp\n" /* 16-byte alignment for the call */
        "  call ibp__real_dlsym_address\n"
        "  addq $8, %rsp\n"
        "  popq %rsi\n"
        "  popq %rdi\n"
        "1:\n"
        "  jmp *%rax\n"
        ".size dlsym, .-dlsym\n");
#else
/* Elsewhere RTLD_NEXT lookups are answered as if made by libibp itself,
 * which is right for every object loaded after it. */
IBP_EXPORT IBP_NO_SANITIZE void *dlsym(void *handle, const char *name) {
  return ibp__dlsym_hook(handle, name);
}
#endif

/* ---- cuGetProcAddress ---------------------------------------------------- */

CUresult ibp__hook_cuGetProcAddress_v2(const char *symbol, void **pfn,
                                       int version, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *status) {
  CUresult r =
      ibp__real_cuGetProcAddress_v2(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS && pfn && !ibp__guard && ibp__active())
    *pfn = substitute(*pfn);
  return r;
}

CUresult ibp__hook_cuGetProcAddress(const char *symbol, void **pfn, int version,
                                    cuuint64_t flags) {
  CUresult r = ibp__real_cuGetProcAddress(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS && pfn && !ibp__guard && ibp__active())
    *pfn = substitute(*pfn);
  return r;
}

void ibp__resolve_after_fork_child(void) {
  pthread_mutex_init(&bind_lock, NULL);
}
