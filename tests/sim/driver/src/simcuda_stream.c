/*
 * Streams: the operation queue, one worker thread per stream, the legacy
 * and per-thread default streams, and the stream entry points.
 *
 * Ordering.  A stream's worker runs its operations one at a time in FIFO
 * order.  Before running one it waits for the operation's dependencies
 * (stream, sequence) -- how the legacy default stream synchronizes with the
 * blocking streams of its context (an operation on it depends on the work
 * already queued on every blocking stream; an operation on a blocking
 * stream depends on the work already queued on it), and how
 * cuStreamWaitEvent is done.  A dependency always points at work queued
 * earlier (all under ctx->sched), so there are no cycles.
 *
 * Errors.  An operation that fails (a kernel launch whose emulation
 * stopped) leaves a sticky error on its stream (reported by every later
 * synchronize / query / submission on that stream) and on its context
 * (cuCtxSynchronize).  Later operations on the stream are skipped, except
 * events (completed, so waiters wake), callbacks (called with the error)
 * and frees.  NVIDIA's driver would poison the whole context; this one
 * keeps other streams usable so tests can go on.
 *
 * SIMCUDA_STREAM_DELAY_US=n makes every worker sleep n microseconds before
 * each operation, to widen the window in which an ordering bug shows.
 */
#include "simcuda_internal.h"

#include "simclock.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_ullong next_stream_uid = 1;
static unsigned delay_us;
static pthread_once_t delay_once = PTHREAD_ONCE_INIT;

static void read_delay(void) {
  const char *e = getenv("SIMCUDA_STREAM_DELAY_US");
  if (e && *e)
    delay_us = (unsigned)strtoul(e, NULL, 10);
}

/* ---- operations --------------------------------------------------------- */

scu_op *scu_op_new(scu_opkind kind) {
  scu_op *op = calloc(1, sizeof *op);
  if (op) {
    op->kind = kind;
    op->link = SCU_LINK_NONE;
  }
  return op;
}

void scu_op_free(scu_op *op) {
  if (!op)
    return;
  scu_turn_pass(op);
  for (unsigned i = 0; i < op->ndeps; i++)
    scu_stream_put(op->deps[i].s);
  free(op->deps);
  if (op->kind == SCU_OP_EVENT && op->u.event.ev)
    scu_event_put(op->u.event.ev);
  free(op->owned);
  free(op);
}

CUresult scu_op_add_dep(scu_op *op, scu_stream *s, uint64_t seq) {
  for (unsigned i = 0; i < op->ndeps; i++) {
    if (op->deps[i].s == s) {
      if (op->deps[i].seq < seq)
        op->deps[i].seq = seq;
      return CUDA_SUCCESS;
    }
  }
  if (op->ndeps == op->capdeps) {
    unsigned cap = op->capdeps ? op->capdeps * 2 : 4;
    scu_dep *d = realloc(op->deps, cap * sizeof *d);
    if (!d)
      return CUDA_ERROR_OUT_OF_MEMORY;
    op->deps = d;
    op->capdeps = cap;
  }
  scu_obj_ref(&s->hdr);
  op->deps[op->ndeps++] = (scu_dep){s, seq};
  return CUDA_SUCCESS;
}

static void fill(char *dst, size_t count, uint64_t value, unsigned elem) {
  if (elem == 1) {
    memset(dst, (int)(value & 0xff), count);
    return;
  }
  for (size_t i = 0; i < count; i++) /* little-endian: the low bytes */
    memcpy(dst + elem * i, &value, elem);
}

static CUresult run_launch(scu_op *op) {
  char err[512] = "";
  if (simt_run(&op->u.launch.l, &op->u.launch.pcie, err, sizeof err) == 0)
    return CUDA_SUCCESS;
  scu_log("kernel '%s' failed: %s", op->u.launch.name,
          err[0] ? err : "(no message)");
  return CUDA_ERROR_LAUNCH_FAILED;
}

/* Runs one operation on the worker; `prior` is the stream's sticky error,
 * `start` its virtual start time. */
