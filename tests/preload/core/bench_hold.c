/* Micro-benchmark, not a test: libibp's CPU time per copy it holds for a
 * batched launch (the profile's ibp_hold_us, docs/PROFILE.md).
 *
 *   bench_hold [rounds] [rows per round] [region MiB] [row bytes]
 *
 * Reaches the driver as cudart 13 does (dlopen + cuGetProcAddress_v2), so
 * under LD_PRELOAD=libibp.so the copy entry point is libibp's hook.  A
 * pinned region of 256-byte rows (default 64 MiB and 256 bytes; the rule
 * IBP_REGIONS=min=1M,tensor=256 selects it; IBP_WAIT_READY=1 makes it ready
 * first) is gathered onto the device: rounds of 2048 (default)
 * asynchronous row copies on a
 * created stream, random rows, then a stream synchronize (the flush, not
 * timed apart).  The calling thread's CPU time of the copy calls is
 * timed: with the copies held, that is libibp's hold path and nothing of
 * the driver's; and its CPU time in the synchronize, per copy: with
 * libibp, the flush (its own work and the simulated driver's cost of the
 * calls it makes).  Prints both, medians of 9 rounds (run it with a
 * profile whose batch_deadline_us is large, so no flush falls inside the
 * timed loop: bench/batch_hold.sh). */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROUNDS 9 /* timed (argv[1]: more, for a profiler) */

typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t,
                               CUdriverProcAddressQueryResult *);

static void *lookup(getproc_fn gp, const char *name, int version) {
  void *p = NULL;
  CUdriverProcAddressQueryResult st;
  if (gp(name, &p, version, 0, &st) != CUDA_SUCCESS || !p) {
    fprintf(stderr, "bench_hold: no %s\n", name);
    exit(2);
  }
  return p;
}

static double cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return 1e9 * (double)t.tv_sec + (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : ROUNDS;
  /* argv[2]: rows per round (a batch), argv[3]: MiB of the region */
  const unsigned ROWS_PER_ROUND = argc > 2 ? (unsigned)atoi(argv[2]) : 2048;
  const size_t REGION = (argc > 3 ? (size_t)atoi(argv[3]) : 64) << 20;
  /* argv[4]: bytes a row (bench/gated_cost.sh: 64 KiB blocks) */
  const size_t ROW = argc > 4 ? (size_t)atol(argv[4]) : 256;
  if (ROWS_PER_ROUND < 1 || ROWS_PER_ROUND > 4096 || REGION < (1u << 20) ||
      ROW < 1 || ROW > REGION) {
    fprintf(stderr,
            "bench_hold: rows 1..4096, region >= 1 MiB, row 1..region\n");
    return 2;
  }
  if (rounds < 1 || rounds > 1000000) {
    fprintf(stderr, "bench_hold: rounds must be 1..10^6\n");
    return 2;
  }
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  getproc_fn gp = h ? (getproc_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
  if (!gp) {
    fprintf(stderr, "bench_hold: no driver\n");
    return 77;
  }
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr d;
  CUstream s;
  uint8_t *region;
  ((CUresult(*)(unsigned))lookup(gp, "cuInit", 2000))(0);
  ((CUresult(*)(CUdevice *, int))lookup(gp, "cuDeviceGet", 2000))(&dev, 0);
  ((CUresult(*)(CUcontext *, CUdevice))lookup(gp, "cuDevicePrimaryCtxRetain",
                                              7000))(&ctx, dev);
  ((CUresult(*)(CUcontext))lookup(gp, "cuCtxSetCurrent", 4000))(ctx);
  ((CUresult(*)(CUdeviceptr *, size_t))lookup(gp, "cuMemAlloc", 3020))(
      &d, ROWS_PER_ROUND * ROW);
  ((CUresult(*)(CUstream *, unsigned))lookup(gp, "cuStreamCreate", 2000))(
      &s, CU_STREAM_NON_BLOCKING);
  ((CUresult(*)(void **, size_t, unsigned))lookup(gp, "cuMemHostAlloc", 2020))(
      (void **)&region, REGION, 0);
  for (size_t i = 0; i < REGION / 4; i++) { /* float-like: compressible */
    float f = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    ((float *)region)[i] = f;
  }
  CUresult (*copy)(CUdeviceptr, const void *, size_t, CUstream) =
      (CUresult(*)(CUdeviceptr, const void *, size_t, CUstream))lookup(
          gp, "cuMemcpyHtoDAsync", 3020);
  CUresult (*sync)(CUstream) =
      (CUresult(*)(CUstream))lookup(gp, "cuStreamSynchronize", 2000);
  double *per = calloc((size_t)rounds, sizeof *per);
  double *sync_per = calloc((size_t)rounds, sizeof *sync_per);
  if (!per || !sync_per)
    return 2;
  uint64_t x = 88172645463325252ull;
  for (int round = -1; round < rounds; round++) { /* round -1: warm-up */
    double t0 = cpu_ns();
    for (unsigned i = 0; i < ROWS_PER_ROUND; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      size_t row = (size_t)(x % (REGION / ROW));
      if (copy(d + i * ROW, region + row * ROW, ROW, s) != CUDA_SUCCESS) {
        fprintf(stderr, "bench_hold: copy failed\n");
        return 2;
      }
    }
    double t1 = cpu_ns();
    if (sync(s) != CUDA_SUCCESS) {
      fprintf(stderr, "bench_hold: synchronize failed\n");
      return 2;
    }
    if (round >= 0) {
      per[round] = (t1 - t0) / ROWS_PER_ROUND;
      sync_per[round] = (cpu_ns() - t1) / ROWS_PER_ROUND;
    }
  }
  qsort(per, (size_t)rounds, sizeof per[0], cmp);
  qsort(sync_per, (size_t)rounds, sizeof sync_per[0], cmp);
  printf("ns_per_copy=%.1f\n", per[rounds / 2]);
  printf("sync_ns_per_copy=%.1f\n", sync_per[rounds / 2]);
  free(per);
  free(sync_per);
  return 0;
}
