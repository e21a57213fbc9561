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

static double min2(double a, double b) {
  return a < b ? a : b;
}

static int is_open(const ibp_route_cost *c) {
  return c->cpu_ns > 0 || c->gpu_ns > 0;
}

double ibp__choose_gpu_ns(const ibp_route_cost *c, double gr) {
  const double g = c->gpu_ns * gr;
  if (c->sm_ns <= 0)
    return g;
  return c->pipelined ? max2(g, c->sm_ns) : g + c->sm_ns;
}

/* Cost c's CPU term with its calls scaled by cr (libibp's own work, as
 * it is). */
static double cpu_ns(const ibp_route_cost *c, double cr) {
  const double own = c->own_ns < c->cpu_ns ? c->own_ns : c->cpu_ns;
  return (c->cpu_ns - own) * cr + own;
}

/* Cost c's lead (its CPU time the GPU waits for) with its calls scaled by
 * cr; libibp's own work comes first in it. */
static double lead_ns(const ibp_route_cost *c, double cr) {
  const double lead = c->lead_ns < c->cpu_ns ? c->lead_ns : c->cpu_ns;
  const double own = c->own_ns < lead ? c->own_ns : lead;
  return (lead - own) * cr + own;
}

/* The two terms joined: added up for a serial route; else copies back to
 * back overlap them, and only the GPU's wait for the lead adds. */
static double joined(const ibp_route_cost *c, double cpu, double gpu,
                     double cr) {
  return c->serial ? cpu + gpu : max2(cpu, lead_ns(c, cr) + gpu);
}

/* Cost c with its calls scaled by cr and its link's by gr. */
static double scaled(const ibp_route_cost *c, double cr, double gr) {
  return joined(c, cpu_ns(c, cr), ibp__choose_gpu_ns(c, gr), cr);
}

double ibp__choose_model_ns(const ibp_route_cost *c) {
  return scaled(c, 1, 1);
}

uint64_t ibp__choose_explore_part(uint64_t off, uint64_t bytes, uint64_t R) {
  uint64_t want = bytes / IBP_CHOOSE_EXPLORE_PARTS;
  if (want < IBP_CHOOSE_EXPLORE_PART_MIN)
    want = IBP_CHOOSE_EXPLORE_PART_MIN;
  if (!R)
    return 0;
  const uint64_t end = (off + want + R - 1) / R * R; /* a tensor's end */
  return end - off < bytes / 4 ? end - off : 0;
}

unsigned ibp__choose_class_index(uint64_t bytes, int busy,
                                 ibp_class_mode mode) {
  unsigned size = bytes ? 63u - (unsigned)__builtin_clzll(bytes) : 0;
  if (size >= IBP_CHOOSE_SIZES)
    size = IBP_CHOOSE_SIZES - 1;
  if ((unsigned)mode >= IBP_CLASS_MODES)
    mode = IBP_CLASS_SINGLE;
  const unsigned key = size * 2 + (busy ? 1u : 0u);
  return key * IBP_CLASS_MODES + (unsigned)mode;
}

unsigned ibp__choose_key(unsigned cls) {
  return cls / IBP_CLASS_MODES;
}

unsigned ibp__choose_twin(unsigned key) {
  return key ^ 1u; /* the busy bit (ibp__choose_class_index) */
}

void ibp__choose_routes_init(ibp_choose_route route[IBP_ROUTES]) {
  memset(route, 0, IBP_ROUTES * sizeof *route);
}

void ibp__choose_class_init(ibp_choose_class *k,
                            ibp_choose_route route[IBP_ROUTES]) {
  memset(k, 0, sizeof *k);
  k->route = route;
  k->last = -1;
  k->pause_ns = IBP_CHOOSE_PAUSE_NS;
}

/* Whether launches of a and b copies (0: one) are alike: within
 * IBP_CHOOSE_LIKE of each other. */
static int alike(uint32_t a, uint32_t b) {
  const double x = a ? a : 1, y = b ? b : 1;
  return x <= IBP_CHOOSE_LIKE * y && y <= IBP_CHOOSE_LIKE * x;
}

int ibp__choose_alike(uint32_t a, uint32_t b) {
  return alike(a, b);
}

/* The smallest of route q's cpu (which = 0) or gpu ratios among its
 * samples read since now_ns - IBP_CHOOSE_AGE_NS: of launches alike a
 * launch of `copies` where it has enough such, else of those and larger
 * ones; *fresh: how many.  A batch of one copy measures mostly a launch's fixed
 * costs, a batch of 64 mostly the link: under a link a third as fast,
 * kv_blocks' batches of one (explorations) measured their model and its batches
 * of 64 three times it, and the smaller of the two was believed for both
 * (a100-pcie4, 0.94 of the driver's time).  A larger launch still stands
 * for a smaller one where nothing alike was timed (it has measured the
 * link the smaller one uses): a class of row gathers whose expected batch
 * shrank -- its rows arriving slower while they went to the driver --
 * would otherwise find its batches unmeasured and take the driver's
 * ratios (calls 4x dearer: 0.80 of the driver's time).  Never for a
 * copy of its own (copies 0): the driver's part of an application's batch
 * call, timed whole, set up its entries cheaper than a copy of its own
 * call is set up (an H200: ~0.75 against 2.3 us), and its ratio taken for
 * single copies of the same key made them look 1.4x cheaper than their
 * own timed copy measured. */
static double fresh_ratio(const ibp_choose_route *q, int which, uint32_t copies,
                          double now_ns, uint32_t *fresh) {
  const uint32_t n =
      q->samples < IBP_CHOOSE_WINDOW ? q->samples : IBP_CHOOSE_WINDOW;
  const double *seen = which ? q->gpu_seen : q->cpu_seen;
  uint32_t alikes = 0;
  for (uint32_t i = 0; i < n; i++)
    alikes += q->seen_ns[i] >= now_ns - IBP_CHOOSE_AGE_NS &&
              alike(q->seen_copies[i], copies);
  /* alike ones only: enough of them, or a copy of its own */
  const int like = alikes >= IBP_CHOOSE_MIN_SAMPLES || !copies;
  double m = 0;
  *fresh = 0;
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t c = q->seen_copies[i];
    if (q->seen_ns[i] < now_ns - IBP_CHOOSE_AGE_NS ||
        (like ? !alike(c, copies) : !alike(c, copies) && c <= copies))
      continue;
    m = !*fresh || seen[i] < m ? seen[i] : m;
    ++*fresh;
  }
  return m;
}

/* A measured ratio as the estimate uses it: 1 until measured enough, and
 * within the dead band. */
static double used(const ibp_choose_route *q, int which, uint32_t copies,
                   double now_ns) {
  uint32_t fresh;
  const double ratio = fresh_ratio(q, which, copies, now_ns, &fresh);
  if (fresh < IBP_CHOOSE_MIN_SAMPLES)
    return 1.0;
  if (ratio > 1.0 - IBP_CHOOSE_DEAD_BAND && ratio < 1.0 + IBP_CHOOSE_DEAD_BAND)
    return 1.0;
  return ratio;
}

/* Route q's timed launches alike one of `copies`, not yet aged at
 * now_ns. */
static uint32_t fresh_count(const ibp_choose_route *q, uint32_t copies,
                            double now_ns) {
  uint32_t fresh;
  (void)fresh_ratio(q, 0, copies, now_ns, &fresh);
  return fresh;
}

/* Whether a ratio is outside the dead band (the model is off there). */
static int off_band(double ratio) {
  return ratio <= 1.0 - IBP_CHOOSE_DEAD_BAND ||
         ratio >= 1.0 + IBP_CHOOSE_DEAD_BAND;
}

/* Whether route q, not judged yet, has a fresh timed launch alike one of
 * `copies` that measured it off its model -- its calls or its GPU work:
 * its prior is in doubt.  Its calls too: a batch class of feature_gather's
 * rows, its first launch's holding and scans off their model, left
 * unjudged for eight more launches, explored the driver alone on whole
 * batches meanwhile (a100-pcie4 under a link a third as wide: 0.90-0.93
 * of the batched route's time; 0.99 so). */
static int doubted(const ibp_choose_route *q, uint32_t copies, double now_ns) {
  uint32_t n;
  const double cr = fresh_ratio(q, 0, copies, now_ns, &n);
  const double gr = fresh_ratio(q, 1, copies, now_ns, &n);
  return n && (off_band(cr) || off_band(gr));
}

/* Whether route q has enough fresh timed launches alike one of `copies` to
 * be judged. */
static int judged(const ibp_choose_route *q, uint32_t copies, double now_ns) {
  return fresh_count(q, copies, now_ns) >= IBP_CHOOSE_MIN_SAMPLES;
}

void ibp__choose_ratios(const ibp_choose_class *k, ibp_route r, uint32_t copies,
                        double now_ns, double *cpu, double *gpu) {
  *cpu = used(&k->route[r], 0, copies, now_ns);
  *gpu = used(&k->route[r], 1, copies, now_ns);
}

