/*
 * Streams and events: asynchronous copies on several streams (byte for
 * byte), in-order execution on a stream, events and cuStreamWaitEvent
 * across streams, legacy default stream semantics, the per-thread default
 * stream, host-synchronous copies, callbacks, stream-ordered allocation,
 * elapsed times, and invalid handles.
 *
 * "Gates" -- host functions that block their stream until the test opens
 * them -- make "not done yet" observable without timing assumptions.  The
 * test peeks at device memory directly: in the simulation it is process
 * memory.
 */
#include "simcuda_test.h"

#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

static t_api A; /* legacy default stream (flags 0) */
static t_api P; /* per-thread default stream variants (flags 2) */

static void pattern(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char)(i * 29u + seed * 101u + (i >> 9));
}

static void test_async_copies_many_streams(void) {
  enum { NS = 4, N = 256 * 1024 };
  CUstream s[NS];
  unsigned char *src[NS], *dst[NS];
  CUdeviceptr d1[NS], d2[NS];
  for (int i = 0; i < NS; i++) {
    OK(A.StreamCreate(&s[i], i % 2 ? CU_STREAM_NON_BLOCKING : 0));
    OK(A.MemHostAlloc((void **)&src[i], N, 0));
    OK(A.MemHostAlloc((void **)&dst[i], N, 0));
    OK(A.MemAlloc(&d1[i], N));
    OK(A.MemAlloc(&d2[i], N));
    pattern(src[i], N, (unsigned)i);
    memset(dst[i], 0, N);
  }
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < NS; i++) {
      OK(A.MemcpyHtoDAsync(d1[i], src[i], N, s[i]));
      OK(A.MemsetD8Async(d2[i], 0xee, N, s[i]));
      OK(A.MemcpyDtoDAsync(d2[i], d1[i], N / 2, s[i]));
      OK(A.MemcpyAsync((CUdeviceptr)(uintptr_t)dst[i], d2[i], N, s[i]));
    }
    for (int i = 0; i < NS; i++) {
      OK(A.StreamSynchronize(s[i]));
      CHECK(memcmp(dst[i], src[i], N / 2) == 0);
      CHECK(dst[i][N / 2] == 0xee && dst[i][N - 1] == 0xee);
      memset(dst[i], 0, N);
    }
  }
  for (int i = 0; i < NS; i++) {
    OK(A.StreamDestroy(s[i]));
    OK(A.MemFreeHost(src[i]));
    OK(A.MemFreeHost(dst[i]));
    OK(A.MemFree(d1[i]));
    OK(A.MemFree(d2[i]));
  }
}

static void test_order_on_one_stream(void) {
  enum { N = 64 * 1024 };
  CUstream s;
  OK(A.StreamCreate(&s, 0));
  unsigned char *a, *b;
  OK(A.MemHostAlloc((void **)&a, N, 0));
  OK(A.MemHostAlloc((void **)&b, N, 0));
  CUdeviceptr d1, d2;
  OK(A.MemAlloc(&d1, N));
  OK(A.MemAlloc(&d2, N));
  OK(A.MemsetD8(d1, 0, N));
  pattern(a, N, 9);
  memset(b, 0, N);

  t_gate g = {0};
  OK(A.LaunchHostFunc(s, t_gate_wait, &g));
  OK(A.MemcpyHtoDAsync(d1, a, N, s)); /* returns before it runs */
  OK(A.MemcpyDtoDAsync(d2, d1, N, s));
  OK(A.MemcpyDtoHAsync(b, d2, N, s));
  EXPECT(CUDA_ERROR_NOT_READY, A.StreamQuery(s));
  CHECK(((volatile unsigned char *)(uintptr_t)d1)[5] == 0);
  a[5] ^= 0xff; /* pinned memory is read when the copy runs */
  t_gate_open(&g);
  OK(A.StreamSynchronize(s));
  OK(A.StreamQuery(s));
  CHECK(memcmp(a, b, N) == 0); /* each op saw its predecessor's result */

  /* Pageable memory: the call returns once the source was taken. */
  unsigned char *pg = malloc(N);
  REQUIRE(pg);
  pattern(pg, N, 4);
  OK(A.MemcpyHtoDAsync(d1, pg, N, s));
  pg[0] ^= 0xff;
  OK(A.MemcpyDtoHAsync(b, d1, N, s));
  OK(A.StreamSynchronize(s));
  CHECK(b[0] == (unsigned char)(pg[0] ^ 0xff));
  free(pg);

  OK(A.StreamDestroy(s));
  OK(A.MemFreeHost(a));
  OK(A.MemFreeHost(b));
  OK(A.MemFree(d1));
  OK(A.MemFree(d2));
}

