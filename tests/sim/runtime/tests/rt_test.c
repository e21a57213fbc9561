/* A CUDA host program exercising the runtime calls our samples use, with byte
 * checks.  Plain C against the toolkit's cuda_runtime_api.h; built four ways
 * (shared libcudart.so.13 or the static archive, legacy or per-thread default
 * stream via -DCUDA_API_PER_THREAD_DEFAULT_STREAM, which renames e.g.
 * cudaMemcpyAsync to cudaMemcpyAsync_ptsz).  It would run the same on
 * NVIDIA's runtime and driver.
 *
 *   rt_test             the full suite; exit 0 = pass, 1 = failures
 *   rt_test --no-driver checks the runtime's answers when libcuda.so.1 is
 *                       missing (exit 77 when one can be loaded)
 *   rt_test --no-device the answers when the driver finds no device
 *   rt_test --faults    sticky and ordinary errors, with the simulated
 *                       driver's fault injection (see run_faults)
 *
 * 2D copies (pitches unlike the width, every kind, synchronous and on a
 * stream) and batches (mixed directions in one cudaMemcpyBatchAsync, sources
 * read during the call) have their own sections, with the error codes the
 * CUDA documentation gives for bad arguments.
 *
 * Sections that need a host function to block a stream (the default-stream
 * semantics) use a gate that opens by itself after GATE_TIMEOUT_MS, so a
 * driver that runs host functions synchronously fails instead of hanging. */
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#define PTDS 1
#define MODE "per-thread default stream"
#else
#define PTDS 0
#define MODE "legacy default stream"
#endif

static atomic_int failures;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      atomic_fetch_add(&failures, 1);                                          \
    }                                                                          \
  } while (0)

#define EXPECT(call, want)                                                     \
  do {                                                                         \
    cudaError_t got_ = (call);                                                 \
    if (got_ != (want)) {                                                      \
      fprintf(stderr, "%s:%d: %s returned %s (%s), expected %s\n", __FILE__,   \
              __LINE__, #call, cudaGetErrorName(got_),                         \
              cudaGetErrorString(got_), cudaGetErrorName(want));               \
      atomic_fetch_add(&failures, 1);                                          \
    }                                                                          \
  } while (0)

#define CK(call) EXPECT(call, cudaSuccess)

/* ---- helpers ------------------------------------------------------------- */

static void fill(void *buf, size_t n, uint64_t seed) {
  unsigned char *p = buf;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = (unsigned char)x;
  }
}

/* memcmp with a report of the first differing byte. */
static int same(const void *a, const void *b, size_t n, const char *what) {
  const unsigned char *x = a, *y = b;
  for (size_t i = 0; i < n; i++) {
    if (x[i] != y[i]) {
      fprintf(stderr, "  %s: byte %zu of %zu differs (0x%02x vs 0x%02x)\n",
              what, i, n, x[i], y[i]);
      return 0;
    }
  }
  return 1;
}

static int all_bytes(const void *a, int value, size_t n) {
  const unsigned char *x = a;
  for (size_t i = 0; i < n; i++)
    if (x[i] != (unsigned char)value)
      return 0;
  return 1;
}

static char *dev_at(void *base, size_t off) {
  return (char *)base + off;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

#define GATE_TIMEOUT_MS 5000

/* A host function that blocks its stream until opened (or until the timeout,
 * which counts as a failure). */
struct gate {
  atomic_int open;
  atomic_int entered;
  atomic_int timed_out;
};

static void CUDART_CB gate_fn(void *arg) {
  struct gate *g = arg;
  atomic_store(&g->entered, 1);
  for (int waited = 0; !atomic_load(&g->open); waited++) {
    if (waited >= GATE_TIMEOUT_MS) {
      atomic_store(&g->timed_out, 1);
      return;
    }
    sleep_ms(1);
  }
}

static void gate_close(struct gate *g) {
  atomic_store(&g->open, 0);
  atomic_store(&g->entered, 0);
  atomic_store(&g->timed_out, 0);
}

static void gate_open(struct gate *g) {
  atomic_store(&g->open, 1);
}

/* 1 when `ev` completes within `ms` milliseconds. */
static int completes_within(cudaEvent_t ev, int ms) {
  for (int i = 0; i <= ms; i++) {
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaSuccess)
      return 1;
    if (e != cudaErrorNotReady) {
      fprintf(stderr, "  cudaEventQuery: %s\n", cudaGetErrorName(e));
      return 0;
    }
    sleep_ms(1);
  }
  return 0;
}

/* ---- versions and devices
 * ------------------------------------------------------- */

static int device_count;

static void test_versions_devices(void) {
  int v = -1;
  CK(cudaRuntimeGetVersion(&v));
  CHECK(v == 13000);
  v = -1;
  CK(cudaDriverGetVersion(&v));
  CHECK(v >= 13000);
  CK(cudaGetDeviceCount(&device_count));
  CHECK(device_count >= 1);
  int dev = -1;
  CK(cudaGetDevice(&dev));
  CHECK(dev == 0);
  CK(cudaSetDevice(0));

  struct cudaDeviceProp prop;
  memset(&prop, 0xff, sizeof prop);
  CK(cudaGetDeviceProperties(&prop, 0));
  CHECK(prop.name[0] != '\0' && memchr(prop.name, '\0', sizeof prop.name));
  CHECK(prop.totalGlobalMem > 0);
  CHECK(prop.major >= 1);
  CHECK(prop.warpSize == 32);
  CHECK(prop.multiProcessorCount >= 1);
  CHECK(prop.maxThreadsPerBlock >= 32);
  CHECK(prop.unifiedAddressing == 1);
  int attr = -1;
  CK(cudaDeviceGetAttribute(&attr, cudaDevAttrComputeCapabilityMajor, 0));
  CHECK(attr == prop.major);
  CK(cudaDeviceGetAttribute(&attr, cudaDevAttrComputeCapabilityMinor, 0));
  CHECK(attr == prop.minor);
  CK(cudaDeviceGetAttribute(&attr, cudaDevAttrMultiProcessorCount, 0));
  CHECK(attr == prop.multiProcessorCount);
  CK(cudaDeviceGetAttribute(&attr, cudaDevAttrWarpSize, 0));
  CHECK(attr == 32);

  size_t free_b = 0, total_b = 0;
  CK(cudaMemGetInfo(&free_b, &total_b));
  CHECK(total_b > 0 && free_b <= total_b);
  CK(cudaSetDeviceFlags(cudaDeviceScheduleAuto));
  unsigned int dflags = 0;
  CK(cudaGetDeviceFlags(&dflags));
  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CHECK(greatest <= least);
}

/* ---- synchronous copies
 * ------------------------------------------------------- */