static CUresult execute(scu_stream *s, scu_op *op, CUresult prior,
                        double start) {
  switch (op->kind) {
  case SCU_OP_EVENT:
    scu_event_fire(op->u.event.ev, op->u.event.gen, start);
    return CUDA_SUCCESS;
  case SCU_OP_CALLBACK:
    op->u.cb.fn(op->u.cb.handle, prior, op->u.cb.data);
    return CUDA_SUCCESS;
  case SCU_OP_FREE:
    scu_mem_free_deferred(op->u.free.base);
    return CUDA_SUCCESS;
  default:
    break;
  }
  if (prior != CUDA_SUCCESS)
    return CUDA_SUCCESS; /* skipped */
  (void)s;
  switch (op->kind) {
  case SCU_OP_COPY:
    memmove(op->u.copy.dst, op->u.copy.src, op->u.copy.bytes);
    return CUDA_SUCCESS;
  case SCU_OP_COPY2D:
    for (size_t z = 0; z < op->u.copy2d.depth; z++)
      for (size_t y = 0; y < op->u.copy2d.height; y++)
        memmove(op->u.copy2d.dst + z * op->u.copy2d.dslice +
                    y * op->u.copy2d.dpitch,
                op->u.copy2d.src + z * op->u.copy2d.sslice +
                    y * op->u.copy2d.spitch,
                op->u.copy2d.width);
    return CUDA_SUCCESS;
  case SCU_OP_SET:
    for (size_t y = 0; y < op->u.set.height; y++)
      fill(op->u.set.dst + y * op->u.set.pitch, op->u.set.width,
           op->u.set.value, op->u.set.elem);
    return CUDA_SUCCESS;
  case SCU_OP_LAUNCH:
    return run_launch(op);
  case SCU_OP_HOSTFN:
    op->u.hostfn.fn(op->u.hostfn.data);
    return CUDA_SUCCESS;
  default:
    return CUDA_SUCCESS;
  }
}

/* ---- streams ------------------------------------------------------------- */

static void stream_free(scu_obj *o) {
  scu_stream *s = (scu_stream *)o;
  while (s->head) { /* never started: nothing ran */
    scu_op *op = s->head;
    s->head = op->next;
    scu_op_free(op);
  }
  if (s->cap_graph) { /* destroyed while capturing */
    scu_obj_unpublish((scu_obj *)s->cap_graph);
    scu_graph_put(s->cap_graph);
  }
  pthread_mutex_destroy(&s->m);
  pthread_cond_destroy(&s->work_cv);
  pthread_cond_destroy(&s->done_cv);
  scu_ctx_put(s->ctx);
  free(s);
}

void scu_stream_put(scu_stream *s) {
  if (s)
    scu_obj_put(&s->hdr);
}

