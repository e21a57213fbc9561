/* The chooser's decision logic (serve/choose/choose.h; docs/ARCHITECTURE.md
 * "The gate").  Pure: no CUDA, no clock, no lock (the caller holds its
 * table's). */
#include "serve/choose/choose.h"

#include <string.h>

/* Measured ratios are kept within [1/RATIO_MAX, RATIO_MAX]. */
#define RATIO_MAX 64.0
/* The timing credit saved up at most, in timed copies. */
#define TIMING_CREDIT_MAX 4.0

static double max2(double a, double b) {
  return a > b ? a : b;
}

static int is_open(const ibp_route_cost *c) {
  return c->cpu_ns > 0 || c->gpu_ns > 0;
}

unsigned ibp__choose_class_index(uint64_t bytes, int busy,
                                 ibp_class_mode mode) {
  unsigned size = bytes ? 63u - (unsigned)__builtin_clzll(bytes) : 0;
  if (size >= IBP_CHOOSE_SIZES)
    size = IBP_CHOOSE_SIZES - 1;
  if ((unsigned)mode >= IBP_CLASS_MODES)
    mode = IBP_CLASS_SINGLE;
  return (size * 2 + (busy ? 1u : 0u)) * IBP_CLASS_MODES + (unsigned)mode;
}

void ibp__choose_class_init(ibp_choose_class *k) {
  memset(k, 0, sizeof *k);
  k->last = -1;
  for (int r = 0; r < IBP_ROUTES; r++)
    k->route[r].cpu_ratio = k->route[r].gpu_ratio = 1.0;
}

/* A measured ratio as the estimate uses it: 1 until measured enough, and
 * within the dead band. */
static double used(const ibp_choose_route *q, double ratio) {
  if (q->samples < IBP_CHOOSE_MIN_SAMPLES)
    return 1.0;
  if (ratio > 1.0 - IBP_CHOOSE_DEAD_BAND && ratio < 1.0 + IBP_CHOOSE_DEAD_BAND)
    return 1.0;
  return ratio;
}

double ibp__choose_estimate(const ibp_choose_class *k, ibp_route r,
                            const ibp_route_cost *c) {
  const ibp_choose_route *q = &k->route[r];
  double cr = used(q, q->cpu_ratio), gr = used(q, q->gpu_ratio);
  /* the driver's copy is the baseline: measured cheaper than modelled, it
   * is believed; measured dearer, not -- its timed copies share the link
   * with libibp's own routes' work, which made it look up to 1.7x dearer
   * on a weight stream and sent its copies to a slower staged path */
  if (r == IBP_ROUTE_DRIVER) {
    cr = cr < 1.0 ? cr : 1.0;
    gr = gr < 1.0 ? gr : 1.0;
  }
  return c->serial ? c->cpu_ns * cr + c->gpu_ns * gr
                   : max2(c->cpu_ns * cr, c->gpu_ns * gr);
}

/* The smallest of est[] among the open routes, the driver's first: another
 * route wins only when strictly smaller (the model's rule). */
static ibp_route smallest(const double est[IBP_ROUTES]) {
  ibp_route best = IBP_ROUTE_DRIVER;
  for (int r = 0; r < IBP_ROUTES; r++)
    if (est[r] > 0 && (est[best] <= 0 || est[r] < est[best]))
      best = (ibp_route)r;
  return best;
}

/* Whether what the class measured of route r moves its estimate off the
 * prior (enough timed copies, a ratio outside the dead band). */
static int corrected(const ibp_choose_route *q) {
  return used(q, q->cpu_ratio) != 1.0 || used(q, q->gpu_ratio) != 1.0;
}

/* Whether the class's measurements moved either route off its prior: only
 * then does the last choice stay while nearly as good (hysteresis) --
 * where the model stands, each copy takes the model's choice for it (its
 * prior varies from copy to copy: a stream busy or not). */
static int measured(const ibp_choose_class *k, int a, int b) {
  return corrected(&k->route[a]) || corrected(&k->route[b]);
}

/* The alternative to explore: an open route other than `go` that may be
 * explored now, the least measured first, then the cheapest; -1: none. */
static int candidate(const ibp_choose_class *k, const double est[IBP_ROUTES],
                     ibp_route go, unsigned timable) {
  int pick = -1;
  for (int r = 0; r < IBP_ROUTES; r++) {
    if (r == (int)go || est[r] <= 0 || k->route[r].wait ||
        k->route[r].pending || !(timable >> r & 1))
      continue;
    if (pick < 0)
      pick = r;
    else if ((k->route[r].samples < IBP_CHOOSE_MIN_SAMPLES) !=
             (k->route[pick].samples < IBP_CHOOSE_MIN_SAMPLES))
      pick = k->route[r].samples < IBP_CHOOSE_MIN_SAMPLES ? r : pick;
    else if (est[r] < est[pick])
      pick = r;
  }
  return pick;
}

static void count(ibp_choose_class *k, ibp_route go, const double est[]) {
  k->copies++;
  k->route[go].chosen++;
  k->spent_ns += est[go];
  for (int r = 0; r < IBP_ROUTES; r++)
    if (k->route[r].wait)
      k->route[r].wait--;
}

/* Sends a route explored now to wait before the next exploration: not yet
 * while it has too few timed copies to be judged; then longer each time
 * (reset when it becomes the choice). */
static void back_off(ibp_choose_route *q) {
  if (q->samples + 1 < IBP_CHOOSE_MIN_SAMPLES)
    return;
  q->wait = IBP_CHOOSE_WAIT_COPIES << q->backoff;
  if (q->backoff < IBP_CHOOSE_BACKOFF_MAX)
    q->backoff++;
}