static void roundtrip_sync(size_t n, size_t off) {
  unsigned char *src = malloc(n + off), *dst = malloc(n + off),
                *dst2 = malloc(n);
  void *da = NULL, *db = NULL;
  CK(cudaMalloc(&da, n + off));
  CK(cudaMalloc(&db, n + off));
  if (!src || !dst || !dst2 || !da || !db) {
    CHECK(!"allocation");
    goto out;
  }
  fill(src, n + off, n ^ off);
  /* H2D, D2D, D2H at an odd device offset */
  CK(cudaMemcpy(dev_at(da, off), src, n, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, dev_at(da, off), n, cudaMemcpyDeviceToDevice));
  memset(dst, 0, n);
  CK(cudaMemcpy(dst, db, n, cudaMemcpyDeviceToHost));
  CHECK(same(src, dst, n, "H2D/D2D/D2H"));
  /* H2H */
  memset(dst2, 0, n);
  CK(cudaMemcpy(dst2, src + off, n, cudaMemcpyHostToHost));
  CHECK(same(src + off, dst2, n, "H2H"));
  /* cudaMemcpyDefault in every direction */
  fill(src, n + off, n + 7);
  CK(cudaMemcpy(da, src, n, cudaMemcpyDefault));
  CK(cudaMemcpy(dev_at(db, off), da, n, cudaMemcpyDefault));
  memset(dst, 0, n + off);
  CK(cudaMemcpy(dst + off, dev_at(db, off), n, cudaMemcpyDefault));
  CHECK(same(src, dst + off, n, "Default H->D->D->H"));
  memset(dst2, 0, n);
  CK(cudaMemcpy(dst2, dst + off, n, cudaMemcpyDefault));
  CHECK(same(src, dst2, n, "Default H->H"));
out:
  cudaFree(da);
  cudaFree(db);
  free(src);
  free(dst);
  free(dst2);
}

static void test_sync_copies(void) {
  static const size_t sizes[] = {1, 3, 64, 4096 + 7, (1u << 20) + 13};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    roundtrip_sync(sizes[i], 0);
    roundtrip_sync(sizes[i], 5);
  }
  /* a zero-byte copy succeeds without touching anything */
  CK(cudaMemcpy(NULL, NULL, 0, cudaMemcpyHostToDevice));
}

/* ---- memset
 * --------------------------------------------------------------------- */

static void test_memset(void) {
  const size_t n = 100000;
  unsigned char *h = malloc(n);
  void *d = NULL;
  cudaStream_t s = NULL;
  CK(cudaMalloc(&d, n));
  CK(cudaStreamCreate(&s));
  if (!h || !d || !s) {
    CHECK(!"allocation");
    goto out;
  }
  CK(cudaMemset(d, 0x1AB, n)); /* only the low byte counts */
  CK(cudaMemset(dev_at(d, 10), 0x11, 20));
  CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
  CHECK(all_bytes(h, 0xAB, 10));
  CHECK(all_bytes(h + 10, 0x11, 20));
  CHECK(all_bytes(h + 30, 0xAB, n - 30));
  CK(cudaMemsetAsync(d, 0x5A, n, s));
  CK(cudaMemsetAsync(dev_at(d, n - 1), 0, 1, s));
  CK(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s));
  CK(cudaStreamSynchronize(s));
  CHECK(all_bytes(h, 0x5A, n - 1) && h[n - 1] == 0);
  CK(cudaMemset(d, 0x77, 0));
out:
  if (s)
    cudaStreamDestroy(s);
  cudaFree(d);
  free(h);
}

/* ---- pinned and registered memory, pointer attributes
 * --------------------------- */

static void check_attributes(const void *p, enum cudaMemoryType type,
                             const char *what) {
  struct cudaPointerAttributes a;
  memset(&a, 0x5c, sizeof a);
  CK(cudaPointerGetAttributes(&a, p));
  if (a.type != type) {
    fprintf(stderr, "  %s: pointer type %d, expected %d\n", what, (int)a.type,
            (int)type);
    CHECK(a.type == type);
  }
  if (type == cudaMemoryTypeDevice) {
    CHECK(a.device == 0);
    CHECK(a.devicePointer == p);
    CHECK(a.hostPointer == NULL);
  }
  if (type == cudaMemoryTypeHost) {
    CHECK(a.device == 0);
    CHECK(a.hostPointer == p);
    CHECK(a.devicePointer != NULL);
  }
}

