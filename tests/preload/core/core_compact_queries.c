/* What the runtime says of a compact region's memory (docs/CONFIG.md,
 * mode=compact) is what it says of pinned memory: cudaPointerGetAttributes
 * and cudaHostGetFlags give the same answers with libibp disabled (the
 * driver's pinned memory) and with the region compact -- whose pages stay
 * released meanwhile (CORE_EXPECT_COMPACT=1: checked with mincore) -- and
 * cudaHostGetDevicePointer pins it first; every copy brings the host's
 * bytes throughout. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define N (4u << 20)

static int failures;

#define CK(call)                                                               \
  do {                                                                         \
    if ((call) != cudaSuccess) {                                               \
      fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #call);        \
      return 2;                                                                \
    }                                                                          \
  } while (0)

#define EXPECT(c, what)                                                        \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "core_compact_queries: %s\n", what);                     \
      failures++;                                                              \
    }                                                                          \
  } while (0)

/* Pages of [p, p+n) resident now. */
static size_t resident_pages(const void *p, size_t n) {
  const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char *v = malloc(n / pg + 1);
  size_t k = 0;
  if (v && mincore((void *)p, n, v) == 0)
    for (size_t i = 0; i < n / pg; i++)
      k += v[i] & 1;
  free(v);
  return k;
}

/* Copies the region to the device and back; 1 when every byte matches. */
static int round_trip(const uint8_t *host, uint8_t *dev, uint8_t *back) {
  if (cudaMemcpy(dev, host, N, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(back, dev, N, cudaMemcpyDeviceToHost) != cudaSuccess)
    return 0;
  return memcmp(back, host, N) == 0;
}

int main(void) {
  const int compact = getenv("CORE_EXPECT_COMPACT") != NULL;
  const unsigned flags = cudaHostAllocPortable | cudaHostAllocMapped;
  uint8_t *host = NULL, *dev = NULL;
  uint8_t *back = malloc(N);
  CK(cudaSetDevice(0));
  CK(cudaHostAlloc((void **)&host, N, flags));
  CK(cudaMalloc((void **)&dev, N));
  if (!back)
    return 2;
  /* bf16-like values: most high bits shared, so the region compresses */
  for (size_t i = 0; i < N; i += 2) {
    host[i] = (uint8_t)(i * 2654435761u >> 13);
    host[i + 1] = (uint8_t)(0x3c + (i >> 12) % 3);
  }
  /* the first copy waits for the compression (IBP_WAIT_READY=1), after
   * which the pages the shadow holds are released; the queries below must
   * leave them so */
  CK(cudaMemcpy(dev, host, N, cudaMemcpyHostToDevice));
  const size_t pages = N / (size_t)sysconf(_SC_PAGESIZE);
  struct cudaPointerAttributes a;
  CK(cudaPointerGetAttributes(&a, host + 12345));
  EXPECT(a.type == cudaMemoryTypeHost, "type is not host memory");
  EXPECT(a.device == 0, "device is not 0");
  EXPECT(a.hostPointer == host + 12345, "hostPointer is not the pointer");
  EXPECT(a.devicePointer == host + 12345,
         "devicePointer is not the pointer (unified addressing)");
  unsigned got = 0;
  CK(cudaHostGetFlags(&got, host + 100));
  EXPECT(got == flags, "cudaHostGetFlags differs from the allocation's");
  if (compact)
    EXPECT(resident_pages(host, N) < pages / 2,
           "the compact region's pages are resident");
  CK(cudaMemcpy(back, dev, N, cudaMemcpyDeviceToHost));
  EXPECT(memcmp(back, host, N) == 0, "bytes differ after the first copy");
  /* a mapped device pointer: pinned first, the same bytes after */
  void *mapped = NULL;
  CK(cudaHostGetDevicePointer(&mapped, host, 0));
  EXPECT(mapped == host, "the mapped pointer is not the host address");
  if (compact)
    EXPECT(resident_pages(host, N) == pages,
           "the region is not resident once pinned");
  host[77] ^= 0x5a; /* a store, then the bytes must follow */
  EXPECT(round_trip(host, dev, back), "bytes differ once pinned");
  CK(cudaFreeHost(host));
  CK(cudaFree(dev));
  free(back);
  if (failures)
    return 1;
  printf("core_compact_queries: ok\n");
  return 0;
}
