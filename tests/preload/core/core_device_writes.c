/* Device-side writes into a ready region: cudaMemset(Async) and
 * device-to-device copies whose destination is the region's mapped device
 * pointer (cudaHostGetDevicePointer; its host address under unified
 * addressing) change the host bytes without a CPU store, so write
 * protection does not see them.  Every copy from the region afterwards
 * must bring the new bytes, not the compressed old ones.  A 2D copy from
 * the device into rows of the region too (cuMemcpy2D, reached the way
 * cudart reaches the driver: cuGetProcAddress).  Run under
 * LD_PRELOAD=libibp.so with IBP_WAIT_READY=1 (passes without libibp too). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define N (4u << 20)
#define COPY (256u << 10)

static uint8_t *host, *dev, *dev2, *mapped;
static cudaStream_t s;
static int failures;

#define CK(call)                                                               \
  do {                                                                         \
    if ((call) != cudaSuccess) {                                               \
      fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #call);        \
      return 2;                                                                \
    }                                                                          \
  } while (0)

/* Copies [off, off+COPY) of the region to the device and compares. */
static int check(size_t off, const char *after) {
  static uint8_t back[COPY];
  CK(cudaMemcpy(dev, host + off, COPY, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(back, dev, COPY, cudaMemcpyDeviceToHost));
  if (memcmp(back, host + off, COPY) != 0) {
    fprintf(stderr, "after %s: stale bytes at offset %zu\n", after, off);
    failures++;
  }
  return 0;
}

int main(void) {
  CK(cudaHostAlloc((void **)&host, N, cudaHostAllocMapped));
  CK(cudaMalloc((void **)&dev, COPY));
  CK(cudaMalloc((void **)&dev2, COPY));
  CK(cudaStreamCreate(&s));
  CK(cudaHostGetDevicePointer((void **)&mapped, host, 0));
  for (size_t i = 0; i < N; i++)
    host[i] = (uint8_t)(i % 89 < 70 ? 0x3f : i * 11);
  for (size_t off = 0; off < N; off += COPY) /* ready, served, checked */
    if (check(off, "nothing"))
      return 2;
  CK(cudaMemset(mapped + 100, 0x5a, 3000));
  check(0, "cudaMemset");
  CK(cudaMemsetAsync(mapped + COPY + 7, 0xc3, 5000, s));
  CK(cudaStreamSynchronize(s));
  check(COPY, "cudaMemsetAsync");
  memset(host + 2 * COPY, 0x11, COPY); /* the source's bytes, on the GPU */
  CK(cudaMemcpy(dev2, host + 2 * COPY, COPY, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(mapped + 3 * COPY + 64, dev2, 9000, cudaMemcpyDeviceToDevice));
  check(3 * COPY, "a device-to-device copy");
  CK(cudaMemcpyAsync(mapped + 5 * COPY, dev2, COPY, cudaMemcpyDeviceToDevice,
                     s));
  CK(cudaStreamSynchronize(s));
  check(5 * COPY, "an asynchronous device-to-device copy");
  /* rows of a 2D copy, through the driver as cudart reaches it */
  void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  CUresult (*gpa)(const char *, void **, int, cuuint64_t,
                  CUdriverProcAddressQueryResult *) =
      drv ? (CUresult(*)(const char *, void **, int, cuuint64_t,
                         CUdriverProcAddressQueryResult *))
                dlsym(drv, "cuGetProcAddress_v2")
          : NULL;
  CUresult (*copy2d)(const CUDA_MEMCPY2D *) = NULL;
  CUdriverProcAddressQueryResult st;
  if (!gpa || gpa("cuMemcpy2D", (void **)&copy2d, 3020, 0, &st) != 0 ||
      !copy2d) {
    fprintf(stderr, "cuMemcpy2D not found\n");
    return 2;
  }
  CUDA_MEMCPY2D p = {0};
  p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p.srcDevice = (CUdeviceptr)(uintptr_t)dev2;
  p.srcPitch = 300;
  p.dstMemoryType = CU_MEMORYTYPE_HOST;
  p.dstHost = host + 6 * COPY + 5;
  p.dstPitch = 1000;
  p.WidthInBytes = 300;
  p.Height = 50;
  if (copy2d(&p) != CUDA_SUCCESS) {
    fprintf(stderr, "cuMemcpy2D failed\n");
    return 2;
  }
  check(6 * COPY, "a 2D copy");
  if (failures)
    return 1;
  puts("core_device_writes: ok");
  return 0;
}
