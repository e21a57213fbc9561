/*
 * The virtual clock (src/simcuda_vclock.c, docs/PROFILE.md) against times
 * computed by hand from vclock_test.profile (IBP_PROFILE): a copy of N
 * bytes, a device-to-host copy, a batch call, a kernel reading host
 * memory, two streams
 * sharing the link (taken in the order of submission), queries answered
 * in virtual time, a synchronous copy and the host clock it leaves, and
 * the events that measure them, and two streams' kernels sharing the
 * SMs.  All times in microseconds; a copy of
 * 1e6 bytes at 10 GB/s takes 100 us.
 *
 * Charged on the calling thread: event record 0.5, copy 2, launch 3.
 */
#include "sim_test_kernels.h"
#include "simcuda_test.h"

#include <math.h>
#include <stdint.h>
#include <unistd.h>

#define N 1000000u

static t_api A;

static float elapsed(CUevent a, CUevent b) {
  float ms = -1;
  OK(A.EventElapsedTime(&ms, a, b));
  return ms * 1000.0f;
}

#define NEAR(got, want)                                                        \
  do {                                                                         \
    double g_ = (got), w_ = (want);                                            \
    if (fabs(g_ - w_) > 1e-3 * (1 + fabs(w_))) {                               \
      fprintf(stderr, "%s:%d: %s = %.4f us, want %.4f\n", __FILE__, __LINE__,  \
              #got, g_, w_);                                                   \
      t_failures++;                                                            \
    }                                                                          \
  } while (0)

/* e0 at h+0.5; the copy submitted at h+2.5, on the link from h+3.5 for
 * 100 us; e1 submitted at h+3 waits for it: 103 us. */
static void test_copy(CUstream s, void *host, CUdeviceptr dev, CUevent e0,
                      CUevent e1) {
  OK(A.EventRecord(e0, s));
  OK(A.MemcpyHtoDAsync(dev, host, N, s));
  OK(A.EventRecord(e1, s));
  OK(A.EventSynchronize(e1));
  NEAR(elapsed(e0, e1), 103.0);
  /* device to host at 5 GB/s: 2 + 1 + 200 */
  OK(A.EventRecord(e0, s));
  OK(A.MemcpyDtoHAsync(host, dev, N, s));
  OK(A.EventRecord(e1, s));
  OK(A.EventSynchronize(e1));
  NEAR(elapsed(e0, e1), 203.0);
}

/* One batch call of three copies: one call (2 us, at h+2.5); the first
 * entry set up in 1 us, each later one in 0.25 (ce_batch_setup_us), each
 * 100 us on the link: the last ends at h+304, 303.5 us after e0 (three
 * copies of their own calls: 305). */
static void test_batch(CUstream s, void *host, CUdeviceptr dev, CUevent e0,
                       CUevent e1) {
  CUdeviceptr dsts[3] = {dev, dev + N, dev};
  CUdeviceptr srcs[3] = {(CUdeviceptr)(uintptr_t)host,
                         (CUdeviceptr)(uintptr_t)host,
                         (CUdeviceptr)(uintptr_t)host};
  size_t sizes[3] = {N, N, N}, idx = 0;
  CUmemcpyAttributes at = {0};
  at.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  OK(A.EventRecord(e0, s));
  OK(A.MemcpyBatchAsync(dsts, srcs, sizes, 3, &at, &idx, 1, s));
  OK(A.EventRecord(e1, s));
  OK(A.EventSynchronize(e1));
  NEAR(elapsed(e0, e1), 303.5);
}

/* Two streams, one link: the link is taken in the order the copies were
 * submitted, whichever stream's worker gets there first.  s1's copy is
 * ready at h+3.5 and has the link for 100 us; s2's, ready 2 us later,
 * follows it: 103 and 203 us after e0. */
static void test_shared_link(CUstream s1, CUstream s2, void *host,
                             CUdeviceptr dev, CUevent e0, CUevent ea,
                             CUevent eb) {
  OK(A.EventRecord(e0, s1));
  OK(A.MemcpyHtoDAsync(dev, host, N, s1));
  OK(A.MemcpyHtoDAsync(dev + N, host, N, s2));
  OK(A.EventRecord(ea, s1));
  OK(A.EventRecord(eb, s2));
  OK(A.EventSynchronize(ea));
  OK(A.EventSynchronize(eb));
  NEAR(elapsed(e0, ea), 103.0);
  NEAR(elapsed(e0, eb), 203.0);
}

/* The same when the first copy's worker reaches the link last: s1 first
 * sets SET_BYTES of device memory (SET_BYTES / 1000 GB/s + 1 us setup in
 * the model, many milliseconds of memset for its worker), s2 moves
 * 0.4e6 bytes device to host (81 us, at once) before its copy.  s1's copy
 * is ready at ~69.5 us, s2's at ~86.5: s2's, though its worker is there
 * first, waits for s1's to take the link, and follows it. */
#define SET_BYTES (64u << 20)
static void test_link_order(CUstream s1, CUstream s2, void *host,
                            CUdeviceptr dev, CUdeviceptr big, CUevent e0,
                            CUevent ea, CUevent eb) {
  for (int trial = 0; trial < 3; trial++) {
    OK(A.EventRecord(e0, s1));
    OK(A.MemsetD8Async(big, (unsigned char)trial, SET_BYTES, s1));
    OK(A.MemcpyHtoDAsync(dev, host, N, s1));
    OK(A.MemcpyDtoHAsync(host, dev + N, 400000, s2));
    OK(A.MemcpyHtoDAsync(dev + N, host, N, s2));
    OK(A.EventRecord(ea, s1));
    OK(A.EventRecord(eb, s2));
    OK(A.EventSynchronize(ea));
    OK(A.EventSynchronize(eb));
    double a = elapsed(e0, ea), b = elapsed(e0, eb);
    CHECK(a < b);
    NEAR(b - a, 100.0);
  }
}

/* Queries answer in virtual time: work the emulator has long finished is
 * not done before the caller's clock reaches its modelled end, and each
 * query is a driver call (0.5 us), so a polling loop gets there. */
static void test_query(CUstream s, void *host, CUdeviceptr dev, CUevent e0,
                       CUevent e1) {
  OK(A.EventRecord(e0, s));
  OK(A.MemcpyHtoDAsync(dev, host, N, s));
  OK(A.EventRecord(e1, s));
  usleep(200 * 1000); /* the worker has run it by now */
  CHECK(A.StreamQuery(s) == CUDA_ERROR_NOT_READY);
  CHECK(A.EventQuery(e1) == CUDA_ERROR_NOT_READY);
  unsigned polls = 0;
  while (A.EventQuery(e1) == CUDA_ERROR_NOT_READY)
    polls++;
  /* ~100 us of link at 0.5 us a query */
  CHECK(polls > 150 && polls < 250);
  CHECK(A.StreamQuery(s) == CUDA_SUCCESS);
  NEAR(elapsed(e0, e1), 103.0);
}

/* 4 blocks of 256 threads read N bytes of pinned memory (N/32 sectors):
 * 4 SMs x 1000 B per 1 us round trip = 4 GB/s (under the 8 GB/s cap).
 * Launch submitted at h+3.5: latency 4 + round trip 1 + 1e6 B / 4 GB/s
 * (250 us) = 255 us, so e1 is 258 us after e0. */
static void test_kernel(CUfunction copy, CUstream s, const void *pinned,
                        CUdeviceptr dev, CUevent e0, CUevent e1) {
  sim_copy_args args = {(uint32_t *)(uintptr_t)dev, pinned, N / 4};
  void *params[] = {&args};
  OK(A.EventRecord(e0, s));
  OK(A.LaunchKernel(copy, 4, 1, 1, 256, 1, 1, 0, s, params, NULL));
  OK(A.EventRecord(e1, s));
  OK(A.EventSynchronize(e1));
  NEAR(elapsed(e0, e1), 258.0);
}

/* A synchronous copy returns when it is done: the host clock is then at
 * its end, so an event recorded right after on an idle stream is stamped
 * 0.5 us after that (its own charge).  e0 on the idle stream s2 at h+0.5;
 * the copy on the legacy stream submitted at h+2.5, ends at h+103.5; e1
 * submitted at h+104: 103.5 us. */
static void test_sync_copy(CUstream s2, void *host, CUdeviceptr dev, CUevent e0,
                           CUevent e1) {
  OK(A.EventRecord(e0, s2));
  OK(A.EventSynchronize(e0));
  OK(A.MemcpyHtoD(dev, host, N));
  OK(A.EventRecord(e1, s2));
  OK(A.EventSynchronize(e1));
  NEAR(elapsed(e0, e1), 103.5);
}

/* Launches `blocks1` blocks of fill on s1, then `blocks2` on s2 (blocks of
 * 32 threads: a block an SM, up to 16), and returns when s2's kernel ends,
 * us after e0; *first: when s1's does.  blocks1 up to N / 128 (dev holds
 * 2N bytes). */
static double two_kernels(CUfunction fill, CUstream s1, CUstream s2,
                          CUdeviceptr dev, unsigned blocks1, unsigned blocks2,
                          CUevent e0, CUevent ea, CUevent eb, double *first) {
  sim_fill_args a1 = {(uint32_t *)(uintptr_t)dev, 1, blocks1 * 32};
  sim_fill_args a2 = {(uint32_t *)(uintptr_t)(dev + N), 2, blocks2 * 32};
  void *p1[] = {&a1}, *p2[] = {&a2};
  OK(A.EventRecord(e0, s1));
  OK(A.LaunchKernel(fill, blocks1, 1, 1, 32, 1, 1, 0, s1, p1, NULL));
  OK(A.LaunchKernel(fill, blocks2, 1, 1, 32, 1, 1, 0, s2, p2, NULL));
  OK(A.EventRecord(ea, s1));
  OK(A.EventRecord(eb, s2));
  OK(A.EventSynchronize(ea));
  OK(A.EventSynchronize(eb));
  *first = elapsed(e0, ea);
  return elapsed(e0, eb);
}

/* Two streams' kernels share the device's 16 SMs.  fill reads no host
 * memory and writes nothing the model counts: alone it takes the launch
 * latency, 4 us, on its blocks' SMs.  s1's starts at h+3.5 (3 us launch
 * call after e0's 0.5) and ends at h+7.5, 7 us after e0; s2's starts at
 * h+6.5, 3 us later.  Both want all 16: s2's gets none until h+7.5, then
 * all for 4 us: 11 (alone it would end at 10).  s1's kernel has 8192
 * blocks (still 16 SMs): its worker takes far longer to emulate it than
 * s2's takes for 16, so s2's reaches the SMs first in real time, yet
 * takes them second (in turn: simcuda_turns.c).  Each wanting 8: side by
 * side, 7 and 10.  12 and 8: s2's gets 4 SMs to h+7.5 (4 SM-us of its
 * 32), then its 8 for the 28 left, 3.5 us: 10.5. */
static void test_shared_sms(CUfunction fill, CUstream s1, CUstream s2,
                            CUdeviceptr dev, CUevent e0, CUevent ea,
                            CUevent eb) {
  double first = 0;
  NEAR(two_kernels(fill, s1, s2, dev, 8192, 16, e0, ea, eb, &first), 11.0);
  NEAR(first, 7.0);
  NEAR(two_kernels(fill, s1, s2, dev, 8, 8, e0, ea, eb, &first), 10.0);
  NEAR(first, 7.0);
  NEAR(two_kernels(fill, s1, s2, dev, 12, 8, e0, ea, eb, &first), 10.5);
  NEAR(first, 7.0);
}

int main(void) {
  t_open();
  t_load(&A, 0);
  t_start(&A);
  CUlibrary lib;
  CUkernel k;
  CUfunction copy, fill;
  OK(A.LibraryLoadData(&lib, t_fatbin, NULL, NULL, 0, NULL, NULL, 0));
  OK(A.LibraryGetKernel(&k, lib, "sim_copy_host_u32"));
  OK(A.KernelGetFunction(&copy, k));
  OK(A.LibraryGetKernel(&k, lib, "sim_fill_u32"));
  OK(A.KernelGetFunction(&fill, k));
  void *host = NULL;
  CUdeviceptr dev = 0;
  OK(A.MemHostAlloc(&host, N, 0));
  OK(A.MemAlloc(&dev, 2 * N));
  REQUIRE(host && dev);
  memset(host, 7, N);
  CUstream s1, s2;
  OK(A.StreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  OK(A.StreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUevent e0, e1, e2;
  OK(A.EventCreate(&e0, 0));
  OK(A.EventCreate(&e1, 0));
  OK(A.EventCreate(&e2, 0));
  test_copy(s1, host, dev, e0, e1);
  test_batch(s1, host, dev, e0, e1);
  test_shared_link(s1, s2, host, dev, e0, e1, e2);
  CUdeviceptr big = 0;
  OK(A.MemAlloc(&big, SET_BYTES));
  test_link_order(s1, s2, host, dev, big, e0, e1, e2);
  test_query(s1, host, dev, e0, e1);
  test_kernel(copy, s1, host, dev, e0, e1);
  test_sync_copy(s2, host, dev, e0, e1);
  test_shared_sms(fill, s1, s2, dev, e0, e1, e2);
  return t_finish("test_simcuda_vclock");
}
