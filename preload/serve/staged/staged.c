/* The staged path (serve/staged/staged.h; docs/ARCHITECTURE.md "Staged
 * copies").
 *
 * A copy's tensors are cut into chunks whose streams fit one buffer of the
 * context's ring: a chunk's window is the shadow bytes from its first
 * stream (rounded down to 128 bytes, as the kernel's reads are) to its
 * last stream's end.  Streams a refresh moved elsewhere widen the window;
 * one that would not fit a buffer starts the next chunk, and a stream
 * larger than a buffer is read over PCIe as the zero-copy kernel reads it.
 * Tensors read raw (stored raw, written, the region's tail) take no room.
 *
 * Per chunk, on libibp's own stream for the caller's stream (non-blocking:
 * the legacy stream does not wait for it; copy_stream): wait for the buffer's
 * last decode, copy the window, record `ready`; on the caller's stream: wait
 * for `ready`, launch the decode reading the window, record `free`.  The copies
 * need not wait for the caller's stream -- the shadow does not change while
 * copies are in flight: a refresh first waits for every copy between its
 * decision and its launch (`launching`, held by the caller), then for the
 * context's work, and no copy is staged while one runs -- so chunk k+1's copy
 * overlaps chunk k's decode, and a copy's first chunk the decode of the copy
 * before it.
 *
 * One mutex guards the rings and every staged submission (a few driver
 * calls per chunk). */
#include "serve/staged/staged.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "base/base.h"
#include "base/clock.h"
#include "base/driver.h"
#include "base/log.h"

#define BUFFER_MAX (4ull << 20) /* chunks of at most 4 MiB of streams */
#define BUFFER_MIN (64ull << 10)
#define BUFFERS_MIN 2u
#define BUFFERS_MAX 16u
#define WINDOW_ALIGN 128u /* the kernel's reads are line-aligned */
#define CALLERS_MAX 64u   /* caller streams with a copy stream, per ring */
#define LAST_CHUNK (512u << 10) /* the smallest chunk of a long copy's end */
/* A decode is timed only when the model gives it at least this long, so
 * that a launch's own latency does not pass for its decode (us). */
#define PROBE_MIN_US 5.0
/* After a timed decode, the next waits until its cost -- two event
 * records, a query and the reading, PROBE_CALLS driver calls -- is this
 * share of the time passed (device clock): the data's decode rate changes
 * slowly, but a run of a few milliseconds must see it. */
#define PROBE_CALLS 4.0
#define PROBE_SHARE 0.005

/* A caller's stream as the ring tells them apart: the per-thread default
 * stream is another stream in every thread.  Hashed as bytes. */
typedef struct caller_key {
  CUstream stream;
  pthread_t thread; /* for CU_STREAM_PER_THREAD; else zero */
} caller_key;

/* libibp's copy stream for one caller stream: a copy stream never waits
 * for another caller stream's work. */
typedef struct caller {
  caller_key key;
  CUstream copy;
  UT_hash_handle hh;
} caller;

typedef struct buffer {
  CUdeviceptr dev;  /* bytes + IBP_STAGED_PAD */
  CUevent ready;    /* recorded after its copy, on a copy stream */
  CUevent free;     /* recorded after the decode that read it */
  caller_key owner; /* the caller stream of that decode */
  int used;         /* `free` was recorded */
  int dead;         /* a copy into it may still be queued, or `free` could
                       not be recorded: never reused */
} buffer;

typedef struct ring {
  CUcontext ctx;
  int device;
  int failed; /* could not be set up, or every buffer dead: the path is
                 off in ctx */
  caller *callers;
  unsigned ncallers;
  CUdeviceptr mem;
  uint64_t bytes; /* per buffer, without the pad */
  unsigned n, next;
  buffer buf[BUFFERS_MAX];
  UT_hash_handle hh;
} ring;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static ring *rings;
static int warned;

/* ---- the rings ----------------------------------------------------------- */

static caller_key key_of(CUstream s) {
  caller_key k;
  memset(&k, 0, sizeof k); /* hashed as bytes */
  k.stream = s;
  if (s == CU_STREAM_PER_THREAD)
    k.thread = pthread_self();
  return k;
}

