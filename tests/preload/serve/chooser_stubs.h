/* What serve/choose/chooser.c calls, for tests that link it alone: a clock
 * the test moves (now_ns), a driver whose events time ELAPSED_MS (4 us
 * unless the test sets it) and are never captured, no other stream's
 * events (unless other_busy), no upload of libibp's own on the link (unless
 * own_upload).  Included
 * once, by the test's main file. */
#ifndef IBP_TEST_CHOOSER_STUBS_H
#define IBP_TEST_CHOOSER_STUBS_H

#include "base/base.h"
#include "base/clock.h"
#include "base/driver.h"
#include "base/log.h"
#include "serve/choose/streams.h"

ibp_config ibp__cfg;
static double now_ns = 1e9;
static float elapsed_ms = 0.004f;

double ibp__clock_ns(void) {
  return now_ns;
}

static CUresult elapsed(float *ms, CUevent a, CUevent b) {
  (void)a, (void)b;
  *ms = elapsed_ms;
  return CUDA_SUCCESS;
}

static CUresult not_capturing(CUstream s, CUstreamCaptureStatus *cs) {
  (void)s;
  *cs = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

static CUresult create(CUevent *e, unsigned f) {
  (void)f;
  *e = (CUevent)1;
  return CUDA_SUCCESS;
}

static CUresult record(CUevent e, CUstream s) {
  (void)e, (void)s;
  return CUDA_SUCCESS;
}

static ibp_driver drv;

const ibp_driver *ibp__driver(void) {
  return &drv;
}

/* The stand-in driver's calls in place. */
static void stub_driver_init(void) {
  drv.cuEventElapsedTime = elapsed;
  drv.cuEventCreate = create;
  drv.cuEventRecord = record;
  drv.cuStreamIsCapturing = not_capturing;
}

void ibp__log(ibp_log_level level, const char *fmt, ...) {
  (void)level, (void)fmt;
}

/* Other streams' work, where a test sets other_busy: OTHER_LINK, the
 * first event ibp__streams_mark_others records for a copy's span on the
 * link is its (other_event; other_gapped: a staged copy's windows);
 * OTHER_TWO, a second one, a staged copy's windows (other2_event);
 * OTHER_CALLER, the first event for a staged copy's whole span on its
 * caller's stream is its instead (other_event). */
enum { OTHER_LINK = 1, OTHER_TWO = 2, OTHER_CALLER = 4 };
static int other_busy, other_gapped;
static CUevent other_event, other2_event;

unsigned ibp__streams_mark_others(int dev, CUstream s, CUstream also,
                                  int link_only, double now, CUevent ev[],
                                  unsigned max, unsigned *gapped) {
  (void)dev, (void)s, (void)also, (void)now;
  unsigned none;
  gapped = gapped ? gapped : &none; /* may be NULL (streams.h) */
  *gapped = 0;
  if (!max || !(other_busy & (link_only ? OTHER_LINK : OTHER_CALLER)))
    return 0;
  other_event = ev[0];
  *gapped = link_only && other_gapped;
  if (!link_only || !(other_busy & OTHER_TWO) || max < 2)
    return 1;
  other2_event = ev[1];
  *gapped |= 2u;
  return 2;
}

/* an upload of libibp's own shares the link only where a test sets
 * own_upload */
static int own_upload;
int ibp__streams_own_clear(int dev, double since_ns) {
  (void)dev, (void)since_ns;
  return !own_upload;
}

#endif /* IBP_TEST_CHOOSER_STUBS_H */
