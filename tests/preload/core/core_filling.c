/* Copies racing the first compression of a region (docs/ARCHITECTURE.md,
 * "Preparing a region"): from its first copy on, for two seconds, random
 * spans of a 64 MiB region are copied to the device and back and compared,
 * while CPU stores land in random tensors -- before, during and after
 * their streams are written.  Run under LD_PRELOAD=libibp.so with
 * IBP_WAIT_READY=0 and one compression thread, so many copies are served
 * while the region is still filling (passes without libibp too). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N (64u << 20)
#define MAX_COPY (1u << 20)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

int main(void) {
  uint8_t *host, *dev;
  static uint8_t back[MAX_COPY];
  if (cudaHostAlloc((void **)&host, N, cudaHostAllocDefault) != cudaSuccess ||
      cudaMalloc((void **)&dev, MAX_COPY) != cudaSuccess) {
    fprintf(stderr, "core_filling: allocation failed\n");
    return 2;
  }
  for (size_t i = 0; i < N; i++) /* compressible: shared high bits */
    host[i] = (uint8_t)(i % 2 ? 0x3f : (next() & 0x1f));
  unsigned copies = 0, writes = 0, bad = 0;
  double until = now() + 2.0;
  while (now() < until && !bad) {
    if (next() % 4 == 0) { /* a store into a random tensor */
      size_t at = next() % N;
      host[at] = (uint8_t)next();
      writes++;
    }
    size_t len = 1 + next() % MAX_COPY;
    size_t off = next() % (N - len + 1);
    if (cudaMemcpy(dev, host + off, len, cudaMemcpyHostToDevice) !=
            cudaSuccess ||
        cudaMemcpy(back, dev, len, cudaMemcpyDeviceToHost) != cudaSuccess) {
      fprintf(stderr, "core_filling: copy failed\n");
      return 2;
    }
    if (memcmp(back, host + off, len) != 0) {
      fprintf(stderr, "core_filling: wrong bytes, copy %u [%zu, +%zu)\n",
              copies, off, len);
      bad++;
    }
    copies++;
  }
  if (bad)
    return 1;
  printf("core_filling: ok (%u copies, %u stores)\n", copies, writes);
  return 0;
}
