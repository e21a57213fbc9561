/* CUDA helpers, timing and result lines of the samples (sample.h).
 * Compiled with each build variant: the copy in sample_check_device runs on
 * that variant's default stream. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "sample.h"

#define CHECK_PIECE (8u << 20)

void sample_check(cudaError_t err, const char *call) {
  if (err == cudaSuccess)
    return;
  fprintf(stderr, "%s: %.*s failed: %s (%s)\n", sample_prog,
          (int)strcspn(call, "("), call, cudaGetErrorString(err),
          cudaGetErrorName(err));
  exit(SAMPLE_EXIT_CUDA);
}

static const char *const pin_names[] = {"hostalloc", "mallochost", "register"};

sample_pin sample_pin_parse(const char *s) {
  for (int i = 0; i < 3; i++) {
    if (strcmp(s, pin_names[i]) == 0)
      return (sample_pin)i;
  }
  sample_usage_error("--pin must be hostalloc, mallochost or register "
                     "(got '%s')",
                     s);
}

const char *sample_pin_name(sample_pin p) {
  return pin_names[p];
}

static void out_of_memory(size_t bytes) {
  fprintf(stderr, "%s: cannot map %zu bytes of host memory\n", sample_prog,
          bytes);
  exit(SAMPLE_EXIT_USAGE);
}

void *sample_pinned_alloc(size_t bytes, sample_pin how) {
  void *p = NULL;
  switch (how) {
  case SAMPLE_PIN_HOSTALLOC:
    CK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
    break;
  case SAMPLE_PIN_MALLOCHOST:
    CK(cudaMallocHost(&p, bytes));
    break;
  case SAMPLE_PIN_REGISTER:
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
             -1, 0);
    if (p == MAP_FAILED)
      out_of_memory(bytes);
    CK(cudaHostRegister(p, bytes, cudaHostRegisterDefault));
    break;
  }
  return p;
}

void sample_pinned_free(void *p, size_t bytes, sample_pin how) {
  if (how == SAMPLE_PIN_REGISTER) {
    CK(cudaHostUnregister(p));
    munmap(p, bytes);
  } else {
    CK(cudaFreeHost(p));
  }
}

size_t sample_check_device(const void *dev, const void *expected, size_t n,
                           uint64_t *fnv, uint8_t *got) {
  static uint8_t *piece;
  if (piece == NULL && (piece = malloc(CHECK_PIECE)) == NULL)
    out_of_memory(CHECK_PIECE);
  const uint8_t *want = expected;
  for (size_t off = 0; off < n; off += CHECK_PIECE) {
    size_t len = n - off < CHECK_PIECE ? n - off : CHECK_PIECE;
    CK(cudaMemcpy(piece, (const uint8_t *)dev + off, len,
                  cudaMemcpyDeviceToHost));
    *fnv = sample_fnv1a(*fnv, piece, len);
    if (memcmp(piece, want + off, len) != 0) {
      size_t i = 0;
      while (piece[i] == want[off + i])
        i++;
      *got = piece[i];
      return off + i;
    }
  }
  return SIZE_MAX;
}

double sample_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sample_print_ok(uint64_t bytes, uint64_t copies, uint64_t checksum) {
  printf("%s: ok bytes=%llu copies=%llu checksum=0x%016llx\n", sample_prog,
         (unsigned long long)bytes, (unsigned long long)copies,
         (unsigned long long)checksum);
}

void sample_print_kv(int quiet, const char *key, const char *fmt, ...) {
  if (quiet)
    return;
  va_list ap;
  va_start(ap, fmt);
  printf("%s=", key);
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
}

void sample_print_device(int quiet) {
  struct cudaDeviceProp prop;
  int dev = 0;
  if (quiet)
    return;
  CK(cudaGetDevice(&dev));
  CK(cudaGetDeviceProperties(&prop, dev));
  printf("device=%s\n", prop.name);
}

void sample_print_throughput(int quiet, uint64_t bytes, double seconds) {
  sample_print_kv(quiet, "timed_bytes", "%llu", (unsigned long long)bytes);
  sample_print_kv(quiet, "h2d_seconds", "%.6f", seconds);
  printf("throughput_gbps=%.3f\n",
         seconds > 0 ? (double)bytes / seconds / 1e9 : 0.0);
}
