/* The simulated GPU's virtual clock (simclock.h). */
#include "simclock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_PROFILE "a100-pcie4"
/* Busy intervals kept per link; the oldest are merged into `floor` (no
 * reservation starts before it) when the list is full. */
#define LINK_INTERVALS 128

static ibp_profile profile;
static pthread_once_t profile_once = PTHREAD_ONCE_INIT;

/* SIMCUDA_PROFILE (the simulated GPU's own truth), else IBP_PROFILE (then
 * one profile is both the GPU and libibp's model of it): docs/PROFILE.md,
 * "The virtual clock". */
static void load_profile(void) {
  const char *var = "SIMCUDA_PROFILE";
  const char *spec = getenv(var);
  if (!spec || !*spec) {
    var = "IBP_PROFILE";
    spec = getenv(var);
  }
  char err[512];
  if (spec && *spec && ibp_profile_load(spec, &profile, err, sizeof err) == 0)
    return;
  if (spec && *spec) {
    char msg[700];
    int n = snprintf(msg, sizeof msg, "[simclock] %s: %s; using %s\n", var, err,
                     DEFAULT_PROFILE);
    if (n > 0 && write(STDERR_FILENO, msg, (size_t)n) < 0)
      n = 0;
  }
  const char *text = ibp_profile_builtin_text(DEFAULT_PROFILE);
  if (!text || ibp_profile_parse(text, strlen(text), DEFAULT_PROFILE, &profile,
                                 err, sizeof err) != 0)
    memset(&profile, 0, sizeof profile); /* cannot happen: tested */
}

const ibp_profile *simclock_profile(void) {
  pthread_once(&profile_once, load_profile);
  return &profile;
}

/* ---- host threads ----------------------------------------------------------
 */

/* The latest time any thread reached, in whole ns (for new threads). */
static atomic_ullong frontier;

static _Thread_local double host_ns;
static _Thread_local int host_started;

static void raise_frontier(double t) {
  unsigned long long v = (unsigned long long)t;
  unsigned long long cur =
      atomic_load_explicit(&frontier, memory_order_relaxed);
  while (cur < v &&
         !atomic_compare_exchange_weak_explicit(
             &frontier, &cur, v, memory_order_relaxed, memory_order_relaxed))
    ;
}

static double *thread_clock(void) {
  if (!host_started) {
    host_started = 1;
    host_ns = (double)atomic_load(&frontier);
  }
  return &host_ns;
}

double simclock_now(void) {
  return *thread_clock();
}

void simclock_charge_us(double us) {
  double *t = thread_clock();
  *t += us * 1e3;
  raise_frontier(*t);
}

void simclock_reach(double t) {
  double *c = thread_clock();
  if (t > *c)
    *c = t;
  raise_frontier(*c);
}

/* ---- the link
 * ---------------------------------------------------------------- */

typedef struct interval {
  double lo, hi;
} interval;

typedef struct timeline {
  pthread_mutex_t m;
  double floor;
  size_t n;
  interval busy[LINK_INTERVALS]; /* sorted, disjoint */
} timeline;

static timeline links[SIMCLOCK_LINKS] = {{.m = PTHREAD_MUTEX_INITIALIZER},
                                         {.m = PTHREAD_MUTEX_INITIALIZER}};

/* Inserts busy [lo, hi) at index `at` (sorted, disjoint), merging with
 * neighbours it touches; when the list is full the oldest interval
 * becomes the floor. */
static void occupy(timeline *l, size_t at, double lo, double hi) {
  if (at > 0 && l->busy[at - 1].hi >= lo) {
    l->busy[at - 1].hi = hi;
    if (at < l->n && l->busy[at].lo <= hi) { /* fills the gap exactly */
      l->busy[at - 1].hi = l->busy[at].hi;
      memmove(l->busy + at, l->busy + at + 1,
              (l->n - at - 1) * sizeof *l->busy);
      l->n--;
    }
    return;
  }
  if (at < l->n && l->busy[at].lo <= hi) {
    l->busy[at].lo = lo;
    return;
  }
  if (l->n == LINK_INTERVALS) {
    l->floor = l->busy[0].hi;
    memmove(l->busy, l->busy + 1, (l->n - 1) * sizeof *l->busy);
    l->n--;
    at = at ? at - 1 : 0;
  }
  memmove(l->busy + at + 1, l->busy + at, (l->n - at) * sizeof *l->busy);
  l->busy[at] = (interval){lo, hi};
  l->n++;
}

/* The index of the first interval ending after t (binary search: the
 * list is sorted and disjoint). */
static size_t first_after(const timeline *l, double t) {
  size_t lo = 0, hi = l->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (l->busy[mid].hi <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The transfer takes the link's free time from `ready` on, gap after gap,
 * until it has had `dur` (transfers of several streams interleave, as a
 * DMA engine interleaves their packets): the link's busy time is the sum
 * of the transfers whatever order the streams' workers run them in. */
double simclock_link_reserve(simclock_link link, double ready, double dur) {
  if ((unsigned)link >= SIMCLOCK_LINKS || !(dur > 0))
    return ready;
  timeline *l = &links[link];
  pthread_mutex_lock(&l->m);
  double t = ready > l->floor ? ready : l->floor, left = dur;
  size_t i = first_after(l, t);
  while (left > 0) {
    if (i < l->n && l->busy[i].lo <= t) { /* busy: skip it */
      t = l->busy[i].hi;
      i++;
      continue;
    }
    /* the free time up to the next busy interval, or all that is left
     * (exactly: t + left may round, and then the rest would never end) */
    int gap = i < l->n && l->busy[i].lo - t < left;
    double take = gap ? l->busy[i].lo - t : left;
    double end = gap ? l->busy[i].lo : t + left;
    occupy(l, i, t, end);
    t = end;
    left = gap ? left - take : 0;
    i = first_after(l, t); /* the list changed */
  }
  pthread_mutex_unlock(&l->m);
  return t;
}

void simclock_reset(void) {
  for (int i = 0; i < SIMCLOCK_LINKS; i++) {
    pthread_mutex_lock(&links[i].m);
    links[i].floor = 0;
    links[i].n = 0;
    pthread_mutex_unlock(&links[i].m);
  }
  atomic_store(&frontier, 0);
  host_ns = 0;
  host_started = 1;
}
