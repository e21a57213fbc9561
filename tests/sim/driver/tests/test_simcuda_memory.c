/*
 * The device, contexts, device and pinned memory, pointer attributes,
 * synchronous copies and sets in every direction, and invalid arguments
 * (errors, never crashes) -- through cuGetProcAddress, as cudart does.
 */
#include "simcuda_test.h"

#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static t_api A;

static void fill_pattern(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char)(i * 131u + seed * 7u + (i >> 8));
}

static void test_device(void) {
  int n = 0, v = 0;
  OK(A.DeviceGetCount(&n));
  CHECK(n == 1);
  CUdevice dev = -1;
  OK(A.DeviceGet(&dev, 0));
  CHECK(dev == 0);
  EXPECT(CUDA_ERROR_INVALID_DEVICE, A.DeviceGet(&dev, 1));
  char name[128];
  OK(A.DeviceGetName(name, sizeof name, 0));
  CHECK(strcmp(name, "libibp simulated GPU (sm_90)") == 0);
  OK(A.DeviceGetName(name, 8, 0)); /* truncated, terminated */
  CHECK(strlen(name) == 7);
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.DeviceGetName(NULL, 8, 0));
  size_t total = 0;
  OK(A.DeviceTotalMem(&total, 0));
  CHECK(total >= (256u << 20));
  static const struct {
    CUdevice_attribute a;
    int want;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132},
      {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 227 * 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 48 * 1024},
      {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
      {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1},
      {CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1},
      {CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 2},
      {CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0x5a},
      {CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 0},
      {CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 0},
      {CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 1},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64},
  };
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
    v = -1;
    OK(A.DeviceGetAttribute(&v, attrs[i].a, 0));
    if (v != attrs[i].want) {
      fprintf(stderr, "attribute %d: %d, want %d\n", (int)attrs[i].a, v,
              attrs[i].want);
      t_failures++;
    }
  }
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.DeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0));
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.DeviceGetAttribute(&v, (CUdevice_attribute)0, 0));
  EXPECT(CUDA_ERROR_INVALID_DEVICE,
         A.DeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 3));
  CUuuid u1, u2;
  OK(A.DeviceGetUuid(&u1, 0));
  OK(A.DeviceGetUuid(&u2, 0));
  CHECK(memcmp(&u1, &u2, sizeof u1) == 0);
  char bus[32];
  OK(A.DeviceGetPCIBusId(bus, sizeof bus, 0));
  CUdevice d2 = -1;
  OK(A.DeviceGetByPCIBusId(&d2, bus));
  CHECK(d2 == 0);
  OK(A.DeviceGetByPCIBusId(&d2, "5a:00.0"));
  EXPECT(CUDA_ERROR_INVALID_DEVICE, A.DeviceGetByPCIBusId(&d2, "0000:01:00.0"));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.DeviceGetByPCIBusId(&d2, "garbage"));
}

static void test_contexts(CUcontext primary) {
  unsigned flags = 99;
  int active = 0;
  OK(A.PrimaryCtxGetState(0, &flags, &active));
  CHECK(active == 1);
  CUcontext cur = NULL;
  OK(A.CtxGetCurrent(&cur));
  CHECK(cur == primary);
  CUdevice dev = -1;
  OK(A.CtxGetDevice(&dev));
  CHECK(dev == 0);
  unsigned api = 0;
  OK(A.CtxGetApiVersion(NULL, &api));
  CHECK(api >= 3020);
  int least = 1, greatest = 1;
  OK(A.CtxGetStreamPriorityRange(&least, &greatest));
  CHECK(least == 0 && greatest < 0);
  size_t lim = 0;
  OK(A.CtxGetLimit(&lim, CU_LIMIT_STACK_SIZE));
  CHECK(lim > 0);
  OK(A.CtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
  OK(A.CtxGetLimit(&lim, CU_LIMIT_STACK_SIZE));
  CHECK(lim == 4096);
  EXPECT(CUDA_ERROR_UNSUPPORTED_LIMIT, A.CtxGetLimit(&lim, (CUlimit)0x40));

  /* A created context: current on creation, owns its memory. */
  CUcontext ctx = NULL;
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.CtxCreate(&ctx, 0x1000, 0));
  EXPECT(CUDA_ERROR_INVALID_DEVICE, A.CtxCreate(&ctx, 0, 7));
  OK(A.CtxCreate(&ctx, CU_CTX_SCHED_BLOCKING_SYNC, 0));
  CHECK(ctx != NULL && ctx != primary);
  OK(A.CtxGetCurrent(&cur));
  CHECK(cur == ctx);
  OK(A.CtxGetFlags(&flags));
  CHECK(flags == CU_CTX_SCHED_BLOCKING_SYNC);
  CUdeviceptr d;
  OK(A.MemAlloc(&d, 4096));
  OK(A.MemsetD8(d, 0x11, 4096));
  CUcontext popped = NULL;
  OK(A.CtxPopCurrent(&popped));
  CHECK(popped == ctx);
  OK(A.CtxGetCurrent(&cur));
  CHECK(cur == primary);
  OK(A.CtxPushCurrent(ctx));
  OK(A.CtxDestroy(ctx));
  OK(A.CtxGetCurrent(&cur));
  CHECK(cur == primary); /* destroyed: popped from this thread */
  /* Its memory went with it. */
  unsigned char b[4];
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemcpyDtoH(b, d, 4));
  EXPECT(CUDA_ERROR_INVALID_CONTEXT, A.CtxDestroy(ctx));
  EXPECT(CUDA_ERROR_INVALID_CONTEXT, A.CtxSetCurrent(ctx));
  EXPECT(CUDA_ERROR_INVALID_CONTEXT, A.CtxDestroy(primary));
  EXPECT(CUDA_ERROR_INVALID_CONTEXT, A.CtxPushCurrent((CUcontext)0x1234));

  /* No current context: a clear error. */
  OK(A.CtxSetCurrent(NULL));
  EXPECT(CUDA_ERROR_INVALID_CONTEXT, A.MemAlloc(&d, 16));
  EXPECT(CUDA_ERROR_INVALID_CONTEXT, A.CtxSynchronize());
  OK(A.CtxSetCurrent(primary));
}

