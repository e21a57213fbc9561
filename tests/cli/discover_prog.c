/* The CUDA programs of discover.sh that the samples do not cover:
 *
 *   discover_prog pageable   copies to the device only from pageable
 *                            memory (malloc): the table is empty and says why
 *   discover_prog 2d         copies rows of a 2 MiB pinned buffer with
 *                            cudaMemcpy2D, 3 times: discovery sees each row
 *   discover_prog many [DIR] 80 pinned buffers of varied sizes, each copied
 *                            twice (one min= rule covers them); DIR: see
 *                            varied
 *   discover_prog many-mixed the same after a larger buffer worth no rule
 *                            (a rule each: more than IBP_REGIONS takes)
 *   discover_prog varied [DIR]
 *                            80 pinned buffers of 1 to 2.5 MiB, each copied
 *                            twice, holding bf16 or float32 weights, small
 *                            integers or (one) random bytes; DIR: each
 *                            buffer's bytes are also written to
 *                            DIR/buf<k>.bin (k: 1 to 80, in allocation order)
 *
 * It reaches the runtime with dlopen (the libcudart.so.13 that `ibp run
 * --sim` puts on the library path), so it builds without CUDA headers.
 * Prints "discover_prog: ok" when the bytes arrived. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HOST_TO_DEVICE = 1, DEVICE_TO_HOST = 2 }; /* cudaMemcpyKind */

typedef struct runtime {
  int (*alloc)(void **, size_t);
  int (*host_alloc)(void **, size_t, unsigned);
  int (*copy)(void *, const void *, size_t, int);
  int (*copy_2d)(void *, size_t, const void *, size_t, size_t, size_t, int);
  int (*free_dev)(void *);
  int (*free_host)(void *);
} runtime;

static void *need(void *lib, const char *name) {
  void *f = lib ? dlsym(lib, name) : NULL;
  if (!f) {
    fprintf(stderr, "discover_prog: %s: %s\n", name, dlerror());
    exit(1);
  }
  return f;
}

static void load(runtime *rt) {
  void *lib = dlopen("libcudart.so.13", RTLD_NOW);
  *(void **)&rt->alloc = need(lib, "cudaMalloc");
  *(void **)&rt->host_alloc = need(lib, "cudaHostAlloc");
  *(void **)&rt->copy = need(lib, "cudaMemcpy");
  *(void **)&rt->copy_2d = need(lib, "cudaMemcpy2D");
  *(void **)&rt->free_dev = need(lib, "cudaFree");
  *(void **)&rt->free_host = need(lib, "cudaFreeHost");
}

static int check(const runtime *rt, const void *dev, const unsigned char *want,
                 size_t n) {
  unsigned char *back = malloc(n);
  int ok = back && rt->copy(back, dev, n, DEVICE_TO_HOST) == 0 &&
           memcmp(back, want, n) == 0;
  free(back);
  return ok;
}

/* DIR/buf<k>.bin: the n bytes at p. */
static int save(const char *dir, int k, const void *p, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/buf%d.bin", dir, k);
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(p, 1, n, f) == n;
  if (f && fclose(f) != 0)
    ok = 0;
  return ok ? 0 : 1;
}

/* 80 pinned buffers of 1 MiB + k * 4 KiB, each copied whole twice and
 * freed (bandwidthTest's shmoo mode); `mixed`: first a 2 MiB buffer
 * copied once, larger than all of them (no rule), so that each of them
 * needs a rule of its own.  Their bytes: small integers in 16-bit words,
 * most of their bits the same in every word. */
static int many(const runtime *rt, int mixed, const char *dir) {
  void *dev = NULL;
  const size_t most = (2u << 20);
  if (rt->alloc(&dev, most) != 0)
    return 1;
  for (int k = mixed ? -1 : 0; k < 80; k++) {
    size_t n = k < 0 ? most : (1u << 20) + (size_t)k * 4096;
    unsigned char *host = NULL;
    if (rt->host_alloc((void **)&host, n, 0) != 0)
      return 1;
    for (size_t i = 0; i < n; i += 2) {
      host[i] = (unsigned char)((i * 2654435761u) >> 13) & 0x1f;
      host[i + 1] = (unsigned char)(0x3c | ((i >> 12) & 1));
    }
    if (dir && k >= 0 && save(dir, k + 1, host, n) != 0)
      return 1;
    for (int pass = 0; pass < (k < 0 ? 1 : 2); pass++)
      if (rt->copy(dev, host, n, HOST_TO_DEVICE) != 0)
        return 1;
    if (!check(rt, dev, host, n))
      return 1;
    rt->free_host(host);
  }
  rt->free_dev(dev);
  printf("discover_prog: ok\n");
  return 0;
}

/* ---- varied: buffers nobody tuned for ---------------------------------- */

