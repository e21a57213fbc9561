/* The staged path (serve/staged.h; docs/ARCHITECTURE.md "Staged copies").
 *
 * A copy's tensors are cut into chunks whose streams fit one buffer of the
 * context's ring: a chunk's window is the shadow bytes from its first
 * stream (rounded down to 128 bytes, as the kernel's reads are) to its
 * last stream's end.  Streams a refresh moved elsewhere widen the window;
 * one that would not fit a buffer starts the next chunk, and a stream
 * larger than a buffer is read over PCIe as the zero-copy kernel reads it.
 * Tensors read raw (stored raw, written, the region's tail) take no room.
 *
 * Per chunk, on one of libibp's own streams (non-blocking: the legacy
 * stream does not wait for them; two, taken in turn, so that one copy's
 * setup overlaps the previous one's transfer, as copies on two streams of
 * the application's do): wait for the buffer's last decode,
 * copy the window, record `ready`; on the caller's stream: wait for `ready`,
 * launch the decode reading the window, record `free`.  The copies need not
 * wait for the caller's stream -- the shadow does not change while copies are
 * in flight: a refresh first waits for every copy between its decision and its
 * launch (`launching`, held by the caller), then for the context's work, and no
 * copy is staged while one runs -- so chunk k+1's copy overlaps chunk k's
 * decode, and a copy's first chunk the decode of the copy before it.
 *
 * One mutex guards the rings and every staged submission (a few driver
 * calls per chunk). */
#include "serve/staged.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <uthash.h>

#include "base/base.h"
#include "base/driver.h"
#include "base/log.h"

#define BUFFER_MAX (2ull << 20) /* chunks of at most 2 MiB of streams */
#define BUFFER_MIN (64ull << 10)
#define BUFFERS_MIN 2u
#define BUFFERS_MAX 16u
#define WINDOW_ALIGN 128u /* the kernel's reads are line-aligned */
#define COPY_STREAMS 2u

typedef struct buffer {
  CUdeviceptr dev; /* bytes + IBP_STAGED_PAD */
  CUstream copy;   /* the ring's stream for this buffer's copies */
  CUevent ready;   /* recorded after its copy, on the ring's stream */
  CUevent free;    /* recorded after the decode that read it */
  int used;        /* `free` was recorded */
  int dead;        /* `free` could not be recorded: never reused */
} buffer;

