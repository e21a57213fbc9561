/* Serving a host-to-device copy (serve/substitute.h, docs/ARCHITECTURE.md
 * "The copy path"): find the region and where it is ready, describe the
 * copy once (serve/route/route.h), ask the chooser among the routes that
 * can serve it (serve/route/table.h, serve/choose/chooser.h), submit it by
 * that route, record what ran.
 *
 * Anything short of "region ready on this device, stream not capturing,
 * submission accepted" returns 1 and the caller runs the driver's own
 * copy: fail open.  A region whose launches keep failing is degraded. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "serve/substitute.h"

#include "base/base.h"
#include "base/clock.h"
#include "base/driver.h"
#include "base/log.h"
#include "serve/batch/batch.h"
#include "serve/choose/beside.h"
#include "serve/choose/chooser.h"
#include "serve/choose/gate.h"
#include "serve/choose/streams.h"
#include "serve/compact.h"
#include "serve/nvtx.h"
#include "serve/prepare/refresh.h"
#include "serve/region.h"
#include "serve/route/table.h"
#include "serve/worker.h"

#define FAILURES_BEFORE_DEGRADE 3

/* c passed to the driver for `reason` (IBP_PASSED_*, stats/reasons.def);
 * a part of a split copy is counted with it (split_compact).  A copy the
 * copy path serves is counted here once, at its end (ibp__serve_htod), for
 * the reason it noted (pass). */
static void count_passed(ibp_served_region *s, const ibp_copy *c, int reason) {
  if (!c->part)
    ibp__count_passed(&s->counters, reason, 1, c->bytes);
}

/* Notes why copy x goes to the driver (IBP_PASSED_*): counted once, at the
 * copy's end. */
static void pass(ibp_route_copy *x, int reason) {
  x->passed = reason;
}

static void failed(ibp_route_copy *x, const char *what, CUresult e) {
  ibp_region_rec *r = x->r;
  ibp_served_region *s = x->s;
  pass(x, IBP_PASSED_FAILED);
  static int warned;
  ibp__warn_first(&warned,
                  "region '%s': %s failed (CUresult %d); copying without "
                  "libibp",
                  r->name, what, (int)e);
  if (atomic_fetch_add(&s->failures, 1) + 1 >= FAILURES_BEFORE_DEGRADE &&
      ibp_region_transition(r, IBP_REGION_READY, IBP_REGION_DEGRADED))
    ibp__log(IBP_LOG_INFO, "region '%s': degraded to pass-through", r->name);
}

/* The launch of copy x (its region's template with the copy's range, and
 * its grid) and the copy as the model sees it, `pcie` its stored bytes.
 * Between a copy's decision and its launch (refresh.c waits for those:
 * `launching`). */
static void prepare(ibp_route_copy *x, uint64_t pcie) {
  const ibp_copy *c = x->c;
  const ibp_served_region *s = x->s;
  ibp_decompress_args *a = &x->a;
  *a = x->slot->args;
  const uint64_t off = (uintptr_t)c->src - x->r->base;
  a->first_tensor = off / a->tensor_bytes;
  a->first_offset = (uint32_t)(off % a->tensor_bytes);
  a->length = c->bytes;
  a->dst = (uint8_t *)(uintptr_t)c->dst;
  /* The kernel reads dirty bits over PCIe only when some tensor has one,
   * and busy bits only while a refresh runs (refresh.c). */
  if (atomic_load(&s->refresh.refreshing))
    a->busy = x->slot->busy;
  else if (atomic_load(&s->track.dirty_tensors) == 0)
    a->dirty = NULL;
  x->plan = x->slot->plan;
  ibp_kernels_plan_range(a, x->slot->sms, &x->plan);
  x->sync_ns = ibp__track_sync_model_ns(&s->track, (uintptr_t)c->src, c->bytes);
  /* the SMs its grid is worth, its units; "stored" bytes over PCIe plus
   * the partial sectors at the streams' ends */
  x->g = (ibp_gate_copy){
      c->bytes,
      pcie + IBP_ROUTE_SECTOR_SLACK,
      ibp_kernels_decode_sms(x->plan.grid, x->plan.block, (unsigned)x->p->sms),
      ibp__gate_units(a->tensor_bytes, a->tensors, off, c->bytes),
      a->tensor_bytes,
      x->slot->args.stages != NULL};
}

/* A copy's decision. */
typedef struct decision {
  ibp_route go;
  double saved_ns; /* the model's: the driver's time less the route's */
  ibp_choice choice;
  ibp_route_cost prior[IBP_ROUTES];
  unsigned cls;
  ibp_chooser *ch;
  CUstream link;  /* where go's work on the link runs (ibp__route_link_stream):
                     its span is timed there */
  double link_ns; /* ... and how long, as the class estimates it */
  ibp_timing_queue queue; /* as the streams table queued it */
} decision;

/* Quiet runs (serve/choose/chooser.h): what copy x's priors depend on
 * besides its class (size, stream busy) and stream -- its exact size,
 * where it starts in its tensor, whether it may be held, the region's
 * recompressions and whether its tracker scans -- so that a copy alike
 * the one a run opened on is decided alike. */
static uint64_t quiet_key(const ibp_route_copy *x) {
  const ibp_copy *c = x->c;
  const uint64_t R =
      x->s->geometry.tensor_bytes ? x->s->geometry.tensor_bytes : 1;
  const uint64_t off = ((uintptr_t)c->src - x->r->base) % R;
  const uint64_t runs =
      atomic_load_explicit(&x->s->refresh.runs, memory_order_relaxed);
  /* on an idle stream each route's lead counts, less the link's queued
   * work: alike within a power of two of it */
  const uint64_t ahead = x->busy
                             ? 0
                             : 64 - (uint64_t)__builtin_clzll(
                                        1 + (uint64_t)(x->link_ahead_ns / 1e3));
  uint64_t k = c->bytes * 0x9E3779B97F4A7C15ull;
  k ^= (off + 1) * 0xC2B2AE3D27D4EB4Full;
  k ^= (runs + 1) * 0x165667B19E3779F9ull;
  k ^= (ahead + 1) * 0x27D4EB2F165667C5ull;
  return k ^ (uint64_t)(c->sync ? 1 : 0) << 62 ^
         (uint64_t)ibp__track_scans(&x->s->track) << 63;
}

