/* Copies from a ready region to destinations that are not device memory a
 * kernel may write: NULL, an address inside no allocation, a range running
 * past its allocation's end.  Under libibp each must return the driver's
 * own error (cudaErrorInvalidValue), as without it, and nothing must
 * crash; a good copy right after is still served and exact.  Run under
 * LD_PRELOAD=libibp.so with IBP_WAIT_READY=1 (passes without libibp too). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void expect(cudaError_t got, cudaError_t want, const char *what) {
  if (got != want) {
    fprintf(stderr, "%s: %s, want %s\n", what, cudaGetErrorName(got),
            cudaGetErrorName(want));
    failures++;
  }
  cudaGetLastError(); /* the error is not sticky */
}

/* An address inside no allocation past dev, in steps of `step`: libibp
 * allocates device memory of its own (the staged path's ring, made with
 * the region), which may lie right after dev. */
static uint8_t *unallocated(uint8_t *dev, size_t step) {
  for (size_t k = 2; k < 4096; k++) {
    uint8_t *p = dev + k * step;
    struct cudaPointerAttributes a;
    const cudaError_t e = cudaPointerGetAttributes(&a, p);
    cudaGetLastError();
    if (e != cudaSuccess || a.type != cudaMemoryTypeDevice)
      return p;
  }
  return NULL;
}

int main(void) {
  const size_t bytes = 4u << 20, dev_bytes = 1u << 20;
  uint8_t *host;
  uint8_t *dev;
  if (cudaHostAlloc((void **)&host, bytes, cudaHostAllocDefault) != 0 ||
      cudaMalloc((void **)&dev, dev_bytes) != 0)
    return 2;
  for (size_t i = 0; i < bytes; i++)
    host[i] = (uint8_t)(i % 251 < 200 ? 0x3f : i * 7);
  /* the first copy makes the region ready (IBP_WAIT_READY=1) */
  expect(cudaMemcpy(dev, host, 4096, cudaMemcpyHostToDevice), cudaSuccess,
         "first copy");
  expect(cudaMemcpy(NULL, host, 4096, cudaMemcpyHostToDevice),
         cudaErrorInvalidValue, "to NULL");
  uint8_t *nowhere = unallocated(dev, dev_bytes);
  if (!nowhere) {
    fprintf(stderr, "no address inside no allocation found\n");
    return 2;
  }
  expect(cudaMemcpy(nowhere, host, 4096, cudaMemcpyHostToDevice),
         cudaErrorInvalidValue, "to no allocation");
  expect(cudaMemcpy(dev + dev_bytes - 100, host, 4096, cudaMemcpyHostToDevice),
         cudaErrorInvalidValue, "past the allocation's end");
  cudaStream_t s;
  expect(cudaStreamCreate(&s), cudaSuccess, "stream");
  expect(cudaMemcpyAsync(dev + dev_bytes - 100, host, 4096,
                         cudaMemcpyHostToDevice, s),
         cudaErrorInvalidValue, "async, past the end");
  expect(cudaStreamSynchronize(s), cudaSuccess, "the stream is fine");
  /* still served, and exact */
  static uint8_t back[1 << 20];
  expect(cudaMemcpy(dev, host + 8192, dev_bytes, cudaMemcpyHostToDevice),
         cudaSuccess, "good copy");
  expect(cudaMemcpy(back, dev, dev_bytes, cudaMemcpyDeviceToHost), cudaSuccess,
         "copy back");
  if (memcmp(back, host + 8192, dev_bytes) != 0) {
    fprintf(stderr, "good copy: bytes differ\n");
    failures++;
  }
  if (failures)
    return 1;
  puts("core_bad_dst: ok");
  return 0;
}
