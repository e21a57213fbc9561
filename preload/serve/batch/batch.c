/* Batched launches (serve/batch/batch.h; docs/ARCHITECTURE.md "Batched
 * launches").
 *
 * A stream's batch is a job list: for each held copy its region (an index
 * into the batch's regions, each referenced until the flush), its offset,
 * length and destination, and the write tracker's shares of its pages
 * (serve/batch/scan_ahead.h).  The flush -- at the stream's next ordering
 * point, or, handed to the flusher thread, when the list is full, when a copy
 * overlaps a held one's destination, when the first held copy is older
 * than the profile's batch_deadline_us (checked by the next copy on the
 * device's clock; a timer thread flushes against real time for a program
 * that stops calling) -- settles the scan, builds each region's launch
 * template as a single copy's would be (busy bits while a refresh runs,
 * dirty bits when any), writes templates and jobs into a staging slot of
 * pinned memory, copies them to the slot's device memory on the stream,
 * launches ibp_decompress_batch there and records the slot's event, so
 * the slot is reused only after that launch ran.  Any failure serves the
 * held copies with the driver's own asynchronous copies on the same
 * stream, in order: fail open.
 *
 * Locks: `lock` guards the batches table and the flushes made under it (a
 * hold is a few hundred nanoseconds; the driver calls of a flush never
 * come back into libibp); `stage_lock` the staging and every launch from
 * it; `flusher_lock` the flusher's queue; `spare_lock` the spare job
 * lists.  Taken in that order; the flusher never takes `lock`. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uthash.h>
#include <utlist.h>

#include "serve/batch/batch.h"
#include "serve/batch/batch_runs.h"

#include "base/base.h"
#include "base/clock.h"
#include "base/driver.h"
#include "base/log.h"
#include "base/thread.h"
#include "serve/batch/batch_route.h"
#include "serve/batch/scan_ahead.h"
#include "serve/choose/gate.h"
#include "serve/choose/streams.h"
#include "serve/compact.h"
#include "serve/nvtx.h"
#include "serve/prepare/device.h"
#include "serve/route/route_batched.h"
#include "serve/route/table.h"

#define MAX_JOBS 4096
#define MAX_REGIONS 16
#define SLOTS                                                                  \
  64 /* launches in flight per context (a busy ring: the driver copies) */
#define SLOT_BYTES                                                             \
  (MAX_REGIONS * sizeof(ibp_decompress_args) + MAX_JOBS * sizeof(ibp_batch_job))
/* The tracker's scan cost fades by SCAN_FADE every SCAN_FADE_EVERY copies
 * refused for it (0.98 a copy, in steps): a figure that changed with every
 * copy changed every copy's priors, and the chooser assessed each one
 * again (docs/ARCHITECTURE.md "The gate", a decision's cost). */
#define SCAN_FADE_EVERY 16
#define SCAN_FADE 0.7238 /* 0.98^16 */
/* Ordering points counted per stream, hashed into ORDER_SLOTS counters
 * (and one for IBP_BATCH_ALL): a batch's run ends when its stream's count
 * moves, whichever thread's ordering point it was.  The legacy and
 * per-thread streams by their context too (every context has them). */
#define ORDER_BITS 10
#define ORDER_SLOTS (1u << ORDER_BITS)
#define SHARED_DEFAULT_LIMIT (48 * 1024)
/* Held copies whose destinations are compared one by one with a new
 * copy's (beyond: the batch is launched first) -- see overlaps(). */
#define OVERLAP_SCAN_MAX 512
#define SHARES (MAX_JOBS / IBP_SCAN_SHARE)
/* Batches handed to the flusher and not launched yet, at most (then the
 * holding thread launches its batch itself). */
#define HANDED_MAX 8

/* Streams are created streams and each context's legacy stream.  A
 * per-thread default stream is reachable only from its own thread, so a
 * batch on it could not be launched when another thread's ordering point
 * (an operation on the legacy stream) or the timer needs it: copies there
 * are not held. */
typedef struct batch_key {
  CUstream stream; /* the explicit handle */
  CUcontext ctx;   /* for the legacy stream only */
} batch_key;

typedef struct held_region {
  ibp_region_rec *rec; /* referenced while held */
  uint64_t copies, bytes;
  uint64_t pcie; /* stored bytes they read (at the flush) */
  double saved_ns;
} held_region;

/* The model's last answer for a batch (hold_locked): the routes' costs
 * for a copy like the last one (serve/batch/batch_route.h). */
typedef struct gate_answer {
  const ibp_region_rec *region;
  uint64_t bytes, pcie;
  uint32_t copies;
  int hold_only;
  size_t entries; /* of the application's batch call (ibp_copy.entries) */
  ibp_gate_copy g;
  double scan_ns; /* the tracker's scan at the flush it was made with */
  ibp_route_cost prior[IBP_ROUTES];
  double alone, batched; /* ns, the model's (before the margin) */
} gate_answer;

/* A batch's job list and the write tracker's shares of it
 * (serve/batch/scan_ahead.h): handed whole to the flusher with the batch.
 * Never freed -- the scanners' ring may still point at its shares -- but
 * kept for reuse. */
typedef struct held_jobs {
  ibp_batch_job jobs[MAX_JOBS];
  ibp_scan_share shares[SHARES]; /* share i: jobs [16 i, 16 i + 16) */
  struct held_jobs *next_free;
} held_jobs;

typedef struct batch {
  batch_key key;
  CUcontext ctx;
  CUstream stream;
  int dev, blocking;
  uint32_t count;
  ibp_batch_runs runs; /* its runs and rate: the batch expected */
  int cut;             /* launched by another stream's ordering point or
                          copy: its run ended (run_ordered) */
  uint64_t order_seen; /* the stream's ordering points, as last seen
                          (order_count) */
  uint64_t units;
  double est_ns;     /* the chooser's estimates of the held copies' GPU
                        time, summed (their launch's on the stream and the
                        link) */
  double first_ns;   /* device clock: the first held copy */
  uint64_t received; /* copies held so far (the timer's tick compares) */
  uint64_t timer_saw;
  double deadline_ns;
  CUdeviceptr dst_lo, dst_hi; /* the allocation of the last copy's dst */
  CUdeviceptr env_lo, env_hi; /* the held copies' destinations span this */
  CUdeviceptr last_dst;       /* the last copy offered, held or not */
  uint64_t last_bytes;
  gate_answer answer;
  ibp_batch_timed timed; /* the launch is timed for the chooser */
  unsigned exploring;    /* 1 + the class whose exploration of the batched
                            route it holds (hold_locked); 0: none -- reset
                            with the batch */
  const ibp_chooser *exploring_ch; /* that class's chooser (a region's) */
  uint32_t exploring_copies;       /* the copies that exploration takes */
  unsigned nregions;
  held_region regions[MAX_REGIONS];
  held_jobs *hj;      /* the job list (its own from batch_for on) */
  double handed_ns;   /* device clock: handed to the flusher */
  struct batch *next; /* in the flusher's queue */
  UT_hash_handle hh;
} batch;

/* A context's staging: SLOTS slots of SLOT_BYTES, pinned and on the
 * device. */
typedef struct staging {
  CUcontext ctx;
  uint8_t *host;
  CUdeviceptr dev;
  CUevent done[SLOTS];
  int recorded[SLOTS];
  int dead[SLOTS]; /* its event could not be recorded: in use for good */
  int device;      /* the ordinal */
  unsigned next, sms, max_shared, shared_set;
  int failed; /* could not be allocated: nothing is held in the context */
  UT_hash_handle hh;
} staging;

/* Adaptive: a hold and the scanner's claim are short, and a holding thread
 * that slept on the lock would pay more than the batch saves. */
static pthread_mutex_t lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static batch *batches;
static staging *stagings; /* under stage_lock */
static _Atomic unsigned staging_failures;
static _Atomic unsigned held; /* batches holding copies */
/* Whether any stream ever had a batch: till then ordering points are not
 * counted (order_count) -- no run to end */
