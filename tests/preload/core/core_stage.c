/* A region libibp stores with the exponent stage (docs/FORMAT.md §9):
 * 8 MiB of bf16 weights (a normal-like spread, as bench_prepare.c's) in
 * 1 KiB tensors, pinned, copied whole to the device once (IBP_WAIT_READY=1:
 * after the region is ready) and read back.  Prints "core_stage: same
 * bytes" when the device got the host's bytes; core_stage.sh checks how
 * the copy went (served, or passed through when the stage's self-test
 * fails). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BYTES (8u << 20)

static uint16_t bf16(float v) {
  uint32_t b;
  memcpy(&b, &v, 4);
  return (uint16_t)((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}

int main(void) {
  uint16_t *host = NULL;
  void *dev = NULL;
  uint8_t *back = malloc(BYTES);
  if (!back || cudaHostAlloc((void **)&host, BYTES, cudaHostAllocDefault) ||
      cudaMalloc(&dev, BYTES)) {
    fprintf(stderr, "core_stage: allocation failed\n");
    return 77;
  }
  uint64_t seed = 12345;
  for (size_t i = 0; i < BYTES / 2; i++) {
    float u = 0;
    for (int k = 0; k < 3; k++) { /* a sum of uniforms: normal-like */
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      u += (float)(seed >> 40) / (float)(1 << 24) - 0.5f;
    }
    host[i] = bf16(u * 0.02f);
  }
  if (cudaMemcpy(dev, host, BYTES, cudaMemcpyHostToDevice) ||
      cudaMemcpy(back, dev, BYTES, cudaMemcpyDeviceToHost)) {
    fprintf(stderr, "core_stage: a copy failed\n");
    return 1;
  }
  int same = memcmp(back, host, BYTES) == 0;
  printf("core_stage: %s\n", same ? "same bytes" : "wrong bytes");
  return same ? 0 : 1;
}