ibp_route ibp__choose_decide(ibp_choose_class *k,
                             const ibp_route_cost prior[IBP_ROUTES],
                             unsigned timable, double timing_ns, int learn,
                             int dry, ibp_choice *out) {
  double model[IBP_ROUTES];
  memset(out, 0, sizeof *out);
  for (int r = 0; r < IBP_ROUTES; r++)
    model[r] =
        is_open(&prior[r])
            ? (prior[r].serial ? prior[r].cpu_ns + prior[r].gpu_ns
                               : max2(prior[r].cpu_ns, prior[r].gpu_ns)) +
                  1e-9
            : 0;
  out->modelled = smallest(model);
  if (!learn) {
    out->route = (ibp_route)out->modelled;
    memcpy(out->est_ns, model, sizeof model);
    if (!dry)
      count(k, out->route, model);
    return out->route;
  }
  for (int r = 0; r < IBP_ROUTES; r++)
    out->est_ns[r] =
        model[r] > 0 ? ibp__choose_estimate(k, (ibp_route)r, &prior[r]) + 1e-9
                     : 0;
  const double *est = out->est_ns;
  ibp_route go = smallest(est);
  /* hysteresis: the last choice stays while nearly as good, once the class
   * has measurements to stand on */
  const int last = k->last;
  if (last >= 0 && last != (int)go && est[last] > 0 &&
      est[last] <= est[go] * (1.0 + IBP_CHOOSE_HYSTERESIS) &&
      measured(k, last, go))
    go = (ibp_route)last;
  /* credit: a share of this copy's estimated time each */
  double explore_credit =
      k->explore_credit_ns + IBP_CHOOSE_EXPLORE_SHARE * est[go];
  double timing_credit =
      k->timing_credit_ns + IBP_CHOOSE_TIMING_SHARE * est[go];
  if (!k->copies) /* a class's first copy is timed */
    timing_credit += timing_ns;
  if (timing_credit > TIMING_CREDIT_MAX * timing_ns)
    timing_credit = TIMING_CREDIT_MAX * timing_ns;
  ibp_route take = go;
  const int alt = candidate(k, est, go, timable);
  /* what exploring it may cost: its estimate over the choice's, the
   * timing, and while it is unmeasured, IBP_CHOOSE_UNMEASURED of its
   * estimate again (the prior may be that wrong; ibp__choose_settle
   * charges what it took) */
  double cost = 0;
  if (alt >= 0) {
    /* taken once, by itself (a batch of one copy: its model's figure
     * scaled as the class measured the route) */
    const double once = prior[alt].once_ns > model[alt]
                            ? est[alt] * prior[alt].once_ns / model[alt]
                            : est[alt];
    cost = max2(0, once - est[go]) + timing_ns +
           (k->route[alt].samples < IBP_CHOOSE_MIN_SAMPLES
                ? IBP_CHOOSE_UNMEASURED * once
                : 0);
  }
  if (alt >= 0 && explore_credit >= cost) {
    take = (ibp_route)alt;
    out->explore = out->timed = 1;
    out->charged_ns = cost;
    explore_credit -= cost;
  } else if ((timable >> go & 1) && timing_credit >= timing_ns) {
    out->timed = 1;
    timing_credit -= timing_ns;
  }
  out->route = take;
  out->choice_ns = est[go];
  if (dry)
    return take;
  k->explore_credit_ns = explore_credit;
  k->timing_credit_ns = timing_credit;
  if (out->explore) {
    k->explored++;
    k->route[take].explored++;
    k->explore_ns += cost;
    k->route[take].pending++;
    back_off(&k->route[take]);
  }
  if ((int)go != out->modelled)
    k->overruled++;
  if ((int)go != last) {
    k->last = (int)go;
    k->route[go].backoff = 0; /* it won: explore it freely again later */
  }
  count(k, take, est);
  return take;
}

static double bounded(double r) {
  return r > RATIO_MAX ? RATIO_MAX : r < 1.0 / RATIO_MAX ? 1.0 / RATIO_MAX : r;
}

static double smallest_seen(const double seen[IBP_CHOOSE_WINDOW],
                            uint32_t samples) {
  const uint32_t n = samples < IBP_CHOOSE_WINDOW ? samples : IBP_CHOOSE_WINDOW;
  double m = seen[0];
  for (uint32_t i = 1; i < n; i++)
    m = seen[i] < m ? seen[i] : m;
  return m;
}

void ibp__choose_learn(ibp_choose_class *k, ibp_route r, double cpu_ns,
                       double cpu_model_ns, double gpu_ns,
                       double gpu_model_ns) {
  if ((unsigned)r >= IBP_ROUTES)
    return;
  ibp_choose_route *q = &k->route[r];
  const double cr = cpu_model_ns > 0 ? bounded(cpu_ns / cpu_model_ns) : 1.0;
  const double gr = gpu_model_ns > 0 ? bounded(gpu_ns / gpu_model_ns) : 1.0;
  q->cpu_seen[q->samples % IBP_CHOOSE_WINDOW] = cr;
  q->gpu_seen[q->samples % IBP_CHOOSE_WINDOW] = gr;
  q->samples++;
  q->cpu_ratio = smallest_seen(q->cpu_seen, q->samples);
  q->gpu_ratio = smallest_seen(q->gpu_seen, q->samples);
}

void ibp__choose_settle(ibp_choose_class *k, ibp_route r, double charged_ns,
                        double excess_ns) {
  if ((unsigned)r >= IBP_ROUTES)
    return;
  if (k->route[r].pending)
    k->route[r].pending--;
  if (excess_ns < 0)
    return;
  k->explore_credit_ns -= excess_ns - charged_ns;
  k->explore_ns += excess_ns - charged_ns;
}
