/*
 * e2e_staged_streams: the staged path (README.md; docs/ARCHITECTURE.md
 * "Staged copies") where a stream must not wait for another stream's work
 * and must not break another thread's stream capture.  Registered with
 * IBP_PATH=staged under the h100-pcie5 profile and IBP_BATCH=0.
 *
 *   e2e_staged_streams [capture] [streams]    (none: both, capture first)
 *
 * capture  Region "capture" (4 MiB + 4321, tensors of 4 KiB) is compressed
 *          by a copy too small to be staged.  Thread A begins a capture in
 *          CU_STREAM_CAPTURE_MODE_GLOBAL on its stream (a memset in it) and
 *          waits; thread B then makes the process's first staged copy (3 MiB
 *          with cudaMemcpyAsync on its own non-blocking stream: the ring of
 *          staging buffers is set up then), synchronizes that stream and
 *          checks the bytes (read back with cudaMemcpyAsync into pinned
 *          memory: nothing that would break a global capture).  Then A's
 *          capture must still be active and end with CUDA_SUCCESS and a
 *          graph, which A destroys ("Nothing under capture": libibp sets up
 *          the ring and submits in relaxed capture mode).  Capture and
 *          graphs are driver calls (cuda.h): the simulated runtime has none.
 * streams  Region "streams" (32 MiB + 777, tensors of 64 KiB).  Two
 *          non-blocking streams: S1 gets a host function that blocks until
 *          the program has seen S2's copy complete, then a 24 MiB copy from
 *          the region (more compressed bytes than the ring holds); S2 a
 *          6 MiB copy from the same region.  S2 is synchronized and its
 *          bytes checked while S1 still waits; then S1 is released and both
 *          destinations are verified ("Buffers are not shared across
 *          streams while busy": S2 must not wait for S1's queued decodes).
 *
 * Every case runs under a watchdog: a step that does not finish within
 * WATCHDOG_S seconds (SIGALRM) ends the program with exit code 9 and names
 * the step.  Other exit codes as e2e_util.h: 0 pass, 1 wrong bytes or a
 * failed check, 2 setup error, 3 a CUDA call failed.
 */
#include "e2e_util.h"

#include <cuda.h>

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define WATCHDOG_S 20
#define STR(x) #x
#define XSTR(x) STR(x)
#define E2E_EXIT_HANG 9

enum { CAPTURE, STREAMS, NREGIONS };

static e2e_region regions[NREGIONS] = {
    [CAPTURE] = {.name = "capture",
                 .size = (4 << 20) + 4321,
                 .tensor = 4096,
                 .alloc = E2E_HOST_ALLOC,
                 .data = E2E_F32},
    [STREAMS] = {.name = "streams",
                 .size = (32 << 20) + 777,
                 .tensor = 65536,
                 .alloc = E2E_MALLOC_HOST,
                 .data = E2E_F32},
};

/* ---- watchdog ------------------------------------------------------------ */

static const char *volatile step = "";

static void on_alarm(int sig) {
  (void)sig;
  const char *parts[] = {
      e2e_prog(), ": HANG: no progress in ", XSTR(WATCHDOG_S), " s: ", step,
      "\n"};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    if (write(2, parts[i], strlen(parts[i])) < 0)
      break;
  _exit(E2E_EXIT_HANG);
}

/* Names the step the watchdog reports, and gives it WATCHDOG_S seconds. */
static void watch(const char *what) {
  step = what;
  alarm(WATCHDOG_S);
}

static void unwatch(void) {
  alarm(0);
  step = "";
}

/* ---- checks -------------------------------------------------------------- */

/* A driver call of the program: on error prints it and exits 3. */
#define DRV_CK(call) drv_ck((call), #call, __LINE__)
static void drv_ck(CUresult r, const char *what, int line) {
  if (r == CUDA_SUCCESS)
    return;
  const char *name = NULL;
  cuGetErrorName(r, &name);
  fprintf(stderr, "%s: CUDA call failed: %s -> %s (line %d)\n", e2e_prog(),
          what, name ? name : "?", line);
  exit(E2E_EXIT_CUDA);
}

/* Reads b's used part back on stream s alone (cudaMemcpyAsync into pinned
 * memory `pinned`, then cudaStreamSynchronize: no call that waits for other
 * streams or breaks a global capture) and compares it with b's image.
 * Returns 0, or 1 after an e2e_fail naming the first wrong byte. */
