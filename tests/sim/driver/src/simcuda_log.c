/*
 * Logging (SIMCUDA_LOG), fault injection (SIMCUDA_FAIL), error names and
 * strings, and the bracket every entry point runs in (scu_enter/scu_leave).
 *
 * SIMCUDA_FAIL="entry:nth[:error][,entry:nth[:error]...]" makes the nth call
 * (1-based; "*" = every call) of `entry` -- counted per name across all of
 * its variants, so "cuMemcpyHtoDAsync" counts cuMemcpyHtoDAsync_v2 and
 * cuMemcpyHtoDAsync_v2_ptsz together -- return `error` (a CUresult name such
 * as CUDA_ERROR_INVALID_VALUE, or a number) before it does anything.  The
 * default error is CUDA_ERROR_OUT_OF_MEMORY for allocations and pinning,
 * CUDA_ERROR_UNKNOWN otherwise.  A malformed variable is reported once and
 * ignored.
 */
#include "simcuda_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int scu_trace_on;

static void vlog(const char *fmt, va_list ap) {
  char line[1024];
  int n = snprintf(line, sizeof line, "[simcuda] ");
  vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  fprintf(stderr, "%s\n", line);
}

void scu_log(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

void scu_trace(const char *fmt, ...) {
  if (!scu_trace_on)
    return;
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

/* ---- error names and strings ------------------------------------------- */

typedef struct err_info {
  CUresult code;
  const char *name, *text;
} err_info;

static const err_info errors[] = {
#define SCU_ERR(name, text) {name, #name, text},
#include "simcuda_errors.def"
#undef SCU_ERR
};

static const err_info *find_error(CUresult r) {
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code == r)
      return &errors[i];
  return NULL;
}

const char *scu_error_name(CUresult r) {
  const err_info *e = find_error(r);
  return e ? e->name : "CUDA_ERROR_(unrecognized)";
}

static CUresult parse_error(const char *s) {
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (strcmp(errors[i].name, s) == 0)
      return errors[i].code;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 0);
  if (*s && !*end && !errno && v > 0 && v <= 100000)
    return (CUresult)v;
  return CUDA_SUCCESS;
}

/* ---- fault injection ----------------------------------------------------- */

#define MAX_FAULTS 32

typedef struct fault {
  char name[96];
  unsigned long nth; /* 0: every call */
  CUresult error;    /* CUDA_SUCCESS: the entry's default */
  atomic_ulong calls;
} fault;

static fault faults[MAX_FAULTS];
static int nfaults;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static bool parse_fault(char *item, fault *f) {
  char *c1 = strchr(item, ':');
  if (!c1 || c1 == item || (size_t)(c1 - item) >= sizeof f->name)
    return false;
  memcpy(f->name, item, (size_t)(c1 - item));
  f->name[c1 - item] = 0;
  char *nth = c1 + 1, *c2 = strchr(nth, ':');
  if (c2)
    *c2 = 0;
  if (strcmp(nth, "*") == 0) {
    f->nth = 0;
  } else {
    char *end;
    errno = 0;
    f->nth = strtoul(nth, &end, 10);
    if (!*nth || *end || errno || f->nth == 0 || !isdigit((unsigned char)*nth))
      return false;
  }
  f->error = CUDA_SUCCESS;
  if (c2 && (f->error = parse_error(c2 + 1)) == CUDA_SUCCESS)
    return false;
  return true;
}

static void parse_faults(const char *spec) {
  char *copy = strdup(spec);
  if (!copy)
    return;
  int n = 0;
  bool ok = true;
  for (char *save = NULL, *item = strtok_r(copy, ",", &save); item;
       item = strtok_r(NULL, ",", &save)) {
    if (n == MAX_FAULTS || !parse_fault(item, &faults[n])) {
      scu_log("SIMCUDA_FAIL: cannot use '%s' (want entry:nth[:error], at most "
              "%d items); fault injection is off",
              item, MAX_FAULTS);
      ok = false;
      break;
    }
    n++;
  }
  free(copy);
  nfaults = ok ? n : 0;
}