static void test_events(void) {
  enum { N = 4096 };
  CUstream s1, s2;
  OK(A.StreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  OK(A.StreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUevent ev, e0, e1, nt;
  OK(A.EventCreate(&ev, 0));
  OK(A.EventCreate(&e0, 0));
  OK(A.EventCreate(&e1, CU_EVENT_BLOCKING_SYNC));
  OK(A.EventCreate(&nt, CU_EVENT_DISABLE_TIMING));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.EventCreate(&ev, 0x40));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.EventCreate(&ev, CU_EVENT_INTERPROCESS));
  OK(A.EventQuery(ev)); /* never recorded: complete */
  OK(A.EventSynchronize(ev));
  float ms = -1;
  EXPECT(CUDA_ERROR_INVALID_HANDLE, A.EventElapsedTime(&ms, e0, e1));

  unsigned char *a, *b;
  OK(A.MemHostAlloc((void **)&a, N, 0));
  OK(A.MemHostAlloc((void **)&b, N, 0));
  CUdeviceptr d1, d2;
  OK(A.MemAlloc(&d1, N));
  OK(A.MemAlloc(&d2, N));
  pattern(a, N, 2);
  memset(b, 0, N);

  /* s2 waits for s1's copy through an event. */
  t_gate g = {0};
  OK(A.LaunchHostFunc(s1, t_gate_wait, &g));
  OK(A.MemcpyHtoDAsync(d1, a, N, s1));
  OK(A.EventRecord(ev, s1));
  OK(A.StreamWaitEvent(s2, ev, 0));
  OK(A.MemcpyDtoDAsync(d2, d1, N, s2));
  OK(A.MemcpyDtoHAsync(b, d2, N, s2));
  EXPECT(CUDA_ERROR_NOT_READY, A.EventQuery(ev));
  EXPECT(CUDA_ERROR_NOT_READY, A.StreamQuery(s2));
  usleep(20000);
  EXPECT(CUDA_ERROR_NOT_READY, A.StreamQuery(s2));
  t_gate_open(&g);
  OK(A.StreamSynchronize(s2));
  OK(A.EventQuery(ev));
  CHECK(memcmp(a, b, N) == 0);

  /* Elapsed time of work that takes about 30 ms. */
  OK(A.EventRecord(e0, s1));
  t_gate g2 = {0};
  OK(A.LaunchHostFunc(s1, t_gate_wait, &g2));
  OK(A.EventRecord(e1, s1));
  OK(A.EventRecord(nt, s1));
  EXPECT(CUDA_ERROR_NOT_READY, A.EventElapsedTime(&ms, e0, e1));
  OK(A.EventSynchronize(e0)); /* e0 stamped: 30 ms from now at least */
  usleep(30000);
  t_gate_open(&g2);
  OK(A.EventSynchronize(e1));
  OK(A.EventElapsedTime(&ms, e0, e1));
  CHECK(ms >= 25.0f && ms < 10000.0f);
  OK(A.EventSynchronize(nt));
  EXPECT(CUDA_ERROR_INVALID_HANDLE, A.EventElapsedTime(&ms, e0, nt));

  /* Destroying an event with a record pending is fine. */
  CUevent tmp;
  OK(A.EventCreate(&tmp, 0));
  t_gate g3 = {0};
  OK(A.LaunchHostFunc(s1, t_gate_wait, &g3));
  OK(A.EventRecord(tmp, s1));
  OK(A.EventDestroy(tmp));
  EXPECT(CUDA_ERROR_INVALID_HANDLE, A.EventQuery(tmp));
  EXPECT(CUDA_ERROR_INVALID_HANDLE, A.EventDestroy(tmp));
  t_gate_open(&g3);
  OK(A.StreamSynchronize(s1));

  OK(A.EventDestroy(ev));
  OK(A.EventDestroy(e0));
  OK(A.EventDestroy(e1));
  OK(A.EventDestroy(nt));
  OK(A.StreamDestroy(s1));
  OK(A.StreamDestroy(s2));
  OK(A.MemFreeHost(a));
  OK(A.MemFreeHost(b));
  OK(A.MemFree(d1));
  OK(A.MemFree(d2));
}