static void test_device_memory(void) {
  size_t free0, total, free1;
  OK(A.MemGetInfo(&free0, &total));
  CUdeviceptr d = 0, d2 = 0;
  OK(A.MemAlloc(&d, 1000000));
  CHECK(d != 0 && d % 256 == 0);
  OK(A.MemGetInfo(&free1, &total));
  CHECK(free1 <= free0 - 1000000);
  CUdeviceptr base = 0;
  size_t size = 0;
  OK(A.MemGetAddressRange(&base, &size, d + 5000));
  CHECK(base == d && size == 1000000);
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemAlloc(&d2, 0));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemAlloc(NULL, 16));
  EXPECT(CUDA_ERROR_OUT_OF_MEMORY, A.MemAlloc(&d2, total + 1));
  EXPECT(CUDA_ERROR_OUT_OF_MEMORY, A.MemAlloc(&d2, (size_t)-4096));
  OK(A.MemAlloc(&d2, 4096));
  CHECK(d2 >= d + 1000000 || d2 + 4096 <= d);

  /* Round trips. */
  size_t n = 1000000;
  unsigned char *h1 = malloc(n), *h2 = malloc(n);
  REQUIRE(h1 && h2);
  fill_pattern(h1, n, 1);
  OK(A.MemcpyHtoD(d, h1, n));
  memset(h2, 0, n);
  OK(A.MemcpyDtoH(h2, d, n));
  CHECK(memcmp(h1, h2, n) == 0);
  OK(A.MemcpyDtoD(d2, d + 100, 4096));
  memset(h2, 0, n);
  OK(A.MemcpyDtoH(h2, d2, 4096));
  CHECK(memcmp(h1 + 100, h2, 4096) == 0);
  /* cuMemcpy classifies both sides: HtoD, DtoH, DtoD and HtoH. */
  OK(A.Memcpy(d2, (CUdeviceptr)(uintptr_t)(h1 + 7), 1000));
  OK(A.Memcpy((CUdeviceptr)(uintptr_t)h2, d2, 1000));
  CHECK(memcmp(h1 + 7, h2, 1000) == 0);
  OK(A.Memcpy(d2 + 2000, d2, 1000));
  OK(A.Memcpy((CUdeviceptr)(uintptr_t)(h2 + 5000), (CUdeviceptr)(uintptr_t)h1,
              3000));
  CHECK(memcmp(h1, h2 + 5000, 3000) == 0);
  OK(A.MemcpyHtoD(d, h1, 0)); /* zero bytes: nothing to check */

  /* Sets. */
  OK(A.MemsetD8(d, 0xab, 1000));
  OK(A.MemsetD32(d + 1000, 0x01020304u, 10));
  OK(A.MemcpyDtoH(h2, d, 1040));
  CHECK(h2[0] == 0xab && h2[999] == 0xab);
  uint32_t w;
  memcpy(&w, h2 + 1036, 4);
  CHECK(w == 0x01020304u);
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemsetD32(d + 2, 0, 4)); /* misaligned */
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemsetD8(d + n - 10, 0, 11));

  /* 2D: four rows of 100 bytes from a 256-byte pitch into a 128-byte one. */
  CUDA_MEMCPY2D c = {0};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = h1;
  c.srcPitch = 256;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = d2;
  c.dstPitch = 128;
  c.WidthInBytes = 100;
  c.Height = 4;
  OK(A.Memcpy2D(&c));
  OK(A.MemcpyDtoH(h2, d2, 512));
  for (int r = 0; r < 4; r++)
    CHECK(memcmp(h2 + 128 * r, h1 + 256 * r, 100) == 0);
  c.dstPitch = 50; /* narrower than a row */
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.Memcpy2D(&c));
  c.dstPitch = 128;
  c.Height = 40; /* past the 4 KiB allocation */
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.Memcpy2D(&c));
  c.Height = 4;
  c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  EXPECT(CUDA_ERROR_NOT_SUPPORTED, A.Memcpy2D(&c));

  /* Bad pointers and ranges: errors, never crashes. */
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemcpyHtoD(d, h1, n + 1));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemcpyHtoD(d + n - 4, h1, 8));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemcpyHtoD(0, h1, 8));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemcpyHtoD(d, NULL, 8));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemcpyDtoH(NULL, d, 8));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemcpyDtoD(d, d2 + 4000, 200));
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.MemcpyHtoD((CUdeviceptr)(uintptr_t)h1, h2, 8));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.Memcpy(d2 + 4096 + 8, d, 8)); /* a gap */
  long pg = sysconf(_SC_PAGESIZE);
  void *hole = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(hole != MAP_FAILED);
  munmap(hole, (size_t)pg);
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemcpyHtoD(d, hole, 16));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemcpyDtoH(hole, d, 16));
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.MemcpyHtoD(d, (void *)(uintptr_t)0x10, 16));

  /* Free: exact bases only, once. */
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemFree(d + 16));
  OK(A.MemFree(d));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemFree(d));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemcpyDtoH(h2, d, 16)); /* freed */
  EXPECT(CUDA_ERROR_NOT_FOUND, A.MemGetAddressRange(&base, &size, d));
  OK(A.MemFree(d2));
  OK(A.MemGetInfo(&free1, &total));
  CHECK(free1 == free0);
  free(h1);
  free(h2);
}

