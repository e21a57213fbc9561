/*
 * e2e_batch: row copies that libibp holds and serves with one batched
 * launch (docs/ARCHITECTURE.md, "Batched launches"), checked for order:
 * every ordering point must launch what is held before the operation that
 * follows, so a held copy released late, or reordered with the operations
 * around it, shows as wrong bytes (README.md).
 *
 *   e2e_batch CASE [count]
 *
 * CASE: event, stream, legacy, hostfunc, query, overwrite, overlap,
 * deadline, calls (the application's cudaMemcpyBatchAsync), malformed
 * (calls the driver refuses), rows2d (cudaMemcpy2D / cudaMemcpy2DAsync),
 * written (rows written before their copies, while others are held),
 * full (more copies than a job list holds), random, or all.  Each case starts
 * from device buffers full of canary bytes and keeps a model of what they must
 * hold; it checks them by reading them back on a stream that nothing orders
 * with the held copies other than the ordering point under test (a non-blocking
 * stream after the point completed, or the stream of the point itself), so that
 * the check itself launches nothing that was held.
 *
 * Regions (tensor = the row size): rows256 (cudaMallocHost), rows1k
 * (cudaHostAlloc), rows768 (cudaHostRegister at an unaligned address);
 * plus a pinned buffer no rule selects and a pageable one.
 *
 * random: 2-4 threads (from the seed), each with its own lanes of device
 * memory and its own created streams (blocking and non-blocking) plus the
 * legacy stream (and, in the per-thread build, its default stream): row
 * copies, pinned and pageable copies, memsets and device-to-device copies,
 * each on the stream that owns its lane; a lane changes owner through an
 * event record + stream wait, or implicitly between the legacy stream and
 * a blocking stream.  A stream synchronize, query loop, event synchronize
 * or query loop, or host function completes a stream; its lanes are then
 * read back on a non-blocking stream and compared with the model.  count
 * (argv[2], else IBP_E2E_COPIES, else 2000; 600 under IBP_TEST_REDUCE)
 * operations in all.
 */
#include "e2e_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#define LEGACY cudaStreamLegacy /* 0 is this thread's own stream */
#define PTDS 1
#else
#define LEGACY ((cudaStream_t)0)
#define PTDS 0
#endif

#define DEV_BYTES ((size_t)256 << 10)
#define RB_BYTES ((size_t)256 << 10 | 4096) /* no rule selects this size */
#define TIMEOUT_NS 10000000000ull           /* query and flag loops */

/* Two regions keep one mask pair: the batched launches are what is tested
 * here, and each run's cluster search would be most of its time; the third
 * is clustered (clusters=auto, the default), so batches mix both. */
static e2e_region regions[] = {
    {.name = "rows256",
     .size = 4096 * 256,
     .tensor = 256,
     .keys = "clusters=1",
     .alloc = E2E_MALLOC_HOST,
     .data = E2E_F32},
    {.name = "rows1k",
     .size = 2048 * 1024,
     .tensor = 1024,
     .keys = "clusters=1",
     .alloc = E2E_HOST_ALLOC,
     .data = E2E_BF16},
    {.name = "rows768",
     .size = 2000 * 768,
     .tensor = 768,
     .alloc = E2E_REGISTER,
     .misalign = 64,
     .data = E2E_F32},
    /* no rule selects it: its copies pass through (and are ordering
     * points) */
    {.name = NULL,
     .size = (192 << 10) + 12,
     .tensor = 4096,
     .alloc = E2E_HOST_ALLOC,
     .data = E2E_F32},
};
#define NROWREGIONS 3
#define PINNED (&regions[3])
#define NREGIONS ((int)(sizeof regions / sizeof regions[0]))

static unsigned char *pageable;
static size_t pageable_len = 192 << 10;

/* ---- device buffers and their model -------------------------------------- */

typedef struct dbuf {
  unsigned char *dev, *model;
  size_t len;
  const char *name;
} dbuf;

static void dbuf_init(dbuf *b, size_t len, const char *name) {
  b->len = len;
  b->name = name;
  E2E_CK(cudaMalloc((void **)&b->dev, len));
  b->model = malloc(len);
  E2E_SYS(b->model != NULL);
}

static void dbuf_free(dbuf *b) {
  E2E_CK(cudaFree(b->dev));
  free(b->model);
}

/* Fresh canary bytes over the whole buffer (a synchronous copy). */
static void dbuf_canary(dbuf *b, e2e_rng *rng) {
  e2e_rng_bytes(rng, b->model, b->len);
  E2E_CK(cudaMemcpy(b->dev, b->model, b->len, cudaMemcpyDefault));
}

/* Compares got with b's model at [at, at+n); e2e_fail on the first wrong
 * byte.  Returns 0 when equal. */
static int compare(const char *what, const dbuf *b, size_t at, size_t n,
                   const unsigned char *got) {
  if (memcmp(got, b->model + at, n) == 0)
    return 0;
  size_t i = 0, wrong = 0;
  while (got[i] == b->model[at + i])
    i++;
  for (size_t k = i; k < n; k++)
    wrong += got[k] != b->model[at + k];
  e2e_fail("%s: %s byte +%zu: expected 0x%02x, got 0x%02x (%zu wrong bytes "
           "in [%zu, %zu))",
           what, b->name, at + i, b->model[at + i], got[i], wrong, at, at + n);
  return 1;
}

/* Reads b[at, at+n) back on s into the pinned rb (an ordering point of s
 * only), synchronizes s and compares. */
static int check_on(const char *what, cudaStream_t s, const dbuf *b, size_t at,
                    size_t n, unsigned char *rb) {
  E2E_CK(cudaMemcpyAsync(rb, b->dev + at, n, cudaMemcpyDeviceToHost, s));
  E2E_CK(cudaStreamSynchronize(s));
  return compare(what, b, at, n, rb);
}

/* ---- copies into a buffer, with the model -------------------------------- */

static const e2e_region *pick_region(e2e_rng *rng) {
  return &regions[e2e_rng_below(rng, NROWREGIONS)];
}

static size_t rows_of(const e2e_region *r) {
  return r->size / r->tensor;
}

/* Rows [row, row+n) of r into b at `at` on s, HostToDevice or Default. */
static void row_copy(cudaStream_t s, dbuf *b, size_t at, const e2e_region *r,
                     size_t row, size_t n, int dflt) {
  size_t off = row * r->tensor, len = n * r->tensor;
  E2E_CK(cudaMemcpyAsync(b->dev + at, r->host + off, len,
                         dflt ? cudaMemcpyDefault : cudaMemcpyHostToDevice, s));
  memcpy(b->model + at, r->mirror + off, len);
}

/* A random row into b at `at`; returns its length. */
static size_t random_row(e2e_rng *rng, cudaStream_t s, dbuf *b, size_t at) {
  const e2e_region *r = pick_region(rng);
  row_copy(s, b, at, r, e2e_rng_below(rng, rows_of(r)), 1,
           e2e_rng_pct(rng, 30));
  return r->tensor;
}

/* n random rows laid out one after the other from `at` with random gaps
 * (no two overlap); returns the end. */
static size_t random_rows(e2e_rng *rng, cudaStream_t s, dbuf *b, size_t at,
                          int n) {
  for (int i = 0; i < n; i++)
    at += random_row(rng, s, b, at) + e2e_rng_below(rng, 64);
  return at;
}

static void d2d(cudaStream_t s, dbuf *to, size_t to_at, const dbuf *from,
                size_t from_at, size_t n) {
  E2E_CK(cudaMemcpyAsync(to->dev + to_at, from->dev + from_at, n,
                         cudaMemcpyDeviceToDevice, s));
  memmove(to->model + to_at, from->model + from_at, n);
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void nap_us(long us) {
  struct timespec t = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&t, NULL);
}

/* ---- completion points --------------------------------------------------- */

static void CUDART_CB set_flag(void *arg) {
  atomic_store((atomic_int *)arg, 1);
}

/* Waits (no CUDA call) until *flag is set; 0, or 1 after a timeout. */
static int wait_flag(atomic_int *flag, const char *what) {
  uint64_t t0 = now_ns();
  while (!atomic_load(flag)) {
    if (now_ns() - t0 > TIMEOUT_NS) {
      e2e_fail("%s: the host function never ran (10 s): a held copy before "
               "it was never launched?",
               what);
      return 1;
    }
    nap_us(20);
  }
  return 0;
}

/* Polls cudaStreamQuery(s) (ev NULL) or cudaEventQuery(ev) until done. */
static int query_loop(cudaStream_t s, cudaEvent_t ev, const char *what) {
  uint64_t t0 = now_ns();
  for (unsigned long polls = 0;; polls++) {
    cudaError_t e = ev ? cudaEventQuery(ev) : cudaStreamQuery(s);
    if (e == cudaSuccess)
      return 0;
    if (e != cudaErrorNotReady)
      e2e_ck_(e, ev ? "cudaEventQuery" : "cudaStreamQuery", __FILE__, __LINE__);
    if (now_ns() - t0 > TIMEOUT_NS) {
      e2e_fail("%s: still not ready after %lu polls (10 s)", what, polls);
      return 1;
    }
  }
}

