/*
 * The driver linked directly, called by cuda.h's names (cuMemcpyHtoD ->
 * cuMemcpyHtoD_v2 ...): the exported symbols are the functions
 * cuGetProcAddress answers with, per-thread builds reach the _ptds/_ptsz
 * exports (test_simcuda_linked_ptds.c), stubs say NOT_SUPPORTED, and stream
 * capture with graph replay behaves as documented in simcuda_capture.c.
 */
#include "sim_test_kernels.h"
#include "simcuda_test.h"

#include <pthread.h>
#include <stdint.h>

/* test_simcuda_linked_ptds.c, built with CUDA_API_PER_THREAD_DEFAULT_STREAM */
void *ptds_address(const char *which);

#define R(call) OK(call)

static void check_symbols(void) {
  void *self = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(self != NULL);
  t_handle = self;
  t_gpa = (PFN_cuGetProcAddress_v12000)dlsym(self, "cuGetProcAddress_v2");
  REQUIRE(t_gpa == cuGetProcAddress);
  CHECK((void *)cuMemcpyHtoD == t_proc("cuMemcpyHtoD", 3020, 0));
  CHECK((void *)cuMemcpyHtoDAsync == t_proc("cuMemcpyHtoDAsync", 3020, 0));
  CHECK((void *)cuMemAlloc == t_proc("cuMemAlloc", 3020, 0));
  CHECK((void *)cuMemHostRegister == t_proc("cuMemHostRegister", 6050, 0));
  CHECK((void *)cuMemHostGetDevicePointer ==
        t_proc("cuMemHostGetDevicePointer", 3020, 0));
  CHECK((void *)cuStreamGetCaptureInfo ==
        t_proc("cuStreamGetCaptureInfo", 12030, 0));
  CHECK((void *)cuCtxCreate == t_proc("cuCtxCreate", 12050, 0));
  CHECK((void *)cuEventElapsedTime == t_proc("cuEventElapsedTime", 12080, 0));
  CHECK((void *)cuLibraryLoadData == t_proc("cuLibraryLoadData", 12000, 0));
  static const struct {
    const char *which, *name;
    int version;
  } ptds[] = {
      {"cuMemcpyHtoD", "cuMemcpyHtoD", 7000},
      {"cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync", 7000},
      {"cuMemcpy", "cuMemcpy", 7000},
      {"cuMemcpyAsync", "cuMemcpyAsync", 7000},
      {"cuLaunchKernel", "cuLaunchKernel", 7000},
      {"cuStreamSynchronize", "cuStreamSynchronize", 7000},
      {"cuStreamGetCaptureInfo", "cuStreamGetCaptureInfo", 12030},
      {"cuStreamBeginCapture", "cuStreamBeginCapture", 10010},
  };
  for (size_t i = 0; i < sizeof ptds / sizeof ptds[0]; i++) {
    void *want = t_proc(ptds[i].name, ptds[i].version,
                        CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    if (!want || ptds_address(ptds[i].which) != want) {
      fprintf(stderr, "per-thread %s: %p vs %p\n", ptds[i].which,
              ptds_address(ptds[i].which), want);
      t_failures++;
    }
  }
  dlclose(self);
}

static void check_stub(void) {
  CUarray arr;
  CUDA_ARRAY_DESCRIPTOR d = {0};
  EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuArrayCreate(&arr, &d));
}

typedef struct end_args {
  CUstream s;
  CUresult r;
} end_args;

static void *end_elsewhere(void *p) {
  end_args *e = p;
  CUgraph g;
  e->r = cuStreamEndCapture(e->s, &g);
  return NULL;
}

static void CUDA_CB count_up(void *p) {
  (*(int *)p)++;
}

