/* The CUDA programs of report.sh (what the IBP_STATS report says of them):
 *
 *   report_prog early MIB MS N  a pinned buffer of MIB MiB copied to the
 *                             device 1 MiB at a time, N copies MS ms apart,
 *                             then freed (while its compression may run);
 *                             a second pinned buffer only ever the target of
 *                             device-to-host copies (bandwidthTest's)
 *   report_prog same N        N pinned buffers of 2 MiB (one rule takes them
 *                             all), each copied whole 3 times
 *   report_prog compact       an 8 MiB buffer copied whole, 64 KiB of its
 *                             middle rewritten, copied whole again (a compact
 *                             region serves that copy in parts)
 *
 * It reaches the runtime with dlopen (the libcudart.so.13 that `ibp run
 * --sim` puts on the library path), so it builds without CUDA headers.
 * Prints "report_prog: ok" when every byte arrived. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { HOST_TO_DEVICE = 1, DEVICE_TO_HOST = 2 }; /* cudaMemcpyKind */
#define MiB ((size_t)1 << 20)

typedef struct runtime {
  int (*alloc)(void **, size_t);
  int (*host_alloc)(void **, size_t, unsigned);
  int (*copy)(void *, const void *, size_t, int);
  int (*free_dev)(void *);
  int (*free_host)(void *);
  int (*copy_2d)(void *, size_t, const void *, size_t, size_t, size_t, int);
} runtime;

static void *need(void *lib, const char *name) {
  void *f = lib ? dlsym(lib, name) : NULL;
  if (!f) {
    fprintf(stderr, "report_prog: %s: %s\n", name, dlerror());
    exit(1);
  }
  return f;
}

static void load(runtime *rt) {
  void *lib = dlopen("libcudart.so.13", RTLD_NOW);
  *(void **)&rt->alloc = need(lib, "cudaMalloc");
  *(void **)&rt->host_alloc = need(lib, "cudaHostAlloc");
  *(void **)&rt->copy = need(lib, "cudaMemcpy");
  *(void **)&rt->free_dev = need(lib, "cudaFree");
  *(void **)&rt->free_host = need(lib, "cudaFreeHost");
  *(void **)&rt->copy_2d = need(lib, "cudaMemcpy2D");
}

/* Small integers in 16-bit words: most bits the same in every word. */
static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i += 2) {
    p[i] = (unsigned char)(((i + seed) * 2654435761u) >> 13) & 0x1f;
    p[i + 1] = (unsigned char)(0x3c | ((i >> 12) & 1));
  }
}

static int same_bytes(const runtime *rt, const void *dev,
                      const unsigned char *want, size_t n) {
  unsigned char *back = malloc(n);
  int ok = back && rt->copy(back, dev, n, DEVICE_TO_HOST) == 0 &&
           memcmp(back, want, n) == 0;
  free(back);
  return ok;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int early(const runtime *rt, size_t mib, long ms, long copies) {
  const size_t n = mib * MiB;
  unsigned char *src = NULL, *dst = NULL;
  void *dev = NULL;
  if (rt->host_alloc((void **)&src, n, 0) ||
      rt->host_alloc((void **)&dst, MiB, 0) || rt->alloc(&dev, MiB))
    return 1;
  fill(src, n, 0);
  for (long k = 0; k < copies; k++) {
    const unsigned char *at = src + (size_t)k % mib * MiB;
    if (rt->copy(dev, at, MiB, HOST_TO_DEVICE) ||
        rt->copy(dst, dev, MiB, DEVICE_TO_HOST) || memcmp(dst, at, MiB))
      return 1;
    sleep_ms(ms);
  }
  rt->free_host(src); /* its compression may still run */
  rt->free_host(dst);
  rt->free_dev(dev);
  return 0;
}

static int same(const runtime *rt, int count) {
  const size_t n = 2 * MiB;
  void *dev = NULL;
  if (rt->alloc(&dev, n))
    return 1;
  for (int k = 0; k < count; k++) {
    unsigned char *host = NULL;
    if (rt->host_alloc((void **)&host, n, 0))
      return 1;
    fill(host, n, (unsigned)k);
    for (int pass = 0; pass < 3; pass++)
      if (rt->copy(dev, host, n, HOST_TO_DEVICE))
        return 1;
    if (!same_bytes(rt, dev, host, n))
      return 1;
    rt->free_host(host);
  }
  rt->free_dev(dev);
  return 0;
}

static int compact(const runtime *rt) {
  const size_t n = 8 * MiB;
  unsigned char *host = NULL;
  void *dev = NULL;
  if (rt->host_alloc((void **)&host, n, 0) || rt->alloc(&dev, n))
    return 1;
  fill(host, n, 7);
  if (rt->copy(dev, host, n, HOST_TO_DEVICE) || !same_bytes(rt, dev, host, n))
    return 1;
  memset(host + n / 2, 0x5a, 64 << 10); /* written: not the shadow's */
  if (rt->copy(dev, host, n, HOST_TO_DEVICE) || !same_bytes(rt, dev, host, n))
    return 1;
  rt->free_host(host);
  rt->free_dev(dev);
  return 0;
}

/* One 2D copy of `rows` rows of 64 KiB at a pitch of 128 KiB from a pinned
 * buffer, made at once (before its region is ready): every row is the
 * driver's, each counted once. */
static int rows_2d(const runtime *rt, int rows) {
  const size_t width = 64 << 10, pitch = 128 << 10, n = pitch * (size_t)rows;
  unsigned char *host = NULL;
  void *dev = NULL;
  if (rows < 1 || rt->host_alloc((void **)&host, n, 0) || rt->alloc(&dev, n))
    return 1;
  fill(host, n, 3);
  if (rt->copy_2d(dev, pitch, host, pitch, width, (size_t)rows, HOST_TO_DEVICE))
    return 1;
  unsigned char *back = malloc(n);
  int ok = back && rt->copy(back, dev, n, DEVICE_TO_HOST) == 0;
  for (int y = 0; ok && y < rows; y++)
    ok = memcmp(back + (size_t)y * pitch, host + (size_t)y * pitch, width) == 0;
  free(back);
  rt->free_host(host);
  rt->free_dev(dev);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  runtime rt;
  int rc = 2;
  load(&rt);
  if (argc == 5 && !strcmp(argv[1], "early"))
    rc = early(&rt, strtoul(argv[2], NULL, 10), strtol(argv[3], NULL, 10),
               strtol(argv[4], NULL, 10));
  else if (argc == 3 && !strcmp(argv[1], "same"))
    rc = same(&rt, atoi(argv[2]));
  else if (argc == 3 && !strcmp(argv[1], "rows"))
    rc = rows_2d(&rt, atoi(argv[2]));
  else if (argc == 2 && !strcmp(argv[1], "compact"))
    rc = compact(&rt);
  else
    fprintf(stderr, "usage: report_prog early MIB MS N | same N | compact\n");
  if (rc == 1)
    fprintf(stderr, "report_prog: %s: failed\n", argv[1]);
  else if (rc == 0)
    printf("report_prog: ok\n");
  return rc;
}