static void test_pinned(void) {
  const size_t n = (1u << 20) + 321;
  unsigned char *ph = NULL, *pm = NULL, *back = malloc(n);
  void *d = NULL;
  CK(cudaMalloc(&d, n));
  CK(cudaMallocHost((void **)&ph, n));
  CK(cudaHostAlloc((void **)&pm, n,
                   cudaHostAllocMapped | cudaHostAllocPortable));
  if (!ph || !pm || !back || !d) {
    CHECK(!"allocation");
    goto out;
  }
  fill(ph, n, 11);
  CK(cudaMemcpy(d, ph, n, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(pm, d, n, cudaMemcpyDeviceToHost));
  CHECK(same(ph, pm, n, "pinned H2D/D2H"));

  unsigned int flags = 0;
  CK(cudaHostGetFlags(&flags, pm));
  CHECK(flags & cudaHostAllocMapped);
  void *alias = NULL;
  CK(cudaHostGetDevicePointer(&alias, pm, 0));
  CHECK(alias != NULL);
  /* the device alias of mapped memory is a valid copy endpoint */
  fill(back, n, 12);
  CK(cudaMemcpy(d, back, n, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(alias, d, n, cudaMemcpyDefault));
  CHECK(same(back, pm, n, "D2D into mapped alias"));

  check_attributes(d, cudaMemoryTypeDevice, "cudaMalloc");
  check_attributes(dev_at(d, 100), cudaMemoryTypeDevice, "cudaMalloc + 100");
  check_attributes(ph, cudaMemoryTypeHost, "cudaMallocHost");
  check_attributes(pm, cudaMemoryTypeHost, "cudaHostAlloc");
  check_attributes(back, cudaMemoryTypeUnregistered, "malloc");

  /* registered pageable memory: page-aligned and not */
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char *raw = NULL;
  CHECK(posix_memalign((void **)&raw, page, n + page) == 0);
  if (raw) {
    for (int k = 0; k < 2; k++) {
      unsigned char *r = raw + (k ? 100 : 0);
      size_t len = n - 100;
      CK(cudaHostRegister(r, len, cudaHostRegisterDefault));
      check_attributes(r, cudaMemoryTypeHost, "cudaHostRegister");
      EXPECT(cudaHostRegister(r, len, cudaHostRegisterDefault),
             cudaErrorHostMemoryAlreadyRegistered);
      EXPECT(cudaGetLastError(), cudaErrorHostMemoryAlreadyRegistered);
      fill(r, len, 13 + (unsigned)k);
      CK(cudaMemcpy(d, r, len, cudaMemcpyHostToDevice));
      memset(back, 0, len);
      CK(cudaMemcpy(back, d, len, cudaMemcpyDefault));
      CHECK(same(r, back, len, "registered H2D"));
      CK(cudaHostUnregister(r));
      check_attributes(r, cudaMemoryTypeUnregistered,
                       "after cudaHostUnregister");
    }
    EXPECT(cudaHostUnregister(raw), cudaErrorHostMemoryNotRegistered);
    EXPECT(cudaGetLastError(), cudaErrorHostMemoryNotRegistered);
    CK(cudaHostRegister(raw, n,
                        cudaHostRegisterMapped | cudaHostRegisterPortable));
    void *ralias = NULL;
    CK(cudaHostGetDevicePointer(&ralias, raw, 0));
    CHECK(ralias != NULL);
    CK(cudaHostUnregister(raw));
    free(raw);
  }
  CK(cudaFreeHost(NULL));
out:
  cudaFreeHost(ph);
  cudaFreeHost(pm);
  cudaFree(d);
  free(back);
}

/* ---- asynchronous copies on several streams
 * ------------------------------------- */

#define NSTREAMS 4

static void test_async_streams(void) {
  const size_t n = (4u << 20) + 99;
  cudaStream_t s[NSTREAMS] = {0};
  unsigned char *src[NSTREAMS] = {0}, *dst[NSTREAMS] = {0};
  void *da[NSTREAMS] = {0}, *db[NSTREAMS] = {0};
  int ok = 1;
  for (int i = 0; i < NSTREAMS; i++) {
    if (i == 1)
      CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    else if (i == 2)
      CK(cudaStreamCreateWithPriority(&s[i], cudaStreamDefault, 0));
    else
      CK(cudaStreamCreate(&s[i]));
    CK(cudaMallocHost((void **)&src[i], n));
    CK(cudaMallocHost((void **)&dst[i], n));
    CK(cudaMalloc(&da[i], n));
    CK(cudaMalloc(&db[i], n));
    ok = ok && s[i] && src[i] && dst[i] && da[i] && db[i];
  }
  if (!ok) {
    CHECK(!"allocation");
    goto out;
  }
  unsigned int flags = 99;
  CK(cudaStreamGetFlags(s[1], &flags));
  CHECK(flags == cudaStreamNonBlocking);
  int prio = 99;
  CK(cudaStreamGetPriority(s[2], &prio));

  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < NSTREAMS; i++) {
      fill(src[i], n, (uint64_t)(round * 16 + i));
      memset(dst[i], 0, n);
      CK(cudaMemcpyAsync(da[i], src[i], n, cudaMemcpyHostToDevice, s[i]));
      CK(cudaMemsetAsync(dev_at(da[i], 1000), 0xEE, 77, s[i]));
      CK(cudaMemcpyAsync(db[i], da[i], n, cudaMemcpyDeviceToDevice, s[i]));
      /* a later copy into the same bytes must win: stream order */
      CK(cudaMemcpyAsync(dev_at(db[i], 5000), src[i], 4096,
                         cudaMemcpyHostToDevice, s[i]));
      CK(cudaMemcpyAsync(dst[i], db[i], n, cudaMemcpyDefault, s[i]));
    }
    for (int i = 0; i < NSTREAMS; i++) {
      CK(cudaStreamSynchronize(s[i]));
      CK(cudaStreamQuery(s[i]));
      memmove(src[i] + 5000, src[i], 4096);
      memset(src[i] + 1000, 0xEE, 77);
      CHECK(same(src[i], dst[i], n, "async stream round"));
    }
  }

  /* cross-stream order through an event: s0 produces, s1 consumes */
  cudaEvent_t ev = NULL;
  CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  fill(src[0], n, 4242);
  memset(dst[1], 0, n);
  CK(cudaMemcpyAsync(da[0], src[0], n, cudaMemcpyHostToDevice, s[0]));
  CK(cudaEventRecord(ev, s[0]));
  CK(cudaStreamWaitEvent(s[1], ev, 0));
  CK(cudaMemcpyAsync(db[1], da[0], n, cudaMemcpyDeviceToDevice, s[1]));
  CK(cudaMemcpyAsync(dst[1], db[1], n, cudaMemcpyDeviceToHost, s[1]));
  CK(cudaStreamSynchronize(s[1]));
  CHECK(same(src[0], dst[1], n, "event-ordered streams"));
  CK(cudaEventDestroy(ev));

  /* pageable async copies and the default stream */
  unsigned char *pg = malloc(n), *pg2 = malloc(n);
  if (pg && pg2) {
    fill(pg, n, 77);
    CK(cudaMemcpyAsync(da[3], pg, n, cudaMemcpyHostToDevice, 0));
    CK(cudaMemcpyAsync(pg2, da[3], n, cudaMemcpyDeviceToHost, 0));
    CK(cudaStreamSynchronize(0));
    CHECK(same(pg, pg2, n, "pageable async on stream 0"));
    fill(pg, n, 78);
    cudaStream_t special = PTDS ? cudaStreamPerThread : cudaStreamLegacy;
    CK(cudaMemcpyAsync(da[3], pg, n, cudaMemcpyHostToDevice, special));
    CK(cudaMemcpyAsync(pg2, da[3], n, cudaMemcpyDefault, special));
    CK(cudaStreamSynchronize(special));
    CHECK(same(pg, pg2, n, "async on the named default stream"));
  }
  free(pg);
  free(pg2);
  CK(cudaDeviceSynchronize());
out:
  for (int i = 0; i < NSTREAMS; i++) {
    if (s[i])
      CK(cudaStreamDestroy(s[i]));
    cudaFreeHost(src[i]);
    cudaFreeHost(dst[i]);
    cudaFree(da[i]);
    cudaFree(db[i]);
  }
}

/* ---- events and timing
 * ------------------------------------------------------------ */