/* Copy x, alike those its class's quiet run takes: the driver's,
 * undecided -- what the decision would have spent is counted when the run
 * ends.  0: decide it (x->skipped says what the run left to the driver
 * since its stream's batch last heard). */
static int quiet(ibp_route_copy *x) {
  const ibp_copy *c = x->c;
  ibp_chooser *ch = ibp__chooser_of(x->slot);
  const double now = ibp__clock_ns();
  x->busy = ibp__streams_busy(x->dev, c->stream, now);
  x->busy_known = 1;
  if (!x->busy)
    x->link_ahead_ns = ibp__streams_link_ahead_ns(x->dev, now);
  const unsigned cls =
      ibp__choose_class_index(c->bytes, x->busy, IBP_CLASS_SINGLE);
  double est;
  /* a run opened by a copy of its stream's run of copies ends at the
   * stream's next ordering point: the copies it leaves to the driver are
   * counted in the run they came in (batch.h) */
  const uint64_t order = 1 + ibp__batch_order_mark(c->stream, x->ctx);
  if (!ibp__chooser_quiet_take(ch, cls, quiet_key(x), c->stream, order, &est)) {
    ibp__chooser_quiet_report(ch, cls, c->stream, x);
    return 0;
  }
  ibp__batch_order_copy(c->stream); /* what is held runs first */
  x->in_run = 1; /* counted by the stream's next offer (x->skipped) */
  ibp__streams_queued(x->dev, c->stream, now, est, est, NULL);
  ibp__chooser_ran(ch, IBP_ROUTE_DRIVER, 1);
  pass(x, IBP_PASSED_GATED);
  return 1;
}

/* quiet(x) where x's region is ready in the current context on its
 * device: before locate(), whose checks serve a copy libibp would make --
 * the driver's own copy makes its own (its destination, a capture), and
 * refreshes are due at the run's end as at any copy's. */
static int quiet_here(ibp_route_copy *x) {
  const ibp_driver *d = ibp__driver();
  ibp_served_region *s = x->s;
  CUcontext ctx = NULL;
  CUdevice dev = -1;
  if (d->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx ||
      d->cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 ||
      dev >= IBP_MAX_DEVICES ||
      ibp_region_state_get(x->r) != IBP_REGION_READY ||
      ibp__device_state(s, (unsigned)dev) != IBP_DEVICE_READY ||
      s->dev[dev].ctx != ctx || ibp__compact_active(s) ||
      atomic_load_explicit(&s->kernel_args, memory_order_relaxed))
    return 0;
  x->ctx = ctx;
  x->dev = dev;
  x->slot = &s->dev[dev];
  return quiet(x);
}

/* A decision d that left copy x to the driver untimed and unexplored
 * opens a quiet run for the copies alike that follow. */
static void quiet_open(ibp_route_copy *x, const decision *d) {
  if (x->c->part || x->c->hold_only || x->compact)
    return;
  x->order_mark =
      x->in_run ? 1 + ibp__batch_order_mark(x->c->stream, x->ctx) : 0;
  ibp__chooser_quiet_open(d->ch, d->cls, &d->choice, x, quiet_key(x));
}

/* Every route of a single copy (serve/route/table.h, ibp__route_timable)
 * is timed alike: two events around its submission on the stream its work
 * on the link runs on -- the caller's, or for the staged path libibp's
 * copy stream, whose window copies are the route's first stage (its
 * decodes, on the caller's stream after them, are the decode probe's,
 * serve/staged/staged.c) -- the span started no earlier than the other
 * streams' work on the link it may have waited for (docs/ARCHITECTURE.md
 * "The gate"). */

/* The route for copy x (prepared): the chooser (serve/choose/chooser.h)
 * weighs the priors of the routes that can serve it (serve/route/table.h)
 * against what the region's copies of its class measured.  `count`: decide
 * for real (0: a first look, see serve_region: nothing counted or spent);
 * `again`: on the look's priors and class (the staged plan is not walked
 * twice). */
static ibp_route choose(ibp_route_copy *x, decision *d, int count, int again) {
  const ibp_copy *c = x->c;
  if (!again) {
    memset(d, 0, sizeof *d);
    d->ch = ibp__chooser_of(x->slot);
    /* explored alone by its batched class: decided in that class's key
     * (batch.c weighs held copies as on an idle stream), whose classes
     * learn from its timing -- decided as on its busy stream, its timed
     * copies taught a key the batched class never reads (rows under a
     * driver 7x cheaper than modelled stayed batched) */
    if (x->time_alone) {
      x->busy = 0;
      x->busy_known = 1;
    }
    if (!x->busy_known) /* quiet() asked already: the same class */
      x->busy = ibp__streams_busy(x->dev, c->stream, ibp__clock_ns());
    x->link_ahead_ns = ibp__streams_link_ahead_ns(x->dev, ibp__clock_ns());
    d->cls = ibp__choose_class_index(c->bytes, x->busy, IBP_CLASS_SINGLE);
    ibp__route_priors(x, d->prior);
  }
  const ibp_route go =
      ibp__chooser_decide(x->s, x->slot, d->ch, x->p, d->cls, d->prior,
                          ibp__route_timable(), !count, &d->choice);
  /* explored alone by its batched class: measured, or it says nothing
   * (a single class decides a copy of a held key only so: timed on its
   * own credit, a driver far cheaper than modelled took it 8 of them) */
  if (x->time_alone && (ibp__route_timable() >> go & 1))
    d->choice.timed = 1;
  const double est = d->choice.est_ns[go];
  const ibp_route_cost *m = &d->prior[go];
  const double model = ibp__choose_model_ns(m);
  d->saved_ns = x->driver_ns > model ? x->driver_ns - model : 0;
  d->go = go;
  if (!count)
    return go;
  /* a compact region's copy is a GPU route's (route/table.c): what that
   * costs over the driver's copy */
  if (x->compact && go != IBP_ROUTE_DRIVER && est > x->driver_ns)
    ibp__count(&x->s->counters, compact_seconds_cost,
               (uint64_t)(est - x->driver_ns));
  /* the route's work on the link: a two-stage route's first stage, as
   * the class estimates it */
  double link_ns = est;
  if (m->sm_ns > 0) {
    const double whole = ibp__choose_gpu_ns(m, 1);
    link_ns = whole > 0 && m->gpu_ns * est / whole < est
                  ? m->gpu_ns * est / whole
                  : est;
  }
  d->link = ibp__route_link_stream(go, x);
  d->link_ns = link_ns;
  d->queue =
      (ibp_timing_queue){.known = 1,
                         .ahead_ns = ibp__streams_queued(
                             x->dev, c->stream, ibp__clock_ns(), est, link_ns,
                             d->link != c->stream ? d->link : NULL),
                         .link_ns = link_ns};
  if (go == IBP_ROUTE_DRIVER)
    pass(x, IBP_PASSED_GATED);
  return go;
}