static _Atomic unsigned batched;
static int timer_started;
/* The flusher (close_batch): batches launched off the holding thread, in
 * the order they were handed over; `handed` counts those not launched
 * yet. */
static pthread_mutex_t flusher_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t flusher_wake = PTHREAD_COND_INITIALIZER;
static batch *handed_list; /* utlist: oldest first */
static _Atomic unsigned handed;
static double flushed_ns; /* flusher's clock: its last launch done */
static int flusher_tried, flusher_running;
static held_jobs *spare_jobs; /* under spare_lock */
static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;
/* The staging and the launches from it: the flusher launches without
 * `lock`. */
static pthread_mutex_t stage_lock = PTHREAD_MUTEX_INITIALIZER;
static int warned; /* one warning per process for batched launches */

static batch_key key_of(CUstream s, CUcontext ctx) {
  batch_key k;
  memset(&k, 0, sizeof k); /* hashed as bytes */
  k.stream = s;
  if (s == CU_STREAM_LEGACY)
    k.ctx = ctx;
  return k;
}

static batch *find(batch_key k) {
  batch *b = NULL;
  HASH_FIND(hh, batches, &k, sizeof k, b);
  return b;
}

/* Whether work on s waits for the legacy stream (and it for s). */
static int blocking(const ibp_driver *d, CUstream s) {
  if (s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
    return 1;
  unsigned flags = 0;
  if (!d->cuStreamGetFlags || d->cuStreamGetFlags(s, &flags) != CUDA_SUCCESS)
    return 1; /* when in doubt, order it */
  return !(flags & CU_STREAM_NON_BLOCKING);
}

/* ---- staging ------------------------------------------------------------- */

static void staging_free(const ibp_driver *d, staging *st) {
  for (unsigned i = 0; i < SLOTS; i++)
    if (st->done[i])
      d->cuEventDestroy(st->done[i]);
  if (st->dev)
    d->cuMemFree(st->dev);
  if (st->host)
    d->cuMemFreeHost(st->host);
  free(st);
}

/* The current context's staging (created on first use; NULL when that
 * failed, then and for good). */
static staging *staging_for(const ibp_driver *d, CUcontext ctx, int dev) {
  staging *st = NULL;
  HASH_FIND_PTR(stagings, &ctx, st);
  if (st)
    return st->failed ? NULL : st;
  st = calloc(1, sizeof *st);
  if (!st)
    return NULL;
  st->ctx = ctx;
  st->device = dev;
  int sms = 0, smem = 0;
  int ok =
      d->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                              dev) == CUDA_SUCCESS &&
      d->cuDeviceGetAttribute(
          &smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev) ==
          CUDA_SUCCESS &&
      d->cuMemHostAlloc((void **)&st->host, SLOTS * SLOT_BYTES, 0) ==
          CUDA_SUCCESS &&
      d->cuMemAlloc(&st->dev, SLOTS * SLOT_BYTES) == CUDA_SUCCESS;
  for (unsigned i = 0; ok && i < SLOTS; i++)
    ok =
        d->cuEventCreate(&st->done[i], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
  if (!ok) {
    staging_free(d, st);
    st = calloc(1, sizeof *st);
    if (st) { /* remembered, so that nothing more is held here */
      st->ctx = ctx;
      st->device = dev;
      st->failed = 1;
      HASH_ADD_PTR(stagings, ctx, st);
      atomic_fetch_add(&staging_failures, 1);
    }
    ibp__warn_first(&warned,
                    "batched launches: no staging memory on device %d; "
                    "copies there are served one by one",
                    dev);
    return NULL;
  }
  st->sms = (unsigned)sms;
  st->max_shared = (unsigned)smem;
  HASH_ADD_PTR(stagings, ctx, st);
  return st;
}

/* Whether ctx's staging could not be allocated (rare: looked up only
 * after some context's failed). */
static int staging_failed(CUcontext ctx) {
  if (!atomic_load_explicit(&staging_failures, memory_order_relaxed))
    return 0;
  staging *st = NULL;
  pthread_mutex_lock(&stage_lock);
  HASH_FIND_PTR(stagings, &ctx, st);
  const int failed = st && st->failed;
  pthread_mutex_unlock(&stage_lock);
  return failed;
}

/* ---- the flush ----------------------------------------------------------- */

/* The tracker's scan of the pages b's jobs read (serve/batch/scan_ahead.h),
 * settled before its launch; what the flushing thread pays of it is
 * charged to the virtual clock and remembered for the gate
 * (s->batch_scan_ns), and returned (ns). */
static double scan_held(batch *b) {
  held_jobs *hj = b->hj;
  const uint32_t whole = b->count / IBP_SCAN_SHARE; /* up to SHARES */
  ibp_scan_share *part = whole < SHARES ? &hj->shares[whole] : NULL;
  const double took =
      ibp__scan_settle(hj->shares, whole, part ? part->runs : NULL,
                       part ? part->nruns : 0, ibp__clock_ns());
  for (uint32_t i = 0; i < whole; i++)
    hj->shares[i].nruns = 0;
  if (part)
    part->nruns = 0;
  ibp__clock_charge_us(1e-3 * took);
  for (unsigned k = 0; k < b->nregions; k++) {
    ibp_served_region *s = ibp__served(b->regions[k].rec);
    if (s && ibp__track_scans(&s->track)) {
      const double was =
          atomic_load_explicit(&s->batch_scan_ns, memory_order_relaxed);
      /* real CPU time, which a busy host inflates now and then: half way
       * down to a cheaper flush's at once, an eighth of the way up to a
       * dearer one's (one flush's 249 us against 35-57 us sent 185 rows
       * alone: emb_gather random_u8, a100-pcie4) */
      const double next = !was         ? took
                          : took > was ? was + 0.125 * (took - was)
                                       : 0.5 * (was + took);
      atomic_store_explicit(&s->batch_scan_ns, next, memory_order_relaxed);
    }
  }
  return took;
}

/* Region k's launch template on b's device, as a single copy's (substitute.c
 * prepare); -1 when the region can no longer be served there. */
static int region_template(batch *b, unsigned k, ibp_decompress_args *a) {
  ibp_region_rec *r = b->regions[k].rec;
  ibp_served_region *s = ibp__served(r);
  if (!s || ibp_region_state_get(r) != IBP_REGION_READY ||
      ibp__device_state(s, (unsigned)b->dev) != IBP_DEVICE_READY ||
      s->dev[b->dev].ctx != b->ctx)
    return -1;
  const ibp_device_slot *slot = &s->dev[b->dev];
  *a = slot->args;
  if (ibp__compact_active(s)) { /* every job held by the shadow alone */
    a->dirty = NULL;
    a->busy = NULL;
  } else if (atomic_load(&s->refresh.refreshing)) {
    a->busy = slot->busy;
  } else if (atomic_load(&s->track.dirty_tensors) == 0) {
    a->dirty = NULL;
  }
  return 0;
}

/* Whether every job of a compact region is still held by its shadow alone
 * (compact.h: the kernel never reads such a region's memory).  A tensor
 * written, or a refresh begun, since the copy was held: the driver's
 * copies then (after `launching` went up: no refresh begins rewriting
 * under the launch). */
static int compact_jobs_servable(const batch *b) {
  int any = 0; /* most batches hold no compact region: no walk */
  for (unsigned k = 0; k < b->nregions && !any; k++) {
    const ibp_served_region *s = ibp__served(b->regions[k].rec);
    any = s && ibp__compact_active(s);
  }
  for (uint32_t j = 0; any && j < b->count; j++) {
    const ibp_batch_job *job = &b->hj->jobs[j];
    const ibp_served_region *s = job->region < b->nregions
                                     ? ibp__served(b->regions[job->region].rec)
                                     : NULL;
    if (s && ibp__compact_active(s) &&
        !ibp__compact_servable(s, job->src, job->length))
      return 0;
  }
  return 1;
}

static CUresult launch(const ibp_driver *d, batch *b) {
  staging *st = staging_for(d, b->ctx, b->dev);
  CUfunction fn = ibp__device_batch_function();
  if (!st || !fn)
    return CUDA_ERROR_NOT_READY;
  /* a slot whose last launch has run; none free: the driver's own copies
   * (never a wait here: the global lock is held, and the launch in a slot
   * may wait on anything its stream waits on) */
  unsigned i = SLOTS;
  for (unsigned t = 0; t < SLOTS && i == SLOTS; t++) {
    unsigned c = (st->next + t) % SLOTS;
    if (!st->dead[c] &&
        (!st->recorded[c] || d->cuEventQuery(st->done[c]) == CUDA_SUCCESS))
      i = c;
  }
  if (i == SLOTS)
    return CUDA_ERROR_NOT_READY;
  st->next = i + 1;
  st->recorded[i] = 0;
  CUresult e;
  uint8_t *host = st->host + (size_t)i * SLOT_BYTES;
  const CUdeviceptr dev = st->dev + (CUdeviceptr)i * SLOT_BYTES;
  ibp_decompress_args *tpl = (ibp_decompress_args *)host;
  for (unsigned k = 0; k < b->nregions; k++)
    if (region_template(b, k, &tpl[k]) != 0)
      return CUDA_ERROR_NOT_READY;
  const size_t tpl_bytes = b->nregions * sizeof *tpl;
  const size_t bytes = tpl_bytes + b->count * sizeof *b->hj->jobs;
  memcpy(host + tpl_bytes, b->hj->jobs, b->count * sizeof *b->hj->jobs);
  ibp_batch_args args = {(const ibp_decompress_args *)(uintptr_t)dev,
                         (const ibp_batch_job *)(uintptr_t)(dev + tpl_bytes),
                         b->units,
                         b->count,
                         0,
                         0,
                         0};
  ibp_kernel_plan plan;
  ibp_kernels_plan_batch(&args, tpl, b->nregions, st->max_shared, st->sms,
                         &plan);
  if (plan.dynamic_shared > SHARED_DEFAULT_LIMIT &&
      plan.dynamic_shared > st->shared_set) {
    if ((e = d->cuFuncSetAttribute(
             fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
             (int)plan.dynamic_shared)) != CUDA_SUCCESS)
      return e;
    st->shared_set = plan.dynamic_shared;
  }
  if ((e = d->cuMemcpyHtoDAsync(dev, host, bytes, b->stream)) != CUDA_SUCCESS)
    return e;
  void *params[] = {&args};
  e = d->cuLaunchKernel(fn, plan.grid, 1, 1, plan.block, 1, 1,
                        plan.dynamic_shared, b->stream, params, NULL);
  /* the slot's event follows whatever was queued (the job list's copy at
   * least): the slot is not reused before it ran */
  if (d->cuEventRecord(st->done[i], b->stream) == CUDA_SUCCESS)
    st->recorded[i] = 1;
  else
    st->dead[i] = 1; /* never reused */
  return e;
}

/* The held copies as the driver's own copies, in order (fail open).  A
 * copy the driver refuses asynchronously is made synchronously once the
 * stream's earlier work is done: the application was told it succeeded. */
static void copy_each(const ibp_driver *d, const batch *b) {
  int synced = 0;
  for (uint32_t j = 0; j < b->count; j++) {
    const ibp_batch_job *job = &b->hj->jobs[j];
    const uint8_t *src =
        (const uint8_t *)b->regions[job->region].rec->base + job->src;
    if (d->cuMemcpyHtoDAsync(job->dst, src, job->length, b->stream) ==
        CUDA_SUCCESS)
      continue;
    if (!synced)
      synced = d->cuStreamSynchronize(b->stream) == CUDA_SUCCESS;
    if (d->cuMemcpyHtoD(job->dst, src, job->length) != CUDA_SUCCESS)
      ibp__log(IBP_LOG_ERROR,
               "a held copy of %u bytes could not be made (the driver "
               "refused it twice)",
               job->length);
  }
}

/* The stored bytes each region's jobs read (exact, at the flush: the hold
 * only estimated them). */
static void stored_per_region(batch *b) {
  for (unsigned k = 0; k < b->nregions; k++)
    b->regions[k].pcie = 0;
  /* the prefix sums of a large table's rows miss the cache: ask for them
   * all first, so the misses overlap */
  for (uint32_t j = 0; j < b->count; j++) {
    const ibp_batch_job *job = &b->hj->jobs[j];
    const ibp_served_region *s = ibp__served(b->regions[job->region].rec);
    if (s && s->layout.prefix)
      __builtin_prefetch(
          &s->layout.prefix[job->src / s->geometry.tensor_bytes]);
  }
  for (uint32_t j = 0; j < b->count; j++) {
    const ibp_batch_job *job = &b->hj->jobs[j];
    held_region *h = &b->regions[job->region];
    const ibp_served_region *s = ibp__served(h->rec);
    if (s)
      h->pcie += ibp__stored_bytes(s, job->src, job->length);
  }
}

/* Counts the batch's copies by how the flush ended: launched (`e`
 * CUDA_SUCCESS), declined (CUDA_ERROR_NOT_READY: a region no longer
 * ready, no staging slot free -- the driver's copies by design: passed
 * through) or failed (fallen back). */
static void count(batch *b, CUresult e) {
  const int served = e == CUDA_SUCCESS;
  if (served)
    stored_per_region(b);
  for (unsigned k = 0; k < b->nregions; k++) {
    const held_region *h = &b->regions[k];
    ibp_served_region *s = ibp__served(h->rec);
    if (!s)
      continue;
    /* what ran: the batched launch, or the driver's copies */
    ibp__chooser_ran(ibp__chooser_of(&s->dev[b->dev]),
                     served ? IBP_ROUTE_BATCHED : IBP_ROUTE_DRIVER, h->copies);
    if (e == CUDA_ERROR_NOT_READY) {
      ibp__count_passed(&s->counters, IBP_PASSED_BATCH_DECLINED, h->copies,
                        h->bytes);
      continue;
    }
    if (!served) {
      ibp__count_passed(&s->counters, IBP_PASSED_FAILED, h->copies, h->bytes);
      continue;
    }
    ibp__count(&s->counters, copies_served, h->copies);
    ibp__count(&s->counters, copies_batched, h->copies);
    ibp__count(&s->counters, bytes_requested, h->bytes);
    ibp__count(&s->counters, bytes_read_pcie, h->pcie);
    ibp__count(&s->counters, modelled_seconds_saved, (uint64_t)h->saved_ns);
  }
  if (served && b->nregions) {
    ibp_served_region *s = ibp__served(b->regions[0].rec);
    if (s)
      ibp__count(&s->counters, batch_launches, 1);
  }
}

/* Launches what b holds: under `lock` for a batch of the table, by the
 * flusher alone for one handed to it. */
static void flush_now(batch *b) {
  const ibp_driver *d = ibp__driver();
  CUcontext cur = NULL, ignored;
  d->cuCtxGetCurrent(&cur);
  int pushed = cur != b->ctx && d->cuCtxPushCurrent(b->ctx) == CUDA_SUCCESS;
  /* nothing under capture: another thread's global-mode capture must not
   * see the staging's allocation or the slots' queries as unsafe calls */
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  int exchanged = d->cuThreadExchangeStreamCaptureMode &&
                  d->cuThreadExchangeStreamCaptureMode(&mode) == CUDA_SUCCESS;
  /* the tracker's scan of the pages the jobs read comes first: the
   * templates take the dirty bits it marks, and no scanner may still read
   * the regions' tracking when they are released */
  const double scan_ns = scan_held(b);
  /* refresh.c waits for copies between their decision and their launch */
  for (unsigned k = 0; k < b->nregions; k++) {
    ibp_served_region *s = ibp__served(b->regions[k].rec);
    if (s)
      atomic_fetch_add(&s->refresh.launching, 1);
  }
  ibp_batch_timing_run run;
  ibp__batch_time_begin(&b->timed, b->dev, b->ctx, b->stream, b->count, scan_ns,
                        &run);
  CUresult e = CUDA_ERROR_NOT_READY;
  if (compact_jobs_servable(b)) {
    pthread_mutex_lock(&stage_lock);
    e = launch(d, b);
    pthread_mutex_unlock(&stage_lock);
  }
  ibp__batch_time_end(&run, b->stream, e == CUDA_SUCCESS);
  /* what a copy timed on another stream may wait for on the link */
  if (e == CUDA_SUCCESS)
    ibp__streams_queued(b->dev, b->stream, ibp__clock_ns(), b->est_ns,
                        b->est_ns, NULL);
  for (unsigned k = 0; k < b->nregions; k++) {
    ibp_served_region *s = ibp__served(b->regions[k].rec);
    if (s)
      atomic_fetch_sub(&s->refresh.launching, 1);
  }
  if (e != CUDA_SUCCESS && e != CUDA_ERROR_NOT_READY) {
    ibp__warn_first(&warned,
                    "batched launch of %u copies failed (CUresult %d); "
                    "copying them without libibp",
                    b->count, (int)e);
  }
  if (e != CUDA_SUCCESS)
    copy_each(d, b);
  count(b, e);
  if (exchanged)
    d->cuThreadExchangeStreamCaptureMode(&mode);
  if (pushed)
    d->cuCtxPopCurrent(&ignored);
  for (unsigned k = 0; k < b->nregions; k++)
    ibp_region_release(b->regions[k].rec);
  b->count = 0;
  b->exploring = 0;
  b->units = 0;
  b->est_ns = 0;
  b->nregions = 0;
  atomic_fetch_sub_explicit(&held, 1, memory_order_relaxed);
}

/* Waits until the flusher has launched every batch handed to it, and
 * brings the calling thread's clock to the end of the last launch: what
 * follows on a stream comes after it. */
static void drain_handed(void) {
  if (!atomic_load_explicit(&handed, memory_order_acquire))
    return;
  while (atomic_load_explicit(&handed, memory_order_acquire))
    sched_yield();
  pthread_mutex_lock(&flusher_lock);
  const double done = flushed_ns;
  pthread_mutex_unlock(&flusher_lock);
  const double now = ibp__clock_ns();
  if (done > now)
    ibp__clock_charge_us(1e-3 * (done - now));
}

/* Launches what b holds, after whatever was handed to the flusher (lock
 * held): every ordering point comes here. */
static void flush(batch *b) {
  drain_handed(); /* even for an empty batch: it may have handed some */
  if (b && b->count)
    flush_now(b);
}

/* ---- the timer: a program that stops calling ---------------------------- */

/* Every deadline, a batch that received no copy since the last look is
 * launched: between one and two deadlines after its last copy. */
static void *timer_main(void *unused) {
  (void)unused;
  ibp__guard++;
  pthread_mutex_lock(&lock);
  for (;;) {
    double wait_ns = 0;
    batch *b, *tmp;
    HASH_ITER(hh, batches, b, tmp) {
      if (!b->count)
        continue;
      if (b->received == b->timer_saw)
        flush(b);
      else
        b->timer_saw = b->received;
      if (b->count && (wait_ns == 0 || b->deadline_ns < wait_ns))
        wait_ns = b->deadline_ns;
    }
    if (wait_ns == 0) {
      pthread_cond_wait(&wake, &lock);
      continue;
    }
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t at = (uint64_t)t.tv_nsec + (uint64_t)wait_ns;
    t.tv_sec += (time_t)(at / 1000000000ull);
    t.tv_nsec = (long)(at % 1000000000ull);
    pthread_cond_timedwait(&wake, &lock, &t);
  }
  return NULL;
}

static void start_timer(void) {
  if (timer_started)
    return;
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(&wake, &a);
  pthread_condattr_destroy(&a);
  timer_started = ibp__thread_start(timer_main);
}

/* ---- the flusher: launches off the holding thread -------------------------
 *
 * A batch closed while copies keep coming (its deadline, a full job list,
 * an overlapping destination) is handed to the flusher, which launches it
 * -- scan, job list, kernel -- while the application's thread holds the
 * next copies in a fresh job list.  Every ordering point waits for the
 * flusher first (flush), so the launches keep the order of the copies.
 * On the virtual clock the flusher starts a batch when it was handed over
 * (or when it finished the one before), and a thread that waits for it
 * continues from the end of its last launch. */

/* A job list for a batch; NULL on out of memory. */
static held_jobs *jobs_get(void) {
  pthread_mutex_lock(&spare_lock);
  held_jobs *hj = spare_jobs;
  if (hj)
    spare_jobs = hj->next_free;
  pthread_mutex_unlock(&spare_lock);
  return hj ? hj : calloc(1, sizeof *hj);
}

/* Keeps hj, whose batch is done with it, for reuse. */
static void jobs_put(held_jobs *hj) {
  pthread_mutex_lock(&spare_lock);
  hj->next_free = spare_jobs;
  spare_jobs = hj;
  pthread_mutex_unlock(&spare_lock);
}

/* Frees b, empty, keeping its job list for reuse (lock held). */
static void batch_free(batch *b) {
  jobs_put(b->hj);
  free(b);
}

static void *flusher_main(void *unused) {
  (void)unused;
  ibp__guard++;
  pthread_mutex_lock(&flusher_lock);
  for (;;) {
    batch *d = handed_list;
    if (!d) {
      pthread_cond_wait(&flusher_wake, &flusher_lock);
      continue;
    }
    LL_DELETE(handed_list, d);
    pthread_mutex_unlock(&flusher_lock);
    const double now = ibp__clock_ns();
    if (d->handed_ns > now)
      ibp__clock_charge_us(1e-3 * (d->handed_ns - now));
    flush_now(d);
    const double done = ibp__clock_ns();
    jobs_put(d->hj);
    free(d);
    pthread_mutex_lock(&flusher_lock);
    if (done > flushed_ns)
      flushed_ns = done;
    atomic_fetch_sub_explicit(&handed, 1, memory_order_release);
  }
  return NULL;
}

/* Hands b's held copies to the flusher and gives b a fresh job list; else
 * (no flusher, too many handed over, out of memory) launches them here
 * (lock held). */
static void close_batch(batch *b) {
  if (!b->count)
    return;
  if (!flusher_tried) {
    flusher_tried = 1;
    flusher_running = ibp__thread_start(flusher_main);
  }
  batch *d = NULL;
  held_jobs *hj = NULL;
  if (flusher_running &&
      atomic_load_explicit(&handed, memory_order_relaxed) < HANDED_MAX &&
      (d = malloc(sizeof *d)) && (hj = jobs_get())) {
    *d = *b; /* the held copies, their regions' references and job list */
    d->handed_ns = ibp__clock_ns();
    b->timed.rec = NULL; /* d's now */
    b->hj = hj;
    b->count = 0; /* `held` still counts d until the flusher is done */
    b->exploring = 0;
    b->units = 0;
    b->est_ns = 0;
    b->nregions = 0;
    pthread_mutex_lock(&flusher_lock);
    atomic_fetch_add_explicit(&handed, 1, memory_order_relaxed);
    LL_APPEND(handed_list, d); /* at most HANDED_MAX long */
    pthread_cond_signal(&flusher_wake);
    pthread_mutex_unlock(&flusher_lock);
    return;
  }
  free(d);
  flush(b);
}

/* ---- holding --------------------------------------------------------------
 */

static batch *batch_for(const ibp_driver *d, CUstream s, CUcontext ctx, int dev,
                        const ibp_profile *p) {
  batch_key k = key_of(s, ctx);
  batch *b = find(k);
  if (b)
    return b;
  b = calloc(1, sizeof *b);
  if (!b || !(b->hj = jobs_get())) {
    free(b);
    return NULL;
  }
  b->key = k;
  b->ctx = ctx;
  b->stream = s;
  b->dev = dev;
  b->blocking = blocking(d, s);
  b->deadline_ns = 1e3 * p->batch_deadline_us;
  HASH_ADD(hh, batches, key, sizeof k, b);
  atomic_store_explicit(&batched, 1, memory_order_relaxed);
  return b;
}

/* Index of r in b's regions (taking a reference when new); -1 when full. */
static int region_index(batch *b, ibp_region_rec *r) {
  for (unsigned k = 0; k < b->nregions; k++)
    if (b->regions[k].rec == r)
      return (int)k;
  if (b->nregions == MAX_REGIONS)
    return -1;
  ibp_region_acquire(r);
  b->regions[b->nregions] = (held_region){.rec = r};
  return (int)b->nregions++;
}

/* Whether [dst, dst+n) overlaps a held copy's destination.  The copies of
 * one launch run in any order, so a later copy to the same bytes must not
 * join the batch of an earlier one: stream order says it wins.  Gathers
 * write destinations in increasing (or decreasing) order, which the span
 * of the held destinations decides at once; other orders are compared
 * copy by copy, up to OVERLAP_SCAN_MAX held copies (then: taken as
 * overlapping). */
static int overlaps(const batch *b, CUdeviceptr dst, uint64_t n) {
  if (!b->count || dst >= b->env_hi || dst + n <= b->env_lo)
    return 0;
  if (b->count > OVERLAP_SCAN_MAX)
    return 1;
  for (uint32_t j = 0; j < b->count; j++)
    if (dst < b->hj->jobs[j].dst + b->hj->jobs[j].length &&
        b->hj->jobs[j].dst < dst + n)
      return 1;
  return 0;
}

/* Launches what is held on the streams b's stream synchronises with
 * (lock held). */
static void flush_others(batch *b) {
  batch *o, *tmp;
  HASH_ITER(hh, batches, o, tmp) {
    if (o != b && o->count && o->ctx == b->ctx && o->blocking &&
        (b->stream == CU_STREAM_LEGACY || o->stream == CU_STREAM_LEGACY)) {
      o->cut = 1;
      flush(o);
    }
  }
}

/* What comes before copy c in stream order and may write its bytes goes
 * first (lock held): what the streams b's stream synchronises with hold
 * (the legacy stream and the blocking streams are ordered with each
 * other), then, for c held in b, b's batch closed when it overlaps c or
 * its deadline passed (on the device's clock, every 16th copy); for c
 * alone (the driver's copy), b's held copies launched when they overlap
 * it (rows of a gather do not: the batch is left whole), else the batches
 * handed to the flusher. */
static void make_way(batch *b, const ibp_copy *c, int held_in_b) {
  if (b->blocking &&
      atomic_load_explicit(&held, memory_order_relaxed) > (b->count ? 1u : 0u))
    flush_others(b);
  if (!held_in_b) {
    if (overlaps(b, c->dst, c->bytes))
      flush(b);
    else
      drain_handed();
  } else if (b->count && ((b->count % 16 == 0 &&
                           ibp__clock_ns() - b->first_ns >= b->deadline_ns) ||
                          overlaps(b, c->dst, c->bytes))) {
    close_batch(b);
  }
}

/* The routes' priors for copy x held in b, a batch of n (or alone), kept
 * in *a for the copies like it that follow (serve/route/table.h). */
static void answer(gate_answer *a, const batch *b, const ibp_route_copy *x,
                   uint64_t pcie, uint32_t n, double scan_ns) {
  const ibp_copy *c = x->c;
  const ibp_served_region *s = x->s;
  const ibp_kernel_plan *pl = &s->dev[b->dev].plan;
  *a = (gate_answer){.region = x->r,
                     .bytes = c->bytes,
                     .pcie = pcie,
                     .copies = n,
                     .hold_only = c->hold_only,
                     .entries = c->entries,
                     .scan_ns = scan_ns};
  a->g = (ibp_gate_copy){
      c->bytes,
      pcie + IBP_ROUTE_SECTOR_SLACK,
      ibp_kernels_decode_sms(pl->grid, pl->block, (unsigned)x->p->sms),
      ibp__gate_units(s->geometry.tensor_bytes, s->geometry.tensors,
                      (uintptr_t)c->src - x->r->base, c->bytes),
      s->geometry.tensor_bytes,
      s->dev[b->dev].args.stages != NULL};
  /* x as its batch sees it */
  static const ibp_route_copy none;
  ibp_route_copy y = none;
  y.c = c;
  y.r = x->r;
  y.s = x->s;
  y.slot = &x->s->dev[b->dev];
  y.p = x->p;
  y.ctx = b->ctx;
  y.dev = b->dev;
  y.mode = c->hold_only ? IBP_CLASS_APP_BATCH : IBP_CLASS_BATCHED;
  y.g = a->g;
  /* alone, a GPU route syncs the tracker over its span first */
  y.sync_ns =
      ibp__track_sync_model_ns(&x->s->track, (uintptr_t)c->src, c->bytes);
  y.batch_n = n;
  y.scan_ns = scan_ns;
  ibp__route_priors(&y, a->prior);
  /* the model's times, for the statistics' saving: held (before the
   * margin and the scan: the batched route's prior made it), and alone
   * (the faster route alone) */
  a->batched = y.batched_ns;
  a->alone = 0;
  for (int k = 0; k < IBP_ROUTES; k++) {
    const double t = ibp__choose_model_ns(&a->prior[k]);
    if (k != IBP_ROUTE_BATCHED && t > 0 && (a->alone == 0 || t < a->alone))
      a->alone = t;
  }
}

/* Stored bytes as the batch's decision weighs them: rounded up to a 64th
 * of their power of two.  Counted exactly (a written KV cache's copies),
 * they differed copy by copy, and each copy's priors were made again and
 * assessed again by the chooser (on the H200, kv_window's copies spent
 * 1.1 us each in the batch's decision alone); the exact bytes are counted
 * at the flush. */
static uint64_t weighed(uint64_t pcie) {
  if (pcie < 128)
    return pcie;
  /* a 64th of pcie's power of two: 2^(floor(log2 pcie) - 6) */
  const uint64_t step = 1ull << (63 - __builtin_clzll(pcie) - 6);
  return (pcie + step - 1) / step * step;
}

/* What the batch's priors for copy x were made of (answer a, and what
 * it took from the copy itself: where it starts in its tensor, which sets
 * the tensors it spans; the region's recompressions) and the routes
 * timable: a hold run's key. */
static uint64_t hold_key(const gate_answer *a, const ibp_route_copy *x,
                         unsigned timable) {
  const uint64_t R =
      x->s->geometry.tensor_bytes ? x->s->geometry.tensor_bytes : 1;
  const uint64_t off = ((uintptr_t)x->c->src - x->r->base) % R;
  const uint64_t runs =
      atomic_load_explicit(&x->s->refresh.runs, memory_order_relaxed);
  uint64_t k = (uint64_t)(uintptr_t)a->region * 0x9E3779B97F4A7C15ull;
  k ^= (off + 1) * 0x85EBCA77C2B2AE63ull;
  k ^= (runs + 1) * 0xFF51AFD7ED558CCDull;
  k ^= (a->bytes + 1) * 0xC2B2AE3D27D4EB4Full;
  k ^= (a->pcie + 1) * 0x165667B19E3779F9ull;
  k ^= ((uint64_t)a->copies << 2 | (uint64_t)a->hold_only << 1) *
       0x27D4EB2F165667C5ull;
  k ^= (a->entries + 1) * 0x94D049BB133111EBull;
  uint64_t scan;
  memcpy(&scan, &a->scan_ns, sizeof scan);
  return k ^ scan ^ (uint64_t)timable << 56;
}

/* Ordering points per stream (ibp__batch_order), whichever thread's:
 * ORDER_SLOTS counters by the stream's handle (the legacy and per-thread
 * streams' with their context's), the last for IBP_BATCH_ALL.  Two
 * streams may share a counter: each one's runs then end at the other's
 * ordering points too (a batch expected smaller than it is, never a
 * copy held past an ordering point: the counts move no launch). */
static _Atomic uint64_t order_count[ORDER_SLOTS + 1];

static int per_context(CUstream s) {
  return s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

static unsigned order_slot(CUstream s, CUcontext ctx) {
  if (s == IBP_BATCH_ALL)
    return ORDER_SLOTS;
  uint64_t h = (uint64_t)(uintptr_t)s * 0x9E3779B97F4A7C15ull;
  if (per_context(s))
    h ^= (uint64_t)(uintptr_t)ctx * 0xC2B2AE3D27D4EB4Full;
  return (unsigned)(h >> (64 - ORDER_BITS));
}

static uint64_t order_read(CUstream s, CUcontext ctx) {
  return atomic_load_explicit(&order_count[order_slot(s, ctx)],
                              memory_order_relaxed);
}

/* Whether an ordering point since b's last offer ended b's run: one on
 * b's stream, everywhere, or, for a blocking stream, on the legacy stream;
 * or b's held copies were launched by another stream's ordering point or
 * copy (b->cut: a blocking stream's launches what the legacy stream holds,
 * and the legacy stream's what the blocking streams hold, flush_others
 * alike). */
static int run_ordered(batch *b) {
  uint64_t seen =
      order_read(b->stream, b->ctx) + order_read(IBP_BATCH_ALL, NULL);
  if (b->blocking && b->stream != CU_STREAM_LEGACY)
    seen += order_read(CU_STREAM_LEGACY, b->ctx);
  if (seen == b->order_seen && !b->cut)
    return 0;
  b->order_seen = seen;
  b->cut = 0;
  return 1;
}

/* Whether a copy of its own call from region s may go alone from b at no
 * cost to the batches (lock held): b holds nothing, nothing handed to the
 * flusher waits for its launch (the copy's ordering point would wait for
 * it) -- and s is not compact: its copies are libibp's whatever the
 * driver's cost, which going alone would explore for nothing
 * (emb_gather's compact line on a100-pcie4: 2.594 -> 2.606 without). */
static int alone_free(const batch *b, const ibp_served_region *s) {
  return !b->count && !atomic_load_explicit(&handed, memory_order_acquire) &&
         !ibp__compact_active(s);
}

/* Holds copy x in b when the gate prefers it there (lock held; x on b's
 * device: x->slot, x->p; `pcie`: its stored bytes, estimated).  0 when
 * held; 2: alone; 3: the driver's copy, timed. */
static int hold_locked(batch *b, ibp_route_copy *x, uint64_t pcie) {
  const ibp_copy *c = x->c;
  pcie = weighed(pcie);
  ibp_region_rec *r = x->r;
  ibp_served_region *s = x->s;
  const ibp_profile *p = x->p;
  /* the copies' rate on this stream within a run, and its runs
   * (batch_runs.h): a run is the copies between two of the stream's
   * ordering points (each launches what is held: a batch holds one run at
   * most) */
  const double held_cpu_ns =
      1e3 * ((c->hold_only ? 0 : p->runtime_call_us) + p->ibp_hold_us);
  /* with the copies a quiet run left to the driver since the last offer
   * (serve/choose/chooser.h): offered in effect, each alone */
  b->runs.own_ns += x->skipped_own_ns;
  /* a copy onto a held copy's destination ends the run too, and joins
   * none of the held copies: their batch launches before it (make_way);
   * so does one onto the last copy's, held or gone alone -- a buffer
   * copied again and again (bandwidthTest) was held for a batch of 16,
   * then of 2, launched alone each time */
  const int after_held = b->count && overlaps(b, c->dst, c->bytes);
  const int on_last = b->last_bytes && c->dst < b->last_dst + b->last_bytes &&
                      b->last_dst < c->dst + c->bytes;
  b->last_dst = c->dst;
  b->last_bytes = c->bytes;
  const int ended = run_ordered(b) | after_held | on_last;
  const uint64_t before = after_held ? 0 : b->count; /* held with it */
  /* the choice: this copy in a batch of the copies expected, at least
   * those held; rounded down to a power of two, so that the answer can be
   * kept -- or alone (substitute.c: kernel or driver, whichever is
   * faster) */
  const double expect =
      ibp__batch_runs_offer(&b->runs, ibp__clock_ns(), 1 + x->skipped, ended,
                            held_cpu_ns, b->deadline_ns, MAX_JOBS);
  x->in_run = 1; /* its own call to the driver ends no run */
  uint32_t n = expect >= MAX_JOBS ? MAX_JOBS
               : expect < 1       ? 1
                                  : (uint32_t)expect;
  if (before + c->arrive > n) /* those held and those arriving with it */
    n = before + c->arrive > MAX_JOBS ? MAX_JOBS
                                      : (uint32_t)(before + c->arrive);
  if (before + 1 > n)
    n = (uint32_t)before + 1;
  n = 1u << (31 - __builtin_clz(n));
  /* the tracker's scan at the flush: what it took at the region's last
   * batched launch (userfaultfd; nothing for mprotect) */
  const double scan_ns =
      ibp__track_scans(&s->track)
          ? atomic_load_explicit(&s->batch_scan_ns, memory_order_relaxed)
          : 0;
  gate_answer *a = &b->answer;
  if (a->region != r || a->bytes != c->bytes || a->pcie != pcie ||
      a->copies != n || a->hold_only != c->hold_only ||
      a->entries != c->entries || a->scan_ns != scan_ns)
    answer(a, b, x, pcie, n, scan_ns);
  ibp_route_cost prior[IBP_ROUTES];
  memcpy(prior, a->prior, sizeof prior);
  /* the chooser: held, or alone.  Alone, an entry of the application's
   * batch is the driver's copy, timed here when the chooser asks for it; a
   * copy of its own call goes to the single copy's decision (driver,
   * kernel or staged path, whose timed copies this class learns from as
   * well: serve/choose/choose.h, keys) */
  ibp_device_slot *slot = x->slot;
  ibp_chooser *ch = ibp__chooser_of(slot);
  const unsigned cls = ibp__choose_class_index(
      c->bytes, 0, c->hold_only ? IBP_CLASS_APP_BATCH : IBP_CLASS_BATCHED);
  /* the driver's copy is timed and explored here for an entry of the
   * application's batch (its one way alone) -- with the driver's part of
   * its cuMemcpyBatchAsync, whole (batch_route.h, ibp_call_timing), a row
   * of a 2D copy alone; a copy of its own call goes alone when explored
   * (the single copy's decision times it, and the key's classes learn
   * from it) only where that breaks no held batch and waits for no launch
   * (alone_free): explored whenever, each driver's copy broke up the held
   * batch around it (emb_gather under truth = prior: 11 explorations, 203
   * copies to the driver, 4 % slower; with the batch left held, still
   * 1-2 %: each exploration waits for the batches handed to the flusher,
   * make_way) -- never explored, a driver far cheaper than modelled was
   * never found out (emb_gather's rows under h100-pcie5 with the driver's
   * copy call at 0.05 us: batched at 0.38 of the driver's time) */
  const unsigned timable =
      1u << IBP_ROUTE_BATCHED |
      (c->hold_only || alone_free(b, s) ? 1u << IBP_ROUTE_DRIVER : 0);
  /* rows alike the last ones the class held quietly: held undecided (a
   * hold run, serve/choose/chooser.h) */
  const uint64_t key = hold_key(a, x, timable);
  /* an entry of an application's call whose driver part explores the
   * driver for this class: it joins that part, decided (batch_route.h) */
  const int joins = ibp__call_joins(c->call, x, cls);
  ibp_choice q;
  ibp_route go;
  double est;
  if (!joins && ibp__chooser_quiet_take(ch, cls, key, c->stream, 0, &est)) {
    memset(&q, 0, sizeof q);
    q.route = go = IBP_ROUTE_BATCHED;
    q.est_ns[IBP_ROUTE_BATCHED] = est;
    q.copies = prior[IBP_ROUTE_BATCHED].copies;
  } else {
    go = ibp__chooser_decide(s, slot, ch, p, cls, prior, timable, 0, &q);
    if (go == IBP_ROUTE_BATCHED && joins && !q.explore) {
      go = IBP_ROUTE_DRIVER;
      q.timed = 0; /* the call's driver part is timed, whole */
    } else if (go == IBP_ROUTE_BATCHED) {
      ibp__chooser_hold_open(ch, cls, &q, key, c->stream);
    }
  }
  /* the batched route explored is a batch, not a copy: while the batch
   * that holds the exploration is open, the copies of its class that the
   * class would send alone join it, up to the smallest batch alike the one
   * the class expects whose copies cost nearly as little
   * (ibp_route_cost.explores, serve/route/route_batched.c: a quarter of it,
   * IBP_CHOOSE_LIKE, or more
   * -- what it measures stands for the class's batches, at a fraction of
   * the cost where it measures worse; the chooser charges the exploration
   * for them all) -- a batch of one measures a launch's fixed
   * costs, never the batch its estimate is of (under driver calls 4x
   * dearer, kv_blocks' batches of 64 were explored as batches of one, and
   * never taken: 0.26 of the best route's time).  The batch it stood for is
   * the one expected when it was taken: an expectation that shrinks
   * meanwhile (the rate sampled again) must not cut it short (under driver
   * calls 4x dearer, kv_offload's explored batches of 16 ended at 2, unlike
   * what the class expected).  The entries of an application's batch call
   * likewise: the whole call explored cost 2.5x its model where SM reads
   * were half as fast (kv_blocks: 8 % of a 17-step run) */
  if (!b->count)
    b->exploring = 0;
  if (go != IBP_ROUTE_BATCHED && !q.explore && !after_held &&
      b->exploring == cls + 1 && b->exploring_ch == ch && b->timed.rec == r &&
      b->timed.cls == cls && b->count < b->exploring_copies) {
    go = IBP_ROUTE_BATCHED;
    q.timed = 0;   /* the exploration's launch is timed, whole */
    if (q.probe) { /* a set-up probe of the driver's: not made */
      ibp__chooser_untimed(ch, cls, &q);
      q.probe = 0;
    }
  } else if (go == IBP_ROUTE_BATCHED && q.explore) {
    b->exploring = cls + 1;
    b->exploring_ch = ch;
    b->exploring_copies = prior[IBP_ROUTE_BATCHED].explores;
  }
  if (go != IBP_ROUTE_BATCHED) {
    /* refused for the scan alone: let the figure fade, so that one slow
     * scan (a busy host) does not end batching for good -- the next
     * batched launch measures it again */
    const double unscanned =
        q.est_ns[IBP_ROUTE_BATCHED] - scan_ns / n / IBP_BATCH_MARGIN;
    if (scan_ns > 0 && unscanned < q.est_ns[go]) {
      /* with the copies alike a quiet run refused since (x->skipped) */
      const uint64_t refused = 1 + x->skipped;
      const uint64_t was = atomic_fetch_add_explicit(
          &s->batch_scan_refused, refused, memory_order_relaxed);
      uint64_t steps =
          (was + refused) / SCAN_FADE_EVERY - was / SCAN_FADE_EVERY;
      double fade = scan_ns;
      while (steps-- && fade > 1e-3 * scan_ns)
        fade *= SCAN_FADE;
      if (fade < scan_ns)
        atomic_store_explicit(&s->batch_scan_ns, fade, memory_order_relaxed);
    }
    /* its calls as measured: under driver calls 4x dearer than modelled,
     * copies sent alone at the model's cost made the application's own
     * time between copies look 4x longer, and the batch expected 4 copies
     * of kv_offload's 16 */
    b->runs.own_ns += q.cpu_ns > 0 ? q.cpu_ns : prior[go].cpu_ns;
    /* for a quiet run of the copies alike that go to the driver
     * (substitute.c): this class's decision, when it was a quiet one */
    x->batch_cls = cls;
    x->alone = q.timed || q.explore ? -1 : (int)go;
    x->time_alone = q.explore && !c->hold_only;
    x->alone_own_ns = q.cpu_ns > 0 ? q.cpu_ns : prior[go].cpu_ns;
    if (go == IBP_ROUTE_DRIVER)
      ibp__call_decided(c->call); /* counted for its call's timing */
    if (go == IBP_ROUTE_DRIVER && q.timed && c->call) {
      /* an entry of the application's call: timed with the call's driver
       * part, never alone (a lone copy is not what an entry costs) */
      if (!ibp__call_want_timing(c->call, x, cls, &q))
        ibp__chooser_untimed(ch, cls, &q);
    } else if (go == IBP_ROUTE_DRIVER && q.timed && c->hold_only) {
      make_way(b, c, 0);
      if (ibp__batch_time_alone(x, cls, &q, prior) == 0)
        return 3; /* counted by the caller */
    } else {
      ibp__chooser_untimed(ch, cls, &q);
    }
    return 2; /* alone: the single copy's decision, or the driver's */
  }
  b->runs.own_ns += held_cpu_ns;
  make_way(b, c, 1);
  int k = b->count < MAX_JOBS ? region_index(b, r) : -1;
  if (k < 0) {
    close_batch(b);
    k = region_index(b, r);
  }
  /* its GPU share: the CPU's part was spent while it was held */
  const ibp_route_cost *m = &prior[IBP_ROUTE_BATCHED];
  if (m->cpu_ns + m->gpu_ns > 0)
    b->est_ns +=
        q.est_ns[IBP_ROUTE_BATCHED] * m->gpu_ns / (m->cpu_ns + m->gpu_ns);
  const uint64_t off = (uintptr_t)c->src - r->base;
  ibp_batch_job *job = &b->hj->jobs[b->count];
  *job =
      (ibp_batch_job){off, c->dst, b->units, (uint32_t)c->bytes, (uint32_t)k};
  b->units += ibp_kernels_job_units(job, &s->dev[b->dev].args);
  held_region *h = &b->regions[k];
  h->copies++;
  h->bytes += c->bytes;
  /* the model's saving (none for a copy held to measure the batch) */
  const double saved = a->alone - a->batched - scan_ns / n;
  h->saved_ns += saved > 0 ? saved : 0;
  if (q.timed) /* after the close above: its batch holds r */
    ibp__batch_want_timing(&b->timed, r, slot, cls, &q, &a->g, !c->hold_only);
  b->received++;
  /* its pages, for the tracker's scan; a whole share goes to the
   * scanners at once (serve/batch/scan_ahead.h) */
  ibp_scan_share *sh = &b->hj->shares[b->count / IBP_SCAN_SHARE];
  if (ibp__track_scans(&s->track)) {
    const uint64_t at = r->base + off;
    sh->runs[sh->nruns++] =
        (ibp_scan_run){&s->track, at / 4096, (at + c->bytes - 1) / 4096};
  }
  if (b->count % IBP_SCAN_SHARE == IBP_SCAN_SHARE - 1) {
    sh->held_ns = ibp__clock_ns();
    if (sh->nruns)
      ibp__scan_post(sh);
  }
  if (!b->count || c->dst < b->env_lo)
    b->env_lo = c->dst;
  if (!b->count || c->dst + c->bytes > b->env_hi)
    b->env_hi = c->dst + c->bytes;
  if (b->count++ == 0) {
    b->first_ns = ibp__clock_ns();
    atomic_fetch_add_explicit(&held, 1, memory_order_relaxed);
    start_timer();
    pthread_cond_signal(&wake);
  }
  return 0;
}

static int usable(const ibp_copy *c) {
  return !ibp__cfg.no_batch && !c->sync && c->bytes <= UINT32_MAX &&
         c->stream != CU_STREAM_PER_THREAD;
}

static void held_one(const ibp_route_copy *x) {
  ibp__nvtx_copy_begin(x->r->name, x->c->bytes); /* serve/nvtx.h: the hold */
  ibp__nvtx_copy_end();
  ibp__clock_charge_us(x->p->ibp_hold_us);
}

int ibp__batch_offer(ibp_route_copy *x, uint64_t pcie, CUdeviceptr alloc,
                     size_t alloc_bytes) {
  const ibp_copy *c = x->c;
  const ibp_driver *d = ibp__driver();
  if (!usable(c) || !d)
    return 1;
  pthread_mutex_lock(&lock);
  batch *b = staging_failed(x->ctx)
                 ? NULL
                 : batch_for(d, c->stream, x->ctx, x->dev, x->p);
  int rc = 1;
  if (b && b->dev == x->dev) {
    b->dst_lo = alloc;
    b->dst_hi = alloc + alloc_bytes;
    rc = hold_locked(b, x, pcie);
  }
  pthread_mutex_unlock(&lock);
  if (rc == 0)
    held_one(x);
  return rc;
}

int ibp__batch_hold_more(ibp_route_copy *x) {
  const ibp_copy *c = x->c;
  ibp_served_region *s = x->s;
  if (!atomic_load_explicit(&held, memory_order_relaxed) || !usable(c))
    return 1;
  const ibp_driver *d = ibp__driver();
  CUcontext ctx = NULL;
  if (!s || !d || atomic_load_explicit(&s->kernel_args, memory_order_relaxed) ||
      ibp_region_state_get(x->r) != IBP_REGION_READY ||
      d->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
    return 1;
  const uint64_t pcie = ibp__gate_stored_estimate(s, c->bytes);
  if (!pcie)
    return 1; /* the gate still judges the region's fit: serve_region */
  int rc = 1;
  pthread_mutex_lock(&lock);
  batch *b = find(key_of(c->stream, ctx));
  /* what serve_region checked for this batch's first copy still holds: no
   * capture began and no memory was freed since (ordering points) */
  if (b && b->count && b->ctx == ctx && c->dst >= b->dst_lo &&
      c->bytes <= b->dst_hi - c->dst && c->dst < b->dst_hi &&
      ibp__device_state(s, (unsigned)b->dev) == IBP_DEVICE_READY &&
      s->dev[b->dev].ctx == ctx && (x->p = ibp__gate_profile(b->dev))) {
    x->ctx = ctx;
    x->dev = b->dev;
    x->slot = &s->dev[b->dev];
    rc = hold_locked(b, x, pcie);
  }
  pthread_mutex_unlock(&lock);
  if (rc == 0)
    held_one(x);
  return rc;
}

/* ---- ordering points ----------------------------------------------------- */

/* Launches what ctx's blocking streams hold (the legacy stream's ordering
 * point or copy): their runs end (run_ordered). */
static void cut_blocking(CUcontext ctx) {
  batch *b, *tmp;
  HASH_ITER(hh, batches, b, tmp) {
    if (b->count && b->ctx == ctx && b->blocking) {
      b->cut = 1;
      flush(b);
    }
  }
}

/* The current context where s is one every context has, else NULL. */
static CUcontext context_of(CUstream s) {
  CUcontext ctx = NULL;
  const ibp_driver *d = per_context(s) ? ibp__driver() : NULL;
  if (d && d->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS)
    ctx = NULL;
  return ctx;
}

int ibp__batch_order(CUstream s) {
  if (s != IBP_BATCH_WAIT &&
      atomic_load_explicit(&batched, memory_order_relaxed))
    atomic_fetch_add_explicit(&order_count[order_slot(s, context_of(s))], 1,
                              memory_order_relaxed);
  return ibp__batch_order_copy(s);
}

uint64_t ibp__batch_order_mark(CUstream s, CUcontext ctx) {
  if (!atomic_load_explicit(&batched, memory_order_relaxed))
    return 0;
  return order_read(s, ctx) + order_read(IBP_BATCH_ALL, NULL);
}

int ibp__batch_order_copy(CUstream s) {
  if (!atomic_load_explicit(&held, memory_order_relaxed))
    return 0;
  if (s == IBP_BATCH_WAIT)
    s = IBP_BATCH_ALL;
  const ibp_driver *d = ibp__driver();
  if (!d)
    return 0;
  ibp__guard++;
  pthread_mutex_lock(&lock);
  if (s == IBP_BATCH_ALL) {
    batch *b, *tmp;
    HASH_ITER(hh, batches, b, tmp) flush(b);
  } else {
    CUcontext ctx = NULL;
    d->cuCtxGetCurrent(&ctx);
    /* a held copy on the legacy stream never coexists with one on a
     * blocking stream of its context (hold_locked), so the order of these
     * launches is free */
    batch *own = find(key_of(s, ctx));
    flush(own);
    /* the others' runs end here too, counted or not (a copy of s's run
     * launches them as well) */
    if (s == CU_STREAM_LEGACY)
      cut_blocking(ctx);
    else if (own ? own->blocking : blocking(d, s)) {
      batch *legacy = find(key_of(CU_STREAM_LEGACY, ctx));
      if (legacy && legacy->count) {
        legacy->cut = 1;
        flush(legacy);
      }
    }
  }
  pthread_mutex_unlock(&lock);
  ibp__guard--;
  return 1;
}

void ibp__batch_stream_end(CUstream s) {
  if (s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD ||
      s == IBP_BATCH_ALL || s == IBP_BATCH_WAIT)
    return;
  ibp__batch_order(s);
  ibp__guard++;
  pthread_mutex_lock(&lock);
  batch *b = find(key_of(s, NULL));
  if (b) {
    HASH_DEL(batches, b);
    batch_free(b);
  }
  pthread_mutex_unlock(&lock);
  ibp__guard--;
}

/* Whether context c (of device dev) ends with ctx (NULL: the primary
 * context of device `of`). */
static int ending(CUcontext c, int dev, CUcontext ctx, int of) {
  return ctx ? c == ctx : dev == of;
}

void ibp__batch_context_end(CUcontext ctx, int dev) {
  const ibp_driver *d = ibp__driver();
  if (!d)
    return;
  ibp__guard++;
  pthread_mutex_lock(&lock);
  drain_handed();
  batch *b, *tmp;
  HASH_ITER(hh, batches, b, tmp) {
    if (ending(b->ctx, b->dev, ctx, dev)) {
      flush(b);
      HASH_DEL(batches, b);
      batch_free(b);
    }
  }
  pthread_mutex_lock(&stage_lock);
  staging *st, *next;
  HASH_ITER(hh, stagings, st, next) {
    if (ending(st->ctx, st->device, ctx, dev)) { /* its end frees its memory */
      HASH_DEL(stagings, st);
      free(st);
    }
  }
  pthread_mutex_unlock(&stage_lock);
  pthread_mutex_unlock(&lock);
  ibp__guard--;
}

void ibp__batch_after_fork_child(void) {
  lock = (pthread_mutex_t)PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
  pthread_cond_init(&wake, NULL);
  batches = NULL; /* the parent's: left, not freed (their regions too) */
  stagings = NULL;
  atomic_store(&held, 0);
  timer_started = 0;
  pthread_mutex_init(&flusher_lock, NULL);
  pthread_mutex_init(&stage_lock, NULL);
  pthread_mutex_init(&spare_lock, NULL);
  pthread_cond_init(&flusher_wake, NULL);
  handed_list = NULL; /* left, not launched */
  atomic_store(&handed, 0);
  flushed_ns = 0;
  flusher_tried = flusher_running = 0;
  ibp__scan_after_fork_child();
}