/* ---- the ordering cases -------------------------------------------------- */

typedef struct env {
  e2e_rng rng;
  dbuf dst, dst2;
  unsigned char *rb; /* pinned read-back buffer */
  cudaStream_t blk, nb, other;
  cudaEvent_t ev;
} env;

static void fresh(env *e) {
  dbuf_canary(&e->dst, &e->rng);
  dbuf_canary(&e->dst2, &e->rng);
}

/* (a) rows on A, event record on A; B waits for it, then reads. */
static void case_event(env *e) {
  cudaStream_t as[2] = {e->blk, e->nb};
  for (int round = 0; round < 8; round++) {
    cudaStream_t a = as[round % 2];
    fresh(e);
    size_t end = random_rows(&e->rng, a, &e->dst, 0, 32 + round * 8);
    E2E_CK(cudaEventRecord(e->ev, a));
    E2E_CK(cudaStreamWaitEvent(e->other, e->ev, 0));
    if (round % 4 < 2) { /* D2D on B, then D2H of the copy */
      d2d(e->other, &e->dst2, 0, &e->dst, 0, end);
      check_on("event: rows on A, record, B waits, D2D and D2H on B", e->other,
               &e->dst2, 0, end, e->rb);
    } else {
      check_on("event: rows on A, record, B waits, D2H on B", e->other, &e->dst,
               0, end, e->rb);
    }
  }
}

/* (b) rows on A, then a device-to-device copy on A that reads them. */
static void case_stream(env *e) {
  cudaStream_t as[3] = {e->blk, e->nb, LEGACY};
  for (int round = 0; round < 9; round++) {
    cudaStream_t a = as[round % 3];
    fresh(e);
    size_t end = random_rows(&e->rng, a, &e->dst, 0, 24 + round * 4);
    d2d(a, &e->dst2, 100, &e->dst, 0, end);
    if (round % 2)
      E2E_CK(cudaMemsetAsync(e->dst.dev, 0x5a, 1000, a)); /* after the read */
    check_on("stream: rows on A, D2D on A, D2H on A", a, &e->dst2, 0, end + 100,
             e->rb);
    E2E_CK(cudaStreamSynchronize(e->other)); /* nothing: B is idle */
  }
}

/* (c) legacy-stream semantics: rows on a blocking stream, then the legacy
 * stream reads; rows on the legacy stream, then a blocking stream (or the
 * per-thread stream) reads.  Only the reading stream is synchronized. */
static void case_legacy(env *e) {
  for (int round = 0; round < 9; round++) {
    fresh(e);
    cudaStream_t w, r;
    const char *what;
    switch (round % 3) {
    case 0:
      w = e->blk, r = LEGACY;
      what = "legacy: rows on a blocking stream, D2D+D2H on the legacy stream";
      break;
    case 1:
      w = LEGACY, r = e->blk;
      what = "legacy: rows on the legacy stream, D2D+D2H on a blocking stream";
      break;
    default:
      w = round % 2 ? cudaStreamLegacy : LEGACY, r = cudaStreamPerThread;
      what = "legacy: rows on the legacy stream, D2D+D2H on "
             "cudaStreamPerThread";
      break;
    }
    size_t end = random_rows(&e->rng, w, &e->dst, 0, 40);
    d2d(r, &e->dst2, 0, &e->dst, 0, end);
    check_on(what, r, &e->dst2, 0, end, e->rb);
  }
}

/* (d) rows on A, then a host function on A: once it ran,
 * the rows are on the device; read them on a non-blocking stream B. */
static void case_hostfunc(env *e) {
  cudaStream_t as[3] = {e->blk, e->nb, LEGACY};
  for (int round = 0; round < 9; round++) {
    cudaStream_t a = as[round % 3];
    fresh(e);
    size_t end = random_rows(&e->rng, a, &e->dst, 0, 32);
    atomic_int flag = 0;
    E2E_CK(cudaLaunchHostFunc(a, set_flag, &flag));
    if (wait_flag(&flag, "hostfunc"))
      return;
    check_on("hostfunc: rows on A, host function on A ran, D2H on B", e->other,
             &e->dst, 0, end, e->rb);
    check_on("hostfunc: ... then D2H on A", a, &e->dst, 0, end, e->rb);
  }
}

/* (e) rows on A, then cudaStreamQuery(A) / cudaEventQuery until success
 * (a held copy never launched would spin forever, or read as canary), or
 * cudaEventSynchronize; then read them on B. */
static void case_query(env *e) {
  cudaStream_t as[3] = {e->blk, e->nb, LEGACY};
  for (int round = 0; round < 9; round++) {
    cudaStream_t a = as[round % 3];
    fresh(e);
    size_t end = random_rows(&e->rng, a, &e->dst, 0, 32);
    const char *what;
    int bad;
    if (round % 3 == 0) {
      what = "query: rows on A, cudaStreamQuery(A) loop, D2H on B";
      bad = query_loop(a, NULL, what);
    } else if (round % 3 == 1) {
      what = "query: rows on A, record, cudaEventQuery loop, D2H on B";
      E2E_CK(cudaEventRecord(e->ev, a));
      bad = query_loop(a, e->ev, what);
    } else {
      what = "query: rows on A, record, cudaEventSynchronize, D2H on B";
      E2E_CK(cudaEventRecord(e->ev, a));
      E2E_CK(cudaEventSynchronize(e->ev));
      bad = 0;
    }
    if (!bad)
      check_on(what, e->other, &e->dst, 0, end, e->rb);
  }
}

/* (e2) steps as a model's loop makes them: 16 rows on A (half of them
 * cudaMemcpyDefault), a cudaEventQuery of the last step's event after
 * each, then the step's cudaMemcpyAsync(Default) back to the host (its
 * ordering point: a unified device-to-host copy), a record and a
 * synchronisation.  A query waits for what came before its record, not
 * for rows held after it; run_batch.sh wants 8 rows or more a batched
 * launch (a query that launched or ended every stream's batch gave 1). */
static void case_steps(env *e) {
  cudaStream_t as[2] = {e->nb, e->blk};
  for (int round = 0; round < 24; round++) {
    cudaStream_t a = as[round / 12];
    if (round % 12 == 0)
      fresh(e);
    size_t end = 0;
    for (int i = 0; i < 16; i++) {
      const e2e_region *r = pick_region(&e->rng);
      row_copy(a, &e->dst, end, r, e2e_rng_below(&e->rng, rows_of(r)), 1,
               i % 2);
      end += r->tensor;
      cudaError_t q = cudaEventQuery(e->ev);
      if (q != cudaSuccess && q != cudaErrorNotReady)
        e2e_ck_(q, "cudaEventQuery", __FILE__, __LINE__);
    }
    E2E_CK(cudaMemcpyAsync(e->rb, e->dst.dev, end, cudaMemcpyDefault, a));
    E2E_CK(cudaEventRecord(e->ev, a));
    E2E_CK(cudaStreamSynchronize(a));
    if (compare("steps: 16 rows on A, event queries, a unified D2H", &e->dst, 0,
                end, e->rb))
      return;
  }
}

/* (f) rows into [0, end) on A, then a second write over part of them on A
 * (another region row, a pinned or pageable copy, a memset, a D2D copy, a
 * synchronous copy): where they overlap the second one's bytes must win. */
static void case_overwrite(env *e) {
  cudaStream_t as[3] = {e->blk, e->nb, LEGACY};
  for (int round = 0; round < 42; round++) {
    cudaStream_t a = as[round % 3];
    int kind = round / 3 % 7;
    if (kind == 6 && (PTDS || a == e->nb))
      kind = 2; /* cudaMemcpy is ordered after A only on the legacy stream */
    fresh(e);
    size_t end = random_rows(&e->rng, a, &e->dst, 0, 16);
    size_t len = 1 + e2e_rng_below(&e->rng, 3000);
    size_t at = e2e_rng_below(&e->rng, end - 1);
    if (at + len > end + 200)
      len = end + 200 - at;
    static const char *const kinds[] = {"a region row",
                                        "a pinned copy (no region)",
                                        "a pageable copy",
                                        "a memset",
                                        "a D2D copy",
                                        "rows of a region",
                                        "a synchronous cudaMemcpy"};
    size_t poff = e2e_rng_below(&e->rng, pageable_len - len); /* both */
    switch (kind) {
    case 0:
      random_row(&e->rng, a, &e->dst, at);
      break;
    case 1:
      E2E_CK(cudaMemcpyAsync(e->dst.dev + at, PINNED->host + poff, len,
                             cudaMemcpyHostToDevice, a));
      memcpy(e->dst.model + at, PINNED->mirror + poff, len);
      break;
    case 2:
      E2E_CK(cudaMemcpyAsync(e->dst.dev + at, pageable + poff, len,
                             cudaMemcpyDefault, a));
      memcpy(e->dst.model + at, pageable + poff, len);
      break;
    case 3:
      E2E_CK(cudaMemsetAsync(e->dst.dev + at, 0xa5, len, a));
      memset(e->dst.model + at, 0xa5, len);
      break;
    case 4:
      d2d(a, &e->dst, at, &e->dst2, 0, len);
      break;
    case 5: { /* several rows, whole, from one region */
      const e2e_region *r = pick_region(&e->rng);
      size_t n = 1 + len / r->tensor;
      row_copy(a, &e->dst, at, r, e2e_rng_below(&e->rng, rows_of(r) - n), n, 0);
      len = n * r->tensor;
      break;
    }
    default:
      E2E_CK(cudaMemcpy(e->dst.dev + at, pageable + poff, len,
                        cudaMemcpyHostToDevice));
      memcpy(e->dst.model + at, pageable + poff, len);
      break;
    }
    char what[160];
    snprintf(what, sizeof what,
             "overwrite: rows on A, then %s over [%zu, %zu) on A", kinds[kind],
             at, at + len);
    size_t n = at + len > end ? at + len : end;
    check_on(what, a, &e->dst, 0, n + 64, e->rb);
  }
}

