/*
 * The virtual clock (src/simcuda_vclock.c, docs/PROFILE.md) against times
 * computed by hand from vclock_test.profile (IBP_PROFILE): a copy of N
 * bytes, a device-to-host copy, a kernel reading host memory, two streams
 * sharing the link, a synchronous copy and the host clock it leaves, and
 * the events that measure them.  All times in microseconds; a copy of
 * 1e6 bytes at 10 GB/s takes 100 us.
 *
 * Charged on the calling thread: event record 0.5, copy 2, launch 3.
 */
#include "sim_test_kernels.h"
#include "simcuda_test.h"

#include <math.h>
#include <stdint.h>

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

/* Two streams, one link: the two copies share it, so the last one ends
 * 203 us after e0 whichever stream's worker ran first; the first ends at
 * 103 us (s1's copy took the link first) or 105 us (s2's, whose copy was
 * ready 2 us later; s1's then had those 2 us and the rest after it). */
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
  double a = elapsed(e0, ea), b = elapsed(e0, eb);
  double first = a < b ? a : b, second = a < b ? b : a;
  NEAR(second, 203.0);
  CHECK(fabs(first - 103.0) < 0.01 || fabs(first - 105.0) < 0.01);
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

int main(void) {
  t_open();
  t_load(&A, 0);
  t_start(&A);
  CUlibrary lib;
  CUkernel k;
  CUfunction copy;
  OK(A.LibraryLoadData(&lib, t_fatbin, NULL, NULL, 0, NULL, NULL, 0));
  OK(A.LibraryGetKernel(&k, lib, "sim_copy_host_u32"));
  OK(A.KernelGetFunction(&copy, k));
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
  test_shared_link(s1, s2, host, dev, e0, e1, e2);
  test_kernel(copy, s1, host, dev, e0, e1);
  test_sync_copy(s2, host, dev, e0, e1);
  return t_finish("test_simcuda_vclock");
}
