/* The tracker's scan ahead of batched launches (serve/batch/scan_ahead.h;
 * docs/ARCHITECTURE.md, "Batched launches").
 *
 * Posted shares wait in a ring.  The first scanner polls it every
 * SCANNER_PAUSE_NS while shares keep coming (and sleeps on a condition
 * once none came for IDLE_NS); it wakes the others when it leaves shares
 * behind it, and they scan until the ring is empty.  A share is taken by
 * whoever moves it from POSTED first: a scanner, or the flush of its batch
 * when no scanner got to it.  The ring holds pointers only; one left in it
 * after its share was settled (and maybe filled again) is harmless: a
 * share is taken only while POSTED, which means complete. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

#include "serve/batch/scan_ahead.h"

#include "base/base.h"
#include "base/clock.h"
#include "base/thread.h"

enum { EMPTY = 0, POSTED, SCANNING, DONE };

#define RING 1024
#define MAX_SCANNERS IBP_SCANNERS_MAX
#define SCAN_GAP 128 /* pages (scan_runs) */
/* The first scanner's poll; on the model's timeline, how late it starts a
 * share. */
#define SCANNER_PAUSE_NS 2000
/* ASSUMPTION: how late another scanner, woken on a condition variable,
 * starts a share (a futex wake-up: a few microseconds). */
#define SCANNER_WAKE_NS 5000
/* The first scanner sleeps after this long without a share. */
#define IDLE_NS 1000000

static pthread_mutex_t qlock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static pthread_cond_t first_wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t others_wake = PTHREAD_COND_INITIALIZER;
static ibp_scan_share *ring[RING];
static unsigned head, tail;      /* under qlock: ring[head..tail) */
static int first_sleeps;         /* under qlock */
static int started;              /* under qlock: the scanners were started */
static _Atomic unsigned running; /* scanners started (the model's servers) */

static int run_cmp(const void *x, const void *y) {
  const ibp_scan_run *a = x, *b = y;
  if (a->t != b->t)
    return (uintptr_t)a->t < (uintptr_t)b->t ? -1 : 1;
  return (a->lo > b->lo) - (a->lo < b->lo);
}

/* The tracker's scan (track/track.h) of runs: sorted, and merged across
 * gaps of up to SCAN_GAP pages -- scanning a gap costs less than another
 * call (ibp__track_scan_model_ns) -- so that rows gathered from a table of
 * gigabytes scan those rows' pages, not the table.  Returns its cost on the
 * device's clock (ns): the CPU time it took, or its model on the simulated
 * GPU. */
static double scan_runs(ibp_scan_run *runs, uint32_t n) {
  if (!n)
    return 0;
  const uint64_t t0 = ibp__thread_cpu_ns();
  uint64_t calls = 0, pages = 0;
  qsort(runs, n, sizeof *runs, run_cmp);
  for (uint32_t i = 0; i < n;) {
    ibp_tracked *t = runs[i].t;
    uint64_t lo = runs[i].lo, hi = runs[i].hi;
    for (i++; i < n && runs[i].t == t && runs[i].lo <= hi + SCAN_GAP; i++)
      hi = runs[i].hi > hi ? runs[i].hi : hi;
    (void)ibp__track_sync(t, (uintptr_t)(lo * 4096),
                          (size_t)((hi - lo + 1) * 4096));
    calls++;
    pages += hi - lo + 1;
  }
  return ibp__clock_work_ns((double)(ibp__thread_cpu_ns() - t0),
                            ibp__track_scan_model_ns(calls, pages));
}

/* Scans sh when it is still POSTED; nonzero when this thread did. */
static int take(ibp_scan_share *sh) {
  int posted = POSTED;
  if (!atomic_compare_exchange_strong(&sh->state, &posted, SCANNING))
    return 0;
  sh->cost_ns = scan_runs(sh->runs, sh->nruns);
  atomic_store_explicit(&sh->state, DONE, memory_order_release);
  return 1;
}

static ibp_scan_share *pop_locked(void) {
  return head == tail ? NULL : ring[head++ % RING];
}

