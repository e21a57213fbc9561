/* Micro-benchmark, not a test: the cost libibp adds to copies outside
 * every region (target: bench/README.md, "Targets").
 *
 * Reaches the driver as cudart 13 does (dlopen + dlsym of
 * cuGetProcAddress_v2 + lookup), so under LD_PRELOAD=libibp.so the copy
 * entry point is libibp's hook.  It times N synchronous 8-byte
 * host-to-device copies from a small pinned buffer, with a pinned region
 * registered elsewhere (IBP_REGIONS=size=1M selects it) so the lookup runs
 * against a non-empty registry.  Prints ns per call (best of 5 rounds);
 * bench/interpose.sh runs it with and without the preload. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t,
                               CUdriverProcAddressQueryResult *);
typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*dev_get_fn)(CUdevice *, int);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*set_fn)(CUcontext);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*host_alloc_fn)(void **, size_t, unsigned);
typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t);

static void *lookup(getproc_fn gp, const char *name, int version) {
  void *p = NULL;
  CUdriverProcAddressQueryResult st;
  if (gp(name, &p, version, 0, &st) != CUDA_SUCCESS || !p) {
    fprintf(stderr, "bench_passthrough: no %s\n", name);
    exit(2);
  }
  return p;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  getproc_fn gp = h ? (getproc_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
  if (!gp) {
    fprintf(stderr, "bench_passthrough: no driver\n");
    return 77;
  }
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr d;
  void *region;
  ((init_fn)lookup(gp, "cuInit", 2000))(0);
  ((dev_get_fn)lookup(gp, "cuDeviceGet", 2000))(&dev, 0);
  ((retain_fn)lookup(gp, "cuDevicePrimaryCtxRetain", 7000))(&ctx, dev);
  ((set_fn)lookup(gp, "cuCtxSetCurrent", 4000))(ctx);
  ((alloc_fn)lookup(gp, "cuMemAlloc", 3020))(&d, 64);
  ((host_alloc_fn)lookup(gp, "cuMemHostAlloc", 2020))(&region, 1 << 20, 0);
  htod_fn copy = (htod_fn)lookup(gp, "cuMemcpyHtoD", 3020);
  uint64_t *src; /* pinned, outside the region: no page checks */
  ((host_alloc_fn)lookup(gp, "cuMemHostAlloc", 2020))((void **)&src, 4096, 0);
  double best = 1e9;
  for (int round = 0; round < 15; round++) {
    double t0 = now();
    for (long i = 0; i < n; i++) {
      src[0] = (uint64_t)i;
      if (copy(d, src, sizeof *src) != CUDA_SUCCESS) {
        fprintf(stderr, "bench_passthrough: copy failed\n");
        return 2;
      }
    }
    double ns = (now() - t0) * 1e9 / (double)n;
    best = ns < best ? ns : best;
  }
  printf("ns_per_copy=%.1f\n", best);
  return 0;
}