static void check_capture(CUfunction fill) {
  enum { N = 1024 };
  CUstream s;
  R(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr d;
  R(cuMemAlloc(&d, N * 4));
  R(cuMemsetD32(d, 0, N));
  uint32_t *pinned, *pageable = calloc(N, 4);
  R(cuMemHostAlloc((void **)&pinned, N * 4, 0));
  for (uint32_t i = 0; i < N; i++)
    pinned[i] = i * 3;
  int calls = 0;

  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  R(cuStreamIsCapturing(s, &st));
  CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
  EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
         cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUgraph g = NULL;
  EXPECT(CUDA_ERROR_ILLEGAL_STATE, cuStreamEndCapture(s, &g));

  /* A capture that an unsafe call invalidates. */
  R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT(CUDA_ERROR_ILLEGAL_STATE,
         cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr tmp;
  EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuMemAlloc(&tmp, 64));
  R(cuStreamIsCapturing(s, &st));
  CHECK(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(s, &g));
  CHECK(g == NULL);
  R(cuStreamIsCapturing(s, &st));
  CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);

  /* What cannot be captured. */
  CUevent ev;
  R(cuEventCreate(&ev, 0));
  R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuEventRecord(ev, s));
  EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(s, &g));
  R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
         cuMemcpyHtoDAsync(d, pageable, 64, s));
  EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(s, &g));
  R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamSynchronize(s));
  EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(s, &g));
  R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  end_args ea = {s, CUDA_SUCCESS};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, end_elsewhere, &ea) == 0);
  pthread_join(t, NULL);
  CHECK(ea.r == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
  EXPECT(CUDA_SUCCESS, cuStreamEndCapture(s, &g));
  R(cuGraphDestroy(g));
  R(cuEventDestroy(ev));

  /* A good capture: nothing runs until the graph is launched. */
  R(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  cuuint64_t id = 0;
  CUgraph cg = NULL;
  const CUgraphNode *deps = (const CUgraphNode *)1;
  const CUgraphEdgeData *edges = (const CUgraphEdgeData *)1;
  size_t ndeps = 9;
  R(cuStreamGetCaptureInfo(s, &st, &id, &cg, &deps, &edges, &ndeps));
  CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id != 0 && cg != NULL);
  CHECK(deps == NULL && edges == NULL && ndeps == 0);
  /* Relaxed mode lets this thread allocate during a global capture. */
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  R(cuThreadExchangeStreamCaptureMode(&mode));
  CHECK(mode == CU_STREAM_CAPTURE_MODE_GLOBAL);
  R(cuMemAlloc(&tmp, 64));
  R(cuMemFree(tmp));
  R(cuThreadExchangeStreamCaptureMode(&mode));
  R(cuMemsetD32Async(d, 7, N, s));
  R(cuMemcpyHtoDAsync(d, pinned, N * 2, s));
  sim_fill_args a = {(uint32_t *)(uintptr_t)(d + N * 2), 1000, N / 2};
  void *params[] = {&a};
  R(cuLaunchKernel(fill, 2, 1, 1, 128, 1, 1, 0, s, params, NULL));
  R(cuLaunchHostFunc(s, count_up, &calls));
  R(cuStreamEndCapture(s, &g));
  CHECK(g == cg);
  R(cuStreamSynchronize(s));
  CHECK(((uint32_t *)(uintptr_t)d)[1] == 0 && calls == 0);

  CUgraphExec ge;
  R(cuGraphInstantiateWithFlags(&ge, g, 0));
  for (int rep = 0; rep < 2; rep++) {
    R(cuGraphLaunch(ge, s));
    R(cuStreamSynchronize(s));
    int bad = 0;
    for (uint32_t i = 0; i < N / 2; i++)
      bad += ((uint32_t *)(uintptr_t)d)[i] != i * 3;
    for (uint32_t i = 0; i < N / 2; i++)
      bad += ((uint32_t *)(uintptr_t)d)[N / 2 + i] != 1000 + i;
    CHECK(bad == 0);
    CHECK(calls == rep + 1);
    R(cuMemsetD32(d, 0, N));
  }
  /* Operands freed since capture: refused, not replayed. */
  R(cuMemFreeHost(pinned));
  EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(ge, s));
  R(cuGraphExecDestroy(ge));
  EXPECT(CUDA_ERROR_INVALID_HANDLE, cuGraphExecDestroy(ge));
  R(cuGraphDestroy(g));

  /* A capturing blocking stream: legacy work would depend on it. */
  CUstream b;
  R(cuStreamCreate(&b, 0));
  R(cuStreamBeginCapture(b, CU_STREAM_CAPTURE_MODE_RELAXED));
  EXPECT(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, cuStreamIsCapturing(NULL, &st));
  EXPECT(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, cuMemsetD8Async(d, 0, 4, NULL));
  EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(b, &g));
  R(cuStreamDestroy(b));

  R(cuStreamDestroy(s));
  R(cuMemFree(d));
  free(pageable);
}

