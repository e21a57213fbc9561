/*
 * cuGetProcAddress_v2 / cuGetProcAddress: answers by name, version and
 * flags from the one table (simcuda_entries.def), and cuGetExportTable.
 *
 * Resolution: among the entries of a name, the one with the highest version
 * <= the requested version; with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_
 * STREAM the per-thread (P) entries are searched first, then the default (D)
 * ones.  No entry of that name: CUDA_ERROR_NOT_FOUND and
 * CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND; only newer ones: CUDA_ERROR_NOT_FOUND
 * and CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT.  *pfn is NULL on failure.
 */
#include "simcuda_proc.h"
#include "simcuda_internal.h"

#include <stdlib.h>
#include <string.h>

static const scu_proc_entry **sorted;
static pthread_once_t sort_once = PTHREAD_ONCE_INIT;

static int by_name(const void *a, const void *b) {
  const scu_proc_entry *x = *(const scu_proc_entry *const *)a;
  const scu_proc_entry *y = *(const scu_proc_entry *const *)b;
  int c = strcmp(x->name, y->name);
  if (c)
    return c;
  if (x->variant != y->variant)
    return x->variant < y->variant ? -1 : 1;
  return (x->version > y->version) - (x->version < y->version);
}

static void sort_table(void) {
  const scu_proc_entry **s = malloc(scu_proc_count * sizeof *s);
  if (!s)
    return; /* lookups fall back to a linear scan */
  for (size_t i = 0; i < scu_proc_count; i++)
    s[i] = &scu_proc_table[i];
  qsort(s, scu_proc_count, sizeof *s, by_name);
  sorted = s;
}

/* Best entry of `name` with the given variant and version <= version;
 * *seen is set when the name exists at all. */
static const scu_proc_entry *best(const char *name, char variant, int version,
                                  bool *seen) {
  const scu_proc_entry *found = NULL;
  if (!sorted) {
    for (size_t i = 0; i < scu_proc_count; i++) {
      const scu_proc_entry *e = &scu_proc_table[i];
      if (strcmp(e->name, name) != 0)
        continue;
      *seen = true;
      if (e->variant == variant && e->version <= version &&
          (!found || e->version > found->version))
        found = e;
    }
    return found;
  }
  size_t lo = 0, hi = scu_proc_count;
  while (lo < hi) { /* first entry >= name */
    size_t mid = lo + (hi - lo) / 2;
    if (strcmp(sorted[mid]->name, name) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (size_t i = lo; i < scu_proc_count && !strcmp(sorted[i]->name, name);
       i++) {
    *seen = true;
    if (sorted[i]->variant == variant && sorted[i]->version <= version)
      found = sorted[i]; /* ascending versions: the last one wins */
  }
  return found;
}

static CUresult lookup(const char *symbol, void **pfn, int version,
                       cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status) {
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult r = CUDA_ERROR_NOT_FOUND;
  const cuuint64_t known = CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                           CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  if (pfn)
    *pfn = NULL;
  if (!symbol || !pfn || (flags & ~known) || flags == known) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else {
    pthread_once(&sort_once, sort_table);
    bool seen = false;
    const scu_proc_entry *e = NULL;
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
      e = best(symbol, 'P', version, &seen);
    if (!e)
      e = best(symbol, 'D', version, &seen);
    if (e) {
      *pfn = (void *)e->fn;
      st = CU_GET_PROC_ADDRESS_SUCCESS;
      r = CUDA_SUCCESS;
    } else if (seen) {
      st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    }
    scu_trace("cuGetProcAddress(\"%s\", %d, %llu) -> %s", symbol, version,
              (unsigned long long)flags, e ? e->symbol : "not found");
  }
  if (status)
    *status = st;
  return r;
}

CUresult CUDAAPI cuGetProcAddress_v2(
    const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
    CUdriverProcAddressQueryResult *symbolStatus) {
  SCU_API_NOINIT("cuGetProcAddress");
  SCU_RETURN(lookup(symbol, pfn, cudaVersion, flags, symbolStatus));
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn,
                                  int cudaVersion, cuuint64_t flags) {
  SCU_API_NOINIT("cuGetProcAddress");
  SCU_RETURN(lookup(symbol, pfn, cudaVersion, flags, NULL));
}

/* NVIDIA's private tables are never reimplemented (docs/ARCHITECTURE.md,
 * "The GPU-less substrate").  Only NVIDIA's own runtime asks for them -- the
 * static cudart nvcc links by default, or NVIDIA's libcudart.so -- and it
 * cannot work without them, so the first request in the process says so,
 * and what to do, in one line on stderr. */
CUresult CUDAAPI cuGetExportTable(const void **ppExportTable,
                                  const CUuuid *pExportTableId) {
  SCU_API_NOINIT("cuGetExportTable");
  (void)pExportTableId;
  if (ppExportTable)
    *ppExportTable = NULL;
  static int told;
  if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
    scu_log("this program uses NVIDIA's CUDA runtime (nvcc's default static "
            "cudart, or NVIDIA's libcudart.so), which needs driver tables "
            "the simulated GPU does not have (cuGetExportTable): rebuild it "
            "with 'nvcc -cudart shared' and run it with the simulated "
            "libcudart.so.13 (ibp run --sim; docs/USING.md, \"Running your "
            "own program on the simulated GPU\")");
  SCU_RETURN(CUDA_ERROR_NOT_SUPPORTED);
}

int scu_stub_called(const char *name, const char *symbol, int *warned) {
  CUresult r = scu_enter(name, symbol, false);
  if (r != CUDA_SUCCESS)
    return (int)r;
  if (!__atomic_exchange_n(warned, 1, __ATOMIC_RELAXED))
    scu_log("%s is not implemented by the simulated driver "
            "(CUDA_ERROR_NOT_SUPPORTED)",
            symbol);
  return (int)scu_leave(symbol, CUDA_ERROR_NOT_SUPPORTED);
}
