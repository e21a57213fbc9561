/* Serving a host-to-device copy from a ready region (serve/substitute.h,
 * docs/ARCHITECTURE.md "The copy path"): the decompress kernel, launched on
 * the caller's stream, reads the packed compressed streams over PCIe and
 * writes the original bytes to dst.
 *
 * Anything short of "region ready on this device, stream not capturing,
 * launch accepted" returns 1 and the caller runs the driver's own copy:
 * fail open.  A region whose launches keep failing is degraded. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "serve/substitute.h"

#include "base/base.h"
#include "base/clock.h"
#include "base/driver.h"
#include "base/log.h"
#include "serve/batch/batch.h"
#include "serve/choose/chooser.h"
#include "serve/choose/gate.h"
#include "serve/choose/streams.h"
#include "serve/compact.h"
#include "serve/nvtx.h"
#include "serve/prepare/refresh.h"
#include "serve/region.h"
#include "serve/staged/staged.h"
#include "serve/worker.h"

#define FAILURES_BEFORE_DEGRADE 3
/* Over the stored bytes, what a copy's first and last partial sectors
 * add to its PCIe reads, on average (bench/README.md, bench_pcie). */
#define SECTOR_SLACK 32

/* c passed to the driver for `reason` (IBP_PASSED_*, stats/reasons.def);
 * a part of a split copy is counted with it (split_compact). */
static void count_passed(ibp_served_region *s, const ibp_copy *c, int reason) {
  if (!c->part)
    ibp__count_passed(&s->counters, reason, 1, c->bytes);
}

/* What raw-served tensors among [first, last] add: dirty ones, and busy
 * ones while busy bits are in use (`busy` non-NULL). */
static uint64_t raw_extra(const ibp_served_region *s,
                          const _Atomic uint32_t *busy, uint64_t first,
                          uint64_t last) {
  const uint64_t R = s->geometry.tensor_bytes;
  const uint64_t *prefix = s->layout.prefix;
  uint64_t extra = 0;
  for (uint64_t w = first / 32; w <= last / 32; w++) {
    uint32_t m = atomic_load_explicit(&s->track.dirty[w], memory_order_relaxed);
    if (busy)
      m |= atomic_load_explicit(&busy[w], memory_order_relaxed);
    if (w == first / 32)
      m &= UINT32_MAX << (first % 32);
    if (w == last / 32)
      m &= UINT32_MAX >> (31 - last % 32);
    for (; m; m &= m - 1) {
      uint64_t t = w * 32 + (uint64_t)__builtin_ctz(m);
      extra += R - (prefix[t + 1] - prefix[t]);
    }
  }
  return extra;
}

/* Stored bytes of the tensors the copy touches (+ its share of the raw
 * tail; dirty and busy tensors count R): what the kernel reads over PCIe, up to
 * sector rounding. */
uint64_t ibp__stored_bytes(const ibp_served_region *s, uint64_t off,
                           uint64_t len) {
  const uint64_t R = s->geometry.tensor_bytes, n = s->geometry.tensors;
  const uint64_t end = off + len, body = n * R;
  uint64_t bytes = 0;
  if (off < body) {
    uint64_t first = off / R, last = ((end < body ? end : body) - 1) / R;
    /* tensors the fill has not placed yet are raw (serve/prepare/pack.h) */
    const uint64_t filled =
        atomic_load_explicit(&s->layout.filled, memory_order_acquire);
    if (last >= filled) {
      uint64_t from = first > filled ? first : filled;
      bytes += (last + 1 - from) * R;
      if (first >= filled)
        first = last + 1; /* nothing placed in the span */
      else
        last = filled - 1;
    }
    const _Atomic uint32_t *busy =
        atomic_load_explicit(&s->refresh.refreshing, memory_order_relaxed)
            ? s->refresh.busy
            : NULL;
    if (first <= last) {
      bytes += s->layout.prefix[last + 1] - s->layout.prefix[first];
      if (s->track.dirty &&
          (busy ||
           atomic_load_explicit(&s->track.dirty_tensors, memory_order_relaxed)))
        bytes += raw_extra(s, busy, first, last);
    }
  }
  if (end > body)
    bytes += end - (off > body ? off : body);
  return bytes;
}

