/* A timed copy read against its marker (serve/choose/chooser.c,
 * span_gpu_ns): a stream that ran dry before the route's calls queued its
 * work is charged neither the calls nor the start events' (the marker's
 * time to the end event less both), a stream still busy is read by its
 * span, and a marker stamped late -- a real GPU's front end reaching it
 * after its record, or its stream sharing a hardware queue with busy work
 * -- takes no more off the span than the calls: the route's work started
 * no later than the start event plus them.  Two streams sharing the link
 * (docs/ARCHITECTURE.md "The gate", contention): a copy queued behind
 * another stream's transfer is read from that transfer's end, not as the
 * route being dear; one whose neighbour ended after it ran beside it.  Here a
 * record costs 0.5 us, the route's calls 2 us (all before its GPU work) and the
 * copy 8 us on the GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/choose/chooser.h"
#include "serve/route/route.h"

#include "chooser_stubs.h"

static int failures;

#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c);    \
      failures++;                                                              \
    }                                                                          \
  } while (0)

#define STREAM ((CUstream)0x10)
#define MARK_STREAM ((CUstream)0x20)
#define RECORD_NS 500.0
#define CALLS_NS 2000.0
#define COPY_NS 8000.0

static const ibp_profile prof = {.driver_call_us = 0.5};

/* the events: distinct handles, the marker's told apart by its stream */
static uintptr_t next_event = 0x1000;
static CUevent marker;
static float span_ms, mark_ms, other_ms;

static CUresult create_event(CUevent *e, unsigned f) {
  (void)f;
  *e = (CUevent)(next_event += 0x10);
  return CUDA_SUCCESS;
}

static CUresult create_stream(CUstream *s, unsigned f) {
  (void)f;
  *s = MARK_STREAM;
  return CUDA_SUCCESS;
}

static CUresult record_event(CUevent e, CUstream s) {
  if (s == MARK_STREAM)
    marker = e;
  now_ns += RECORD_NS;
  return CUDA_SUCCESS;
}

static CUresult elapsed_of(float *ms, CUevent a, CUevent b) {
  (void)b;
  *ms = a == marker                      ? mark_ms
        : other_busy && a == other_event ? other_ms
                                         : span_ms;
  return CUDA_SUCCESS;
}

/* One driver copy timed, its span `span_us` and the marker's time to its
 * end `mark_us`, read back: the GPU time measured (ns). */
static double timed(double span_us, double mark_us) {
  ibp_device_slot *slot = calloc(1, sizeof *slot);
  ibp_served_region *s = calloc(1, sizeof *s);
  ibp_chooser *ch = slot ? ibp__chooser_of(slot) : NULL;
  if (!ch || !s) {
    fprintf(stderr, "test_chooser_mark: out of memory\n");
    exit(2);
  }
  const unsigned cls = ibp__choose_class_index(65536, 0, IBP_CLASS_SINGLE);
  const ibp_route_cost model = {.cpu_ns = CALLS_NS, .gpu_ns = COPY_NS};
  ibp_choice c;
  memset(&c, 0, sizeof c);
  c.route = c.chosen = IBP_ROUTE_DRIVER;
  c.timed = 1;
  ibp_timing t;
  marker = NULL;
  ibp__timing_begin(slot, ch, &prof, STREAM, STREAM, cls, &c, &model, 0,
                    CALLS_NS, 0, 0, 0, &t);
  CHECK(t.index >= 0 && marker != NULL && slot->mem.mark == MARK_STREAM);
  now_ns += CALLS_NS; /* the route's calls */
  ibp__timing_end(slot, ch, STREAM, &t, 1);
  span_ms = (float)(span_us / 1e3);
  mark_ms = (float)(mark_us / 1e3);
  now_ns += 1e6; /* a decision after it ran reads it */
  ibp_route_cost prior[IBP_ROUTES];
  memset(prior, 0, sizeof prior);
  prior[IBP_ROUTE_DRIVER] = model;
  ibp_choice look;
  ibp__chooser_decide(s, slot, ch, &prof, cls, prior, 0, 0, &look);
  CHECK(ch->timed[IBP_ROUTE_DRIVER] == 1);
  const double gpu = ch->measured_ns[IBP_ROUTE_DRIVER];
  ibp__chooser_free(ch);
  free(slot);
  free(s);
  return gpu;
}

int main(void) {
  stub_driver_init();
  drv.cuEventCreate = create_event;
  drv.cuEventRecord = record_event;
  drv.cuEventElapsedTime = elapsed_of;
  drv.cuStreamCreate = create_stream;
  const double rec_us = RECORD_NS / 1e3, calls_us = CALLS_NS / 1e3,
               copy_us = COPY_NS / 1e3;
  /* idle: the start event as its record ends, the copy after the calls */
  double gpu = timed(calls_us + copy_us, rec_us + calls_us + copy_us);
  CHECK(fabs(gpu - COPY_NS) < 20);
  /* ran dry during the calls: the start event 1 us after its record */
  gpu = timed(calls_us - 1 + copy_us, rec_us + calls_us + copy_us);
  CHECK(fabs(gpu - COPY_NS) < 20);
  /* busy: the work before it ends 5 us after the calls, the span is the
   * copy */
  gpu = timed(copy_us, rec_us + calls_us + 5 + copy_us);
  CHECK(fabs(gpu - COPY_NS) < 20);
  /* idle, the marker stamped 9 us late: no less than the span less the
   * calls (it read 0 -- the copy as free -- taking the marker at its
   * word) */
  gpu = timed(calls_us + copy_us, rec_us + calls_us + copy_us - 9);
  CHECK(fabs(gpu - COPY_NS) < 20);
  /* two streams sharing the link: another stream's transfer held it for
   * the first 12 us of the span, its event 8 us before the copy's end --
   * the copy's 8 us, not 20 */
  other_busy = 1;
  other_ms = (float)(copy_us / 1e3);
  gpu = timed(12 + copy_us, rec_us + calls_us + 12 + copy_us);
  CHECK(fabs(gpu - COPY_NS) < 20);
  /* the other transfer ended 3 us after the copy: it ran beside it, and
   * the span stands */
  other_ms = -0.003f;
  gpu = timed(copy_us + 3, rec_us + calls_us + copy_us + 3);
  CHECK(fabs(gpu - COPY_NS - 3000) < 20);
  other_busy = 0;
  if (failures)
    fprintf(stderr, "test_chooser_mark: %d failures\n", failures);
  else
    printf("test_chooser_mark: ok\n");
  return failures != 0;
}
