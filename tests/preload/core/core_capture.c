/* libibp and stream capture: never synchronize or allocate while a stream
 * is capturing (docs/ARCHITECTURE.md, "Nothing under capture").
 *
 * Reaches the driver as cudart does (dlopen + cuGetProcAddress_v2).  Region
 * A is made ready before the capture; then, inside a GLOBAL-mode capture on
 * stream s, a copy from A (must pass through: it is captured as a plain
 * copy) and a first copy from region B (starts B's compression on libibp's
 * worker, which allocates pinned memory while the capture runs: it must not
 * invalidate the capture).  The capture must end cleanly; the graph is
 * replayed and every byte checked; the graph holds the two copies alone
 * (nothing timed, launched or recorded by libibp under capture).  Run with
 * IBP_REGIONS selecting both 4 MiB regions; passes without libibp too. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1u << 20)
#define REGION (4 * MIB)

typedef CUresult (*gp_fn)(const char *, void **, int, cuuint64_t,
                          CUdriverProcAddressQueryResult *);
static gp_fn gp;

static void *fn(const char *name, int version) {
  void *p = NULL;
  CUdriverProcAddressQueryResult st;
  if (gp(name, &p, version, 0, &st) != CUDA_SUCCESS || !p) {
    fprintf(stderr, "core_capture: no %s\n", name);
    exit(2);
  }
  return p;
}

#define CALL(name, version, type, ...)                                         \
  do {                                                                         \
    CUresult e_ = ((type)fn(name, version))(__VA_ARGS__);                      \
    if (e_ != CUDA_SUCCESS) {                                                  \
      fprintf(stderr, "core_capture: %s failed: %d\n", name, (int)e_);         \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

typedef CUresult (*u_fn)(unsigned);
typedef CUresult (*devget_fn)(CUdevice *, int);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*ctx_fn)(CUcontext);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*halloc_fn)(void **, size_t, unsigned);
typedef CUresult (*stream_fn)(CUstream *, unsigned);
typedef CUresult (*sync_fn)(CUstream);
typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t, CUstream);
typedef CUresult (*dtoh_fn)(void *, CUdeviceptr, size_t);
typedef CUresult (*begin_fn)(CUstream, CUstreamCaptureMode);
typedef CUresult (*end_fn)(CUstream, CUgraph *);
typedef CUresult (*inst_fn)(CUgraphExec *, CUgraph, unsigned long long);
typedef CUresult (*launch_fn)(CUgraphExec, CUstream);

static void fill(uint8_t *p, size_t n, uint32_t seed) {
  for (size_t i = 0; i + 4 <= n; i += 4) {
    seed = seed * 1664525u + 1013904223u;
    uint32_t w = 0x3f000000u | (seed >> 12); /* floats in [0.5, 1) */
    memcpy(p + i, &w, 4);
  }
}

static int same(const uint8_t *host, CUdeviceptr d, size_t n) {
  uint8_t *back = malloc(n);
  CALL("cuMemcpyDtoH", 3020, dtoh_fn, back, d, n);
  int ok = memcmp(back, host, n) == 0;
  free(back);
  return ok;
}

int main(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  gp = h ? (gp_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
  if (!gp)
    return 77;
  CUdevice dev;
  CUcontext ctx;
  CUstream s;
  CUdeviceptr d0, d1, d2;
  uint8_t *a, *b;
  CALL("cuInit", 2000, u_fn, 0);
  CALL("cuDeviceGet", 2000, devget_fn, &dev, 0);
  CALL("cuDevicePrimaryCtxRetain", 7000, retain_fn, &ctx, dev);
  CALL("cuCtxSetCurrent", 4000, ctx_fn, ctx);
  CALL("cuMemHostAlloc", 2020, halloc_fn, (void **)&a, REGION, 0);
  CALL("cuMemHostAlloc", 2020, halloc_fn, (void **)&b, REGION, 0);
  CALL("cuMemAlloc", 3020, alloc_fn, &d0, MIB);
  CALL("cuMemAlloc", 3020, alloc_fn, &d1, MIB);
  CALL("cuMemAlloc", 3020, alloc_fn, &d2, MIB);
  CALL("cuStreamCreate", 2000, stream_fn, &s, CU_STREAM_NON_BLOCKING);
  fill(a, REGION, 1);
  fill(b, REGION, 2);
  /* region A ready (IBP_WAIT_READY=1) and served before the capture */
  CALL("cuMemcpyHtoDAsync", 3020, htod_fn, d0, a, MIB, s);
  CALL("cuStreamSynchronize", 2000, sync_fn, s);
  int ok = same(a, d0, MIB);

  CUgraph g;
  CUgraphExec ge;
  CALL("cuStreamBeginCapture", 10010, begin_fn, s,
       CU_STREAM_CAPTURE_MODE_GLOBAL);
  CALL("cuMemcpyHtoDAsync", 3020, htod_fn, d1, a + MIB + 12, MIB, s);
  CALL("cuMemcpyHtoDAsync", 3020, htod_fn, d2, b + 100, MIB, s);
  CALL("cuStreamEndCapture", 10000, end_fn, s, &g);
  /* the graph holds the two copies and nothing of libibp's: no kernel, no
   * event recorded to time a copy (docs/ARCHITECTURE.md, "The gate") */
  typedef CUresult (*nodes_fn)(CUgraph, CUgraphNode *, size_t *);
  size_t nodes = 0;
  CALL("cuGraphGetNodes", 10000, nodes_fn, g, NULL, &nodes);
  if (nodes != 2) {
    fprintf(stderr, "core_capture: the graph has %zu nodes, not the 2 copies\n",
            nodes);
    return 1;
  }
  CALL("cuGraphInstantiateWithFlags", 11040, inst_fn, &ge, g, 0);
  CALL("cuGraphLaunch", 10000, launch_fn, ge, s);
  CALL("cuStreamSynchronize", 2000, sync_fn, s);
  ok = ok && same(a + MIB + 12, d1, MIB) && same(b + 100, d2, MIB);
  printf("core_capture: %s\n", ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
