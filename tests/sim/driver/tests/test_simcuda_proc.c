/*
 * cuGetProcAddress as cudart 13 uses it: every line of the reference
 * (argv[1], shared/reference/cudart13-driver-lookups.txt) resolves as it
 * says; every table entry answers with its exported symbol (dlsym);
 * versions whose signatures differ get different functions; flags 2 gets
 * the _ptds/_ptsz variants; bad lookups fail cleanly.
 */
#include "simcuda_test.h"

typedef struct entry {
  const char *name, *symbol;
  int version;
  char variant;
  int impl;
} entry;

#define T_VARIANT_D 'D'
#define T_VARIANT_P 'P'
#define T_KIND_IMPL 1
#define T_KIND_STUB 0
#define SIM_PROC(name, version, variant, symbol, kind)                         \
  {#name, #symbol, version, T_VARIANT_##variant, T_KIND_##kind},
static const entry table[] = {
#include "simcuda_entries.def"
};
#undef SIM_PROC
#define NTABLE (sizeof table / sizeof table[0])

static const entry *by_address(void *fn) {
  for (size_t i = 0; i < NTABLE; i++)
    if (t_sym(table[i].symbol) == fn)
      return &table[i];
  return NULL;
}

/* Has `name` a per-thread entry at or below `version`? */
static int has_ptds(const char *name, int version) {
  for (size_t i = 0; i < NTABLE; i++)
    if (table[i].variant == 'P' && table[i].version <= version &&
        strcmp(table[i].name, name) == 0)
      return 1;
  return 0;
}

static CUresult lookup(const char *name, int version, unsigned long long flags,
                       void **fn, CUdriverProcAddressQueryResult *st) {
  *fn = (void *)1;
  *st = (CUdriverProcAddressQueryResult)-1;
  return t_gpa(name, fn, version, flags, st);
}

/* Every table row: its own (name, version, variant) gives its symbol. */
static void check_table(void) {
  for (size_t i = 0; i < NTABLE; i++) {
    const entry *e = &table[i];
    void *want = t_sym(e->symbol);
    if (!want) {
      fprintf(stderr, "symbol %s is not exported\n", e->symbol);
      t_failures++;
      continue;
    }
    void *got = t_proc(e->name, e->version, e->variant == 'P' ? 2 : 0);
    if (got != want) {
      fprintf(stderr, "%s %d %c: got %p, want %s\n", e->name, e->version,
              e->variant, got, e->symbol);
      t_failures++;
    }
  }
}

/* Every line of the reference: impl entries resolve to implemented
 * functions, stub entries resolve, NOT_FOUND entries do not. */
static void check_reference(const char *path) {
  FILE *f = fopen(path, "r");
  REQUIRE(f != NULL);
  char line[512];
  int lines = 0, impl = 0;
  while (fgets(line, sizeof line, f)) {
    char name[256], kind[32];
    int version, flags;
    if (sscanf(line, "%255s ver=%d flags=%d %31s", name, &version, &flags,
               kind) != 4)
      continue;
    lines++;
    if (strcmp(name, "\"\"") == 0)
      name[0] = 0;
    void *fn;
    CUdriverProcAddressQueryResult st;
    CUresult r = lookup(name, version, (unsigned)flags, &fn, &st);
    if (strcmp(kind, "NOT_FOUND") == 0) {
      if (r != CUDA_ERROR_NOT_FOUND || fn ||
          st != CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) {
        fprintf(stderr, "'%s' %d %d: should not be found\n", name, version,
                flags);
        t_failures++;
      }
      continue;
    }
    const entry *e = r == CUDA_SUCCESS ? by_address(fn) : NULL;
    if (!e || st != CU_GET_PROC_ADDRESS_SUCCESS) {
      fprintf(stderr, "%s %d %d: not resolved (%d)\n", name, version, flags,
              (int)r);
      t_failures++;
      continue;
    }
    char want = flags == 2 && has_ptds(name, version) ? 'P' : 'D';
    if (strcmp(e->name, name) != 0 || e->variant != want ||
        e->version > version) {
      fprintf(stderr, "%s %d %d: resolved to %s\n", name, version, flags,
              e->symbol);
      t_failures++;
    }
    if (strcmp(kind, "impl") == 0) {
      impl++;
      if (!e->impl) {
        fprintf(stderr, "%s %d %d: the reference says impl, %s is a stub\n",
                name, version, flags, e->symbol);
        t_failures++;
      }
    }
  }
  fclose(f);
  printf("reference: %d lookups, %d impl\n", lines, impl);
  CHECK(lines >= 440);
}

static void check_same(const char *name, int version, unsigned flags,
                       const char *symbol) {
  void *got = t_proc(name, version, flags), *want = t_sym(symbol);
  if (!want || got != want) {
    fprintf(stderr, "%s %d flags %u: want %s (%p), got %p\n", name, version,
            flags, symbol, want, got);
    t_failures++;
  }
}

static void check_versions(void) {
  check_same("cuCtxCreate", 3020, 0, "cuCtxCreate_v2");
  check_same("cuCtxCreate", 11040, 0, "cuCtxCreate_v3");
  check_same("cuCtxCreate", 12050, 0, "cuCtxCreate_v4");
  check_same("cuCtxCreate", 13000, 0, "cuCtxCreate_v4");
  check_same("cuCtxGetDevice", 2000, 0, "cuCtxGetDevice");
  check_same("cuCtxGetDevice", 12090, 0, "cuCtxGetDevice");
  check_same("cuCtxGetDevice", 13000, 0, "cuCtxGetDevice_v2");
  check_same("cuCtxSynchronize", 2000, 0, "cuCtxSynchronize");
  check_same("cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2");
  check_same("cuMemcpyHtoD", 3020, 0, "cuMemcpyHtoD_v2");
  check_same("cuMemcpyHtoD", 13000, 0, "cuMemcpyHtoD_v2");
  check_same("cuStreamGetCaptureInfo", 10010, 0, "cuStreamGetCaptureInfo");
  check_same("cuStreamGetCaptureInfo", 11030, 0, "cuStreamGetCaptureInfo_v2");
  check_same("cuStreamGetCaptureInfo", 12030, 0, "cuStreamGetCaptureInfo_v3");
  check_same("cuStreamGetCaptureInfo", 10010, 2, "cuStreamGetCaptureInfo_ptsz");
  check_same("cuStreamGetCaptureInfo", 11030, 2,
             "cuStreamGetCaptureInfo_v2_ptsz");
  check_same("cuStreamGetCaptureInfo", 12030, 2,
             "cuStreamGetCaptureInfo_v3_ptsz");
  check_same("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
  check_same("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
  check_same("cuEventElapsedTime", 2000, 0, "cuEventElapsedTime");
  check_same("cuEventElapsedTime", 12080, 0, "cuEventElapsedTime_v2");
  check_same("cuDeviceGetUuid", 9020, 0, "cuDeviceGetUuid");
  check_same("cuDeviceGetUuid", 11040, 0, "cuDeviceGetUuid_v2");
  check_same("cuMemHostRegister", 6050, 0, "cuMemHostRegister_v2");
  check_same("cuMemAllocHost", 3020, 0, "cuMemAllocHost_v2");
  check_same("cuMemHostGetDevicePointer", 3020, 0,
             "cuMemHostGetDevicePointer_v2");
  CHECK(t_proc("cuCtxGetDevice", 2000, 0) !=
        t_proc("cuCtxGetDevice", 13000, 0));
  CHECK(t_proc("cuStreamGetCaptureInfo", 10010, 0) !=
        t_proc("cuStreamGetCaptureInfo", 11030, 0));
}

static void check_ptds(void) {
  static const struct {
    const char *name;
    int version;
    const char *legacy, *ptds;
  } v[] = {
      {"cuMemcpyHtoD", 7000, "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds"},
      {"cuMemcpyHtoDAsync", 7000, "cuMemcpyHtoDAsync_v2",
       "cuMemcpyHtoDAsync_v2_ptsz"},
      {"cuMemcpyDtoH", 7000, "cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds"},
      {"cuMemcpyDtoHAsync", 7000, "cuMemcpyDtoHAsync_v2",
       "cuMemcpyDtoHAsync_v2_ptsz"},
      {"cuMemcpyDtoD", 7000, "cuMemcpyDtoD_v2", "cuMemcpyDtoD_v2_ptds"},
      {"cuMemcpy", 7000, "cuMemcpy", "cuMemcpy_ptds"},
      {"cuMemcpyAsync", 7000, "cuMemcpyAsync", "cuMemcpyAsync_ptsz"},
      {"cuMemsetD8", 7000, "cuMemsetD8_v2", "cuMemsetD8_v2_ptds"},
      {"cuLaunchKernel", 7000, "cuLaunchKernel", "cuLaunchKernel_ptsz"},
      {"cuLaunchKernelEx", 11060, "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz"},
      {"cuStreamSynchronize", 7000, "cuStreamSynchronize",
       "cuStreamSynchronize_ptsz"},
      {"cuStreamQuery", 7000, "cuStreamQuery", "cuStreamQuery_ptsz"},
      {"cuStreamWaitEvent", 7000, "cuStreamWaitEvent",
       "cuStreamWaitEvent_ptsz"},
      {"cuEventRecord", 7000, "cuEventRecord", "cuEventRecord_ptsz"},
      {"cuStreamIsCapturing", 10000, "cuStreamIsCapturing",
       "cuStreamIsCapturing_ptsz"},
      {"cuLaunchHostFunc", 10000, "cuLaunchHostFunc", "cuLaunchHostFunc_ptsz"},
      {"cuMemAllocAsync", 11020, "cuMemAllocAsync", "cuMemAllocAsync_ptsz"},
  };
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    check_same(v[i].name, v[i].version, 0, v[i].legacy);
    check_same(v[i].name, v[i].version, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
               v[i].legacy);
    check_same(v[i].name, v[i].version,
               CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, v[i].ptds);
    CHECK(t_sym(v[i].legacy) != t_sym(v[i].ptds));
  }
  /* No per-thread variant: flags 2 gets the one function. */
  check_same("cuInit", 2000, 2, "cuInit");
  check_same("cuMemAlloc", 3020, 2, "cuMemAlloc_v2");
  /* Asked below the per-thread ABI's version: the default variant. */
  check_same("cuMemcpyHtoD", 3020, 2, "cuMemcpyHtoD_v2");
}

static void check_failures(void) {
  void *fn;
  CUdriverProcAddressQueryResult st;
  EXPECT(CUDA_ERROR_NOT_FOUND, lookup("cuNoSuchFunction", 13000, 0, &fn, &st));
  CHECK(fn == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT(CUDA_ERROR_NOT_FOUND, lookup("", 13000, 0, &fn, &st));
  CHECK(fn == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT(CUDA_ERROR_NOT_FOUND, lookup("cuLibraryLoadData", 11080, 0, &fn, &st));
  CHECK(fn == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT(CUDA_ERROR_NOT_FOUND, lookup("cuMemcpyHtoD", 2000, 0, &fn, &st));
  CHECK(fn == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT(CUDA_ERROR_NOT_FOUND, lookup("cuInit", 0, 0, &fn, &st));
  CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT(CUDA_ERROR_INVALID_VALUE, lookup("cuInit", 13000, 4, &fn, &st));
  EXPECT(CUDA_ERROR_INVALID_VALUE, lookup("cuInit", 13000, 3, &fn, &st));
  EXPECT(CUDA_ERROR_INVALID_VALUE, t_gpa(NULL, &fn, 13000, 0, &st));
  EXPECT(CUDA_ERROR_INVALID_VALUE, t_gpa("cuInit", NULL, 13000, 0, &st));
  /* The status pointer is optional. */
  EXPECT(CUDA_SUCCESS, t_gpa("cuInit", &fn, 13000, 0, NULL));
  /* The v11030 ABI has no status. */
  PFN_cuGetProcAddress_v11030 old =
      (PFN_cuGetProcAddress_v11030)t_proc("cuGetProcAddress", 11030, 0);
  REQUIRE(old != NULL);
  EXPECT(CUDA_SUCCESS, old("cuMemAlloc", &fn, 3020, 0));
  CHECK(fn == t_sym("cuMemAlloc_v2"));
  EXPECT(CUDA_ERROR_NOT_FOUND, old("cuNoSuchFunction", &fn, 3020, 0));
}

static void check_calls(void) {
  /* Before cuInit: lookups, versions and error strings work; the rest
   * says CUDA_ERROR_NOT_INITIALIZED. */
  PFN_cuDriverGetVersion_v2020 ver =
      (PFN_cuDriverGetVersion_v2020)t_proc("cuDriverGetVersion", 2020, 0);
  PFN_cuDeviceGetCount_v2000 count =
      (PFN_cuDeviceGetCount_v2000)t_proc("cuDeviceGetCount", 2000, 0);
  PFN_cuInit_v2000 init = (PFN_cuInit_v2000)t_proc("cuInit", 2000, 0);
  PFN_cuGetErrorName_v6000 ename =
      (PFN_cuGetErrorName_v6000)t_proc("cuGetErrorName", 6000, 0);
  PFN_cuGetErrorString_v6000 estr =
      (PFN_cuGetErrorString_v6000)t_proc("cuGetErrorString", 6000, 0);
  REQUIRE(ver && count && init && ename && estr);
  int v = 0, n = 0;
  OK(ver(&v));
  CHECK(v == 13000);
  EXPECT(CUDA_ERROR_NOT_INITIALIZED, count(&n));
  const char *s = NULL;
  OK(ename(CUDA_ERROR_LAUNCH_FAILED, &s));
  CHECK(s && strcmp(s, "CUDA_ERROR_LAUNCH_FAILED") == 0);
  OK(estr(CUDA_ERROR_INVALID_VALUE, &s));
  CHECK(s && strcmp(s, "invalid argument") == 0);
  EXPECT(CUDA_ERROR_INVALID_VALUE, ename((CUresult)12345, &s));
  CHECK(s == NULL);
  EXPECT(CUDA_ERROR_INVALID_VALUE, init(1));
  OK(init(0));
  OK(count(&n));
  CHECK(n == 1);
  /* NVIDIA's private tables are not reimplemented. */
  PFN_cuGetExportTable_v3000 et =
      (PFN_cuGetExportTable_v3000)t_proc("cuGetExportTable", 3000, 0);
  const void *table_ = (const void *)1;
  CUuuid id = {{0}};
  REQUIRE(et != NULL);
  EXPECT(CUDA_ERROR_NOT_SUPPORTED, et(&table_, &id));
  CHECK(table_ == NULL);
  /* A stub resolves and says it is not supported. */
  PFN_cuArrayCreate_v3020 ac =
      (PFN_cuArrayCreate_v3020)t_proc("cuArrayCreate", 3020, 0);
  REQUIRE(ac != NULL);
  CUarray arr;
  CUDA_ARRAY_DESCRIPTOR d = {0};
  EXPECT(CUDA_ERROR_NOT_SUPPORTED, ac(&arr, &d));
}

int main(int argc, char **argv) {
  REQUIRE(argc == 2);
  t_open();
  check_calls();
  check_table();
  check_reference(argv[1]);
  check_versions();
  check_ptds();
  check_failures();
  printf("table: %zu entries\n", NTABLE);
  return t_finish("test_simcuda_proc");
}
