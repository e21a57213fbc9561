/* CUDA helpers, gathers, timing and result lines of the samples
 * (sample.h).  Compiled with each build variant: the copies of
 * sample_check_device and sample_gather_copy run on that variant's default
 * stream. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

void sample_scrub_device(void *dev, size_t n) {
  CK(cudaMemset(dev, 0xa5, n));
  CK(cudaDeviceSynchronize());
}

/* ---- gathers ------------------------------------------------------------ */

void sample_gather_init(sample_gather *g, size_t cap) {
  *g = (sample_gather){0, cap, sample_alloc(cap * sizeof *g->src),
                       sample_alloc(cap * sizeof *g->len), 0};
}

void sample_gather_free(sample_gather *g) {
  free(g->src);
  free(g->len);
  *g = (sample_gather){0};
}

void sample_gather_reset(sample_gather *g) {
  g->n = 0;
  g->bytes = 0;
}

void sample_gather_add(sample_gather *g, size_t src, size_t len) {
  if (g->n == g->cap)
    abort(); /* a sample sized its gather too small */
  g->src[g->n] = src;
  g->len[g->n++] = len;
  g->bytes += len;
}

void sample_gather_host(const sample_gather *g, const void *host, void *dst) {
  uint8_t *out = dst;
  for (size_t k = 0; k < g->n; out += g->len[k], k++)
    memcpy(out, (const uint8_t *)host + g->src[k], g->len[k]);
}

void sample_gather_copy(const sample_gather *g, void *dev, const void *host,
                        cudaStream_t stream) {
  uint8_t *out = dev;
  for (size_t k = 0; k < g->n; out += g->len[k], k++)
    CK(cudaMemcpyAsync(out, (const uint8_t *)host + g->src[k], g->len[k],
                       cudaMemcpyHostToDevice, stream));
}

size_t sample_gather_piece(const sample_gather *g, size_t at, size_t *within) {
  size_t k = 0;
  while (k + 1 < g->n && at >= g->len[k])
    at -= g->len[k++];
  *within = at;
  return k;
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
  sample_print_kv(quiet, "h2d_seconds", "%.9f", seconds);
  printf("throughput_gbps=%.3f\n",
         seconds > 0 ? (double)bytes / seconds / 1e9 : 0.0);
}

void sample_timer_begin(sample_timer *t, const cudaStream_t *streams,
                        size_t n) {
  if (n < 1 || n > 1 + sizeof t->join / sizeof t->join[0])
    sample_usage_error("sample_timer: %zu streams", n);
  CK(cudaEventCreate(&t->start));
  CK(cudaEventCreate(&t->stop));
  for (size_t i = 1; i < n; i++)
    CK(cudaEventCreateWithFlags(&t->join[i - 1], cudaEventDisableTiming));
  CK(cudaEventRecord(t->start, streams[0]));
  for (size_t i = 1; i < n; i++)
    CK(cudaStreamWaitEvent(streams[i], t->start, 0));
}

double sample_timer_end(sample_timer *t, const cudaStream_t *streams,
                        size_t n) {
  for (size_t i = 1; i < n; i++) {
    CK(cudaEventRecord(t->join[i - 1], streams[i]));
    CK(cudaStreamWaitEvent(streams[0], t->join[i - 1], 0));
  }
  CK(cudaEventRecord(t->stop, streams[0]));
  CK(cudaEventSynchronize(t->stop));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, t->start, t->stop));
  CK(cudaEventDestroy(t->start));
  CK(cudaEventDestroy(t->stop));
  for (size_t i = 1; i < n; i++)
    CK(cudaEventDestroy(t->join[i - 1]));
  return (double)ms / 1e3;
}

double sample_gather_timed(const sample_gather *g, void *dev,
                           const void *host) {
  sample_scrub_device(dev, g->bytes);
  const cudaStream_t stream = 0;
  sample_timer t;
  sample_timer_begin(&t, &stream, 1);
  sample_gather_copy(g, dev, host, stream);
  return sample_timer_end(&t, &stream, 1);
}