/* (g) many rows on one stream into a small window: the last one issued
 * wins wherever they overlap. */
static void case_overlap(env *e) {
  cudaStream_t as[3] = {e->blk, e->nb, LEGACY};
  for (int round = 0; round < 12; round++) {
    cudaStream_t a = as[round % 3];
    fresh(e);
    size_t window = 2048 + 1024 * (size_t)(round % 4);
    int n = 20 + 40 * (round % 5);
    for (int i = 0; i < n; i++) {
      const e2e_region *r = pick_region(&e->rng);
      size_t at = e2e_rng_below(&e->rng, window - r->tensor + 1);
      row_copy(a, &e->dst, at, r, e2e_rng_below(&e->rng, rows_of(r)), 1,
               e2e_rng_pct(&e->rng, 30));
    }
    char what[128];
    snprintf(what, sizeof what,
             "overlap: %d rows on one stream into %zu bytes, last one wins", n,
             window);
    check_on(what, a, &e->dst, 0, window + 64, e->rb);
  }
}

/* (h) rows on A and on the legacy stream, then no CUDA call for 20 ms (a
 * program polling host memory; 200 times batch.profile's deadline): the
 * deadline must launch them; read them on B, which nothing orders with A. */
static void case_deadline(env *e) {
  for (int round = 0; round < 4; round++) {
    fresh(e);
    cudaStream_t a = round % 2 ? e->nb : e->blk;
    size_t end = random_rows(&e->rng, a, &e->dst, 0, 24);
    size_t end2 =
        round >= 2 ? random_rows(&e->rng, LEGACY, &e->dst2, 0, 24) : 0;
    volatile unsigned long spins = 0;
    uint64_t t0 = now_ns();
    while (now_ns() - t0 < 20000000ull)
      spins++;
    /* the kernel may still be running in the emulator: poll B for up to
     * 10 s (B's copies order nothing held on A) */
    for (int tries = 0;; tries++) {
      E2E_CK(cudaMemcpyAsync(e->rb, e->dst.dev, end, cudaMemcpyDeviceToHost,
                             e->other));
      if (end2)
        E2E_CK(cudaMemcpyAsync(e->rb + end, e->dst2.dev, end2,
                               cudaMemcpyDeviceToHost, e->other));
      E2E_CK(cudaStreamSynchronize(e->other));
      int ok = memcmp(e->rb, e->dst.model, end) == 0 &&
               memcmp(e->rb + end, e->dst2.model, end2) == 0;
      if (ok)
        break;
      if (tries == 500) {
        compare("deadline: rows on A, 20 ms without a CUDA call, D2H on B "
                "(10 s later)",
                &e->dst, 0, end, e->rb);
        compare("deadline: rows on the legacy stream, 20 ms without a CUDA "
                "call, D2H on B (10 s later)",
                &e->dst2, 0, end2, e->rb + end);
        break;
      }
      nap_us(20000);
    }
    E2E_CK(cudaDeviceSynchronize());
  }
}

/* (i) rows held while the program writes rows of the region it has not
 * copied yet in the round -- the row it copies next, or a neighbour that
 * shares a page with rows already held: each copy must carry the bytes of
 * its call, whichever of the write tracker's scans sees the write (the
 * scanner's, which scans whole shares of held copies ahead of the flush,
 * or the flush's own).  A row is never written after its copy was issued
 * in the round: that would race with the copy itself. */
static void write_row(const e2e_region *r, size_t row, e2e_rng *rng) {
  size_t off = row * r->tensor;
  for (int k = 0; k < 4; k++) {
    size_t at = off + e2e_rng_below(rng, r->tensor);
    r->host[at] ^= (unsigned char)(1 + e2e_rng_below(rng, 255));
    r->mirror[at] = r->host[at];
  }
}

static void case_written(env *e) {
  cudaStream_t as[3] = {e->blk, e->nb, LEGACY};
  for (int round = 0; round < 12; round++) {
    cudaStream_t a = as[round % 3];
    fresh(e);
    const e2e_region *r = pick_region(&e->rng);
    const size_t nrows = rows_of(r), per_page = 4096 / r->tensor + 1;
    unsigned char *copied = calloc(nrows, 1);
    if (!copied)
      e2e_die("written: out of memory");
    size_t at = 0, n = 20 + e2e_rng_below(&e->rng, 100);
    for (size_t i = 0; i < n && at + r->tensor <= e->dst.len; i++) {
      size_t row = e2e_rng_below(&e->rng, nrows);
      if (copied[row])
        continue;
      if (e2e_rng_pct(&e->rng, 40)) {
        size_t w = row;
        if (e2e_rng_pct(&e->rng, 50)) { /* a neighbour, not copied yet */
          size_t near = row + 1 + e2e_rng_below(&e->rng, per_page);
          w = near < nrows && !copied[near] ? near : row;
        }
        write_row(r, w, &e->rng);
      }
      copied[row] = 1;
      row_copy(a, &e->dst, at, r, row, 1, 0);
      at += r->tensor;
    }
    char what[128];
    snprintf(what, sizeof what,
             "written: rows of %s on A, written before their copies, D2H "
             "on A",
             r->name);
    check_on(what, a, &e->dst, 0, at, e->rb);
    free(copied);
  }
}

/* (j) more row copies than one job list holds (4096) on one stream, all
 * within the deadline (the ctest e2e_batch_full runs this case under a
 * profile whose batch_deadline_us is long): the full list is handed over
 * whole, the copies after it are held in a fresh one, and both land. */
static void case_full(env *e) {
  const size_t n = 4096 + 700;
  dbuf big;
  dbuf_init(&big, n * 1024, "big"); /* the largest row: 1 KiB */
  dbuf_canary(&big, &e->rng);
  size_t len = 0;
  for (size_t i = 0; i < n; i++)
    len += random_row(&e->rng, e->nb, &big, len);
  for (size_t at = 0; at < len; at += 256 << 10) {
    const size_t piece = len - at < (256 << 10) ? len - at : 256 << 10;
    check_on("full: 4796 rows on A, D2H on A", e->nb, &big, at, piece, e->rb);
  }
  dbuf_free(&big);
}

/* ---- the application's own batches and 2D copies ------------------------- */

/* The ordering point that ends a round on stream a, and the stream on which
 * the round is then read back (a stream that nothing orders with what a
 * holds other than the point itself).  NULL after a failed wait. */
enum point {
  P_READ_ON_A, /* D2H on a itself */
  P_EVENT_WAIT,
  P_STREAM_SYNC,
  P_STREAM_QUERY,
  P_EVENT_SYNC,
  P_EVENT_QUERY,
  P_HOSTFUNC,
  P_DEVICE_SYNC,
  P_LEGACY_READ, /* D2H on the stream a synchronizes with implicitly */
  P_COUNT
};

static const char *const point_names[P_COUNT] = {
    "D2H on A",
    "event record on A, B waits, D2H on B",
    "cudaStreamSynchronize(A), D2H on B",
    "cudaStreamQuery(A) loop, D2H on B",
    "event record, cudaEventSynchronize, D2H on B",
    "event record, cudaEventQuery loop, D2H on B",
    "host function on A ran, D2H on B",
    "cudaDeviceSynchronize, D2H on B",
    "D2H on the legacy (or a blocking) stream"};

static int is_blocking(env *e, cudaStream_t a) {
  return a == e->blk || (PTDS && a == (cudaStream_t)0) ||
         a == cudaStreamPerThread;
}