static int same_caller(const caller_key *a, const caller_key *b) {
  return memcmp(a, b, sizeof *a) == 0;
}

/* The copy stream for caller stream k (created on first use); NULL when
 * CALLERS_MAX are known or it cannot be created. */
static CUstream copy_stream(const ibp_driver *d, ring *g, const caller_key *k) {
  caller *e = NULL;
  HASH_FIND(hh, g->callers, k, sizeof *k, e);
  if (e)
    return e->copy;
  if (g->ncallers >= CALLERS_MAX || !(e = calloc(1, sizeof *e)))
    return NULL;
  if (d->cuStreamCreate(&e->copy, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    free(e);
    return NULL;
  }
  e->key = *k;
  HASH_ADD(hh, g->callers, key, sizeof e->key, e);
  g->ncallers++;
  return e->copy;
}

/* Releases what was set up; the ring stays in `rings` (its hash handle),
 * failed. */
static void ring_release(const ibp_driver *d, ring *g) {
  for (unsigned i = 0; i < BUFFERS_MAX; i++) {
    if (g->buf[i].ready)
      d->cuEventDestroy(g->buf[i].ready);
    if (g->buf[i].free)
      d->cuEventDestroy(g->buf[i].free);
  }
  caller *e, *tmp;
  HASH_ITER(hh, g->callers, e, tmp) {
    HASH_DEL(g->callers, e);
    d->cuStreamDestroy(e->copy);
    free(e);
  }
  if (g->mem)
    d->cuMemFree(g->mem);
  memset(g->buf, 0, sizeof g->buf);
  g->ncallers = 0;
  g->mem = 0;
  g->n = g->next = 0;
  g->bytes = 0;
  g->failed = 1;
}

/* Buffers for IBP_STAGING bytes: as many of at most BUFFER_MAX as fit, 2
 * to 16; 0 when they would be smaller than BUFFER_MIN (config/ refuses
 * such a size). */
static unsigned buffers_for(uint64_t staging, uint64_t *bytes) {
  uint64_t n = staging / BUFFER_MAX;
  n = n < BUFFERS_MIN ? BUFFERS_MIN : n > BUFFERS_MAX ? BUFFERS_MAX : n;
  *bytes = (staging / n) & ~(uint64_t)(WINDOW_ALIGN - 1);
  if (*bytes > BUFFER_MAX)
    *bytes = BUFFER_MAX;
  return *bytes >= BUFFER_MIN ? (unsigned)n : 0;
}

static int ring_setup(const ibp_driver *d, ring *g) {
  g->n = buffers_for(ibp__cfg.staging_bytes, &g->bytes);
  if (!g->n || !d->cuStreamWaitEvent)
    return -1;
  const uint64_t stride = g->bytes + IBP_STAGED_PAD;
  if (d->cuMemAlloc(&g->mem, g->n * stride) != CUDA_SUCCESS)
    return -1;
  for (unsigned i = 0; i < g->n; i++) {
    buffer *b = &g->buf[i];
    b->dev = g->mem + i * stride;
    if (d->cuEventCreate(&b->ready, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS ||
        d->cuEventCreate(&b->free, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
      return -1;
  }
  return 0;
}

/* ctx's ring, set up on first use; NULL when the path is off there.  The
 * lock is held, the thread in relaxed capture mode. */
static ring *ring_for(const ibp_driver *d, CUcontext ctx, int dev) {
  ring *g = NULL;
  HASH_FIND_PTR(rings, &ctx, g);
  if (g)
    return g->failed ? NULL : g;
  g = calloc(1, sizeof *g);
  if (!g)
    return NULL;
  g->ctx = ctx;
  g->device = dev;
  HASH_ADD_PTR(rings, ctx, g);
  if (ring_setup(d, g) == 0)
    return g;
  ring_release(d, g); /* remembered as failed: no retry per copy */
  ibp__warn_first(&warned,
                  "staged copies: no staging memory on device %d "
                  "(IBP_STAGING=%llu bytes); its copies take the other paths",
                  dev, (unsigned long long)ibp__cfg.staging_bytes);
  return NULL;
}

/* Runs under the lock in relaxed capture mode: the ring's allocation and
 * its streams must not invalidate another thread's capture
 * (docs/ARCHITECTURE.md "Nothing under capture"). */
static void enter(const ibp_driver *d, CUstreamCaptureMode *mode) {
  pthread_mutex_lock(&lock);
  *mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (d->cuThreadExchangeStreamCaptureMode)
    d->cuThreadExchangeStreamCaptureMode(mode);
}

static void leave(const ibp_driver *d, CUstreamCaptureMode *mode) {
  if (d->cuThreadExchangeStreamCaptureMode)
    d->cuThreadExchangeStreamCaptureMode(mode);
  pthread_mutex_unlock(&lock);
}

/* ---- chunks -------------------------------------------------------------- */

typedef struct chunk {
  uint64_t t0, t1; /* tensors [t0, t1) */
  uint64_t lo, hi; /* the window (lo == hi: none) */
  uint64_t raw;    /* bytes the decode reads over PCIe */
} chunk;

/* Tensor t's stream, when the decode would read it: compressed, clean. */
static int stream_of(const ibp_served_region *s, uint64_t t, int dirty_seen,
                     uint64_t *off, uint64_t *len) {
  *len = s->layout.lengths[t];
  if (!*len || !((s->layout.flags[t / 8] >> (t % 8)) & 1))
    return 0;
  if (dirty_seen &&
      ((atomic_load_explicit(&s->track.dirty[t / 32], memory_order_relaxed) >>
        (t % 32)) &
       1))
    return 0;
  *off = s->layout.offsets[t];
  return 1;
}

/* The budget of the chunk from t of a copy ending before tensor end: a
 * buffer, or less towards the copy's end -- `share` of what is left, so
 * that each decode ends before the next chunk's copy does and the last
 * decode, which nothing overlaps, is short -- but no less than LAST_CHUNK
 * nor than the streams of IBP_MAX_SMS x IBP_STAGED_WARPS tensors (a warp
 * decodes a tensor at a time: a smaller chunk leaves the decode's blocks
 * idle and takes longer than its share).  What is left is taken whole
 * once it fits twice that. */
static uint64_t chunk_budget(const ibp_served_region *s, uint64_t t,
                             uint64_t end, uint64_t cap, double share) {
  const uint64_t left = s->layout.prefix[end] - s->layout.prefix[t];
  const uint64_t warps = (uint64_t)ibp__cfg.max_sms * IBP_STAGED_WARPS;
  uint64_t least = end > t ? left / (end - t) * warps : 0;
  least = least > LAST_CHUNK ? least : LAST_CHUNK;
  if (left <= 2 * least)
    return cap;
  uint64_t b = (uint64_t)((double)left * share);
  b = b < least ? least : b;
  return b < cap ? b : cap;
}

/* The chunk of tensors from t (before end) whose window fits the budget
 * (chunk_budget, of buffers of `cap` bytes). */
static void next_chunk(const ibp_served_region *s, uint64_t t, uint64_t end,
                       uint64_t cap, double share, int dirty_seen, chunk *k) {
  const uint64_t R = s->geometry.tensor_bytes;
  cap = chunk_budget(s, t, end, cap, share);
  *k = (chunk){t, t, 0, 0, 0};
  for (; t < end; t++) {
    uint64_t off = 0, len = 0;
    if (!stream_of(s, t, dirty_seen, &off, &len)) {
      k->raw += R;
      continue;
    }
    uint64_t lo = off & ~(uint64_t)(WINDOW_ALIGN - 1), hi = off + len;
    if (k->hi > k->lo) {
      lo = lo < k->lo ? lo : k->lo;
      hi = hi > k->hi ? hi : k->hi;
    }
    if (hi - lo > cap) {
      if (k->hi > k->lo)
        break;       /* full: t starts the next chunk */
      k->raw += len; /* larger than a buffer: read over PCIe */
      continue;
    }
    k->lo = lo;
    k->hi = hi;
  }
  k->t1 = t;
}

/* Bytes the copy engine moves for window k: its streams and the pad the
 * kernel's reads may run into, within the shadow. */
static uint64_t window_bytes(const ibp_served_region *s, const chunk *k) {
  uint64_t end = k->hi + IBP_STAGED_PAD;
  if (end > s->layout.shadow_bytes)
    end = s->layout.shadow_bytes;
  return k->hi > k->lo ? end - k->lo : 0;
}

/* Tensors [*t0, *t1) of the copy at region offset off, and its bytes past
 * the last tensor (the tail). */
static void copy_tensors(const ibp_served_region *s, uint64_t off, uint64_t len,
                         uint64_t *t0, uint64_t *t1, uint64_t *tail) {
  const uint64_t R = s->geometry.tensor_bytes, body = s->geometry.tensors * R;
  const uint64_t end = off + len;
  *t0 = off < body ? off / R : s->geometry.tensors;
  *t1 = off < body ? ((end < body ? end : body) - 1) / R + 1 : *t0;
  *tail = end > body ? end - (off > body ? off : body) : 0;
}

/* ---- the decode as measured ----------------------------------------------
 *
 * Now and then a chunk's decode is timed on the GPU (two events around its
 * launch on the caller's stream), and what it took is compared with the
 * model's time for it: the rate the profile gives was measured on other
 * data (`ibp calibrate`'s synthetic weights), and a region whose tensors
 * decode slower -- few invariant bits, say -- must not be staged on its
 * strength.  The ratio scales the model's decodes of that region on that
 * device from then on.  On the simulated GPU the events measure the model
 * itself: the ratio stays 1. */

/* A decode's time in the model, scaled: its decode part by `scale` (the
 * measured over the model's), the launch's latency as it is. */
static double scaled_decode_us(const ibp_profile *p, double model_us,
                               double scale) {
  const double fixed =
      p->launch_latency_us < model_us ? p->launch_latency_us : model_us;
  return fixed + scale * (model_us - fixed);
}

/* Takes the last timed decode's result when the GPU has run it (lock
 * held; never waits), and counts it in s's statistics
 * (staged_decode_seconds against staged_decode_model_seconds). */
static void probe_read(const ibp_driver *d, ibp_served_region *s,
                       ibp_device_slot *slot) {
  CUevent *ev = slot->mem.probe;
  if (!ev[1])
    slot->probe_pending = 0; /* its context ended with the events */
  if (!slot->probe_pending)
    return;
  CUresult q = d->cuEventQuery(ev[1]);
  if (q == CUDA_ERROR_NOT_READY)
    return;
  slot->probe_pending = 0;
  float ms = 0;
  if (q != CUDA_SUCCESS || !d->cuEventElapsedTime ||
      d->cuEventElapsedTime(&ms, ev[0], ev[1]) != CUDA_SUCCESS) {
    ibp__probe_failed(&slot->decode, ibp__clock_ns());
    return;
  }
  /* the span from the record before the launch to the one after it: the
   * launch's latency and the decode, as the model's time has them; the
   * ratio is the decode's alone where it ran slower (decode_probe.c) -- with
   * the latency in it, decodes 4x slower than modelled read 3.07x on
   * a100-pcie4's 13.6 us chunks -- and scales the decode alone
   * (scaled_decode_us) */
  const double took = 1e3 * ms;
  if (took <= 0 || slot->probe_model_us <= 0)
    return;
  (void)ibp__probe_read(&slot->decode, took, slot->probe_model_us,
                        slot->probe_fixed_us, ibp__clock_ns());
  ibp__count(&s->counters, staged_decodes_timed, 1);
  ibp__count(&s->counters, staged_decode_seconds, (uint64_t)(1e3 * took));
  ibp__count(&s->counters, staged_decode_model_seconds,
             (uint64_t)(1e3 * slot->probe_model_us));
}

/* Whether the slot may time a decode now: none pending, the last long
 * enough ago (checked before the chunk's model time is worked out). */
static int probe_due(const ibp_device_slot *slot) {
  return !slot->probe_pending && ibp__probe_due(&slot->decode, ibp__clock_ns());
}

/* Whether a due decode model_us long is timed: the model makes it long
 * enough, the events exist (created on first use in the current
 * context). */
static int probe_wanted(const ibp_driver *d, ibp_device_slot *slot,
                        double model_us) {
  if (model_us < PROBE_MIN_US)
    return 0;
  CUevent *ev = slot->mem.probe;
  for (int k = 0; k < 2; k++)
    if (!ev[k] && d->cuEventCreate(&ev[k], CU_EVENT_DEFAULT) != CUDA_SUCCESS)
      ev[k] = NULL;
  if (!ev[0] || !ev[1])
    ibp__probe_failed(&slot->decode, ibp__clock_ns());
  return ev[0] && ev[1];
}

/* The share of what is left that a chunk near a copy's end takes: the
 * next chunk's copy must outlast this one's decode, so chunks may shrink
 * by the ratio of the copy engine's rate to the decode's (in stream bytes,
 * on the device's profile): 1 - C / D, within [0.4, 0.75]. */
static double chunk_share(const ibp_served_region *s, int dev, uint64_t t0,
                          uint64_t t1, double scale) {
  const ibp_profile *p = ibp__gate_profile(dev);
  const double out = (double)(t1 - t0) * s->geometry.tensor_bytes;
  const double stored = (double)(s->layout.prefix[t1] - s->layout.prefix[t0]);
  if (!p || out <= 0 || stored <= 0)
    return 0.5;
  double sms = ibp__cfg.max_sms < p->sms ? ibp__cfg.max_sms : p->sms;
  /* one SM's rate on these tensors: bytes at decode_gbps_per_sm plus
   * decode_tensor_us each, and the exponent stage's terms where the region
   * has it (GB/s = bytes per ns) */
  const double R = s->geometry.tensor_bytes;
  double ns = R / p->decode_gbps_per_sm + 1e3 * p->decode_tensor_us;
  if (s->dev[dev].args.stages && p->stage_decode_gbps_per_sm > 0)
    ns += R / p->stage_decode_gbps_per_sm + 1e3 * p->stage_tensor_us;
  double per_sm = R / ns;
  double decode = per_sm * sms * stored / out / scale;
  double share = 1.0 - p->ce_h2d_gbps / decode;
  return share < 0.4 ? 0.4 : share > 0.75 ? 0.75 : share;
}

/* Bytes [*from, *to) of the region that chunk k of the copy in a decodes
 * (the last chunk runs on to the copy's end: the tail). */
static void chunk_span(const ibp_decompress_args *a, const chunk *k, int last,
                       uint64_t *from, uint64_t *to) {
  const uint64_t R = a->tensor_bytes;
  const uint64_t off = a->first_tensor * R + a->first_offset;
  const uint64_t end = off + a->length;
  *from = k->t0 * R > off ? k->t0 * R : off;
  *to = last || k->t1 * R > end ? end : k->t1 * R;
}

/* The decode of chunk k in the model: its units on the SMs its launch (the
 * slot's staged shape, at most IBP_MAX_SMS blocks) is worth, with the
 * exponent stage's term where the region has it. */
static double chunk_decode_us(const ibp_profile *p, const ibp_device_slot *slot,
                              const ibp_decompress_args *a, const chunk *k,
                              int last, unsigned *sms) {
  uint64_t from, to;
  chunk_span(a, k, last, &from, &to);
  ibp_decompress_args w = slot->staged_args;
  w.first_tensor = from / w.tensor_bytes;
  w.first_offset = (uint32_t)(from % w.tensor_bytes);
  w.length = to - from;
  ibp_kernel_plan wp = slot->staged_plan;
  ibp_kernels_plan_range(&w, slot->sms, &wp);
  unsigned grid = wp.grid < ibp__cfg.max_sms ? wp.grid : ibp__cfg.max_sms;
  const unsigned n = ibp_kernels_decode_sms(grid, wp.block, (unsigned)p->sms);
  if (sms)
    *sms = n;
  return ibp__gate_decode_us(p, slot->args.stages != NULL, k->raw, to - from,
                             ibp_kernels_copy_units(&w), n);
}

int ibp__staged_plan(ibp_served_region *s, ibp_device_slot *slot, CUcontext ctx,
                     int dev, const ibp_copy *c, unsigned busy,
                     const ibp_decompress_args *a, ibp_staged_plan *out) {
  const ibp_driver *d = ibp__driver();
  /* read once: the shadow's context may end meanwhile (serve/context.c) */
  const uint8_t *shadow = s->layout.shadow;
  if (!d || !ibp__cfg.staging_bytes || !shadow ||
      atomic_load_explicit(&s->refresh.refreshing, memory_order_seq_cst))
    return -1;
  uint64_t t0, t1, tail;
  copy_tensors(s, a->first_tensor * a->tensor_bytes + a->first_offset,
               a->length, &t0, &t1, &tail);
  if (t0 == t1 ||
      t1 > atomic_load_explicit(&s->layout.filled, memory_order_acquire))
    return -1;
  CUstreamCaptureMode mode;
  enter(d, &mode);
  /* the ring is made by the first staged copy (ibp__staged_copy): a
   * context whose copies are never staged holds no staging memory; until
   * then the plan takes the buffers it would have */
  ring *g = NULL;
  HASH_FIND_PTR(rings, &ctx, g);
  uint64_t cap = 0;
  const int usable = g ? !g->failed && (cap = g->bytes) > 0
                       : buffers_for(ibp__cfg.staging_bytes, &cap) > 0;
  /* the stream still busy with earlier work, by the chooser's estimates
   * (no driver call): the application issues its copies back to back */
  const int streaming = usable && !c->sync && busy;
  const ibp_profile *p = ibp__gate_profile(dev);
  if (g && usable)
    probe_read(d, s, slot);
  const double scale = ibp__probe_scale(&slot->decode, ibp__clock_ns());
  leave(d, &mode);
  if (!usable || !p)
    return -1;
  const int dirty_seen =
      s->track.dirty &&
      atomic_load_explicit(&s->track.dirty_tensors, memory_order_relaxed);
  ibp_gate_staged gs = {c->bytes, 0, tail, 0, 0, 0, 0, 0, 0};
  const double share = chunk_share(s, dev, t0, t1, scale);
  double copied = 0;   /* when the copy engine ends chunk k's window */
  double decoded = 0;  /* the decodes alone */
  unsigned widest = 1; /* the most SMs a chunk's decode is worth */
  for (uint64_t t = t0; t < t1; gs.chunks++) {
    chunk k;
    next_chunk(s, t, t1, cap, share, dirty_seen, &k);
    const uint64_t wb = window_bytes(s, &k);
    gs.ce_bytes += wb;
    gs.windows += wb > 0;
    gs.host_bytes += k.raw;
    if (wb)
      copied += ibp_profile_ce_copy_us(p, wb, 1);
    unsigned sms = 1;
    const double dk = scaled_decode_us(
        p, chunk_decode_us(p, slot, a, &k, k.t1 == t1, &sms), scale);
    widest = sms > widest ? sms : widest;
    gs.gpu_us = (copied > gs.gpu_us ? copied : gs.gpu_us) + dk;
    decoded += dk;
    t = k.t1;
  }
  /* copies streamed back to back: this copy's windows move while the one
   * before decodes, and only the slower stage counts -- the copy engine,
   * which every stream's windows share, or the decodes, which the busy
   * streams' kernels run side by side as far as the device's SMs hold
   * them; on an idle stream (an application that waits for each copy)
   * nothing overlaps it */
  if (streaming) {
    const unsigned fit = (unsigned)p->sms / widest;
    const unsigned side = busy < fit ? busy : fit ? fit : 1;
    decoded /= side;
    /* but what the decodes read of the host crosses the one link, which
     * side by side they share: they end no sooner than those reads at the
     * link's rate, nor the copy before the windows and the reads have
     * crossed it (on the H200, random weights -- every tensor raw -- went
     * staged as decodes of 32 SMs each reading at the link's full rate
     * beside three others: 0.87 of the driver's time) */
    const double reads =
        gs.host_bytes
            ? (double)gs.host_bytes /
                  (1e3 * ibp_profile_decode_read_gbps(p, (unsigned)p->sms))
            : 0;
    if (decoded < reads)
      decoded = reads;
    gs.gpu_us = copied + reads > decoded ? copied + reads : decoded;
  }
  gs.link_us = copied;
  gs.sm_us = streaming ? decoded : gs.gpu_us - copied;
  gs.pipelined = streaming;
  *out = (ibp_staged_plan){gs, cap, share, shadow};
  return 0;
}

/* ---- serving ------------------------------------------------------------- */

/* The ring's next buffer the caller stream k may fill now: one whose last
 * decode ran on k (its copy then waits for that decode in k's order), or
 * whose last decode has run -- never one another stream's pending work
 * holds, which would tie k to that stream.  NULL when there is none. */
static buffer *take_buffer(const ibp_driver *d, ring *g, const caller_key *k) {
  for (unsigned i = 0; i < g->n; i++) {
    buffer *b = &g->buf[(g->next + i) % g->n];
    if (b->dead || (b->used && !same_caller(&b->owner, k) &&
                    d->cuEventQuery(b->free) != CUDA_SUCCESS))
      continue;
    g->next = (g->next + i + 1) % g->n;
    return b;
  }
  return NULL;
}

/* Queues chunk k's window copy into b on copy stream `copy`, and the
 * caller's stream's wait for it.  *queued: the copy was queued (a failure
 * after it leaves the buffer being written). */
static CUresult copy_window(const ibp_driver *d, const ibp_served_region *s,
                            const ibp_staged_args *x, buffer *b, const chunk *k,
                            CUstream copy, CUstream stream, int *queued) {
  const ibp_staged_plan *sp = x->sp;
  CUresult e = CUDA_SUCCESS;
  if (b->used && (e = d->cuStreamWaitEvent(copy, b->free, 0)))
    return e;
  if (x->start && x->started && !*x->started)
    *x->started = d->cuEventRecord(x->start, copy) == CUDA_SUCCESS;
  if ((e = d->cuMemcpyHtoDAsync(b->dev, sp->shadow + k->lo, window_bytes(s, k),
                                copy)))
    return e;
  *queued = 1;
  if ((e = d->cuEventRecord(b->ready, copy)))
    return e;
  return d->cuStreamWaitEvent(stream, b->ready, 0);
}

/* Launches the decode of chunk k (its window in a buffer, or none) on
 * c->stream.  Returns 0, 1 when no buffer could be taken (nothing queued),
 * -1 on a failure (*err). */
static int stage_chunk(const ibp_driver *d, const ibp_served_region *s, ring *g,
                       const ibp_copy *c, const caller_key *who,
                       const ibp_staged_args *x, const chunk *k, int last,
                       CUresult *err) {
  const ibp_profile *prof =
      probe_due(x->slot) ? ibp__gate_profile(x->dev) : NULL;
  const double model_us =
      prof ? chunk_decode_us(prof, x->slot, x->a, k, last, NULL) : 0;
  const ibp_decompress_args *a = x->a;
  const uint64_t R = a->tensor_bytes;
  const uint64_t off = a->first_tensor * R + a->first_offset;
  ibp_decompress_args ca = *a;
  ca.stage_bytes = x->shape->stage_bytes;
  ca.stage_buffers = x->shape->stage_buffers;
  uint64_t from, to;
  chunk_span(a, k, last, &from, &to);
  ca.first_tensor = from / R;
  ca.first_offset = (uint32_t)(from % R);
  ca.length = to - from;
  ca.dst = a->dst + (from - off);
  buffer *b = NULL;
  int queued = 0;
  if (k->hi > k->lo) {
    CUstream copy = copy_stream(d, g, who);
    if (!copy || !(b = take_buffer(d, g, who)))
      return 1;
    if ((*err = copy_window(d, s, x, b, k, copy, c->stream, &queued))) {
      b->dead = queued;
      return -1;
    }
    ca.staged = (const uint8_t *)(uintptr_t)b->dev;
    ca.staged_lo = k->lo;
    ca.staged_hi = k->hi;
  }
  ibp_kernel_plan p = *x->plan;
  ibp_kernels_plan_range(&ca, x->sms, &p);
  if (p.grid > ibp__cfg.max_sms)
    p.grid = ibp__cfg.max_sms;
  void *params[] = {&ca};
  CUevent *probe = x->slot->mem.probe;
  /* the probe's own calls are set aside from a timed copy's span: read
   * as the route's, they made staged copies look 16 % dearer (a100-pcie4
   * under driver calls 4x dearer: 28.8 against 24.8 us) */
  double aside = prof ? ibp__clock_ns() : 0;
  const int wanted = probe_wanted(d, x->slot, model_us);
  const int timed =
      wanted && d->cuEventRecord(probe[0], c->stream) == CUDA_SUCCESS;
  if (wanted && !timed)
    ibp__probe_failed(&x->slot->decode, ibp__clock_ns());
  aside = prof ? ibp__clock_ns() - aside : 0;
  if ((*err = d->cuLaunchKernel(x->fn, p.grid, 1, 1, p.block, 1, 1,
                                p.dynamic_shared, c->stream, params, NULL))) {
    if (b)
      b->dead = 1; /* its copy is queued */
    return -1;
  }
  const double second = timed ? ibp__clock_ns() : 0;
  if (timed && d->cuEventRecord(probe[1], c->stream) == CUDA_SUCCESS) {
    x->slot->probe_pending = 1;
    x->slot->probe_model_us = model_us;
    x->slot->probe_fixed_us = prof ? prof->launch_latency_us : 0;
    ibp__probe_timed(
        &x->slot->decode, ibp__clock_ns(),
        prof ? 1e3 * PROBE_CALLS * prof->driver_call_us / PROBE_SHARE : 0);
  } else if (timed) {
    ibp__probe_failed(&x->slot->decode, ibp__clock_ns());
  }
  if (x->aside_ns)
    *x->aside_ns += aside + (timed ? ibp__clock_ns() - second : 0);
  if (b && d->cuEventRecord(b->free, c->stream) != CUDA_SUCCESS) {
    b->dead = 1; /* the decode may still read it */
  } else if (b) {
    b->used = 1;
    b->owner = *who;
  }
  return 0;
}

/* Whether every buffer of g is dead: then the path is off in its context. */
static void check_dead(ring *g) {
  for (unsigned i = 0; i < g->n; i++)
    if (!g->buf[i].dead)
      return;
  g->failed = 1;
}

int ibp__staged_copy(const ibp_served_region *s, CUcontext ctx,
                     const ibp_copy *c, const ibp_staged_args *x,
                     CUresult *err) {
  const ibp_driver *d = ibp__driver();
  const ibp_decompress_args *a = x->a;
  uint64_t t0, t1, tail;
  copy_tensors(s, a->first_tensor * a->tensor_bytes + a->first_offset,
               a->length, &t0, &t1, &tail);
  const int dirty_seen =
      s->track.dirty &&
      atomic_load_explicit(&s->track.dirty_tensors, memory_order_relaxed);
  const caller_key who = key_of(c->stream);
  int rc = 1;
  *err = CUDA_SUCCESS;
  CUstreamCaptureMode mode;
  enter(d, &mode);
  ring *g = ring_for(d, ctx, x->dev);
  if (g && g->bytes == x->sp->buffer_bytes) {
    for (uint64_t t = t0, first = 1; t < t1; first = 0) {
      chunk k;
      next_chunk(s, t, t1, g->bytes, x->sp->share, dirty_seen, &k);
      t = k.t1;
      rc = stage_chunk(d, s, g, c, &who, x, &k, t == t1, err);
      if (rc == 1 && !first) /* earlier chunks' buffers were free */
        rc = 2;
      if (rc != 0)
        break;
    }
    check_dead(g);
  }
  leave(d, &mode);
  return rc;
}

CUstream ibp__staged_copy_stream(CUcontext ctx, int dev, CUstream stream) {
  const ibp_driver *d = ibp__driver();
  if (!d)
    return NULL;
  const caller_key who = key_of(stream);
  CUstreamCaptureMode mode;
  enter(d, &mode);
  ring *g = ring_for(d, ctx, dev);
  CUstream copy = g ? copy_stream(d, g, &who) : NULL;
  leave(d, &mode);
  return copy;
}

void ibp__staged_context_end(CUcontext ctx, int dev) {
  pthread_mutex_lock(&lock);
  ring *g, *next;
  HASH_ITER(hh, rings, g, next) {
    if (ctx ? g->ctx == ctx : g->device == dev) {
      HASH_DEL(rings, g); /* its memory, stream and events end with ctx */
      free(g);
    }
  }
  pthread_mutex_unlock(&lock);
}

void ibp__staged_after_fork_child(void) {
  pthread_mutex_init(&lock, NULL);
  rings = NULL; /* the parent's: left, not freed */
}
