/*
 * The driver's environment variables.  Fault injection: SIMCUDA_FAIL makes
 * exactly the nth call of an entry (counted across its variants) fail, with
 * no side effect.  With an argument: "malformed" -- a bad specification is
 * ignored (with a message); "nodevice" -- SIMCUDA_NO_DEVICE; "smallmem" --
 * SIMCUDA_DEVICE_MEM.
 */
#include "sim_test_kernels.h"
#include "simcuda_test.h"

#include <stdint.h>

static t_api A, P;

static void injected(void) {
  /* cuInit: the first call fails, the second works. */
  EXPECT(CUDA_ERROR_UNKNOWN, A.Init(0));
  int n;
  EXPECT(CUDA_ERROR_NOT_INITIALIZED, A.DeviceGetCount(&n));
  CUcontext ctx = t_start(&A);
  (void)ctx;

  /* cuMemAlloc:3 -- out of memory, nothing allocated, *dptr untouched. */
  CUdeviceptr d1, d2, d3 = 0x1234, d4;
  size_t free0, free1, total;
  OK(A.MemAlloc(&d1, 4096));
  OK(A.MemAlloc(&d2, 4096));
  OK(A.MemGetInfo(&free0, &total));
  EXPECT(CUDA_ERROR_OUT_OF_MEMORY, A.MemAlloc(&d3, 4096));
  CHECK(d3 == 0x1234);
  OK(A.MemGetInfo(&free1, &total));
  CHECK(free0 == free1);
  OK(A.MemAlloc(&d4, 4096));

  /* cuStreamCreate:1 */
  CUstream s = (CUstream)(uintptr_t)0x77, s2;
  EXPECT(CUDA_ERROR_OUT_OF_MEMORY, A.StreamCreate(&s, 0));
  CHECK(s == (CUstream)(uintptr_t)0x77);
  OK(A.StreamCreate(&s2, 0));

  /* cuMemcpyHtoDAsync:2:CUDA_ERROR_INVALID_VALUE -- the second call, made
   * through the _ptsz variant, fails and copies nothing. */
  unsigned char *h;
  OK(A.MemHostAlloc((void **)&h, 4096, 0));
  memset(h, 0xaa, 4096);
  OK(A.MemsetD32(d1, 0, 1024));
  OK(A.MemcpyHtoDAsync(d1, h, 16, s2));
  OK(A.StreamSynchronize(s2));
  memset(h, 0xbb, 4096);
  EXPECT(CUDA_ERROR_INVALID_VALUE, P.MemcpyHtoDAsync(d1, h, 4096, s2));
  OK(A.StreamSynchronize(s2));
  CHECK(((unsigned char *)(uintptr_t)d1)[0] == 0xaa);
  CHECK(((unsigned char *)(uintptr_t)d1)[100] == 0);
  OK(P.MemcpyHtoDAsync(d1, h, 4096, s2));
  OK(A.StreamSynchronize(s2));
  CHECK(((unsigned char *)(uintptr_t)d1)[100] == 0xbb);

  /* cuLaunchKernel:2 -- counted across cuLaunchKernel and _ptsz. */
  CUlibrary lib;
  CUkernel k;
  OK(A.LibraryLoadData(&lib, t_fatbin, NULL, NULL, 0, NULL, NULL, 0));
  OK(A.LibraryGetKernel(&k, lib, "sim_fill_u32"));
  sim_fill_args a = {(uint32_t *)(uintptr_t)d2, 1, 16};
  void *params[] = {&a};
  CUfunction f = (CUfunction)k;
  OK(A.LaunchKernel(f, 1, 1, 1, 16, 1, 1, 0, s2, params, NULL));
  OK(A.StreamSynchronize(s2));
  a.value = 100;
  EXPECT(CUDA_ERROR_UNKNOWN,
         P.LaunchKernel(f, 1, 1, 1, 16, 1, 1, 0, s2, params, NULL));
  OK(A.StreamSynchronize(s2));
  CHECK(((uint32_t *)(uintptr_t)d2)[3] == 4);
  OK(P.LaunchKernel(f, 1, 1, 1, 16, 1, 1, 0, s2, params, NULL));
  OK(A.StreamSynchronize(s2));
  CHECK(((uint32_t *)(uintptr_t)d2)[3] == 103);

  /* cuMemsetD8:* -- every call. */
  EXPECT(CUDA_ERROR_UNKNOWN, A.MemsetD8(d1, 0, 1));
  EXPECT(CUDA_ERROR_UNKNOWN, P.MemsetD8(d1, 0, 1));

  OK(A.LibraryUnload(lib));
  OK(A.StreamDestroy(s2));
  OK(A.MemFreeHost(h));
  OK(A.MemFree(d1));
  OK(A.MemFree(d2));
  OK(A.MemFree(d4));
}

static void malformed(void) {
  t_start(&A);
  CUdeviceptr d;
  for (int i = 0; i < 4; i++) {
    OK(A.MemAlloc(&d, 64));
    OK(A.MemFree(d));
  }
}

/* SIMCUDA_NO_DEVICE=1: a machine without a GPU. */
static void nodevice(void) {
  EXPECT(CUDA_ERROR_NO_DEVICE, A.Init(0));
  int n = 5;
  EXPECT(CUDA_ERROR_NOT_INITIALIZED, A.DeviceGetCount(&n));
}

/* SIMCUDA_DEVICE_MEM=512M: a smaller device. */
static void smallmem(void) {
  t_start(&A);
  size_t total = 0, free_ = 0;
  OK(A.DeviceTotalMem(&total, 0));
  CHECK(total == 512u << 20);
  OK(A.MemGetInfo(&free_, &total));
  CHECK(free_ == total);
  CUdeviceptr d, d2;
  OK(A.MemAlloc(&d, 400u << 20));
  EXPECT(CUDA_ERROR_OUT_OF_MEMORY, A.MemAlloc(&d2, 200u << 20));
  OK(A.MemFree(d));
  OK(A.MemAlloc(&d2, 200u << 20));
  OK(A.MemFree(d2));
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "inject";
  if (strcmp(mode, "malformed") == 0)
    setenv("SIMCUDA_FAIL", "cuMemAlloc:0,cuMemFree:x", 1);
  else if (strcmp(mode, "nodevice") == 0)
    setenv("SIMCUDA_NO_DEVICE", "1", 1);
  else if (strcmp(mode, "smallmem") == 0)
    setenv("SIMCUDA_DEVICE_MEM", "512M", 1);
  else
    setenv("SIMCUDA_FAIL",
           "cuInit:1,cuMemAlloc:3,cuStreamCreate:1,"
           "cuMemcpyHtoDAsync:2:CUDA_ERROR_INVALID_VALUE,cuLaunchKernel:2,"
           "cuMemsetD8:*",
           1);
  t_open();
  t_load(&A, 0);
  t_load(&P, 1);
  if (strcmp(mode, "malformed") == 0)
    malformed();
  else if (strcmp(mode, "nodevice") == 0)
    nodevice();
  else if (strcmp(mode, "smallmem") == 0)
    smallmem();
  else
    injected();
  fprintf(stderr, "mode: %s\n", mode);
  return t_finish("test_simcuda_faults");
}
