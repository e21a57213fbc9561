/* The program of stage_e2e.sh: one whole-region copy of a data file.
 *
 *   stage_prog FILE OUT
 *
 * Reads FILE into a pinned buffer (cudaHostAlloc), copies all of it to
 * the device with one cudaMemcpyAsync on the default stream, synchronizes,
 * reads the device bytes back and writes them to OUT.  Prints
 * "stage_prog: ok" when they equal FILE's bytes.  Like discover_prog.c it
 * reaches the runtime with dlopen (libcudart.so.13 from `ibp run --sim`). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HOST_TO_DEVICE = 1, DEVICE_TO_HOST = 2 }; /* cudaMemcpyKind */

static void *need(void *lib, const char *name) {
  void *f = lib ? dlsym(lib, name) : NULL;
  if (!f) {
    fprintf(stderr, "stage_prog: %s: %s\n", name, dlerror());
    exit(2);
  }
  return f;
}

static unsigned char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  unsigned char *b = NULL;
  long n = -1;
  if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 &&
      fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)n)) &&
      fread(b, 1, (size_t)n, f) == (size_t)n) {
    fclose(f);
    *size = (size_t)n;
    return b;
  }
  fprintf(stderr, "stage_prog: cannot read %s\n", path);
  exit(2);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: stage_prog FILE OUT\n");
    return 2;
  }
  void *lib = dlopen("libcudart.so.13", RTLD_NOW);
  int (*alloc)(void **, size_t) = need(lib, "cudaMalloc");
  int (*host_alloc)(void **, size_t, unsigned) = need(lib, "cudaHostAlloc");
  int (*copy_async)(void *, const void *, size_t, int, void *) =
      need(lib, "cudaMemcpyAsync");
  int (*copy)(void *, const void *, size_t, int) = need(lib, "cudaMemcpy");
  int (*sync)(void) = need(lib, "cudaDeviceSynchronize");
  size_t n = 0;
  unsigned char *want = read_file(argv[1], &n);
  void *host = NULL, *dev = NULL;
  unsigned char *back = malloc(n);
  if (host_alloc(&host, n, 0) || alloc(&dev, n) || !back) {
    fprintf(stderr, "stage_prog: allocation failed\n");
    return 3;
  }
  memcpy(host, want, n);
  if (copy_async(dev, host, n, HOST_TO_DEVICE, NULL) || sync() ||
      copy(back, dev, n, DEVICE_TO_HOST)) {
    fprintf(stderr, "stage_prog: a copy failed\n");
    return 3;
  }
  FILE *o = fopen(argv[2], "wb");
  if (!o || fwrite(back, 1, n, o) != n || fclose(o) != 0) {
    fprintf(stderr, "stage_prog: cannot write %s\n", argv[2]);
    return 2;
  }
  int same = memcmp(back, want, n) == 0;
  printf("stage_prog: %s\n", same ? "ok" : "wrong bytes");
  return same ? 0 : 1;
}