static cudaStream_t point(env *e, cudaStream_t a, enum point p) {
  atomic_int flag = 0;
  switch (p) {
  case P_EVENT_WAIT:
    E2E_CK(cudaEventRecord(e->ev, a));
    E2E_CK(cudaStreamWaitEvent(e->other, e->ev, 0));
    return e->other;
  case P_STREAM_SYNC:
    E2E_CK(cudaStreamSynchronize(a));
    return e->other;
  case P_STREAM_QUERY:
    return query_loop(a, NULL, point_names[p]) ? NULL : e->other;
  case P_EVENT_SYNC:
    E2E_CK(cudaEventRecord(e->ev, a));
    E2E_CK(cudaEventSynchronize(e->ev));
    return e->other;
  case P_EVENT_QUERY:
    E2E_CK(cudaEventRecord(e->ev, a));
    return query_loop(a, e->ev, point_names[p]) ? NULL : e->other;
  case P_HOSTFUNC:
    E2E_CK(cudaLaunchHostFunc(a, set_flag, &flag));
    return wait_flag(&flag, point_names[p]) ? NULL : e->other;
  case P_DEVICE_SYNC:
    E2E_CK(cudaDeviceSynchronize());
    return e->other;
  case P_LEGACY_READ:
    if (a == LEGACY || a == cudaStreamLegacy)
      return e->blk;
    if (is_blocking(e, a))
      return cudaStreamLegacy;
    return a; /* a non-blocking stream: nothing implicit */
  default:
    return a;
  }
}

static struct cudaMemcpyAttributes attr_of(enum cudaMemcpySrcAccessOrder o,
                                           e2e_rng *rng) {
  struct cudaMemcpyAttributes a;
  memset(&a, 0, sizeof a);
  a.srcAccessOrder = o;
  if (e2e_rng_pct(rng, 30)) { /* hints are ignored for pinned and device */
    a.srcLocHint.type = cudaMemLocationTypeHost;
    a.dstLocHint.type = cudaMemLocationTypeDevice;
  }
  a.flags = e2e_rng_pct(rng, 20) ? cudaMemcpyFlagPreferOverlapWithCompute : 0;
  return a;
}

/* dst: [0, WAREA) is what calls write; [RAREA_AT, RAREA_AT + RAREA) is
 * written by a round's first call only and read by its D2D and D2H
 * entries.  The last QUARANTINE rows of each region are read only by
 * DuringApiCall entries (and overwritten right after such a call). */
#define WAREA ((size_t)96 << 10)
#define RAREA_AT ((size_t)112 << 10)
#define RAREA ((size_t)32 << 10)
#define QUARANTINE 64
#define HOSTOUT ((size_t)64 << 10)
#define MAXENTRIES 64

enum ekind { E_REGION, E_PINNED, E_PAGEABLE, E_D2D, E_D2H, E_KINDS };

typedef struct entry {
  enum ekind kind;
  const e2e_region *r; /* E_REGION */
  size_t src_off, len, dst_off;
  int host_pinned; /* E_D2H: into the pinned (else pageable) out buffer */
  enum cudaMemcpySrcAccessOrder order;
} entry;

typedef struct call {
  entry en[MAXENTRIES];
  size_t n, nattrs;
  size_t idxs[MAXENTRIES];
  struct cudaMemcpyAttributes attrs[MAXENTRIES];
} call;

typedef struct calls_env {
  unsigned char *out_pinned, *out_pageable; /* D2H entries' destinations */
  unsigned char *exp_pinned, *exp_pageable; /* what they must hold */
  size_t out_at;                            /* next free offset in both */
} calls_env;

static const char *const order_names[] = {"Invalid", "Stream", "DuringApiCall",
                                          "Any"};

/* Random attribute ranges over n entries; orders from `orders` (mask of
 * 1 << cudaMemcpySrcAccessOrder*). */
static void call_ranges(call *c, size_t n, unsigned orders, e2e_rng *rng) {
  static const enum cudaMemcpySrcAccessOrder all[] = {
      cudaMemcpySrcAccessOrderStream, cudaMemcpySrcAccessOrderAny,
      cudaMemcpySrcAccessOrderDuringApiCall};
  c->n = n;
  size_t want = 1 + e2e_rng_below(rng, n < 6 ? n : 6);
  c->nattrs = 0;
  for (size_t i = 0; i < n; i++) {
    if (i == 0 ||
        (c->nattrs < want && e2e_rng_below(rng, n) < want)) { /* a cut */
      enum cudaMemcpySrcAccessOrder o;
      do
        o = all[e2e_rng_below(rng, 3)];
      while (!(orders & (1u << o)));
      c->idxs[c->nattrs] = i;
      c->attrs[c->nattrs++] = attr_of(o, rng);
    }
    c->en[i].order = c->attrs[c->nattrs - 1].srcAccessOrder;
  }
}

/* A region entry's source: DuringApiCall entries read the quarantine, the
 * others the rest; whole rows or anything (straddling rows). */
static void region_source(entry *en, e2e_rng *rng) {
  const e2e_region *r = pick_region(rng);
  size_t q = QUARANTINE * r->tensor, lo = 0, hi = r->size - q;
  if (en->order == cudaMemcpySrcAccessOrderDuringApiCall)
    lo = hi, hi = r->size;
  en->r = r;
  if (e2e_rng_pct(rng, 90)) { /* mostly whole rows: the tensors fit */
    size_t rows = 1 + e2e_rng_below(rng, 2);
    en->len = rows * r->tensor;
    en->src_off =
        lo + r->tensor * e2e_rng_below(rng, (hi - lo) / r->tensor - rows + 1);
  } else {
    en->len = e2e_rng_len(rng, 2 * r->tensor);
    en->src_off = lo + e2e_rng_below(rng, hi - lo - en->len + 1);
  }
}

/* Entry i of c: kind from the mix (percent region, the rest spread). */
static void make_entry(call *c, size_t i, unsigned region_pct, e2e_rng *rng) {
  entry *en = &c->en[i];
  *en = (entry){.order = en->order};
  uint64_t roll = e2e_rng_below(rng, 100);
  if (roll < region_pct)
    en->kind = E_REGION;
  else
    en->kind = (enum ekind)(1 + e2e_rng_below(rng, E_KINDS - 1));
  switch (en->kind) {
  case E_REGION:
    region_source(en, rng);
    break;
  case E_PINNED:
  case E_PAGEABLE:
    en->len = e2e_rng_len(rng, 1536);
    en->src_off = e2e_rng_below(rng, pageable_len - en->len); /* both */
    break;
  default: /* D2D, D2H: from the read area */
    en->len = e2e_rng_len(rng, 1536);
    en->src_off = RAREA_AT + e2e_rng_below(rng, RAREA - en->len + 1);
    en->host_pinned = e2e_rng_pct(rng, 50);
    break;
  }
}

/* Lays the device destinations of c's entries out in [lo, hi) with
 * random gaps, in a random order (no two overlap: the copies of one call
 * run in any order); D2H entries get the next host offsets. */
static void layout(call *c, calls_env *ce, size_t lo, size_t hi, e2e_rng *rng) {
  size_t perm[MAXENTRIES], need = 0;
  for (size_t i = 0; i < c->n; i++) {
    perm[i] = i;
    need += c->en[i].kind == E_D2H ? 0 : c->en[i].len + 64;
  }
  for (size_t i = c->n; i > 1; i--) {
    size_t j = e2e_rng_below(rng, i), t = perm[i - 1];
    perm[i - 1] = perm[j];
    perm[j] = t;
  }
  if (need > hi - lo)
    e2e_die("layout: %zu bytes do not fit in %zu", need, hi - lo);
  size_t at = lo + e2e_rng_below(rng, hi - lo - need + 1);
  for (size_t k = 0; k < c->n; k++) {
    entry *en = &c->en[perm[k]];
    if (en->kind == E_D2H && ce->out_at + en->len > HOSTOUT)
      en->kind = E_D2D; /* the host buffers are full */
    if (en->kind == E_D2H) {
      en->dst_off = ce->out_at;
      ce->out_at += en->len + e2e_rng_below(rng, 16);
      continue;
    }
    en->dst_off = at;
    at += en->len + e2e_rng_below(rng, 64);
  }
}

static const unsigned char *entry_src(const env *e, const entry *en,
                                      int expected) {
  switch (en->kind) {
  case E_REGION:
    return (expected ? en->r->mirror : en->r->host) + en->src_off;
  case E_PINNED:
    return (expected ? PINNED->mirror : PINNED->host) + en->src_off;
  case E_PAGEABLE:
    return pageable + en->src_off;
  default:
    return (expected ? e->dst.model : e->dst.dev) + en->src_off;
  }
}

/* Issues c on stream s with cudaMemcpyBatchAsync and applies it to the
 * model; returns the call's result. */
static cudaError_t issue(env *e, calls_env *ce, const call *c, cudaStream_t s) {
  void *dsts[MAXENTRIES];
  const void *srcs[MAXENTRIES];
  size_t sizes[MAXENTRIES], idxs[MAXENTRIES];
  struct cudaMemcpyAttributes attrs[MAXENTRIES];
  for (size_t i = 0; i < c->n; i++) {
    const entry *en = &c->en[i];
    unsigned char *out = en->host_pinned ? ce->out_pinned : ce->out_pageable;
    dsts[i] = en->kind == E_D2H ? out + en->dst_off : e->dst.dev + en->dst_off;
    srcs[i] = entry_src(e, en, 0);
    sizes[i] = en->len;
  }
  memcpy(idxs, c->idxs, c->nattrs * sizeof *idxs);
  memcpy(attrs, c->attrs, c->nattrs * sizeof *attrs);
  cudaError_t err =
      cudaMemcpyBatchAsync(dsts, srcs, sizes, c->n, attrs, idxs, c->nattrs, s);
  if (err != cudaSuccess)
    return err;
  for (size_t i = 0; i < c->n; i++) { /* no entry reads another's dst */
    const entry *en = &c->en[i];
    const unsigned char *from = entry_src(e, en, 1);
    if (en->kind == E_D2H)
      memcpy((en->host_pinned ? ce->exp_pinned : ce->exp_pageable) +
                 en->dst_off,
             from, en->len);
    else
      memcpy(e->dst.model + en->dst_off, from, en->len);
  }
  return cudaSuccess;
}

