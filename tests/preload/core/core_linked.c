/* A program linked against libcuda.so.1 that calls the driver directly --
 * no dlsym, no cuGetProcAddress: under LD_PRELOAD its calls reach
 * libibp's exported hooks (hooks/exports.c), so its pinned buffer becomes
 * a region and its host-to-device copies are served, exact.  The stats
 * check (core_linked.sh) requires copies served.  Passes without libibp
 * too. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define N (4u << 20)
#define COPY (512u << 10)

#define CK(call)                                                               \
  do {                                                                         \
    if ((call) != CUDA_SUCCESS) {                                              \
      fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #call);        \
      return 2;                                                                \
    }                                                                          \
  } while (0)

int main(void) {
  CUdevice dev;
  CUcontext ctx;
  void *host;
  CUdeviceptr d;
  static uint8_t back[COPY];
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CK(cuMemHostAlloc(&host, N, 0));
  CK(cuMemAlloc(&d, COPY));
  uint8_t *h = host;
  for (size_t i = 0; i < N; i++)
    h[i] = (uint8_t)(i % 61 < 50 ? 0x3f : i * 5);
  for (int round = 0; round < 2; round++)
    for (size_t off = 0; off < N; off += COPY) {
      CK(cuMemcpyHtoD(d, h + off, COPY));
      CK(cuMemcpyDtoH(back, d, COPY));
      if (memcmp(back, h + off, COPY) != 0) {
        fprintf(stderr, "bytes differ at %zu\n", off);
        return 1;
      }
    }
  CK(cuMemFree(d));
  CK(cuMemFreeHost(host));
  CK(cuDevicePrimaryCtxRelease(dev));
  puts("core_linked: ok");
  return 0;
}