static void test_pinned(void) {
  const size_t n = 3 * 4096 + 100;
  void *p = NULL, *q = NULL;
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemHostAlloc(&p, n, 0x80));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemHostAlloc(&p, 0, 0));
  OK(A.MemHostAlloc(&p, n,
                    CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  OK(A.MemAllocHost(&q, n));
  REQUIRE(p && q);
  unsigned flags = 0;
  OK(A.MemHostGetFlags(&flags, p));
  CHECK(flags == (CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  CUdeviceptr dp = 0;
  OK(A.MemHostGetDevicePointer(&dp, (char *)p + 10, 0));
  CHECK(dp == (CUdeviceptr)(uintptr_t)p + 10); /* unified addressing */
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemHostGetDevicePointer(&dp, p, 1));

  /* Pointer attributes. */
  unsigned type = 0;
  OK(A.PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                           (CUdeviceptr)(uintptr_t)p));
  CHECK(type == CU_MEMORYTYPE_HOST);
  CUdeviceptr d;
  OK(A.MemAlloc(&d, n));
  OK(A.PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 1));
  CHECK(type == CU_MEMORYTYPE_DEVICE);
  int managed = 7;
  OK(A.PointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
  CHECK(managed == 0);
  CUdeviceptr dptr = 0;
  OK(A.PointerGetAttribute(&dptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                           (CUdeviceptr)(uintptr_t)q));
  CHECK(dptr == (CUdeviceptr)(uintptr_t)q);
  void *hp = NULL;
  OK(A.PointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER,
                           (CUdeviceptr)(uintptr_t)q));
  CHECK(hp == q);
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.PointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, d));
  CUcontext pctx = NULL, cur = NULL;
  OK(A.PointerGetAttribute(&pctx, CU_POINTER_ATTRIBUTE_CONTEXT, d));
  OK(A.CtxGetCurrent(&cur));
  CHECK(pctx == cur);
  size_t rsize = 0;
  OK(A.PointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 5));
  CHECK(rsize == n);
  char stack_buf[64];
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                               (CUdeviceptr)(uintptr_t)stack_buf));
  CUpointer_attribute as[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                               CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void *vals[2] = {&type, &managed};
  type = 9;
  OK(A.PointerGetAttributes(2, as, vals, (CUdeviceptr)(uintptr_t)stack_buf));
  CHECK(type == 0 && managed == 0);

  /* Copies through pinned memory, both ways. */
  fill_pattern(p, n, 3);
  OK(A.MemcpyHtoD(d, p, n));
  OK(A.MemcpyDtoH(q, d, n));
  CHECK(memcmp(p, q, n) == 0);
  /* Like DMA, transfers ignore the application's page protection on
   * memory from cuMemHostAlloc. */
  size_t span = (n + 4095) & ~(size_t)4095;
  REQUIRE(mprotect(q, span, PROT_READ) == 0);
  OK(A.MemsetD8(d, 0x5c, n));
  OK(A.MemcpyDtoH(q, d, n));
  CHECK(((unsigned char *)q)[n - 1] == 0x5c);
  REQUIRE(mprotect(q, span, PROT_NONE) == 0);
  OK(A.MemcpyHtoD(d, q, 64));
  REQUIRE(mprotect(q, span, PROT_READ | PROT_WRITE) == 0);

  /* Registering user memory. */
  size_t rn = 64 * 1024;
  char *user = aligned_alloc(4096, rn);
  REQUIRE(user);
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemHostRegister(user, rn, 0x100));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemHostRegister(NULL, rn, 0));
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         A.MemHostRegister((void *)(uintptr_t)d, 64, 0));
  OK(A.MemHostRegister(user, rn, CU_MEMHOSTREGISTER_DEVICEMAP));
  EXPECT(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
         A.MemHostRegister(user, rn, 0));
  EXPECT(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
         A.MemHostRegister(user + 100, 10, 0));
  EXPECT(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
         A.MemHostRegister(p, 16, 0));
  OK(A.MemHostGetDevicePointer(&dp, user + 4, 0));
  CHECK(dp == (CUdeviceptr)(uintptr_t)(user + 4));
  OK(A.PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp));
  CHECK(type == CU_MEMORYTYPE_HOST);
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemHostGetFlags(&flags, user));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemFreeHost(user)); /* not ours */
  EXPECT(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, A.MemHostUnregister(user + 8));
  EXPECT(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, A.MemHostUnregister(p));
  OK(A.MemHostUnregister(user));
  EXPECT(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, A.MemHostUnregister(user));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemHostGetDevicePointer(&dp, user, 0));
  free(user);

  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemFreeHost((char *)p + 1));
  OK(A.MemFreeHost(p));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemFreeHost(p));
  OK(A.MemFreeHost(q));
  OK(A.MemFree(d));
}