static void failed(ibp_region_rec *r, ibp_served_region *s, const ibp_copy *c,
                   const char *what, CUresult e) {
  count_passed(s, c, IBP_PASSED_FAILED);
  static int warned;
  ibp__warn_first(&warned,
                  "region '%s': %s failed (CUresult %d); copying without "
                  "libibp",
                  r->name, what, (int)e);
  if (atomic_fetch_add(&s->failures, 1) + 1 >= FAILURES_BEFORE_DEGRADE &&
      ibp_region_transition(r, IBP_REGION_READY, IBP_REGION_DEGRADED))
    ibp__log(IBP_LOG_INFO, "region '%s': degraded to pass-through", r->name);
}

/* The launch of the copy: the region's template with the copy's range,
 * and its grid.  Between a copy's decision and its launch (refresh.c waits
 * for those: `launching`). */
static void prepare(ibp_region_rec *r, const ibp_served_region *s,
                    const ibp_device_slot *slot, const ibp_copy *c,
                    ibp_decompress_args *a, ibp_kernel_plan *plan) {
  *a = slot->args;
  const uint64_t off = (uintptr_t)c->src - r->base;
  a->first_tensor = off / a->tensor_bytes;
  a->first_offset = (uint32_t)(off % a->tensor_bytes);
  a->length = c->bytes;
  a->dst = (uint8_t *)(uintptr_t)c->dst;
  /* The kernel reads dirty bits over PCIe only when some tensor has one,
   * and busy bits only while a refresh runs (refresh.c). */
  if (atomic_load(&s->refresh.refreshing))
    a->busy = slot->busy;
  else if (atomic_load(&s->track.dirty_tensors) == 0)
    a->dirty = NULL;
  *plan = slot->plan;
  ibp_kernels_plan_range(a, slot->sms, plan);
}

static CUresult launch(const ibp_driver *d, const ibp_device_slot *slot,
                       ibp_decompress_args *a, const ibp_kernel_plan *plan,
                       CUstream stream) {
  void *params[] = {a};
  return d->cuLaunchKernel(slot->fn, plan->grid, 1, 1, plan->block, 1, 1,
                           plan->dynamic_shared, stream, params, NULL);
}

/* The gate's view of copy c (its range in a, planned as *plan): the SMs its
 * grid is worth, its units; "stored" bytes over PCIe plus the partial
 * sectors at the streams' ends. */
static ibp_gate_copy gate_copy(const ibp_profile *p, const ibp_copy *c,
                               const ibp_decompress_args *a,
                               const ibp_kernel_plan *plan, uint64_t pcie) {
  const uint64_t off = a->first_tensor * a->tensor_bytes + a->first_offset;
  return (ibp_gate_copy){
      c->bytes, pcie + SECTOR_SLACK,
      ibp_kernels_decode_sms(plan->grid, plan->block, (unsigned)p->sms),
      ibp__gate_units(a->tensor_bytes, a->tensors, off, c->bytes),
      a->tensor_bytes};
}

/* A copy's decision: the route, the one to fall back on when the staged
 * ring cannot take it, and what timing the copy needs. */
typedef struct decision {
  ibp_route go, second;
  double saved_ns; /* the model's: the driver's time less the route's */
  ibp_choice choice;
  ibp_route_cost prior[IBP_ROUTES];
  unsigned cls;
  int idle, dev;
  ibp_chooser *ch;
  const ibp_profile *p;
} decision;

static ibp_route compact_route(decision *x);

/* The route for this copy among those IBP_PATH leaves open: the chooser
 * (serve/choose/chooser.h) weighs each route's model cost (gate.c) -- the
 * driver's copy, the kernel reading over PCIe, the staged path (planned
 * into *sp) -- against what the region's copies of its class measured.
 * `count`: count a copy sent to the driver as gated, and decide for real
 * (0: a first look, see serve_region: nothing counted or spent). */