static uint64_t mix(uint64_t x) { /* splitmix64 */
  x += 0x9e3779b97f4a7c15u;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}

/* Roughly normal, mean 0 and deviation 1 (four uniforms summed). */
static float normal(uint64_t *s) {
  float v = 0;
  for (int i = 0; i < 4; i++)
    v += (float)((*s = mix(*s)) >> 40) / (float)(1u << 24);
  return (v - 2.0f) * 1.7320508f;
}

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* Buffer k's bytes: k 41 random; the others, by a hash of k, bf16 weights
 * of a per-buffer scale, float32 weights, or int32 labels below 200. */
static void fill_varied(unsigned char *p, size_t n, int k) {
  uint64_t s = mix((uint64_t)k * 7919u);
  int kind = k == 41 ? 3 : (int)(mix((uint64_t)k) % 3);
  float scale = 0.01f + (float)(mix((uint64_t)k + 99) % 100) / 1000.0f;
  for (size_t i = 0; i < n;) {
    if (kind == 0) { /* bf16: the float's top half, rounded */
      uint32_t u = float_bits(normal(&s) * scale);
      uint16_t h = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
      memcpy(p + i, &h, 2);
      i += 2;
    } else if (kind == 1) {
      uint32_t u = float_bits(normal(&s) * scale);
      memcpy(p + i, &u, 4);
      i += 4;
    } else if (kind == 2) {
      uint32_t u = (uint32_t)((s = mix(s)) % 200);
      memcpy(p + i, &u, 4);
      i += 4;
    } else {
      uint64_t u = (s = mix(s));
      memcpy(p + i, &u, 8);
      i += 8;
    }
  }
}

/* 80 pinned buffers of 1 MiB + (a hash of k) KiB, below 2.5 MiB, each
 * copied whole twice and freed; their bytes by fill_varied. */
static int varied(const runtime *rt, const char *dir) {
  void *dev = NULL;
  const size_t most = (5u << 19);
  if (rt->alloc(&dev, most) != 0)
    return 1;
  for (int k = 1; k <= 80; k++) {
    size_t n = (1u << 20) + (size_t)(mix((uint64_t)k + 7) % 1536) * 1024;
    unsigned char *host = NULL;
    if (rt->host_alloc((void **)&host, n, 0) != 0)
      return 1;
    fill_varied(host, n, k);
    if (dir && save(dir, k, host, n) != 0)
      return 1;
    for (int pass = 0; pass < 2; pass++)
      if (rt->copy(dev, host, n, HOST_TO_DEVICE) != 0)
        return 1;
    if (!check(rt, dev, host, n))
      return 1;
    rt->free_host(host);
  }
  rt->free_dev(dev);
  printf("discover_prog: ok\n");
  return 0;
}

int main(int argc, char **argv) {
  runtime rt;
  if (argc > 1 && strcmp(argv[1], "varied") == 0) {
    load(&rt);
    int rc = varied(&rt, argc > 2 ? argv[2] : NULL);
    if (rc)
      fprintf(stderr, "discover_prog: varied: failed\n");
    return rc;
  }
  if (argc > 1 && strncmp(argv[1], "many", 4) == 0) {
    load(&rt);
    int rc = many(&rt, strcmp(argv[1], "many-mixed") == 0,
                  argc > 2 ? argv[2] : NULL);
    if (rc)
      fprintf(stderr, "discover_prog: many: failed\n");
    return rc;
  }
  const size_t n = 1 << 21, row = 4096, rows = n / row;
  int two_d = argc > 1 && strcmp(argv[1], "2d") == 0;
  load(&rt);
  unsigned char *host = NULL;
  void *dev = NULL;
  if (two_d ? rt.host_alloc((void **)&host, n, 0) != 0
            : (host = malloc(n)) == NULL)
    host = NULL;
  if (!host || rt.alloc(&dev, n) != 0) {
    fprintf(stderr, "discover_prog: no memory\n");
    return 1;
  }
  for (size_t i = 0; i < n; i++)
    host[i] = (unsigned char)(i * 7 + i / 4096);
  for (int pass = 0; pass < 3; pass++) {
    int rc = two_d ? rt.copy_2d(dev, row, host, row, row, rows, HOST_TO_DEVICE)
                   : rt.copy(dev, host, n, HOST_TO_DEVICE);
    if (rc != 0) {
      fprintf(stderr, "discover_prog: the copy failed (%d)\n", rc);
      return 1;
    }
  }
  if (!check(&rt, dev, host, n)) {
    fprintf(stderr, "discover_prog: wrong bytes\n");
    return 1;
  }
  rt.free_dev(dev);
  if (two_d)
    rt.free_host(host);
  else
    free(host);
  printf("discover_prog: ok\n");
  return 0;
}