static void test_errors_strings(void) {
  const char *s = NULL;
  OK(A.GetErrorName(CUDA_ERROR_NOT_FOUND, &s));
  CHECK(s && strcmp(s, "CUDA_ERROR_NOT_FOUND") == 0);
  OK(A.GetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
  CHECK(s && strcmp(s, "out of memory") == 0);
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.GetErrorString(CUDA_SUCCESS, NULL));
}

static void test_primary_reset(CUcontext primary) {
  CUdeviceptr d;
  OK(A.MemAlloc(&d, 4096));
  OK(A.PrimaryCtxReset(0));
  unsigned flags;
  int active = 1;
  OK(A.PrimaryCtxGetState(0, &flags, &active));
  CHECK(active == 0);
  EXPECT(CUDA_ERROR_CONTEXT_IS_DESTROYED, A.MemAlloc(&d, 16));
  CUcontext again = NULL;
  OK(A.PrimaryCtxRetain(&again, 0));
  CHECK(again == primary); /* the same handle after a reset */
  OK(A.MemAlloc(&d, 16));
  OK(A.MemFree(d));
  OK(A.PrimaryCtxRelease(0));
  OK(A.PrimaryCtxGetState(0, &flags, &active));
  CHECK(active == 0);
  EXPECT(CUDA_ERROR_INVALID_CONTEXT, A.PrimaryCtxRelease(0));
}

/* A child of fork() cannot use what its parent initialized. */
static void test_fork(void) {
  fflush(NULL);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    CUdeviceptr d;
    int n;
    _exit(A.MemAlloc(&d, 64) == CUDA_ERROR_NOT_INITIALIZED &&
                  A.DeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED
              ? 0
              : 1);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  int n = 0;
  OK(A.DeviceGetCount(&n)); /* the parent is unaffected */
}

int main(void) {
  t_open();
  t_load(&A, 0);
  CUcontext primary = t_start(&A);
  test_device();
  test_contexts(primary);
  test_device_memory();
  test_pinned();
  test_errors_strings();
  test_fork();
  test_primary_reset(primary);
  return t_finish("test_simcuda_memory");
}