/* Whether entry j of c reads host bytes that overlap en's source. */
static int reads_too(const call *c, const entry *en) {
  for (size_t j = 0; j < c->n; j++) {
    const entry *o = &c->en[j];
    if (o == en || o->kind != en->kind || o->r != en->r ||
        o->order == cudaMemcpySrcAccessOrderDuringApiCall)
      continue;
    if (o->src_off < en->src_off + en->len && en->src_off < o->src_off + o->len)
      return 1;
  }
  return 0;
}

/* Right after the call returned: new bytes over the sources of its
 * DuringApiCall entries (a region's quarantine rows, the pinned buffer,
 * pageable memory) that no other entry of the call reads; the device must
 * have the old ones. */
static void overwrite_sources(call *c, e2e_rng *rng) {
  for (size_t i = 0; i < c->n; i++) {
    entry *en = &c->en[i];
    if (en->order != cudaMemcpySrcAccessOrderDuringApiCall ||
        en->kind >= E_D2D || reads_too(c, en))
      continue;
    unsigned char *host, *mirror;
    if (en->kind == E_REGION)
      host = en->r->host, mirror = en->r->mirror;
    else if (en->kind == E_PINNED)
      host = PINNED->host, mirror = PINNED->mirror;
    else
      host = pageable, mirror = NULL;
    if (mirror) {
      e2e_rng_bytes(rng, mirror + en->src_off, en->len);
      memcpy(host + en->src_off, mirror + en->src_off, en->len);
    } else {
      e2e_rng_bytes(rng, host + en->src_off, en->len);
    }
  }
}

static void describe(const call *c, char *buf, size_t size) {
  static const char *const kinds[] = {"region", "pinned", "pageable", "D2D",
                                      "D2H"};
  size_t at = (size_t)snprintf(
      buf, size, "%zu entries, %zu attribute ranges:", c->n, c->nattrs);
  for (size_t a = 0; a < c->nattrs && at < size; a++) {
    size_t end = a + 1 < c->nattrs ? c->idxs[a + 1] : c->n, count[E_KINDS];
    memset(count, 0, sizeof count);
    for (size_t i = c->idxs[a]; i < end; i++)
      count[c->en[i].kind]++;
    at += (size_t)snprintf(buf + at, size - at, " [%zu %s:", c->idxs[a],
                           order_names[c->attrs[a].srcAccessOrder]);
    for (int k = 0; k < E_KINDS && at < size; k++)
      if (count[k])
        at += (size_t)snprintf(buf + at, size - at, " %zu %s", count[k],
                               kinds[k]);
    if (at < size)
      at += (size_t)snprintf(buf + at, size - at, "]");
  }
}

/* Reads the round back after its ordering point: the device buffer on
 * `on`, then the D2H entries' host buffers. */
static int check_round(env *e, calls_env *ce, cudaStream_t on,
                       const char *what) {
  if (!on)
    return 1;
  if (check_on(what, on, &e->dst, 0, RAREA_AT + RAREA, e->rb))
    return 1;
  dbuf h = {ce->exp_pinned, ce->exp_pinned, HOSTOUT, "D2H entries (pinned)"};
  if (compare(what, &h, 0, ce->out_at, ce->out_pinned))
    return 1;
  h = (dbuf){ce->exp_pageable, ce->exp_pageable, HOSTOUT,
             "D2H entries (pageable)"};
  return compare(what, &h, 0, ce->out_at, ce->out_pageable);
}

static void round_begin(env *e, calls_env *ce) {
  fresh(e);
  e2e_rng_bytes(&e->rng, ce->exp_pinned, HOSTOUT);
  memcpy(ce->out_pinned, ce->exp_pinned, HOSTOUT);
  e2e_rng_bytes(&e->rng, ce->exp_pageable, HOSTOUT);
  memcpy(ce->out_pageable, ce->exp_pageable, HOSTOUT);
  ce->out_at = 0;
}

/* A call of region entries only (Stream and Any ranges): libibp holds all
 * of it.  Destinations in [lo, hi). */
static void region_call(env *e, calls_env *ce, cudaStream_t s, size_t lo,
                        size_t hi, size_t n) {
  call c;
  call_ranges(&c, n,
              1u << cudaMemcpySrcAccessOrderStream |
                  1u << cudaMemcpySrcAccessOrderAny,
              &e->rng);
  for (size_t i = 0; i < n; i++)
    make_entry(&c, i, 100, &e->rng);
  layout(&c, ce, lo, hi, &e->rng);
  E2E_CK(issue(e, ce, &c, s));
}

static void calls_alloc(calls_env *ce) {
  E2E_CK(cudaMallocHost((void **)&ce->out_pinned, HOSTOUT));
  ce->out_pageable = malloc(HOSTOUT);
  ce->exp_pinned = malloc(HOSTOUT);
  ce->exp_pageable = malloc(HOSTOUT);
  E2E_SYS(ce->out_pageable && ce->exp_pinned && ce->exp_pageable);
}

static void calls_free(calls_env *ce) {
  E2E_CK(cudaFreeHost(ce->out_pinned));
  free(ce->out_pageable);
  free(ce->exp_pinned);
  free(ce->exp_pageable);
}

/* (i) the application's own cudaMemcpyBatchAsync.  Each round on one
 * stream: a call of region entries only into both areas (held), then one
 * or two calls mixing region entries with every other kind of entry and
 * attribute (D2D and D2H entries read what the first call wrote: what is
 * held must run before the rest), whose destinations overlap the first
 * call's (later wins); DuringApiCall sources are overwritten as soon as a
 * call returns.  Then an ordering point of each kind in turn, and the
 * check.  Then calls of region entries only (held whole) ended by each
 * ordering point, by a stream's destruction and by the next call. */
static void case_calls(env *e) {
  calls_env ce;
  calls_alloc(&ce);
  E2E_CK(cudaDeviceSynchronize());
  cudaStream_t as[4] = {e->blk, e->nb, cudaStreamPerThread,
                        PTDS ? (cudaStream_t)0 : e->blk};
  char what[600], desc[400];
  for (int round = 0; round < 36 && e2e_failures() == 0; round++) {
    cudaStream_t a = as[round % 4];
    round_begin(e, &ce);
    region_call(e, &ce, a, 0, WAREA, 8 + e2e_rng_below(&e->rng, 24));
    region_call(e, &ce, a, RAREA_AT, RAREA_AT + RAREA,
                4 + e2e_rng_below(&e->rng, 8));
    int ncalls = 1 + (round % 3 == 0);
    for (int k = 0; k < ncalls; k++) {
      call c;
      size_t n = 1 + e2e_rng_below(&e->rng, 40);
      call_ranges(&c, n, ~0u, &e->rng);
      for (size_t i = 0; i < n; i++)
        make_entry(&c, i, 45, &e->rng);
      layout(&c, &ce, 0, WAREA, &e->rng);
      E2E_CK(issue(e, &ce, &c, a));
      overwrite_sources(&c, &e->rng);
      if (k == 0)
        describe(&c, desc, sizeof desc);
    }
    enum point p = (enum point)(round % P_COUNT);
    char sname[24];
    snprintf(what, sizeof what,
             "calls round %d on stream %s: region call, %d mixed call(s) "
             "(first: %s), then %s",
             round, e2e_stream_name(a, sname), ncalls, desc, point_names[p]);
    check_round(e, &ce, point(e, a, p), what);
  }
  /* region entries only: everything held, then each ordering point */
  for (int round = 0; round < 2 * (P_COUNT + 2) && e2e_failures() == 0;
       round++) {
    int p = round % (P_COUNT + 2);
    cudaStream_t a = round < P_COUNT + 2 ? e->blk : e->nb, made = NULL;
    if (p == P_COUNT) { /* the stream's destruction */
      E2E_CK(cudaStreamCreateWithFlags(&made, round < P_COUNT + 2
                                                  ? cudaStreamDefault
                                                  : cudaStreamNonBlocking));
      a = made;
    }
    round_begin(e, &ce);
    for (int k = 0; k < 1 + round % 3; k++) /* later calls overlap */
      region_call(e, &ce, a, 0, WAREA, 16 + e2e_rng_below(&e->rng, 24));
    const char *how;
    cudaStream_t on;
    if (p == P_COUNT) {
      how = "cudaStreamDestroy, D2H on B";
      E2E_CK(cudaStreamDestroy(made));
      on = e->other;
      /* B is not ordered after the destroyed stream: wait for it */
      E2E_CK(cudaDeviceSynchronize());
    } else if (p == P_COUNT + 1) {
      how = "a mixed call on A (D2D entries), D2H on A";
      call c;
      call_ranges(&c, 8, 1u << cudaMemcpySrcAccessOrderStream, &e->rng);
      for (size_t i = 0; i < 8; i++) {
        make_entry(&c, i, 0, &e->rng);
        c.en[i].kind = E_D2D;
        c.en[i].src_off = e2e_rng_below(&e->rng, WAREA - c.en[i].len);
      }
      layout(&c, &ce, RAREA_AT, RAREA_AT + RAREA, &e->rng);
      E2E_CK(issue(e, &ce, &c, a));
      on = a;
    } else {
      how = point_names[p];
      on = point(e, a, (enum point)p);
    }
    snprintf(what, sizeof what,
             "calls: region entries only (held) on a %s "
             "stream, then %s",
             round < P_COUNT + 2 ? "blocking" : "non-blocking", how);
    check_round(e, &ce, on, what);
  }
  calls_free(&ce);
}

