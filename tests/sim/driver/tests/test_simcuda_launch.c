/*
 * Library / module loads and kernel launches on the emulator, with the test
 * kernels of sim_test_kernels.cc (loaded by the driver from
 * SIMCUDA_KERNELS): images, kernel lookup by name, attributes, launches
 * through kernelParams and extra, reads of pinned host memory, launch
 * errors, and a failing kernel's sticky error.
 */
#include "sim_test_kernels.h"
#include "simcuda_test.h"

#include <stdint.h>
#include <unistd.h>

static t_api A, P;

static CUresult launch1d(CUfunction f, unsigned grid, unsigned block,
                         void *args, CUstream s) {
  void *params[] = {args};
  return A.LaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, params, NULL);
}

static void test_images(void) {
  CUlibrary lib;
  OK(A.LibraryLoadData(&lib, t_fatbin, NULL, NULL, 0, NULL, NULL, 0));
  OK(A.LibraryUnload(lib));
  static const unsigned char elf[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  OK(A.LibraryLoadData(&lib, elf, NULL, NULL, 0, NULL, NULL, 0));
  OK(A.LibraryUnload(lib));
  OK(A.LibraryLoadData(&lib, "//\n.version 8.0\n.target sm_90\n", NULL, NULL, 0,
                       NULL, NULL, 0));
  OK(A.LibraryUnload(lib));
  struct {
    int magic, version;
    const unsigned long long *data;
    void *unused;
  } wrapper = {0x466243b1, 1, t_fatbin, NULL};
  OK(A.LibraryLoadData(&lib, &wrapper, NULL, NULL, 0, NULL, NULL, 0));
  OK(A.LibraryUnload(lib));
  EXPECT(CUDA_ERROR_INVALID_IMAGE,
         A.LibraryLoadData(&lib, "garbage!", NULL, NULL, 0, NULL, NULL, 0));
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.LibraryLoadData(&lib, NULL, NULL, NULL, 0, NULL, NULL, 0));
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.LibraryLoadData(&lib, t_fatbin, NULL, NULL, 2, NULL, NULL, 0));
  EXPECT(CUDA_ERROR_INVALID_HANDLE, A.LibraryUnload(lib));
  CUmodule m;
  EXPECT(CUDA_ERROR_INVALID_IMAGE, A.ModuleLoadData(&m, "garbage!"));
}

static void test_fill(CUfunction f, CUstream s) {
  enum { N = 10000 };
  CUdeviceptr d;
  OK(A.MemAlloc(&d, N * 4));
  OK(A.MemsetD8(d, 0, N * 4));
  sim_fill_args a = {(uint32_t *)(uintptr_t)d, 1000, N};
  OK(launch1d(f, 8, 256, &a, s));
  a.value = 0; /* the launch copied its parameters */
  uint32_t *h = malloc(N * 4);
  REQUIRE(h);
  OK(A.StreamSynchronize(s));
  OK(A.MemcpyDtoH(h, d, N * 4));
  int bad = 0;
  for (uint32_t i = 0; i < N; i++)
    bad += h[i] != 1000 + i;
  CHECK(bad == 0);

  /* The same through `extra`. */
  sim_fill_args b = {(uint32_t *)(uintptr_t)d, 7, N / 2};
  size_t size = sizeof b;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &b,
                   CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  OK(A.LaunchKernel(f, 2, 1, 1, 128, 1, 1, 0, s, NULL, extra));
  OK(A.StreamSynchronize(s));
  OK(A.MemcpyDtoH(h, d, N * 4));
  CHECK(h[0] == 7 && h[N / 2 - 1] == 7 + N / 2 - 1 && h[N / 2] == 1000 + N / 2);
  size = sizeof b - 4;
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.LaunchKernel(f, 2, 1, 1, 128, 1, 1, 0, s, NULL, extra));

  /* Launch errors. */
  void *params[] = {&a};
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.LaunchKernel(f, 0, 1, 1, 32, 1, 1, 0, s, params, NULL));
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.LaunchKernel(f, 1, 1, 1, 1025, 1, 1, 0, s, params, NULL));
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.LaunchKernel(f, 1, 1, 1, 1, 1, 65, 0, s, params, NULL));
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.LaunchKernel(f, 1, 70000, 1, 32, 1, 1, 0, s, params, NULL));
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.LaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.LaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, extra));
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.LaunchKernel(f, 1, 1, 1, 32, 1, 1, 64 * 1024, s, params, NULL));
  EXPECT(CUDA_ERROR_INVALID_HANDLE,
         A.LaunchKernel((CUfunction)(uintptr_t)0x99, 1, 1, 1, 32, 1, 1, 0, s,
                        params, NULL));
  void *null_param[] = {NULL};
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.LaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, null_param, NULL));

  /* cuLaunchKernelEx, with a hint and with what is not simulated. */
  CUlaunchAttribute at[2];
  memset(at, 0, sizeof at);
  at[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  at[0].value.priority = 1;
  CUlaunchConfig cfg = {4, 1, 1, 64, 1, 1, 0, s, at, 1};
  a.value = 50;
  OK(A.LaunchKernelEx(&cfg, f, params, NULL));
  OK(A.StreamSynchronize(s));
  OK(A.MemcpyDtoH(h, d, 8));
  CHECK(h[1] == 51);
  at[1].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  at[1].value.cooperative = 1;
  cfg.numAttrs = 2;
  EXPECT(CUDA_ERROR_NOT_SUPPORTED, A.LaunchKernelEx(&cfg, f, params, NULL));
  free(h);
  OK(A.MemFree(d));
}