typedef struct ring {
  CUcontext ctx;
  int device;
  int failed; /* could not be set up: the path is off in ctx */
  CUstream copy[COPY_STREAMS];
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

static void ring_release(const ibp_driver *d, ring *g) {
  for (unsigned i = 0; i < BUFFERS_MAX; i++) {
    if (g->buf[i].ready)
      d->cuEventDestroy(g->buf[i].ready);
    if (g->buf[i].free)
      d->cuEventDestroy(g->buf[i].free);
  }
  for (unsigned i = 0; i < COPY_STREAMS; i++)
    if (g->copy[i])
      d->cuStreamDestroy(g->copy[i]);
  if (g->mem)
    d->cuMemFree(g->mem);
  *g = (ring){.ctx = g->ctx, .device = g->device, .failed = 1};
}

/* Buffers for IBP_STAGING bytes: as many chunks of at most BUFFER_MAX as
 * fit, 2 to 16; 0 when they would be smaller than BUFFER_MIN. */
static unsigned buffers_for(uint64_t staging, uint64_t *bytes) {
  uint64_t n = staging / BUFFER_MAX;
  n = n < BUFFERS_MIN ? BUFFERS_MIN : n > BUFFERS_MAX ? BUFFERS_MAX : n;
  *bytes = (staging / n) & ~(uint64_t)(WINDOW_ALIGN - 1);
  return *bytes >= BUFFER_MIN ? (unsigned)n : 0;
}

static int ring_setup(const ibp_driver *d, ring *g) {
  g->n = buffers_for(ibp__cfg.staging_bytes, &g->bytes);
  if (!g->n || !d->cuStreamWaitEvent)
    return -1;
  const uint64_t stride = g->bytes + IBP_STAGED_PAD;
  if (d->cuMemAlloc(&g->mem, g->n * stride) != CUDA_SUCCESS)
    return -1;
  for (unsigned i = 0; i < COPY_STREAMS; i++)
    if (d->cuStreamCreate(&g->copy[i], CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
      return -1;
  for (unsigned i = 0; i < g->n; i++) {
    buffer *b = &g->buf[i];
    b->dev = g->mem + i * stride;
    b->copy = g->copy[i % COPY_STREAMS];
    if (d->cuEventCreate(&b->ready, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS ||
        d->cuEventCreate(&b->free, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
      return -1;
  }
  return 0;
}

/* ctx's ring, set up on first use; NULL when the path is off there.  The
 * lock is held. */
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

/* The chunk of tensors from t (before end) whose window fits `cap`. */
static void next_chunk(const ibp_served_region *s, uint64_t t, uint64_t end,
                       uint64_t cap, int dirty_seen, chunk *k) {
  const uint64_t R = s->geometry.tensor_bytes;
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

int ibp__staged_plan(const ibp_served_region *s, CUcontext ctx, int dev,
                     const ibp_copy *c, const ibp_decompress_args *a,
                     ibp_staged_plan *out) {
  const ibp_driver *d = ibp__driver();
  if (!d || !ibp__cfg.staging_bytes || !s->layout.shadow ||
      atomic_load(&s->refresh.refreshing))
    return -1;
  uint64_t t0, t1, tail;
  copy_tensors(s, a->first_tensor * a->tensor_bytes + a->first_offset,
               a->length, &t0, &t1, &tail);
  if (t0 == t1 ||
      t1 > atomic_load_explicit(&s->layout.filled, memory_order_acquire))
    return -1;
  pthread_mutex_lock(&lock);
  ring *g = ring_for(d, ctx, dev);
  uint64_t cap = g ? g->bytes : 0;
  pthread_mutex_unlock(&lock);
  if (!g)
    return -1;
  const int dirty_seen =
      s->track.dirty &&
      atomic_load_explicit(&s->track.dirty_tensors, memory_order_relaxed);
  ibp_gate_staged gs = {c->bytes, 0, tail, 0, ibp__cfg.max_sms, c->sync};
  for (uint64_t t = t0; t < t1; gs.chunks++) {
    chunk k;
    next_chunk(s, t, t1, cap, dirty_seen, &k);
    gs.ce_bytes += window_bytes(s, &k);
    gs.host_bytes += k.raw;
    t = k.t1;
  }
  *out = (ibp_staged_plan){gs, cap};
  return 0;
}

/* ---- serving ------------------------------------------------------------- */

/* The ring's next buffer still in use, or NULL when every one is dead. */
static buffer *take_buffer(ring *g) {
  for (unsigned i = 0; i < g->n; i++) {
    buffer *b = &g->buf[(g->next + i) % g->n];
    if (!b->dead) {
      g->next = (g->next + i + 1) % g->n;
      return b;
    }
  }
  return NULL;
}

/* Queues chunk k's window copy into b, and the caller's stream's wait for
 * it. */
static CUresult copy_window(const ibp_driver *d, const ibp_served_region *s,
                            buffer *b, const chunk *k, CUstream stream) {
  CUresult e = CUDA_SUCCESS;
  if (b->used && (e = d->cuStreamWaitEvent(b->copy, b->free, 0)))
    return e;
  const uint8_t *src = (const uint8_t *)s->layout.shadow + k->lo;
  if ((e = d->cuMemcpyHtoDAsync(b->dev, src, window_bytes(s, k), b->copy)) ||
      (e = d->cuEventRecord(b->ready, b->copy)))
    return e;
  return d->cuStreamWaitEvent(stream, b->ready, 0);
}

/* Launches the decode of chunk k (window in b, or none) on c->stream. */
static CUresult stage_chunk(const ibp_driver *d, const ibp_served_region *s,
                            ring *g, const ibp_copy *c, CUfunction fn,
                            unsigned sms, const ibp_decompress_args *a,
                            const ibp_kernel_plan *plan, const chunk *k,
                            int last) {
  const uint64_t R = a->tensor_bytes;
  const uint64_t off = a->first_tensor * R + a->first_offset;
  const uint64_t end = off + a->length;
  ibp_decompress_args ca = *a;
  uint64_t from = k->t0 * R > off ? k->t0 * R : off;
  uint64_t to = last || k->t1 * R > end ? end : k->t1 * R;
  ca.first_tensor = from / R;
  ca.first_offset = (uint32_t)(from % R);
  ca.length = to - from;
  ca.dst = a->dst + (from - off);
  buffer *b = NULL;
  CUresult e = CUDA_SUCCESS;
  if (k->hi > k->lo) {
    if (!(b = take_buffer(g)))
      return CUDA_ERROR_NOT_READY;
    if ((e = copy_window(d, s, b, k, c->stream)))
      return e;
    ca.staged = (const uint8_t *)(uintptr_t)b->dev;
    ca.staged_lo = k->lo;
    ca.staged_hi = k->hi;
  }
  ibp_kernel_plan p = *plan;
  ibp_kernels_plan_range(&ca, sms, &p);
  if (p.grid > ibp__cfg.max_sms)
    p.grid = ibp__cfg.max_sms;
  void *params[] = {&ca};
  if ((e = d->cuLaunchKernel(fn, p.grid, 1, 1, p.block, 1, 1, p.dynamic_shared,
                             c->stream, params, NULL)))
    return e;
  if (b && d->cuEventRecord(b->free, c->stream) != CUDA_SUCCESS)
    b->dead = 1; /* the decode may still read it */
  else if (b)
    b->used = 1;
  return CUDA_SUCCESS;
}

CUresult ibp__staged_copy(const ibp_served_region *s, CUcontext ctx,
                          const ibp_copy *c, CUfunction fn, unsigned sms,
                          const ibp_decompress_args *a,
                          const ibp_kernel_plan *plan,
                          const ibp_staged_plan *sp) {
  const ibp_driver *d = ibp__driver();
  uint64_t t0, t1, tail;
  copy_tensors(s, a->first_tensor * a->tensor_bytes + a->first_offset,
               a->length, &t0, &t1, &tail);
  const int dirty_seen =
      s->track.dirty &&
      atomic_load_explicit(&s->track.dirty_tensors, memory_order_relaxed);
  CUresult e = CUDA_ERROR_NOT_READY;
  pthread_mutex_lock(&lock);
  ring *g = NULL;
  HASH_FIND_PTR(rings, &ctx, g);
  if (g && !g->failed && g->bytes == sp->buffer_bytes) {
    for (uint64_t t = t0; t < t1;) {
      chunk k;
      next_chunk(s, t, t1, g->bytes, dirty_seen, &k);
      t = k.t1;
      if ((e = stage_chunk(d, s, g, c, fn, sms, a, plan, &k, t == t1)))
        break;
    }
  }
  pthread_mutex_unlock(&lock);
  return e;
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
