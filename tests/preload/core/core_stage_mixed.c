/* A batch mixing a region stored with the exponent stage and one whose
 * tensors the kernel's block path decodes (docs/FORMAT.md §9.6): 8 MiB of
 * bf16 weights in 1 KiB tensors (as core_stage.c's) and 4 MiB in 16 KiB
 * tensors, pinned.  Copies of 64 KiB from each, alternating, on one
 * created stream (IBP_FORCE_ROUTE=batched holds them for one batched
 * launch), then the stream synchronized and both read back.  A batch with
 * 16 KiB tensors is decoded a unit per block, and the block path has no
 * stage: the stage region's tensors are then copied from the original.
 * Prints "core_stage_mixed: same bytes" when the device got the host's
 * bytes; core_stage_mixed.sh checks the log and statistics. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAGE_BYTES (8u << 20)
#define BLOCK_BYTES (4u << 20)
#define COPY (64u << 10)

static uint64_t seed = 12345;

static uint16_t bf16(float v) {
  uint32_t b;
  memcpy(&b, &v, 4);
  return (uint16_t)((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}

/* bf16 weights, a normal-like spread (a sum of uniforms) */
static void fill_weights(uint16_t *w, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float u = 0;
    for (int k = 0; k < 3; k++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      u += (float)(seed >> 40) / (float)(1 << 24) - 0.5f;
    }
    w[i] = bf16(u * 0.02f);
  }
}

/* Both buffers to the device in COPY-byte copies, alternating, on s. */
static int copy_alternating(uint8_t *dev[2], uint8_t *host[2],
                            const size_t bytes[2], cudaStream_t s) {
  for (size_t off = 0; off < bytes[0] || off < bytes[1]; off += COPY)
    for (int b = 0; b < 2; b++)
      if (off < bytes[b] &&
          cudaMemcpyAsync(dev[b] + off, host[b] + off, COPY,
                          cudaMemcpyHostToDevice, s) != cudaSuccess)
        return -1;
  return cudaStreamSynchronize(s) == cudaSuccess ? 0 : -1;
}

int main(void) {
  const size_t bytes[2] = {STAGE_BYTES, BLOCK_BYTES};
  uint8_t *host[2] = {NULL, NULL}, *dev[2] = {NULL, NULL};
  uint8_t *back = malloc(STAGE_BYTES);
  cudaStream_t s;
  for (int b = 0; b < 2; b++)
    if (cudaHostAlloc((void **)&host[b], bytes[b], cudaHostAllocDefault) ||
        cudaMalloc((void **)&dev[b], bytes[b]))
      host[b] = NULL;
  if (!back || !host[0] || !host[1] || cudaStreamCreate(&s)) {
    fprintf(stderr, "core_stage_mixed: allocation failed\n");
    return 77;
  }
  for (int b = 0; b < 2; b++)
    fill_weights((uint16_t *)host[b], bytes[b] / 2);
  if (copy_alternating(dev, host, bytes, s) != 0) {
    fprintf(stderr, "core_stage_mixed: a copy failed\n");
    return 1;
  }
  int same = 1;
  for (int b = 0; b < 2; b++) {
    if (cudaMemcpy(back, dev[b], bytes[b], cudaMemcpyDeviceToHost)) {
      fprintf(stderr, "core_stage_mixed: a read-back failed\n");
      return 1;
    }
    same &= memcmp(back, host[b], bytes[b]) == 0;
  }
  printf("core_stage_mixed: %s\n", same ? "same bytes" : "wrong bytes");
  free(back);
  for (int b = 0; b < 2; b++) {
    cudaFree(dev[b]);
    cudaFreeHost(host[b]);
  }
  cudaStreamDestroy(s);
  return same ? 0 : 1;
}
