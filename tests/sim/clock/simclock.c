/* The simulated GPU's virtual clock (simclock.h). */
#include "simclock.h"

#include <math.h>
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
/* Steps kept per SM timeline; the oldest are dropped into its `floor`
 * when the list is full. */
#define SM_STEPS 128

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

/* ---- the SMs ------------------------------------------------------------- */

/* From `t` on (to the next step) `used` SMs are reserved. */
typedef struct step {
  double t;
  unsigned used;
} step;

/* A piecewise-constant count of reserved SMs: none before the first step
 * and from the last on (the last step's `used` is 0). */
typedef struct sm_timeline {
  pthread_mutex_t m;
  double floor;
  size_t n;
  step steps[SM_STEPS]; /* t strictly increasing */
} sm_timeline;

static sm_timeline sm_lines[SIMCLOCK_DEVICES];
static pthread_once_t sm_once = PTHREAD_ONCE_INIT;

static void sm_init(void) {
  for (int i = 0; i < SIMCLOCK_DEVICES; i++)
    pthread_mutex_init(&sm_lines[i].m, NULL);
}

/* The number of steps at or before t (binary search). */
static size_t steps_upto(const sm_timeline *l, double t) {
  size_t lo = 0, hi = l->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (l->steps[mid].t <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Inserts a step at `at`, t, with `used`. */
static void step_insert(sm_timeline *l, size_t at, double t, unsigned used) {
  memmove(l->steps + at + 1, l->steps + at, (l->n - at) * sizeof *l->steps);
  l->steps[at] = (step){t, used};
  l->n++;
}

/* The index of a step that starts at t (one inserted if none does). */
static size_t step_at(sm_timeline *l, double t) {
  size_t k = steps_upto(l, t);
  if (k > 0 && l->steps[k - 1].t == t)
    return k - 1;
  step_insert(l, k, t, k > 0 ? l->steps[k - 1].used : 0);
  return k;
}

/* Room for the two steps a reservation adds: the oldest steps go, and no
 * reservation starts before the time they covered. */
static void sm_make_room(sm_timeline *l) {
  while (l->n + 2 > SM_STEPS) {
    l->floor = l->steps[1].t;
    memmove(l->steps, l->steps + 1, (l->n - 1) * sizeof *l->steps);
    l->n--;
  }
}

/* Drops the steps in [lo, hi) that change nothing. */
static void sm_merge(sm_timeline *l, size_t lo, size_t hi) {
  size_t w = lo;
  for (size_t r = lo; r < l->n; r++) {
    unsigned before = w > 0 ? l->steps[w - 1].used : 0;
    if (r < hi && l->steps[r].used == before)
      continue;
    l->steps[w++] = l->steps[r];
  }
  l->n = w;
}

/* The kernel's work, want x dur SM-ns, done in the SMs it gets stretch by
 * stretch (a stretch: from one step to the next); each stretch it runs in
 * has its SMs added.  The last step leaves every SM free, so the work
 * always ends.  Returns the end. */
static double sm_fill(sm_timeline *l, double t, unsigned total, unsigned want,
                      double dur) {
  double left = (double)want * dur;
  size_t k = step_at(l, t), first = k;
  for (;; k++) {
    unsigned used = l->steps[k].used;
    unsigned got = used >= total         ? 0
                   : total - used < want ? total - used
                                         : want;
    double next = k + 1 < l->n ? l->steps[k + 1].t : INFINITY;
    if (got == 0) {
      t = next;
      continue;
    }
    if (next < INFINITY && left > got * (next - t)) {
      left -= got * (next - t);
      l->steps[k].used = used + got;
      t = next;
      continue;
    }
    double end = t + left / got;
    if (end > next) /* rounding */
      end = next;
    if (end > t) {
      if (end < next)
        step_insert(l, k + 1, end, used);
      l->steps[k].used = used + got;
    }
    t = end;
    break;
  }
  sm_merge(l, first, k + 2);
  return t;
}

double simclock_sms_reserve(unsigned device, double ready, unsigned total,
                            unsigned want, double dur) {
  if (!(dur > 0))
    return ready;
  total = total ? total : 1;
  want = want == 0 ? 1 : want > total ? total : want;
  /* work that does not fit a double never ends: it holds no SMs (a step
   * left in use forever would starve every later kernel) */
  if (!((double)want * dur < INFINITY))
    return ready + dur;
  pthread_once(&sm_once, sm_init);
  sm_timeline *l =
      &sm_lines[device < SIMCLOCK_DEVICES ? device : SIMCLOCK_DEVICES - 1];
  pthread_mutex_lock(&l->m);
  sm_make_room(l);
  double end =
      sm_fill(l, ready > l->floor ? ready : l->floor, total, want, dur);
  pthread_mutex_unlock(&l->m);
  return end;
}

void simclock_reset(void) {
  for (int i = 0; i < SIMCLOCK_LINKS; i++) {
    pthread_mutex_lock(&links[i].m);
    links[i].floor = 0;
    links[i].n = 0;
    pthread_mutex_unlock(&links[i].m);
  }
  pthread_once(&sm_once, sm_init);
  for (int i = 0; i < SIMCLOCK_DEVICES; i++) {
    pthread_mutex_lock(&sm_lines[i].m);
    sm_lines[i].floor = 0;
    sm_lines[i].n = 0;
    pthread_mutex_unlock(&sm_lines[i].m);
  }
  atomic_store(&frontier, 0);
  host_ns = 0;
  host_started = 1;
}
