/* Device-side writes into a ready region: cudaMemset(Async) and
 * device-to-device copies whose destination is the region's mapped device
 * pointer (cudaHostGetDevicePointer; its host address under unified
 * addressing) change the host bytes without a CPU store, so write
 * protection does not see them.  Every copy from the region afterwards
 * must bring the new bytes, not the compressed old ones.  Run under
 * LD_PRELOAD=libibp.so with IBP_WAIT_READY=1 (passes without libibp too). */
#include <cuda_runtime_api.h>
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
  if (failures)
    return 1;
  puts("core_device_writes: ok");
  return 0;
}