/* ---- the legacy default stream and host-synchronous copies -------------- */

typedef struct sync_probe {
  CUcontext ctx;
  CUdeviceptr d;
  unsigned char *h;
  volatile int done;
} sync_probe;

static void *sync_copy_thread(void *arg) {
  sync_probe *p = arg;
  OK(A.CtxSetCurrent(p->ctx));
  OK(A.MemcpyHtoD(p->d, p->h, 4096)); /* legacy stream */
  __atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void test_legacy_stream(CUcontext ctx) {
  CUstream blocking, nonblocking;
  OK(A.StreamCreate(&blocking, 0));
  OK(A.StreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
  CUdeviceptr d;
  OK(A.MemAlloc(&d, 4096));
  unsigned char *h = malloc(4096);
  REQUIRE(h);
  pattern(h, 4096, 5);

  /* A synchronous copy waits for a blocking stream's earlier work. */
  t_gate g = {0};
  OK(A.LaunchHostFunc(blocking, t_gate_wait, &g));
  sync_probe p = {ctx, d, h, 0};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, sync_copy_thread, &p) == 0);
  usleep(30000);
  CHECK(__atomic_load_n(&p.done, __ATOMIC_ACQUIRE) == 0);
  EXPECT(CUDA_ERROR_NOT_READY, A.StreamQuery(NULL)); /* legacy: blocked */
  t_gate_open(&g);
  pthread_join(t, NULL);
  CHECK(p.done == 1);
  CHECK(memcmp((void *)(uintptr_t)d, h, 4096) == 0); /* done on return */

  /* ... but not for a non-blocking stream's. */
  t_gate g2 = {0};
  OK(A.LaunchHostFunc(nonblocking, t_gate_wait, &g2));
  OK(A.MemcpyHtoD(d, h, 4096));
  OK(A.StreamQuery(NULL));
  EXPECT(CUDA_ERROR_NOT_READY, A.StreamQuery(nonblocking));
  t_gate_open(&g2);
  OK(A.StreamSynchronize(nonblocking));

  /* Work on a blocking stream waits for the legacy stream's. */
  t_gate g3 = {0};
  OK(A.LaunchHostFunc(CU_STREAM_LEGACY, t_gate_wait, &g3));
  OK(A.MemsetD8Async(d, 0x77, 4096, blocking));
  usleep(20000);
  EXPECT(CUDA_ERROR_NOT_READY, A.StreamQuery(blocking));
  t_gate_open(&g3);
  OK(A.StreamSynchronize(blocking));
  CHECK(((unsigned char *)(uintptr_t)d)[100] == 0x77);
  OK(A.CtxSynchronize());

  free(h);
  OK(A.MemFree(d));
  OK(A.StreamDestroy(blocking));
  OK(A.StreamDestroy(nonblocking));
}

static void test_per_thread_stream(void) {
  unsigned long long legacy_id = 0, ptds_id = 0, explicit_id = 0;
  OK(A.StreamGetId(NULL, &legacy_id));
  OK(P.StreamGetId(NULL, &ptds_id));
  OK(A.StreamGetId(CU_STREAM_PER_THREAD, &explicit_id));
  CHECK(legacy_id != ptds_id);
  CHECK(ptds_id == explicit_id);

  CUdeviceptr d;
  OK(A.MemAlloc(&d, 4096));
  unsigned char *h;
  OK(A.MemHostAlloc((void **)&h, 4096, 0));
  pattern(h, 4096, 8);
  t_gate g = {0};
  /* Stream 0 of a _ptsz entry point is the per-thread stream. */
  OK(P.LaunchHostFunc(NULL, t_gate_wait, &g));
  OK(P.MemcpyHtoDAsync(d, h, 4096, NULL));
  EXPECT(CUDA_ERROR_NOT_READY, P.StreamQuery(NULL));
  EXPECT(CUDA_ERROR_NOT_READY, A.StreamQuery(CU_STREAM_PER_THREAD));
  t_gate_open(&g);
  OK(P.StreamSynchronize(NULL));
  CHECK(memcmp((void *)(uintptr_t)d, h, 4096) == 0);
  /* Synchronous _ptds copies go to the per-thread stream. */
  memset(h, 0, 4096);
  OK(P.MemcpyDtoH(h, d, 4096));
  CHECK(h[17] == (unsigned char)(17 * 29u + 8 * 101u));
  OK(A.MemFreeHost(h));
  OK(A.MemFree(d));
}