static void test_attributes(CUfunction f) {
  int v = -1;
  OK(A.FuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
  CHECK(v == 1024);
  OK(A.FuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
  CHECK(v > 0);
  OK(A.FuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f));
  CHECK(v == 0);
  OK(A.FuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        f));
  CHECK(v == 48 * 1024);
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.FuncGetAttribute(&v, (CUfunction_attribute)99, f));
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.FuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                            300 * 1024));
  OK(A.FuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        100 * 1024));
  OK(A.FuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        f));
  CHECK(v == 100 * 1024);
  const char *name = NULL;
  OK(A.FuncGetName(&name, f));
  CHECK(name && strcmp(name, "sim_fill_u32") == 0);
  int blocks = -1;
  OK(A.Occupancy(&blocks, f, 256, 0, 0));
  CHECK(blocks == 8);
  OK(A.Occupancy(&blocks, f, 1024, 0, 0));
  CHECK(blocks == 2);
  OK(A.Occupancy(&blocks, f, 64, 100 * 1024, 0));
  CHECK(blocks == 2);
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.Occupancy(&blocks, f, 0, 0, 0));
}

static void test_host_reads(CUfunction copy, CUstream s) {
  enum { N = 4096 };
  uint32_t *pinned, *out;
  OK(A.MemHostAlloc((void **)&pinned, N * 4, CU_MEMHOSTALLOC_DEVICEMAP));
  OK(A.MemHostAlloc((void **)&out, N * 4, 0));
  for (uint32_t i = 0; i < N; i++)
    pinned[i] = i * 2654435761u;
  CUdeviceptr d, src;
  OK(A.MemAlloc(&d, N * 4));
  OK(A.MemHostGetDevicePointer(&src, pinned, 0));
  sim_copy_args a = {(uint32_t *)(uintptr_t)d, (const uint32_t *)(uintptr_t)src,
                     N};
  OK(launch1d(copy, 4, 256, &a, s));
  OK(A.MemcpyDtoHAsync(out, d, N * 4, s));
  OK(A.StreamSynchronize(s));
  CHECK(memcmp(out, pinned, N * 4) == 0);

  /* Registered user memory works the same. */
  uint32_t *user = aligned_alloc(4096, N * 4);
  REQUIRE(user);
  for (uint32_t i = 0; i < N; i++)
    user[i] = ~i;
  OK(A.MemHostRegister(user, N * 4, 0));
  a.src = user;
  OK(launch1d(copy, 4, 256, &a, s));
  OK(A.MemcpyDtoHAsync(out, d, N * 4, s));
  OK(A.StreamSynchronize(s));
  CHECK(memcmp(out, user, N * 4) == 0);
  OK(A.MemHostUnregister(user));
  free(user);
  OK(A.MemFreeHost(pinned));
  OK(A.MemFreeHost(out));
  OK(A.MemFree(d));
}