/* ABIs cudart 13 does not ask for, called by their cuda.h names. */
static void check_other_abis(CUcontext primary, CUkernel k, CUfunction f) {
  CUcontext c = NULL, cur = NULL;
  R(cuCtxCreate(&c, NULL, 0, 0)); /* cuCtxCreate_v4 */
  R(cuCtxGetCurrent(&cur));
  CHECK(cur == c);
  CUdevice dev = -1;
  R(cuCtxGetDevice_v2(&dev, c));
  CHECK(dev == 0);
  R(cuCtxSynchronize_v2(NULL));
  unsigned long long id1 = 0, id2 = 0;
  R(cuCtxGetId(c, &id1));
  R(cuCtxGetId(primary, &id2));
  CHECK(id1 && id2 && id1 != id2);
  R(cuCtxDestroy(c));
  R(cuCtxGetCurrent(&cur));
  CHECK(cur == primary);

  CUdeviceptr m;
  R(cuMemAllocManaged(&m, 8192, CU_MEM_ATTACH_GLOBAL));
  int managed = 0;
  R(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m));
  CHECK(managed == 1);
  ((char *)(uintptr_t)m)[0] = 1; /* host-accessible */
  CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  R(cuMemAdvise(m, 8192, CU_MEM_ADVISE_SET_READ_MOSTLY, loc)); /* _v2 */
  R(cuMemPrefetchAsync(m, 8192, loc, 0, NULL));                /* _v2 */
  CUdeviceptr plain;
  R(cuMemAlloc(&plain, 64));
  EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemPrefetchAsync(plain, 64, loc, 0, NULL));
  R(cuMemFree(plain));
  R(cuMemFree(m));

  CUmemoryPool pool, pool2;
  R(cuDeviceGetDefaultMemPool(&pool, 0));
  R(cuDeviceGetMemPool(&pool2, 0));
  CHECK(pool == pool2);
  CUstream s;
  R(cuStreamCreate(&s, 0));
  CUdeviceptr a;
  R(cuMemAllocFromPoolAsync(&a, 4096, pool, s));
  CUmemoryPool owner = NULL;
  R(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a));
  CHECK(owner == pool);
  R(cuMemFreeAsync(a, s));
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         cuMemAllocFromPoolAsync(&a, 64, (CUmemoryPool)(uintptr_t)8, s));
  CUcontext sc = NULL;
  CUgreenCtx gc = (CUgreenCtx)1;
  R(cuStreamGetCtx_v2(s, &sc, &gc));
  CHECK(sc == primary && gc == NULL);
  R(cuStreamSynchronize(s));
  R(cuStreamDestroy(s));

  size_t off = 1, size = 0;
  R(cuFuncGetParamInfo(f, 0, &off, &size));
  CHECK(off == 0 && size == sizeof(sim_fill_args));
  EXPECT(CUDA_ERROR_INVALID_VALUE, cuFuncGetParamInfo(f, 1, &off, &size));
  R(cuKernelGetParamInfo(k, 0, &off, &size));
  CHECK(size == sizeof(sim_fill_args));
  int v = 0;
  R(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k, 0));
  CHECK(v == 1024);
  CUfunctionLoadingState st;
  R(cuFuncIsLoaded(&st, f));
  CHECK(st == CU_FUNCTION_LOADING_STATE_LOADED);
  CUlibrary lib2 = NULL;
  R(cuKernelGetLibrary(&lib2, k));
  CHECK(lib2 != NULL);

  void *h;
  R(cuMemHostAlloc(&h, 100, 0));
  CUdeviceptr base = 0;
  size_t bytes = 0;
  R(cuMemGetAddressRange(&base, &bytes, (CUdeviceptr)(uintptr_t)h + 50));
  CHECK(base == (CUdeviceptr)(uintptr_t)h && bytes == 100);
  R(cuMemFreeHost(h));
}

int main(void) {
  check_symbols();
  R(cuInit(0));
  CUcontext ctx;
  R(cuDevicePrimaryCtxRetain(&ctx, 0));
  R(cuCtxSetCurrent(ctx));
  check_stub();
  /* The test kernels are linked in: no SIMCUDA_KERNELS needed. */
  CUlibrary lib;
  CUkernel k;
  R(cuLibraryLoadData(&lib, t_fatbin, NULL, NULL, 0, NULL, NULL, 0));
  R(cuLibraryGetKernel(&k, lib, "sim_fill_u32"));
  CUfunction f;
  R(cuKernelGetFunction(&f, k));
  check_capture(f);
  check_other_abis(ctx, k, f);
  R(cuLibraryUnload(lib));
  R(cuCtxSynchronize());
  R(cuDevicePrimaryCtxRelease(0));
  return t_finish("test_simcuda_linked");
}
