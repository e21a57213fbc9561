/* The copy engine's set-up probed beside a timed copy
 * (serve/choose/engine_probe.c, through serve/choose/chooser.c): a timed
 * copy of a copy-engine route starts a probe -- 1 KiB of the region's
 * shadow to a scratch buffer, on a stream of its own -- unless one is on
 * its way, two fresh ones were read, the caller's stream is capturing, the
 * device's context is not current or probing failed; a later decision
 * reads it as its span less its copy call over the model's set-up and
 * bytes.  Here the copy call costs 2 us on the host and the model's
 * probe 1 us (a set-up of 1 us, bytes free). */
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
#define CTX ((CUcontext)0x30)
#define CALL_NS 2000.0

static const ibp_profile prof = {
    .driver_call_us = 0.5, .ce_setup_us = 1.0, .ce_h2d_gbps = 1e9};

static uintptr_t next_handle = 0x1000;
static const ibp_device_slot *slot_now; /* the device slot under test */
static int copies, copy_fails, capturing;
static size_t copied_bytes;
static CUcontext current = CTX;
static float probe_ms = 0.0035f; /* the call, then 1.5x the model */
static CUresult probe_answer = CUDA_SUCCESS;

static CUresult create_event(CUevent *e, unsigned f) {
  (void)f;
  *e = (CUevent)(next_handle += 0x10);
  return CUDA_SUCCESS;
}

static CUresult create_stream(CUstream *s, unsigned f) {
  (void)f;
  *s = (CUstream)(next_handle += 0x10);
  return CUDA_SUCCESS;
}

static CUresult record_event(CUevent e, CUstream s) {
  (void)e, (void)s;
  return CUDA_SUCCESS;
}

static CUresult elapsed_of(float *ms, CUevent a, CUevent b) {
  (void)b;
  if (a && a == slot_now->mem.setup_ev[0]) {
    *ms = probe_ms;
    return probe_answer;
  }
  *ms = 0.004f;
  return CUDA_SUCCESS;
}

static CUresult alloc(CUdeviceptr *p, size_t bytes) {
  (void)bytes;
  *p = (CUdeviceptr)(next_handle += 0x1000);
  return CUDA_SUCCESS;
}

static CUresult copy(CUdeviceptr dst, const void *src, size_t bytes,
                     CUstream s) {
  (void)dst, (void)src;
  /* on its own stream: neither the caller's nor the markers' */
  CHECK(s == slot_now->mem.setup_stream && s != STREAM &&
        s != slot_now->mem.mark);
  now_ns += CALL_NS;
  if (copy_fails)
    return CUDA_ERROR_INVALID_VALUE;
  copies++;
  copied_bytes = bytes;
  return CUDA_SUCCESS;
}

static CUresult ctx_current(CUcontext *c) {
  *c = current;
  return CUDA_SUCCESS;
}

