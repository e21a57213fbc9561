/*
 * libibp's own uploads in the streams table (serve/choose/streams.c,
 * ibp__streams_own_*): a span is clear of them only when none runs and
 * none ended after the span's start, on the device's clock, and only on
 * the device they ran on; a forked child forgets the ones its parent was
 * running.  And what a copy is queued behind on the link
 * (ibp__streams_queued): the other streams' link work beyond its own
 * stream's there -- a staged copy's windows wait for its copy stream's
 * last windows, not for its caller's decodes -- and which of the other
 * streams' events mark work that takes turns on the link
 * (ibp__streams_mark_others: a staged copy's windows).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "base/clock.h"
#include "base/driver.h"
#include "serve/choose/streams.h"

static double clock_now;
static int failures;

double ibp__clock_ns(void) {
  return clock_now;
}

/* events record the stream they were recorded on */
static CUresult record(CUevent e, CUstream s) {
  *(CUstream *)e = s;
  return CUDA_SUCCESS;
}

static CUresult not_capturing(CUstream s, CUstreamCaptureStatus *cs) {
  (void)s;
  *cs = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

static ibp_driver drv = {.cuEventRecord = record,
                         .cuStreamIsCapturing = not_capturing};

const ibp_driver *ibp__driver(void) {
  return &drv;
}

#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);                  \
      failures++;                                                              \
    }                                                                          \
  } while (0)

#define S(n) ((CUstream)(uintptr_t)(0x100 * (n)))

/* Driver's copies (held whole) and staged copies, each on a device of its
 * own, then both on a third. */
static void test_queued(void) {
  /* two streams' driver copies of 10 us: the second behind the first */
  clock_now = 0;
  CHECK(ibp__streams_queued(1, S(1), 0, 10, 10, NULL) == 0);
  CHECK(ibp__streams_queued(1, S(2), 0, 10, 10, NULL) == 10);
  CHECK(ibp__streams_queued(1, S(1), 0, 10, 10, NULL) == 10);
  /* staged copies of 150 us, 64 on the link (their decodes the longer
   * part): the first stream's second copy waits for the second stream's
   * windows, 64 us -- not 0, as measured from its own decodes' end */
  CHECK(ibp__streams_queued(2, S(1), 0, 150, 64, S(11)) == 0);
  CHECK(ibp__streams_queued(2, S(2), 0, 150, 64, S(12)) == 64);
  CHECK(ibp__streams_queued(2, S(1), 0, 150, 64, S(11)) == 64);
  /* a driver's copy on S(1), a staged copy on S(2): a copy on S(3) is
   * timed beside both -- the staged one's windows take turns on the
   * link, the driver's copy is held whole */
  CHECK(ibp__streams_queued(3, S(1), 0, 10, 10, NULL) == 0);
  CHECK(ibp__streams_queued(3, S(2), 0, 150, 64, S(12)) == 10);
  CUstream on[3] = {0};
  CUevent ev[3] = {(CUevent)&on[0], (CUevent)&on[1], (CUevent)&on[2]};
  unsigned gapped = ~0u;
  const unsigned n =
      ibp__streams_mark_others(3, S(3), NULL, 1, 1, ev, 3, &gapped);
  CHECK(n == 2);
  for (unsigned k = 0; k < n; k++)
    CHECK((gapped >> k & 1) == (on[k] == S(12)));
  CHECK(gapped >> n == 0);
  CHECK((on[0] == S(12) && on[1] == S(1)) || (on[0] == S(1) && on[1] == S(12)));
  /* all but libibp's own streams: the staged copy's caller, whose decodes
   * leave the link gaps (gapped), and the driver's copy (held whole) */
  gapped = ~0u;
  const unsigned m =
      ibp__streams_mark_others(3, S(3), NULL, 0, 1, ev, 3, &gapped);
  CHECK(m == 2);
  for (unsigned k = 0; k < m; k++)
    CHECK((gapped >> k & 1) == (on[k] == S(2)));
  CHECK((on[0] == S(2) && on[1] == S(1)) || (on[0] == S(1) && on[1] == S(2)));
  /* device 1 again: S(2)'s copy ended at 20, where the link let it
   * start (10), not where its stream was free (0): its next copy, behind
   * S(1)'s second (the link's work until 30), is queued 10 us beyond it */
  CHECK(ibp__streams_queued(1, S(2), 0, 10, 10, NULL) == 10);
}

/* Busy per stream: a stream is busy only while its own work runs, and
 * then with the other streams whose work runs too -- libibp's own copy
 * streams not counted (their decodes are their callers'). */