static ibp_route choose(ibp_served_region *s, ibp_device_slot *slot, int dev,
                        CUcontext ctx, const ibp_copy *c, uint64_t pcie,
                        const ibp_decompress_args *a,
                        const ibp_kernel_plan *plan, ibp_staged_plan *sp,
                        decision *x, int count, int again) {
  /* every route is timed alike: two events on the caller's stream around
   * its submission (the staged path's window copies run on libibp's copy
   * stream, its decodes on the caller's, after them), the span started no
   * earlier than the other streams' work it may have waited for
   * (docs/ARCHITECTURE.md "The gate") */
  const unsigned timable = 1u << IBP_ROUTE_DRIVER | 1u << IBP_ROUTE_ZEROCOPY |
                           1u << IBP_ROUTE_STAGED;
  ibp_route_cost *prior = x->prior;
  if (again) { /* the look's priors, class and staged plan stand */
    if (!x->p)
      return IBP_ROUTE_DRIVER;
    goto decide;
  }
  memset(x, 0, sizeof *x);
  const ibp_profile *p = ibp__gate_profile(dev);
  x->p = p;
  x->dev = dev;
  if (!p) {
    count_passed(s, c, IBP_PASSED_NO_PROFILE);
    return IBP_ROUTE_DRIVER;
  }
  const ibp_gate_copy g = gate_copy(p, c, a, plan, pcie);
  const double runtime = 1e3 * p->runtime_call_us;
  prior[IBP_ROUTE_DRIVER] =
      (ibp_route_cost){runtime + 1e3 * p->driver_copy_call_us,
                       1e3 * ibp_profile_ce_copy_us(p, c->bytes, 1), 0, 0, 0};
  if (ibp__cfg.path != IBP_PATH_STAGED)
    prior[IBP_ROUTE_ZEROCOPY] = (ibp_route_cost){
        runtime + 1e3 * p->driver_launch_call_us,
        1e3 * ibp_profile_decode_us(p, g.host_bytes, g.bytes, g.units,
                                    g.sms ? g.sms : 1),
        0, 0, 0};
  x->ch = ibp__chooser_of(slot);
  const int busy = ibp__streams_busy(dev, c->stream, ibp__clock_ns());
  x->idle = !busy;
  x->cls = ibp__choose_class_index(c->bytes, busy, IBP_CLASS_SINGLE);
  if (ibp__cfg.path != IBP_PATH_ZEROCOPY &&
      ibp__staged_plan(s, slot, ctx, dev, c, busy, a, sp) == 0)
    prior[IBP_ROUTE_STAGED] =
        (ibp_route_cost){1e3 * ibp__gate_staged_cpu_us(p, &sp->gate),
                         1e3 * sp->gate.gpu_us, 0, 0, 0};
  ibp__gate_flag_guesses(dev, prior);
decide:;
  ibp_route go = ibp__chooser_decide(s, slot, x->ch, x->p, x->cls, prior,
                                     timable, !count, &x->choice);
  /* the faster of the other two, for a staged copy the ring cannot take */
  const double *est = x->choice.est_ns;
  x->second = est[IBP_ROUTE_ZEROCOPY] > 0 &&
                      est[IBP_ROUTE_ZEROCOPY] < est[IBP_ROUTE_DRIVER]
                  ? IBP_ROUTE_ZEROCOPY
                  : IBP_ROUTE_DRIVER;
  if (ibp__compact_active(s)) { /* its memory is the shadow's */
    if (est[IBP_ROUTE_ZEROCOPY] > 0)
      x->second = IBP_ROUTE_ZEROCOPY;
    if (go == IBP_ROUTE_DRIVER && (go = compact_route(x)) != IBP_ROUTE_DRIVER &&
        count && est[go] > est[IBP_ROUTE_DRIVER])
      ibp__count(&s->counters, compact_seconds_cost,
                 (uint64_t)(est[go] - est[IBP_ROUTE_DRIVER]));
  }
  const ibp_route_cost *m = prior;
  double model = m[go].cpu_ns > m[go].gpu_ns ? m[go].cpu_ns : m[go].gpu_ns;
  double pass = m[0].cpu_ns > m[0].gpu_ns ? m[0].cpu_ns : m[0].gpu_ns;
  x->saved_ns = pass > model ? pass - model : 0;
  x->go = go;
  if (count)
    ibp__streams_queued(x->dev, c->stream, ibp__clock_ns(),
                        x->choice.est_ns[go]);
  if (go == IBP_ROUTE_DRIVER && count)
    count_passed(s, c, IBP_PASSED_GATED);
  return go;
}

/* The model's CPU time before route r's first GPU work (ns): the call that
 * queues it (the staged path: its first window's wait and copy). */