static int check_on(const e2e_batch *b, cudaStream_t s, unsigned char *pinned,
                    const char *what) {
  size_t n = b->used + 64 < b->cap ? b->used + 64 : b->cap;
  E2E_CK(cudaMemcpyAsync(pinned, b->dev, n, cudaMemcpyDeviceToHost, s));
  E2E_CK(cudaStreamSynchronize(s));
  if (memcmp(pinned, b->image, n) == 0)
    return 0;
  size_t at = 0, wrong = 0;
  while (pinned[at] == b->image[at])
    at++;
  for (size_t i = at; i < n; i++)
    wrong += pinned[i] != b->image[i];
  const e2e_copy *c = NULL;
  for (int i = 0; i < b->ncopies; i++)
    if (at >= b->copies[i].dst_off &&
        at < b->copies[i].dst_off + b->copies[i].len)
      c = &b->copies[i];
  if (!c)
    e2e_fail("%s: device byte +%zu outside every copy overwritten "
             "(expected canary 0x%02x, got 0x%02x); %zu wrong bytes",
             what, at, b->image[at], pinned[at], wrong);
  else
    e2e_fail("%s: %s+%zu (%zu bytes): byte %zu (source offset %zu): "
             "expected 0x%02x, got 0x%02x; %zu wrong bytes",
             what, c->src->name, c->src_off, c->len, at - c->dst_off,
             c->src_off + at - c->dst_off, b->image[at], pinned[at], wrong);
  return 1;
}

/* ---- capture ------------------------------------------------------------- */

typedef struct capture_case {
  e2e_batch batch;
  unsigned char *pinned; /* readback */
  cudaStream_t a, b;     /* thread A's (capturing) and B's streams */
  pthread_barrier_t began, copied;
} capture_case;

static void *copier_main(void *arg) {
  capture_case *k = arg;
  const e2e_region *r = &regions[CAPTURE];
  pthread_barrier_wait(&k->began);
  e2e_batch_copy(&k->batch, r, r->tensor / 2 + 3, 3 * MiB, E2E_ASYNC_H2D, k->b);
  check_on(&k->batch, k->b, k->pinned,
           "thread B, first staged copy during A's global capture");
  pthread_barrier_wait(&k->copied);
  return NULL;
}

static void capture_case_run(void) {
  e2e_region *r = &regions[CAPTURE];
  capture_case k;
  unsigned char *memset_dst;
  e2e_note("capture: thread B's first staged copy while thread A captures "
           "in global mode");
  e2e_batch_init(&k.batch, 4 * MiB, 10);
  E2E_CK(cudaMallocHost((void **)&k.pinned, k.batch.cap));
  E2E_CK(cudaMalloc((void **)&memset_dst, 4096));
  E2E_CK(cudaStreamCreateWithFlags(&k.a, cudaStreamNonBlocking));
  E2E_CK(cudaStreamCreateWithFlags(&k.b, cudaStreamNonBlocking));
  /* compressed now (IBP_WAIT_READY=1) by a copy too small to be staged */
  e2e_batch_copy(&k.batch, r, 5 * r->tensor, r->tensor, E2E_SYNC_H2D, 0);
  if (pthread_barrier_init(&k.began, NULL, 2) != 0 ||
      pthread_barrier_init(&k.copied, NULL, 2) != 0)
    e2e_die("pthread_barrier_init failed");
  pthread_t copier;
  if (pthread_create(&copier, NULL, copier_main, &k) != 0)
    e2e_die("pthread_create failed");

  watch("capture: thread B's copy during thread A's capture");
  DRV_CK(cuStreamBeginCapture((CUstream)k.a, CU_STREAM_CAPTURE_MODE_GLOBAL));
  E2E_CK(cudaMemsetAsync(memset_dst, 1, 4096, k.a));
  pthread_barrier_wait(&k.began);
  pthread_barrier_wait(&k.copied);
  CUstreamCaptureStatus status;
  DRV_CK(cuStreamIsCapturing((CUstream)k.a, &status));
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
    e2e_fail("capture: thread A's capture is %s after thread B's copy "
             "(want active)",
             status == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? "invalidated"
                                                            : "not active");
  CUgraph graph = NULL;
  CUresult end = cuStreamEndCapture((CUstream)k.a, &graph);
  if (end != CUDA_SUCCESS || !graph) {
    const char *name = NULL;
    cuGetErrorName(end, &name);
    e2e_fail("capture: cuStreamEndCapture -> %s, graph %p (want CUDA_SUCCESS "
             "and a graph)",
             name ? name : "?", (void *)graph);
  }
  if (graph)
    DRV_CK(cuGraphDestroy(graph));
  pthread_join(copier, NULL);
  unwatch();

  e2e_batch_verify(&k.batch, &k.b, 1);
  pthread_barrier_destroy(&k.began);
  pthread_barrier_destroy(&k.copied);
  E2E_CK(cudaStreamDestroy(k.a));
  E2E_CK(cudaStreamDestroy(k.b));
  E2E_CK(cudaFree(memset_dst));
  E2E_CK(cudaFreeHost(k.pinned));
  e2e_batch_destroy(&k.batch);
}