static void test_events(void) {
  const size_t n = 8u << 20;
  cudaEvent_t start = NULL, stop = NULL, untimed = NULL, fresh = NULL;
  cudaStream_t s = NULL;
  void *d = NULL, *h = NULL;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreateWithFlags(&stop, cudaEventBlockingSync));
  CK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
  CK(cudaEventCreate(&fresh));
  CK(cudaStreamCreate(&s));
  CK(cudaMalloc(&d, n));
  CK(cudaMallocHost(&h, n));
  if (!start || !stop || !untimed || !fresh || !s || !d || !h) {
    CHECK(!"allocation");
    goto out;
  }
  fill(h, n, 5);
  CK(cudaEventRecord(start, s));
  for (int i = 0; i < 4; i++)
    CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
  CK(cudaEventRecord(stop, s));
  CK(cudaEventRecordWithFlags(untimed, s, cudaEventRecordDefault));
  CK(cudaEventSynchronize(stop));
  CK(cudaEventQuery(stop));
  CK(cudaEventQuery(start));
  float ms = -1.0f;
  CK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(ms >= 0.0f);
  printf("  4 x %zu MiB H2D (pinned): %.3f ms\n", n >> 20, (double)ms);
  CK(cudaEventSynchronize(untimed));
  EXPECT(cudaEventElapsedTime(&ms, start, untimed),
         cudaErrorInvalidResourceHandle);
  EXPECT(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  /* an event never recorded has no pending work */
  CK(cudaEventQuery(fresh));
  CK(cudaEventSynchronize(fresh));
  EXPECT(cudaEventElapsedTime(&ms, fresh, stop),
         cudaErrorInvalidResourceHandle);
  EXPECT(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  /* recording on the default stream */
  CK(cudaEventRecord(start, 0));
  CK(cudaEventSynchronize(start));
out:
  if (start)
    CK(cudaEventDestroy(start));
  if (stop)
    CK(cudaEventDestroy(stop));
  if (untimed)
    CK(cudaEventDestroy(untimed));
  if (fresh)
    CK(cudaEventDestroy(fresh));
  if (s)
    CK(cudaStreamDestroy(s));
  cudaFree(d);
  cudaFreeHost(h);
}

/* ---- queries on blocked work; cudaErrorNotReady is not an error
 * -------------------- */

static void test_not_ready(void) {
  const size_t n = 1u << 16;
  static struct gate g;
  cudaStream_t s = NULL;
  cudaEvent_t ev = NULL;
  void *d = NULL;
  unsigned char *h = NULL, *back = NULL;
  CK(cudaStreamCreate(&s));
  CK(cudaEventCreate(&ev));
  CK(cudaMalloc(&d, n));
  CK(cudaMallocHost((void **)&h, n));
  CK(cudaMallocHost((void **)&back, n));
  if (!s || !ev || !d || !h || !back) {
    CHECK(!"allocation");
    goto out;
  }
  (void)cudaGetLastError();
  fill(h, n, 9);
  gate_close(&g);
  CK(cudaLaunchHostFunc(s, gate_fn, &g));
  CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
  CK(cudaMemcpyAsync(back, d, n, cudaMemcpyDeviceToHost, s));
  CK(cudaEventRecord(ev, s));
  EXPECT(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT(cudaEventQuery(ev), cudaErrorNotReady);
  EXPECT(cudaPeekAtLastError(), cudaSuccess);
  EXPECT(cudaGetLastError(), cudaSuccess);
  gate_open(&g);
  CK(cudaStreamSynchronize(s));
  CHECK(!atomic_load(&g.timed_out));
  CK(cudaStreamQuery(s));
  CK(cudaEventQuery(ev));
  CHECK(same(h, back, n, "copies behind a host function"));
out:
  if (s)
    cudaStreamDestroy(s);
  if (ev)
    cudaEventDestroy(ev);
  cudaFree(d);
  cudaFreeHost(h);
  cudaFreeHost(back);
}

/* ---- default stream semantics
 * ------------------------------------------------------ */

struct worker {
  pthread_t tid;
  uint64_t seed;
  atomic_int done;
  struct gate *gate; /* when set: block this thread's stream 0 with it */
};

/* Copies through stream 0 of its own thread and checks the bytes. */
static void *stream0_worker(void *arg) {
  struct worker *w = arg;
  const size_t n = (1u << 20) + 17;
  unsigned char *h = malloc(n), *back = malloc(n);
  void *d = NULL;
  CK(cudaMalloc(&d, n));
  if (h && back && d) {
    for (int round = 0; round < 4; round++) {
      fill(h, n, w->seed + (uint64_t)round);
      memset(back, 0, n);
      CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, 0));
      CK(cudaMemsetAsync(d, 0x3C, 64, 0));
      CK(cudaMemcpyAsync(back, d, n, cudaMemcpyDeviceToHost, 0));
      CK(cudaStreamSynchronize(0));
      memset(h, 0x3C, 64);
      CHECK(same(h, back, n, "stream-0 worker"));
      CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost));
      CHECK(same(h, back, n, "stream-0 worker (sync)"));
    }
  } else {
    CHECK(!"allocation");
  }
  /* done before cudaFree, which waits for all work on the device */
  atomic_store(&w->done, 1);
  cudaFree(d);
  free(h);
  free(back);
  return NULL;
}

static void *blocker(void *arg) {
  struct worker *w = arg;
  CK(cudaLaunchHostFunc(0, gate_fn, w->gate));
  atomic_store(&w->done, 1);
  return NULL;
}

static int done_within(struct worker *w, int ms) {
  for (int i = 0; i <= ms; i++) {
    if (atomic_load(&w->done))
      return 1;
    sleep_ms(1);
  }
  return 0;
}

static void test_default_streams(void) {
  /* (a) several threads, each through stream 0 */
  struct worker w[4];
  memset(w, 0, sizeof w);
  for (int i = 0; i < 4; i++) {
    w[i].seed = 1000 + (uint64_t)i;
    CHECK(pthread_create(&w[i].tid, NULL, stream0_worker, &w[i]) == 0);
  }
  for (int i = 0; i < 4; i++)
    pthread_join(w[i].tid, NULL);

  /* (b) another thread's stream 0 is blocked: ours is the same stream
   * (legacy) or an independent one (per-thread) */
  static struct gate g;
  gate_close(&g);
  struct worker b = {0}, c = {0};
  b.gate = &g;
  CHECK(pthread_create(&b.tid, NULL, blocker, &b) == 0);
  pthread_join(b.tid, NULL);
  c.seed = 55;
  CHECK(pthread_create(&c.tid, NULL, stream0_worker, &c) == 0);
  if (PTDS) {
    if (!done_within(&c, GATE_TIMEOUT_MS / 2)) {
      fprintf(stderr,
              "  per-thread stream 0 waited for another thread's stream 0\n");
      CHECK(!"independent per-thread default streams");
    }
  } else {
    if (done_within(&c, 300)) {
      fprintf(
          stderr,
          "  legacy stream 0 did not wait for another thread's work on it\n");
      CHECK(!"one legacy default stream");
    }
  }
  gate_open(&g);
  pthread_join(c.tid, NULL);
  CK(cudaDeviceSynchronize());
  CHECK(!atomic_load(&g.timed_out));

  /* (c) implicit synchronization with blocking streams */
  cudaStream_t blocking = NULL, nonblocking = NULL;
  cudaEvent_t eb = NULL, en = NULL, e0 = NULL;
  void *d = NULL;
  CK(cudaStreamCreate(&blocking));
  CK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
  CK(cudaEventCreateWithFlags(&eb, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&en, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&e0, cudaEventDisableTiming));
  CK(cudaMalloc(&d, 4096));
  if (!blocking || !nonblocking || !eb || !en || !e0 || !d) {
    CHECK(!"allocation");
    return;
  }
  /* work on stream 0 first: a blocking stream waits for it only if stream 0
   * is the legacy stream */
  gate_close(&g);
  CK(cudaLaunchHostFunc(0, gate_fn, &g));
  CK(cudaMemsetAsync(d, 1, 1024, blocking)); /* disjoint bytes per stream */
  CK(cudaEventRecord(eb, blocking));
  CK(cudaMemsetAsync(dev_at(d, 1024), 2, 1024, nonblocking));
  CK(cudaEventRecord(en, nonblocking));
  CHECK(completes_within(en, GATE_TIMEOUT_MS / 2));
  if (PTDS) {
    if (!completes_within(eb, GATE_TIMEOUT_MS / 2)) {
      fprintf(stderr,
              "  a blocking stream waited for the per-thread default stream\n");
      CHECK(!"per-thread stream does not block other streams");
    }
  } else if (completes_within(eb, 300)) {
    fprintf(stderr,
            "  a blocking stream did not wait for the legacy default stream\n");
    CHECK(!"legacy stream blocks blocking streams");
  }
  gate_open(&g);
  CK(cudaDeviceSynchronize());
  CHECK(!atomic_load(&g.timed_out));

  /* work on a blocking stream first: stream 0 waits for it only if stream 0
   * is the legacy stream */
  gate_close(&g);
  CK(cudaLaunchHostFunc(blocking, gate_fn, &g));
  CK(cudaMemsetAsync(dev_at(d, 2048), 3, 1024, 0));
  CK(cudaEventRecord(e0, 0));
  if (PTDS) {
    if (!completes_within(e0, GATE_TIMEOUT_MS / 2)) {
      fprintf(stderr,
              "  the per-thread default stream waited for a blocking stream\n");
      CHECK(!"per-thread stream is not synchronizing");
    }
  } else if (completes_within(e0, 300)) {
    fprintf(stderr, "  the legacy stream did not wait for a blocking stream\n");
    CHECK(!"legacy stream waits for blocking streams");
  }
  gate_open(&g);
  CK(cudaDeviceSynchronize());
  CHECK(!atomic_load(&g.timed_out));

  cudaStreamDestroy(blocking);
  cudaStreamDestroy(nonblocking);
  cudaEventDestroy(eb);
  cudaEventDestroy(en);
  cudaEventDestroy(e0);
  cudaFree(d);
}

