/* LD_PRELOAD shim that watches the runtime/driver boundary, the way libibp
 * intercepts it (docs/ARCHITECTURE.md, "Interception"): it hooks dlsym (the
 * real one comes from dlvsym), wraps the cuGetProcAddress_v2 it hands out --
 * also when the runtime looks up "cuGetProcAddress" through it -- and
 * substitutes counting wrappers for the copy and set entry points.  It writes
 * to $RT_BOUNDARY_LOG:
 *
 *   dlsym <library> <symbol>                  every dlsym call on a library
 *                                             handle, and of any cu* name
 *   gpa <name> <version> <flags> <status> <variants>
 *                                             every cuGetProcAddress lookup;
 *                                             <variants>: the driver's exported
 *                                             names whose address was returned
 *   calls <name> <flags> <variants> <count>   at exit, per wrapped (name,
 * flags)
 *
 * check_boundary.sh judges the log.  Test code: it has a destructor and
 * calls dlsym(RTLD_NEXT) on behalf of its callers, which libibp must not. */
#include <cuda.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void *(*dlsym_fn)(void *, const char *);
typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);

static dlsym_fn real_dlsym_ptr;
static gpa_fn real_gpa;
static void *driver_handle;
static int log_fd = -1;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

/* Called from inside the sanitizers' own initialization too (they look up
 * their interceptors' targets with dlsym(RTLD_NEXT)), so this path calls
 * nothing a sanitizer intercepts: no memcpy, no string functions. */
static dlsym_fn real_dlsym(void) {
  if (!real_dlsym_ptr) {
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p)
      p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    *(void **)&real_dlsym_ptr = p;
  }
  return real_dlsym_ptr;
}

static int is_driver_name(const char *s) {
  return s[0] == 'c' && s[1] == 'u' && s[2] >= 'A' && s[2] <= 'Z';
}

static void open_log(void) {
  const char *path = getenv("RT_BOUNDARY_LOG");
  if (path && *path)
    log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

static void log_line(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...) {
  pthread_once(&log_once, open_log);
  if (log_fd < 0)
    return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n > sizeof buf - 2)
    n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  ssize_t w = write(log_fd, buf, (size_t)n);
  (void)w;
}

static const char *library_of(void *handle) {
  if (handle == RTLD_DEFAULT)
    return "RTLD_DEFAULT";
  if (handle == RTLD_NEXT)
    return "RTLD_NEXT";
  struct link_map *lm = NULL;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
    return "?";
  if (!lm->l_name || !*lm->l_name)
    return "main-program";
  const char *slash = strrchr(lm->l_name, '/');
  return slash ? slash + 1 : lm->l_name;
}

/* The driver's exported names (name, name_v2, name_v3, each plain, _ptds or
 * _ptsz) whose address is `p`, joined by '|'; "unexported" if none. */
static void variants_of(const char *name, void *p, char *out, size_t size) {
  static const char *versions[] = {"", "_v2", "_v3"};
  static const char *streams[] = {"", "_ptds", "_ptsz"};
  out[0] = '\0';
  if (!p) {
    snprintf(out, size, "-");
    return;
  }
  for (size_t v = 0; v < 3; v++) {
    for (size_t s = 0; s < 3; s++) {
      char cand[256];
      snprintf(cand, sizeof cand, "%s%s%s", name, versions[v], streams[s]);
      if (driver_handle && real_dlsym()(driver_handle, cand) == p) {
        size_t len = strlen(out);
        snprintf(out + len, size - len, "%s%s", len ? "|" : "", cand);
      }
    }
  }
  if (!out[0])
    snprintf(out, size, "unexported");
}

/* ---- counting wrappers for the copy family
 * ---------------------------------------- */