/* ---- callbacks --------------------------------------------------------- */

typedef struct cb_seen {
  CUstream stream;
  CUresult status, api;
  int calls;
} cb_seen;

static void CUDA_CB callback(CUstream s, CUresult status, void *data) {
  cb_seen *c = data;
  c->stream = s;
  c->status = status;
  CUdeviceptr d;
  c->api = A.MemAlloc(&d, 16); /* API calls are not permitted here */
  c->calls++;
}

static void test_callbacks(void) {
  CUstream s;
  OK(A.StreamCreate(&s, 0));
  cb_seen c = {NULL, CUDA_ERROR_UNKNOWN, CUDA_SUCCESS, 0};
  OK(A.StreamAddCallback(s, callback, &c, 0));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.StreamAddCallback(s, callback, &c, 1));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.StreamAddCallback(s, NULL, &c, 0));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.LaunchHostFunc(s, NULL, NULL));
  OK(A.StreamSynchronize(s));
  CHECK(c.calls == 1 && c.stream == s && c.status == CUDA_SUCCESS);
  CHECK(c.api == CUDA_ERROR_NOT_PERMITTED);
  OK(A.StreamDestroy(s));
}

/* ---- stream-ordered allocation, properties, destroy with work pending --- */

static void CUDA_CB set_flag(void *p) {
  __atomic_store_n((int *)p, 1, __ATOMIC_RELEASE);
}

static void test_misc(CUcontext ctx) {
  CUstream s;
  OK(A.StreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -3));
  unsigned flags = 0;
  int prio = 0;
  OK(A.StreamGetFlags(s, &flags));
  CHECK(flags == CU_STREAM_NON_BLOCKING);
  OK(A.StreamGetPriority(s, &prio));
  CHECK(prio == -3);
  OK(A.StreamDestroy(s));
  OK(A.StreamCreateWithPriority(&s, 0, -100)); /* clamped */
  OK(A.StreamGetPriority(s, &prio));
  CHECK(prio == -5);
  CUcontext sc = NULL;
  OK(A.StreamGetCtx(s, &sc));
  CHECK(sc == ctx);
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.StreamCreate(&s, 0x10));

  CUdeviceptr d = 0;
  OK(A.MemAllocAsync(&d, 1 << 20, s));
  OK(A.MemsetD8Async(d, 1, 1 << 20, s));
  OK(A.MemFreeAsync(d, s));
  OK(A.StreamSynchronize(s));
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemsetD8(d, 0, 16)); /* freed */
  EXPECT(CUDA_ERROR_INVALID_VALUE, A.MemFreeAsync(d, s));

  /* Destroy returns at once; queued work still runs. */
  t_gate g = {0};
  int ran = 0;
  OK(A.LaunchHostFunc(s, t_gate_wait, &g));
  OK(A.LaunchHostFunc(s, set_flag, &ran));
  OK(A.StreamDestroy(s));
  EXPECT(CUDA_ERROR_INVALID_HANDLE, A.StreamQuery(s));
  EXPECT(CUDA_ERROR_INVALID_HANDLE, A.StreamDestroy(s));
  t_gate_open(&g);
  OK(A.CtxSynchronize());
  CHECK(__atomic_load_n(&ran, __ATOMIC_ACQUIRE) == 1);

  /* Made-up handles. */
  CUstream bogus = (CUstream)(uintptr_t)0x1234;
  CUevent bev = (CUevent)(uintptr_t)0x5c03000000000999ull;
  unsigned char b[4];
  EXPECT(CUDA_ERROR_INVALID_HANDLE, A.StreamSynchronize(bogus));
  EXPECT(CUDA_ERROR_INVALID_HANDLE, A.MemcpyHtoDAsync(0, b, 0, bogus));
  EXPECT(CUDA_ERROR_INVALID_HANDLE, A.EventRecord(bev, NULL));
  EXPECT(CUDA_ERROR_INVALID_HANDLE, A.StreamWaitEvent(NULL, bev, 0));
  EXPECT(CUDA_ERROR_INVALID_HANDLE, A.StreamDestroy(NULL));
  CUevent ev;
  OK(A.EventCreate(&ev, 0));
  EXPECT(CUDA_ERROR_INVALID_HANDLE, A.StreamSynchronize((CUstream)ev));
  OK(A.EventDestroy(ev));
}