/* ---- streams ------------------------------------------------------------- */

static void CUDART_CB gate_fn(void *gate) {
  while (sem_wait(gate) != 0)
    ;
}

static void streams_case_run(void) {
  e2e_region *r = &regions[STREAMS];
  e2e_batch b1, b2;
  unsigned char *pinned;
  cudaStream_t s[2];
  sem_t gate;
  e2e_note("streams: S1 blocked in a host function before a 24 MiB copy, "
           "S2's 6 MiB copy of the same region must complete");
  e2e_batch_init(&b1, 26 * MiB, 20);
  e2e_batch_init(&b2, 8 * MiB, 21);
  b1.label = "S1: ";
  b2.label = "S2: ";
  E2E_CK(cudaMallocHost((void **)&pinned, b2.cap));
  for (int i = 0; i < 2; i++)
    E2E_CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
  E2E_SYS(sem_init(&gate, 0, 0) == 0);
  /* compressed now (IBP_WAIT_READY=1) */
  e2e_batch_copy(&b1, r, 3 * r->tensor, r->tensor, E2E_SYNC_H2D, 0);

  watch("streams: S2's copy while S1 waits in a host function");
  E2E_CK(cudaLaunchHostFunc(s[0], gate_fn, &gate));
  e2e_batch_copy(&b1, r, 4097, 24 * MiB, E2E_ASYNC_H2D, s[0]);
  e2e_batch_copy(&b2, r, r->size - 6 * MiB - 5, 6 * MiB, E2E_ASYNC_H2D, s[1]);
  E2E_CK(cudaStreamSynchronize(s[1]));
  check_on(&b2, s[1], pinned, "streams: S2 while S1 waits");
  E2E_SYS(sem_post(&gate) == 0);
  watch("streams: S1 after its host function returned");
  E2E_CK(cudaStreamSynchronize(s[0]));
  E2E_CK(cudaDeviceSynchronize());
  unwatch();

  if (!e2e_batch_verify(&b1, s, 2))
    e2e_batch_verify(&b2, s, 2);
  E2E_SYS(sem_destroy(&gate) == 0);
  for (int i = 0; i < 2; i++)
    E2E_CK(cudaStreamDestroy(s[i]));
  E2E_CK(cudaFreeHost(pinned));
  e2e_batch_destroy(&b1);
  e2e_batch_destroy(&b2);
}

int main(int argc, char **argv) {
  e2e_begin("e2e_staged_streams");
  int want[NREGIONS] = {argc == 1, argc == 1};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "capture") == 0)
      want[CAPTURE] = 1;
    else if (strcmp(argv[i], "streams") == 0)
      want[STREAMS] = 1;
    else
      e2e_die("usage: e2e_staged_streams [capture] [streams]");
  }
  e2e_regions_env(regions, NREGIONS);
  E2E_SYS(signal(SIGALRM, on_alarm) != SIG_ERR);

  /* each region allocated right before its case: nothing of the streams
   * case (its region's compression) runs during the capture */
  e2e_rng rng;
  e2e_rng_seed(&rng, e2e_seed(), 1);
  for (int i = 0; i < NREGIONS && !e2e_failures(); i++) {
    if (!want[i])
      continue;
    e2e_region_alloc(&regions[i]);
    e2e_region_fill(&regions[i], &rng);
    if (i == CAPTURE) /* first: the process's first staged copy */
      capture_case_run();
    else
      streams_case_run();
    e2e_region_check_host(&regions[i], "after the copies");
    e2e_region_free(&regions[i]);
  }
  return e2e_end();
}