#define HOOKS(H)                                                               \
  H(MemcpyHtoD, "cuMemcpyHtoD", (CUdeviceptr d, const void *s, size_t n),      \
    (d, s, n))                                                                 \
  H(MemcpyHtoDAsync, "cuMemcpyHtoDAsync",                                      \
    (CUdeviceptr d, const void *s, size_t n, CUstream q), (d, s, n, q))        \
  H(MemcpyDtoH, "cuMemcpyDtoH", (void *d, CUdeviceptr s, size_t n), (d, s, n)) \
  H(MemcpyDtoHAsync, "cuMemcpyDtoHAsync",                                      \
    (void *d, CUdeviceptr s, size_t n, CUstream q), (d, s, n, q))              \
  H(MemcpyDtoD, "cuMemcpyDtoD", (CUdeviceptr d, CUdeviceptr s, size_t n),      \
    (d, s, n))                                                                 \
  H(MemcpyDtoDAsync, "cuMemcpyDtoDAsync",                                      \
    (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream q), (d, s, n, q))        \
  H(Memcpy, "cuMemcpy", (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))   \
  H(MemcpyAsync, "cuMemcpyAsync",                                              \
    (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream q), (d, s, n, q))        \
  H(MemsetD8, "cuMemsetD8", (CUdeviceptr d, unsigned char v, size_t n),        \
    (d, v, n))                                                                 \
  H(MemsetD8Async, "cuMemsetD8Async",                                          \
    (CUdeviceptr d, unsigned char v, size_t n, CUstream q), (d, v, n, q))      \
  H(Memcpy2DUnaligned, "cuMemcpy2DUnaligned", (const CUDA_MEMCPY2D *p), (p))   \
  H(Memcpy2DAsync, "cuMemcpy2DAsync", (const CUDA_MEMCPY2D *p, CUstream q),    \
    (p, q))                                                                    \
  /* the runtime asks for the CUDA 13 form (13000: no failIdx) only */         \
  H(MemcpyBatchAsync, "cuMemcpyBatchAsync",                                    \
    (CUdeviceptr * d, CUdeviceptr * s, size_t * z, size_t n,                   \
     CUmemcpyAttributes * a, size_t * i, size_t na, CUstream q),               \
    (d, s, z, n, a, i, na, q))

#define DEFINE_HOOK(id, str, params, args)                                     \
  static CUresult(*real_##id[2]) params;                                       \
  static atomic_ulong calls_##id[2];                                           \
  static char variant_##id[2][512];                                            \
  static CUresult hook_##id##_0 params {                                       \
    atomic_fetch_add(&calls_##id[0], 1);                                       \
    return real_##id[0] args;                                                  \
  }                                                                            \
  static CUresult hook_##id##_1 params {                                       \
    atomic_fetch_add(&calls_##id[1], 1);                                       \
    return real_##id[1] args;                                                  \
  }
HOOKS(DEFINE_HOOK)

/* Swaps the driver's pointer in *pfn for our wrapper of (name, flags). */
static void substitute(const char *name, cuuint64_t flags, void **pfn,
                       const char *variant) {
  int pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? 1 : 0;
#define SUBSTITUTE(id, str, params, args)                                      \
  if (strcmp(name, str) == 0) {                                                \
    memcpy(&real_##id[pt], pfn, sizeof *pfn);                                  \
    snprintf(variant_##id[pt], sizeof variant_##id[pt], "%s", variant);        \
    CUresult(*hook) params = pt ? hook_##id##_1 : hook_##id##_0;               \
    memcpy(pfn, &hook, sizeof *pfn);                                           \
    return;                                                                    \
  }
  HOOKS(SUBSTITUTE)
#undef SUBSTITUTE
}

static CUresult shim_gpa(const char *symbol, void **pfn, int version,
                         cuuint64_t flags,
                         CUdriverProcAddressQueryResult *status) {
  CUresult r = real_gpa(symbol, pfn, version, flags, status);
  void *p = (r == CUDA_SUCCESS && pfn) ? *pfn : NULL;
  char variants[512];
  variants_of(symbol, p, variants, sizeof variants);
  log_line("gpa %s %d %llu %d %s", symbol, version, (unsigned long long)flags,
           status ? (int)*status : -1, variants);
  if (!p)
    return r;
  if (strcmp(symbol, "cuGetProcAddress") == 0 && version >= 12000) {
    gpa_fn self = shim_gpa;
    memcpy(pfn, &self, sizeof *pfn);
  } else {
    substitute(symbol, flags, pfn, variants);
  }
  return r;
}

void *dlsym(void *handle, const char *symbol) {
  void *p = real_dlsym()(handle, symbol);
  if ((handle == RTLD_NEXT || handle == RTLD_DEFAULT) &&
      !is_driver_name(symbol))
    return p;
  const char *lib = library_of(handle);
  log_line("dlsym %s %s", lib, symbol);
  if (p && strcmp(lib, "libcuda.so.1") == 0 &&
      strcmp(symbol, "cuGetProcAddress_v2") == 0) {
    driver_handle = handle;
    memcpy(&real_gpa, &p, sizeof p);
    gpa_fn self = shim_gpa;
    memcpy(&p, &self, sizeof p);
  }
  return p;
}

__attribute__((destructor)) static void report_calls(void) {
#define REPORT(id, str, params, args)                                          \
  for (int pt = 0; pt < 2; pt++)                                               \
    if (variant_##id[pt][0])                                                   \
      log_line("calls %s %d %s %lu", str, pt ? 2 : 0, variant_##id[pt],        \
               (unsigned long)atomic_load(&calls_##id[pt]));
  HOOKS(REPORT)
#undef REPORT
}