CUresult scu_stream_create_internal(scu_ctx *c, scu_streamkind kind,
                                    unsigned flags, int priority,
                                    scu_stream **out) {
  scu_stream *s = calloc(1, sizeof *s);
  if (!s)
    return CUDA_ERROR_OUT_OF_MEMORY;
  scu_obj_init(&s->hdr, SCU_T_STREAM, stream_free);
  scu_obj_ref(&c->hdr);
  s->ctx = c;
  s->kind = kind;
  s->flags = flags;
  s->priority = priority;
  s->uid = atomic_fetch_add(&next_stream_uid, 1);
  pthread_mutex_init(&s->m, NULL);
  pthread_cond_init(&s->work_cv, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  s->cap_status = CU_STREAM_CAPTURE_STATUS_NONE;
  pthread_mutex_lock(&c->sched); /* the context's list holds a reference */
  scu_obj_ref(&s->hdr);
  s->next_in_ctx = c->streams;
  if (c->streams)
    c->streams->prev_in_ctx = s;
  c->streams = s;
  pthread_mutex_unlock(&c->sched);
  *out = s;
  return CUDA_SUCCESS;
}

/* Takes s off its context's list (once). */
static void retire(scu_stream *s) {
  scu_ctx *c = s->ctx;
  bool linked;
  pthread_mutex_lock(&c->sched);
  linked = s->prev_in_ctx || c->streams == s;
  if (linked) {
    if (s->prev_in_ctx)
      s->prev_in_ctx->next_in_ctx = s->next_in_ctx;
    else
      c->streams = s->next_in_ctx;
    if (s->next_in_ctx)
      s->next_in_ctx->prev_in_ctx = s->prev_in_ctx;
    s->next_in_ctx = s->prev_in_ctx = NULL;
  }
  pthread_mutex_unlock(&c->sched);
  if (linked)
    scu_stream_put(s);
}

static void wait_dep(const scu_dep *d) {
  pthread_mutex_lock(&d->s->m);
  while (d->s->completed < d->seq)
    pthread_cond_wait(&d->s->done_cv, &d->s->m);
  pthread_mutex_unlock(&d->s->m);
}

/* Runs op, the head of s, on the calling thread: its dependencies, the
 * operation, then completion (pops it, records an error, wakes waiters and
 * the worker) and frees it.  `prior` is the stream's error when it began. */
static void run_head(scu_stream *s, scu_op *op, CUresult prior) {
  for (unsigned i = 0; i < op->ndeps; i++)
    wait_dep(&op->deps[i]);
  if (delay_us)
    usleep(delay_us);
  double start = scu_vclock_start(s, op);
  uint64_t host0 = scu_now_ns();
  CUresult r = execute(s, op, prior, start);
  double end = scu_vclock_end(s, op, start, (double)(scu_now_ns() - host0));
  if (r != CUDA_SUCCESS) /* visible before anyone sees the op complete */
    scu_ctx_set_sticky(s->ctx, r);
  pthread_mutex_lock(&s->m);
  s->head = op->next;
  if (!s->head)
    s->tail = NULL;
  if (r != CUDA_SUCCESS && s->error == CUDA_SUCCESS) {
    s->error = r;
    s->error_seq = op->seq;
  }
  s->completed = op->seq;
  scu_vclock_complete(s, op->seq, end);
  pthread_cond_broadcast(&s->done_cv);
  if (s->head || s->closing)
    pthread_cond_signal(&s->work_cv);
  pthread_mutex_unlock(&s->m);
  scu_op_free(op);
}

/* The worker runs every operation but the host-synchronous ones, which
 * their callers run themselves (scu_stream_run_sync) when their turn
 * comes; it waits while one of those is at the head. */
static void *worker_main(void *arg) {
  scu_stream *s = arg;
  scu_tls_worker = 1;
  pthread_mutex_lock(&s->m);
  for (;;) {
    while (s->head ? s->head->is_inline : !s->closing)
      pthread_cond_wait(&s->work_cv, &s->m);
    scu_op *op = s->head;
    if (!op)
      break; /* closing, and nothing left */
    CUresult prior = s->error;
    pthread_mutex_unlock(&s->m);
    run_head(s, op, prior);
    pthread_mutex_lock(&s->m);
  }
  s->worker_done = true;
  pthread_cond_broadcast(&s->done_cv);
  pthread_mutex_unlock(&s->m);
  retire(s);
  scu_stream_put(s); /* the worker's reference */
  return NULL;
}

/* Starts the worker (s->m held).  Asynchronous signals stay with the
 * application's threads; synchronous ones (faults) cannot be blocked. */
static bool start_worker(scu_stream *s) {
  pthread_once(&delay_once, read_delay);
  sigset_t all, old;
  sigfillset(&all);
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGBUS);
  sigdelset(&all, SIGFPE);
  sigdelset(&all, SIGILL);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  scu_obj_ref(&s->hdr);
  pthread_t t;
  int e = pthread_create(&t, &attr, worker_main, s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (e != 0) {
    scu_obj_put(&s->hdr); /* cannot be the last reference: the caller's */
    scu_log("cannot start a stream worker thread");
    return false;
  }
  s->worker_started = true;
  return true;
}

void scu_stream_close(scu_stream *s) {
  pthread_mutex_lock(&s->m);
  bool was_closing = s->closing;
  s->closing = true;
  bool no_worker = !s->worker_started;
  pthread_cond_broadcast(&s->work_cv);
  pthread_mutex_unlock(&s->m);
  scu_capture_invalidate(s); /* if it was capturing */
  if (!was_closing && no_worker)
    retire(s);
}

/* Legacy-stream ordering for op about to go on s (ctx->sched held). */
static CUresult implicit_deps(scu_stream *s, scu_op *op) {
  scu_ctx *c = s->ctx;
  if (s->flags & CU_STREAM_NON_BLOCKING)
    return CUDA_SUCCESS;
  CUresult r = CUDA_SUCCESS;
  if (s->kind == SCU_STREAM_LEGACY) {
    bool conflict = false;
    for (scu_stream *b = c->streams; b && r == CUDA_SUCCESS;
         b = b->next_in_ctx) {
      if (b == s || (b->flags & CU_STREAM_NON_BLOCKING))
        continue;
      pthread_mutex_lock(&b->m);
      uint64_t sub = b->submitted, done = b->completed;
      bool capturing = b->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
      pthread_mutex_unlock(&b->m);
      if (capturing) {
        scu_capture_invalidate(b);
        conflict = true;
      }
      if (sub > done)
        r = scu_op_add_dep(op, b, sub);
    }
    if (conflict)
      r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  } else if (c->legacy && c->legacy != s) {
    pthread_mutex_lock(&c->legacy->m);
    uint64_t sub = c->legacy->submitted, done = c->legacy->completed;
    pthread_mutex_unlock(&c->legacy->m);
    if (sub > done)
      r = scu_op_add_dep(op, c->legacy, sub);
  }
  return r;
}

static CUresult state_error(const scu_stream *s) {
  if (s->closing)
    return atomic_load(&s->ctx->active) ? CUDA_ERROR_INVALID_HANDLE
                                        : CUDA_ERROR_CONTEXT_IS_DESTROYED;
  if (s->error != CUDA_SUCCESS)
    return s->error;
  if (s->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  return CUDA_SUCCESS;
}

CUresult scu_stream_submit(scu_stream *s, scu_op *op, uint64_t *seq) {
  scu_ctx *c = s->ctx;
  *seq = 0;
  if (!op)
    return CUDA_ERROR_OUT_OF_MEMORY;
  scu_vclock_submit(op);
  pthread_mutex_lock(&c->sched);
  pthread_mutex_lock(&s->m);
  CUresult r = state_error(s);
  if (r == CUDA_SUCCESS && s->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    r = scu_capture_append(s, op); /* takes op */
    pthread_mutex_unlock(&s->m);
    pthread_mutex_unlock(&c->sched);
    return r;
  }
  pthread_mutex_unlock(&s->m);
  if (r == CUDA_SUCCESS)
    r = implicit_deps(s, op);
  if (r == CUDA_SUCCESS) {
    pthread_mutex_lock(&s->m);
    r = state_error(s);
    if (r == CUDA_SUCCESS && !op->is_inline && !s->worker_started &&
        !start_worker(s))
      r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
      op->seq = *seq = ++s->submitted;
      scu_turn_take(s, op);
      op->next = NULL;
      if (s->tail)
        s->tail->next = op;
      else
        s->head = op;
      s->tail = op;
      if (!op->is_inline)
        pthread_cond_signal(&s->work_cv);
      op = NULL;
    }
    pthread_mutex_unlock(&s->m);
  }
  pthread_mutex_unlock(&c->sched);
  scu_op_free(op); /* only when not queued */
  return r;
}

/* Whether the work s has not run yet waits on a host thread: a host
 * function or callback running at its head, an operation its queuing
 * thread runs itself (inline), or a dependency on a stream in that state.
 * Such work ends when the application says so; a query must not wait for
 * it.  `depth` bounds the walk along dependencies (they never form a
 * cycle, but may be long). */
static bool host_bound(scu_stream *s, unsigned depth) {
  enum { MAX_DEPS = 8 };
  scu_dep deps[MAX_DEPS];
  unsigned n = 0;
  bool bound = false;
  pthread_mutex_lock(&s->m);
  const scu_op *op = s->head;
  if (op && s->completed < s->submitted) {
    bound = op->is_inline || op->kind == SCU_OP_HOSTFN ||
            op->kind == SCU_OP_CALLBACK || op->ndeps > MAX_DEPS;
    for (unsigned i = 0; !bound && i < op->ndeps; i++) {
      deps[n] = op->deps[i];
      scu_obj_ref(&deps[n++].s->hdr);
    }
  }
  pthread_mutex_unlock(&s->m); /* never two streams' locks at once */
  for (unsigned i = 0; i < n; i++) {
    if (!bound) {
      pthread_mutex_lock(&deps[i].s->m);
      bool pending = deps[i].s->completed < deps[i].seq;
      pthread_mutex_unlock(&deps[i].s->m);
      bound = pending && (depth == 0 || host_bound(deps[i].s, depth - 1));
    }
    scu_stream_put(deps[i].s);
  }
  return bound;
}

bool scu_stream_host_bound(scu_stream *s) {
  return host_bound(s, 16);
}

/* How long a query waits for device work at most (real time) before it
 * answers from what has run (a safety net: device work always ends). */
#define SETTLE_LIMIT_NS (30ull * 1000 * 1000 * 1000)

bool scu_stream_settle(scu_stream *s, uint64_t seq) {
  const uint64_t start = scu_now_ns();
  for (;;) {
    pthread_mutex_lock(&s->m);
    if (s->completed < seq) {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_nsec += 1000 * 1000; /* re-check what the work waits on */
      if (until.tv_nsec >= 1000 * 1000 * 1000) {
        until.tv_sec++;
        until.tv_nsec -= 1000 * 1000 * 1000;
      }
      pthread_cond_timedwait(&s->done_cv, &s->m, &until);
    }
    bool done = s->completed >= seq;
    pthread_mutex_unlock(&s->m);
    if (done)
      return true;
    if (scu_stream_host_bound(s))
      return false;
    if (scu_now_ns() - start > SETTLE_LIMIT_NS) {
      scu_log("a stream query waited %llu s for device work; answering "
              "in real time",
              SETTLE_LIMIT_NS / 1000000000ull);
      return false;
    }
  }
}

bool scu_stream_waited(scu_stream *s, uint64_t seq) {
  pthread_mutex_lock(&s->m);
  bool waited = s->waited >= seq;
  pthread_mutex_unlock(&s->m);
  return waited;
}

bool scu_stream_done(scu_stream *s, uint64_t seq, CUresult *err) {
  pthread_mutex_lock(&s->m);
  bool done = s->completed >= seq;
  *err =
      s->error != CUDA_SUCCESS && s->error_seq <= seq ? s->error : CUDA_SUCCESS;
  pthread_mutex_unlock(&s->m);
  return done;
}

CUresult scu_stream_wait(scu_stream *s, uint64_t seq) {
  pthread_mutex_lock(&s->m);
  while (s->completed < seq)
    pthread_cond_wait(&s->done_cv, &s->m);
  if (seq > s->waited)
    s->waited = seq;
  CUresult r =
      s->error != CUDA_SUCCESS && s->error_seq <= seq ? s->error : CUDA_SUCCESS;
  double end = scu_vclock_end_of(s, seq);
  pthread_mutex_unlock(&s->m);
  simclock_reach(end); /* the caller waited for it */
  return r;
}

bool scu_stream_is_capturing(scu_stream *s) {
  pthread_mutex_lock(&s->m);
  bool capturing = s->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
  pthread_mutex_unlock(&s->m);
  return capturing;
}

/* A synchronize or query of a capturing stream ends the capture. */
static CUresult refuse_if_capturing(scu_stream *s) {
  if (!scu_stream_is_capturing(s))
    return CUDA_SUCCESS;
  scu_capture_invalidate(s);
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* Queued like any operation (so later work, from any thread, stays behind
 * it), but run by the caller once everything before it completed: no
 * hand-off to the worker, and a fault in a host-side copy happens on the
 * calling thread, as with NVIDIA's staged copies. */
CUresult scu_stream_run_sync(scu_stream *s, scu_op *op) {
  uint64_t seq;
  CUresult r = refuse_if_capturing(s);
  if (r != CUDA_SUCCESS || !op) {
    scu_op_free(op);
    return r != CUDA_SUCCESS ? r : CUDA_ERROR_OUT_OF_MEMORY;
  }
  op->is_inline = true;
  r = scu_stream_submit(s, op, &seq);
  if (r != CUDA_SUCCESS || !seq)
    return r;
  pthread_mutex_lock(&s->m);
  while (s->completed + 1 < seq)
    pthread_cond_wait(&s->done_cv, &s->m);
  CUresult prior = s->error; /* op is the head now */
  pthread_mutex_unlock(&s->m);
  run_head(s, op, prior);
  return scu_stream_wait(s, seq);
}

CUresult scu_stream_sync(scu_stream *s) {
  if (s->kind == SCU_STREAM_LEGACY) /* also waits for the blocking streams */
    return scu_stream_run_sync(s, scu_op_new(SCU_OP_NOP));
  pthread_mutex_lock(&s->m);
  uint64_t seq = s->submitted;
  pthread_mutex_unlock(&s->m);
  return scu_stream_wait(s, seq);
}

/* Snapshot of a context's streams with references. */
static size_t ctx_streams(scu_ctx *c, scu_stream ***out) {
  pthread_mutex_lock(&c->sched);
  size_t n = 0;
  for (scu_stream *s = c->streams; s; s = s->next_in_ctx)
    n++;
  scu_stream **v = n ? malloc(n * sizeof *v) : NULL;
  if (!v)
    n = 0;
  size_t i = 0;
  for (scu_stream *s = c->streams; s && i < n; s = s->next_in_ctx) {
    scu_obj_ref(&s->hdr);
    v[i++] = s;
  }
  pthread_mutex_unlock(&c->sched);
  *out = v;
  return n;
}

CUresult scu_ctx_sync(scu_ctx *c) {
  scu_stream **v;
  size_t n = ctx_streams(c, &v);
  for (size_t i = 0; i < n; i++) {
    pthread_mutex_lock(&v[i]->m);
    uint64_t seq = v[i]->submitted;
    pthread_mutex_unlock(&v[i]->m);
    (void)scu_stream_wait(v[i], seq);
    scu_stream_put(v[i]);
  }
  free(v);
  return atomic_load(&c->sticky);
}

void scu_ctx_close_streams(scu_ctx *c) {
  scu_stream **v;
  size_t n = ctx_streams(c, &v);
  for (size_t i = 0; i < n; i++)
    scu_stream_close(v[i]);
  for (size_t i = 0; i < n; i++) {
    pthread_mutex_lock(&v[i]->m);
    while (v[i]->head || (v[i]->worker_started && !v[i]->worker_done))
      pthread_cond_wait(&v[i]->done_cv, &v[i]->m);
    pthread_mutex_unlock(&v[i]->m);
    scu_stream_put(v[i]);
  }
  free(v);
}

/* ---- per-thread default streams ----------------------------------------- */

#define PTDS_CACHE 8

typedef struct ptds_slot {
  uint64_t ctx_uid;
  scu_stream *s; /* referenced */
} ptds_slot;

static _Thread_local ptds_slot ptds_cache[PTDS_CACHE];
static pthread_key_t ptds_key;
static pthread_once_t ptds_key_once = PTHREAD_ONCE_INIT;

static void ptds_thread_exit(void *unused) {
  (void)unused;
  scu_ptds_forget_thread();
}

static void make_key(void) {
  pthread_key_create(&ptds_key, ptds_thread_exit);
}

void scu_ptds_forget_thread(void) {
  for (int i = 0; i < PTDS_CACHE; i++) {
    if (ptds_cache[i].s) {
      scu_stream_close(ptds_cache[i].s);
      scu_stream_put(ptds_cache[i].s);
      ptds_cache[i].s = NULL;
    }
  }
}

static bool is_closing(scu_stream *s) {
  pthread_mutex_lock(&s->m);
  bool c = s->closing;
  pthread_mutex_unlock(&s->m);
  return c;
}

static CUresult ptds_get(scu_ctx *c, scu_stream **out) {
  int slot = -1;
  for (int i = 0; i < PTDS_CACHE; i++) {
    ptds_slot *p = &ptds_cache[i];
    if (p->s && p->ctx_uid == c->uid) {
      if (!is_closing(p->s)) {
        scu_obj_ref(&p->s->hdr);
        *out = p->s;
        return CUDA_SUCCESS;
      }
      scu_stream_put(p->s); /* the context was reset */
      p->s = NULL;
    }
    if (!p->s && slot < 0)
      slot = i;
  }
  if (slot < 0) { /* full: the first one goes */
    slot = 0;
    scu_stream_close(ptds_cache[0].s);
    scu_stream_put(ptds_cache[0].s);
    ptds_cache[0].s = NULL;
  }
  pthread_once(&ptds_key_once, make_key);
  pthread_setspecific(ptds_key, (void *)1); /* so the destructor runs */
  scu_stream *s;
  CUresult r = scu_stream_create_internal(c, SCU_STREAM_PER_THREAD, 0, 0, &s);
  if (r != CUDA_SUCCESS)
    return r;
  ptds_cache[slot] = (ptds_slot){c->uid, s};
  scu_obj_ref(&s->hdr);
  *out = s;
  return CUDA_SUCCESS;
}

/* ---- handles ------------------------------------------------------------- */

CUresult scu_stream_resolve(CUstream h, bool ptds, scu_stream **out) {
  if (!h)
    h = ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
  if (h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD) {
    scu_stream *s = (scu_stream *)scu_obj_get(h, SCU_MASK(SCU_T_STREAM));
    if (!s)
      return CUDA_ERROR_INVALID_HANDLE;
    *out = s;
    return CUDA_SUCCESS;
  }
  scu_ctx *c;
  CUresult r = scu_ctx_current(&c);
  if (r != CUDA_SUCCESS)
    return r;
  if (h == CU_STREAM_PER_THREAD) {
    r = ptds_get(c, out);
  } else {
    pthread_mutex_lock(&c->sched);
    scu_stream *s = c->legacy;
    if (s)
      scu_obj_ref(&s->hdr);
    pthread_mutex_unlock(&c->sched);
    r = s ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = s;
  }
  scu_ctx_put(c);
  return r;
}

/* ---- entry points -------------------------------------------------------- */

static CUresult stream_create(CUstream *ph, unsigned flags, int priority) {
  if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
    return CUDA_ERROR_INVALID_VALUE;
  scu_ctx *c;
  CUresult r = scu_ctx_current(&c);
  if (r != CUDA_SUCCESS)
    return r;
  if (priority < SCU_PRIORITY_GREATEST)
    priority = SCU_PRIORITY_GREATEST;
  if (priority > SCU_PRIORITY_LEAST)
    priority = SCU_PRIORITY_LEAST;
  scu_stream *s;
  r = scu_stream_create_internal(c, SCU_STREAM_USER, flags, priority, &s);
  if (r == CUDA_SUCCESS) {
    void *h = scu_obj_publish(&s->hdr, c);
    if (h) {
      *ph = h;
    } else {
      scu_stream_close(s);
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    scu_stream_put(s);
  }
  scu_ctx_put(c);
  return r;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags) {
  SCU_API("cuStreamCreate");
  SCU_RETURN(stream_create(phStream, Flags, 0));
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream,
                                            unsigned int flags, int priority) {
  SCU_API("cuStreamCreateWithPriority");
  SCU_RETURN(stream_create(phStream, flags, priority));
}

/* Returns at once; queued work still runs (as on NVIDIA's driver). */
CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream) {
  SCU_API("cuStreamDestroy");
  scu_stream *s = (scu_stream *)scu_obj_take(hStream, SCU_MASK(SCU_T_STREAM));
  if (!s)
    SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);
  scu_stream_close(s);
  scu_stream_put(s);
  SCU_RETURN(CUDA_SUCCESS);
}

static CUresult stream_synchronize(CUstream h, bool ptds) {
  scu_stream *s;
  CUresult r = scu_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS)
    return r;
  r = refuse_if_capturing(s);
  if (r == CUDA_SUCCESS && s->kind == SCU_STREAM_LEGACY)
    r = scu_capture_check_unsafe();
  if (r == CUDA_SUCCESS)
    r = scu_stream_sync(s);
  scu_stream_put(s);
  return r;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  SCU_API("cuStreamSynchronize");
  SCU_RETURN(stream_synchronize(hStream, false));
}

CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream) {
  SCU_API("cuStreamSynchronize");
  SCU_RETURN(stream_synchronize(hStream, true));
}

/* Whether s's work submitted so far has ended by the caller's virtual
 * time (docs/PROFILE.md, "The virtual clock"): the query first lets that
 * work run (real time), then compares its modelled end with the caller's
 * clock, so the answer does not depend on how fast the emulator ran.
 * Work waiting on a host thread is answered as it stands. */
static bool idle(scu_stream *s, CUresult *err) {
  pthread_mutex_lock(&s->m);
  uint64_t seq = s->submitted;
  pthread_mutex_unlock(&s->m);
  bool settled = scu_stream_settle(s, seq);
  pthread_mutex_lock(&s->m);
  bool ran = s->completed >= seq;
  *err = s->error;
  double end = scu_vclock_end_of(s, seq);
  pthread_mutex_unlock(&s->m);
  if (!settled && ran)
    simclock_reach(end); /* seen to end in real time */
  return ran && (!settled || end <= simclock_now());
}

static CUresult stream_query(CUstream h, bool ptds) {
  scu_stream *s;
  CUresult r = scu_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS)
    return r;
  r = refuse_if_capturing(s);
  if (r == CUDA_SUCCESS) {
    CUresult err;
    simclock_charge_us(simclock_profile()->driver_call_us); /* the call */
    bool done = idle(s, &err);
    if (done && s->kind == SCU_STREAM_LEGACY) { /* and the blocking ones */
      scu_stream **v;
      size_t n = ctx_streams(s->ctx, &v);
      for (size_t i = 0; i < n; i++) {
        CUresult e2;
        if (!(v[i]->flags & CU_STREAM_NON_BLOCKING) && !idle(v[i], &e2))
          done = false;
        scu_stream_put(v[i]);
      }
      free(v);
    }
    r = err != CUDA_SUCCESS ? err : done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  }
  scu_stream_put(s);
  return r;
}