/* ---- error paths
 * ----------------------------------------------------------------- */

static void *error_thread(void *arg) {
  (void)arg;
  EXPECT(cudaMemcpy(NULL, NULL, 1, (enum cudaMemcpyKind)7),
         cudaErrorInvalidMemcpyDirection);
  EXPECT(cudaPeekAtLastError(), cudaErrorInvalidMemcpyDirection);
  return NULL;
}

static void test_errors(void) {
  const size_t n = 4096;
  unsigned char *h = malloc(n);
  void *d = NULL;
  CK(cudaMalloc(&d, n));
  if (!h || !d) {
    CHECK(!"allocation");
    goto out;
  }
  memset(h, 1, n);
  (void)cudaGetLastError();

  /* invalid kind; the last error, peek versus get */
  EXPECT(cudaMemcpy(d, h, 16, (enum cudaMemcpyKind)7),
         cudaErrorInvalidMemcpyDirection);
  EXPECT(cudaMemcpyAsync(d, h, 16, (enum cudaMemcpyKind) - 1, 0),
         cudaErrorInvalidMemcpyDirection);
  EXPECT(cudaPeekAtLastError(), cudaErrorInvalidMemcpyDirection);
  CK(cudaMalloc(&(void *){NULL}, 0)); /* success does not clear it */
  EXPECT(cudaPeekAtLastError(), cudaErrorInvalidMemcpyDirection);
  EXPECT(cudaGetLastError(), cudaErrorInvalidMemcpyDirection);
  EXPECT(cudaGetLastError(), cudaSuccess);
  EXPECT(cudaPeekAtLastError(), cudaSuccess);

  /* pointers the driver does not know */
  EXPECT(cudaMemcpy(h + 8, h, 16, cudaMemcpyHostToDevice),
         cudaErrorInvalidValue);
  EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT(cudaMemcpy(h + 8, h, 16, cudaMemcpyDeviceToHost),
         cudaErrorInvalidValue);
  EXPECT(cudaMemcpy(h + 8, h, 16, cudaMemcpyDeviceToDevice),
         cudaErrorInvalidValue);
  EXPECT(cudaMemcpyAsync(h + 8, h, 16, cudaMemcpyHostToDevice, 0),
         cudaErrorInvalidValue);
  EXPECT(cudaMemset(h, 0, 16), cudaErrorInvalidValue);
  EXPECT(cudaMemcpy(dev_at(d, n - 8), h, 16, cudaMemcpyHostToDevice),
         cudaErrorInvalidValue);
  EXPECT(cudaMemcpy(h, dev_at(d, n - 8), 16, cudaMemcpyDeviceToHost),
         cudaErrorInvalidValue);
  EXPECT(cudaFree(h), cudaErrorInvalidValue);
  EXPECT(cudaFree(dev_at(d, 1)), cudaErrorInvalidValue);
  EXPECT(cudaFreeHost(h), cudaErrorInvalidValue);
  EXPECT(cudaGetLastError(), cudaErrorInvalidValue);

  /* argument checks */
  EXPECT(cudaMalloc(NULL, 16), cudaErrorInvalidValue);
  void *huge = NULL;
  EXPECT(cudaMalloc(&huge, (size_t)1 << 62), cudaErrorMemoryAllocation);
  EXPECT(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT(cudaHostAlloc(&huge, 16, 0x100), cudaErrorInvalidValue);
  EXPECT(cudaHostGetDevicePointer(&huge, h, 1), cudaErrorInvalidValue);
  cudaEvent_t ev;
  EXPECT(cudaEventCreateWithFlags(&ev, 0x100), cudaErrorInvalidValue);
  cudaStream_t st;
  EXPECT(cudaStreamCreateWithFlags(&st, 0x100), cudaErrorInvalidValue);
  EXPECT(cudaStreamDestroy(0), cudaErrorInvalidResourceHandle);
  EXPECT(cudaSetDevice(device_count), cudaErrorInvalidDevice);
  EXPECT(cudaSetDevice(-1), cudaErrorInvalidDevice);
  struct cudaDeviceProp prop;
  EXPECT(cudaGetDeviceProperties(&prop, device_count), cudaErrorInvalidDevice);
  int v;
  EXPECT(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, device_count),
         cudaErrorInvalidDevice);
  EXPECT(cudaGetLastError(), cudaErrorInvalidDevice);
  int dev = -1;
  CK(cudaGetDevice(&dev));
  CHECK(dev == 0); /* a failed cudaSetDevice changes nothing */

  /* the last error is per thread */
  pthread_t t;
  CHECK(pthread_create(&t, NULL, error_thread, NULL) == 0);
  pthread_join(t, NULL);
  EXPECT(cudaPeekAtLastError(), cudaSuccess);

  /* names and messages */
  CHECK(strcmp(cudaGetErrorName(cudaSuccess), "cudaSuccess") == 0);
  CHECK(strcmp(cudaGetErrorString(cudaSuccess), "no error") == 0);
  CHECK(strcmp(cudaGetErrorName(cudaErrorInvalidValue),
               "cudaErrorInvalidValue") == 0);
  CHECK(strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") ==
        0);
  CHECK(strcmp(cudaGetErrorString(cudaErrorMemoryAllocation),
               "out of memory") == 0);
  CHECK(strcmp(cudaGetErrorName(cudaErrorIllegalAddress),
               "cudaErrorIllegalAddress") == 0);
  CHECK(strcmp(cudaGetErrorString(cudaErrorInvalidMemcpyDirection),
               "invalid copy direction for memcpy") == 0);
  CHECK(strcmp(cudaGetErrorString((cudaError_t)12345),
               "unrecognized error code") == 0);
  CHECK(strcmp(cudaGetErrorName((cudaError_t)12345),
               "unrecognized error code") == 0);
out:
  cudaFree(d);
  free(h);
}

