/* The simulated runtime's fat-binary and kernel entry points (src/launch.c),
 * called the way nvcc's generated code calls them, without nvcc: register a
 * fat binary and a kernel, push and pop launch configurations, look the
 * kernel up, launch it every way (refused, not sticky), unregister.  Built
 * against the shared library and the static archive (sim_runtime_launch_*);
 * tests/sim/nvcc/ does the same with programs nvcc builds.
 *
 * Exit 0 when every check passes, 1 otherwise. */
#include <cuda_runtime_api.h>

#include <stdio.h>
#include <string.h>

/* As crt/host_runtime.h and crt/device_functions.h declare them (C++ only
 * there). */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaUnregisterFatBinary(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun,
                            char *deviceFun, const char *deviceName,
                            int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize);
void __cudaRegisterVar(void **fatCubinHandle, char *hostVar,
                       char *deviceAddress, const char *deviceName, int ext,
                       size_t size, int constant, int global);
char __cudaInitModule(void **fatCubinHandle);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim,
                                     size_t sharedMem,
                                     struct CUstream_st *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim,
                                       size_t *sharedMem, void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                               void **args, size_t sharedMem,
                               cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim,
                                    dim3 blockDim, void **args,
                                    size_t sharedMem, cudaStream_t stream);
cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
                                  void **args, size_t sharedMem,
                                  cudaStream_t stream);

static int failures;

#define EXPECT(call, want)                                                     \
  do {                                                                         \
    cudaError_t got_ = (call);                                                 \
    if (got_ != (want)) {                                                      \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__,        \
              __LINE__, #call, cudaGetErrorName(got_),                         \
              cudaGetErrorName(want));                                         \
      failures++;                                                              \
    }                                                                          \
  } while (0)

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      failures++;                                                              \
    }                                                                          \
  } while (0)

/* Stand-ins for nvcc's host stubs and its fat binary wrapper: only their
 * addresses matter. */
static void stub_scale(void) {}
static void stub_unregistered(void) {}
static const unsigned long long fake_fatbin[4] = {0x466243b1u};
static char host_var[4];

static void test_configurations(void) {
  dim3 g = {0, 0, 0}, b = {0, 0, 0};
  size_t shm = 1;
  cudaStream_t s = (cudaStream_t)1;
  EXPECT(__cudaPopCallConfiguration(&g, &b, &shm, &s),
         cudaErrorMissingConfiguration);
  dim3 g1 = {4, 2, 1}, b1 = {128, 1, 1}, g2 = {1, 1, 1}, b2 = {32, 2, 1};
  CHECK(__cudaPushCallConfiguration(g1, b1, 64, NULL) == 0);
  CHECK(__cudaPushCallConfiguration(g2, b2, 0, (struct CUstream_st *)2) == 0);
  EXPECT(__cudaPopCallConfiguration(&g, &b, &shm, &s), cudaSuccess);
  CHECK(g.x == 1 && b.x == 32 && b.y == 2 && shm == 0 &&
        s == (cudaStream_t)2); /* last in, first out */
  EXPECT(__cudaPopCallConfiguration(&g, &b, &shm, &s), cudaSuccess);
  CHECK(g.x == 4 && g.y == 2 && b.x == 128 && shm == 64 && s == NULL);
  int pushed = 0;
  while (pushed < 100 && __cudaPushCallConfiguration(g1, b1, 0, NULL) == 0)
    pushed++;
  CHECK(pushed > 0 && pushed < 100); /* bounded: the rest are refused */
  for (int i = 0; i < pushed; i++)
    EXPECT(__cudaPopCallConfiguration(&g, &b, &shm, &s), cudaSuccess);
  EXPECT(__cudaPopCallConfiguration(&g, &b, &shm, &s),
         cudaErrorMissingConfiguration);
}

static void test_kernels(void) {
  void **h = __cudaRegisterFatBinary((void *)fake_fatbin);
  CHECK(h != NULL);
  __cudaRegisterFunction(h, (const char *)stub_scale, (char *)"_Z5scalePff",
                         "_Z5scalePff", -1, NULL, NULL, NULL, NULL, NULL);
  __cudaRegisterVar(h, host_var, (char *)"bias", "bias", 0, sizeof host_var, 0,
                    0);
  __cudaRegisterFatBinaryEnd(h);
  CHECK(__cudaInitModule(h) != 0);

  cudaKernel_t k = NULL, none = (cudaKernel_t)1;
  EXPECT(__cudaGetKernel(&k, (const void *)stub_scale), cudaSuccess);
  CHECK(k != NULL);
  EXPECT(__cudaGetKernel(&none, (const void *)stub_unregistered),
         cudaErrorInvalidDeviceFunction);
  CHECK(none == NULL);
  EXPECT(cudaGetLastError(), cudaErrorInvalidDeviceFunction);

  dim3 g = {1, 1, 1}, b = {256, 1, 1};
  float f = 2.0f;
  void *args[] = {&f};
  EXPECT(__cudaLaunchKernel(k, g, b, args, 0, NULL),
         cudaErrorNoKernelImageForDevice);
  EXPECT(cudaGetLastError(), cudaErrorNoKernelImageForDevice);
  EXPECT(cudaGetLastError(), cudaSuccess); /* not sticky */
  EXPECT(__cudaLaunchKernel_ptsz(k, g, b, args, 0, NULL),
         cudaErrorNoKernelImageForDevice);
  EXPECT(cudaLaunchKernel((const void *)stub_scale, g, b, args, 0, NULL),
         cudaErrorNoKernelImageForDevice);
  EXPECT(cudaLaunchKernel_ptsz((const void *)stub_scale, g, b, args, 0, NULL),
         cudaErrorNoKernelImageForDevice);
  EXPECT(cudaLaunchKernel((const void *)stub_unregistered, g, b, args, 0, NULL),
         cudaErrorInvalidDeviceFunction);
  EXPECT(__cudaLaunchKernel(NULL, g, b, args, 0, NULL),
         cudaErrorInvalidDeviceFunction);
  cudaGetLastError();

  /* copies go on */
  void *dev = NULL;
  char in[64], out[64];
  memset(in, 0x5a, sizeof in);
  memset(out, 0, sizeof out);
  EXPECT(cudaMalloc(&dev, sizeof in), cudaSuccess);
  EXPECT(cudaMemcpy(dev, in, sizeof in, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT(cudaMemcpy(out, dev, sizeof out, cudaMemcpyDeviceToHost), cudaSuccess);
  CHECK(memcmp(in, out, sizeof in) == 0);
  EXPECT(cudaFree(dev), cudaSuccess);

  __cudaUnregisterFatBinary(h);
  EXPECT(__cudaGetKernel(&k, (const void *)stub_scale),
         cudaErrorInvalidDeviceFunction);
  EXPECT(__cudaLaunchKernel(k, g, b, args, 0, NULL),
         cudaErrorInvalidDeviceFunction);
  cudaGetLastError();
  __cudaUnregisterFatBinary(h); /* a second time, or a stranger: ignored */
}

int main(void) {
  test_configurations();
  test_kernels();
  if (failures) {
    fprintf(stderr, "rt_launch_test: %d checks failed\n", failures);
    return 1;
  }
  printf("rt_launch_test: all checks passed\n");
  return 0;
}