/* (j) calls the driver refuses: the same error with libibp as without it
 * (cudaErrorInvalidValue, also in the plain run), and nothing copied. */
static void case_malformed(env *e) {
  calls_env ce;
  calls_alloc(&ce);
  E2E_CK(cudaDeviceSynchronize());
  enum { N = 12 };
  static const char *const forms[] = {
      "count 0",
      "dsts NULL",
      "srcs NULL",
      "sizes NULL",
      "attrs NULL, numAttrs 0",
      "attrs NULL, numAttrs 1",
      "attrsIdxs NULL",
      "numAttrs 0",
      "numAttrs > count",
      "attrsIdxs[0] = 1",
      "attrsIdxs not increasing",
      "attrsIdxs[last] = count",
      "srcAccessOrder Invalid in the second range",
      "srcAccessOrder 7",
      "the legacy stream (cudaStreamLegacy)",
      "stream 0 (legacy NULL stream)",
  };
  int nforms = (int)(sizeof forms / sizeof forms[0]);
  for (int f = 0; f < nforms; f++) { /* each form on its own */
    if (f == nforms - 1 && PTDS)
      continue; /* 0 is the per-thread stream there: valid */
    round_begin(e, &ce);
    call c;
    call_ranges(&c, N, 1u << cudaMemcpySrcAccessOrderStream, &e->rng);
    c.nattrs = 3;
    c.idxs[1] = 4, c.idxs[2] = 8;
    c.attrs[1] = c.attrs[2] = c.attrs[0];
    for (size_t i = 0; i < N; i++)
      make_entry(&c, i, 100, &e->rng);
    layout(&c, &ce, 0, WAREA, &e->rng);
    void *dsts[N];
    const void *srcs[N];
    size_t sizes[N], idxs[3] = {0, 4, 8};
    struct cudaMemcpyAttributes attrs[3] = {c.attrs[0], c.attrs[0], c.attrs[0]};
    for (size_t i = 0; i < N; i++) {
      dsts[i] = e->dst.dev + c.en[i].dst_off;
      srcs[i] = entry_src(e, &c.en[i], 0);
      sizes[i] = c.en[i].len;
    }
    void *const *d = dsts;
    const void *const *s = srcs;
    const size_t *z = sizes;
    struct cudaMemcpyAttributes *at = attrs;
    size_t *ix = idxs, count = N, nattrs = 3;
    cudaStream_t st = e->blk;
    switch (f) {
    case 0:
      count = 0;
      break;
    case 1:
      d = NULL;
      break;
    case 2:
      s = NULL;
      break;
    case 3:
      z = NULL;
      break;
    case 4:
      at = NULL, nattrs = 0;
      break;
    case 5:
      at = NULL, nattrs = 1;
      break;
    case 6:
      ix = NULL;
      break;
    case 7:
      nattrs = 0;
      break;
    case 8:
      count = 2;
      break;
    case 9:
      idxs[0] = 1;
      break;
    case 10:
      idxs[2] = 4;
      break;
    case 11:
      idxs[2] = N;
      break;
    case 12:
      attrs[1].srcAccessOrder = cudaMemcpySrcAccessOrderInvalid;
      break;
    case 13:
      attrs[0].srcAccessOrder = (enum cudaMemcpySrcAccessOrder)7;
      nattrs = 1;
      break;
    case 14:
      st = cudaStreamLegacy;
      break;
    default:
      st = (cudaStream_t)0;
      break;
    }
    cudaError_t err =
        cudaMemcpyBatchAsync((void *const *)d, s, z, count, at, ix, nattrs, st);
    cudaGetLastError();
    e2e_note("malformed: %s -> %s", forms[f], cudaGetErrorName(err));
    if (err != cudaErrorInvalidValue)
      e2e_fail("malformed call (%s, %zu region entries): "
               "%s, expected cudaErrorInvalidValue (as without libibp)",
               forms[f], (size_t)N, cudaGetErrorName(err));
    char what[160];
    snprintf(what, sizeof what,
             "malformed call (%s) refused: nothing may be copied, then D2H "
             "on the blocking stream",
             forms[f]);
    E2E_CK(cudaDeviceSynchronize());
    check_on(what, e->blk, &e->dst, 0, WAREA, e->rb);
  }
  calls_free(&ce);
}

/* ---- 2D copies ----------------------------------------------------------- */

#define WINDOW ((size_t)128 << 10)

typedef struct copy2d {
  const unsigned char *src; /* the application's */
  unsigned char *expect;    /* the source's bytes, row by row (malloc) */
  size_t spitch, dpitch, width, height, dst_off;
  const char *from;
} copy2d;

/* A random 2D copy from a region (or, 6%, pinned / pageable memory, or 6%
 * rows768's, straddling its end or start into its mapping) into the
 * window of dst. */
static void random_2d(e2e_rng *rng, copy2d *c) {
  const e2e_region *r = pick_region(rng);
  uint64_t roll = e2e_rng_below(rng, 100);
  /* mostly rows of whole tensors (the region's tensors fit its copies),
   * else anything: rows straddle tensors */
  int whole = roll >= 12 && e2e_rng_pct(rng, 85);
  size_t w = whole ? r->tensor * (1 + e2e_rng_below(rng, 2))
                   : e2e_rng_len(rng, 2 * r->tensor);
  c->width = w;
  c->spitch = w + (whole                  ? r->tensor * e2e_rng_below(rng, 3)
                   : e2e_rng_pct(rng, 25) ? 0
                   : e2e_rng_pct(rng, 50) ? e2e_rng_below(rng, r->tensor)
                                          : r->tensor * e2e_rng_below(rng, 3));
  c->height = 1 + e2e_rng_below(rng, 24);
  c->dpitch = w + (e2e_rng_pct(rng, 30) ? 0 : 1 + e2e_rng_below(rng, 300));
  size_t extent = (c->height - 1) * c->spitch + w;
  const unsigned char *base, *mirror = NULL;
  size_t off;
  const e2e_region *map = NULL;
  if (roll < 6) { /* pinned (no region) or pageable */
    int pin = e2e_rng_pct(rng, 50);
    c->from = pin ? "pinned (no region)" : "pageable";
    while (extent > pageable_len)
      extent = (--c->height - 1) * c->spitch + w;
    off = e2e_rng_below(rng, pageable_len - extent + 1);
    base = pin ? PINNED->host : pageable;
    mirror = pin ? PINNED->mirror : pageable;
  } else if (roll < 12) { /* rows768's mapping around it */
    map = &regions[2];
    size_t after = map->map_len - map->misalign - map->size;
    while (extent > after)
      extent = (--c->height - 1) * c->spitch + w;
    if (roll < 10) { /* first rows inside, the last ones after its end */
      c->from = "rows768 and past its end";
      size_t lo = map->misalign + map->size - extent + 1;
      off = lo + e2e_rng_below(rng, map->map_len - extent - lo + 1);
    } else { /* the first row starts before it */
      c->from = "before rows768 and into it";
      off = e2e_rng_below(rng, map->misalign);
    }
    base = map->map;
  } else {
    c->from = r->name;
    off = whole ? r->tensor *
                      e2e_rng_below(rng, (r->size - extent) / r->tensor + 1)
                : e2e_rng_below(rng, r->size - extent + 1);
    base = r->host;
    mirror = r->mirror;
  }
  c->src = base + off;
  c->expect = malloc(c->height * w);
  E2E_SYS(c->expect != NULL);
  for (size_t y = 0; y < c->height; y++) {
    size_t at = off + y * c->spitch;
    if (map)
      e2e_region_expect_map(map, at, w, c->expect + y * w);
    else
      memcpy(c->expect + y * w, mirror + at, w);
  }
  size_t dext = (c->height - 1) * c->dpitch + w;
  c->dst_off = e2e_rng_below(rng, WINDOW - dext + 1);
}