static CUresult is_capturing(CUstream s, CUstreamCaptureStatus *cs) {
  (void)s;
  *cs = capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                  : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

typedef struct world {
  ibp_device_slot *slot;
  ibp_served_region *s;
  ibp_chooser *ch;
  unsigned char shadow[4096];
} world;

static void world_init(world *w) {
  w->slot = calloc(1, sizeof *w->slot);
  w->s = calloc(1, sizeof *w->s);
  w->ch = w->slot ? ibp__chooser_of(w->slot) : NULL;
  if (!w->ch || !w->s) {
    fprintf(stderr, "test_engine_probe: out of memory\n");
    exit(2);
  }
  w->slot->ctx = CTX;
  w->s->layout.shadow = w->shadow;
  w->s->layout.shadow_bytes = sizeof w->shadow;
  slot_now = w->slot;
  copies = copy_fails = capturing = 0;
  current = CTX;
  probe_answer = CUDA_SUCCESS;
}

static void world_free(world *w) {
  ibp__chooser_free(w->ch);
  free(w->slot);
  free(w->s);
}

/* A decision of the class (reads what ran), then one copy of `route`
 * timed: returns whether it was timed. */
static int timed_copy(world *w, ibp_route route) {
  const unsigned cls = ibp__choose_class_index(65536, 0, IBP_CLASS_SINGLE);
  const ibp_route_cost model = {
      .cpu_ns = 2000, .gpu_ns = 8000, .engine = route == IBP_ROUTE_DRIVER};
  ibp_route_cost prior[IBP_ROUTES];
  memset(prior, 0, sizeof prior);
  prior[route] = model;
  ibp_choice c;
  ibp__chooser_decide(w->s, w->slot, w->ch, &prof, cls, prior, 0, 0, &c);
  memset(&c, 0, sizeof c);
  c.route = c.chosen = route;
  c.timed = 1;
  ibp_timing t;
  ibp__timing_begin(w->slot, w->ch, &prof, STREAM, STREAM, cls, &c, &model, 0,
                    2000, 0, 0, 0, &t);
  const int ok = t.index >= 0;
  now_ns += 2000;
  ibp__timing_end(w->slot, w->ch, STREAM, &t, 1);
  now_ns += 1e6; /* the next decision reads it */
  return ok;
}

int main(void) {
  stub_driver_init();
  drv.cuEventCreate = create_event;
  drv.cuEventRecord = record_event;
  drv.cuEventElapsedTime = elapsed_of;
  drv.cuStreamCreate = create_stream;
  drv.cuMemAlloc = alloc;
  drv.cuMemcpyHtoDAsync = copy;
  drv.cuCtxGetCurrent = ctx_current;
  drv.cuStreamIsCapturing = is_capturing;
  world w;

  /* a driver's copy timed: probed beside it, read at the next decision
   * as (3.5 - 2) us over 1 us */
  world_init(&w);
  CHECK(timed_copy(&w, IBP_ROUTE_DRIVER));
  CHECK(copies == 1 && copied_bytes == IBP_ENGINE_PROBE_BYTES);
  CHECK(w.ch->probe.setup.probing == 1);
  CHECK(timed_copy(&w, IBP_ROUTE_DRIVER)); /* read; a second probe */
  const ibp_choose_route *seen = &w.ch->probe.setup.seen;
  CHECK(seen->samples == 1 && fabs(seen->gpu_seen[0] - 1.5) < 1e-3);
  CHECK(copies == 2);
  CHECK(timed_copy(&w, IBP_ROUTE_DRIVER)); /* two fresh: no third */
  CHECK(timed_copy(&w, IBP_ROUTE_DRIVER));
  CHECK(seen->samples == 2 && copies == 2);
  /* aged: probed again */
  now_ns += 1.5 * IBP_CHOOSE_AGE_NS;
  CHECK(timed_copy(&w, IBP_ROUTE_DRIVER));
  CHECK(copies == 3);
  /* not ready: still on its way */
  probe_answer = CUDA_ERROR_NOT_READY;
  CHECK(timed_copy(&w, IBP_ROUTE_DRIVER));
  CHECK(w.ch->probe.setup.probing == 1 && seen->samples == 2);
  probe_answer = CUDA_SUCCESS;
  CHECK(timed_copy(&w, IBP_ROUTE_DRIVER));
  CHECK(seen->samples == 3);
  world_free(&w);

  /* not a copy-engine route, another context current, the caller's
   * stream capturing: no probe */
  world_init(&w);
  CHECK(timed_copy(&w, IBP_ROUTE_ZEROCOPY));
  current = (CUcontext)0x40;
  CHECK(timed_copy(&w, IBP_ROUTE_DRIVER));
  current = CTX;
  capturing = 1;
  timed_copy(&w, IBP_ROUTE_DRIVER);
  capturing = 0;
  CHECK(copies == 0 && !w.ch->probe.failed);
  /* no shadow: none either */
  w.s->layout.shadow = NULL;
  CHECK(timed_copy(&w, IBP_ROUTE_DRIVER));
  CHECK(copies == 0);
  world_free(&w);

  /* a failing copy call ends probing on the device; the copies are still
   * timed */
  world_init(&w);
  copy_fails = 1;
  CHECK(timed_copy(&w, IBP_ROUTE_DRIVER));
  CHECK(w.ch->probe.failed && !w.ch->probe.setup.probing);
  copy_fails = 0;
  CHECK(timed_copy(&w, IBP_ROUTE_DRIVER));
  CHECK(copies == 0);
  world_free(&w);

  /* a failing reading likewise */
  world_init(&w);
  probe_answer = CUDA_ERROR_INVALID_HANDLE;
  CHECK(timed_copy(&w, IBP_ROUTE_DRIVER));
  CHECK(timed_copy(&w, IBP_ROUTE_DRIVER));
  CHECK(w.ch->probe.failed && w.ch->probe.setup.seen.samples == 0);
  CHECK(copies == 1);
  world_free(&w);

  if (failures)
    fprintf(stderr, "test_engine_probe: %d failures\n", failures);
  else
    printf("test_engine_probe: ok\n");
  return failures != 0;
}