static void time_begin(ibp_route_copy *x, const decision *d, ibp_timing *t) {
  t->index = -1;
  t->start = x->start = NULL;
  x->started = 0;
  x->aside_ns = 0;
  if (!d->choice.timed)
    return;
  /* on a stream of the route's own, the route records the start */
  const int deferred = d->link != x->c->stream;
  ibp__timing_begin(x->slot, d->ch, x->p, d->link, x->c->stream, d->cls,
                    &d->choice, &d->prior[d->go], 1e3 * x->p->runtime_call_us,
                    ibp__route_lead_ns(d->go, x->p),
                    ibp__route_setup_ns(d->go, x->p), deferred, x->dev,
                    &d->queue, t);
  x->start = t->start;
  x->started = 0;
}

/* Whether timing t's start was recorded: by the timing, or where deferred
 * (t->start), by the route (x->started). */
static int time_started(const ibp_route_copy *x, const ibp_timing *t) {
  return !t->start || x->started;
}

/* A decision's timing that will not happen (its route changed). */
static void time_untimed(decision *d) {
  if (d->choice.timed)
    ibp__chooser_untimed(d->ch, d->cls, &d->choice);
  d->choice.timed = 0;
}

/* Whether `stream` is capturing (or cannot tell). */
static int capturing(const ibp_driver *d, CUstream stream) {
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  return d->cuStreamIsCapturing(stream, &cs) != CUDA_SUCCESS ||
         cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* After the driver's copy of c was submitted (rc): 0 when it is queued --
 * and done, for a synchronous entry point; 1: the caller runs the copy. */
static int driver_done(const ibp_copy *c, int rc) {
  if (rc != IBP_SUBMIT_QUEUED)
    return 1;
  if (c->sync && ibp__driver()->cuStreamSynchronize(c->stream) != CUDA_SUCCESS)
    return 1; /* the real copy runs again, and reports what it finds */
  return 0;
}

/* Route go's time on the link in an estimate est_ns of a copy costing c:
 * a one-stage route's less its calls; a two-stage route's estimate is of
 * its first stage already (decision.link_ns). */
static double link_part_ns(ibp_route go, double est_ns, const ibp_route_cost *c,
                           const ibp_profile *p) {
  return c->sm_ns > 0 ? est_ns : est_ns - ibp__route_lead_ns(go, p);
}

/* The driver's copy, timed (the chooser asked for it): queued by its route
 * between the events, synchronised for a synchronous entry point.
 * Returns 0 when done; 1: the caller runs the copy (nothing was
 * queued). */
static int timed_driver_copy(ibp_route_copy *x, const decision *d) {
  const ibp_copy *c = x->c;
  ibp_timing t;
  time_begin(x, d, &t);
  if (t.index < 0)
    return 1;
  CUresult e;
  const int rc = ibp__route(IBP_ROUTE_DRIVER)->submit(x, &e);
  ibp__timing_end(x->slot, d->ch, d->link, &t, rc == IBP_SUBMIT_QUEUED);
  return driver_done(c, rc);
}

/* The driver's copy where copies are timed on other streams: queued here,
 * with the events around it that say whether it shared their spans
 * (serve/choose/beside.h) -- after the ordering point the caller's copy
 * would have been (serve/batch/batch.h).  Returns as timed_driver_copy. */
static int beside_driver_copy(ibp_route_copy *x, const decision *d) {
  const ibp_copy *c = x->c;
  CUresult e;
  if (c->entries || c->hold_only || c->part)
    return 1;
  if (x->in_run && !c->sync)
    ibp__batch_order_copy(c->stream);
  else
    ibp__batch_order(c->stream);
  const double est =
      link_part_ns(IBP_ROUTE_DRIVER, d->choice.est_ns[IBP_ROUTE_DRIVER],
                   &d->prior[IBP_ROUTE_DRIVER], x->p);
  unsigned gen = 0;
  const int j = ibp__beside_begin(
      x->slot, d->ch, c->stream,
      est > 0 ? est : d->prior[IBP_ROUTE_DRIVER].gpu_ns, &gen);
  const int rc = ibp__route(IBP_ROUTE_DRIVER)->submit(x, &e);
  ibp__beside_end(x->slot, d->ch, j, gen, c->stream, rc == IBP_SUBMIT_QUEUED);
  return driver_done(c, rc);
}

/* A decided copy x that ends as the driver's copy: counted so (what ran),
 * by libibp when its decision timed it or copies are timed beside it,
 * else by the caller. */
static int driver_copy(ibp_route_copy *x, const decision *d, int timed) {
  ibp__chooser_ran(d->ch, IBP_ROUTE_DRIVER, 1);
  if (timed)
    return timed_driver_copy(x, d);
  return ibp__beside_wanted(d->ch, x->c->stream) ? beside_driver_copy(x, d) : 1;
}

/* Moves a candidate region to compression (once), and the device slot of
 * a ready one to setup; waits for either when IBP_WAIT_READY=1. */
static void make_ready(ibp_region_rec *r, ibp_served_region *s, CUcontext ctx,
                       int dev) {
  ibp_region_state st = ibp_region_state_get(r);
  if (st == IBP_REGION_CANDIDATE &&
      ibp_region_transition(r, IBP_REGION_CANDIDATE, IBP_REGION_COMPRESSING))
    ibp__worker_compress(r, ctx, dev);
  else if (st == IBP_REGION_READY &&
           ibp__device_transition(s, (unsigned)dev, IBP_DEVICE_ABSENT,
                                  IBP_DEVICE_UPLOADING))
    ibp__worker_setup_device(r, ctx, dev);
  if (ibp__wait_ready())
    ibp__worker_wait(r, dev);
}

/* Dirty tensors are served raw by the kernel until refresh.c recompresses
 * them (the gate weighs their bytes, copy by copy).  A region whose
 * refreshes -- 8 or more, each weighing a 32nd of the region it took up
 * (refresh.c) -- outweigh a quarter of its copies, or half of whose tensors
 * are stuck raw (their new bytes no longer compress, or its pages can no
 * longer be protected), is rewritten faster than it is copied, and the
 * driver's own copy is the better deal: demote it (and stop tracking its
 * writes).  One burst of writes, however wide, is recompressed (a gap in
 * the tracking marks whole chunks: track_quiet.c). */
static int rewritten(ibp_region_rec *r, ibp_served_region *s) {
  const ibp_refresh *f = &s->refresh;
  const ibp_counters *k = &s->counters;
  const uint64_t runs = atomic_load_explicit(&f->runs, memory_order_relaxed);
  const uint64_t work = atomic_load_explicit(&f->work, memory_order_relaxed);
  const uint64_t stuck = atomic_load_explicit(&f->stuck, memory_order_relaxed);
  /* every copy from it, whatever ran it */
  const uint64_t copies =
      atomic_load_explicit(&k->copies_served, memory_order_relaxed) +
      atomic_load_explicit(&k->copies_passthrough, memory_order_relaxed) +
      atomic_load_explicit(&k->copies_gated, memory_order_relaxed) +
      atomic_load_explicit(&k->copies_fallback, memory_order_relaxed);
  const int too_often = runs >= 8 && work * 4 > copies;
  if (!too_often && 2 * stuck < s->geometry.tensors) {
    if (ibp__refresh_due(r))
      ibp__worker_refresh(r);
    return 0;
  }
  const uint64_t dirty =
      atomic_load_explicit(&s->track.dirty_tensors, memory_order_relaxed);
  if (ibp__compact_pin(r, "rewritten faster than copied")) {
    /* pinned, and demoted like any other */
  } else if (ibp_region_transition(r, IBP_REGION_READY, IBP_REGION_DEGRADED)) {
    ibp__track_unprotect(&s->track);
    ibp__log(IBP_LOG_INFO,
             "region '%s': rewritten faster than copied (%llu of %llu "
             "tensors dirty, %llu stuck raw; %llu recompressions for %llu "
             "copies); demoted to pass-through",
             r->name, (unsigned long long)dirty,
             (unsigned long long)s->geometry.tensors, (unsigned long long)stuck,
             (unsigned long long)runs, (unsigned long long)copies);
  }
  return 1;
}

/* A region whose tensors do not fit its copies (ibp__gate_misfit): pinned
 * back if compact, else demoted; 1 when this copy demoted it. */
static int misfit(ibp_region_rec *r, ibp_served_region *s) {
  if (!ibp__compact_pin(r, "its tensors do not fit its copies")) {
    if (!ibp_region_transition(r, IBP_REGION_READY, IBP_REGION_DEGRADED))
      return 0;
    ibp__track_unprotect(&s->track);
  }
  ibp__gate_warn_misfit(r);
  return 1;
}

/* A compact region's copy the shadow cannot serve whole, in parts queued
 * on its stream in order: each run the shadow holds is served as a copy of
 * its own, the rest is the driver's from the pages -- so that a tensor
 * written since does not bring the whole span's pages back
 * (docs/ARCHITECTURE.md, "Compact regions").  Where that would take more
 * than COMPACT_MAX_PARTS launches, only the runs of COMPACT_LONG_RUN bytes
 * or more are (a launch's fixed cost would outweigh what a short run
 * saves); shorter ones go with the driver's parts, whose pages come back.
 * Returns 0 when every part was queued (and, for a synchronous entry
 * point, done); 1 when the caller's driver copy must run -- no run to
 * serve, or a part failed: the whole copy, queued after the parts,
 * rewrites every byte. */
#define COMPACT_MAX_PARTS 16
#define COMPACT_LONG_RUN ((uint64_t)64 << 10)

static int serve_region(ibp_route_copy *x, int hold_more);
static ibp_route_copy describe(ibp_region_rec *r, const ibp_copy *c);

static int split_compact(ibp_route_copy *x, uint64_t off) {
  ibp_region_rec *r = x->r;
  ibp_served_region *s = x->s;
  const ibp_copy *c = x->c;
  const ibp_driver *d = ibp__driver();
  int ok = 0;
  unsigned runs = 0, long_runs = 0;
  for (uint64_t at = 0, n; at < c->bytes; at += n) {
    n = ibp__compact_run(s, off + at, c->bytes - at, &ok);
    runs += ok;
    long_runs += ok && n >= COMPACT_LONG_RUN;
  }
  const uint64_t min_run = runs <= COMPACT_MAX_PARTS ? 1 : COMPACT_LONG_RUN;
  if (!(runs <= COMPACT_MAX_PARTS ? runs : long_runs))
    return 1;
  ibp__batch_order(c->stream);        /* what is held runs first */
  uint64_t drv = 0;                   /* the driver's part [drv, at) pending */
  uint64_t drv_bytes = 0, served = 0; /* the copy is counted once, below */
  for (uint64_t at = 0, n; at <= c->bytes; at += n) {
    n = at < c->bytes ? ibp__compact_run(s, off + at, c->bytes - at, &ok) : 0;
    const int gpu = at < c->bytes && ok && n >= min_run;
    if ((gpu || at == c->bytes) && at > drv) {
      if (d->cuMemcpyHtoDAsync(c->dst + drv, (const uint8_t *)c->src + drv,
                               at - drv, c->stream) != CUDA_SUCCESS)
        return 1;
      drv_bytes += at - drv;
      ibp__count(&s->counters, copies_compact_driver, 1);
    }
    if (at == c->bytes)
      break;
    if (gpu) {
      ibp_copy p = *c;
      p.dst += at;
      p.src = (const uint8_t *)c->src + at;
      p.bytes = n;
      p.sync = 0;
      p.arrive = 0;
      p.part = 1;
      /* never held for a batched launch: the parts run in order, and a
       * synchronous copy is done when this returns */
      ibp_route_copy px = describe(r, &p);
      if (serve_region(&px, 0) == 0)
        served++;
      else if (d->cuMemcpyHtoDAsync(p.dst, p.src, n, c->stream) != CUDA_SUCCESS)
        return 1;
      else
        drv_bytes += n;
      drv = at + n;
    }
  }
  if (c->sync && d->cuStreamSynchronize(c->stream) != CUDA_SUCCESS)
    return 1;
  /* one copy: served (its parts' bytes counted as they were served, the
   * driver's parts' here: all read over PCIe), or the driver's */
  if (!served) {
    pass(x, IBP_PASSED_COMPACT);
    return 0;
  }
  ibp__count(&s->counters, copies_served, 1);
  ibp__count(&s->counters, copies_split, 1);
  ibp__count(&s->counters, bytes_requested, drv_bytes);
  ibp__count(&s->counters, bytes_read_pcie, drv_bytes);
  return 0;
}

/* The reason a copy from r cannot be served now (IBP_PASSED_*), or -1:
 * the region and its device slot are ready in this context, it is not
 * rewritten faster than copied and the stream is not capturing (`cap`:
 * already asked, or -1). */
static int unready(ibp_region_rec *r, ibp_served_region *s,
                   const ibp_device_slot *slot, CUcontext ctx, int dev,
                   CUstream stream, int cap) {
  const ibp_region_state st = ibp_region_state_get(r);
  const ibp_device_state ds = ibp__device_state(s, (unsigned)dev);
  if (st == IBP_REGION_CANDIDATE || st == IBP_REGION_COMPRESSING ||
      (st == IBP_REGION_READY && ds <= IBP_DEVICE_UPLOADING))
    return IBP_PASSED_NOT_READY;
  if (st != IBP_REGION_READY || ds != IBP_DEVICE_READY)
    return IBP_PASSED_DEGRADED;
  if (slot->ctx != ctx)
    return IBP_PASSED_CONTEXT;
  if (rewritten(r, s))
    return IBP_PASSED_DEGRADED;
  if (cap < 0 ? capturing(ibp__driver(), stream) : cap)
    return IBP_PASSED_CAPTURING;
  return -1;
}

/* Finds where copy x (described) is served from: its region ready on
 * the current device and context, its destination one device allocation
 * ([*alloc, +*alloc_bytes)), its stream not capturing (asked once).
 * Returns -1, or the reason (IBP_PASSED_*) the driver's copy runs. */
static int locate(ibp_route_copy *x, CUdeviceptr *alloc, size_t *alloc_bytes) {
  const ibp_driver *d = ibp__driver();
  const ibp_copy *c = x->c;
  ibp_region_rec *r = x->r;
  ibp_served_region *s = x->s;
  x->mode = IBP_CLASS_SINGLE;
  x->compact = ibp__compact_active(s);
  /* a compact region's memory is pageable to the driver: a copy of it
   * that a graph captures needs it pinned */
  const int cap = x->compact ? capturing(d, c->stream) : -1;
  if (cap == 1 && ibp__compact_pin(r, "a copy from it is captured"))
    return IBP_PASSED_CAPTURING;
  if (atomic_load_explicit(&s->kernel_args, memory_order_relaxed))
    return IBP_PASSED_KERNEL_ARGS; /* kernel_args.c: written unseen */
  if (!ibp__dst_fits(d, c->dst, c->bytes, alloc, alloc_bytes))
    return IBP_PASSED_DESTINATION; /* host to host, or a bad destination:
                                      the driver's answer */
  CUcontext ctx = NULL;
  CUdevice dev = -1;
  if (d->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx ||
      d->cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 ||
      dev >= IBP_MAX_DEVICES)
    return IBP_PASSED_CONTEXT;
  if (ibp_region_state_get(r) != IBP_REGION_READY ||
      ibp__device_state(s, (unsigned)dev) != IBP_DEVICE_READY)
    make_ready(r, s, ctx, dev);
  x->ctx = ctx;
  x->dev = dev;
  x->slot = &s->dev[dev];
  const int why = unready(r, s, x->slot, ctx, dev, c->stream, cap);
  if (why >= 0)
    return why;
  x->p = ibp__gate_profile(dev);
  return x->p ? -1 : IBP_PASSED_NO_PROFILE;
}

/* What copy x served by GPU route go (decided as *d) counts: the route
 * ran, the bytes it was asked for and read over PCIe (`pcie`), the time
 * the model says it saved; a part of a compact region's split is counted
 * with its copy, not as one. */
static void count_served(const ibp_route_copy *x, const decision *d,
                         ibp_route go, uint64_t pcie, double saved_ns) {
  ibp_served_region *s = x->s;
  if (go == IBP_ROUTE_STAGED && !x->c->part)
    ibp__count(&s->counters, copies_staged, 1);
  ibp__chooser_ran(d->ch, go, 1);
  if (!x->c->part)
    ibp__count(&s->counters, copies_served, 1);
  ibp__count(&s->counters, bytes_requested, x->c->bytes);
  ibp__count(&s->counters, bytes_read_pcie, pcie);
  ibp__count(&s->counters, modelled_seconds_saved, (uint64_t)saved_ns);
}

/* The rest of a copy explored on a part, bytes [n, c->bytes): the driver's
 * copy, on `side` where given (the staged path's copy stream: behind the
 * part's windows, beside its decodes, which it would otherwise wait for --
 * under decodes 4x slower than modelled, a 480 KiB part's decode took
 * 90 us, 5 % of a 10-copy KV restore) once the caller's earlier work has
 * run (`before`, recorded there), the caller's stream waiting for it;
 * else on the caller's stream.  Returns CUDA_SUCCESS when queued (or, its
 * join failing, done). */
static CUresult copy_rest(const ibp_copy *c, uint64_t n, CUstream side,
                          CUevent before) {
  const ibp_driver *d = ibp__driver();
  const CUdeviceptr dst = c->dst + n;
  const void *src = (const uint8_t *)c->src + n;
  const size_t len = c->bytes - n;
  CUevent after = NULL;
  if (side && before && d->cuStreamWaitEvent(side, before, 0) == CUDA_SUCCESS &&
      d->cuEventCreate(&after, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS &&
      d->cuMemcpyHtoDAsync(dst, src, len, side) == CUDA_SUCCESS) {
    CUresult e = d->cuEventRecord(after, side);
    if (e == CUDA_SUCCESS)
      e = d->cuStreamWaitEvent(c->stream, after, 0);
    d->cuEventDestroy(after);
    /* not joined: done before this returns, so that nothing the caller
     * queues later runs before it (a second copy on the caller's stream
     * would leave this one unordered) */
    return e == CUDA_SUCCESS ? e : d->cuStreamSynchronize(side);
  }
  if (after)
    d->cuEventDestroy(after);
  return d->cuMemcpyHtoDAsync(dst, src, len, c->stream);
}

/* Copy x explored by route go on a part of it (ibp__choose_explore_part),
 * where the class's choice is the driver's copy (which then copies the
 * rest, as it would have): the part described and planned as a copy of
 * its own, timed against its own prior and the driver's estimate scaled as
 * the driver's model of the part, and the rest queued after the timed span
 * (copy_rest) -- beside a staged part's decodes unless they read the host,
 * which the rest's bytes would slow.  `launching` held, released here.
 * Returns -1 when x is explored whole (nothing done); else as submit_by. */
static int explore_in_part(ibp_route_copy *x, decision *d, ibp_route go) {
  const ibp_copy *c = x->c;
  ibp_served_region *s = x->s;
  if (c->part || c->hold_only || x->compact ||
      d->choice.chosen != IBP_ROUTE_DRIVER)
    return -1;
  const uint64_t off = (uintptr_t)c->src - x->r->base;
  const uint64_t n = ibp__choose_explore_part(off, c->bytes, x->a.tensor_bytes);
  if (!n)
    return -1;
  ibp_copy part = *c;
  part.bytes = n;
  part.arrive = 0;
  part.part = 1;
  ibp_route_copy px = *x;
  px.c = &part;
  prepare(&px, ibp__stored_bytes(s, off, n));
  px.sync_ns = 0; /* paid with the copy's */
  decision pd = *d;
  ibp__route_priors(&px, pd.prior);
  const double driver = ibp__choose_model_ns(&d->prior[IBP_ROUTE_DRIVER]);
  const double driver_part = ibp__choose_model_ns(&pd.prior[IBP_ROUTE_DRIVER]);
  const double model = ibp__choose_model_ns(&pd.prior[go]);
  if (model <= 0 || model >= ibp__choose_model_ns(&d->prior[go]) ||
      driver_part <= 0 || driver_part >= driver)
    return -1;
  pd.choice.choice_ns *= driver_part / driver;
  /* queued as the whole copy, behind the same work: its own link part
   * the part's share */
  pd.queue.link_ns *= model / ibp__choose_model_ns(&d->prior[go]);
  const ibp_driver *drv = ibp__driver();
  /* the rest's copy beside the part's decodes: after the caller's earlier
   * work, marked before the part is queued */
  CUstream side =
      go == IBP_ROUTE_STAGED && !px.sp.gate.host_bytes && drv->cuStreamWaitEvent
          ? ibp__staged_copy_stream(x->ctx, x->dev, c->stream)
          : NULL;
  CUevent before = NULL;
  if (side &&
      (drv->cuEventCreate(&before, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS ||
       drv->cuEventRecord(before, c->stream) != CUDA_SUCCESS)) {
    if (before)
      drv->cuEventDestroy(before);
    before = NULL;
  }
  ibp_timing t;
  time_begin(&px, &pd, &t);
  CUresult e = CUDA_SUCCESS;
  ibp__nvtx_copy_begin(x->r->name, n);
  const int rc = ibp__route(go)->submit(&px, &e);
  t.aside_ns = px.aside_ns;
  ibp__timing_end(x->slot, d->ch, d->link, &t,
                  rc == IBP_SUBMIT_QUEUED && time_started(&px, &t));
  ibp__nvtx_copy_end();
  atomic_fetch_sub(&s->refresh.launching, 1);
  if (rc == IBP_SUBMIT_QUEUED) {
    e = copy_rest(c, n, side, before);
    if (e == CUDA_SUCCESS && c->sync)
      e = drv->cuStreamSynchronize(c->stream);
  }
  if (before)
    drv->cuEventDestroy(before);
  if (rc == IBP_SUBMIT_NOT_NOW || rc == IBP_SUBMIT_CUT) {
    pass(x, IBP_PASSED_STAGED_BUSY);
    return driver_copy(x, d, 0);
  }
  if (rc != IBP_SUBMIT_QUEUED || e != CUDA_SUCCESS) {
    failed(x,
           rc != IBP_SUBMIT_QUEUED ? ibp__route(go)->what
                                   : "the explored copy's rest",
           e);
    return driver_copy(x, d, 0); /* it rewrites dst with the right bytes */
  }
  ibp__count(&s->counters, copies_explored_part, 1);
  count_served(x, d, go, ibp__route_pcie_bytes(go, &px) + c->bytes - n, 0);
  return 0;
}

/* The events around a copy that say whether it shared other streams'
 * timed spans (serve/choose/beside.h): the timing's calls, not the
 * route's, so their time is set aside from the copy's own timed span
 * (x->aside_ns).  Read as the route's, a staged copy timed beside the
 * other stream's timed driver copies measured its calls 4 us dearer than
 * the same copy timed alone (a100-pcie4 under driver calls 4x dearer: 28.8
 * against 24.8 us), above the driver's estimate, and weight copies went to
 * the driver where staged ran 7 % faster. */
static int beside_begin(ibp_route_copy *x, const decision *d, double link_ns,
                        unsigned *gen) {
  const double t0 = ibp__clock_ns();
  const int j = ibp__beside_begin(x->slot, d->ch, d->link, link_ns, gen);
  x->aside_ns += ibp__clock_ns() - t0;
  return j;
}

static void beside_end(ibp_route_copy *x, const decision *d, int j,
                       unsigned gen, int queued) {
  const double t0 = ibp__clock_ns();
  ibp__beside_end(x->slot, d->ch, j, gen, d->link, queued);
  x->aside_ns += ibp__clock_ns() - t0;
}

/* Submits copy x by route go (decided as *d; `launching` held, released
 * here) and records what ran.  A route that cannot take it now hands it to
 * the next by the decision's estimates (ibp__route_next), untimed.
 * Returns 0 when served; 1: the caller runs the driver's copy. */
static int submit_by(ibp_route_copy *x, decision *d, ibp_route go) {
  const ibp_copy *c = x->c;
  ibp_served_region *s = x->s;
  if (go == IBP_ROUTE_DRIVER) {
    atomic_fetch_sub(&s->refresh.launching, 1);
    if (go == d->go)
      quiet_open(x, d);
    return driver_copy(x, d, d->choice.timed && go == d->go);
  }
  if (d->choice.explore) {
    const int rc = explore_in_part(x, d, go);
    if (rc >= 0)
      return rc;
  }
  double saved_ns = d->saved_ns;
  CUresult e = CUDA_SUCCESS;
  ibp_timing t;
  time_begin(x, d, &t);
  ibp__nvtx_copy_begin(x->r->name, c->bytes); /* serve/nvtx.h: for nsys */
  const double beside_ns = link_part_ns(go, d->link_ns, &d->prior[go], x->p);
  unsigned beside_gen = 0;
  const int beside = beside_begin(x, d, beside_ns, &beside_gen);
  int rc = ibp__route(go)->submit(x, &e);
  if (rc == IBP_SUBMIT_NOT_NOW) {
    ibp__timing_end(x->slot, d->ch, d->link, &t, 0);
    x->start = NULL;
    go = ibp__route_next(d->choice.est_ns, go);
    saved_ns = 0;
    if (go == IBP_ROUTE_DRIVER)
      pass(x, IBP_PASSED_STAGED_BUSY);
    else
      rc = ibp__route(go)->submit(x, &e);
  }
  /* a cut copy's first chunks ran beside the others' timed copies too */
  beside_end(x, d, beside, beside_gen,
             (rc == IBP_SUBMIT_QUEUED || rc == IBP_SUBMIT_CUT) && go == d->go);
  t.aside_ns = x->aside_ns;
  ibp__timing_end(x->slot, d->ch, d->link, &t,
                  rc == IBP_SUBMIT_QUEUED && go != IBP_ROUTE_DRIVER &&
                      time_started(x, &t));
  ibp__nvtx_copy_end();
  atomic_fetch_sub(&s->refresh.launching, 1);
  if (go == IBP_ROUTE_DRIVER)
    return driver_copy(x, d, 0);
  if (rc == IBP_SUBMIT_CUT) { /* the driver's copy rewrites them all */
    pass(x, IBP_PASSED_STAGED_BUSY);
    return driver_copy(x, d, 0);
  }
  if (rc != IBP_SUBMIT_QUEUED) {
    failed(x, ibp__route(go)->what, e);
    return driver_copy(x, d, 0);
  }
  if (c->sync &&
      (e = ibp__driver()->cuStreamSynchronize(c->stream)) != CUDA_SUCCESS) {
    failed(x, "synchronizing the copy", e);
    return driver_copy(x, d, 0); /* it rewrites dst with the right bytes */
  }
  count_served(x, d, go, ibp__route_pcie_bytes(go, x), saved_ns);
  return 0;
}

/* A copy its stream's batch queued as the driver's copy, timed
 * (IBP_BATCH_TIMED): what ran. */
static int batch_timed(ibp_route_copy *x) {
  pass(x, IBP_PASSED_GATED);
  ibp__chooser_ran(ibp__chooser_of(x->slot), IBP_ROUTE_DRIVER, 1);
  return 0;
}

/* A compact region's copy the shadow cannot serve: the driver's. */
static void compact_driver(ibp_route_copy *x) {
  pass(x, IBP_PASSED_COMPACT);
  ibp__count(&x->s->counters, copies_compact_driver, 1);
}

/* Serves copy x (described: x->c, x->r, x->s); where it passes to the
 * driver, x->passed says why.  hold_more: it may join its stream's batch
 * at once (ibp__batch_hold_more); not for a part of a compact region's
 * copy (split_compact), which is not split again either. */
static int serve_region(ibp_route_copy *x, int hold_more) {
  const ibp_copy *c = x->c;
  ibp_region_rec *r = x->r;
  ibp_served_region *s = x->s;
  if (!ibp__driver() || !s)
    return 1;
  int offer = hold_more ? ibp__batch_hold_more(x) : IBP_BATCH_ALONE;
  if (offer == IBP_BATCH_HELD)
    return 0; /* held, like the batch's earlier copies */
  if (offer == IBP_BATCH_TIMED)
    return batch_timed(x);
  /* a copy alike the last ones its class left to the driver: theirs,
   * undecided (nothing held on any stream: hold_more did not weigh it) */
  if (offer == IBP_BATCH_NOT && !c->part && !c->hold_only && quiet_here(x))
    return 1;
  CUdeviceptr alloc = 0;
  size_t alloc_bytes = 0;
  const int why = locate(x, &alloc, &alloc_bytes);
  if (why >= 0) {
    pass(x, why);
    return 1;
  }
  const uint64_t off = (uintptr_t)c->src - r->base;
  /* a compact region's copy the shadow cannot serve alone: in parts, or
   * the driver's (it reads the memory, whose pages come back as it touches
   * them) */
  if (x->compact && !ibp__compact_servable(s, off, c->bytes)) {
    if (!c->part && !c->hold_only && split_compact(x, off) == 0)
      return 0;
    compact_driver(x);
    return 1;
  }
  /* a held copy's choice needs no exact count (batch.c counts at the
   * flush) */
  const uint64_t estimate = ibp__gate_stored_estimate(s, c->bytes);
  uint64_t pcie = estimate ? estimate : ibp__stored_bytes(s, off, c->bytes);
  if (ibp__gate_misfit(r, off, c->bytes, pcie) && misfit(r, s)) {
    pass(x, IBP_PASSED_MISFIT);
    return 1;
  }
  /* held: served by its stream's batched launch, whose flush scans the
   * span its copies read for writes the kernel recorded (batch.c); a
   * compact region's held copies are judged again at the flush */
  if (offer != IBP_BATCH_ALONE)
    offer = ibp__batch_offer(x, pcie, alloc, alloc_bytes);
  if (offer == IBP_BATCH_HELD)
    return 0;
  if (offer == IBP_BATCH_TIMED)
    return batch_timed(x);
  if (c->hold_only) { /* an entry of the application's batch: the driver's */
    if (offer == IBP_BATCH_ALONE) /* decided alone (batch.c) */
      ibp__chooser_ran(ibp__chooser_of(x->slot), IBP_ROUTE_DRIVER, 1);
    pass(x,
         offer == IBP_BATCH_ALONE ? IBP_PASSED_GATED : IBP_PASSED_BATCH_ENTRY);
    return 1;
  }
  /* what is held runs first -- and its launch may leave the stream busy
   * where quiet() found it idle; a copy no batch counted ends its stream's
   * run (batch.h) */
  if (x->in_run ? ibp__batch_order_copy(c->stream)
                : ibp__batch_order(c->stream))
    x->busy_known = 0;
  if (estimate)
    pcie = ibp__stored_bytes(s, off, c->bytes);
  /* Decided before the tracker's sync of the span, so that a copy the
   * chooser leaves to the driver costs libibp no scan (docs/ARCHITECTURE.md,
   * "The gate"): writes not yet synced only add bytes the GPU paths read,
   * so a copy declined now would be declined after it.  (No scan, decided
   * after it: the page-protection tracker's sync costs nothing.) */
  decision d;
  int decided = 0;
  if (ibp__track_scans(&s->track)) {
    prepare(x, pcie);
    /* a look first (nothing counted): a copy for a GPU path is decided
     * after the sync, nearer its submission (the staged path's model asks
     * whether the stream is still busy) */
    if (choose(x, &d, 0, 0) == IBP_ROUTE_DRIVER) {
      /* decided for real on the look's priors; timed or not, the driver
       * reads the host's bytes */
      if (choose(x, &d, 1, 1) == IBP_ROUTE_DRIVER) {
        quiet_open(x, &d);
        return driver_copy(x, &d, d.choice.timed);
      }
      decided = 1; /* an exploration */
    }
  }
  /* writes the kernel recorded in the span count before the dirty bits are
   * judged (a region whose memory was remapped counts as all written); the
   * scan's modelled cost is charged (on the simulated GPU's clock; nothing
   * on a GPU) */
  const double sync_ns =
      ibp__track_sync_model_ns(&s->track, (uintptr_t)c->src, c->bytes);
  const uint64_t dirty_before =
      atomic_load_explicit(&s->track.dirty_tensors, memory_order_relaxed);
  int synced = ibp__track_sync(&s->track, (uintptr_t)c->src, c->bytes);
  ibp__clock_charge_us(1e-3 * sync_ns);
  /* tensors the sync found written are read raw: counted again */
  if (atomic_load_explicit(&s->track.dirty_tensors, memory_order_relaxed) !=
      dirty_before)
    pcie = ibp__stored_bytes(s, off, c->bytes);
  if (synced != 0 && rewritten(r, s)) {
    pass(x, IBP_PASSED_DEGRADED);
    if (!decided)
      return 1;
    time_untimed(&d);
    return driver_copy(x, &d, 0);
  }
  atomic_fetch_add(&s->refresh.launching, 1); /* refresh.c waits for it */
  prepare(x, pcie);
  x->sync_ns = 0; /* paid: no route is charged it now */
  if (x->compact) {
    /* a refresh that began since rewrites streams in place: the driver's
     * copy then; the kernel never reads the original (compact.h) */
    x->a.dirty = NULL;
    x->a.busy = NULL;
    if (!ibp__compact_servable(s, off, c->bytes)) {
      atomic_fetch_sub(&s->refresh.launching, 1);
      compact_driver(x);
      if (!decided)
        return 1;
      time_untimed(&d);
      return driver_copy(x, &d, 0);
    }
  }
  if (!decided)
    return submit_by(x, &d, choose(x, &d, 1, 0));
  /* the choice stands; the staged path is planned again on what the sync
   * found (a tensor written since is read raw) */
  ibp_route go = d.go;
  const ibp_route_cost again =
      ibp__route(go)->replans ? ibp__route(go)->prior(x) : d.prior[go];
  if (again.cpu_ns <= 0 && again.gpu_ns <= 0) {
    time_untimed(&d);
    go = ibp__route_next(d.choice.est_ns, go);
    if (go == IBP_ROUTE_DRIVER)
      pass(x, IBP_PASSED_STAGED_BUSY);
  }
  return submit_by(x, &d, go);
}

void ibp__serve_passed(const ibp_copy *c, int reason) {
  if (c->bytes == 0 || c->bytes < ibp__cfg.min_copy_bytes)
    return;
  ibp_region_rec *r = NULL;
  if (ibp_registry_find(c->src, c->bytes, &r) == IBP_FIND_NONE)
    return;
  ibp_served_region *s = ibp__served(r);
  if (s)
    count_passed(s, c, reason);
  ibp_region_release(r);
}

/* Starts copy c's description: its region r, found for it. */
static ibp_route_copy describe(ibp_region_rec *r, const ibp_copy *c) {
  const ibp_route_copy x = {.c = c,
                            .r = r,
                            .s = ibp__served(r),
                            .passed = -1,
                            .batch_cls = IBP_CHOOSE_CLASSES,
                            .alone = -1};
  return x;
}

int ibp__serve_htod(const ibp_copy *c) {
  if (c->bytes == 0 || c->bytes < ibp__cfg.min_copy_bytes)
    return 1;
  ibp_region_rec *r = NULL;
  ibp_find_result f = ibp_registry_find(c->src, c->bytes, &r);
  if (f == IBP_FIND_NONE)
    return 1;
  int rc = 1;
  ibp__guard++;
  ibp_route_copy x = describe(r, c);
  if (f == IBP_FIND_FOUND)
    rc = serve_region(&x, 1);
  else
    pass(&x, IBP_PASSED_EDGE);
  if (x.s && x.passed >= 0)
    count_passed(x.s, c, x.passed);
  ibp__guard--;
  ibp_region_release(r);
  return rc && x.in_run ? 2 : rc;
}