/* What whole spans v[0..n) (n <= IBP_CHOOSE_WINDOW; sorted in place) say:
 * their median where there are 3 or more, else the smaller (0: none).  Not
 * the smallest of many: a staged copy whose windows began under the last
 * copy's decodes ran nearer its stages' joining than the copies around it
 * (a100-pcie4 under decodes 4x slower: 1.22, 1.13, 1.14, 1.02 -- the
 * smallest, in the dead band, kept weight copies staged at 0.96 of the
 * driver's time); one spike among three still moves nothing. */
static double middle(double *v, uint32_t n) {
  for (uint32_t i = 1; i < n; i++)
    for (uint32_t j = i; j > 0 && v[j] < v[j - 1]; j--) {
      const double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  if (n < 3)
    return n ? v[0] : 0;
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Route q's whole spans not aged at now_ns, into seen[]; how many. */
static uint32_t fresh_wholes(const ibp_choose_route *q, double now_ns,
                             double seen[IBP_CHOOSE_WINDOW]) {
  const uint32_t n =
      q->wholes < IBP_CHOOSE_WINDOW ? q->wholes : IBP_CHOOSE_WINDOW;
  uint32_t fresh = 0;
  for (uint32_t i = 0; i < n; i++)
    if (q->whole_ns[i] >= now_ns - IBP_CHOOSE_AGE_NS)
      seen[fresh++] = q->whole_seen[i];
  return fresh;
}

/* Route q's whole-span ratio as the estimate uses it (1 until measured
 * enough).  No dead band: the whole spans are the two stages' joining as
 * it ran, over the model's joining of the first stage as just measured --
 * a reading already made of measurements, and one within the band is no
 * noise around the prior but what separates the route from the one it
 * competes with (a KV restore of 15 MiB whose staged span ran 1.039x its
 * stages' joining, read as 1, was estimated 0.1 % cheaper than the
 * driver's copy, 4 % faster as they ran: a100-pcie4 under a link 1.5x as
 * wide). */
static double whole(const ibp_choose_route *q, double now_ns) {
  double seen[IBP_CHOOSE_WINDOW];
  const uint32_t fresh = fresh_wholes(q, now_ns, seen);
  const double m = middle(seen, fresh);
  return fresh < IBP_CHOOSE_MIN_SAMPLES ? 1.0 : m;
}

/* Route r (cost c) as the class's own fresh timed copies read it while
 * it is not judged (one copy): its prior at their ratios, a two-stage
 * route's at its whole span too; 0 where it has no such copy (or no whole
 * span). */
static double once_seen(const ibp_choose_class *k, const ibp_route_cost *c,
                        int r, double now_ns) {
  const ibp_choose_route *q = &k->route[r];
  uint32_t n = 0;
  const double cr = fresh_ratio(q, 0, c->copies, now_ns, &n);
  const double gr = fresh_ratio(q, 1, c->copies, now_ns, &n);
  if (!n)
    return 0;
  double w = 1.0;
  if (c->sm_ns > 0) {
    double seen[IBP_CHOOSE_WINDOW];
    const uint32_t m = fresh_wholes(q, now_ns, seen);
    if (!m)
      return 0;
    w = middle(seen, m);
  }
  return joined(c, cpu_ns(c, cr), ibp__choose_gpu_ns(c, gr) * w, cr);
}

/* Whether route q's fresh whole spans (not judged: the caller's) read it
 * off its model's joining. */
static int whole_doubted(const ibp_choose_route *q, double now_ns) {
  double seen[IBP_CHOOSE_WINDOW];
  const uint32_t m = fresh_wholes(q, now_ns, seen);
  return m && off_band(middle(seen, m));
}

/* Whether route q's whole spans are enough to be judged. */
static int whole_judged(const ibp_choose_route *q, double now_ns) {
  double seen[IBP_CHOOSE_WINDOW];
  return fresh_wholes(q, now_ns, seen) >= IBP_CHOOSE_MIN_SAMPLES;
}

double ibp__choose_estimate(const ibp_choose_class *k, ibp_route r,
                            const ibp_route_cost *c, double now_ns) {
  double cr, gr;
  ibp__choose_ratios(k, r, c->copies, now_ns, &cr, &gr);
  const double cpu = cpu_ns(c, cr),
               gpu = ibp__choose_gpu_ns(c, gr) * whole(&k->route[r], now_ns);
  return joined(c, cpu, gpu, cr);
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
static int corrected(const ibp_choose_route *q, uint32_t copies,
                     double now_ns) {
  return used(q, 0, copies, now_ns) != 1.0 || used(q, 1, copies, now_ns) != 1.0;
}

/* Whether the class judged route r on its own timed copies (not on its
 * twin's, nor on what it inherits) -- a two-stage route's whole spans
 * apart: they are learnt only from the class's choice, never from an
 * exploration, and required, the narrow band would hold against a
 * two-stage route only while it is not the choice. */
static int own_judged(const ibp_choose_class *k,
                      const ibp_route_cost prior[IBP_ROUTES], int r,
                      double now_ns) {
  return judged(&k->route[r], prior[r].copies, now_ns);
}

/* Whether the class's measurements moved either route off its prior: only
 * then does the last choice stay while nearly as good (hysteresis) --
 * where the model stands, each copy takes the model's choice for it (its
 * prior varies from copy to copy: a stream busy or not). */
static int measured(const ibp_choose_class *k,
                    const ibp_route_cost prior[IBP_ROUTES], int a, int b,
                    double now_ns) {
  return corrected(&k->route[a], prior[a].copies, now_ns) ||
         corrected(&k->route[b], prior[b].copies, now_ns);
}

/* Route r's estimate were its decoder as fast as it may be
 * (ibp_route_cost.hope_gpu_ns), scaled as its estimate est is over its
 * model: 0 where it is not guessed. */
static double hope_ns(const ibp_route_cost *c, double cr, double gr) {
  if (c->hope_gpu_ns <= 0 && c->hope_sm_ns <= 0)
    return 0;
  ibp_route_cost h = *c;
  h.gpu_ns = c->hope_gpu_ns;
  h.sm_ns = c->hope_sm_ns;
  return scaled(&h, cr, gr);
}

/* The link's ratio a span of route c measured at ratio g stands for, its
 * set-up (ibp_route_cost.setup_ns) taken to be `setup` times its model --
 * at least 1.  A copy-engine span cannot tell a slower link from a dearer
 * set-up: a hope reads it in its favour, the set-up up to
 * IBP_CHOOSE_SETUP_SPAN times its model, until a set-up probe measured it
 * (setup_ratio).  Under driver calls and set-up 4x dearer, kv_blocks'
 * entries of 64 KiB measured 2.4x their model on h100-pcie5 (set-up 46 %
 * of it), and a batched launch hoped that slow, with a set-up of its own
 * for 64 entries, had no hope where it was 1.9x faster than the driver. */
static double hoped_link(const ibp_route_cost *c, double g, double setup) {
  const double part = c->setup_ns < c->gpu_ns ? c->setup_ns : c->gpu_ns;
  const double bytes = c->gpu_ns - part;
  if (part <= 0)
    return g;
  if (bytes <= 0)
    return 1.0;
  return max2(1.0, (g * c->gpu_ns - setup * part) / bytes);
}

/* Whether route q's set-up was measured by a set-up probe on launches
 * alike one of `copies`, not aged at now_ns. */
static int setup_measured(const ibp_choose_route *q, uint32_t copies,
                          double now_ns) {
  return q->setup_copies && ibp__choose_alike(q->setup_copies, copies) &&
         !(q->setup_at_ns < now_ns - IBP_CHOOSE_AGE_NS);
}

/* Whether a set-up probe of route q is under way at now_ns (asked, not
 * read, not given up). */
static int probing(const ibp_choose_route *q, double now_ns) {
  return q->setup_pending && !(q->setup_asked_ns < now_ns - IBP_CHOOSE_AGE_NS);
}

/* The set-up's ratio over its model a hope reads into route q's spans: as
 * a set-up probe measured it, else `doubt`. */
static double setup_ratio(const ibp_choose_route *q, uint32_t copies,
                          double now_ns, double doubt) {
  return setup_measured(q, copies, now_ns) ? q->setup_seen : doubt;
}

/* The calls and the link as the class has seen them so far, one fresh
 * timed copy enough (what a hope is taken at: driver calls 4x dearer
 * than modelled make every route's calls dearer, a link a third as fast
 * every route's bytes slower): the calls as every class measured them
 * (their timed copy-engine routes' calls, ibp_choose_class.calls), the
 * link as the dearest of the class's routes whose link term is a
 * copy-engine transfer alone (ibp_route_cost.engine), each at least 1 --
 * *gr as measured, *hope_gr as hoped_link reads it, an unmeasured set-up
 * taken `doubt` times its model (setup_ratio).  Returns 0 while nothing
 * was seen: a hope is not believed before the first timed copy. */
static int seen_ratios(const ibp_choose_class *k,
                       const ibp_route_cost prior[IBP_ROUTES], double now_ns,
                       double doubt, double *cr, double *gr, double *hope_gr) {
  int seen = 0;
  *cr = *gr = *hope_gr = 1.0;
  for (int r = 0; r < IBP_ROUTES; r++) {
    uint32_t fresh;
    if (!prior[r].engine)
      continue;
    const double g =
        fresh_ratio(&k->route[r], 1, prior[r].copies, now_ns, &fresh);
    if (!fresh)
      continue;
    seen = 1;
    *gr = max2(*gr, g);
    const double setup =
        setup_ratio(&k->route[r], prior[r].copies, now_ns, doubt);
    *hope_gr = max2(*hope_gr, hoped_link(&prior[r], g, setup));
  }
  if (k->calls) {
    uint32_t fresh;
    const double c = fresh_ratio(k->calls, 0, 0, now_ns, &fresh);
    if (fresh) {
      seen = 1;
      *cr = max2(*cr, c);
    }
  }
  return seen;
}

/* The link as the class's timed copy-engine routes other than the
 * driver's copy saw it where every one of them saw it faster than
 * modelled (their fresh timed copies' GPU ratios, the dearest of them,
 * off the dead band): what the driver's copy would take of its prior's
 * link, read in its favour; 1 otherwise.  The staged path's windows move
 * its bytes on the copy engine the driver's copy uses. */
static double link_seen_cheaper(const ibp_choose_class *k,
                                const ibp_route_cost prior[IBP_ROUTES],
                                double now_ns) {
  double g = 0;
  for (int r = 0; r < IBP_ROUTES; r++) {
    uint32_t fresh;
    if (r == IBP_ROUTE_DRIVER || !prior[r].engine)
      continue;
    const double seen =
        fresh_ratio(&k->route[r], 1, prior[r].copies, now_ns, &fresh);
    if (fresh)
      g = max2(g, seen);
  }
  return g > 0 && g <= 1.0 - IBP_CHOOSE_DEAD_BAND ? g : 1.0;
}

/* Whether libibp serves copies of k's key by a route of its own: one
 * chosen (not only explored) by any class of the key -- a held copy's
 * class sees going alone as the driver's copy, which the single copy's
 * class may serve by the staged path. */
static int served(const ibp_choose_class *k) {
  for (int r = 0; r < IBP_ROUTES; r++)
    if (r != IBP_ROUTE_DRIVER && k->route[r].chosen > k->route[r].explored)
      return 1;
  return 0;
}

/* Whether the class has not timed route r and its twin has (twinned). */
static int twin_timed(const ibp_choose_class *k,
                      const ibp_route_cost prior[IBP_ROUTES], int r,
                      double now_ns) {
  return k->twin && !fresh_count(&k->route[r], prior[r].copies, now_ns) &&
         fresh_count(&k->twin[r], prior[r].copies, now_ns);
}

/* Route r as its twin's fresh timed copies measured it, where the class
 * has not timed it (twin_timed) and they measured it clearly cheaper than
 * its model: one copy is a hope, not a judgement (twinned: two); 0 where
 * it has no such copy, they saw the model right or dearer (nothing to
 * find out: a driver's copy timed at its prior, hoped for where it was
 * within the driver's doubt of a staged choice, was explored into a
 * class of weight copies whose staged spans then read slower, and the
 * class left the staged path -- a100-pcie4, truth = prior,
 * cnn_f32_to_bf16: 0.99 instead of 1.21 in 2 runs of 6), or its whole
 * spans were never judged there (a two-stage route). */
static double twin_hope(const ibp_choose_class *k,
                        const ibp_route_cost prior[IBP_ROUTES], int r,
                        double now_ns) {
  const ibp_route_cost *c = &prior[r];
  const ibp_choose_route *t = k->twin ? &k->twin[r] : NULL;
  if (!twin_timed(k, prior, r, now_ns) ||
      (c->sm_ns > 0 && !whole_judged(t, now_ns)))
    return 0;
  uint32_t n;
  const double cr = fresh_ratio(t, 0, c->copies, now_ns, &n),
               gr = fresh_ratio(t, 1, c->copies, now_ns, &n);
  const double h = joined(c, cpu_ns(c, cr),
                          ibp__choose_gpu_ns(c, gr) * whole(t, now_ns), cr);
  return h <= (1.0 - IBP_CHOOSE_DEAD_BAND) * ibp__choose_model_ns(c) ? h : 0;
}

/* Whether route r is worth exploring early: guessed, not measured by the
 * class, never measured worse than the choice (a first early sample that
 * measured worse ends it: under decodes 4x slower than h100-pcie5 says,
 * kv_blocks' two early batches cost 10 %), and at its hope (hope[r])
 * clearly cheaper than go_ns, the class's choice as judged against (assess:
 * the driver's copy as first seen, another route's estimate) -- it could
 * win -- where libibp serves nothing of the key yet (served: the choice
 * is the driver's copy): there a prior wrong in its disfavour costs
 * the whole gain and finding out early pays; where it already serves them
 * by another route, exploring is at the share's pace (under decodes 3x
 * faster or a link a third as fast as a100-pcie4 says, the held copies of
 * KV prefix restores served staged explored batches early: 0.89 of the
 * staged path's time).  The driver's copy, the alternative to a route of
 * libibp's, is hopeful where the class's other copy-engine routes saw the
 * link faster than modelled (hope[]: link_seen_cheaper): libibp may be
 * making those copies slower than the application's own, and no share's
 * pace finds that out within a run (h100-pcie5 under a link twice as
 * wide: 160 weight copies staged at 0.74 of the driver's time, the
 * driver's unmeasured prior charged twice over for an exploration).  So
 * is any route the class's twin timed clearly cheaper than its model
 * (twin_hope), where the class never timed it. */
static int hopeful(const ibp_choose_class *k,
                   const ibp_route_cost prior[IBP_ROUTES], int r,
                   const double hope[IBP_ROUTES], double go_ns, double now_ns) {
  const int driver = r == IBP_ROUTE_DRIVER;
  const int may = driver || twin_hope(k, prior, r, now_ns) > 0 ||
                  (!served(k) && prior[r].guessed);
  const double could = driver ? go_ns * (1.0 + IBP_CHOOSE_DRIVER_DOUBT)
                              : go_ns / (1.0 + IBP_CHOOSE_HYSTERESIS);
  return may && hope[r] > 0 && hope[r] < could &&
         k->route[r].explored < IBP_CHOOSE_MIN_SAMPLES &&
         !k->route[r].backoff && /* the first measured no worse */
         !judged(&k->route[r], prior[r].copies, now_ns);
}

/* The alternative to explore: an open route other than `go` that may be
 * explored now, the least measured first, then the cheapest; -1: none. */
static int candidate(const ibp_choose_class *k, const double est[IBP_ROUTES],
                     const ibp_route_cost prior[IBP_ROUTES],
                     const double hope[IBP_ROUTES], ibp_route go, double go_ns,
                     unsigned timable, double now_ns) {
  int pick = -1, pick_rank = 0;
  for (int r = 0; r < IBP_ROUTES; r++) {
    if (r == (int)go || est[r] <= 0 || k->route[r].wait ||
        k->route[r].pending || !(timable >> r & 1))
      continue;
    /* unmeasured before measured, and among those a guessed prior first,
     * one that could win before all */
    const int rank = judged(&k->route[r], prior[r].copies, now_ns) ? 3
                     : hopeful(k, prior, r, hope, go_ns, now_ns)   ? 0
                     : prior[r].guessed                            ? 1
                                                                   : 2;
    if (pick < 0 ||
        (rank != pick_rank ? rank < pick_rank : est[r] < est[pick])) {
      pick = r;
      pick_rank = rank;
    }
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

/* Spaces a route explored now from its next exploration, by its back-off
 * (ibp__choose_settle lengthens it while it measures worse, and resets it
 * when it measures better). */
static void space(ibp_choose_route *q) {
  q->wait = IBP_CHOOSE_WAIT_COPIES << q->backoff;
}

/* Route r's ratio (which: 0 its calls, 1 its GPU work) as the class and
 * its twin measured it together, for launches of `copies` copies: the
 * smallest of their fresh ones, within the dead band 1; 0 where they have
 * fewer than IBP_CHOOSE_MIN_SAMPLES between them, or disagree. */
static double paired_ratio(const ibp_choose_route *own,
                           const ibp_choose_route *twin, int which,
                           uint32_t copies, double now_ns) {
  uint32_t n_own, n_twin;
  const double a = fresh_ratio(own, which, copies, now_ns, &n_own);
  const double b = fresh_ratio(twin, which, copies, now_ns, &n_twin);
  if (n_own + n_twin < IBP_CHOOSE_MIN_SAMPLES)
    return 0;
  /* where the class's own readings -- its fresh ones, else its last, aged
   * or not -- are off the twin's, busy and idle copies of the size differ
   * (a kernel beside busy streams' SM work): the twin says nothing of the
   * class.  Else, aging one at a time, the class's last fresh sample left
   * the twin's cheaper reading to win again and again, and each time the
   * class's own sample sent it back, explored at once (a busy class of
   * 8 MiB copies whose kernel ran 3x its prior, the idle twin reading it
   * at 0.5: 585 explorations in 10 minutes, 13 % slower than the driver
   * alone; 10 and 0.2 % without the twin) */
  if (n_twin && own->samples) {
    const uint32_t last = (own->samples - 1) % IBP_CHOOSE_WINDOW;
    const double o = n_own   ? a
                     : which ? own->gpu_seen[last]
                             : own->cpu_seen[last];
    if (off_band(o / b))
      return 0;
  }
  const double m = !n_own ? b : !n_twin ? a : min2(a, b);
  return off_band(m) ? m : 1.0;
}

/* Route r, not judged by the class, as it and its twin (ibp_choose_class.twin:
 * its size, on a stream the other way busy) timed it together, where they
 * timed it enough between them: *cr, *gr its ratios (paired_ratio), *w its
 * whole spans' (a two-stage route: only once one of them judged those --
 * its first stage says nothing of its decodes).  Their ratios count in
 * either direction: the same route moving as many bytes, over a model that
 * already counts whether the stream was busy.  Without it, a link 4x as
 * wide as h100-pcie5 says was found out by the idle stream's KV restores
 * (the driver's copy at 0.25 of its prior) while the busy stream's, the
 * same 8 MiB, stayed staged at 2.3x the driver's time (bench/ab line 12,
 * 0.43). */
static int twinned(const ibp_choose_class *k, const ibp_route_cost *c, int r,
                   double now_ns, double *cr, double *gr, double *w) {
  const ibp_choose_route *q = &k->route[r];
  if (!k->twin || judged(q, c->copies, now_ns))
    return 0;
  const ibp_choose_route *t = &k->twin[r];
  *cr = paired_ratio(q, t, 0, c->copies, now_ns);
  *gr = paired_ratio(q, t, 1, c->copies, now_ns);
  const int whole_q = whole_judged(q, now_ns);
  if (*cr <= 0 || *gr <= 0 ||
      (c->sm_ns > 0 && !whole_q && !whole_judged(t, now_ns)))
    return 0;
  *w = whole_q ? whole(q, now_ns) : whole(t, now_ns);
  return 1;
}

/* Whether route r's ratios are known -- judged by the class, or by it and
 * its twin (twinned) -- and what they are. */
static int known(const ibp_choose_class *k, const ibp_route_cost *c, int r,
                 double now_ns, double *cr, double *gr) {
  double w;
  if (judged(&k->route[r], c->copies, now_ns)) {
    ibp__choose_ratios(k, (ibp_route)r, c->copies, now_ns, cr, gr);
    return 1;
  }
  return twinned(k, c, r, now_ns, cr, gr, &w);
}

/* What a route the class has not measured yet (fewer than
 * IBP_CHOOSE_MIN_SAMPLES fresh timed copies) is believed to cost, where
 * the class measured others dearer than modelled: their calls and their
 * link are its calls and its link too (driver calls 4x dearer than
 * modelled are so for every route, a link a third as fast moves every
 * route's bytes a third as fast).  Without it, a route on its prior would
 * win every copy once the others were measured dearer, until timed twice
 * (under a link a third as fast, weight copies went to the zero-copy
 * kernel and the staged path, 0.83x).  Each ratio above 1 counts:
 * - a route the class can time takes the dearest ratios of the routes
 *   whose link term is a copy-engine transfer alone (ibp_route_cost.engine:
 *   the driver's copy, the staged path's windows), which measure the link
 *   and the calls alone; a kernel measured dearer says nothing of them (a
 *   kernel 4x slower than modelled must not make the driver look dearer,
 *   or it is left only once explored).  The driver, unmeasured, takes the
 *   staged windows' (a link a third as fast, found by the staged path's
 *   timed copies, is the driver's too);
 * - a route it cannot time (not in `timable`), which nothing would ever
 *   correct, takes the dearest ratios of every route the class measured --
 *   but a copy-engine route only those of its kind: a batched launch whose
 *   decode measured 50x its model says nothing of the driver's copy (the
 *   driver's rows, believed 50x dearer, stayed batched).
 * A route the class and its twin timed enough between them (twinned) is
 * known: it counts among the measured ones, and takes their ratios, not
 * what others say (under a link a third as fast, the busy stream's driver
 * measured 2x made the idle stream's held weight copies go to a batched
 * launch on its prior, as slow: 0.80 of the driver's time).
 * Being believed dearer delays its exploration (which costs more), never
 * stops it. */
static void inherit(const ibp_choose_class *k,
                    const ibp_route_cost prior[IBP_ROUTES], unsigned timable,
                    double now_ns, double est[IBP_ROUTES],
                    double cpu[IBP_ROUTES]) {
  double cr = 1.0, gr = 1.0, dcr = 1.0, dgr = 1.0;
  for (int r = 0; r < IBP_ROUTES; r++) {
    double c, g;
    if (est[r] <= 0 || !known(k, &prior[r], r, now_ns, &c, &g))
      continue;
    cr = c > cr ? c : cr;
    gr = g > gr ? g : gr;
    if (prior[r].engine) {
      dcr = c > dcr ? c : dcr;
      dgr = g > dgr ? g : dgr;
    }
  }
  if (k->calls && judged(k->calls, 0, now_ns)) { /* any class's calls */
    const double c = used(k->calls, 0, 0, now_ns);
    dcr = c > dcr ? c : dcr;
    cr = c > cr ? c : cr;
  }
  for (int r = 0; r < IBP_ROUTES; r++) {
    const ibp_route_cost *c = &prior[r];
    const int narrow = (timable >> r & 1) || c->engine;
    double tc, tg, tw;
    if (est[r] <= 0 || judged(&k->route[r], c->copies, now_ns))
      continue;
    if (twinned(k, c, r, now_ns, &tc, &tg, &tw)) { /* its own, with its twin */
      est[r] =
          joined(c, cpu_ns(c, tc), ibp__choose_gpu_ns(c, tg) * tw, tc) + 1e-9;
      cpu[r] = cpu_ns(c, tc);
      continue;
    }
    double ci = narrow ? dcr : cr, gi = narrow ? dgr : gr;
    /* what it measured of itself, once, outranks what it inherits: each
     * term no dearer than its own launch measured it, nor cheaper than its
     * model -- term by term, as the estimate is made: its calls measured
     * as dear as the others' say the calls are, its link measured at its
     * model says the others' dearer spans were not its link (under driver
     * calls and set-up 4x dearer, the driver's 64 KiB copies measured 2.5x
     * their model, mostly set-up, and a batched launch measured at 0.57x
     * its model was believed 2.5x dearer until timed again) */
    uint32_t own;
    const double oc = fresh_ratio(&k->route[r], 0, c->copies, now_ns, &own);
    const double og = fresh_ratio(&k->route[r], 1, c->copies, now_ns, &own);
    if (own) {
      ci = ci < max2(oc, 1.0) ? ci : max2(oc, 1.0);
      gi = gi < max2(og, 1.0) ? gi : max2(og, 1.0);
    }
    est[r] = scaled(c, ci, gi) + 1e-9;
    cpu[r] = cpu_ns(c, ci);
  }
}

/* The calls' ratio over their model as every class of the region
 * measured them (ibp_choose_class.calls), once judged; at least 1. */
static double calls_ratio(const ibp_choose_class *k, double now_ns) {
  if (!k->calls || !judged(k->calls, 0, now_ns))
    return 1.0;
  return max2(1.0, used(k->calls, 0, 0, now_ns));
}

/* Every open route's cost as the model alone gives it. */
static void model_of(const ibp_route_cost prior[IBP_ROUTES],
                     double model[IBP_ROUTES]) {
  for (int r = 0; r < IBP_ROUTES; r++)
    model[r] = is_open(&prior[r]) ? scaled(&prior[r], 1, 1) + 1e-9 : 0;
}

/* The copies an exploration of route c takes (ibp_route_cost.explores). */
static double explores(const ibp_route_cost *c) {
  return c->explores > 1 ? c->explores : 1;
}

/* What exploring route c takes at its estimate est (its model: model):
 * the copies it takes (ibp_route_cost.explores) each at est, or where
 * taking them once costs more (ibp_route_cost.once_ns: a batch smaller
 * than the one its estimate is of), that, scaled as est is over the
 * model. */
static double explored_ns(const ibp_route_cost *c, double model, double est) {
  const double n = explores(c);
  return c->once_ns > n * model ? est * c->once_ns / model : n * est;
}

/* Whether route alt, hopeful, waits for a set-up probe of the choice go
 * first (IBP_CHOOSE_PROBE_EVERY): go the driver's part of an application's
 * call (its entries set up in the call: ibp_route_cost.copies), its set-up
 * not measured, and alt hopeful only where that set-up may be dearer than
 * modelled (plain: the hopes with it as modelled) -- a link a third as
 * wide and a set-up 3x dearer measure alike (kv_blocks' entries on
 * h100-pcie5: 2.1x and 2.4x their model), and where the link is the cause,
 * exploring a batched call of 64 entries cost 2.3 % of a 17-step run; the
 * probe costs half the call's entries' set-ups again.  Only entries a
 * probe may halve (ibp_route_cost.probeable: a call of entries alike --
 * one half of 4 KiB entries and one of 64 KiB read a set-up as modelled
 * 4x); the others' hope stands as read.  It waits while a probe is under
 * way (probing); *probe: the choice's copy probes now (the driver's part
 * timable, tries left).  After IBP_CHOOSE_PROBES tries made that came to
 * nothing, the hope stands as read. */
static int probe_first(const ibp_choose_class *k,
                       const ibp_route_cost prior[IBP_ROUTES], unsigned timable,
                       ibp_route go, int alt, const double plain[IBP_ROUTES],
                       double against, double now_ns, int *probe) {
  const ibp_choose_route *q = &k->route[IBP_ROUTE_DRIVER];
  const ibp_route_cost *c = &prior[IBP_ROUTE_DRIVER];
  *probe = 0;
  if (go != IBP_ROUTE_DRIVER || !c->probeable || c->copies <= 1 ||
      c->setup_ns <= 0 || setup_measured(q, c->copies, now_ns) ||
      hopeful(k, prior, alt, plain, against, now_ns))
    return 0;
  if (probing(q, now_ns))
    return 1;
  if (q->setup_failed >= IBP_CHOOSE_PROBES ||
      !(timable >> IBP_ROUTE_DRIVER & 1))
    return 0;
  *probe = IBP_PROBE_HALVED;
  return 1;
}

/* Whether the choice go's first timed copy is made a paired set-up probe
 * (IBP_PROBE_PAIRED): go the driver's part of an application's call, its
 * set-up not measured nor under way (tries left), nothing of it timed yet
 * on launches alike, and a guessed route open that a hope may come to
 * (ibp_route_cost.guessed) -- so that where that hope stands on the
 * set-up's doubt, the probe has been read with the first timed call, and
 * nothing waits for it: probed after it, a batched launch 1.8x faster than
 * the driver under driver calls and set-up 4x dearer (kv_blocks,
 * h100-pcie5) was explored a call later, 0.93 of its time. */
static int probe_paired(const ibp_choose_class *k,
                        const ibp_route_cost prior[IBP_ROUTES],
                        const double est[IBP_ROUTES], unsigned timable,
                        ibp_route go, double now_ns) {
  const ibp_choose_route *q = &k->route[IBP_ROUTE_DRIVER];
  const ibp_route_cost *c = &prior[IBP_ROUTE_DRIVER];
  if (go != IBP_ROUTE_DRIVER || !c->probeable || c->copies <= 1 ||
      c->setup_ns <= 0 || !(timable >> IBP_ROUTE_DRIVER & 1) ||
      setup_measured(q, c->copies, now_ns) || probing(q, now_ns) ||
      q->setup_failed >= IBP_CHOOSE_PROBES || fresh_count(q, c->copies, now_ns))
    return 0;
  for (int r = 0; r < IBP_ROUTES; r++)
    if (r != IBP_ROUTE_DRIVER && est[r] > 0 && prior[r].guessed &&
        (timable >> r & 1))
      return 1;
  return 0;
}

/* What a decision weighs before its credits (ibp_choose_assessed): the
 * estimates, the choice, the alternative and what exploring it costs. */
static void assess(const ibp_choose_class *k,
                   const ibp_route_cost prior[IBP_ROUTES], unsigned timable,
                   double timing_ns, double now_ns, ibp_choose_assessed *a) {
  double *model = a->model, *est = a->est;
  a->probe = 0;
  model_of(prior, model);
  a->modelled = smallest(model);
  for (int r = 0; r < IBP_ROUTES; r++)
    est[r] =
        model[r] > 0
            ? ibp__choose_estimate(k, (ibp_route)r, &prior[r], now_ns) + 1e-9
            : 0;
  /* an exploration is charged on what the class measured of the route
   * itself (an unmeasured one's prior, not what it inherits: being believed
   * dearer than it may be must not delay finding out) */
  double own[IBP_ROUTES];
  double *cpu = a->cpu;
  memcpy(own, est, sizeof own);
  /* the calls as every class measured them (judged): a route's calls
   * cost that much over their model whatever the route -- its own
   * charge stands on its prior but for them, and so does timing a copy
   * (its event records and query are calls) */
  const double calls = calls_ratio(k, now_ns);
  for (int r = 0; r < IBP_ROUTES; r++)
    if (own[r] > 0 && !judged(&k->route[r], prior[r].copies, now_ns))
      own[r] = max2(own[r], scaled(&prior[r], calls, 1.0) + 1e-9);
  timing_ns *= calls;
  a->timing_cost_ns = timing_ns;
  for (int r = 0; r < IBP_ROUTES; r++) {
    double cr, gr;
    ibp__choose_ratios(k, (ibp_route)r, prior[r].copies, now_ns, &cr, &gr);
    cpu[r] = cpu_ns(&prior[r], cr);
  }
  inherit(k, prior, timable, now_ns, est, cpu);
  ibp_route go = smallest(est);
  /* hysteresis: the last choice stays while nearly as good, once the class
   * has measurements to stand on -- nearer where it timed both itself */
  const int last = k->last;
  const double band = last >= 0 && own_judged(k, prior, last, now_ns) &&
                              own_judged(k, prior, go, now_ns)
                          ? IBP_CHOOSE_HYSTERESIS_OWN
                          : IBP_CHOOSE_HYSTERESIS;
  if (last >= 0 && last != (int)go && est[last] > 0 &&
      est[last] <= est[go] * (1.0 + band) &&
      measured(k, prior, last, go, now_ns))
    go = (ibp_route)last;
  a->go = go;
  /* hope: a set-up not measured read in its favour; plain: as modelled */
  double hope[IBP_ROUTES] = {0}, plain[IBP_ROUTES] = {0};
  double seen_cr, seen_gr, hope_gr, plain_gr;
  if (seen_ratios(k, prior, now_ns, IBP_CHOOSE_SETUP_SPAN, &seen_cr, &seen_gr,
                  &hope_gr)) {
    (void)seen_ratios(k, prior, now_ns, 1.0, &seen_cr, &seen_gr, &plain_gr);
    for (int r = 0; r < IBP_ROUTES; r++) {
      hope[r] = est[r] > 0 ? hope_ns(&prior[r], seen_cr, hope_gr) : 0;
      plain[r] = est[r] > 0 ? hope_ns(&prior[r], seen_cr, plain_gr) : 0;
    }
    /* the driver's copy, where the class's other copy-engine routes saw
     * the link faster than modelled: its prior there (assess's hopeful) --
     * once the choice is judged, a two-stage one in its whole spans too:
     * against a staged path whose decodes ran faster than its prior (an
     * a100-pcie4 prior on an h100-pcie5, cnn_f32_to_bf16), a driver judged
     * first took the class from a faster staged path (0.96-0.98 of A) */
    const double link = link_seen_cheaper(k, prior, now_ns);
    const int go_known =
        judged(&k->route[go], prior[go].copies, now_ns) &&
        (prior[go].sm_ns <= 0 || whole_judged(&k->route[go], now_ns));
    /* ... or, before, where the choice's own first timed copy read it
     * dearer than that hope by more than the driver's doubt: a KV prefix
     * restore staged on the prior under a link 4x as wide read 327 us,
     * its windows 0.26x their model, the driver's copy 155 -- judged only
     * at the third staged copy, 0.84 of A in a six-step run
     * (a100-pcie4, bench/ab line 12) */
    const double once = go_known || go == IBP_ROUTE_DRIVER || link >= 1.0
                            ? 0
                            : once_seen(k, &prior[go], go, now_ns);
    const double driver_hope = scaled(&prior[IBP_ROUTE_DRIVER], seen_cr, link);
    if (link < 1.0 && est[IBP_ROUTE_DRIVER] > 0 &&
        (go_known ||
         (once > 0 && driver_hope * (1.0 + IBP_CHOOSE_DRIVER_DOUBT) < once)))
      hope[IBP_ROUTE_DRIVER] = driver_hope;
  }
  /* a route the class's twin timed, where the class has not: that
   * reading, to find out early (hopeful) */
  for (int r = 0; r < IBP_ROUTES; r++) {
    const double h = est[r] > 0 ? twin_hope(k, prior, r, now_ns) : 0;
    if (h > 0) {
      hope[r] = hope[r] > 0 ? min2(hope[r], h) : h;
      plain[r] = plain[r] > 0 ? min2(plain[r], h) : h;
    }
  }
  a->go_judged = judged(&k->route[go], prior[go].copies, now_ns);
  /* the choice at the calls and the link seen so far, as measured, while
   * it is not judged yet (its estimate is then its prior) -- one sample,
   * which may be a spike: at most IBP_CHOOSE_SEEN_MAX times its estimate,
   * so that one spike opens no loan many times the bound */
  double seen_go =
      a->go_judged ? est[go]
                   : min2(IBP_CHOOSE_SEEN_MAX * est[go],
                          max2(est[go], scaled(&prior[go], seen_cr, seen_gr)));
  /* a choice not judged yet whose own timed copy measured it clearly
   * dearer than a route the class has judged (explored early against
   * it): that route, the cheapest -- both as measured, the choice's one
   * sample capped as above (kv_blocks under driver calls 4x dearer,
   * h100-pcie5: its calls explored batched twice after the driver's
   * first call, then gave the driver another call on its prior, to be
   * judged: 0.92 of the batched route's time) -- and the bet on one
   * sample settled by a second at once where that costs one copy (the
   * route given up explored on the next decision, on a loan: a spike of
   * the driver's first timed copy sent a class of single copies to a
   * dearer route for 167-220 copies, until the share allowed it), not
   * where it costs a call (an application's batch call's driver part is
   * explored whole) */
  int recheck = -1;
  uint32_t own_n = 0;
  const double own_cr =
      fresh_ratio(&k->route[go], 0, prior[go].copies, now_ns, &own_n);
  const double own_gr =
      fresh_ratio(&k->route[go], 1, prior[go].copies, now_ns, &own_n);
  if (!a->go_judged && own_n) {
    const double seen = min2(IBP_CHOOSE_SEEN_MAX * est[go],
                             max2(est[go], scaled(&prior[go], own_cr, own_gr)));
    int to = -1;
    for (int r = 0; r < IBP_ROUTES; r++)
      if (est[r] > 0 && r != (int)go &&
          est[r] * (1.0 + IBP_CHOOSE_HYSTERESIS) < seen &&
          judged(&k->route[r], prior[r].copies, now_ns) &&
          (to < 0 || est[r] < est[to]))
        to = r;
    if (to >= 0) {
      if (prior[go].copies <= 1)
        recheck = (int)go;
      a->go = go = (ibp_route)to;
      a->go_judged = 1;
      seen_go = est[go];
    }
  }
  /* a hope is judged against the driver's copy as first seen: where the
   * prior takes a route of libibp's, that route's own first timing
   * settles the class (a weight class staged on the prior under driver
   * calls 4x dearer explored the kernel first, and staged a second copy
   * on the prior) */
  const double against = go == IBP_ROUTE_DRIVER ? seen_go : est[go];
  const int settle =
      recheck >= 0 && !k->route[recheck].pending && (timable >> recheck & 1);
  const int alt =
      settle ? recheck
             : candidate(k, est, prior, hope, go, against, timable, now_ns);
  a->alt = alt;
  /* what exploring it may cost: its estimate over the choice's, the
   * timing, and while it is unmeasured, IBP_CHOOSE_UNMEASURED of its
   * estimate again (the prior may be that wrong; ibp__choose_settle
   * charges what it took) */
  double cost = 0;
  int early = 0;
  if (alt >= 0) {
    /* the copies it takes (a batch explored is joined by the class's
     * next copies), over as many of the choice -- and the driver's part of
     * an application's call, explored whole, as the call's entries once
     * the class has measured it: charged as one entry, a driver measured
     * 1.24x dearer than the batched launch just chosen was explored again
     * at once for 3.8 us of credit and took 83 (kv_blocks on a100-pcie4
     * under driver calls and set-up 4x dearer, twice in 17 steps: 0.945 of
     * the batched route's time); unmeasured, it is a bet on its prior,
     * charged as one (charged the call, kv_blocks' entries set up 3x
     * cheaper than modelled were never explored) */
    ibp_route_cost at = prior[alt];
    if (alt == IBP_ROUTE_DRIVER && at.copies > 1 &&
        judged(&k->route[alt], at.copies, now_ns))
      at.explores = at.copies;
    const double taken = explored_ns(&at, model[alt], own[alt]);
    cost = max2(0, taken - explores(&at) * est[go]) + timing_ns;
    const double early_cost = max2(0, taken - explores(&at) * seen_go);
    /* early: a route that could win, never measured, is explored at once
     * on a loan -- the credit goes below 0, and later explorations wait
     * until the class's copies have paid it back -- with no surcharge: a
     * decoder no GPU timed is found out in a class's first copies, not
     * after the hundreds the share would take to cover its prior's doubt.
     * The loan -- its excess, the timing apart -- is bounded
     * (IBP_CHOOSE_EARLY_REPAY): where the prior is right, kv_blocks'
     * explored call of 64 entries cost 26 of its copies (and 2.5x that
     * where SM reads were half as fast: 8 % of a 17-step run).  Judged on the
     * route's own prior, as the charge is: under driver calls 4x dearer, the
     * driver's entries measured 1.8x their model, their set-up as much as their
     * bytes, and a batched launch believed as slow was 1.4x faster than the
     * driver */
    early = settle || (hopeful(k, prior, alt, hope, against, now_ns) &&
                       early_cost <= IBP_CHOOSE_EXPLORE_SHARE *
                                         IBP_CHOOSE_EARLY_REPAY * seen_go);
    if (early && !settle)
      early = !probe_first(k, prior, timable, go, alt, plain, against, now_ns,
                           &a->probe);
    if (!early && !judged(&k->route[alt], prior[alt].copies, now_ns))
      cost += IBP_CHOOSE_UNMEASURED * taken;
  }
  a->early = early;
  a->cost = cost;
  /* a two-stage choice whose whole spans are not judged is a bet on its
   * model's joining of the stages: timed as a choice not judged, soon
   * where its one whole read off the model (the staged path's windows
   * judged, its one whole 1.33x, the next timed 100 copies later: 4 KiB
   * weights staged at 0.962 of the driver's time, h100-pcie5 under a
   * random truth -- still so most runs: docs/ARCHITECTURE.md "The gate") */
  a->go_whole_open =
      prior[go].sm_ns > 0 && !whole_judged(&k->route[go], now_ns);
  a->go_doubted =
      (!a->go_judged && doubted(&k->route[go], prior[go].copies, now_ns)) ||
      (a->go_whole_open && whole_doubted(&k->route[go], now_ns));
  if (!a->probe && probe_paired(k, prior, est, timable, go, now_ns))
    a->probe = IBP_PROBE_PAIRED;
  a->choice_ns = est[go];
  /* an early exploration is judged against the choice at the calls and
   * the link seen so far, as measured (the choice may not be judged
   * yet): against its prior, kv_blocks' batches under driver calls 4x
   * dearer measured worse than a driver believed 4x cheaper than it was,
   * and were not explored again (0.28 of the batched route's time) */
  if (early && !a->go_judged)
    a->choice_ns = seen_go;
}

static int same_cost(const ibp_route_cost *a, const ibp_route_cost *b) {
  return a->cpu_ns == b->cpu_ns && a->gpu_ns == b->gpu_ns &&
         a->serial == b->serial && a->once_ns == b->once_ns &&
         a->guessed == b->guessed && a->sm_ns == b->sm_ns &&
         a->pipelined == b->pipelined && a->engine == b->engine &&
         a->own_ns == b->own_ns && a->copies == b->copies &&
         a->explores == b->explores && a->setup_ns == b->setup_ns &&
         a->probeable == b->probeable && a->lead_ns == b->lead_ns &&
         a->hope_gpu_ns == b->hope_gpu_ns && a->hope_sm_ns == b->hope_sm_ns;
}

/* The oldest of a window's entries counted at now_ns (as fresh_ratio and
 * whole count them: one aged never counts again), or `oldest` if older. */
static double oldest_counted(const double *seen_ns, uint32_t count,
                             double now_ns, double oldest) {
  const uint32_t n = count < IBP_CHOOSE_WINDOW ? count : IBP_CHOOSE_WINDOW;
  for (uint32_t i = 0; i < n; i++)
    if (!(seen_ns[i] < now_ns - IBP_CHOOSE_AGE_NS) && seen_ns[i] < oldest)
      oldest = seen_ns[i];
  return oldest;
}

/* What an assessment read of the class, besides its inputs: the routes'
 * windows (their counts: a sample is only ever added) and the state the
 * alternatives' ranks read. */
static void read_state(const ibp_choose_class *k, ibp_choose_read *st) {
  memset(st, 0, sizeof *st);
  for (int r = 0; r < IBP_ROUTES; r++) {
    const ibp_choose_route *q = &k->route[r];
    st->samples[r] = q->samples;
    st->wholes[r] = q->wholes;
    st->flags[r] = (q->wait ? 1u : 0u) | (q->pending ? 2u : 0u) |
                   (q->backoff ? 4u : 0u) |
                   (q->explored < IBP_CHOOSE_MIN_SAMPLES ? 8u : 0u) |
                   (q->setup_pending ? 16u : 0u) |
                   (q->setup_failed < IBP_CHOOSE_PROBES ? 32u : 0u);
    st->setups[r] = q->setup_copies ? q->setup_at_ns : 0;
    if (k->twin)
      st->twins[r] = k->twin[r].samples + k->twin[r].wholes;
  }
  st->calls = k->calls ? k->calls->samples : 0;
  st->served = served(k);
  st->last = k->last;
}

static int same_state(const ibp_choose_read *a, const ibp_choose_read *b) {
  for (int r = 0; r < IBP_ROUTES; r++)
    if (a->samples[r] != b->samples[r] || a->wholes[r] != b->wholes[r] ||
        a->flags[r] != b->flags[r] || a->setups[r] != b->setups[r] ||
        a->twins[r] != b->twins[r])
      return 0;
  return a->calls == b->calls && a->served == b->served && a->last == b->last;
}

/* The class's assessment for these inputs at now_ns: the one kept, where
 * nothing it read has changed since and no sample it counted has aged;
 * else made again.  A class's copies are alike (one size, one stream), so
 * most decisions repeat the last one's assessment: made again each time,
 * a held row's decision cost more than the rest of its hold
 * (bench/batch_hold.sh).  `look`: where a look (a dry decision) makes one,
 * which it does not keep. */
static const ibp_choose_assessed *
assessed(ibp_choose_class *k, const ibp_route_cost prior[], unsigned timable,
         double timing_ns, double now_ns, ibp_choose_assessed *look) {
  ibp_choose_assessed *a = &k->assessed;
  ibp_choose_read st;
  read_state(k, &st);
  int same = a->valid && now_ns >= a->at_ns &&
             !(a->oldest_ns < now_ns - IBP_CHOOSE_AGE_NS) &&
             a->timable == timable && a->timing_ns == timing_ns &&
             same_state(&a->read, &st);
  for (int r = 0; same && r < IBP_ROUTES; r++)
    same = same_cost(&a->prior[r], &prior[r]);
  if (same)
    return a;
  if (look) { /* a look keeps nothing (ibp__choose_decide's dry) */
    assess(k, prior, timable, timing_ns, now_ns, look);
    look->timable = timable;
    look->timing_ns = timing_ns;
    return look;
  }
  assess(k, prior, timable, timing_ns, now_ns, a);
  memcpy(a->prior, prior, sizeof a->prior);
  a->read = st;
  a->timable = timable;
  a->timing_ns = timing_ns;
  a->at_ns = now_ns;
  double oldest = 1e300;
  for (int r = 0; r < IBP_ROUTES; r++) {
    const ibp_choose_route *q = &k->route[r];
    oldest = oldest_counted(q->seen_ns, q->samples, now_ns, oldest);
    oldest = oldest_counted(q->whole_ns, q->wholes, now_ns, oldest);
    if (q->setup_copies)
      oldest = oldest_counted(&q->setup_at_ns, 1, now_ns, oldest);
    if (q->setup_pending) /* a probe given up when it ages */
      oldest = oldest_counted(&q->setup_asked_ns, 1, now_ns, oldest);
    if (k->twin) {
      oldest = oldest_counted(k->twin[r].seen_ns, k->twin[r].samples, now_ns,
                              oldest);
      oldest = oldest_counted(k->twin[r].whole_ns, k->twin[r].wholes, now_ns,
                              oldest);
    }
  }
  if (k->calls)
    oldest =
        oldest_counted(k->calls->seen_ns, k->calls->samples, now_ns, oldest);
  a->oldest_ns = oldest;
  a->valid = 1;
  return a;
}

/* What a decision on assessment a does with the class's credits
 * (*explore, *timing, *cap: the class's before, after on return): it takes
 * go untimed (QUIET), timed on the timing share (TIMED) or beyond it, go
 * being unjudged (UNJUDGED), or explores the alternative (EXPLORE);
 * `copies`: the class's decided so far. */
enum { QUIET, TIMED, UNJUDGED, EXPLORE };

/* A decision's credits before it spends any (spend, below). */
static void accrue(const ibp_choose_assessed *a, double *explore,
                   double *timing, double *cap) {
  const double *est = a->est;
  const int go = a->go, alt = a->alt;
  const double cost = a->cost, timing_ns = a->timing_cost_ns;
  /* credit: a share of this copy's estimated time each */
  double explore_credit = *explore + IBP_CHOOSE_EXPLORE_SHARE * est[go];
  double timing_credit = *timing + IBP_CHOOSE_TIMING_SHARE * est[go];
  if (timing_credit > TIMING_CREDIT_MAX * timing_ns)
    timing_credit = TIMING_CREDIT_MAX * timing_ns;
  /* saved up for a few explorations at most (while every alternative
   * waits: as many as the last one) */
  const double c = alt >= 0 ? IBP_CHOOSE_EXPLORE_CREDIT_MAX * cost : *cap;
  if (explore_credit > c)
    explore_credit = max2(c, *explore);
  *explore = explore_credit;
  *timing = timing_credit;
  *cap = c;
}

static int spend(const ibp_choose_class *k, const ibp_choose_assessed *a,
                 uint64_t copies, double *explore, double *timing,
                 double *cap) {
  const int go = a->go, alt = a->alt;
  const unsigned timable = a->timable;
  const double cost = a->cost, timing_ns = a->timing_cost_ns;
  accrue(a, explore, timing, cap);
  double explore_credit = *explore, timing_credit = *timing;
  int outcome = QUIET;
  if (alt >= 0 && (explore_credit >= cost || a->early)) {
    outcome = EXPLORE;
    explore_credit -= cost;
  } else if ((timable >> go & 1) && timing_credit >= timing_ns) {
    outcome = TIMED;
    timing_credit -= timing_ns;
  } else if ((timable >> go & 1) && (!a->go_judged || a->go_whole_open) &&
             (copies >= k->unjudged_next ||
              (a->go_doubted && copies >= k->unjudged_doubted_next))) {
    /* a choice the class has not measured (yet, or any more: its
     * samples aged; a two-stage one, not in its whole spans) is a bet on
     * its prior: timed whatever the credit --
     * the class's first copy, then one in IBP_CHOOSE_UNJUDGED_EVERY until
     * judged (the caller moves unjudged_next) */
    outcome = UNJUDGED;
  }
  *explore = explore_credit;
  *timing = timing_credit;
  return outcome;
}

ibp_route ibp__choose_decide(ibp_choose_class *k,
                             const ibp_route_cost prior[IBP_ROUTES],
                             unsigned timable, double timing_ns, int learn,
                             int dry, double now_ns, ibp_choice *out) {
  memset(out, 0, sizeof *out);
  if (!learn) {
    double model[IBP_ROUTES];
    model_of(prior, model);
    out->modelled = smallest(model);
    out->route = out->chosen = (ibp_route)out->modelled;
    memcpy(out->est_ns, model, sizeof model);
    if (!dry)
      count(k, out->route, model);
    return out->route;
  }
  if (now_ns < k->paused_until_ns) /* an event call failed lately */
    timable = 0;
  ibp_choose_assessed look;
  const ibp_choose_assessed *a =
      assessed(k, prior, timable, timing_ns, now_ns, dry ? &look : NULL);
  out->modelled = a->modelled;
  memcpy(out->est_ns, a->est, sizeof out->est_ns);
  const double *est = out->est_ns;
  const ibp_route go = (ibp_route)a->go;
  double explore_credit = k->explore_credit_ns,
         timing_credit = k->timing_credit_ns, cap = k->explore_cap_ns;
  const int outcome =
      spend(k, a, k->copies, &explore_credit, &timing_credit, &cap);
  const ibp_route take = outcome == EXPLORE ? (ibp_route)a->alt : go;
  out->explore = outcome == EXPLORE;
  /* a set-up probe is the choice's copy, timed whatever the credit --
   * paired, its first timed copy */
  out->probe = out->explore                   ? 0
               : a->probe == IBP_PROBE_HALVED ? IBP_PROBE_HALVED
               : a->probe && outcome != QUIET ? IBP_PROBE_PAIRED
                                              : 0;
  out->timed = outcome != QUIET || out->probe;
  out->charged_ns = out->explore ? a->cost : 0;
  out->route = take;
  out->copies = prior[take].copies;
  out->choice_ns = a->choice_ns;
  out->chosen = go;
  out->cpu_ns = a->cpu[take];
  if (dry)
    return take;
  if (outcome == UNJUDGED) { /* spaced as the timing costs (its calls) */
    const double every =
        IBP_CHOOSE_UNJUDGED_EVERY *
        (a->timing_ns > 0 ? a->timing_cost_ns / a->timing_ns : 1.0);
    k->unjudged_next = k->copies + (uint64_t)(every + 0.5);
    /* a choice its first timing measured off its model is timed again as
     * soon as that costs the exploration share of its copies: the second
     * sample that judges it (kv_offload's prefix restores of 15 MiB,
     * h100-pcie5 under a link a third as wide: the driver's first timed
     * copy 3.0x, the second four copies later, 0.944 of the staged
     * route's time) */
    const double soon =
        est[go] > 0 ? a->timing_cost_ns / (IBP_CHOOSE_EXPLORE_SHARE * est[go])
                    : every;
    k->unjudged_doubted_next = /* never later than the spacing above */
        k->copies + (uint64_t)max2(1.0, min2(soon, every) + 0.5);
  }
  k->explore_credit_ns = explore_credit;
  k->explore_cap_ns = cap;
  k->timing_credit_ns = timing_credit;
  if (out->probe) {
    k->route[go].setup_pending++;
    k->route[go].setup_asked_ns = now_ns;
  }
  if (out->explore) {
    k->explored++;
    k->route[take].explored++;
    k->explore_ns += a->cost;
    k->route[take].pending++;
    if (!a->early) /* the second early sample follows the first's settling */
      space(&k->route[take]);
  }
  if ((int)go != out->modelled)
    k->overruled++;
  k->last = (int)go;
  count(k, take, est);
  return take;
}

uint32_t ibp__choose_quiet(const ibp_choose_class *k, ibp_route route,
                           double now_ns, uint32_t most, double *until_ns) {
  const ibp_choose_assessed *a = &k->assessed;
  *until_ns = now_ns;
  ibp_choose_read st;
  read_state(k, &st);
  /* the next decision keeps the assessment: nothing it read changed since
   * (a route's wait run out in this decision's count would) */
  if (!a->valid || a->go != (int)route || k->last != (int)route ||
      !(a->est[route] > 0) || a->probe || !same_state(&a->read, &st) ||
      a->oldest_ns < now_ns - IBP_CHOOSE_AGE_NS || now_ns < a->at_ns)
    return 0;
  /* clearly the choice: estimates made on other copies of the class's
   * size (another offset, another stored size) would choose it too */
  for (int r = 0; r < IBP_ROUTES; r++)
    if (r != (int)route && a->est[r] > 0 &&
        a->est[r] < a->est[route] * (1.0 + IBP_CHOOSE_QUIET_MARGIN))
      return 0;
  /* a route's wait running out changes what the assessment read */
  for (int r = 0; r < IBP_ROUTES; r++)
    if (k->route[r].wait && k->route[r].wait < most)
      most = k->route[r].wait;
  double explore = k->explore_credit_ns, timing = k->timing_credit_ns,
         cap = k->explore_cap_ns;
  uint32_t n = 0;
  while (n < most &&
         spend(k, a, k->copies + n, &explore, &timing, &cap) == QUIET)
    n++;
  /* until a sample it counted ages, or timing resumes */
  double until =
      a->oldest_ns < 1e300 ? a->oldest_ns + IBP_CHOOSE_AGE_NS : 1e300;
  if (now_ns < k->paused_until_ns && k->paused_until_ns < until)
    until = k->paused_until_ns;
  *until_ns = until;
  return n;
}

uint32_t ibp__choose_quiet_take(ibp_choose_class *k, ibp_route route,
                                uint32_t n) {
  const ibp_choose_assessed *a = &k->assessed;
  uint32_t taken = 0;
  if (!a->valid || a->go != (int)route) { /* counted, nothing else known */
    static const double none[IBP_ROUTES];
    for (uint32_t i = 0; i < n; i++)
      count(k, route, none);
    return 0;
  }
  for (uint32_t i = 0; i < n; i++) {
    double explore = k->explore_credit_ns, timing = k->timing_credit_ns,
           cap = k->explore_cap_ns;
    if (spend(k, a, k->copies, &explore, &timing, &cap) == QUIET) {
      taken++;
    } else { /* not promised: gone to the driver all the same -- its credits
              * saved, none spent */
      explore = k->explore_credit_ns;
      timing = k->timing_credit_ns;
      cap = k->explore_cap_ns;
      accrue(a, &explore, &timing, &cap);
    }
    k->explore_credit_ns = explore;
    k->timing_credit_ns = timing;
    k->explore_cap_ns = cap;
    if (a->go != a->modelled)
      k->overruled++;
    k->last = a->go;
    count(k, route, a->est);
  }
  return taken;
}

static double bounded(double r) {
  return r > RATIO_MAX ? RATIO_MAX : r < 1.0 / RATIO_MAX ? 1.0 / RATIO_MAX : r;
}

void ibp__choose_learn(ibp_choose_class *k, ibp_route r, uint32_t copies,
                       double cpu_ns, double cpu_model_ns, double gpu_ns,
                       double gpu_model_ns, double now_ns) {
  if ((unsigned)r >= IBP_ROUTES)
    return;
  ibp_choose_route *q = &k->route[r];
  const double cr = cpu_model_ns > 0 ? bounded(cpu_ns / cpu_model_ns) : 1.0;
  const double gr = gpu_model_ns > 0 ? bounded(gpu_ns / gpu_model_ns) : 1.0;
  const uint32_t at = q->samples % IBP_CHOOSE_WINDOW;
  q->cpu_seen[at] = cr;
  q->gpu_seen[at] = gr;
  q->seen_ns[at] = now_ns;
  q->seen_copies[at] = copies;
  q->samples++;
  k->pause_ns = IBP_CHOOSE_PAUSE_NS; /* timing works again */
}

void ibp__choose_learn_setup(ibp_choose_class *k, ibp_route r, uint32_t copies,
                             double gpu_ns, double base_ns, double setup_ns,
                             double now_ns) {
  if ((unsigned)r >= IBP_ROUTES)
    return;
  ibp_choose_route *q = &k->route[r];
  if (q->setup_pending > 0)
    q->setup_pending--;
  /* what the call would have taken whole, as its last timed ones did */
  uint32_t fresh;
  const double g = fresh_ratio(q, 1, copies, now_ns, &fresh);
  if (gpu_ns < 0 || !fresh || base_ns <= 0 || setup_ns <= 0 || copies <= 1) {
    q->setup_failed++;
    return;
  }
  const double seen = (gpu_ns - g * base_ns) / setup_ns;
  q->setup_seen = seen < 0                       ? 0
                  : seen > IBP_CHOOSE_SETUP_SPAN ? IBP_CHOOSE_SETUP_SPAN
                                                 : seen;
  q->setup_at_ns = now_ns;
  q->setup_copies = copies;
  q->setup_failed = 0;
}

void ibp__choose_probe_release(ibp_choose_class *k, ibp_route r) {
  if ((unsigned)r < IBP_ROUTES && k->route[r].setup_pending > 0)
    k->route[r].setup_pending--;
}

void ibp__choose_learn_calls(ibp_choose_route *calls, double cpu_ns,
                             double cpu_model_ns, double now_ns) {
  if (!calls || cpu_model_ns <= 0)
    return;
  const uint32_t at = calls->samples % IBP_CHOOSE_WINDOW;
  calls->cpu_seen[at] = bounded(cpu_ns / cpu_model_ns);
  calls->gpu_seen[at] = 1.0;
  calls->seen_ns[at] = now_ns;
  calls->seen_copies[at] = 0;
  calls->samples++;
}

void ibp__choose_learn_whole(ibp_choose_class *k, ibp_route r, double ratio,
                             double now_ns) {
  if ((unsigned)r >= IBP_ROUTES)
    return;
  ibp_choose_route *q = &k->route[r];
  const uint32_t at = q->wholes % IBP_CHOOSE_WINDOW;
  q->whole_seen[at] = bounded(ratio);
  q->whole_ns[at] = now_ns;
  q->wholes++;
}

void ibp__choose_learn_whole_bound(ibp_choose_class *k, ibp_route r,
                                   double ratio, double now_ns) {
  /* not judged, its wholes read as the model's joining (whole()) */
  if ((unsigned)r >= IBP_ROUTES || whole_judged(&k->route[r], now_ns) ||
      bounded(ratio) >= 1.0)
    return;
  ibp__choose_learn_whole(k, r, ratio, now_ns);
}

void ibp__choose_settle(ibp_choose_class *k, ibp_route r, double charged_ns,
                        double excess_ns, int worse) {
  if ((unsigned)r >= IBP_ROUTES)
    return;
  ibp_choose_route *q = &k->route[r];
  if (q->pending)
    q->pending--;
  if (excess_ns < 0)
    return;
  k->explore_credit_ns -= excess_ns - charged_ns;
  k->explore_ns += excess_ns - charged_ns;
  if (!worse) {
    q->backoff = 0;
  } else if (q->backoff < IBP_CHOOSE_BACKOFF_MAX) {
    q->backoff++;
  }
}

void ibp__choose_timing_failed(ibp_choose_class *k, double now_ns) {
  k->paused_until_ns = now_ns + k->pause_ns;
  k->pause_ns = k->pause_ns * 2 < IBP_CHOOSE_PAUSE_MAX_NS
                    ? k->pause_ns * 2
                    : IBP_CHOOSE_PAUSE_MAX_NS;
}