static void read_env(void) {
  const char *log = getenv("SIMCUDA_LOG");
  scu_trace_on = log && *log && strcmp(log, "0") != 0;
  const char *fail = getenv("SIMCUDA_FAIL");
  if (fail && *fail)
    parse_faults(fail);
}

static CUresult default_fault(const char *base) {
  static const char *const alloc_like[] = {
      "cuMemAlloc",      "cuMemAllocHost",
      "cuMemAllocPitch", "cuMemAllocManaged",
      "cuMemAllocAsync", "cuMemAllocFromPoolAsync",
      "cuMemHostAlloc",  "cuMemHostRegister",
      "cuStreamCreate",  "cuStreamCreateWithPriority",
      "cuEventCreate",   "cuCtxCreate"};
  for (size_t i = 0; i < sizeof alloc_like / sizeof alloc_like[0]; i++)
    if (strcmp(base, alloc_like[i]) == 0)
      return CUDA_ERROR_OUT_OF_MEMORY;
  return CUDA_ERROR_UNKNOWN;
}

static CUresult injected(const char *base, const char *sym) {
  for (int i = 0; i < nfaults; i++) {
    fault *f = &faults[i];
    if (strcmp(f->name, base) != 0)
      continue;
    unsigned long n = atomic_fetch_add(&f->calls, 1) + 1;
    if (f->nth == 0 || n == f->nth) {
      CUresult r = f->error ? f->error : default_fault(base);
      scu_log("SIMCUDA_FAIL: %s (call %lu of %s) returns %s", sym, n, base,
              scu_error_name(r));
      return r;
    }
  }
  return CUDA_SUCCESS;
}

/* ---- the entry bracket -------------------------------------------------- */

CUresult scu_enter(const char *base, const char *sym, bool need_init) {
  pthread_once(&env_once, read_env);
  CUresult r = nfaults ? injected(base, sym) : CUDA_SUCCESS;
  if (r == CUDA_SUCCESS && scu_forked()) {
    scu_log("%s: CUDA was initialized before fork(); the child cannot use it",
            sym);
    r = CUDA_ERROR_NOT_INITIALIZED;
  }
  /* Entry points usable before cuInit (versions, error strings, lookups)
   * are harmless in a callback too. */
  if (r == CUDA_SUCCESS && need_init && scu_tls_worker) {
    scu_log("%s called from a stream callback or host function: not permitted",
            sym);
    r = CUDA_ERROR_NOT_PERMITTED;
  }
  if (r == CUDA_SUCCESS && need_init && !scu_initialized())
    r = CUDA_ERROR_NOT_INITIALIZED;
  if (r != CUDA_SUCCESS)
    scu_trace("%s -> %s", sym, scu_error_name(r));
  return r;
}

CUresult scu_leave(const char *sym, CUresult r) {
  if (scu_trace_on)
    scu_trace("%s -> %s", sym, scu_error_name(r));
  return r;
}

uint64_t scu_parse_size(const char *s) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || errno)
    return 0;
  unsigned shift = 0;
  switch (toupper((unsigned char)*end)) {
  case 0:
    break;
  case 'K':
    shift = 10;
    end++;
    break;
  case 'M':
    shift = 20;
    end++;
    break;
  case 'G':
    shift = 30;
    end++;
    break;
  case 'T':
    shift = 40;
    end++;
    break;
  default:
    return 0;
  }
  if (*end || v > (UINT64_MAX >> shift))
    return 0;
  return (uint64_t)v << shift;
}

/* ---- cuGetErrorName / cuGetErrorString -------------------------------- */

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr) {
  SCU_API_NOINIT("cuGetErrorName");
  const err_info *e = find_error(error);
  if (!pStr)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  *pStr = e ? e->name : NULL;
  SCU_RETURN(e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr) {
  SCU_API_NOINIT("cuGetErrorString");
  const err_info *e = find_error(error);
  if (!pStr)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  *pStr = e ? e->text : NULL;
  SCU_RETURN(e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}
