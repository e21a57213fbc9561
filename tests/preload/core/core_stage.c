/* A region libibp stores with the exponent stage (docs/FORMAT.md §9):
 * 8 MiB of bf16 weights (a normal-like spread, as bench_prepare.c's) in
 * 1 KiB tensors, pinned, copied whole to the device three times
 * (IBP_WAIT_READY=1: the first after the region is ready; the third's
 * decision reads what libibp timed of the others) and read back.  Prints
 * "core_stage: same bytes" when the device got the host's bytes, and the
 * second copy's time on the device's clock (events around it: modelled on
 * the simulated GPU); core_stage.sh checks how the copies went
 * (served, or passed through when the stage's self-test fails) and how
 * long it took.  `core_stage alternating`: every odd tensor's values
 * +-uniform[1, 2) instead, so that an even sample of half the region holds
 * the weights alone (core_stage_judged.sh).  `core_stage flat`: every
 * value's sign and exponent uniform, its 4 low mantissa bits 0 -- IBP
 * saves those, the stage nothing (core_stage_bytes.sh).  `core_stage
 * quarter`: every tensor but each fourth flat (a cluster of its own, IBP
 * saves on it, the stage nothing), so the stage codes a quarter of the
 * region (core_stage_quarter.sh). */
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

static uint64_t seed = 12345;

static float uniform(void) { /* [0, 1) */
  seed = seed * 6364136223846793005ull + 1442695040888963407ull;
  return (float)(seed >> 40) / (float)(1 << 24);
}

/* Value i: a weight, or in an odd tensor of 512 values with `alternating`,
 * +-uniform[1, 2). */
static float value(size_t i, int alternating) {
  if (alternating && (i / 512) % 2)
    return (uniform() < 0.5f ? -1.0f : 1.0f) * (1.0f + uniform());
  float u = 0;
  for (int k = 0; k < 3; k++) /* a sum of uniforms: normal-like */
    u += uniform() - 0.5f;
  return u * 0.02f;
}

/* A flat value: its 9 sign and exponent bits and 3 top mantissa bits
 * uniform, the 4 low mantissa bits 0. */
static uint16_t flat(void) {
  return (uint16_t)((uint32_t)(uniform() * 4096.0f) << 4);
}

/* Value i's 16 bits as its mode makes them. */
static uint16_t bits(size_t i, const char *mode) {
  if (strcmp(mode, "flat") == 0)
    return flat();
  if (strcmp(mode, "quarter") == 0 && (i / 512) % 4)
    return flat();
  return bf16(value(i, strcmp(mode, "alternating") == 0));
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  uint16_t *host = NULL;
  void *dev = NULL;
  cudaEvent_t e0, e1;
  uint8_t *back = malloc(BYTES);
  if (!back || cudaHostAlloc((void **)&host, BYTES, cudaHostAllocDefault) ||
      cudaMalloc(&dev, BYTES) || cudaEventCreate(&e0) || cudaEventCreate(&e1)) {
    fprintf(stderr, "core_stage: allocation failed\n");
    return 77;
  }
  for (size_t i = 0; i < BYTES / 2; i++)
    host[i] = bits(i, mode);
  /* the first copy waits for the region (IBP_WAIT_READY=1), the second
   * is timed, the third reads libibp's timings */
  float ms = 0;
  if (cudaMemcpy(dev, host, BYTES, cudaMemcpyHostToDevice) ||
      cudaEventRecord(e0, 0) ||
      cudaMemcpy(dev, host, BYTES, cudaMemcpyHostToDevice) ||
      cudaEventRecord(e1, 0) || cudaEventSynchronize(e1) ||
      cudaEventElapsedTime(&ms, e0, e1) ||
      cudaMemcpy(dev, host, BYTES, cudaMemcpyHostToDevice) ||
      cudaMemcpy(back, dev, BYTES, cudaMemcpyDeviceToHost)) {
    fprintf(stderr, "core_stage: a copy failed\n");
    return 1;
  }
  printf("core_stage: copy us=%.1f\n", 1e3 * ms);
  int same = memcmp(back, host, BYTES) == 0;
  printf("core_stage: %s\n", same ? "same bytes" : "wrong bytes");
  free(back);
  cudaFree(dev);
  cudaFreeHost(host);
  return same ? 0 : 1;
}