/* ---- 2D copies -------------------------------------------------------------
 */

#define R2D_W 37 /* bytes per row */
#define R2D_H 7  /* rows */

/* Rows [0, R2D_H) of `got` (pitch gp) equal those of `want` (pitch wp) over
 * R2D_W bytes, and the padding of each row of `got` up to its pitch still
 * holds `pad`. */
static int rows_match(const unsigned char *got, size_t gp,
                      const unsigned char *want, size_t wp, int pad,
                      const char *what) {
  for (size_t r = 0; r < R2D_H; r++) {
    if (!same(got + r * gp, want + r * wp, R2D_W, what))
      return 0;
    if (r + 1 < R2D_H && !all_bytes(got + r * gp + R2D_W, pad, gp - R2D_W)) {
      fprintf(stderr, "  %s: padding of row %zu overwritten\n", what, r);
      return 0;
    }
  }
  return 1;
}

/* The device rows at `d` (pitch dp) copied back with a 1D copy. */
static int device_rows_match(const void *d, size_t dp,
                             const unsigned char *want, size_t wp, int pad,
                             const char *what) {
  size_t n = (R2D_H - 1) * dp + R2D_W;
  unsigned char *back = malloc(n);
  if (!back)
    return 0;
  CK(cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost));
  int ok = rows_match(back, dp, want, wp, pad, what);
  free(back);
  return ok;
}

static void copy_2d_errors(void *d, unsigned char *h) {
  (void)cudaGetLastError();
  /* width above a pitch: the documented cudaErrorInvalidPitchValue */
  EXPECT(cudaMemcpy2D(d, 16, h, 64, 17, 2, cudaMemcpyHostToDevice),
         cudaErrorInvalidPitchValue);
  EXPECT(cudaMemcpy2D(d, 64, h, 16, 17, 2, cudaMemcpyHostToDevice),
         cudaErrorInvalidPitchValue);
  EXPECT(cudaMemcpy2DAsync(d, 64, h, 8, 9, 1, cudaMemcpyHostToDevice, 0),
         cudaErrorInvalidPitchValue);
  EXPECT(cudaGetLastError(), cudaErrorInvalidPitchValue);
  int maxp = 0;
  CK(cudaDeviceGetAttribute(&maxp, cudaDevAttrMaxPitch, 0));
  CHECK(maxp > 0);
  EXPECT(
      cudaMemcpy2D(d, (size_t)maxp + 1, h, 64, 16, 1, cudaMemcpyHostToDevice),
      cudaErrorInvalidPitchValue);
  EXPECT(cudaMemcpy2D(d, 64, h, 64, 16, 2, (enum cudaMemcpyKind)9),
         cudaErrorInvalidMemcpyDirection);
  EXPECT(cudaMemcpy2DAsync(d, 64, h, 64, 16, 2, (enum cudaMemcpyKind)9, 0),
         cudaErrorInvalidMemcpyDirection);
  /* nothing to copy */
  CK(cudaMemcpy2D(d, 64, h, 64, 0, 5, cudaMemcpyHostToDevice));
  CK(cudaMemcpy2D(d, 64, h, 64, 16, 0, cudaMemcpyHostToDevice));
  CK(cudaMemcpy2DAsync(d, 64, h, 64, 0, 0, cudaMemcpyHostToDevice, 0));
  /* operands the driver refuses: a host pointer as the device side, rows
   * running past the allocation */
  EXPECT(cudaMemcpy2D(h + 4096, 64, h, 64, 16, 2, cudaMemcpyHostToDevice),
         cudaErrorInvalidValue);
  EXPECT(cudaMemcpy2D(d, 4096, h, 64, 16, 3, cudaMemcpyHostToDevice),
         cudaErrorInvalidValue);
  EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT(cudaGetLastError(), cudaSuccess);
}

static void test_copy_2d(void) {
  const size_t sp = 48, dp = 64, dp2 = 50, hp = 40; /* all != R2D_W */
  unsigned char *src = malloc(R2D_H * sp), *out = malloc(R2D_H * hp);
  unsigned char *pin = NULL, *pout = NULL;
  void *d = NULL, *d2 = NULL;
  CK(cudaMalloc(&d, R2D_H * dp));
  CK(cudaMalloc(&d2, R2D_H * dp2));
  CK(cudaMallocHost((void **)&pin, R2D_H * sp));
  CK(cudaMallocHost((void **)&pout, R2D_H * hp));
  cudaStream_t s = 0;
  CK(cudaStreamCreate(&s));
  if (!src || !out || !d || !d2 || !pin || !pout) {
    CHECK(!"allocation");
    goto out;
  }
  fill(src, R2D_H * sp, 21);

  /* synchronous H2D, D2D, D2H, each with its own pitches; every result is
   * read right after the call (the calls are synchronous with the host) */
  CK(cudaMemset(d, 0xEE, R2D_H * dp));
  CK(cudaMemset(d2, 0xDD, R2D_H * dp2));
  CK(cudaMemcpy2D(d, dp, src, sp, R2D_W, R2D_H, cudaMemcpyHostToDevice));
  CHECK(device_rows_match(d, dp, src, sp, 0xEE, "2D H2D"));
  CK(cudaMemcpy2D(d2, dp2, d, dp, R2D_W, R2D_H, cudaMemcpyDeviceToDevice));
  CHECK(device_rows_match(d2, dp2, src, sp, 0xDD, "2D D2D"));
  memset(out, 0x77, R2D_H * hp);
  CK(cudaMemcpy2D(out, hp, d2, dp2, R2D_W, R2D_H, cudaMemcpyDeviceToHost));
  CHECK(rows_match(out, hp, src, sp, 0x77, "2D D2H"));
  memset(out, 0x66, R2D_H * hp);
  CK(cudaMemcpy2D(out, hp, src, sp, R2D_W, R2D_H, cudaMemcpyHostToHost));
  CHECK(rows_match(out, hp, src, sp, 0x66, "2D H2H"));

  /* asynchronous on a created stream, pinned host memory, then Default */
  memcpy(pin, src, R2D_H * sp);
  CK(cudaMemset(d, 0xEE, R2D_H * dp));
  memset(pout, 0x55, R2D_H * hp);
  CK(cudaMemcpy2DAsync(d, dp, pin, sp, R2D_W, R2D_H, cudaMemcpyHostToDevice,
                       s));
  CK(cudaMemcpy2DAsync(d2, dp2, d, dp, R2D_W, R2D_H, cudaMemcpyDeviceToDevice,
                       s));
  CK(cudaMemcpy2DAsync(pout, hp, d2, dp2, R2D_W, R2D_H, cudaMemcpyDeviceToHost,
                       s));
  CK(cudaStreamSynchronize(s));
  CHECK(rows_match(pout, hp, src, sp, 0x55, "2D async round trip"));
  CK(cudaMemset(d, 0xEE, R2D_H * dp));
  CK(cudaMemcpy2DAsync(d, dp, pin, sp, R2D_W, R2D_H, cudaMemcpyDefault, 0));
  CK(cudaStreamSynchronize(0));
  CHECK(device_rows_match(d, dp, src, sp, 0xEE, "2D Default async"));
  memset(out, 0x44, R2D_H * hp);
  CK(cudaMemcpy2D(out, hp, d, dp, R2D_W, R2D_H, cudaMemcpyDefault));
  CHECK(rows_match(out, hp, src, sp, 0x44, "2D Default D2H"));

  copy_2d_errors(d, src);
out:
  if (s)
    cudaStreamDestroy(s);
  cudaFree(d);
  cudaFree(d2);
  cudaFreeHost(pin);
  cudaFreeHost(pout);
  free(src);
  free(out);
}

