/* Compressing a region straight into its packed layout, chunk by chunk
 * (serve/prepare/pack.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "serve/prepare/pack.h"

#include "base/base.h"

#define MAX_THREADS 64
#define NICE_STEP 10 /* below the application's threads */
#define NICE_MAX 19
#define CHUNK_BYTES (8u << 20)       /* of the region, per chunk */
#define ESTIMATE_BYTES (16ull << 20) /* of tensors sampled by the estimate */
#define NONE UINT64_MAX              /* a part with no place in the shadow */
/* of the region, asked for ahead of the codec: a cache line a 4 KiB page */
#define AHEAD_BYTES (32u << 10)
#define AHEAD_STEP 4096u

unsigned ibp__pack_threads(void) {
  if (ibp__cfg.threads)
    return ibp__cfg.threads;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned t = cpus > 0 ? (unsigned)(cpus / 4) : 1;
  return t < 1 ? 1 : t > MAX_THREADS ? MAX_THREADS : t;
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int all_zero(const uint8_t *t, uint32_t R) {
  for (uint32_t i = 0; i < R; i++)
    if (t[i])
      return 0;
  return 1;
}

uint32_t ibp__pack_best(const ibp_pack *p, const uint8_t *tensor,
                        uint8_t *scratch, size_t *stored) {
  if (p->stages && (p->clusters > 1 || stored))
    return ibp_cluster_best_staged(p->params, p->stages, p->clusters, tensor,
                                   scratch, stored);
  if (p->clusters > 1)
    return ibp_cluster_best(p->params, p->clusters, tensor, stored);
  if (stored)
    *stored = ibp_compressed_size(p->params, tensor);
  return 0;
}

size_t ibp__pack_compress(const ibp_pack *p, uint32_t id, const uint8_t *tensor,
                          uint8_t *out, uint8_t *scratch, int *compressed) {
  if (p->stages)
    return ibp_compress_tensor_staged_with(&p->params[id], &p->stages[id],
                                           tensor, out, scratch, compressed);
  return ibp_compress_tensor(&p->params[id], tensor, out, compressed);
}

void ibp__pack_put_id(uint8_t *ids, uint32_t k, uint64_t i, uint32_t id) {
  const uint32_t bits = ibp_cluster_id_bits(k);
  if (!ids || bits == 0)
    return;
  const uint64_t at = i * bits;
  const uint8_t m = (uint8_t)(((1u << bits) - 1) << (at % 8));
  ids[at / 8] = (uint8_t)((ids[at / 8] & ~m) | ((id << (at % 8)) & m));
}

uint64_t ibp__pack_estimate(const ibp_pack *p, uint64_t *zero_tensors) {
  const uint32_t R = p->params->tensor_bytes;
  uint64_t k = ESTIMATE_BYTES / R;
  k = k < 1 ? 1 : k > p->n ? p->n : k;
  uint64_t packed = 0, zero = 0;
  uint8_t *scratch = malloc(R);
  if (!scratch)
    return p->n * R; /* (the caller's allocation fails the same way) */
  for (uint64_t s = 0; s < k; s++) {
    const uint8_t *t = p->data + (s * p->n / k) * R;
    size_t len = 0;
    ibp__pack_best(p, t, scratch, &len);
    packed += len < R ? len : 0;
    zero += (uint64_t)all_zero(t, R);
  }
  free(scratch);
  if (zero_tensors)
    *zero_tensors = k ? zero * p->n / k : 0;
  return k ? (uint64_t)((long double)packed * p->n / k) : 0;
}

uint64_t ibp__pack_exact(const ibp_pack *p) {
  const uint32_t R = p->params->tensor_bytes;
  uint64_t packed = 0;
  uint8_t *scratch = malloc(R);
  if (!scratch)
    return p->n * R;
  for (uint64_t i = 0; i < p->n; i++) {
    size_t len = 0;
    ibp__pack_best(p, p->data + i * R, scratch, &len);
    packed += len < R ? len : 0;
  }
  free(scratch);
  return packed;
}

/* Faults in the pages of shadow bytes [from, to) with one system call
 * (MADV_POPULATE_WRITE, Linux 5.14) rather than a fault per page as the
 * streams are written: a pinned shadow the driver maps on demand (the
 * simulated one) took 0.50 s of 1.75 s to prepare 1 GiB of bf16 weights in
 * page faults.  Advice only: where the kernel or the mapping refuses it
 * (older kernels, a driver's mapping), the writes fault the pages in as
 * before. */
static void populate(const ibp_pack *p, uint64_t from, uint64_t to) {
#ifdef MADV_POPULATE_WRITE
  static _Atomic uintptr_t page; /* (threads racing store the same value) */
  uintptr_t pg = atomic_load_explicit(&page, memory_order_relaxed);
  if (!pg) {
    long v = sysconf(_SC_PAGESIZE);
    pg = v > 0 ? (uintptr_t)v : 4096;
    atomic_store_explicit(&page, pg, memory_order_relaxed);
  }
  uintptr_t lo = (uintptr_t)(p->shadow + from) & ~(pg - 1);
  uintptr_t hi = (uintptr_t)(p->shadow + to);
  if (to > from)
    (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
#else
  (void)p, (void)from, (void)to;
#endif
}

/* One thread's part of a chunk: tensors [i0, i1), whole words. */
typedef struct job {
  ibp_pack *p;
  uint64_t i0, i1;
  uint8_t *stage; /* its streams back to back */
  size_t stage_cap;
  uint8_t *scratch; /* R bytes (the exponent stage's stripped tensor) */
  uint8_t *out;     /* where compress_part writes: stage, or the shadow
                       at `base` when that is known before (direct) */
  int direct;
  uint64_t used; /* bytes of out */
  uint64_t base; /* where they go in the shadow, or NONE */
  uint64_t compressed, zero;
} job;

/* Asks for one cache line of each 4 KiB page of the region from *from to
 * `to` (no further than the part's `end`) and moves *from on: the codec
 * reads the region once, in order, and waits less for it so than on the
 * hardware's prefetcher alone (fit_put of bf16 weights not in cache: 0.45
 * -> 0.39 CPU s per GiB); the page's translation and the hardware's
 * stream in it start early, the rest of its lines come from that stream.
 * Every line of the next 8 KiB asked for instead: the fill of 1 GiB of
 * bf16 weights 0.82-0.89 CPU s, these 0.80-0.81 (no read-ahead: 0.98-1.3;
 * one line per page 8 or 64 KiB ahead: 0.80-0.93). */
static void read_ahead(const uint8_t *data, uint64_t *from, uint64_t to,
                       uint64_t end) {
  to = to < end ? to : end;
  for (; *from < to; *from += AHEAD_STEP)
    __builtin_prefetch(data + *from);
}

static void compress_part(job *j) {
  const ibp_pack *p = j->p;
  const uint32_t R = p->params->tensor_bytes;
  const uint64_t end = j->i1 * R;
  uint64_t ahead = j->i0 * R;
  j->used = 0;
  if (j->direct) /* the part's bytes at most, as direct_first allowed */
    populate(p, j->base, j->base + (j->i1 - j->i0) * R);
  for (uint64_t i = j->i0; i < j->i1; i++) {
    const uint8_t *t = p->data + i * R;
    int c = 0;
    read_ahead(p->data, &ahead, (i + 1) * R + AHEAD_BYTES, end);
    /* one pair: no need to measure before compressing */
    const uint32_t id =
        p->clusters > 1 ? ibp__pack_best(p, t, j->scratch, NULL) : 0;
    size_t len = ibp__pack_compress(p, id, t, j->out + j->used, j->scratch, &c);
    ibp__pack_put_id(p->ids, p->clusters, i, id);
    p->lengths[i] = c ? (uint32_t)len : 0;
    j->used += c ? len : 0;
    j->compressed += (uint64_t)c;
    j->zero += (uint64_t)all_zero(t, R);
  }
}

static void copy_part(job *j) {
  if (j->direct || j->base == NONE || !j->used)
    return;
  populate(j->p, j->base, j->base + j->used);
  memcpy(j->p->shadow + j->base, j->stage, j->used);
}

/* The chunk's first part is written straight into the shadow, where its
 * streams begin (the chunk's start), when the shadow's capacity holds
 * them whatever they take (its tensors' bytes, and R + 16 the codec may
 * write past a stream): one pass over its bytes rather than two, and no
 * copy at all on one thread.  The others go to their buffers. */
static void direct_first(ibp_pack *p, job *jobs, unsigned parts) {
  const uint32_t R = p->params->tensor_bytes;
  for (unsigned k = 0; k < parts; k++) {
    job *j = &jobs[k];
    const uint64_t most = (j->i1 - j->i0) * R + R + 16;
    j->direct = k == 0 && p->packed_bytes + most <= p->capacity;
    j->base = j->direct ? p->packed_bytes : NONE;
    j->out = j->direct ? p->shadow + j->base : j->stage;
  }
}

typedef struct run {
  job *j;
  void (*fn)(job *);
} run;

static void *thread_main(void *arg) {
  run *r = arg;
  r->fn(r->j);
  return NULL;
}

/* The worker thread steps 10 nice levels below the application's threads,
 * once; the threads it creates inherit that. */
static void lower_priority_once(void) {
  static __thread int lowered;
  if (lowered)
    return;
  lowered = 1;
  id_t tid = (id_t)syscall(SYS_gettid);
  errno = 0;
  int prio = getpriority(PRIO_PROCESS, tid);
  if (errno == 0 && prio < NICE_MAX)
    setpriority(PRIO_PROCESS, tid,
                prio + NICE_STEP < NICE_MAX ? prio + NICE_STEP : NICE_MAX);
}

/* Runs fn on jobs[0..t), jobs[0] on the calling thread. */
static void parallel(job *jobs, unsigned t, void (*fn)(job *)) {
  run runs[MAX_THREADS];
  pthread_t th[MAX_THREADS];
  int started[MAX_THREADS] = {0};
  for (unsigned k = 0; k < t; k++)
    runs[k] = (run){&jobs[k], fn};
  for (unsigned k = 1; k < t; k++)
    started[k] = pthread_create(&th[k], NULL, thread_main, &runs[k]) == 0;
  fn(&jobs[0]);
  for (unsigned k = 1; k < t; k++) {
    if (started[k])
      pthread_join(th[k], NULL);
    else
      fn(&jobs[k]); /* no thread: done here */
  }
}

/* Step 2: the chunk's offsets, flags and prefix sums; parts that do not
 * fit the capacity are stored raw. */
static void place(ibp_pack *p, job *jobs, unsigned t, uint64_t c0,
                  uint64_t c1) {
  const uint32_t R = p->params->tensor_bytes;
  for (unsigned k = 0; k < t; k++) {
    job *j = &jobs[k];
    /* (a direct part is in place, and fits: direct_first) */
    j->base = j->direct || p->packed_bytes + j->used <= p->capacity
                  ? p->packed_bytes
                  : NONE;
    uint64_t at = p->packed_bytes;
    for (uint64_t i = j->i0; i < j->i1; i++) {
      if (j->base == NONE)
        p->lengths[i] = 0;
      p->offsets[i] = at;
      at += p->lengths[i];
      if (p->lengths[i])
        p->flags[i / 8] |= (uint8_t)(1u << (i % 8));
    }
    if (j->base == NONE)
      p->overflow_tensors += j->i1 - j->i0;
    else
      p->packed_bytes = at;
    p->compressed_tensors += j->base == NONE ? 0 : j->compressed;
    p->zero_tensors += j->zero;
    j->compressed = j->zero = 0;
  }
  for (uint64_t i = c0; i < c1; i++)
    p->prefix[i + 1] = p->prefix[i] + (p->lengths[i] ? p->lengths[i] : R);
}

/* Step 4: the chunk is final on the host; make the device see it, then
 * let kernels read it compressed. */
static int publish(ibp_pack *p, uint64_t c0, uint64_t c1) {
  atomic_store_explicit(p->filled, c1, memory_order_release);
  if (p->publish && p->publish(p->publish_ctx, c0, c1) != 0)
    return -1;
  for (uint64_t w = c0 / 32; p->busy && w < (c1 + 31) / 32; w++)
    atomic_store_explicit(&p->busy[w], 0, memory_order_release);
  uint64_t zero = 0;
  atomic_compare_exchange_strong(&p->first_chunk_ns, &zero, now_ns());
  return 0;
}

/* The parts of chunk [c0, c1) for t threads, whole words each. */
static unsigned split(ibp_pack *p, job *jobs, unsigned t, uint64_t c0,
                      uint64_t c1) {
  uint64_t words = (c1 - c0 + 31) / 32;
  unsigned parts = t < words ? t : (unsigned)words;
  for (unsigned k = 0; k < parts; k++) {
    uint64_t w0 = words * k / parts, w1 = words * (k + 1) / parts;
    jobs[k].p = p;
    jobs[k].i0 = c0 + 32 * w0;
    jobs[k].i1 = c0 + 32 * w1 < c1 ? c0 + 32 * w1 : c1;
  }
  return parts;
}

int ibp__pack_fill(ibp_pack *p) {
  const uint32_t R = p->params->tensor_bytes;
  uint64_t chunk = (CHUNK_BYTES / R + 31) / 32 * 32;
  unsigned t = ibp__pack_threads();
  job jobs[MAX_THREADS];
  memset(jobs, 0, sizeof jobs);
  /* a part holds at most its tensors' bytes, plus R the codec may write
   * past a stream */
  size_t part = (size_t)((chunk / 32 + t - 1) / t * 32) * R + R + 16;
  int rc = 0;
  for (unsigned k = 0; k < t && rc == 0; k++) {
    jobs[k].stage = malloc(part);
    jobs[k].stage_cap = part;
    jobs[k].scratch = malloc(R);
    rc = jobs[k].stage && jobs[k].scratch ? 0 : -1;
  }
  lower_priority_once();
  p->packed_bytes = 0;
  p->prefix[0] = 0;
  for (uint64_t c0 = 0; rc == 0 && c0 < p->n; c0 += chunk) {
    if (p->stop && atomic_load(p->stop)) {
      rc = -1; /* the region is going away */
      break;
    }
    uint64_t c1 = c0 + chunk < p->n ? c0 + chunk : p->n;
    unsigned parts = split(p, jobs, t, c0, c1);
    direct_first(p, jobs, parts);
    parallel(jobs, parts, compress_part);
    place(p, jobs, parts, c0, c1);
    parallel(jobs, parts, copy_part);
    rc = publish(p, c0, c1);
  }
  p->offsets[p->n] = p->packed_bytes;
  for (unsigned k = 0; k < t; k++) {
    free(jobs[k].stage);
    free(jobs[k].scratch);
  }
  return rc;
}