static double lead_ns(const ibp_profile *p, ibp_route r) {
  switch (r) {
  case IBP_ROUTE_DRIVER:
    return 1e3 * p->driver_copy_call_us;
  case IBP_ROUTE_ZEROCOPY:
    return 1e3 * p->driver_launch_call_us;
  default:
    return 1e3 * (p->driver_copy_call_us + 2 * p->driver_call_us);
  }
}

static void time_begin(ibp_device_slot *slot, const ibp_copy *c,
                       const decision *x, ibp_timing *t) {
  t->index = -1;
  if (!x->choice.timed)
    return;
  /* whether the span starts with the calls (an idle stream) or with the
   * work queued before: asked, once per timed copy -- the class's busy bit
   * is the model's guess, and a busy stream taken for idle would have the
   * calls' time taken off a span that never held them (the driver's copy
   * then measured cheaper than it is) */
  const int idle = ibp__stream_idle(c->stream);
  ibp__timing_begin(slot, x->ch, x->p, c->stream, x->cls, &x->choice,
                    &x->prior[x->go], 1e3 * x->p->runtime_call_us,
                    lead_ns(x->p, x->go), idle, x->dev, t);
}

/* A decision's timing that will not happen (its route changed). */
static void time_untimed(decision *x) {
  if (x->choice.timed)
    ibp__chooser_untimed(x->ch, x->cls, &x->choice);
  x->choice.timed = 0;
}

/* A compact region's copy the chooser gave the driver: the GPU path its
 * estimates rank first among those open (compact.h: its pages are the
 * shadow's; where none is open, the driver reads the memory, rebuilding
 * what it touches).  The timing asked for the driver is dropped. */
static ibp_route compact_route(decision *x) {
  const double *est = x->choice.est_ns;
  ibp_route go = IBP_ROUTE_DRIVER;
  if (est[IBP_ROUTE_ZEROCOPY] > 0)
    go = IBP_ROUTE_ZEROCOPY;
  if (est[IBP_ROUTE_STAGED] > 0 &&
      (go == IBP_ROUTE_DRIVER || est[IBP_ROUTE_STAGED] < est[go]))
    go = IBP_ROUTE_STAGED;
  if (go != IBP_ROUTE_DRIVER)
    time_untimed(x);
  return go;
}