CUresult CUDAAPI cuStreamQuery(CUstream hStream) {
  SCU_API("cuStreamQuery");
  SCU_RETURN(stream_query(hStream, false));
}

CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream) {
  SCU_API("cuStreamQuery");
  SCU_RETURN(stream_query(hStream, true));
}

static CUresult add_callback(CUstream h, CUstreamCallback cb, void *data,
                             unsigned flags, bool ptds) {
  if (!cb || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  scu_stream *s;
  CUresult r = scu_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS)
    return r;
  scu_op *op = scu_op_new(SCU_OP_CALLBACK);
  uint64_t seq;
  if (!op) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    op->u.cb.fn = cb;
    op->u.cb.data = data;
    op->u.cb.handle = h;
    r = scu_stream_submit(s, op, &seq);
  }
  scu_stream_put(s);
  return r;
}

CUresult CUDAAPI cuStreamAddCallback(CUstream hStream,
                                     CUstreamCallback callback, void *userData,
                                     unsigned int flags) {
  SCU_API("cuStreamAddCallback");
  SCU_RETURN(add_callback(hStream, callback, userData, flags, false));
}

CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream hStream,
                                          CUstreamCallback callback,
                                          void *userData, unsigned int flags) {
  SCU_API("cuStreamAddCallback");
  SCU_RETURN(add_callback(hStream, callback, userData, flags, true));
}

