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
 * deadline, random, or all.  Each case starts from device buffers full of
 * canary bytes and keeps a model of what they must hold; it checks them by
 * reading them back on a stream that nothing orders with the held copies
 * other than the ordering point under test (a non-blocking stream after
 * the point completed, or the stream of the point itself), so that the
 * check itself launches nothing that was held.
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
 * (argv[2], else IBP_E2E_COPIES, else 2000) operations in all.
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

static e2e_region regions[] = {
    {.name = "rows256",
     .size = 4096 * 256,
     .tensor = 256,
     .alloc = E2E_MALLOC_HOST,
     .data = E2E_F32},
    {.name = "rows1k",
     .size = 2048 * 1024,
     .tensor = 1024,
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

/* (h) rows on A and on the legacy stream, then no CUDA call for 200 ms (a
 * program polling host memory): the deadline must launch them; read them
 * on B, which nothing orders with A. */
static void case_deadline(env *e) {
  for (int round = 0; round < 4; round++) {
    fresh(e);
    cudaStream_t a = round % 2 ? e->nb : e->blk;
    size_t end = random_rows(&e->rng, a, &e->dst, 0, 24);
    size_t end2 =
        round >= 2 ? random_rows(&e->rng, LEGACY, &e->dst2, 0, 24) : 0;
    volatile unsigned long spins = 0;
    uint64_t t0 = now_ns();
    while (now_ns() - t0 < 200000000ull)
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
        compare("deadline: rows on A, 200 ms without a CUDA call, D2H on B "
                "(10 s later)",
                &e->dst, 0, end, e->rb);
        compare("deadline: rows on the legacy stream, 200 ms without a CUDA "
                "call, D2H on B (10 s later)",
                &e->dst2, 0, end2, e->rb + end);
        break;
      }
      nap_us(20000);
    }
    E2E_CK(cudaDeviceSynchronize());
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
    {"event", case_event},     {"stream", case_stream},
    {"legacy", case_legacy},   {"hostfunc", case_hostfunc},
    {"query", case_query},     {"overwrite", case_overwrite},
    {"overlap", case_overlap}, {"deadline", case_deadline},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static void usage(void) {
  e2e_die("usage: e2e_batch {event|stream|legacy|hostfunc|query|overwrite|"
          "overlap|deadline|random|all} [count]");
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
      case_random(&e, count ? count : e2e_env_count("IBP_E2E_COPIES", 2000));
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