static void test_busy(void) {
  clock_now = 0;
  CHECK(ibp__streams_queued(4, S(1), 0, 10, 10, NULL) == 0); /* ends 10 */
  CHECK(ibp__streams_busy(4, S(1), 5) == 1);
  CHECK(ibp__streams_busy(4, S(2), 5) == 0); /* S(1)'s work is not S(2)'s */
  CHECK(ibp__streams_queued(4, S(2), 0, 10, 10, NULL) == 10); /* ends 20 */
  CHECK(ibp__streams_busy(4, S(1), 5) == 2);
  CHECK(ibp__streams_busy(4, S(2), 5) == 2);
  CHECK(ibp__streams_busy(4, S(3), 5) == 0);
  /* a staged copy on S(3), its windows on libibp's stream S(13) */
  CHECK(ibp__streams_queued(4, S(3), 0, 150, 64, S(13)) == 20);
  CHECK(ibp__streams_busy(4, S(1), 5) == 3);  /* S(2), S(3): not S(13) */
  CHECK(ibp__streams_busy(4, S(1), 15) == 0); /* S(1)'s work ended at 10 */
  CHECK(ibp__streams_busy(4, S(3), 15) == 2); /* and S(2)'s */
  CHECK(ibp__streams_busy(4, S(3), 1000) == 0);
  CHECK(ibp__streams_busy(-1, S(3), 5) == 0);
}

/* A full table: a staged copy's copy stream takes another stream's entry,
 * never its caller's just written (the one ending first then). */
static void test_full_table(void) {
  clock_now = 0;
  for (int k = 1; k <= 16; k++) /* 1000 us each, 10 on the link */
    ibp__streams_queued(6, S(k), 0, 1000, 10, NULL);
  /* S(20) takes S(1)'s entry, ends at 160 + 100; its copy stream S(30)
   * takes S(2)'s */
  CHECK(ibp__streams_queued(6, S(20), 0, 100, 10, S(30)) == 160);
  CHECK(ibp__streams_busy(6, S(20), 200) >= 1);
  CHECK(ibp__streams_busy(6, S(2), 200) == 0);
}

static void *queue_per_thread(void *arg) {
  (void)arg;
  CHECK(ibp__streams_queued(5, CU_STREAM_PER_THREAD, 0, 10, 10, NULL) == 0);
  CHECK(ibp__streams_busy(5, CU_STREAM_PER_THREAD, 5) == 1);
  return NULL;
}

/* The per-thread default stream is each thread's own: another thread's
 * work there leaves this thread's idle (counted as another stream's). */
static void test_per_thread(void) {
  clock_now = 0;
  pthread_t t;
  if (pthread_create(&t, NULL, queue_per_thread, NULL) != 0) {
    CHECK(!"pthread_create");
    return;
  }
  pthread_join(t, NULL);
  CHECK(ibp__streams_busy(5, CU_STREAM_PER_THREAD, 5) == 0);
  CHECK(ibp__streams_queued(5, CU_STREAM_PER_THREAD, 0, 10, 10, NULL) == 10);
  CHECK(ibp__streams_busy(5, CU_STREAM_PER_THREAD, 5) == 2);
}

int main(void) {
  test_queued();
  test_busy();
  test_per_thread();
  test_full_table();
  CHECK(ibp__streams_own_clear(0, 0));
  CHECK(!ibp__streams_own_clear(-1, 0)); /* no such device */
  clock_now = 100;
  ibp__streams_own_begin(0);
  CHECK(!ibp__streams_own_clear(0, 50));   /* one runs */
  CHECK(!ibp__streams_own_clear(0, 1000)); /* still */
  CHECK(ibp__streams_own_clear(1, 50));    /* another device */
  ibp__streams_own_begin(0);               /* a second, on another thread */
  clock_now = 300;
  ibp__streams_own_end(0);
  CHECK(!ibp__streams_own_clear(0, 1000)); /* the second still runs */
  clock_now = 400;
  ibp__streams_own_end(0);
  CHECK(!ibp__streams_own_clear(0, 50));  /* ended after the span began */
  CHECK(!ibp__streams_own_clear(0, 399)); /* likewise */
  CHECK(ibp__streams_own_clear(0, 400));  /* began as it ended */
  CHECK(ibp__streams_own_clear(0, 500));
  ibp__streams_own_end(0); /* one end too many: no harm */
  CHECK(ibp__streams_own_clear(0, 500));
  ibp__streams_own_begin(0);
  ibp__streams_after_fork_child(); /* its thread is gone */
  CHECK(ibp__streams_own_clear(0, 0));
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("test_streams_own: ok\n");
  return 0;
}