static CUresult launch_host_func(CUstream h, CUhostFn fn, void *data,
                                 bool ptds) {
  if (!fn)
    return CUDA_ERROR_INVALID_VALUE;
  scu_stream *s;
  CUresult r = scu_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS)
    return r;
  scu_op *op = scu_op_new(SCU_OP_HOSTFN);
  uint64_t seq;
  if (!op) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    op->u.hostfn.fn = fn;
    op->u.hostfn.data = data;
    r = scu_stream_submit(s, op, &seq);
  }
  scu_stream_put(s);
  return r;
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn,
                                  void *userData) {
  SCU_API("cuLaunchHostFunc");
  SCU_RETURN(launch_host_func(hStream, fn, userData, false));
}

CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn,
                                       void *userData) {
  SCU_API("cuLaunchHostFunc");
  SCU_RETURN(launch_host_func(hStream, fn, userData, true));
}

/* ---- stream properties --------------------------------------------------- */

typedef enum { P_FLAGS, P_PRIORITY, P_ID, P_CTX, P_DEVICE } prop;

static CUresult get_prop(CUstream h, bool ptds, prop what, void *out) {
  if (!out)
    return CUDA_ERROR_INVALID_VALUE;
  scu_stream *s;
  CUresult r = scu_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS)
    return r;
  switch (what) {
  case P_FLAGS:
    *(unsigned *)out = s->flags;
    break;
  case P_PRIORITY:
    *(int *)out = s->priority;
    break;
  case P_ID:
    *(unsigned long long *)out = s->uid;
    break;
  case P_CTX:
    *(CUcontext *)out = scu_obj_handle(&s->ctx->hdr);
    break;
  case P_DEVICE:
    *(CUdevice *)out = 0;
    break;
  }
  scu_stream_put(s);
  return CUDA_SUCCESS;
}