/* ---- batched copies --------------------------------------------------------
 */

#define BATCH_N 6

/* d: n bytes of device memory, ph: pinned host memory */
static void batch_errors(cudaStream_t s, void *d, size_t n, unsigned char *ph) {
  void *dsts[2] = {d, dev_at(d, 64)};
  const void *srcs[2] = {ph, ph + 64};
  size_t sizes[2] = {32, 32}, idx[2] = {0, 1}, bad_idx[1] = {1};
  struct cudaMemcpyAttributes a[2] = {
      {.srcAccessOrder = cudaMemcpySrcAccessOrderStream},
      {.srcAccessOrder = cudaMemcpySrcAccessOrderStream}};
  struct cudaMemcpyAttributes invalid = {.srcAccessOrder =
                                             cudaMemcpySrcAccessOrderInvalid};
  (void)cudaGetLastError();
  /* cudaErrorInvalidValue is the only error the documentation lists */
  EXPECT(cudaMemcpyBatchAsync(dsts, srcs, sizes, 0, a, idx, 0, s),
         cudaErrorInvalidValue);
  EXPECT(cudaMemcpyBatchAsync(NULL, srcs, sizes, 2, a, idx, 1, s),
         cudaErrorInvalidValue);
  EXPECT(cudaMemcpyBatchAsync(dsts, NULL, sizes, 2, a, idx, 1, s),
         cudaErrorInvalidValue);
  EXPECT(cudaMemcpyBatchAsync(dsts, srcs, NULL, 2, a, idx, 1, s),
         cudaErrorInvalidValue);
  EXPECT(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, NULL, idx, 1, s),
         cudaErrorInvalidValue);
  EXPECT(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, a, NULL, 1, s),
         cudaErrorInvalidValue);
  EXPECT(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, a, idx, 0, s),
         cudaErrorInvalidValue);
  EXPECT(cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, a, idx, 2, s),
         cudaErrorInvalidValue); /* numAttrs > count */
  EXPECT(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, a, bad_idx, 1, s),
         cudaErrorInvalidValue); /* attrsIdxs[0] != 0 */
  EXPECT(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, &invalid, idx, 1, s),
         cudaErrorInvalidValue);
  /* the legacy NULL stream is refused; 0 is it in a legacy build */
  EXPECT(
      cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, a, idx, 1, cudaStreamLegacy),
      cudaErrorInvalidValue);
  EXPECT(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, a, idx, 1, 0),
         PTDS ? cudaSuccess : cudaErrorInvalidValue);
  CK(cudaStreamSynchronize(0));
  /* an operand the driver refuses: past the end of the allocation */
  void *bad_dsts[2] = {d, dev_at(d, n - 16)};
  EXPECT(cudaMemcpyBatchAsync(bad_dsts, srcs, sizes, 2, a, idx, 1, s),
         cudaErrorInvalidValue);
  EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT(cudaGetLastError(), cudaSuccess);
}

static void test_batch(void) {
  const size_t n = 16384;
  unsigned char *ph = NULL, *pout = NULL, *want = malloc(n);
  void *da = NULL, *db = NULL;
  CK(cudaMallocHost((void **)&ph, n));
  CK(cudaMallocHost((void **)&pout, n));
  CK(cudaMalloc(&da, n));
  CK(cudaMalloc(&db, n));
  cudaStream_t s = 0;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (!ph || !pout || !want || !da || !db || !s) {
    CHECK(!"allocation");
    goto out;
  }
  fill(ph, n, 31);
  fill(want, n, 32);
  CK(cudaMemcpy(da, want, n, cudaMemcpyHostToDevice)); /* da = want */
  CK(cudaMemset(db, 0xEE, n));
  memset(pout, 0x33, n);

  /* mixed directions, odd sizes, three attribute ranges */
  void *dsts[BATCH_N] = {db,          dev_at(db, 4096), pout, dev_at(db, 8192),
                         pout + 8192, pout + 12000};
  const void *srcs[BATCH_N] = {ph,      ph + 777,        da, dev_at(da, 100),
                               ph + 99, dev_at(da, 5000)};
  size_t sizes[BATCH_N] = {1000, 3001, 4096, 2047, 1, 1500};
  size_t idx[3] = {0, 2, 5};
  struct cudaMemcpyAttributes a[3] = {
      {.srcAccessOrder = cudaMemcpySrcAccessOrderStream},
      {.srcAccessOrder = cudaMemcpySrcAccessOrderAny,
       .flags = cudaMemcpyFlagPreferOverlapWithCompute},
      {.srcAccessOrder = cudaMemcpySrcAccessOrderStream}};
  CK(cudaMemcpyBatchAsync(dsts, srcs, sizes, BATCH_N, a, idx, 3, s));
  CK(cudaStreamSynchronize(s));
  unsigned char *back = malloc(n);
  if (back) {
    CK(cudaMemcpy(back, db, n, cudaMemcpyDeviceToHost));
    CHECK(same(back, ph, 1000, "batch H2D 0"));
    CHECK(same(back + 4096, ph + 777, 3001, "batch H2D 1"));
    CHECK(same(back + 8192, want + 100, 2047, "batch D2D"));
    CHECK(all_bytes(back + 1000, 0xEE, 4096 - 1000));
    free(back);
  }
  CHECK(same(pout, want, 4096, "batch D2H 0"));
  CHECK(pout[8192] == ph[99] && pout[8193] == 0x33); /* H2H, 1 byte */
  CHECK(same(pout + 12000, want + 5000, 1500, "batch D2H 1"));

  /* sources read during the call: a stack buffer may change right after */
  unsigned char eph[256];
  fill(eph, sizeof eph, 33);
  unsigned char keep[256];
  memcpy(keep, eph, sizeof eph);
  void *d1[1] = {da};
  const void *s1[1] = {eph};
  size_t z1[1] = {sizeof eph}, i1[1] = {0};
  struct cudaMemcpyAttributes during = {
      .srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall};
  CK(cudaMemcpyBatchAsync(d1, s1, z1, 1, &during, i1, 1, s));
  memset(eph, 0, sizeof eph);
  CK(cudaStreamSynchronize(s));
  unsigned char got[256];
  CK(cudaMemcpy(got, da, sizeof got, cudaMemcpyDeviceToHost));
  CHECK(same(got, keep, sizeof keep, "batch DuringApiCall"));

  batch_errors(s, da, n, ph);
out:
  if (s)
    cudaStreamDestroy(s);
  cudaFree(da);
  cudaFree(db);
  cudaFreeHost(ph);
  cudaFreeHost(pout);
  free(want);
}