static void test_warp_sum(CUfunction f, CUstream s) {
  enum { WARPS = 16 };
  CUdeviceptr d;
  OK(A.MemAlloc(&d, WARPS * 4));
  sim_fill_args a = {(uint32_t *)(uintptr_t)d, 0, WARPS};
  OK(launch1d(f, 2, 256, &a, s));
  uint32_t h[WARPS];
  OK(A.StreamSynchronize(s));
  OK(A.MemcpyDtoH(h, d, sizeof h));
  for (uint32_t w = 0; w < WARPS; w++)
    CHECK(h[w] == 32 * 32 * w + 31 * 32 / 2);
  OK(A.MemFree(d));
}

static void test_modules(void) {
  CUmodule m, m2, lm, lm2;
  OK(A.ModuleLoadData(&m, t_fatbin));
  CUfunction f, f2;
  OK(A.ModuleGetFunction(&f, m, "sim_fill_u32"));
  OK(A.ModuleGetFunction(&f2, m, "sim_fill_u32"));
  CHECK(f == f2);
  EXPECT(CUDA_ERROR_NOT_FOUND, A.ModuleGetFunction(&f2, m, "no_such_kernel"));
  OK(A.ModuleLoadData(&m2, t_fatbin));
  OK(A.ModuleGetFunction(&f2, m2, "sim_fill_u32"));
  CHECK(f != f2);
  CUdeviceptr d;
  OK(A.MemAlloc(&d, 64 * 4));
  sim_fill_args a = {(uint32_t *)(uintptr_t)d, 3, 64};
  OK(launch1d(f, 1, 64, &a, NULL));
  OK(A.CtxSynchronize());
  CHECK(((uint32_t *)(uintptr_t)d)[63] == 66);
  OK(A.ModuleUnload(m));
  EXPECT(CUDA_ERROR_INVALID_HANDLE, launch1d(f, 1, 64, &a, NULL));
  EXPECT(CUDA_ERROR_INVALID_HANDLE, A.ModuleUnload(m));
  OK(A.ModuleUnload(m2));

  CUlibrary lib;
  OK(A.LibraryLoadData(&lib, t_fatbin, NULL, NULL, 0, NULL, NULL, 0));
  OK(A.LibraryGetModule(&lm, lib));
  OK(A.LibraryGetModule(&lm2, lib));
  CHECK(lm == lm2);
  OK(A.ModuleGetFunction(&f, lm, "sim_fill_u32"));
  OK(launch1d(f, 1, 64, &a, NULL));
  OK(A.CtxSynchronize());
  OK(A.LibraryUnload(lib));
  OK(A.MemFree(d));
}

/* A failing kernel: message on stderr, sticky LAUNCH_FAILED on its stream
 * and context; other streams keep working; a context reset clears it. */
static void test_failure(CUfunction trap, CUfunction fill, CUfunction copy) {
  CUstream bad, good;
  OK(A.StreamCreate(&bad, CU_STREAM_NON_BLOCKING));
  OK(A.StreamCreate(&good, CU_STREAM_NON_BLOCKING));
  char path[] = "/tmp/simcuda_stderr_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);

  sim_fill_args t = {NULL, 37, 0};
  OK(launch1d(trap, 2, 32, &t, bad));
  EXPECT(CUDA_ERROR_LAUNCH_FAILED, A.StreamSynchronize(bad));
  EXPECT(CUDA_ERROR_LAUNCH_FAILED, A.StreamQuery(bad));
  EXPECT(CUDA_ERROR_LAUNCH_FAILED, A.StreamSynchronize(bad)); /* sticky */
  EXPECT(CUDA_ERROR_LAUNCH_FAILED, launch1d(trap, 1, 32, &t, bad));

  /* A misaligned read of pinned memory stops the kernel too. */
  char *pinned;
  OK(A.MemHostAlloc((void **)&pinned, 4096, 0));
  CUdeviceptr d;
  OK(A.MemAlloc(&d, 256));
  sim_copy_args c = {(uint32_t *)(uintptr_t)d, (uint32_t *)(pinned + 2), 64};
  OK(launch1d(copy, 1, 64, &c, good));
  EXPECT(CUDA_ERROR_LAUNCH_FAILED, A.StreamSynchronize(good));
  OK(A.MemFreeHost(pinned));

  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char log[4096] = "";
  ssize_t n = pread(fd, log, sizeof log - 1, 0);
  close(fd);
  unlink(path);
  log[n > 0 ? n : 0] = 0;
  CHECK(strstr(log, "[simcuda] kernel 'sim_trap' failed") != NULL);
  CHECK(strstr(log, "sim_trap: deliberate failure") != NULL);
  CHECK(strstr(log, "[simcuda] kernel 'sim_copy_host_u32' failed") != NULL);
  fputs(log, stderr);

  CUstream other;
  OK(A.StreamCreate(&other, CU_STREAM_NON_BLOCKING));
  sim_fill_args a = {(uint32_t *)(uintptr_t)d, 1, 64};
  OK(launch1d(fill, 1, 64, &a, other));
  OK(A.StreamSynchronize(other));
  EXPECT(CUDA_ERROR_LAUNCH_FAILED, A.CtxSynchronize());
  OK(A.StreamDestroy(bad));
  OK(A.StreamDestroy(good));
  OK(A.StreamDestroy(other));

  CUcontext ctx;
  OK(A.PrimaryCtxReset(0));
  OK(A.PrimaryCtxRetain(&ctx, 0));
  OK(A.CtxSynchronize());
}

