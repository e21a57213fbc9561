/* Micro-benchmark, not a test: how long libibp takes to prepare a region
 * (bench/prepare.sh; docs/ARCHITECTURE.md, "Preparing a region").
 *
 *   bench_prepare BYTES
 *
 * Pins BYTES of bf16 weights (a normal-like spread per 64 MiB "layer",
 * like samples/weight_stream), then times its first host-to-device copy
 * under LD_PRELOAD=libibp.so with IBP_WAIT_READY=1: that copy waits until
 * the region is compressed and set up on the device.  Prints the seconds,
 * the CPU seconds (user + system, every thread of the process) the wait
 * took -- what a loaded machine inflates least --, the peak resident
 * memory the preparation added (the growth of the process's high-water
 * mark, VmHWM) and checks the copied bytes. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* User + system CPU seconds of every thread of this process so far. */
static double cpu_seconds(void) {
  struct rusage u;
  if (getrusage(RUSAGE_SELF, &u) != 0)
    return 0;
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* VmHWM of this process, bytes (0 when unknown). */
static uint64_t peak_rss(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  uint64_t kb = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %lu kB", &kb) == 1)
      break;
  if (f)
    fclose(f);
  return kb * 1024;
}

static uint16_t bf16(float v) {
  uint32_t b;
  memcpy(&b, &v, 4);
  return (uint16_t)((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: bench_prepare BYTES\n");
    return 2;
  }
  size_t bytes = strtoull(argv[1], NULL, 0);
  uint16_t *host = NULL;
  void *dev = NULL;
  if (cudaHostAlloc((void **)&host, bytes, cudaHostAllocDefault) != 0 ||
      cudaMalloc(&dev, 1 << 16) != 0) {
    fprintf(stderr, "bench_prepare: allocation failed\n");
    return 1;
  }
  uint64_t seed = 12345;
  for (size_t i = 0; i < bytes / 2; i++) {
    float u = 0;
    for (int k = 0; k < 3; k++) { /* a sum of uniforms: normal-like */
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      u += (float)(seed >> 40) / (float)(1 << 24) - 0.5f;
    }
    float scale = 0.02f * (1.0f + (float)((i * 2 >> 26) % 4));
    host[i] = bf16(u * scale);
  }
  uint64_t before = peak_rss();
  double t0 = now(), c0 = cpu_seconds();
  if (cudaMemcpy(dev, host, 1 << 16, cudaMemcpyHostToDevice) != 0) {
    fprintf(stderr, "bench_prepare: copy failed\n");
    return 1;
  }
  double t1 = now(), c1 = cpu_seconds();
  static uint8_t back[1 << 16];
  cudaMemcpy(back, dev, sizeof back, cudaMemcpyDeviceToHost);
  if (memcmp(back, host, sizeof back) != 0) {
    fprintf(stderr, "bench_prepare: wrong bytes\n");
    return 1;
  }
  uint64_t after = peak_rss();
  printf("bytes=%zu ready_seconds=%.3f cpu_seconds=%.3f extra_peak_bytes=%llu "
         "extra_peak_fraction=%.3f\n",
         bytes, t1 - t0, c1 - c0, (unsigned long long)(after - before),
         (double)(after - before) / (double)bytes);
  return 0;
}
