/* A program linked against libcuda.so.1 that calls the driver directly --
 * no dlsym, no cuGetProcAddress: under LD_PRELOAD its calls reach
 * libibp's exported hooks (hooks/exports.c), so its pinned buffer becomes
 * a region and its host-to-device copies are served, exact.  The stats
 * check (core_linked.sh) requires copies served.  Passes without libibp
 * too.  With --wc the buffer is write-combined.  With --query it only asks the
 * driver about its devices (as deviceQueryDrv does): libibp still starts and
 * writes its report. */
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

/* --query: what deviceQueryDrv does -- only questions about the devices,
 * none of which libibp hooks but cuInit (hooks/init.c). */
static int query(void) {
  int n = 0, version = 0, sms = 0;
  char name[128];
  size_t mem = 0;
  CUdevice dev;
  CK(cuInit(0));
  CK(cuDriverGetVersion(&version));
  CK(cuDeviceGetCount(&n));
  for (int i = 0; i < n; i++) {
    CK(cuDeviceGet(&dev, i));
    CK(cuDeviceGetName(name, sizeof name, dev));
    CK(cuDeviceTotalMem(&mem, dev));
    CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                            dev));
  }
  printf("core_linked: ok (%d device%s)\n", n, n == 1 ? "" : "s");
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--query") == 0)
    return query();
  /* --wc: the buffer is write-combined (cudaHostAllocWriteCombined) */
  unsigned flags = argc > 1 && strcmp(argv[1], "--wc") == 0
                       ? CU_MEMHOSTALLOC_WRITECOMBINED
                       : 0;
  CUdevice dev;
  CUcontext ctx;
  void *host;
  CUdeviceptr d;
  static uint8_t back[COPY];
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CK(cuMemHostAlloc(&host, N, flags));
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
