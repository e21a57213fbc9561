/* Routing the application's driver lookups to our hooks (hooks/hooks.h;
 * docs/ARCHITECTURE.md "Interception").
 *
 * Programs reach the driver in two ways: dlsym on the handle of
 * libcuda.so.1 (cudart 13 does exactly one, for cuGetProcAddress_v2), and
 * cuGetProcAddress lookups by name, version and flags.  Both come through
 * here: the real lookup runs first, and when it returns the driver's own
 * address of a variant listed in hooks.def we return our hook for exactly
 * that variant instead.  Anything else -- unknown names, other ABIs, and
 * cuGetExportTable -- goes back untouched. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "base/base.h"
#include "base/driver.h"
#include "base/libc.h"
#include "hooks/hooks.h"

#define IBP_HOOK(sym, params, args) CUresult(*ibp__real_##sym) params;
#include "hooks/hooks.def"
#undef IBP_HOOK

typedef struct hook_row {
  const char *name;
  void **real; /* &ibp__real_<sym> */
  void *hook;
} hook_row;

static const hook_row hook_rows[] = {
#define IBP_HOOK(sym, params, args)                                            \
  {#sym, (void **)&ibp__real_##sym, (void *)ibp__hook_##sym},
#include "hooks/hooks.def"
#undef IBP_HOOK
};
#define N_HOOKS (sizeof hook_rows / sizeof hook_rows[0])

static pthread_mutex_t bind_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int bound; /* 1 once the driver's addresses are known */

int ibp__hooks_bind(void) {
  if (atomic_load_explicit(&bound, memory_order_acquire))
    return 1;
  void *h = ibp__driver_library();
  if (!h)
    return 0;
  pthread_mutex_lock(&bind_lock);
  if (!atomic_load_explicit(&bound, memory_order_relaxed)) {
    for (size_t i = 0; i < N_HOOKS; i++)
      *hook_rows[i].real = ibp__real_dlsym(h, hook_rows[i].name);
    atomic_store_explicit(&bound, 1, memory_order_release);
  }
  pthread_mutex_unlock(&bind_lock);
  return 1;
}

/* Our hook for the driver's function at `p`, or p itself. */
static void *substitute(void *p) {
  if (!p || !ibp__hooks_bind())
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