static void test_ptds_launch(CUfunction f) {
  CUdeviceptr d;
  OK(A.MemAlloc(&d, 256 * 4));
  OK(A.MemsetD8(d, 0, 256 * 4));
  t_gate g = {0};
  OK(P.LaunchHostFunc(NULL, t_gate_wait, &g));
  sim_fill_args a = {(uint32_t *)(uintptr_t)d, 5, 256};
  void *params[] = {&a};
  OK(P.LaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
  EXPECT(CUDA_ERROR_NOT_READY, A.StreamQuery(CU_STREAM_PER_THREAD));
  CHECK(((volatile uint32_t *)(uintptr_t)d)[255] == 0);
  t_gate_open(&g);
  OK(P.StreamSynchronize(NULL));
  CHECK(((uint32_t *)(uintptr_t)d)[255] == 260);
  OK(A.MemFree(d));
}

int main(void) {
  t_open();
  t_load(&A, 0);
  t_load(&P, 1);
  t_start(&A);
  test_images();

  CUlibrary lib;
  OK(A.LibraryLoadData(&lib, t_fatbin, NULL, NULL, 0, NULL, NULL, 0));
  CUkernel kfill, kfill2, kcopy, ksum, ktrap, knone;
  OK(A.LibraryGetKernel(&kfill, lib, "sim_fill_u32"));
  OK(A.LibraryGetKernel(&kfill2, lib, "sim_fill_u32"));
  CHECK(kfill == kfill2);
  OK(A.LibraryGetKernel(&kcopy, lib, "sim_copy_host_u32"));
  OK(A.LibraryGetKernel(&ksum, lib, "sim_warp_sum"));
  OK(A.LibraryGetKernel(&ktrap, lib, "sim_trap"));
  EXPECT(CUDA_ERROR_NOT_FOUND, A.LibraryGetKernel(&knone, lib, "no_such"));
  const char *kname = NULL;
  OK(A.KernelGetName(&kname, kcopy));
  CHECK(kname && strcmp(kname, "sim_copy_host_u32") == 0);
  CUfunction ffill, fcopy, fsum, ftrap;
  OK(A.KernelGetFunction(&ffill, kfill));
  OK(A.KernelGetFunction(&fcopy, kcopy));
  OK(A.KernelGetFunction(&fsum, ksum));
  OK(A.KernelGetFunction(&ftrap, ktrap));

  CUstream s;
  OK(A.StreamCreate(&s, 0));
  test_fill(ffill, s);
  test_fill((CUfunction)kfill, NULL); /* a CUkernel launches as well */
  test_attributes(ffill);
  test_host_reads(fcopy, s);
  test_warp_sum(fsum, s);
  test_modules();
  test_ptds_launch(ffill);
  OK(A.StreamDestroy(s));
  test_failure(ftrap, ffill, fcopy);

  OK(A.LibraryUnload(lib));
  void *params[] = {NULL};
  EXPECT(CUDA_ERROR_INVALID_HANDLE,
         A.LaunchKernel(ffill, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
  return t_finish("test_simcuda_launch");
}