/* ---- cudaDeviceReset
 * -------------------------------------------------------------- */

static void test_reset(void) {
  void *old = NULL;
  CK(cudaMalloc(&old, 4096));
  CK(cudaDeviceReset());
  /* everything of the old context is gone; the runtime starts a new one */
  EXPECT(cudaFree(old), cudaErrorInvalidValue);
  (void)cudaGetLastError();
  const size_t n = 12345;
  unsigned char *h = malloc(n), *back = malloc(n);
  void *d = NULL;
  CK(cudaMalloc(&d, n));
  if (h && back && d) {
    fill(h, n, 31);
    CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost));
    CHECK(same(h, back, n, "after cudaDeviceReset"));
  }
  cudaFree(d);
  free(h);
  free(back);
  CK(cudaDeviceReset());
}

/* ---- injected driver failures: sticky and non-sticky errors
 * ------------------------- Run with
 * SIMCUDA_FAIL=cuMemAlloc:2,cuCtxSynchronize:1:CUDA_ERROR_ILLEGAL_ADDRESS (the
 * simulated driver's fault injection). */

static void *sticky_thread(void *arg) {
  (void)arg;
  void *p = NULL;
  EXPECT(cudaMalloc(&p, 64), cudaErrorIllegalAddress);
  EXPECT(cudaGetLastError(), cudaErrorIllegalAddress);
  return NULL;
}

static int run_faults(void) {
  const size_t n = 4096;
  unsigned char *h = malloc(n), *back = malloc(n);
  void *a = NULL, *b = NULL, *c = NULL;
  if (!h || !back)
    return 1;
  fill(h, n, 3);
  CK(cudaMalloc(&a, n));
  /* a failed allocation is an ordinary error */
  EXPECT(cudaMalloc(&b, n), cudaErrorMemoryAllocation);
  EXPECT(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT(cudaGetLastError(), cudaSuccess);
  CK(cudaMalloc(&c, n));
  CK(cudaMemcpy(c, h, n, cudaMemcpyHostToDevice));
  /* an illegal address corrupts the device until cudaDeviceReset */
  EXPECT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  EXPECT(cudaMemcpy(back, c, n, cudaMemcpyDeviceToHost),
         cudaErrorIllegalAddress);
  EXPECT(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT(cudaPeekAtLastError(), cudaErrorIllegalAddress);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, sticky_thread, NULL) == 0);
  pthread_join(t, NULL);
  CK(cudaDeviceReset());
  (void)cudaGetLastError(); /* this thread's record of the sticky error */
  EXPECT(cudaGetLastError(), cudaSuccess);
  void *d = NULL;
  CK(cudaMalloc(&d, n));
  CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
  memset(back, 0, n);
  CK(cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost));
  CHECK(same(h, back, n, "after the sticky error and cudaDeviceReset"));
  CK(cudaFree(d));
  free(h);
  free(back);
  int f = atomic_load(&failures);
  printf("rt_test --faults (%s): %d failure(s)\n", MODE, f);
  return f ? 1 : 0;
}

/* ---- without a driver
 * ------------------------------------------------------------ */

static int run_no_driver(void) {
  void *probe = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (probe) {
    printf("rt_test --no-driver: a libcuda.so.1 is loadable here; skipped\n");
    return 77;
  }
  int v = -1;
  CK(cudaDriverGetVersion(&v));
  CHECK(v == 0);
  CK(cudaRuntimeGetVersion(&v));
  CHECK(v == 13000);
  int count = -1;
  EXPECT(cudaGetDeviceCount(&count), cudaErrorInsufficientDriver);
  CHECK(count == 0);
  void *d = NULL;
  EXPECT(cudaMalloc(&d, 16), cudaErrorInsufficientDriver);
  EXPECT(cudaGetLastError(), cudaErrorInsufficientDriver);
  EXPECT(cudaGetLastError(), cudaSuccess);
  int n = atomic_load(&failures);
  printf("rt_test --no-driver (%s): %d failure(s)\n", MODE, n);
  return n ? 1 : 0;
}

/* With a driver that finds no device (SIMCUDA_NO_DEVICE=1). */
static int run_no_device(void) {
  int v = -1;
  CK(cudaDriverGetVersion(&v));
  CHECK(v >= 13000);
  int count = -1;
  EXPECT(cudaGetDeviceCount(&count), cudaErrorNoDevice);
  CHECK(count == 0);
  void *d = NULL;
  EXPECT(cudaMalloc(&d, 16), cudaErrorNoDevice);
  EXPECT(cudaSetDevice(0), cudaErrorNoDevice);
  EXPECT(cudaGetLastError(), cudaErrorNoDevice);
  EXPECT(cudaGetLastError(), cudaSuccess);
  int n = atomic_load(&failures);
  printf("rt_test --no-device (%s): %d failure(s)\n", MODE, n);
  return n ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--no-driver") == 0)
    return run_no_driver();
  if (argc > 1 && strcmp(argv[1], "--no-device") == 0)
    return run_no_device();
  if (argc > 1 && strcmp(argv[1], "--faults") == 0)
    return run_faults();
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct {
    const char *name;
    void (*fn)(void);
  } sections[] = {
      {"versions and devices", test_versions_devices},
      {"synchronous copies", test_sync_copies},
      {"memset", test_memset},
      {"pinned and registered memory", test_pinned},
      {"asynchronous copies on streams", test_async_streams},
      {"events and timing", test_events},
      {"queries on blocked work", test_not_ready},
      {"default stream semantics", test_default_streams},
      {"error paths", test_errors},
      {"2D copies", test_copy_2d},
      {"batched copies", test_batch},
      {"cudaDeviceReset", test_reset},
  };
  printf("rt_test (%s)\n", MODE);
  for (size_t i = 0; i < sizeof sections / sizeof *sections; i++) {
    int before = atomic_load(&failures);
    sections[i].fn();
    int after = atomic_load(&failures);
    printf("  %-32s %s\n", sections[i].name, after == before ? "ok" : "FAILED");
    if (i == 0 && after != before)
      break; /* nothing else can work */
  }
  int n = atomic_load(&failures);
  printf("rt_test (%s): %d failure(s)\n", MODE, n);
  return n ? 1 : 0;
}