#define STREAM_GETTER(sym, base, ptds, what, type)                             \
  CUresult CUDAAPI sym(CUstream hStream, type *out) {                          \
    SCU_API(base);                                                             \
    SCU_RETURN(get_prop(hStream, ptds, what, out));                            \
  }

STREAM_GETTER(cuStreamGetFlags, "cuStreamGetFlags", false, P_FLAGS,
              unsigned int)
STREAM_GETTER(cuStreamGetFlags_ptsz, "cuStreamGetFlags", true, P_FLAGS,
              unsigned int)
STREAM_GETTER(cuStreamGetPriority, "cuStreamGetPriority", false, P_PRIORITY,
              int)
STREAM_GETTER(cuStreamGetPriority_ptsz, "cuStreamGetPriority", true, P_PRIORITY,
              int)
STREAM_GETTER(cuStreamGetId, "cuStreamGetId", false, P_ID, unsigned long long)
STREAM_GETTER(cuStreamGetId_ptsz, "cuStreamGetId", true, P_ID,
              unsigned long long)
STREAM_GETTER(cuStreamGetCtx, "cuStreamGetCtx", false, P_CTX, CUcontext)
STREAM_GETTER(cuStreamGetCtx_ptsz, "cuStreamGetCtx", true, P_CTX, CUcontext)
STREAM_GETTER(cuStreamGetDevice, "cuStreamGetDevice", false, P_DEVICE, CUdevice)
STREAM_GETTER(cuStreamGetDevice_ptsz, "cuStreamGetDevice", true, P_DEVICE,
              CUdevice)

static CUresult get_ctx_v2(CUstream h, CUcontext *pctx, CUgreenCtx *pgreen,
                           bool ptds) {
  if (!pctx || !pgreen)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = get_prop(h, ptds, P_CTX, pctx);
  if (r == CUDA_SUCCESS)
    *pgreen = NULL;
  return r;
}

CUresult CUDAAPI cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx,
                                   CUgreenCtx *pGreenCtx) {
  SCU_API("cuStreamGetCtx");
  SCU_RETURN(get_ctx_v2(hStream, pCtx, pGreenCtx, false));
}

CUresult CUDAAPI cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx,
                                        CUgreenCtx *pGreenCtx) {
  SCU_API("cuStreamGetCtx");
  SCU_RETURN(get_ctx_v2(hStream, pCtx, pGreenCtx, true));
}
