/* cudaDeviceReset with a region live: the driver frees the context's
 * pinned memory, so libibp must forget the region first.  Then a new
 * pinned allocation (often at the same address) must become a region of
 * its own -- no "overlaps a region" -- and its copies arrive exact, served
 * from the new memory, not the freed one.  Run under LD_PRELOAD=libibp.so
 * with IBP_WAIT_READY=1 (passes without libibp too). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define N (4u << 20)
#define COPY (1u << 20)

static int round_trip(uint8_t seed) {
  uint8_t *host, *dev;
  static uint8_t back[COPY];
  if (cudaHostAlloc((void **)&host, N, cudaHostAllocDefault) != 0 ||
      cudaMalloc((void **)&dev, COPY) != 0)
    return -1;
  for (size_t i = 0; i < N; i++)
    host[i] = (uint8_t)(i % 97 < 80 ? seed : i * 13 + seed);
  printf("region at %p\n", (void *)host);
  for (size_t off = 0; off < N; off += COPY) {
    memset(back, 0, COPY);
    if (cudaMemcpy(dev, host + off, COPY, cudaMemcpyHostToDevice) != 0 ||
        cudaMemcpy(back, dev, COPY, cudaMemcpyDeviceToHost) != 0)
      return -1;
    if (memcmp(back, host + off, COPY) != 0) {
      fprintf(stderr, "seed %u: bytes differ at copy %zu\n", seed, off);
      return 1;
    }
  }
  return 0; /* the memory stays: the reset frees it */
}

int main(void) {
  int rc = round_trip(0x3f);
  if (rc == 0 && cudaDeviceReset() != 0)
    rc = -1;
  if (rc == 0)
    rc = round_trip(0x41);
  if (rc == 0 && cudaDeviceReset() != 0)
    rc = -1;
  if (rc)
    return rc < 0 ? 2 : 1;
  puts("core_reset: ok");
  return 0;
}