/* cuEventElapsedTime answers in virtual time (simcuda_event.c): work
 * queued but not reached by the caller's clock is not ready, and a loop
 * polling it gets there (each poll charges a call); once a host thread
 * synchronised with the end event, any thread reads it -- one whose clock
 * is still behind the event's stamp too, as with CUDA. */
typedef struct elapsed_reader {
  CUcontext ctx;
  CUevent e0, e1;
  t_gate go;
  CUresult r;
  float ms;
} elapsed_reader;

static void *read_elapsed(void *arg) {
  elapsed_reader *x = arg;
  OK(A.CtxSetCurrent(x->ctx));
  CUevent early; /* a call: this thread's clock starts before the copy */
  OK(A.EventCreate(&early, 0));
  t_gate_wait(&x->go);
  x->r = A.EventElapsedTime(&x->ms, x->e0, x->e1);
  OK(A.EventDestroy(early));
  return NULL;
}

static void test_elapsed_virtual_time(CUcontext ctx) {
  enum { N = 64 << 20 };
  CUstream s;
  void *h;
  CUdeviceptr d;
  elapsed_reader x = {.ctx = ctx};
  OK(A.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
  OK(A.MemAllocHost(&h, N));
  OK(A.MemAlloc(&d, N));
  OK(A.EventCreate(&x.e0, 0));
  OK(A.EventCreate(&x.e1, 0));
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, read_elapsed, &x) == 0);
  usleep(20000); /* the reader's clock starts now */
  OK(A.EventRecord(x.e0, s));
  OK(A.MemcpyHtoDAsync(d, h, N, s));
  OK(A.EventRecord(x.e1, s));
  float ms = 0;
  EXPECT(CUDA_ERROR_NOT_READY, A.EventElapsedTime(&ms, x.e0, x.e1));
  OK(A.EventSynchronize(x.e1));
  t_gate_open(&x.go);
  REQUIRE(pthread_join(t, NULL) == 0);
  EXPECT(CUDA_SUCCESS, x.r);
  CHECK(x.ms > 0);
  /* the same thread polls work queued after its synchronisation */
  OK(A.EventRecord(x.e0, s));
  OK(A.MemcpyHtoDAsync(d, h, N, s));
  OK(A.EventRecord(x.e1, s));
  long polls = 0;
  CUresult r;
  while ((r = A.EventElapsedTime(&ms, x.e0, x.e1)) == CUDA_ERROR_NOT_READY &&
         polls < 100000000L)
    polls++;
  EXPECT(CUDA_SUCCESS, r);
  CHECK(polls > 0 && ms > 0);
  OK(A.EventDestroy(x.e0));
  OK(A.EventDestroy(x.e1));
  OK(A.MemFree(d));
  OK(A.MemFreeHost(h));
  OK(A.StreamDestroy(s));
}

int main(void) {
  t_open();
  t_load(&A, 0);
  t_load(&P, 1);
  CUcontext ctx = t_start(&A);
  test_async_copies_many_streams();
  test_order_on_one_stream();
  test_events();
  test_legacy_stream(ctx);
  test_per_thread_stream();
  test_callbacks();
  test_misc(ctx);
  test_elapsed_virtual_time(ctx);
  OK(A.CtxSynchronize());
  return t_finish("test_simcuda_streams");
}