/* Issues c (sync: cudaMemcpy2D, else cudaMemcpy2DAsync on s) into dst and
 * applies it to the model; padding between rows is left alone. */
static void issue_2d(env *e, copy2d *c, cudaStream_t s, int sync) {
  enum cudaMemcpyKind kind =
      e2e_rng_pct(&e->rng, 30) ? cudaMemcpyDefault : cudaMemcpyHostToDevice;
  unsigned char *dst = e->dst.dev + c->dst_off;
  if (sync)
    E2E_CK(cudaMemcpy2D(dst, c->dpitch, c->src, c->spitch, c->width, c->height,
                        kind));
  else
    E2E_CK(cudaMemcpy2DAsync(dst, c->dpitch, c->src, c->spitch, c->width,
                             c->height, kind, s));
  for (size_t y = 0; y < c->height; y++)
    memcpy(e->dst.model + c->dst_off + y * c->dpitch, c->expect + y * c->width,
           c->width);
  free(c->expect);
  c->expect = NULL;
}

/* (k) 2D copies from regions, row by row into the stream's batch: random
 * widths, heights, pitches and offsets into a pitched window of dst (the
 * padding between rows must stay canary), a few on one stream (later
 * ones overlap earlier ones: later wins), rows straddling tensors and a
 * region's end; asynchronous on created streams, the legacy stream and
 * cudaStreamPerThread, ended by an ordering point of each kind; and
 * cudaMemcpy2D, read back at once on an unordered stream (it must be done
 * on return), also after 2D copies held on a stream it is ordered after
 * (a blocking stream, or the legacy stream in the per-thread build). */
static void case_rows2d(env *e) {
  E2E_CK(cudaDeviceSynchronize());
  cudaStream_t as[4] = {e->blk, e->nb, LEGACY, cudaStreamPerThread};
  char what[400], sname[24];
  for (int round = 0; round < 72 && e2e_failures() == 0; round++) {
    int mode = round % 6; /* 0-3 async on as[mode], 4 sync, 5 both */
    fresh(e);
    int n = 1 + (int)e2e_rng_below(&e->rng, 4);
    copy2d c;
    char first[200];
    cudaStream_t a = mode < 4 ? as[mode] : PTDS ? cudaStreamLegacy : e->blk;
    for (int k = 0; k < n; k++) {
      random_2d(&e->rng, &c);
      if (mode == 5) /* the synchronous copy below overlaps them */
        c.dst_off = e2e_rng_below(&e->rng, 4096);
      if (k == 0)
        snprintf(first, sizeof first,
                 "first: %s, width %zu, height %zu, pitches %zu/%zu, dst +%zu",
                 c.from, c.width, c.height, c.spitch, c.dpitch, c.dst_off);
      issue_2d(e, &c, a, mode == 4);
    }
    if (mode >= 4) {
      const char *how = mode == 4 ? "cudaMemcpy2D" : "cudaMemcpy2DAsync";
      if (mode == 5) { /* then a synchronous one over them */
        random_2d(&e->rng, &c);
        c.dst_off = e2e_rng_below(&e->rng, 4096);
        issue_2d(e, &c, NULL, 1);
      }
      snprintf(what, sizeof what,
               "rows2d round %d: %d x %s%s (%s), then D2H on an unordered "
               "stream at once",
               round, n, how,
               mode == 5 ? " on a stream cudaMemcpy2D is ordered after, "
                           "then cudaMemcpy2D over them"
                         : "",
               first);
      check_on(what, e->other, &e->dst, 0, WINDOW, e->rb);
      continue;
    }
    enum point p = (enum point)(round / 6 % P_COUNT);
    snprintf(what, sizeof what,
             "rows2d round %d: %d x cudaMemcpy2DAsync on stream %s (%s), "
             "then %s",
             round, n, e2e_stream_name(a, sname), first, point_names[p]);
    cudaStream_t on = point(e, a, p);
    if (on)
      check_on(what, on, &e->dst, 0, WINDOW, e->rb);
  }
}

/* ---- random interleavings ------------------------------------------------ */

#define NLANES 16
#define LANE ((size_t)8 << 10)
#define MAXSTREAMS 6

enum kind { BLOCKING, NONBLOCKING, LEGACYK, PERTHREAD };

typedef struct rstream {
  cudaStream_t s;
  enum kind kind;
  int created;
} rstream;

typedef struct worker {
  unsigned id;
  unsigned long ops;
  e2e_rng rng;
  dbuf buf;          /* NLANES lanes */
  unsigned char *rb; /* pinned */
  rstream st[MAXSTREAMS];
  int nst;
  int owner[NLANES];   /* index into st */
  cudaStream_t verify; /* non-blocking, orders nothing held */
  cudaEvent_t ev;
  char label[48];
} worker;

/* Whether work on streams a then b is ordered without an event. */
static int implicit(const worker *w, int a, int b) {
  enum kind x = w->st[a].kind, y = w->st[b].kind;
  if (a == b || w->st[a].s == w->st[b].s)
    return 1;
  return (x == LEGACYK && (y == BLOCKING || y == PERTHREAD)) ||
         (y == LEGACYK && (x == BLOCKING || x == PERTHREAD));
}

static void lane_rows(worker *w, int l);

/* Moves lane l to stream t: after this, t's work is ordered after
 * everything issued on the lane so far.  Without an event that holds only
 * for work issued on t from now on (synchronizing t waits for nothing
 * issued elsewhere), so a row copy into the lane on t follows at once. */
static void migrate(worker *w, int l, int t) {
  int from = w->owner[l], event = 0;
  if (!implicit(w, from, t) || e2e_rng_pct(&w->rng, 30)) {
    E2E_CK(cudaEventRecord(w->ev, w->st[from].s));
    E2E_CK(cudaStreamWaitEvent(w->st[t].s, w->ev, 0));
    event = 1;
  }
  for (int k = 0; k < NLANES; k++) /* t's next work covers all of from's */
    if (w->owner[k] == from && (k == l || e2e_rng_pct(&w->rng, 50)))
      w->owner[k] = t;
  w->owner[l] = t;
  if (!event && from != t)
    lane_rows(w, l);
}

static void verify_lane(worker *w, int l, const char *how) {
  char what[160];
  snprintf(what, sizeof what, "%srandom op %lu: lane %d after %s on its stream",
           w->label, w->ops, l, how);
  check_on(what, w->verify, &w->buf, (size_t)l * LANE, LANE, w->rb);
}

/* A completion point on stream i, then its lanes are checked. */
static void complete(worker *w, int i) {
  cudaStream_t s = w->st[i].s;
  const char *how;
  atomic_int flag = 0;
  switch (e2e_rng_below(&w->rng, 5)) {
  case 0:
    how = "cudaStreamSynchronize";
    E2E_CK(cudaStreamSynchronize(s));
    break;
  case 1:
    how = "a cudaStreamQuery loop";
    if (w->st[i].kind == LEGACYK) { /* other threads keep it busy */
      how = "cudaStreamSynchronize";
      E2E_CK(cudaStreamSynchronize(s));
    } else if (query_loop(s, NULL, how)) {
      return;
    }
    break;
  case 2:
    how = "an event record + cudaEventSynchronize";
    E2E_CK(cudaEventRecord(w->ev, s));
    E2E_CK(cudaEventSynchronize(w->ev));
    break;
  case 3:
    how = "an event record + a cudaEventQuery loop";
    E2E_CK(cudaEventRecord(w->ev, s));
    if (query_loop(s, w->ev, how))
      return;
    break;
  default:
    how = "a host function";
    E2E_CK(cudaLaunchHostFunc(s, set_flag, &flag));
    if (wait_flag(&flag, how))
      return;
    break;
  }
  for (int l = 0; l < NLANES; l++)
    if (w->owner[l] == i)
      verify_lane(w, l, how);
}

/* One or a few rows of a region into lane l, on its stream. */
static void lane_rows(worker *w, int l) {
  e2e_rng *rng = &w->rng;
  const e2e_region *r = pick_region(rng);
  size_t n = e2e_rng_pct(rng, 80) ? 1 : 2 + e2e_rng_below(rng, 3);
  size_t at = e2e_rng_below(rng, LANE - n * r->tensor + 1);
  row_copy(w->st[w->owner[l]].s, &w->buf, (size_t)l * LANE + at, r,
           e2e_rng_below(rng, rows_of(r) - n), n, e2e_rng_pct(rng, 30));
}