static void *first_main(void *unused) {
  (void)unused;
  ibp__guard++;
  prctl(PR_SET_TIMERSLACK, SCANNER_PAUSE_NS / 2, 0, 0, 0);
  uint64_t last = ibp__real_ns();
  for (;;) {
    pthread_mutex_lock(&qlock);
    ibp_scan_share *sh = pop_locked();
    if (sh && head != tail)
      pthread_cond_signal(&others_wake); /* shares left behind */
    if (!sh && ibp__real_ns() - last > IDLE_NS) {
      first_sleeps = 1;
      while (head == tail)
        pthread_cond_wait(&first_wake, &qlock);
      first_sleeps = 0;
      sh = pop_locked();
    }
    pthread_mutex_unlock(&qlock);
    if (sh) {
      take(sh);
      last = ibp__real_ns();
    } else {
      nanosleep(&(struct timespec){0, SCANNER_PAUSE_NS}, NULL);
    }
  }
  return NULL;
}

static void *other_main(void *unused) {
  (void)unused;
  ibp__guard++;
  pthread_mutex_lock(&qlock);
  for (;;) {
    ibp_scan_share *sh = pop_locked();
    if (!sh) {
      pthread_cond_wait(&others_wake, &qlock);
      continue;
    }
    pthread_mutex_unlock(&qlock);
    take(sh);
    pthread_mutex_lock(&qlock);
  }
  return NULL;
}

/* Starts the configured scanners (qlock held), once. */
static void start_locked(void) {
  started = 1;
  unsigned want = ibp__cfg.scanners;
  if (want > MAX_SCANNERS)
    want = MAX_SCANNERS;
  unsigned n = want && ibp__thread_start(first_main) ? 1 : 0;
  while (n && n < want && ibp__thread_start(other_main))
    n++;
  atomic_store(&running, n);
}

void ibp__scan_post(ibp_scan_share *sh) {
  atomic_store_explicit(&sh->state, POSTED, memory_order_release);
  pthread_mutex_lock(&qlock);
  if (!started)
    start_locked();
  if (atomic_load_explicit(&running, memory_order_relaxed) &&
      tail - head < RING) {
    ring[tail++ % RING] = sh;
    if (first_sleeps)
      pthread_cond_signal(&first_wake);
  }
  pthread_mutex_unlock(&qlock);
}

double ibp__scan_settle(ibp_scan_share *shares, uint32_t n,
                        ibp_scan_run *tail_runs, uint32_t ntail, double now) {
  const unsigned servers = atomic_load(&running);
  double own = 0;
  for (uint32_t i = 0; i < n; i++) {
    ibp_scan_share *sh = &shares[i];
    if (atomic_load_explicit(&sh->state, memory_order_acquire) == EMPTY ||
        !servers) { /* never posted, or no scanner: this thread's own */
      atomic_store_explicit(&sh->state, EMPTY, memory_order_relaxed);
      sh->cost_ns = scan_runs(sh->runs, sh->nruns);
      own += sh->cost_ns;
      continue;
    }
    take(sh); /* no scanner got to it: on the model's timeline, one did */
  }
  own += scan_runs(tail_runs, ntail);
  /* the model's scanners, each free from free_ns[k] */
  double free_ns[MAX_SCANNERS] = {0}, done = 0;
  for (uint32_t i = 0; i < n; i++) {
    ibp_scan_share *sh = &shares[i];
    while (atomic_load_explicit(&sh->state, memory_order_acquire) == SCANNING)
      sched_yield();
    if (atomic_load_explicit(&sh->state, memory_order_relaxed) == EMPTY)
      continue; /* paid above */
    unsigned best = 0;
    double best_start = 0;
    for (unsigned k = 0; k < servers; k++) {
      const double ready =
          sh->held_ns + (k ? SCANNER_WAKE_NS : SCANNER_PAUSE_NS);
      const double start = free_ns[k] > ready ? free_ns[k] : ready;
      if (k == 0 || start < best_start)
        best = k, best_start = start;
    }
    free_ns[best] = best_start + sh->cost_ns;
    done = free_ns[best] > done ? free_ns[best] : done;
  }
  for (uint32_t i = 0; i < n; i++)
    atomic_store_explicit(&shares[i].state, EMPTY, memory_order_relaxed);
  const double behind = done - now - own;
  return own + (behind > 0 ? behind : 0);
}

void ibp__scan_after_fork_child(void) {
  qlock = (pthread_mutex_t)PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
  pthread_cond_init(&first_wake, NULL);
  pthread_cond_init(&others_wake, NULL);
  head = tail = 0;
  first_sleeps = 0;
  started = 0;
  atomic_store(&running, 0);
}