/* Whether `stream` is capturing (or cannot tell). */
static int capturing(const ibp_driver *d, CUstream stream) {
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  return d->cuStreamIsCapturing(stream, &cs) != CUDA_SUCCESS ||
         cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* The driver's copy, timed (the chooser asked for it): queued here between
 * the events, synchronised for a synchronous entry point.  Returns 0 when
 * done; 1: the caller runs the copy (nothing was queued). */
static int timed_driver_copy(ibp_device_slot *slot, const ibp_copy *c,
                             const decision *x) {
  const ibp_driver *d = ibp__driver();
  ibp_timing t;
  time_begin(slot, c, x, &t);
  if (t.index < 0)
    return 1;
  CUresult e = d->cuMemcpyHtoDAsync(c->dst, c->src, c->bytes, c->stream);
  ibp__timing_end(slot, x->ch, c->stream, &t, e == CUDA_SUCCESS);
  if (e != CUDA_SUCCESS)
    return 1;
  if (c->sync && d->cuStreamSynchronize(c->stream) != CUDA_SUCCESS)
    return 1; /* the real copy runs again, and reports what it finds */
  return 0;
}

/* [dst, dst+bytes) lies inside one device allocation.  Otherwise -- NULL,
 * an address in no allocation, a range running past its allocation's end,
 * host memory -- the driver's own copy runs and returns its own error: a
 * kernel would fault or write into a neighbouring allocation. */
int ibp__dst_fits(const ibp_driver *d, CUdeviceptr dst, size_t bytes,
                  CUdeviceptr *base, size_t *size) {
  unsigned type = 0;
  CUpointer_attribute what[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void *out[] = {&type, base, size};
  if (!dst || !d->cuPointerGetAttributes ||
      d->cuPointerGetAttributes(3, what, out, dst) != CUDA_SUCCESS)
    return 0;
  return type == CU_MEMORYTYPE_DEVICE && dst >= *base && bytes <= *size &&
         dst - *base <= *size - bytes;
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
 * them.  A region half dirty regardless, or recompressed more often than
 * every 4th copy, is rewritten faster than it is copied, and the driver's
 * own copy is the better deal: demote it (and stop tracking its writes). */
static int rewritten(ibp_region_rec *r, ibp_served_region *s) {
  uint64_t dirty =
      atomic_load_explicit(&s->track.dirty_tensors, memory_order_relaxed);
  uint64_t refreshes =
      atomic_load_explicit(&s->refresh.runs, memory_order_relaxed);
  uint64_t served =
      atomic_load_explicit(&s->counters.copies_served, memory_order_relaxed);
  /* half of it dirty, or recompressed more often than every 4th copy */
  int too_often = refreshes >= 8 && refreshes * 4 > served;
  if (!too_often && (dirty == 0 || 2 * dirty < s->geometry.tensors)) {
    ibp__refresh_maybe(r);
    return 0;
  }
  if (ibp__compact_pin(r, "rewritten faster than copied")) {
    /* pinned, and demoted like any other */
  } else if (ibp_region_transition(r, IBP_REGION_READY, IBP_REGION_DEGRADED)) {
    ibp__track_unprotect(&s->track);
    ibp__log(IBP_LOG_INFO,
             "region '%s': rewritten faster than copied (%llu of %llu "
             "tensors dirty, %llu recompressions); demoted to pass-through",
             r->name, (unsigned long long)dirty,
             (unsigned long long)s->geometry.tensors,
             (unsigned long long)refreshes);
  }
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

static int serve_region(ibp_region_rec *r, const ibp_copy *c, int offered);

static int split_compact(ibp_region_rec *r, ibp_served_region *s,
                         const ibp_copy *c, uint64_t off) {
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
      if (serve_region(r, &p, 1) == 0)
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
    count_passed(s, c, IBP_PASSED_COMPACT);
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
 * rewritten faster than copied and the stream is not capturing. */
static int unready(ibp_region_rec *r, ibp_served_region *s,
                   const ibp_device_slot *slot, CUcontext ctx, int dev,
                   CUstream stream) {
  const ibp_driver *d = ibp__driver();
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
  if (capturing(d, stream))
    return IBP_PASSED_CAPTURING;
  return -1;
}

/* offered: the batch's chooser already declined to hold c
 * (ibp__batch_hold_more answered 2); c->part: c is a part of a compact
 * region's copy (split_compact), not split again. */
static int serve_region(ibp_region_rec *r, const ibp_copy *c, int offered) {
  const ibp_driver *d = ibp__driver();
  ibp_served_region *s = ibp__served(r);
  if (!d || !s)
    return 1;
  /* a compact region's memory is pageable to the driver: a copy of it
   * that a graph captures needs it pinned */
  const int compact = ibp__compact_active(s);
  if (compact && capturing(d, c->stream) &&
      ibp__compact_pin(r, "a copy from it is captured")) {
    count_passed(s, c, IBP_PASSED_CAPTURING);
    return 1;
  }
  if (atomic_load_explicit(&s->kernel_args, memory_order_relaxed)) {
    /* kernel_args.c: it may be written unseen */
    count_passed(s, c, IBP_PASSED_KERNEL_ARGS);
    return 1;
  }
  CUdeviceptr alloc = 0;
  size_t alloc_bytes = 0;
  if (!ibp__dst_fits(d, c->dst, c->bytes, &alloc, &alloc_bytes)) {
    /* host to host, or a bad destination: the driver's answer */
    count_passed(s, c, IBP_PASSED_DESTINATION);
    return 1;
  }
  CUcontext ctx = NULL;
  CUdevice dev = -1;
  if (d->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx ||
      d->cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 ||
      dev >= IBP_MAX_DEVICES) {
    count_passed(s, c, IBP_PASSED_CONTEXT);
    return 1;
  }
  if (ibp_region_state_get(r) != IBP_REGION_READY ||
      ibp__device_state(s, (unsigned)dev) != IBP_DEVICE_READY)
    make_ready(r, s, ctx, dev);
  ibp_device_slot *slot = &s->dev[dev];
  const int why = unready(r, s, slot, ctx, dev, c->stream);
  if (why >= 0) {
    count_passed(s, c, why);
    return 1;
  }
  const uint64_t off = (uintptr_t)c->src - r->base;
  /* a compact region's copy the shadow cannot serve alone: in parts, or
   * the driver's (it reads the memory, whose pages come back as it touches
   * them) */
  if (compact && !ibp__compact_servable(s, off, c->bytes)) {
    if (!c->part && !c->hold_only && split_compact(r, s, c, off) == 0)
      return 0;
    count_passed(s, c, IBP_PASSED_COMPACT);
    ibp__count(&s->counters, copies_compact_driver, 1);
    return 1;
  }
  /* a held copy's choice needs no exact count (batch.c counts at the
   * flush) */
  const uint64_t estimate = ibp__gate_stored_estimate(s, c->bytes);
  uint64_t pcie = estimate ? estimate : ibp__stored_bytes(s, off, c->bytes);
  if (ibp__gate_mismatch(r, off, c->bytes, pcie)) {
    count_passed(s, c, IBP_PASSED_MISFIT);
    return 1;
  }
  /* held: served by its stream's batched launch, whose flush scans the
   * span its copies read for writes the kernel recorded (batch.c) */
  /* a compact region's held copies are judged again at the flush (batch.c:
   * the shadow must still hold every one) */
  const int offer =
      offered ? 2
              : ibp__batch_offer(r, s, dev, ctx, c, pcie, alloc, alloc_bytes);
  if (offer == 0)
    return 0;
  if (c->hold_only) { /* an entry of the application's batch: the driver's */
    count_passed(s, c, offer == 2 ? IBP_PASSED_GATED : IBP_PASSED_BATCH_ENTRY);
    return 1;
  }
  ibp__batch_order(c->stream); /* what is held runs first */
  if (estimate)
    pcie = ibp__stored_bytes(s, off, c->bytes);
  /* Decided before the tracker's sync of the span, so that a copy the
   * chooser leaves to the driver costs libibp no scan (docs/ARCHITECTURE.md,
   * "The gate"): writes not yet synced only add bytes the GPU paths read,
   * so a copy declined now would be declined after it.  (No scan, decided
   * after it: the page-protection tracker's sync costs nothing.) */
  ibp_decompress_args a;
  ibp_kernel_plan plan;
  ibp_staged_plan sp;
  decision x;
  int decided = 0;
  if (ibp__track_scans(&s->track)) {
    prepare(r, s, slot, c, &a, &plan);
    /* a look first (nothing counted): a copy for a GPU path is decided
     * after the sync, nearer its submission (the staged path's model asks
     * whether the stream is still busy) */
    if (choose(s, slot, dev, ctx, c, pcie, &a, &plan, &sp, &x, 0, 0) ==
        IBP_ROUTE_DRIVER) {
      /* decided for real on the look's priors (the staged plan is not
       * walked twice) */
      if (choose(s, slot, dev, ctx, c, pcie, &a, &plan, &sp, &x, 1, 1) ==
          IBP_ROUTE_DRIVER) /* timed or not, the driver reads the host's
                               bytes */
        return x.choice.timed ? timed_driver_copy(slot, c, &x) : 1;
      decided = 1; /* an exploration */
    }
  }
  /* writes the kernel recorded in the span count before the dirty bits are
   * judged (a region whose memory was remapped counts as all written); the
   * scan's modelled cost is charged (on the simulated GPU's clock; nothing
   * on a GPU) */
  int synced = ibp__track_sync(&s->track, (uintptr_t)c->src, c->bytes);
  if (ibp__track_scans(&s->track) && c->bytes)
    ibp__clock_charge_us(
        1e-3 *
        ibp__track_scan_model_ns(1, ((uintptr_t)c->src + c->bytes - 1) / 4096 -
                                        (uintptr_t)c->src / 4096 + 1));
  if (synced != 0 && rewritten(r, s)) {
    count_passed(s, c, IBP_PASSED_DEGRADED);
    return 1;
  }
  atomic_fetch_add(&s->refresh.launching, 1); /* refresh.c waits for it */
  prepare(r, s, slot, c, &a, &plan);
  if (compact) {
    /* a refresh that began since rewrites streams in place: the driver's
     * copy then; the kernel never reads the original (compact.h) */
    a.dirty = NULL;
    a.busy = NULL;
    if (!ibp__compact_servable(s, off, c->bytes)) {
      atomic_fetch_sub(&s->refresh.launching, 1);
      count_passed(s, c, IBP_PASSED_COMPACT);
      ibp__count(&s->counters, copies_compact_driver, 1);
      return 1;
    }
  }
  ibp_route go;
  if (!decided) {
    go = choose(s, slot, dev, ctx, c, pcie, &a, &plan, &sp, &x, 1, 0);
  } else { /* the choice stands; the staged path is planned again on what
              the sync found (a tensor written since is read raw) */
    go = x.go;
    if (go == IBP_ROUTE_STAGED &&
        ibp__staged_plan(s, slot, ctx, dev, c, !x.idle, &a, &sp) != 0) {
      time_untimed(&x);
      go = x.second;
      if (go == IBP_ROUTE_DRIVER)
        count_passed(s, c, IBP_PASSED_STAGED_BUSY);
    }
  }
  double saved_ns = x.saved_ns;
  if (go == IBP_ROUTE_DRIVER) {
    atomic_fetch_sub(&s->refresh.launching, 1);
    return x.choice.timed && go == x.go ? timed_driver_copy(slot, c, &x) : 1;
  }
  const int ranged = 1;
  CUresult e = CUDA_SUCCESS;
  ibp_timing t;
  time_begin(slot, c, &x, &t);
  if (ranged)
    ibp__nvtx_copy_begin(r->name, c->bytes); /* serve/nvtx.h: for nsys */
  if (go == IBP_ROUTE_STAGED) {
    ibp_staged_args sx = {slot,
                          dev,
                          slot->fn,
                          slot->sms,
                          &a,
                          &slot->staged_plan,
                          &slot->staged_args,
                          &sp};
    int rc = ibp__staged_copy(s, ctx, c, &sx, &e);
    if (rc == 1) { /* no buffer free of other streams' work */
      ibp__timing_end(slot, x.ch, c->stream, &t, 0);
      go = x.second;
      saved_ns = 0;
      if (go == IBP_ROUTE_DRIVER)
        count_passed(s, c, IBP_PASSED_STAGED_BUSY);
    } else if (rc < 0 && e == CUDA_SUCCESS) {
      e = CUDA_ERROR_UNKNOWN;
    }
  }
  if (go == IBP_ROUTE_ZEROCOPY)
    e = launch(d, slot, &a, &plan, c->stream);
  ibp__timing_end(slot, x.ch, c->stream, &t,
                  e == CUDA_SUCCESS && go != IBP_ROUTE_DRIVER);
  if (ranged)
    ibp__nvtx_copy_end();
  atomic_fetch_sub(&s->refresh.launching, 1);
  if (go == IBP_ROUTE_DRIVER)
    return 1;
  if (e != CUDA_SUCCESS) {
    failed(r, s, c, go == IBP_ROUTE_STAGED ? "staged copy" : "kernel launch",
           e);
    return 1;
  }
  if (go == IBP_ROUTE_STAGED) {
    if (!c->part)
      ibp__count(&s->counters, copies_staged, 1);
    pcie = sp.gate.ce_bytes + sp.gate.host_bytes;
  }
  if (c->sync && (e = d->cuStreamSynchronize(c->stream)) != CUDA_SUCCESS) {
    failed(r, s, c, "synchronizing the copy", e);
    return 1; /* the real copy rewrites dst with the right bytes */
  }
  if (!c->part)
    ibp__count(&s->counters, copies_served, 1);
  ibp__count(&s->counters, bytes_requested, c->bytes);
  ibp__count(&s->counters, bytes_read_pcie, pcie);
  ibp__count(&s->counters, modelled_seconds_saved, (uint64_t)saved_ns);
  return 0;
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
  ibp_served_region *s = ibp__served(r);
  const int more = f == IBP_FIND_FOUND ? ibp__batch_hold_more(r, c) : 1;
  if (more == 0)
    rc = 0; /* held, like the batch's earlier copies */
  else if (f == IBP_FIND_FOUND)
    rc = serve_region(r, c, more == 2);
  else if (s)
    count_passed(s, c, IBP_PASSED_EDGE);
  ibp__guard--;
  ibp_region_release(r);
  return rc;
}
