/*
 * Eight host threads at once, each with its own stream and its per-thread
 * default stream: copies, kernel launches, events, allocations and frees
 * interleave across threads; every byte is checked.
 */
#include "sim_test_kernels.h"
#include "simcuda_test.h"

#include <pthread.h>
#include <stdint.h>

enum { THREADS = 8, ROUNDS = 40, N = 16 * 1024 };

static t_api A, P;
static CUcontext ctx;
static CUfunction fill;

typedef struct worker {
  int id;
  int failures;
} worker;

#define WCHECK(w, cond)                                                        \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "thread %d line %d: %s\n", (w)->id, __LINE__, #cond);    \
      (w)->failures++;                                                         \
    }                                                                          \
  } while (0)
#define WOK(w, call) WCHECK(w, (call) == CUDA_SUCCESS)

static void *run(void *arg) {
  worker *w = arg;
  WOK(w, A.CtxSetCurrent(ctx));
  CUstream s;
  WOK(w, A.StreamCreate(&s, w->id % 2 ? CU_STREAM_NON_BLOCKING : 0));
  uint32_t *src, *dst;
  WOK(w, A.MemHostAlloc((void **)&src, N * 4, 0));
  WOK(w, A.MemHostAlloc((void **)&dst, N * 4, 0));
  CUevent ev;
  WOK(w, A.EventCreate(&ev, 0));
  for (int r = 0; r < ROUNDS; r++) {
    CUdeviceptr d1, d2;
    WOK(w, A.MemAlloc(&d1, N * 4));
    WOK(w, A.MemAlloc(&d2, N * 4));
    uint32_t base = (uint32_t)(w->id * 1000003 + r * 7919);
    for (uint32_t i = 0; i < N; i++)
      src[i] = base ^ (i * 2654435761u);
    /* Half by copies on the thread's stream... */
    WOK(w, A.MemcpyHtoDAsync(d1, src, N * 2, s));
    WOK(w, A.MemcpyDtoDAsync(d2, d1, N * 2, s));
    /* ...half by a kernel on the per-thread default stream, ordered after
     * the copies through an event. */
    WOK(w, A.EventRecord(ev, s));
    WOK(w, P.StreamWaitEvent(NULL, ev, 0));
    sim_fill_args a = {(uint32_t *)(uintptr_t)(d2 + N * 2), base, N / 2};
    void *params[] = {&a};
    WOK(w, P.LaunchKernel(fill, 4, 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    WOK(w, P.MemcpyDtoHAsync(dst, d2, N * 4, NULL));
    WOK(w, P.StreamSynchronize(NULL));
    WCHECK(w, memcmp(dst, src, N * 2) == 0);
    int bad = 0;
    for (uint32_t i = 0; i < N / 2; i++)
      bad += dst[N / 2 + i] != base + i;
    WCHECK(w, bad == 0);
    WOK(w, A.MemFree(d1));
    WOK(w, A.MemFree(d2));
  }
  WOK(w, A.EventDestroy(ev));
  WOK(w, A.StreamDestroy(s));
  WOK(w, A.MemFreeHost(src));
  WOK(w, A.MemFreeHost(dst));
  /* The per-thread stream goes when the thread exits. */
  return NULL;
}

int main(void) {
  t_open();
  t_load(&A, 0);
  t_load(&P, 1);
  ctx = t_start(&A);
  CUlibrary lib;
  CUkernel k;
  OK(A.LibraryLoadData(&lib, t_fatbin, NULL, NULL, 0, NULL, NULL, 0));
  OK(A.LibraryGetKernel(&k, lib, "sim_fill_u32"));
  OK(A.KernelGetFunction(&fill, k));

  pthread_t t[THREADS];
  worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker){i, 0};
    REQUIRE(pthread_create(&t[i], NULL, run, &w[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    t_failures += w[i].failures;
  }
  OK(A.CtxSynchronize());
  size_t free_, total;
  OK(A.MemGetInfo(&free_, &total));
  CHECK(free_ == total); /* every allocation came back */
  OK(A.LibraryUnload(lib));
  return t_finish("test_simcuda_threads");
}