/* One random operation on lane l (on its owner's stream). */
static void random_op(worker *w) {
  e2e_rng *rng = &w->rng;
  int l = (int)e2e_rng_below(rng, NLANES);
  cudaStream_t s = w->st[w->owner[l]].s;
  size_t base = (size_t)l * LANE;
  uint64_t roll = e2e_rng_below(rng, 100);
  if (roll < 45) {
    lane_rows(w, l);
  } else if (roll < 53) { /* pinned, no region / pageable */
    size_t len = e2e_rng_len(rng, 2048);
    size_t at = e2e_rng_below(rng, LANE - len + 1);
    size_t off = e2e_rng_below(rng, pageable_len - len); /* both */
    int pin = e2e_rng_pct(rng, 60);
    const unsigned char *from = pin ? PINNED->host : pageable;
    const unsigned char *expect = pin ? PINNED->mirror : pageable;
    E2E_CK(cudaMemcpyAsync(w->buf.dev + base + at, from + off, len,
                           cudaMemcpyHostToDevice, s));
    memcpy(w->buf.model + base + at, expect + off, len);
  } else if (roll < 57) { /* memset */
    size_t len = e2e_rng_len(rng, 2048);
    size_t at = e2e_rng_below(rng, LANE - len + 1);
    int v = (int)e2e_rng_below(rng, 256);
    E2E_CK(cudaMemsetAsync(w->buf.dev + base + at, v, len, s));
    memset(w->buf.model + base + at, v, len);
  } else if (roll < 67) { /* D2D from another lane that was written */
    int m = (int)e2e_rng_below(rng, NLANES);
    if (m == l)
      return;
    if (w->owner[m] != w->owner[l])
      migrate(w, m, w->owner[l]);
    size_t len = e2e_rng_len(rng, LANE / 2);
    size_t at = e2e_rng_below(rng, LANE - len + 1);
    size_t from = e2e_rng_below(rng, LANE - len + 1);
    d2d(s, &w->buf, base + at, &w->buf, (size_t)m * LANE + from, len);
  } else if (roll < 80) { /* a lane to another stream */
    migrate(w, l, (int)e2e_rng_below(rng, (uint64_t)w->nst));
  } else if (roll < 97) {
    complete(w, (int)e2e_rng_below(rng, (uint64_t)w->nst));
  } else if (roll < 99) {
    E2E_CK(cudaDeviceSynchronize());
    for (int k = 0; k < NLANES; k++)
      verify_lane(w, k, "cudaDeviceSynchronize");
  } else { /* destroy a created stream: what it holds must still run */
    int i = (int)e2e_rng_below(rng, (uint64_t)w->nst);
    if (!w->st[i].created)
      return;
    E2E_CK(cudaStreamDestroy(w->st[i].s));
    E2E_CK(cudaStreamCreateWithFlags(&w->st[i].s, w->st[i].kind == NONBLOCKING
                                                      ? cudaStreamNonBlocking
                                                      : cudaStreamDefault));
    E2E_CK(cudaDeviceSynchronize());
    for (int k = 0; k < NLANES; k++)
      if (w->owner[k] == i)
        verify_lane(w, k, "cudaStreamDestroy + cudaDeviceSynchronize");
  }
}

static void *random_worker(void *arg) {
  worker *w = arg;
  snprintf(w->label, sizeof w->label, "thread %u: ", w->id);
  dbuf_init(&w->buf, NLANES * LANE, "lanes");
  dbuf_canary(&w->buf, &w->rng);
  E2E_CK(cudaMallocHost((void **)&w->rb, LANE));
  E2E_CK(cudaStreamCreateWithFlags(&w->verify, cudaStreamNonBlocking));
  E2E_CK(cudaEventCreateWithFlags(&w->ev, cudaEventDisableTiming));
  static const enum kind kinds[] = {BLOCKING, BLOCKING, NONBLOCKING,
                                    NONBLOCKING};
  for (int i = 0; i < 4; i++) {
    w->st[i].kind = kinds[i];
    w->st[i].created = 1;
    E2E_CK(cudaStreamCreateWithFlags(&w->st[i].s, kinds[i] == NONBLOCKING
                                                      ? cudaStreamNonBlocking
                                                      : cudaStreamDefault));
  }
  w->st[4] = (rstream){cudaStreamLegacy, LEGACYK, 0};
  w->st[5] = (rstream){0, PTDS ? PERTHREAD : LEGACYK, 0};
  w->nst = 6;
  for (int l = 0; l < NLANES; l++)
    w->owner[l] = (int)e2e_rng_below(&w->rng, (uint64_t)w->nst);
  unsigned long n = w->ops;
  for (w->ops = 0; w->ops < n && e2e_failures() == 0; w->ops++)
    random_op(w);
  E2E_CK(cudaDeviceSynchronize());
  for (int k = 0; k < NLANES && e2e_failures() == 0; k++)
    verify_lane(w, k, "the end (cudaDeviceSynchronize)");
  for (int i = 0; i < 4; i++)
    E2E_CK(cudaStreamDestroy(w->st[i].s));
  E2E_CK(cudaStreamDestroy(w->verify));
  E2E_CK(cudaEventDestroy(w->ev));
  E2E_CK(cudaFreeHost(w->rb));
  dbuf_free(&w->buf);
  return NULL;
}

static void case_random(env *e, unsigned long ops) {
  unsigned nthreads = 2 + (unsigned)e2e_rng_below(&e->rng, 3);
  worker w[4];
  pthread_t t[4];
  e2e_note("random: %u threads x %lu operations", nthreads, ops / nthreads);
  for (unsigned i = 0; i < nthreads; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].id = i;
    w[i].ops = ops / nthreads;
    e2e_rng_seed(&w[i].rng, e2e_seed(), 200 + i);
    if (pthread_create(&t[i], NULL, random_worker, &w[i]) != 0)
      e2e_die("pthread_create failed");
  }
  for (unsigned i = 0; i < nthreads; i++)
    pthread_join(t[i], NULL);
}

/* ---- main ---------------------------------------------------------------- */

static const struct {
  const char *name;
  void (*run)(env *);
} cases[] = {
    {"event", case_event},         {"stream", case_stream},
    {"legacy", case_legacy},       {"hostfunc", case_hostfunc},
    {"query", case_query},         {"steps", case_steps},
    {"overwrite", case_overwrite}, {"overlap", case_overlap},
    {"deadline", case_deadline},   {"calls", case_calls},
    {"malformed", case_malformed}, {"rows2d", case_rows2d},
    {"written", case_written},     {"full", case_full},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static void usage(void) {
  e2e_die("usage: e2e_batch {event|stream|legacy|hostfunc|query|overwrite|"
          "overlap|deadline|calls|malformed|rows2d|random|all} [count]");
}

int main(int argc, char **argv) {
  e2e_begin("e2e_batch");
  const char *which = NULL;
  unsigned long count = 0;
  for (int i = 1; i < argc; i++) {
    if (strtoul(argv[i], NULL, 10) > 0)
      count = strtoul(argv[i], NULL, 10);
    else if (!which)
      which = argv[i];
    else
      usage();
  }
  if (!which)
    which = "all";
  int found = strcmp(which, "all") == 0 || strcmp(which, "random") == 0;
  for (int i = 0; i < NCASES && !found; i++)
    found = strcmp(which, cases[i].name) == 0;
  if (!found)
    usage();
  e2e_regions_env(regions, NREGIONS);

  env e;
  memset(&e, 0, sizeof e);
  e2e_rng_seed(&e.rng, e2e_seed(), 1);
  {
    dbuf_init(&e.dst, DEV_BYTES, "dst");
    dbuf_init(&e.dst2, DEV_BYTES, "dst2");
    E2E_CK(cudaMallocHost((void **)&e.rb, RB_BYTES));
    E2E_CK(cudaStreamCreateWithFlags(&e.blk, cudaStreamDefault));
    E2E_CK(cudaStreamCreateWithFlags(&e.nb, cudaStreamNonBlocking));
    E2E_CK(cudaStreamCreateWithFlags(&e.other, cudaStreamNonBlocking));
    E2E_CK(cudaEventCreateWithFlags(&e.ev, cudaEventDisableTiming));
    for (int i = 0; i < NREGIONS; i++) {
      e2e_region_alloc(&regions[i]);
      e2e_region_fill(&regions[i], &e.rng);
    }
    pageable = malloc(pageable_len);
    E2E_SYS(pageable != NULL);
    e2e_fill(&e.rng, pageable, pageable_len, 4096, E2E_F32);
    for (int i = 0; i < NCASES && e2e_failures() == 0; i++)
      if (strcmp(which, "all") == 0 || strcmp(which, cases[i].name) == 0) {
        e2e_note("case %s", cases[i].name);
        cases[i].run(&e);
      }
    if (e2e_failures() == 0 &&
        (strcmp(which, "all") == 0 || strcmp(which, "random") == 0))
      case_random(
          &e, count ? count
                    : e2e_env_count("IBP_E2E_COPIES", 2 * E2E_DEFAULT_COPIES));
    E2E_CK(cudaDeviceSynchronize());
    E2E_CK(cudaStreamDestroy(e.blk));
    E2E_CK(cudaStreamDestroy(e.nb));
    E2E_CK(cudaStreamDestroy(e.other));
    E2E_CK(cudaEventDestroy(e.ev));
    E2E_CK(cudaFreeHost(e.rb));
    dbuf_free(&e.dst);
    dbuf_free(&e.dst2);
    free(pageable);
  }
  for (int i = 0; i < NREGIONS; i++)
    e2e_region_check_host(&regions[i], "at the end");
  for (int i = 0; i < NREGIONS; i++)
    e2e_region_free(&regions[i]);
  return e2e_end();
}
