/*
 * The chooser's decision logic (preload/serve/choose/choose.c;
 * docs/ARCHITECTURE.md "The gate") against a simulated truth: each timed
 * copy measures the truth's costs, not the prior's, on a clock that moves
 * by what each copy really took.
 *
 *   - truth = prior: every copy takes the model's route, none overruled;
 *   - a class whose measurements contradict its prior changes its choice
 *     within a stated number of copies, and keeps it (no flapping), for
 *     each route and in both directions: the kernel 4x slower or 2x
 *     faster, the staged path 4x faster, the driver's copy 3x dearer, a
 *     batched class whose driver is 3x cheaper, entries of the
 *     application's batch (the H200's kv_blocks); batches of one copy
 *     and of many measured apart;
 *   - a guessed route that could win at its hope is explored early, twice
 *     (once where it measured worse), after the class's first timed copy,
 *     from a class the driver serves, and taken when it is faster;
 *     not where its hope, at the calls and the link first seen, cannot;
 *   - one copy 10x slower on the chosen route (a spike) changes nothing;
 *   - exploring an alternative that stays worse costs at most
 *     IBP_CHOOSE_EXPLORE_SHARE of the copies' time (plus one exploration),
 *     backs off, and the credit is capped;
 *   - estimates age: a route measured long ago is explored again;
 *   - events failing pause timing, which resumes when they work again;
 *   - single and held copies of a size share what they learn, and so do
 *     copies of a size on a busy stream and an idle one (the twin);
 *   - with learning off every copy takes the model's route, untimed.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "serve/choose/choose.h"

/* What timing a copy costs here (ns). */
#define TIMING_NS 2000.0

/* A class with routes of its own, and the device's clock. */
typedef struct sim {
  ibp_choose_route route[IBP_ROUTES];
  ibp_choose_class k;
  ibp_choose_route calls; /* every class's calls (ibp_choose_class.calls) */
  ibp_choose_route *learn_calls; /* where this class's are learnt */
  double now;                    /* ns */
  long probes;                   /* set-up probes made */
  long halved;                   /* ... of them, halved ones */
  int probes_fail;               /* ... each coming to nothing */
  double whole_spike; /* the first whole span learnt read this many times */
} sim;

static void sim_init(sim *m) {
  ibp__choose_routes_init(m->route);
  ibp__choose_class_init(&m->k, m->route);
  memset(&m->calls, 0, sizeof m->calls);
  m->k.calls = m->learn_calls = &m->calls;
  m->now = 1e6;
  m->probes = m->halved = m->probes_fail = 0;
  m->whole_spike = 1;
}

/* Runs `copies` copies of one class: priors as given, each timed copy
 * measuring truth[] instead (learned at once, as if read at the next
 * decision) -- a set-up probe (ibp_choice.probe) the copy with one set-up
 * in IBP_CHOOSE_PROBE_EVERY more, at truth's set-up (ibp_route_cost.setup_ns,
 * an entry's), or coming to nothing where m->probes_fail; paired, half the
 * copy measured first as it is; spike: from this copy on, the first timed
 * copy of the choice takes 10x.
 * Returns the first copy from which every later copy took `want` (as the
 * class's choice, explorations aside), or -1. */
typedef struct run {
  long settled;          /* first copy of the final run of `want` */
  double spent, explore; /* ns: the chosen routes', the explorations' */
  long explored, timed;
  long took[IBP_ROUTES];
  double credit_max;     /* the exploration credit's largest */
  int first_explored;    /* the route first explored, -1: none */
  long first_explore_at; /* the copy it was */
} run;

/* A copy's time by a route costing *t. */
static double cost(const ibp_route_cost *t) {
  const double gpu = ibp__choose_gpu_ns(t, 1);
  return t->serial ? t->cpu_ns + gpu : fmax(t->cpu_ns, gpu);
}

static run simulate_spike(sim *m, const ibp_route_cost prior[],
                          const ibp_route_cost truth[], long copies,
                          ibp_route want, int learn, long spike) {
  ibp_choose_class *k = &m->k;
  run o;
  memset(&o, 0, sizeof o);
  o.settled = -1;
  o.first_explored = -1;
  for (long i = 0; i < copies; i++) {
    ibp_choice c;
    ibp_route r =
        ibp__choose_decide(k, prior, 15u, TIMING_NS, learn, 0, m->now, &c);
    if (c.explore && o.first_explored < 0) {
      o.first_explored = (int)r;
      o.first_explore_at = i;
    }
    o.took[r]++;
    ibp_route choice = (ibp_route)k->last;
    if (!learn)
      choice = r;
    if (choice == want && !c.explore) {
      if (o.settled < 0)
        o.settled = i;
    } else if (!c.explore) {
      o.settled = -1;
    }
    ibp_route_cost t = truth[r];
    if (spike >= 0 && i >= spike && c.timed && !c.explore) {
      t.cpu_ns *= 10;
      t.gpu_ns *= 10;
      spike = -1;
    }
    /* a set-up probe's halves: as many more set-ups (paired: in half of
     * the copy) */
    const double added = t.setup_ns / IBP_CHOOSE_PROBE_EVERY;
    double real = cost(&t);
    if (c.probe)
      real += c.probe == IBP_PROBE_PAIRED ? added / 2 : added;
    o.spent += real;
    m->now += real;
    if (c.explore) {
      o.explored++;
      const ibp_route_cost *g = &truth[choice];
      o.explore += fmax(0, real - cost(g)) + TIMING_NS;
    }
    if (c.explore) /* what it really cost over the choice */
      ibp__choose_settle(k, r, c.charged_ns,
                         fmax(0, real - c.choice_ns) + TIMING_NS,
                         real > c.choice_ns);
    if (c.probe == IBP_PROBE_PAIRED) /* its first half, as it is */
      ibp__choose_learn(k, r, prior[r].copies, t.cpu_ns, prior[r].cpu_ns,
                        t.gpu_ns, prior[r].gpu_ns, m->now);
    if (c.probe) {
      m->probes++;
      m->halved += c.probe == IBP_PROBE_HALVED;
      ibp__choose_learn_setup(
          k, r, prior[r].copies, m->probes_fail ? -1 : t.gpu_ns + added,
          prior[r].gpu_ns, prior[r].setup_ns / IBP_CHOOSE_PROBE_EVERY, m->now);
    } else if (c.timed) {
      o.timed++;
      ibp__choose_learn(k, r, prior[r].copies, t.cpu_ns, prior[r].cpu_ns,
                        t.gpu_ns, prior[r].gpu_ns, m->now);
      if (prior[r].engine)
        ibp__choose_learn_calls(m->learn_calls, t.cpu_ns, prior[r].cpu_ns,
                                m->now);
      /* a two-stage route's whole span, against the model's joining of
       * its stages (its first as measured), for the class's choice */
      const ibp_route_cost joined = {.gpu_ns = t.gpu_ns,
                                     .sm_ns = prior[r].sm_ns,
                                     .pipelined = prior[r].pipelined};
      const double ratio =
          ibp__choose_gpu_ns(&t, 1) / ibp__choose_gpu_ns(&joined, 1);
      if (prior[r].sm_ns > 0 && !c.explore) {
        ibp__choose_learn_whole(k, r, m->whole_spike * ratio, m->now);
        m->whole_spike = 1;
      } else if (prior[r].sm_ns > 0) {
        ibp__choose_learn_whole_bound(k, r, ratio, m->now);
      }
    }
    o.credit_max = fmax(o.credit_max, k->explore_credit_ns);
  }
  return o;
}

/* Two timed copies of route r in m's class, each measuring cpu and gpu
 * against the model's cpu_model and gpu_model: enough to be judged. */
static void learn_twice(sim *m, ibp_route r, uint32_t copies, double cpu,
                        double cpu_model, double gpu, double gpu_model) {
  for (int i = 0; i < IBP_CHOOSE_MIN_SAMPLES; i++)
    ibp__choose_learn(&m->k, r, copies, cpu, cpu_model, gpu, gpu_model, m->now);
}

static run simulate(sim *m, const ibp_route_cost prior[],
                    const ibp_route_cost truth[], long copies, ibp_route want,
                    int learn) {
  return simulate_spike(m, prior, truth, copies, want, learn, -1);
}

/* 1 MiB copies in the model: the driver 80 us, the kernel 50 us (GPU). */
static const ibp_route_cost PRIOR[IBP_ROUTES] = {
    {2500, 80000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
    {2800, 50000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};

static void test_truth_is_prior(void) {
  sim m;
  sim_init(&m);
  run first = simulate(&m, PRIOR, PRIOR, 200, IBP_ROUTE_ZEROCOPY, 1);
  /* an unmeasured route's exploration is charged its estimate again:
   * (30 + 2 + 80 us) at 0.5 us a copy, after copy 200 */
  CHECK(first.explored == 0);
  run o = simulate(&m, PRIOR, PRIOR, 10000, IBP_ROUTE_ZEROCOPY, 1);
  CHECK(o.settled == 0);
  CHECK(m.k.overruled == 0);
  CHECK(o.timed > 0 && first.timed > 0);
  /* the driver's copy, 60 % slower, is explored rarely: within budget */
  CHECK(o.explore <= IBP_CHOOSE_EXPLORE_SHARE * o.spent + 80000 + TIMING_NS);
}

/* The kernel 4x slower than the prior says (data that decodes slower): the
 * class leaves it for the driver within 24 copies (its first copy timed,
 * then one every 2 us / (0.2 % of 50 us) = 20 copies; two timed copies
 * before its ratio counts). */
static void test_prior_too_kind(void) {
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, PRIOR, sizeof truth);
  truth[IBP_ROUTE_ZEROCOPY].gpu_ns *= 4;
  sim m;
  sim_init(&m);
  run o = simulate(&m, PRIOR, truth, 2000, IBP_ROUTE_DRIVER, 1);
  CHECK(o.settled >= 0 && o.settled <= 24);
  fprintf(stderr, "kernel 4x slower than its prior: the driver from copy %ld\n",
          o.settled);
}

/* The kernel 2x faster than the prior says, where the prior prefers the
 * driver (kernel 100 us modelled, 50 us true): exploration finds it, and
 * the class moves to it within 200 copies. */
static void test_prior_too_harsh(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {2500, 80000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 100000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, prior, sizeof truth);
  truth[IBP_ROUTE_ZEROCOPY].gpu_ns = 50000;
  sim m;
  sim_init(&m);
  run o = simulate(&m, prior, truth, 5000, IBP_ROUTE_ZEROCOPY, 1);
  CHECK(o.settled >= 0 && o.settled <= 200);
  fprintf(stderr,
          "kernel 2x faster than its prior: the kernel from copy %ld "
          "(%ld explored)\n",
          o.settled, o.explored);
  CHECK(m.k.overruled > 0);
}

/* An alternative that stays 3x worse: explorations cost at most the share
 * (plus one exploration's cost) and back off -- few of them in 100000
 * copies. */
static void test_exploration_bounded(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {2500, 30000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 90000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  sim m;
  sim_init(&m);
  run o = simulate(&m, prior, prior, 100000, IBP_ROUTE_DRIVER, 1);
  CHECK(o.settled == 0);
  double bound = IBP_CHOOSE_EXPLORE_SHARE * o.spent + 60000 + TIMING_NS;
  CHECK(o.explore <= bound);
  CHECK(o.explored <= 20); /* backing off: 16 << n copies apart */
  /* timing the choice stays within its share too */
  CHECK(o.timed * TIMING_NS <= IBP_CHOOSE_TIMING_SHARE * o.spent +
                                   o.explored * TIMING_NS + 4 * TIMING_NS);
  fprintf(stderr, "exploration: %ld copies, %.4f %% of the time; %ld timed\n",
          o.explored, 100.0 * o.explore / o.spent, o.timed);
}

/* 64 KiB entries of the application's batch: held, the model says 1 us
 * of CPU and 3 us of GPU each (a batched launch: the sum), the driver's
 * copy engine 5 us.  The truth (the H200 on kv_blocks): the driver's
 * copies 2.04 us, the batch kernel's reads 1.6x slower.  The class moves
 * to the driver within 400 copies (the first copy timed; the driver
 * explored once the 1 % budget covers it, twice before it counts). */
static void test_batched_prior_too_kind(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {0, 5000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {1000, 3000, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, prior, sizeof truth);
  truth[IBP_ROUTE_DRIVER].gpu_ns = 2040;
  truth[IBP_ROUTE_BATCHED].gpu_ns = 4800;
  sim m;
  sim_init(&m);
  run o = simulate(&m, prior, truth, 20000, IBP_ROUTE_DRIVER, 1);
  CHECK(o.settled >= 0 && o.settled <= 400);
  CHECK(o.explore <=
        IBP_CHOOSE_EXPLORE_SHARE * o.spent + 2 * 5000 + 2 * TIMING_NS + 2500);
  fprintf(stderr,
          "batched launch dearer, driver cheaper than modelled: the driver "
          "from copy %ld (%ld explored)\n",
          o.settled, o.explored);
}

/* The other way round: the model prefers the driver (5 us) to a batch
 * (1 + 6 us), which really takes 1 + 2 us: the class moves to the batch
 * within 600 copies. */
static void test_batched_prior_too_harsh(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {0, 5000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {1000, 6000, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, prior, sizeof truth);
  truth[IBP_ROUTE_BATCHED].gpu_ns = 2000;
  sim m;
  sim_init(&m);
  run o = simulate(&m, prior, truth, 20000, IBP_ROUTE_BATCHED, 1);
  CHECK(o.settled >= 0 && o.settled <= 600);
  fprintf(stderr,
          "batched launch cheaper than modelled: the batch from copy %ld "
          "(%ld explored)\n",
          o.settled, o.explored);
}

/* The staged path 4x faster than its prior says, where the prior puts it
 * behind the driver (1 MiB: the driver 80 us, staged 120 us modelled, 30
 * us true): explored like any route, taken within 300 copies. */
static void test_staged_too_harsh(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {2500, 80000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {6000, 120000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, prior, sizeof truth);
  truth[IBP_ROUTE_STAGED].gpu_ns = 30000;
  sim m;
  sim_init(&m);
  run o = simulate(&m, prior, truth, 5000, IBP_ROUTE_STAGED, 1);
  CHECK(o.settled >= 0 && o.settled <= 300);
  fprintf(stderr, "staged 4x faster than its prior: staged from copy %ld\n",
          o.settled);
}

/* The driver's copy 3x dearer than modelled (driver calls and copy-engine
 * set-up dearer, as on a virtualised GPU) where the prior prefers it to
 * the kernel (60 us against 90 us): believed as much as a cheaper one, and
 * the kernel taken within 100 copies. */
static void test_driver_too_kind(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {2500, 60000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 90000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, prior, sizeof truth);
  truth[IBP_ROUTE_DRIVER].cpu_ns *= 3;
  truth[IBP_ROUTE_DRIVER].gpu_ns *= 3;
  sim m;
  sim_init(&m);
  run o = simulate(&m, prior, truth, 5000, IBP_ROUTE_ZEROCOPY, 1);
  CHECK(o.settled >= 0 && o.settled <= 100);
  fprintf(stderr, "driver 3x dearer than modelled: the kernel from copy %ld\n",
          o.settled);
}

/* Copies of their own call that may be held: the batch modelled 1 + 6 us,
 * the driver's copy 15 us but really 5 us (3x cheaper): the driver is
 * explored from the batched class and taken within 600 copies (the
 * zero-copy and staged routes closed: the mask is the batched class's,
 * where its stream's batch is empty -- serve/batch/batch.c explores going
 * alone only there, tests/samples/check_learn_alone.sh). */
static void test_batched_driver_cheaper(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {2500, 15000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {1000, 6000, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, prior, sizeof truth);
  truth[IBP_ROUTE_DRIVER].gpu_ns = 5000;
  sim m;
  sim_init(&m);
  run o = simulate(&m, prior, truth, 20000, IBP_ROUTE_DRIVER, 1);
  CHECK(o.settled >= 0 && o.settled <= 600);
  fprintf(stderr,
          "batched class, driver 3x cheaper than modelled: the driver from "
          "copy %ld\n",
          o.settled);
}

/* One timed copy of the choice 10x slower (it waited for something else):
 * the choice stays, nothing is overruled. */
static void test_spike(void) {
  sim m;
  sim_init(&m);
  run o = simulate_spike(&m, PRIOR, PRIOR, 3000, IBP_ROUTE_ZEROCOPY, 1, 200);
  CHECK(o.settled == 0);
  CHECK(m.k.overruled == 0);
  /* the class's first timed copy the slow one: one copy is not enough */
  sim f;
  sim_init(&f);
  run q = simulate_spike(&f, PRIOR, PRIOR, 3000, IBP_ROUTE_ZEROCOPY, 1, 0);
  CHECK(q.settled == 0);
  /* ... and a route that is 10x slower copy after copy is left */
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, PRIOR, sizeof truth);
  truth[IBP_ROUTE_ZEROCOPY].gpu_ns *= 10;
  run p = simulate(&m, PRIOR, truth, 2000, IBP_ROUTE_DRIVER, 1);
  CHECK(p.settled >= 0 && p.settled <= 200);
}

/* Estimates age: the kernel 4x slower sends the class to the driver; the
 * kernel recovers (its neighbour left), and once IBP_CHOOSE_AGE_NS has
 * passed the class is back on it within 50 copies -- not after the
 * thousands of copies its back-off would wait. */
static void test_aging(void) {
  ibp_route_cost slow[IBP_ROUTES];
  memcpy(slow, PRIOR, sizeof slow);
  slow[IBP_ROUTE_ZEROCOPY].gpu_ns *= 4;
  sim m;
  sim_init(&m);
  run o = simulate(&m, PRIOR, slow, 20000, IBP_ROUTE_DRIVER, 1);
  CHECK(o.settled >= 0);
  /* three seconds on (not the constant itself: estimates that aged in an
   * hour would pass) -- a GPU whose clocks or neighbours change is noticed
   * within seconds */
  m.now += 3e9;
  run p = simulate(&m, PRIOR, PRIOR, 2000, IBP_ROUTE_ZEROCOPY, 1);
  CHECK(p.settled >= 0 && p.settled <= 50);
  fprintf(stderr, "aged: the recovered kernel again from copy %ld\n",
          p.settled);
}

/* The exploration credit is capped: an alternative 3x worse, backing off
 * for thousands of copies, does not let the class save up for a burst. */
static void test_credit_capped(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {2500, 30000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 90000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  sim m;
  sim_init(&m);
  run o = simulate(&m, prior, prior, 200000, IBP_ROUTE_DRIVER, 1);
  /* an unmeasured exploration's charge: 60 us over, 2 us timing, 90 us */
  const double one = 60000 + TIMING_NS + IBP_CHOOSE_UNMEASURED * 90000;
  /* two explorations' worth (a number, not the constant: a cap of 50
   * would pass) */
  CHECK(o.credit_max <= 2 * one + IBP_CHOOSE_EXPLORE_SHARE * 30000);
  fprintf(stderr, "exploration credit at most %.0f ns\n", o.credit_max);
}

/* Timing fails (an event call): the class times and explores nothing
 * while paused, longer after each failure in a row; once the pause is
 * over it times again, and a timed copy read ends the row. */
static void test_timing_paused(void) {
  sim m;
  sim_init(&m);
  simulate(&m, PRIOR, PRIOR, 100, IBP_ROUTE_ZEROCOPY, 1);
  ibp__choose_timing_failed(&m.k, m.now);
  const double first = m.k.paused_until_ns - m.now;
  CHECK(first >= IBP_CHOOSE_PAUSE_NS);
  run o = simulate(&m, PRIOR, PRIOR, 15, IBP_ROUTE_ZEROCOPY, 1); /* 0.75 ms */
  CHECK(o.timed == 0 && o.explored == 0);
  m.now = m.k.paused_until_ns;
  run p = simulate(&m, PRIOR, PRIOR, 100, IBP_ROUTE_ZEROCOPY, 1);
  CHECK(p.timed > 0);
  /* failures in a row: longer pauses; a timed copy read: the first again */
  ibp__choose_timing_failed(&m.k, m.now);
  m.now = m.k.paused_until_ns;
  ibp__choose_timing_failed(&m.k, m.now);
  CHECK(m.k.paused_until_ns - m.now >= 1.5 * first);
  m.now = m.k.paused_until_ns;
  ibp__choose_learn(&m.k, IBP_ROUTE_ZEROCOPY, 0, 2800, 2800, 50000, 50000,
                    m.now);
  ibp__choose_timing_failed(&m.k, m.now);
  CHECK(m.k.paused_until_ns - m.now < 1.5 * first);
  /* a class's first copy, paused, is not timed either */
  sim n;
  sim_init(&n);
  ibp__choose_timing_failed(&n.k, n.now);
  ibp_choice c;
  ibp__choose_decide(&n.k, PRIOR, 15u, TIMING_NS, 1, 0, n.now, &c);
  CHECK(!c.timed && !c.explore);
}

/* An alternative measured a little better than the choice, within the
 * hysteresis (the kernel modelled 2x dearer than the driver, really 1.5 %
 * cheaper -- 81.3 us against 82.5 -- after a while 1.5x dearer): it stays
 * the alternative, and is
 * explored again every few copies -- backing off is for a route that
 * measures worse. */
static void test_backoff_only_worse(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {2500, 80000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 160000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, prior, sizeof truth);
  sim m;
  sim_init(&m);
  /* first 1.5x dearer than the driver: it backs off */
  truth[IBP_ROUTE_ZEROCOPY].gpu_ns = 120000;
  simulate(&m, prior, truth, 2000, IBP_ROUTE_DRIVER, 1);
  CHECK(m.k.route[IBP_ROUTE_ZEROCOPY].backoff >= 3);
  truth[IBP_ROUTE_ZEROCOPY].gpu_ns = 78500;
  run o = simulate(&m, prior, truth, 6000, IBP_ROUTE_DRIVER, 1);
  CHECK(o.explored >= 100);
  fprintf(stderr, "a nearly equal alternative: explored %ld times\n",
          o.explored);
}

/* The timing credit is capped too: after a long stretch in which the
 * choice could not be timed, a few copies are timed, not a burst; and
 * the alternative explored first is the one never measured, not the
 * cheaper one measured before. */
static void test_timing_capped(void) {
  sim m;
  sim_init(&m);
  ibp_choice c;
  for (long i = 0; i < 20000; i++) {
    ibp__choose_decide(&m.k, PRIOR, 0u, TIMING_NS, 1, 0, m.now, &c);
    m.now += 50000;
  }
  long timed = 0;
  for (long i = 0; i < 10; i++) {
    ibp__choose_decide(&m.k, PRIOR, 2u, TIMING_NS, 1, 0, m.now, &c);
    timed += c.timed;
    m.now += 50000;
  }
  CHECK(timed <= 5);
  ibp_route_cost three[IBP_ROUTES] = {
      {2500, 50000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 60000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 100000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  sim n;
  sim_init(&n);
  learn_twice(&n, IBP_ROUTE_ZEROCOPY, 0, 2800, 2800, 60000, 60000);
  run o = simulate(&n, three, three, 5000, IBP_ROUTE_DRIVER, 1);
  CHECK(o.first_explored == IBP_ROUTE_STAGED);
}

/* A single copy's class and a held copy's class of one size share what
 * they learn of the routes both can take: the driver measured 3x dearer
 * by single copies is 3x dearer for held ones too. */
static void test_modes_share(void) {
  static ibp_choose_route know[IBP_CHOOSE_KEYS][IBP_ROUTES];
  const unsigned one = ibp__choose_class_index(65536, 0, IBP_CLASS_SINGLE),
                 held = ibp__choose_class_index(65536, 0, IBP_CLASS_BATCHED);
  CHECK(one != held && ibp__choose_key(one) == ibp__choose_key(held));
  ibp_choose_route *q = know[ibp__choose_key(one)];
  ibp__choose_routes_init(q);
  ibp_choose_class a, b;
  ibp__choose_class_init(&a, q);
  ibp__choose_class_init(&b, q);
  for (int i = 0; i < 4; i++)
    ibp__choose_learn(&a, IBP_ROUTE_DRIVER, 0, 7500, 2500, 15000, 5000, 1e6);
  const ibp_route_cost drv = {2500, 5000, 0, 0, 0, 0, 0, 1,
                              0,    0,    0, 0, 0, 0, 0, 0};
  CHECK(fabs(ibp__choose_estimate(&b, IBP_ROUTE_DRIVER, &drv, 1e6) - 15000) <
        1);
}

/* The model nearly right: the kernel measures 5.8 % dearer than its prior
 * (within the dead band) where it is modelled 0.2 % cheaper than the
 * driver -- taken at its word, beyond the hysteresis: the class keeps the
 * model's choice, never overruled.  Measured 10 % dearer (outside the
 * band), it is left. */
static void test_dead_band(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {2500, 50100, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 50000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, prior, sizeof truth);
  truth[IBP_ROUTE_ZEROCOPY].gpu_ns *= 1.058;
  sim m;
  sim_init(&m);
  run o = simulate(&m, prior, truth, 3000, IBP_ROUTE_ZEROCOPY, 1);
  CHECK(o.settled == 0);
  CHECK(m.k.overruled == 0);
  truth[IBP_ROUTE_ZEROCOPY].gpu_ns = 55000;
  sim n;
  sim_init(&n);
  run p = simulate(&n, prior, truth, 3000, IBP_ROUTE_DRIVER, 1);
  CHECK(p.settled >= 0 && p.settled <= 100);
}

/* Two priors a 1 us apart, favouring the kernel, then the driver. */
static const ibp_route_cost KERNEL_AHEAD[IBP_ROUTES] = {
    {.cpu_ns = 2500, .gpu_ns = 80000, .engine = 1},
    {.cpu_ns = 2800, .gpu_ns = 79000}};
static const ibp_route_cost DRIVER_AHEAD[IBP_ROUTES] = {
    {.cpu_ns = 2500, .gpu_ns = 79000, .engine = 1},
    {.cpu_ns = 2800, .gpu_ns = 80000}};

/* Priors that vary from copy to copy (a stream busy, then idle) with
 * truth = prior: each copy takes the model's choice for it. */
static void test_model_varies(void) {
  const ibp_route_cost *a = KERNEL_AHEAD, *b = DRIVER_AHEAD;
  sim m;
  sim_init(&m);
  long wrong = 0;
  for (long i = 0; i < 2000; i++) {
    const ibp_route_cost *p = i % 2 ? a : b;
    ibp_choice c;
    ibp_route r = ibp__choose_decide(&m.k, p, 15u, TIMING_NS, 1, 0, m.now, &c);
    m.now += cost(&p[r]);
    if (c.timed)
      ibp__choose_learn(&m.k, r, p[r].copies, p[r].cpu_ns, p[r].cpu_ns,
                        p[r].gpu_ns, p[r].gpu_ns, m.now);
    if (c.explore)
      ibp__choose_settle(&m.k, r, c.charged_ns, 1000 + TIMING_NS, 1);
    else
      wrong += r != (ibp_route)c.modelled;
  }
  CHECK(wrong == 0);
}

/* The driver and the kernel both measured 1.5x their priors (80 us):
 * moved off the model, each judged on the class's own copies. */
static void both_measured_off(sim *m) {
  for (int i = 0; i < 4; i++) {
    ibp__choose_learn(&m->k, IBP_ROUTE_DRIVER, 0, 2500, 2500, 120000, 80000,
                      m->now);
    ibp__choose_learn(&m->k, IBP_ROUTE_ZEROCOPY, 0, 2800, 2800, 120000, 80000,
                      m->now);
  }
}

/* Measured, two routes within the hysteresis of each other and the prior
 * favouring each in turn: the class keeps its last choice instead of
 * changing route at every copy. */
static void test_hysteresis(void) {
  const ibp_route_cost *a = KERNEL_AHEAD, *b = DRIVER_AHEAD;
  sim m;
  sim_init(&m);
  both_measured_off(&m);
  long changes = 0;
  int last = -1;
  for (long i = 0; i < 1000; i++) {
    ibp_choice c;
    ibp__choose_decide(&m.k, i % 2 ? a : b, 0u, TIMING_NS, 1, 0, m.now, &c);
    changes += last >= 0 && m.k.last != last;
    last = m.k.last;
    m.now += 120000;
  }
  CHECK(changes <= 1);
}

/* The band's limit, pinned: priors 3.4 % apart favouring each route in
 * turn, both routes judged on the class's own copies -- beyond the 2 % band
 * (IBP_CHOOSE_HYSTERESIS_OWN), so each copy takes the route its own
 * estimate favours (docs/ARCHITECTURE.md "The gate", the band's limit):
 * a change of route at nearly every copy, and never the dearer one. */
static void test_hysteresis_beyond(void) {
  static const ibp_route_cost kernel_far[IBP_ROUTES] = {
      {.cpu_ns = 2500, .gpu_ns = 80000, .engine = 1},
      {.cpu_ns = 2800, .gpu_ns = 77000}};
  static const ibp_route_cost driver_far[IBP_ROUTES] = {
      {.cpu_ns = 2500, .gpu_ns = 77300, .engine = 1},
      {.cpu_ns = 2800, .gpu_ns = 80000}};
  sim m;
  sim_init(&m);
  both_measured_off(&m);
  long changes = 0, dearer = 0;
  int last = -1;
  for (long i = 0; i < 1000; i++) {
    const ibp_route_cost *p = i % 2 ? kernel_far : driver_far;
    const ibp_route cheaper = i % 2 ? IBP_ROUTE_ZEROCOPY : IBP_ROUTE_DRIVER;
    ibp_choice c;
    ibp__choose_decide(&m.k, p, 0u, TIMING_NS, 1, 0, m.now, &c);
    changes += last >= 0 && m.k.last != last;
    last = m.k.last;
    dearer += c.chosen != cheaper;
    m.now += 120000;
  }
  CHECK(changes >= 990);
  CHECK(dearer == 0);
}

/* Two routes the class timed itself, the last choice measured 4.5 %
 * dearer than the other: it is left -- within the 5 % hysteresis, beyond the
 * 2 % of routes both judged on the class's own copies
 * (IBP_CHOOSE_HYSTERESIS_OWN; KV restores staged 3.8 % dearer than the
 * driver's copy, a100-pcie4 under a link 1.5x as wide).  While the other
 * stands on its prior, the last choice stays. */
static void test_hysteresis_own(void) {
  const ibp_route_cost prior[IBP_ROUTES] = {
      {.cpu_ns = 2500, .gpu_ns = 80000, .engine = 1},
      {.cpu_ns = 2800, .gpu_ns = 54800}};
  sim m;
  sim_init(&m);
  for (int i = 0; i < 4; i++)
    ibp__choose_learn(&m.k, IBP_ROUTE_ZEROCOPY, 0, 2800, 2800, 83412, 54800,
                      m.now);
  m.k.last = IBP_ROUTE_ZEROCOPY;
  ibp_choice c;
  ibp__choose_decide(&m.k, prior, 0u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(c.chosen == IBP_ROUTE_ZEROCOPY);
  for (int i = 0; i < 4; i++)
    ibp__choose_learn(&m.k, IBP_ROUTE_DRIVER, 0, 2500, 2500, 80000, 80000,
                      m.now);
  ibp__choose_decide(&m.k, prior, 0u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(c.chosen == IBP_ROUTE_DRIVER);
}

/* Ratios are bounded: a route measured 1000x dearer (or cheaper) than
 * modelled is estimated at most 64x (at least 1/64) its prior; a serial
 * cost's estimate is the sum of its scaled terms. */
static void test_bounds(void) {
  sim m;
  sim_init(&m);
  for (int i = 0; i < 4; i++) {
    ibp__choose_learn(&m.k, IBP_ROUTE_DRIVER, 0, 2500, 2500, 8e7, 8e4, m.now);
    ibp__choose_learn(&m.k, IBP_ROUTE_ZEROCOPY, 0, 2.8, 2800, 50, 5e4, m.now);
  }
  CHECK(ibp__choose_estimate(&m.k, IBP_ROUTE_DRIVER, &PRIOR[0], m.now) <=
        64 * 80000 + 1);
  CHECK(ibp__choose_estimate(&m.k, IBP_ROUTE_ZEROCOPY, &PRIOR[1], m.now) >=
        50000 / 64.0 - 1);
  const ibp_route_cost serial = {1000, 3000, 1, 0, 0, 0, 0, 0,
                                 0,    0,    0, 0, 0, 0, 0, 0};
  CHECK(fabs(ibp__choose_estimate(&m.k, IBP_ROUTE_BATCHED, &serial, m.now) -
             4000) < 1);
}

/* An alternative 30x dearer than the choice: exploring it is dear, and
 * the share, not the back-off, is what bounds it. */
static void test_exploration_costly(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {2500, 10000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 300000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  sim m;
  sim_init(&m);
  run o = simulate(&m, prior, prior, 20000, IBP_ROUTE_DRIVER, 1);
  CHECK(o.explored > 0);
  CHECK(o.explore <= IBP_CHOOSE_EXPLORE_SHARE * o.spent + 300000 + TIMING_NS);
}

/* A route that measured worse is explored again, less often each time,
 * but never given up: the kernel 3x slower, then faster than its prior
 * (within IBP_CHOOSE_AGE_NS: found by exploring, not by aging), is taken
 * again within 3000 copies. */
static void test_recovery(void) {
  ibp_route_cost slow[IBP_ROUTES], fast[IBP_ROUTES];
  memcpy(slow, PRIOR, sizeof slow);
  memcpy(fast, PRIOR, sizeof fast);
  slow[IBP_ROUTE_ZEROCOPY].gpu_ns *= 3;
  fast[IBP_ROUTE_ZEROCOPY].gpu_ns /= 2;
  sim m;
  sim_init(&m);
  run o = simulate(&m, PRIOR, slow, 3000, IBP_ROUTE_DRIVER, 1);
  CHECK(o.settled >= 0);
  run p = simulate(&m, PRIOR, fast, 3000, IBP_ROUTE_ZEROCOPY, 1);
  CHECK(p.settled >= 0 && p.settled <= 2500);
  CHECK(m.now < 1e6 + IBP_CHOOSE_AGE_NS);
}

/* Ties go to the driver (another route only when strictly cheaper); a
 * route not timable is never explored; the model's rule adds a serial
 * cost's terms. */
static void test_rules(void) {
  ibp_route_cost tie[IBP_ROUTES] = {
      {2500, 50000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {2500, 50000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {2500, 50000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  sim m;
  sim_init(&m);
  ibp_choice c;
  CHECK(ibp__choose_decide(&m.k, tie, 0u, TIMING_NS, 1, 1, m.now, &c) ==
        IBP_ROUTE_DRIVER);
  /* a class's first copy is timed (its choice a bet on the prior) */
  ibp__choose_decide(&m.k, PRIOR, 15u, TIMING_NS, 1, 1, m.now, &c);
  CHECK(c.timed);
  ibp_route_cost prior[IBP_ROUTES] = {
      {2500, 50000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 60000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  run o = simulate(&m, prior, prior, 1, IBP_ROUTE_DRIVER, 1);
  (void)o;
  long staged = 0;
  for (long i = 0; i < 20000; i++) {
    ibp_route r =
        ibp__choose_decide(&m.k, prior, 1u, TIMING_NS, 1, 0, m.now, &c);
    staged += r == IBP_ROUTE_STAGED;
    m.now += 50000;
  }
  CHECK(staged == 0);
  ibp_route_cost held[IBP_ROUTES] = {
      {0, 5000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {1000, 4500, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  sim n;
  sim_init(&n);
  CHECK(ibp__choose_decide(&n.k, held, 0u, TIMING_NS, 0, 1, n.now, &c) ==
        IBP_ROUTE_DRIVER);
}

/* A route the class cannot time is not believed cheaper than the others
 * measured: with every driver call 4x dearer than modelled, the driver
 * and the kernel measure so, and the staged path (untimable here, its
 * many calls modelled 7 us: dearer than the driver by its prior, cheaper
 * than the driver as measured) is estimated with their ratio -- the class
 * stays on the driver instead of moving every copy to it. */
static void test_untimable_inherits(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {2500, 1000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 1200, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {7000, 1500, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, prior, sizeof truth);
  for (int r = 0; r < 3; r++)
    truth[r].cpu_ns *= 4;
  sim m;
  sim_init(&m);
  long staged = 0;
  for (long i = 0; i < 5000; i++) {
    ibp_choice c;
    ibp_route r =
        ibp__choose_decide(&m.k, prior, 3u, TIMING_NS, 1, 0, m.now, &c);
    staged += r == IBP_ROUTE_STAGED;
    m.now += cost(&truth[r]);
    if (c.timed)
      ibp__choose_learn(&m.k, r, prior[r].copies, truth[r].cpu_ns,
                        prior[r].cpu_ns, truth[r].gpu_ns, prior[r].gpu_ns,
                        m.now);
    if (c.explore)
      ibp__choose_settle(&m.k, r, c.charged_ns, 1000, 1);
  }
  CHECK(staged < 100);
  /* with nothing measured dearer it keeps its prior */
  sim n;
  sim_init(&n);
  ibp_choice c;
  prior[IBP_ROUTE_STAGED].cpu_ns = 2000;
  CHECK(ibp__choose_decide(&n.k, prior, 3u, TIMING_NS, 1, 1, n.now, &c) ==
        IBP_ROUTE_STAGED);
}

/* A link a third as fast as modelled, every route timable: the driver
 * (10.5 us modelled, 30 us really) is measured first; the kernel and the
 * staged path, modelled 26 and 19 us, really take 55 and 40 us (their
 * reads of host memory a third as fast, their decode not).  Before they
 * are measured they are believed as dear as the driver measured
 * (inherited), so the class stays on the driver: each is taken only to be
 * explored (9 times each in 5000 copies, backing off), and never chosen.  The
 * other way round, a kernel 4x slower than modelled makes the driver look no
 * dearer (it is left at once: test_prior_too_kind). */
static void test_unmeasured_inherit_driver(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {2500, 10500, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 26000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {6000, 19000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  ibp_route_cost truth[IBP_ROUTES] = {
      {2500, 30000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 55000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {6000, 40000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  sim m;
  sim_init(&m);
  run o = simulate(&m, prior, truth, 5000, IBP_ROUTE_DRIVER, 1);
  CHECK(o.settled == 0);
  CHECK(o.took[IBP_ROUTE_ZEROCOPY] + o.took[IBP_ROUTE_STAGED] <= 20);
  CHECK(o.took[IBP_ROUTE_ZEROCOPY] >= 1 && o.took[IBP_ROUTE_STAGED] >= 1);
  fprintf(stderr,
          "link a third as fast: the driver throughout, the kernel taken %ld "
          "times, staged %ld (explorations)\n",
          o.took[IBP_ROUTE_ZEROCOPY], o.took[IBP_ROUTE_STAGED]);
}

/* The staged path as two stages (ibp_route_cost.sm_ns): its windows on
 * the copy engine, what its timed copies measure, then its decodes.  Copies
 * back to back (pipelined) cost the slower stage: 670 KB weight copies, the
 * driver 13 us, the staged windows 10 us and the decodes 9.5 us. */
static const ibp_route_cost STAGED2[IBP_ROUTES] = {
    {.cpu_ns = 2500, .gpu_ns = 13000, .engine = 1},
    {.cpu_ns = 2800, .gpu_ns = 22000},
    {.cpu_ns = 7000,
     .gpu_ns = 10000,
     .sm_ns = 9500,
     .pipelined = 1,
     .engine = 1}};

/* A link a third as fast: every transfer 3x.  Back to back the staged path
 * (30 us of windows, its decodes beside them) still beats the driver
 * (39 us); one at a time it would not (39.5 us).  Its timed windows say so
 * of the driver's copy too (the same copy engine): the driver, never
 * measured, is believed 3x dearer, and is taken only to be explored. */
static void test_staged_link_third(void) {
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, STAGED2, sizeof truth);
  for (int r = 0; r < 3; r++)
    truth[r].gpu_ns *= 3;
  sim m;
  sim_init(&m);
  run o = simulate(&m, STAGED2, truth, 2000, IBP_ROUTE_STAGED, 1);
  CHECK(o.settled == 0);
  CHECK(o.took[IBP_ROUTE_DRIVER] <= 10);
  fprintf(stderr,
          "link a third as fast: staged throughout, the driver taken %ld "
          "times (explorations)\n",
          o.took[IBP_ROUTE_DRIVER]);
}

/* A link twice as wide as modelled (a GPU whose name maps it to a
 * narrower profile): the staged windows and the driver's copy take half
 * their time, the decodes as modelled -- staged, the prior's choice,
 * 9.5 us; the driver, never measured, 6.5 us.  The windows' timed copies
 * say so of the copy engine: the driver is explored early, on a loan, and
 * taken within 40 copies (a weight line's 160 copies ran staged at 0.74
 * of the driver's time: h100-pcie5, its link 2x).  Where the link is as
 * modelled, or narrower, the driver is not explored early (at the share's
 * pace: copy 79 where it is half as wide). */
static void test_driver_cheaper_while_staged(void) {
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, STAGED2, sizeof truth);
  truth[IBP_ROUTE_DRIVER].gpu_ns /= 2;
  truth[IBP_ROUTE_STAGED].gpu_ns /= 2;
  sim m;
  sim_init(&m);
  run o = simulate(&m, STAGED2, truth, 2000, IBP_ROUTE_DRIVER, 1);
  CHECK(o.settled >= 0 && o.settled <= 40);
  fprintf(stderr,
          "link 2x, staged the prior's choice: the driver from copy %ld\n",
          o.settled);
  /* the windows' spans holding waits the driver's one copy does not: they
   * read 0.6 of their model, the driver's copy 0.5 -- staged 7 us (its
   * calls), the driver 6.5; hoped at the windows' 0.6 the driver (7.8 us)
   * is no cheaper than staged, doubted in its favour it is explored and
   * taken (h100-pcie5 under a link 2x: windows 0.63, the driver 0.50;
   * 160 weight copies staged at 0.78 of the driver's time) */
  ibp_route_cost waits[IBP_ROUTES];
  memcpy(waits, STAGED2, sizeof waits);
  waits[IBP_ROUTE_STAGED].sm_ns = 5000;
  memcpy(truth, waits, sizeof truth);
  truth[IBP_ROUTE_DRIVER].gpu_ns /= 2;
  truth[IBP_ROUTE_STAGED].gpu_ns *= 0.6;
  sim_init(&m);
  o = simulate(&m, waits, truth, 160, IBP_ROUTE_DRIVER, 1);
  CHECK(o.settled >= 0 && o.settled <= 40);
  fprintf(stderr, "link 2x, windows holding waits: the driver from copy %ld\n",
          o.settled);
  sim_init(&m);
  o = simulate(&m, STAGED2, STAGED2, 160, IBP_ROUTE_STAGED, 1);
  CHECK(o.settled == 0 && o.took[IBP_ROUTE_DRIVER] == 0);
  /* half as wide still: the driver never looks cheaper */
  memcpy(truth, STAGED2, sizeof truth);
  truth[IBP_ROUTE_DRIVER].gpu_ns *= 2;
  truth[IBP_ROUTE_STAGED].gpu_ns *= 2;
  sim_init(&m);
  o = simulate(&m, STAGED2, truth, 160, IBP_ROUTE_STAGED, 1);
  CHECK(o.settled == 0);
  CHECK(o.first_explored != IBP_ROUTE_DRIVER || o.first_explore_at >= 40);
  /* the link twice as wide, and the decodes too (staged's calls cheaper
   * than STAGED2's): staged 5 us, the driver 6.5 -- staged stays, its
   * whole spans judged before the driver is hoped for (judged first
   * against staged's prior, the driver took the class) */
  ibp_route_cost prior[IBP_ROUTES];
  memcpy(prior, STAGED2, sizeof prior);
  prior[IBP_ROUTE_STAGED].cpu_ns = 4000;
  memcpy(truth, prior, sizeof truth);
  truth[IBP_ROUTE_DRIVER].gpu_ns /= 2;
  truth[IBP_ROUTE_STAGED].gpu_ns /= 2;
  truth[IBP_ROUTE_STAGED].sm_ns = 5000;
  sim_init(&m);
  o = simulate(&m, prior, truth, 2000, IBP_ROUTE_STAGED, 1);
  CHECK(o.settled >= 0 && o.settled <= 40);
  CHECK(o.took[IBP_ROUTE_DRIVER] <= 20);
  fprintf(stderr,
          "link and decodes 2x: staged from copy %ld, the driver taken %ld "
          "times\n",
          o.settled, o.took[IBP_ROUTE_DRIVER]);
  /* ... staged's first whole read 2x (a spike): the driver, hoped for on
   * that one copy (once_seen), is judged and takes the class while
   * staged's wholes are not -- an explored staged copy's whole then
   * bounds them, and staged is taken back at the share's pace (without
   * it, the driver kept 1963 of 2000 copies at 1.3x staged's time) */
  sim_init(&m);
  m.whole_spike = 2;
  o = simulate(&m, prior, truth, 2000, IBP_ROUTE_STAGED, 1);
  CHECK(o.settled >= 0 && o.settled <= 400);
  fprintf(stderr,
          "link and decodes 2x, staged's first whole 2x: staged from copy "
          "%ld, the driver taken %ld times\n",
          o.settled, o.took[IBP_ROUTE_DRIVER]);
}

/* A link 4x as wide as modelled, the staged path's decodes no faster (and
 * not overlapping its windows): staged, the prior's choice, takes 12 us a
 * copy, the driver's copy 3.25.  Its first timed copy says so -- its
 * windows a quarter of their model, the copy as a whole 12 us -- and the
 * driver is explored on the next copy, not once staged is judged (a KV
 * prefix restore staged three times of six steps, a100-pcie4 under a link
 * 4x as wide: 0.84 of A).  Where the staged copy read about as cheap as
 * the driver's hope (the decodes overlapping the windows: 2.5 us against
 * 3.25), it is not. */
static void test_driver_hoped_after_one_staged(void) {
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, STAGED2, sizeof truth);
  truth[IBP_ROUTE_DRIVER].gpu_ns /= 4;
  truth[IBP_ROUTE_STAGED].gpu_ns /= 4;
  truth[IBP_ROUTE_STAGED].pipelined = 0;
  sim m;
  sim_init(&m);
  run o = simulate(&m, STAGED2, truth, 200, IBP_ROUTE_DRIVER, 1);
  CHECK(o.first_explored == IBP_ROUTE_DRIVER && o.first_explore_at <= 2);
  CHECK(o.settled >= 0 && o.settled <= 4);
  fprintf(stderr,
          "link 4x, staged decodes as modelled: the driver explored at copy "
          "%ld, taken from copy %ld\n",
          o.first_explore_at, o.settled);
  ibp_route_cost prior[IBP_ROUTES];
  memcpy(prior, STAGED2, sizeof prior);
  prior[IBP_ROUTE_STAGED].cpu_ns = 2000;
  prior[IBP_ROUTE_STAGED].sm_ns = 2000;
  memcpy(truth, prior, sizeof truth);
  truth[IBP_ROUTE_DRIVER].gpu_ns /= 4;
  truth[IBP_ROUTE_STAGED].gpu_ns /= 4;
  sim_init(&m);
  o = simulate(&m, prior, truth, 200, IBP_ROUTE_STAGED, 1);
  CHECK(o.first_explored != IBP_ROUTE_DRIVER || o.first_explore_at > 2);
}

/* The staged windows 4x dearer than modelled, the driver as modelled (no
 * such GPU is known: both are the copy engine's transfers from pinned
 * memory).  The windows' ratio makes the unmeasured driver look as dear,
 * so the class leaves staged once the driver was explored and measured
 * (copy 61 here), not at once. */
static void test_staged_windows_dear(void) {
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, STAGED2, sizeof truth);
  truth[IBP_ROUTE_STAGED].gpu_ns *= 4;
  sim m;
  sim_init(&m);
  run o = simulate(&m, STAGED2, truth, 2000, IBP_ROUTE_DRIVER, 1);
  CHECK(o.settled >= 0 && o.settled <= 100);
}

/* One copy at a time the two stages add up (18 us against the driver's
 * 13): the driver, as the model says, and staged only explored. */
static void test_staged_one_at_a_time(void) {
  ibp_route_cost prior[IBP_ROUTES];
  memcpy(prior, STAGED2, sizeof prior);
  prior[IBP_ROUTE_STAGED].pipelined = 0;
  prior[IBP_ROUTE_STAGED].sm_ns = 8000;
  sim m;
  sim_init(&m);
  run o = simulate(&m, prior, prior, 2000, IBP_ROUTE_DRIVER, 1);
  CHECK(o.settled == 0);
  CHECK(o.took[IBP_ROUTE_STAGED] <= 10);
}

/* The staged path's stages overlap less than modelled (each as modelled,
 * but copies back to back add them up: 19.5 us against the driver's 13):
 * only its whole span, timed on the caller's stream, shows it, and the
 * class leaves it once two such spans were read. */
static void test_staged_overlap_less(void) {
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, STAGED2, sizeof truth);
  truth[IBP_ROUTE_STAGED].pipelined = 0;
  sim m;
  sim_init(&m);
  run o = simulate(&m, STAGED2, truth, 2000, IBP_ROUTE_DRIVER, 1);
  CHECK(o.settled >= 0 && o.settled <= 24);
  fprintf(stderr,
          "stages overlapping less than modelled: the driver from "
          "copy %ld\n",
          o.settled);
}

/* One timed copy is never enough, for a route's ratios nor for a two-stage
 * route's whole span: a copy that waited for something else once (a spike)
 * moves no estimate until a second one says the same
 * (IBP_CHOOSE_MIN_SAMPLES). */
static void test_one_sample_not_enough(void) {
  sim m;
  sim_init(&m);
  double cr, gr;
  ibp__choose_learn(&m.k, IBP_ROUTE_ZEROCOPY, 0, 3 * 2800, 2800, 3 * 50000,
                    50000, m.now);
  ibp__choose_ratios(&m.k, IBP_ROUTE_ZEROCOPY, 0, m.now, &cr, &gr);
  CHECK(cr == 1.0 && gr == 1.0);
  ibp__choose_learn(&m.k, IBP_ROUTE_ZEROCOPY, 0, 3 * 2800, 2800, 3 * 50000,
                    50000, m.now);
  ibp__choose_ratios(&m.k, IBP_ROUTE_ZEROCOPY, 0, m.now, &cr, &gr);
  CHECK(fabs(cr - 3) < 1e-9 && fabs(gr - 3) < 1e-9);
  /* the staged path's whole span, 3x its stages' joining once */
  sim s;
  sim_init(&s);
  const ibp_route_cost *st = &STAGED2[IBP_ROUTE_STAGED];
  const double before = ibp__choose_estimate(&s.k, IBP_ROUTE_STAGED, st, s.now);
  ibp__choose_learn_whole(&s.k, IBP_ROUTE_STAGED, 3.0, s.now);
  CHECK(ibp__choose_estimate(&s.k, IBP_ROUTE_STAGED, st, s.now) == before);
  ibp__choose_learn_whole(&s.k, IBP_ROUTE_STAGED, 3.0, s.now);
  CHECK(fabs(ibp__choose_estimate(&s.k, IBP_ROUTE_STAGED, st, s.now) -
             3 * before) < 1);
}

/* A two-stage route's whole spans 1.04x its stages' joining, judged, and
 * the driver 2.4 % dearer than its model of them: the driver -- a whole
 * span's ratio near 1 is no noise around the prior (no dead band). */
static void test_whole_no_band(void) {
  ibp_route_cost prior[IBP_ROUTES];
  memcpy(prior, STAGED2, sizeof prior);
  prior[IBP_ROUTE_DRIVER].gpu_ns = 10250;
  sim m;
  sim_init(&m);
  learn_twice(&m, IBP_ROUTE_DRIVER, 0, 2500, 2500, 10250, 10250);
  learn_twice(&m, IBP_ROUTE_STAGED, 0, 7000, 7000, 10000, 10000);
  for (int i = 0; i < 3; i++)
    ibp__choose_learn_whole(&m.k, IBP_ROUTE_STAGED, 1.04, m.now);
  CHECK(fabs(ibp__choose_estimate(&m.k, IBP_ROUTE_STAGED,
                                  &prior[IBP_ROUTE_STAGED], m.now) -
             10400) < 1);
  ibp_choice c;
  ibp__choose_decide(&m.k, prior, 0u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(c.chosen == IBP_ROUTE_DRIVER);
}

/* A two-stage route's whole span is read as the median of three or more
 * (the smaller of two): whole spans 1.22, 1.13, 1.14 and 1.02 its stages'
 * joining (a100-pcie4's staged weight copies under decodes 4x slower) make
 * it 1.135x dearer, not the smallest -- in the dead band, the model; one
 * spike among them, or among three, moves nothing; of two the smaller
 * counts. */
static void test_whole_median(void) {
  const ibp_route_cost *st = &STAGED2[IBP_ROUTE_STAGED];
  static const struct {
    double seen[IBP_CHOOSE_WINDOW];
    unsigned n;
    double factor;
  } cases[] = {{{1.22, 1.13, 1.14, 1.02}, 4, 1.135},
               {{1.02, 1.22, 1.13}, 3, 1.13},
               {{1.0, 3.0, 1.0}, 3, 1.0},
               {{3.0, 1.0, 1.0, 1.0}, 4, 1.0},
               {{1.5, 2.0}, 2, 1.5}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sim s;
    sim_init(&s);
    const double before =
        ibp__choose_estimate(&s.k, IBP_ROUTE_STAGED, st, s.now);
    for (unsigned j = 0; j < cases[i].n; j++)
      ibp__choose_learn_whole(&s.k, IBP_ROUTE_STAGED, cases[i].seen[j], s.now);
    const double after =
        ibp__choose_estimate(&s.k, IBP_ROUTE_STAGED, st, s.now);
    CHECK(fabs(after - cases[i].factor * before) < 1e-6 * before);
  }
  /* spans age: 1.5 and 2.0 read, then 3 s on, 1.2 and 1.3 -- the two
   * fresh ones count (the smaller), not the median of four; 3 s on
   * again, none: the model */
  sim s;
  sim_init(&s);
  const double before = ibp__choose_estimate(&s.k, IBP_ROUTE_STAGED, st, s.now);
  ibp__choose_learn_whole(&s.k, IBP_ROUTE_STAGED, 1.5, s.now);
  ibp__choose_learn_whole(&s.k, IBP_ROUTE_STAGED, 2.0, s.now);
  s.now += 1.5 * IBP_CHOOSE_AGE_NS;
  ibp__choose_learn_whole(&s.k, IBP_ROUTE_STAGED, 1.2, s.now);
  ibp__choose_learn_whole(&s.k, IBP_ROUTE_STAGED, 1.3, s.now);
  CHECK(fabs(ibp__choose_estimate(&s.k, IBP_ROUTE_STAGED, st, s.now) -
             1.2 * before) < 1e-6 * before);
  s.now += 1.5 * IBP_CHOOSE_AGE_NS;
  CHECK(ibp__choose_estimate(&s.k, IBP_ROUTE_STAGED, st, s.now) == before);
}

/* An explored copy's whole span (its latency alone) bounds the route's
 * wholes only while they are not judged, and only where it reads less
 * than them: with none, 0.6 or 0.97 is learnt, 1.2 is not (the model, 1,
 * stands); after one spike of 1.8, 0.6 makes the two the route is judged
 * on (the smaller); after two of 1.2, judged, nothing is -- until they
 * age. */
static void test_whole_bound(void) {
  ibp_route_cost gpu_bound = STAGED2[IBP_ROUTE_STAGED];
  gpu_bound.cpu_ns = 2000;
  const ibp_route_cost *st = &gpu_bound;
  sim s;
  sim_init(&s);
  const double model = ibp__choose_estimate(&s.k, IBP_ROUTE_STAGED, st, s.now);
  const ibp_choose_route *q = &s.k.route[IBP_ROUTE_STAGED];
  ibp__choose_learn_whole_bound(&s.k, IBP_ROUTE_STAGED, 1.2, s.now);
  CHECK(q->wholes == 0);
  ibp__choose_learn_whole_bound(&s.k, IBP_ROUTE_STAGED, 0.6, s.now);
  CHECK(q->wholes == 1);
  sim_init(&s); /* within the dead band, still below the model's joining */
  ibp__choose_learn_whole_bound(&s.k, IBP_ROUTE_STAGED, 0.97, s.now);
  CHECK(q->wholes == 1);
  sim_init(&s);
  ibp__choose_learn_whole(&s.k, IBP_ROUTE_STAGED, 1.8, s.now);
  ibp__choose_learn_whole_bound(&s.k, IBP_ROUTE_STAGED, 0.6, s.now);
  CHECK(fabs(ibp__choose_estimate(&s.k, IBP_ROUTE_STAGED, st, s.now) -
             0.6 * model) < 1e-6 * model);
  sim_init(&s);
  ibp__choose_learn_whole(&s.k, IBP_ROUTE_STAGED, 1.2, s.now);
  ibp__choose_learn_whole(&s.k, IBP_ROUTE_STAGED, 1.2, s.now);
  ibp__choose_learn_whole_bound(&s.k, IBP_ROUTE_STAGED, 0.6, s.now);
  CHECK(q->wholes == 2);
  /* aged, they are not judged: the bound is learnt again -- but not one
   * that reads as the model's joining */
  s.now += 1.5 * IBP_CHOOSE_AGE_NS;
  ibp__choose_learn_whole_bound(&s.k, IBP_ROUTE_STAGED, 1.0, s.now);
  CHECK(q->wholes == 2);
  ibp__choose_learn_whole_bound(&s.k, IBP_ROUTE_STAGED, 0.6, s.now);
  CHECK(q->wholes == 3);
}

/* An exploration is charged on what the class measured of the route
 * itself, not on what it inherits: a batched class whose driver measured
 * 1.2x its model believes the unmeasured batch 1.2x dearer too (15.6 us),
 * but exploring a batch of one is charged its prior's once-cost (30 us),
 * its excess over the choice and the unmeasured surcharge -- not the
 * inherited 33.4 us, which would delay finding out. */
static void test_explore_charged_own(void) {
  const ibp_route_cost prior[IBP_ROUTES] = {
      {.cpu_ns = 2500, .gpu_ns = 10000, .engine = 1},
      {.cpu_ns = 0},
      {.cpu_ns = 0},
      {.cpu_ns = 6000,
       .gpu_ns = 8000,
       .serial = 1,
       .copies = 16,
       .once_ns = 30000}};
  sim m;
  sim_init(&m);
  learn_twice(&m, IBP_ROUTE_DRIVER, 0, 2500, 2500, 12000, 10000);
  ibp_choice c;
  int i;
  for (i = 0; i < 5000; i++) {
    ibp__choose_decide(&m.k, prior, 9u, TIMING_NS, 1, 0, m.now, &c);
    if (c.explore)
      break;
  }
  CHECK(c.explore && c.route == IBP_ROUTE_BATCHED);
  CHECK(fabs(c.est_ns[IBP_ROUTE_BATCHED] - 15600) < 1);
  CHECK(fabs(c.charged_ns - ((30000 - 12000) + TIMING_NS + 30000)) < 1);
  /* a launch the class's next 3 copies join (ibp_route_cost.explores) is
   * charged for the 4: each at the batch's own 14 us, over 4 of the
   * driver's 12 us, and the surcharge on the 4 */
  ibp_route_cost joined[IBP_ROUTES];
  memcpy(joined, prior, sizeof joined);
  joined[IBP_ROUTE_BATCHED].explores = 4;
  sim_init(&m);
  learn_twice(&m, IBP_ROUTE_DRIVER, 0, 2500, 2500, 12000, 10000);
  for (i = 0; i < 5000; i++) {
    ibp__choose_decide(&m.k, joined, 9u, TIMING_NS, 1, 0, m.now, &c);
    if (c.explore)
      break;
  }
  CHECK(c.explore && c.route == IBP_ROUTE_BATCHED);
  CHECK(fabs(c.charged_ns - ((56000 - 48000) + TIMING_NS + 56000)) < 1);
}

/* Entries of 64 KiB of an application's call of 64: the driver's part
 * (2.2 us an entry modelled, 1 us of it set-up) and a batched launch
 * (3.7 us at its prior, 2.9 at its hope), explored as 32. */
static const ibp_route_cost KV_ENTRIES[IBP_ROUTES] = {{.gpu_ns = 2192,
                                                       .engine = 1,
                                                       .copies = 64,
                                                       .setup_ns = 1000,
                                                       .probeable = 1},
                                                      {.cpu_ns = 0},
                                                      {.cpu_ns = 0},
                                                      {.cpu_ns = 700,
                                                       .gpu_ns = 3000,
                                                       .serial = 1,
                                                       .copies = 64,
                                                       .explores = 32,
                                                       .guessed = 1,
                                                       .hope_gpu_ns = 2200}};

/* A driver's span measured dearer than its model may be its set-up
 * (ibp_route_cost.setup_ns) as much as its link: the hope reads it in its
 * favour, the set-up up to IBP_CHOOSE_SETUP_SPAN times first.  Entries of
 * 64 KiB of an application's call (2.2 us modelled, 1 us of it set-up)
 * measuring 5.2 us -- driver calls and set-up 4x dearer -- leave a batched
 * launch of 2.9 us at its hope (3.7 at its prior, 2.5 true) hopeful: it is
 * explored early, and chosen.  Read as a link 2.4x slower, its hope is
 * 5.9 us, and it waits for the share (not once in 100 copies). */
static void test_hope_reads_setup(void) {
  ibp_route_cost prior[IBP_ROUTES];
  memcpy(prior, KV_ENTRIES, sizeof prior);
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, prior, sizeof truth);
  truth[IBP_ROUTE_DRIVER].gpu_ns = 5192;
  truth[IBP_ROUTE_DRIVER].setup_ns = 4000;
  truth[IBP_ROUTE_BATCHED].gpu_ns = 1800;
  sim m;
  sim_init(&m);
  run setup = simulate(&m, prior, truth, 100, IBP_ROUTE_BATCHED, 1);
  CHECK(setup.first_explored == IBP_ROUTE_BATCHED);
  CHECK(setup.first_explore_at <= 2 * IBP_CHOOSE_UNJUDGED_EVERY);
  CHECK(setup.settled >= 0 && setup.settled <= 40);
  /* and a hope at once: an early exploration is judged against the
   * driver at its span as measured (5.2 us), not as the hope reads it --
   * against 2.2 us, the batch measured worse, backed off and stayed
   * unchosen (its prior, 5.7 us, dearer than the driver as measured: one
   * timed copy of its own does not make it the choice, a second early one
   * does) */
  prior[IBP_ROUTE_BATCHED].hope_gpu_ns = 100;
  prior[IBP_ROUTE_BATCHED].explores = 1;
  prior[IBP_ROUTE_BATCHED].gpu_ns = 5000;
  sim_init(&m);
  run at_once = simulate(&m, prior, truth, 100, IBP_ROUTE_BATCHED, 1);
  CHECK(at_once.first_explored == IBP_ROUTE_BATCHED);
  CHECK(at_once.first_explore_at == 1);
  CHECK(at_once.settled >= 0 && at_once.settled <= 40);
  prior[IBP_ROUTE_BATCHED].hope_gpu_ns = 2200;
  prior[IBP_ROUTE_BATCHED].explores = 32;
  prior[IBP_ROUTE_BATCHED].gpu_ns = 3000;
  prior[IBP_ROUTE_DRIVER].setup_ns = 0;
  sim_init(&m);
  run link = simulate(&m, prior, truth, 100, IBP_ROUTE_DRIVER, 1);
  CHECK(link.explored == 0 && link.settled == 0);
}

/* The set-up's doubt is measured by a set-up probe (IBP_CHOOSE_PROBE_EVERY):
 * paired with the class's first timed call where a guessed route is open.
 * Entries of an application's call (2.2 us modelled, 1 us of it set-up)
 * measuring 5.2 us: where the link is 3.5x slower and the set-up as
 * modelled, the probe reads the set-up 1x and the batched launch (3.7 us
 * at its prior, 2.9 at its hope, 6.2 true) is not explored early --
 * kv_blocks' explored call cost 2.3 % of a 17-step run on h100-pcie5
 * under a link a third as wide; where the set-up is 4x dearer, it reads
 * 4x and the launch (1.8 us true) is explored early and chosen.  The
 * reading ages (probed again); while a probe is under way nothing is
 * explored early nor probed again; probes that come to nothing leave the
 * hope as read (explored early after IBP_CHOOSE_PROBES tries); a hope
 * that stands without the doubt waits for no probe, and where no guessed
 * route is open nothing is probed; the reading is (span - ratio x base) /
 * added set-up, within [0, IBP_CHOOSE_SETUP_SPAN]. */
static void test_setup_probed(void) {
  ibp_route_cost prior[IBP_ROUTES];
  memcpy(prior, KV_ENTRIES, sizeof prior);
  ibp_route_cost link[IBP_ROUTES], setup[IBP_ROUTES];
  memcpy(link, prior, sizeof link);
  link[IBP_ROUTE_DRIVER].gpu_ns = 5192; /* bytes 1192 -> 4192 */
  link[IBP_ROUTE_BATCHED].gpu_ns = 6200;
  memcpy(setup, prior, sizeof setup);
  setup[IBP_ROUTE_DRIVER].gpu_ns = 5192;
  setup[IBP_ROUTE_DRIVER].setup_ns = 4000;
  setup[IBP_ROUTE_BATCHED].gpu_ns = 1800;
  sim m;
  sim_init(&m);
  run l = simulate(&m, prior, link, 100, IBP_ROUTE_DRIVER, 1);
  CHECK(m.probes == 1 && m.halved == 0 && l.explored == 0 && l.settled == 0);
  CHECK(m.k.route[IBP_ROUTE_DRIVER].setup_copies == 64 &&
        fabs(m.k.route[IBP_ROUTE_DRIVER].setup_seen - 1.0) < 1e-6);
  /* the reading ages with the class's samples: probed again */
  m.now += 2 * IBP_CHOOSE_AGE_NS;
  run again = simulate(&m, prior, link, 100, IBP_ROUTE_DRIVER, 1);
  CHECK(m.probes == 2 && again.explored == 0);
  /* a probe under way: no exploration, no second probe, until it is read */
  sim_init(&m);
  learn_twice(&m, IBP_ROUTE_DRIVER, 64, 0, 0, 5192, 2192);
  ibp_choice c;
  long probes = 0, explored = 0;
  for (int i = 0; i < 20; i++) {
    ibp__choose_decide(&m.k, prior, 15u, TIMING_NS, 1, 0, m.now, &c);
    probes += c.probe;
    explored += c.explore;
    m.now += 5192;
  }
  CHECK(probes == 1 && explored == 0 &&
        m.k.route[IBP_ROUTE_DRIVER].setup_pending == 1);
  sim_init(&m);
  run d = simulate(&m, prior, setup, 100, IBP_ROUTE_BATCHED, 1);
  CHECK(m.probes == 1 && m.halved == 0 &&
        d.first_explored == IBP_ROUTE_BATCHED);
  CHECK(d.first_explore_at <= 2 * IBP_CHOOSE_UNJUDGED_EVERY);
  CHECK(d.settled >= 0 && d.settled <= 40);
  CHECK(fabs(m.k.route[IBP_ROUTE_DRIVER].setup_seen - 4.0) < 1e-6);
  /* probes that come to nothing: the hope as read, after the tries */
  sim_init(&m);
  m.probes_fail = 1;
  run f = simulate(&m, prior, link, 100, IBP_ROUTE_DRIVER, 1);
  CHECK(m.probes == IBP_CHOOSE_PROBES && f.first_explored == IBP_ROUTE_BATCHED);
  CHECK(m.k.route[IBP_ROUTE_DRIVER].setup_copies == 0);
  /* a hope without the doubt: explored early, waiting for no probe */
  prior[IBP_ROUTE_BATCHED].hope_gpu_ns = 100;
  sim_init(&m);
  learn_twice(&m, IBP_ROUTE_DRIVER, 64, 0, 0, 5192, 2192);
  run h = simulate(&m, prior, link, 100, IBP_ROUTE_DRIVER, 1);
  CHECK(m.probes == 0 && h.first_explored == IBP_ROUTE_BATCHED &&
        h.first_explore_at == 0);
  /* no route a hope may come to: no paired probe */
  prior[IBP_ROUTE_BATCHED].guessed = 0;
  sim_init(&m);
  (void)simulate(&m, prior, link, 100, IBP_ROUTE_DRIVER, 1);
  CHECK(m.probes == 0);
  prior[IBP_ROUTE_BATCHED].guessed = 1;
  /* entries that cannot be probed (a call of entries of many sizes): the
   * hope as read, explored early */
  prior[IBP_ROUTE_BATCHED].hope_gpu_ns = 2200;
  prior[IBP_ROUTE_DRIVER].probeable = 0;
  sim_init(&m);
  run mixed = simulate(&m, prior, link, 100, IBP_ROUTE_DRIVER, 1);
  CHECK(m.probes == 0 && mixed.first_explored == IBP_ROUTE_BATCHED &&
        mixed.first_explore_at <= 2 * IBP_CHOOSE_UNJUDGED_EVERY);
  prior[IBP_ROUTE_DRIVER].probeable = 1;
  /* a paired probe under way: none asked again at the next timed copies */
  sim_init(&m);
  long paired = 0;
  for (int i = 0; i < 40; i++) {
    ibp__choose_decide(&m.k, prior, 15u, TIMING_NS, 1, 0, m.now, &c);
    paired += c.probe == IBP_PROBE_PAIRED;
    m.now += 2192;
  }
  CHECK(paired == 1);
  /* a probe not made (its call timed for another class): no try spent,
   * asked again; one never read is given up after IBP_CHOOSE_AGE_NS */
  sim_init(&m);
  learn_twice(&m, IBP_ROUTE_DRIVER, 64, 0, 0, 5192, 2192);
  ibp_choice p;
  ibp__choose_decide(&m.k, prior, 15u, TIMING_NS, 1, 0, m.now, &p);
  CHECK(p.probe == IBP_PROBE_HALVED);
  ibp__choose_probe_release(&m.k, IBP_ROUTE_DRIVER);
  CHECK(m.k.route[IBP_ROUTE_DRIVER].setup_pending == 0 &&
        m.k.route[IBP_ROUTE_DRIVER].setup_failed == 0);
  ibp__choose_decide(&m.k, prior, 15u, TIMING_NS, 1, 0, m.now, &p);
  CHECK(p.probe == IBP_PROBE_HALVED);
  ibp__choose_decide(&m.k, prior, 15u, TIMING_NS, 1, 0, m.now + 1000, &p);
  CHECK(!p.probe && !p.explore);
  learn_twice(&m, IBP_ROUTE_DRIVER, 64, 0, 0, 5192, 2192);
  m.now += 1.5 * IBP_CHOOSE_AGE_NS;
  learn_twice(&m, IBP_ROUTE_DRIVER, 64, 0, 0, 5192, 2192);
  ibp__choose_decide(&m.k, prior, 15u, TIMING_NS, 1, 0, m.now, &p);
  CHECK(p.probe == IBP_PROBE_HALVED);
  /* the driver measured already: its later timed copies not paired */
  prior[IBP_ROUTE_BATCHED].hope_gpu_ns = 9000;
  sim_init(&m);
  learn_twice(&m, IBP_ROUTE_DRIVER, 64, 0, 0, 2192, 2192);
  run later = simulate(&m, prior, prior, 3000, IBP_ROUTE_DRIVER, 1);
  CHECK(later.timed > 0 && m.probes == 0);
  /* the reading: a driver ratio of 2 on calls of 64 entries */
  ibp_choose_route *q = &m.k.route[IBP_ROUTE_DRIVER];
  sim_init(&m);
  learn_twice(&m, IBP_ROUTE_DRIVER, 64, 0, 0, 2000, 1000);
  q->setup_pending = 1;
  ibp__choose_learn_setup(&m.k, IBP_ROUTE_DRIVER, 64, 2000 * 2 + 3 * 100, 2000,
                          100, m.now);
  CHECK(q->setup_pending == 0 && q->setup_copies == 64 &&
        fabs(q->setup_seen - 3.0) < 1e-9);
  ibp__choose_learn_setup(&m.k, IBP_ROUTE_DRIVER, 64, 2000 * 2 + 9 * 100, 2000,
                          100, m.now);
  CHECK(q->setup_seen == IBP_CHOOSE_SETUP_SPAN);
  ibp__choose_learn_setup(&m.k, IBP_ROUTE_DRIVER, 64, 2000 * 2 - 100, 2000, 100,
                          m.now);
  CHECK(q->setup_seen == 0 && q->setup_failed == 0);
  /* nothing fresh to read it against: it came to nothing, and the last
   * reading ages */
  m.now += 2 * IBP_CHOOSE_AGE_NS;
  ibp__choose_learn_setup(&m.k, IBP_ROUTE_DRIVER, 64, 5000, 2000, 100, m.now);
  CHECK(q->setup_failed == 1 && q->setup_copies == 64 && q->setup_seen == 0);
}

/* The driver's part of an application's call of 64 entries is explored
 * whole: once the class has measured it (judged), an exploration is
 * charged as the call's excess over the choice, not as one entry's --
 * entries measured 2.4x their model (5.2 us) beside a batched launch
 * chosen: charged as one entry (3.8 us of credit) kv_blocks explored the
 * call at once, and it took 83 us. */
static void test_call_explored_whole(void) {
  const ibp_route_cost *prior = KV_ENTRIES;
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, prior, sizeof truth);
  truth[IBP_ROUTE_DRIVER].gpu_ns = 5192;
  truth[IBP_ROUTE_DRIVER].setup_ns = 4000;
  truth[IBP_ROUTE_BATCHED].gpu_ns = 1800;
  sim m;
  sim_init(&m);
  /* the driver's part measured first (the batched route not open yet) */
  ibp_route_cost driver_only[IBP_ROUTES];
  memcpy(driver_only, prior, sizeof driver_only);
  memset(&driver_only[IBP_ROUTE_BATCHED], 0, sizeof driver_only[0]);
  run measured = simulate(&m, driver_only, truth, 40, IBP_ROUTE_DRIVER, 1);
  CHECK(measured.timed >= IBP_CHOOSE_MIN_SAMPLES);
  run first = simulate(&m, prior, truth, 100, IBP_ROUTE_BATCHED, 1);
  CHECK(first.settled >= 0);
  ibp_choice c;
  memset(&c, 0, sizeof c);
  for (int i = 0; i < 100000 && !c.explore; i++) {
    ibp__choose_decide(&m.k, prior, 15u, TIMING_NS, 1, 0, m.now, &c);
    m.now += 2500;
  }
  CHECK(c.explore && c.route == IBP_ROUTE_DRIVER);
  const double excess = 64 * (c.est_ns[IBP_ROUTE_DRIVER] - c.choice_ns);
  CHECK(excess > 64 * 2000 && c.charged_ns >= excess);
}

/* An early exploration borrows at most what the share earns in
 * IBP_CHOOSE_EARLY_REPAY copies (25.6 us here), on what the launch costs
 * at its own prior with the copies that join it: a batch that could win
 * at its hope (9 us against the driver's 10) but 14 us at its prior is
 * explored at the class's second copy as a batch of 4 (18 us over the
 * driver's), not as a call of 64 (258 us: kv_blocks' explored calls,
 * 8 % of a short run under SM reads half as fast) -- that one waits for
 * the share.  Where the driver measured 1.5x its model, a batch of 16 is
 * believed 18 us a copy (what it inherits) but costs 14 at its own prior,
 * under the driver's 15: explored early all the same (under driver calls
 * 4x dearer, kv_blocks' entries measured 1.8x, set-up more than bytes,
 * and their batches were 1.4x faster than the driver). */
static void test_early_loan_bounded(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {.cpu_ns = 2500, .gpu_ns = 10000, .engine = 1},
      {.cpu_ns = 0},
      {.cpu_ns = 0},
      {.cpu_ns = 6000,
       .gpu_ns = 8000,
       .serial = 1,
       .copies = 64,
       .once_ns = 30000,
       .guessed = 1,
       .hope_gpu_ns = 2000}};
  sim m;
  prior[IBP_ROUTE_BATCHED].explores = 4;
  sim_init(&m);
  run small = simulate(&m, prior, prior, 50, IBP_ROUTE_DRIVER, 1);
  CHECK(small.explored == 1 && small.first_explore_at == 1);
  prior[IBP_ROUTE_BATCHED].explores = 64;
  sim_init(&m);
  run call = simulate(&m, prior, prior, 50, IBP_ROUTE_DRIVER, 1);
  CHECK(call.explored == 0);
  /* a dearer driver */
  ibp_choice c;
  prior[IBP_ROUTE_BATCHED].explores = 16;
  sim_init(&m);
  learn_twice(&m, IBP_ROUTE_DRIVER, 0, 2500, 2500, 15000, 10000);
  ibp__choose_decide(&m.k, prior, 9u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(fabs(c.est_ns[IBP_ROUTE_BATCHED] - 18000) < 1);
  CHECK(c.explore && c.route == IBP_ROUTE_BATCHED);
  CHECK(fabs(c.charged_ns - TIMING_NS) < 1);
  /* a dearer driver timed once: not judged, its estimate still its prior
   * (10 us), but seen at 15.  A batch of 32 (448 us at its own prior) is
   * 128 us over 32 of the driver's prior -- over the loan (25.6 us) -- and
   * nothing over 32 of what the driver was seen to cost: explored early,
   * judged against the driver as seen (kv_blocks under driver calls 4x
   * dearer: explored a step later, after the driver's second sample, 0.93
   * of the batched route's time) */
  prior[IBP_ROUTE_BATCHED].explores = 32;
  prior[IBP_ROUTE_BATCHED].once_ns = 30000;
  sim_init(&m);
  ibp__choose_learn(&m.k, IBP_ROUTE_DRIVER, 0, 2500, 2500, 15000, 10000, m.now);
  ibp__choose_decide(&m.k, prior, 9u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(fabs(c.est_ns[IBP_ROUTE_DRIVER] - 10000) < 1);
  CHECK(c.explore && c.route == IBP_ROUTE_BATCHED);
  CHECK(fabs(c.choice_ns - 15000) < 1);
  /* a spike: the driver seen at 2.5x, counted at IBP_CHOOSE_SEEN_MAX (2x)
   * -- a batch that could win even so (its hope 500 ns on the GPU) is
   * nothing over 32 of that, explored against it */
  prior[IBP_ROUTE_BATCHED].hope_gpu_ns = 500;
  sim_init(&m);
  ibp__choose_learn(&m.k, IBP_ROUTE_DRIVER, 0, 2500, 2500, 25000, 10000, m.now);
  ibp__choose_decide(&m.k, prior, 9u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(c.explore && c.route == IBP_ROUTE_BATCHED);
  CHECK(fabs(c.choice_ns - IBP_CHOOSE_SEEN_MAX * 10000) < 1);
  prior[IBP_ROUTE_BATCHED].hope_gpu_ns = 2000;
  /* the same batch where the driver was not seen dearer: over the loan */
  sim_init(&m);
  ibp__choose_learn(&m.k, IBP_ROUTE_DRIVER, 0, 2500, 2500, 10000, 10000, m.now);
  ibp__choose_decide(&m.k, prior, 9u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(!c.explore);
  /* and a launch whose fixed costs make its batch of 16 dearer than the
   * call's copies (once_ns: 40 us a copy) over the loan */
  prior[IBP_ROUTE_BATCHED].explores = 16;
  prior[IBP_ROUTE_BATCHED].once_ns = 16 * 40000;
  sim_init(&m);
  learn_twice(&m, IBP_ROUTE_DRIVER, 0, 2500, 2500, 15000, 10000);
  ibp__choose_decide(&m.k, prior, 9u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(!c.explore);
}

/* Driver calls 4x dearer than modelled, measured by another class (copies
 * of another size): a class that never timed anything believes them, and
 * leaves the staged path -- fewer GPU-side microseconds than the driver's
 * copy, but three times its calls -- to the driver from its first copy. */
static void test_calls_shared(void) {
  ibp_route_cost truth[IBP_ROUTES], small[IBP_ROUTES], small_truth[IBP_ROUTES];
  memcpy(truth, STAGED2, sizeof truth);
  for (int r = 0; r < 3; r++)
    truth[r].cpu_ns *= 4;
  memcpy(small, STAGED2, sizeof small); /* the staged path closed there */
  small[IBP_ROUTE_STAGED] = (ibp_route_cost){0};
  memcpy(small_truth, truth, sizeof small_truth);
  small_truth[IBP_ROUTE_STAGED] = (ibp_route_cost){0};
  sim a, b;
  sim_init(&a);
  simulate(&a, small, small_truth, 200, IBP_ROUTE_DRIVER, 1); /* its calls */
  sim_init(&b);
  b.k.calls = b.learn_calls = &a.calls;
  b.now = a.now;
  run o = simulate(&b, STAGED2, truth, 2000, IBP_ROUTE_DRIVER, 1);
  CHECK(o.settled == 0);
  CHECK(o.took[IBP_ROUTE_STAGED] <= 10);
  fprintf(stderr, "calls 4x, measured elsewhere: staged taken %ld times\n",
          o.took[IBP_ROUTE_STAGED]);
}

/* A class's twin (its size, on a stream the other way busy) timed a
 * route the class has not: judged there (two copies), the class believes
 * it in either direction from its first copy -- the driver 4x cheaper than
 * its prior (a link 4x as wide), the kernel 3x dearer, the driver 2x
 * dearer and so every route on the link (what the class inherits); timed
 * once there,
 * it is a hope the class explores at once, the driver or another route
 * (the share alone would take some 200 copies). */
static void test_busy_twin(void) {
  /* the kernel a little dearer than the driver by the prior */
  static const ibp_route_cost NEAR[IBP_ROUTES] = {
      {.cpu_ns = 2200, .gpu_ns = 10533, .engine = 1},
      {.cpu_ns = 2800, .gpu_ns = 12000}};
  static const struct {
    const ibp_route_cost *prior;
    ibp_route r;     /* the route the twin timed */
    double gpu;      /* its GPU time in truth (the rest: prior) */
    int times;       /* the twin's timed copies of it */
    ibp_route want;  /* the class's choice from its first copy */
    long explore_by; /* or (>= 0) explored by this copy */
  } cases[] = {
      {PRIOR, IBP_ROUTE_DRIVER, 20000, 2, IBP_ROUTE_DRIVER, -1},
      {PRIOR, IBP_ROUTE_ZEROCOPY, 150000, 2, IBP_ROUTE_DRIVER, -1},
      {PRIOR, IBP_ROUTE_DRIVER, 20000, 1, IBP_ROUTE_DRIVER, 1},
      {DRIVER_AHEAD, IBP_ROUTE_ZEROCOPY, 20000, 1, IBP_ROUTE_ZEROCOPY, 1},
      /* the link a third as fast, seen by the twin's driver (2x): the
       * kernel, unjudged, is believed as slow (inherit) */
      {NEAR, IBP_ROUTE_DRIVER, 21560, 2, IBP_ROUTE_DRIVER, -1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ibp_route_cost truth[IBP_ROUTES];
    const ibp_route_cost *prior = cases[i].prior;
    memcpy(truth, prior, sizeof truth);
    truth[cases[i].r].gpu_ns = cases[i].gpu;
    sim a, b;
    sim_init(&a);
    for (int n = 0; n < cases[i].times; n++)
      ibp__choose_learn(&a.k, cases[i].r, 0, prior[cases[i].r].cpu_ns,
                        prior[cases[i].r].cpu_ns, cases[i].gpu,
                        prior[cases[i].r].gpu_ns, a.now);
    sim_init(&b);
    b.k.twin = a.route;
    ibp_choice c;
    ibp_route first =
        ibp__choose_decide(&b.k, prior, 15u, TIMING_NS, 1, 1, b.now, &c);
    if (cases[i].explore_by < 0) {
      CHECK(first == cases[i].want);
      continue;
    }
    run o = simulate(&b, prior, truth, 100, cases[i].want, 1);
    CHECK(o.first_explored == (int)cases[i].want &&
          o.first_explore_at <= cases[i].explore_by);
    CHECK(o.settled >= 0 && o.settled <= 8);
    /* without the twin: at the share's pace */
    sim c0;
    sim_init(&c0);
    run n = simulate(&c0, prior, truth, 100, cases[i].want, 1);
    CHECK(n.first_explored < 0 || n.first_explore_at > 20);
  }
  const unsigned idle = ibp__choose_class_index(1u << 20, 0, IBP_CLASS_SINGLE),
                 busy = ibp__choose_class_index(1u << 20, 1, IBP_CLASS_SINGLE);
  CHECK(ibp__choose_twin(ibp__choose_key(idle)) == ibp__choose_key(busy));
  CHECK(ibp__choose_twin(ibp__choose_key(busy)) == ibp__choose_key(idle));
  /* the driver timed once at its prior by the twin, within the driver's
   * doubt of the kernel: nothing to find out early */
  static const ibp_route_cost CLOSE[IBP_ROUTES] = {
      {.cpu_ns = 2200, .gpu_ns = 12000, .engine = 1},
      {.cpu_ns = 2800, .gpu_ns = 10000}};
  sim a, b;
  sim_init(&a);
  sim_init(&b);
  b.k.twin = a.route;
  ibp__choose_learn(&a.k, IBP_ROUTE_DRIVER, 0, 2200, 2200, 12000, 12000, a.now);
  run o = simulate(&b, CLOSE, CLOSE, 100, IBP_ROUTE_ZEROCOPY, 1);
  CHECK(o.settled == 0 && (o.first_explored < 0 || o.first_explore_at > 20));
  /* one timed copy each: the smaller ratio where they agree (the driver
   * at 0.26 there, 0.25 here); nothing where they do not (0.5, 0.25) */
  const ibp_route_cost *d = &PRIOR[IBP_ROUTE_DRIVER];
  ibp_choice c;
  for (int pair = 0; pair < 2; pair++) {
    const double twin_reads[] = {0.26, 0.5}, want[] = {0.25, 1.0};
    sim_init(&a);
    sim_init(&b);
    b.k.twin = a.route;
    ibp__choose_learn(&a.k, IBP_ROUTE_DRIVER, 0, d->cpu_ns, d->cpu_ns,
                      twin_reads[pair] * d->gpu_ns, d->gpu_ns, a.now);
    ibp__choose_learn(&b.k, IBP_ROUTE_DRIVER, 0, d->cpu_ns, d->cpu_ns,
                      0.25 * d->gpu_ns, d->gpu_ns, b.now);
    (void)ibp__choose_decide(&b.k, PRIOR, 15u, TIMING_NS, 1, 1, b.now, &c);
    CHECK(fabs(c.est_ns[IBP_ROUTE_DRIVER] - want[pair] * d->gpu_ns) < 1);
  }
  /* a two-stage route's first stage judged by the twin, its whole spans
   * not: its estimate stays its prior */
  sim_init(&a);
  sim_init(&b);
  b.k.twin = a.route;
  const ibp_route_cost *st = &STAGED2[IBP_ROUTE_STAGED];
  learn_twice(&a, IBP_ROUTE_STAGED, 0, st->cpu_ns, st->cpu_ns, 0.3 * st->gpu_ns,
              st->gpu_ns);
  (void)ibp__choose_decide(&b.k, STAGED2, 15u, TIMING_NS, 1, 1, b.now, &c);
  CHECK(fabs(c.est_ns[IBP_ROUTE_STAGED] - ibp__choose_model_ns(st)) < 1);
}

/* A twin that keeps timing a route cheap where the class's own copies of
 * it are dear (busy and idle copies of the size differ): the class's own
 * readings stand -- explored no more than without the twin -- not the
 * twin's each time the class's last sample ages (8 MiB copies 20 a second
 * for two minutes; the driver 4 ms; the kernel's prior 5 ms, 3x that in
 * the class's truth; the idle twin reads it at 0.5 every 0.5 s).  Where the
 * twin is right (the kernel at 0.5 in the class too), the class takes the
 * kernel. */
static void test_twin_disagrees(void) {
  static const ibp_route_cost P[IBP_ROUTES] = {
      {.cpu_ns = 2500, .gpu_ns = 4e6, .engine = 1},
      {.cpu_ns = 2800, .gpu_ns = 5e6}};
  long explored[3], kernel[3];
  for (int i = 0; i < 3; i++) { /* no twin; twin wrong; twin right */
    const double truth_ratio = i < 2 ? 3.0 : 0.5;
    ibp_route_cost t[IBP_ROUTES];
    memcpy(t, P, sizeof t);
    t[IBP_ROUTE_ZEROCOPY].gpu_ns = truth_ratio * P[IBP_ROUTE_ZEROCOPY].gpu_ns;
    sim a, b;
    sim_init(&a);
    sim_init(&b);
    if (i)
      b.k.twin = a.route;
    double next_twin = 0;
    explored[i] = kernel[i] = 0;
    for (long n = 0; n < 20 * 120; n++) {
      if (b.now >= next_twin) {
        ibp__choose_learn(&a.k, IBP_ROUTE_ZEROCOPY, 0, 2800, 2800,
                          0.5 * P[IBP_ROUTE_ZEROCOPY].gpu_ns,
                          P[IBP_ROUTE_ZEROCOPY].gpu_ns, b.now);
        next_twin = b.now + 0.5e9;
      }
      const double t0 = b.now;
      run o = simulate(&b, P, t, 1, IBP_ROUTE_DRIVER, 1);
      explored[i] += o.explored;
      kernel[i] += o.took[IBP_ROUTE_ZEROCOPY];
      b.now = t0 + 50e6; /* the next copy 50 ms later */
    }
  }
  CHECK(explored[1] <= explored[0] + 2);
  CHECK(kernel[2] >= 20 * 120 * 9 / 10);
  fprintf(stderr,
          "twin disagrees: explored %ld (no twin %ld); twin right: "
          "kernel %ld of %d\n",
          explored[1], explored[0], kernel[2], 20 * 120);
}

/* A key libibp serves: a guessed route the twin timed at or over its
 * prior is no hope -- explored at the share's pace, as without the twin --
 * only one it found clearly cheaper (twin_hope). */
static void test_twin_no_hope(void) {
  static const ibp_route_cost P[IBP_ROUTES] = {
      {.cpu_ns = 2500, .gpu_ns = 80000, .engine = 1},
      {.cpu_ns = 2800, .gpu_ns = 50000},
      {.cpu_ns = 4000,
       .gpu_ns = 60000,
       .sm_ns = 30000,
       .pipelined = 1,
       .engine = 1,
       .guessed = 1,
       .hope_gpu_ns = 30000,
       .hope_sm_ns = 5000}};
  ibp_route_cost t[IBP_ROUTES], closed[IBP_ROUTES];
  memcpy(t, P, sizeof t);
  t[IBP_ROUTE_STAGED].gpu_ns = 2.0 * P[IBP_ROUTE_STAGED].gpu_ns;
  memcpy(closed, P, sizeof closed);
  memset(&closed[IBP_ROUTE_STAGED], 0, sizeof closed[IBP_ROUTE_STAGED]);
  const double reads[] = {1.0, 3.0};
  for (int i = 0; i < 2; i++) {
    sim a, b;
    sim_init(&a);
    sim_init(&b);
    (void)simulate(&b, closed, t, 3000, IBP_ROUTE_ZEROCOPY, 1); /* served */
    for (int n = 0; n < 2; n++)
      ibp__choose_learn(&a.k, IBP_ROUTE_STAGED, 0, 4000, 4000,
                        reads[i] * P[IBP_ROUTE_STAGED].gpu_ns,
                        P[IBP_ROUTE_STAGED].gpu_ns, b.now);
    b.k.twin = a.route;
    b.k.explore_credit_ns = 0; /* just spent */
    run o = simulate(&b, P, t, 200, IBP_ROUTE_ZEROCOPY, 1);
    CHECK(o.first_explored < 0 || o.first_explore_at > 20);
  }
}

/* Driver calls measured 4x their model (by any class: judged): an
 * unmeasured route's exploration is charged at its prior with its calls
 * that dear (not at its prior alone: h100-pcie5's weight copies under
 * driver calls 4x dearer explored the staged path on a charge of 15 us,
 * and it took 35 over the driver's copy -- 2 % of the run), and timing a
 * copy costs 4x the timing's model (its event calls are calls). */
static void test_calls_dear_charged(void) {
  const ibp_route_cost prior[IBP_ROUTES] = {
      {.cpu_ns = 2500, .gpu_ns = 10000, .engine = 1},
      {.cpu_ns = 0},
      {.cpu_ns = 6000, .gpu_ns = 5000, .serial = 1, .engine = 1},
      {.cpu_ns = 0}};
  sim m;
  sim_init(&m);
  for (int i = 0; i < IBP_CHOOSE_MIN_SAMPLES; i++)
    ibp__choose_learn_calls(&m.calls, 10000, 2500, m.now);
  learn_twice(&m, IBP_ROUTE_DRIVER, 0, 10000, 2500, 10000, 10000);
  ibp_choice c;
  int i;
  for (i = 0; i < 100000; i++) {
    ibp__choose_decide(&m.k, prior, 5u, TIMING_NS, 1, 0, m.now, &c);
    if (c.explore)
      break;
  }
  CHECK(c.explore && c.route == IBP_ROUTE_STAGED);
  /* 6 us of calls at 4x, 5 us after them; over the driver's 10, the
   * timing at 4x and the surcharge on the 29 */
  CHECK(fabs(c.charged_ns - ((29000 - 10000) + 4 * TIMING_NS + 29000)) < 1);
  /* the timing share: 0.2 % of 10 us a copy buys one 8 us timing in 400 */
  sim n;
  sim_init(&n);
  for (int j = 0; j < IBP_CHOOSE_MIN_SAMPLES; j++)
    ibp__choose_learn_calls(&n.calls, 10000, 2500, n.now);
  learn_twice(&n, IBP_ROUTE_DRIVER, 0, 10000, 2500, 10000, 10000);
  long timed = 0;
  for (i = 0; i < 4000; i++) {
    ibp__choose_decide(&n.k, prior, 1u, TIMING_NS, 1, 0, n.now, &c);
    timed += c.timed;
  }
  CHECK(timed >= 8 && timed <= 12);
}

/* An unjudged choice is timed at the class's first copy, then one in
 * IBP_CHOOSE_UNJUDGED_EVERY at the timing's model -- spaced as timing
 * costs: where every class measured the calls 4x their model, one in 4x
 * as many (h100-pcie5's weight copies under driver calls 4x dearer:
 * 0.979 of the driver alone's time, 0.994 so). */
static void test_unjudged_spaced(void) {
  for (int dear = 0; dear < 2; dear++) {
    sim m;
    sim_init(&m);
    if (dear)
      for (int i = 0; i < IBP_CHOOSE_MIN_SAMPLES; i++)
        ibp__choose_learn_calls(&m.calls, 10000, 2500, m.now);
    long timed = 0;
    for (int i = 0; i < 64; i++) {
      ibp_choice c;
      ibp__choose_decide(&m.k, PRIOR, 3u, TIMING_NS, 1, 0, m.now, &c);
      CHECK(!c.explore);
      timed += c.timed;
      m.now += 50000;
    }
    fprintf(stderr, "unjudged, calls %dx: %ld timed in 64\n", dear ? 4 : 1,
            timed);
    /* besides, the share: one in 20 at the model, none at 4x */
    CHECK(dear ? timed == 2 : timed >= 64 / IBP_CHOOSE_UNJUDGED_EVERY);
  }
}

/* An unjudged choice whose first timed copy measured it off its model (its
 * calls or its GPU work) is timed again as soon as that costs the exploration
 * share of its copies: a 300 us copy at once (a 2 us timing is 0.7 % of it), a
 * 50 us copy after 4 (2 us over 1 % of 50 us); one measured as modelled waits
 * for the timing share (the 300 us copy's fourth) or the spacing of one in
 * IBP_CHOOSE_UNJUDGED_EVERY (the 50 us copy's).  kv_offload's prefix
 * restores of 15 MiB on h100-pcie5 under a link a third as wide: the
 * driver's second timing came four copies after its first (3.0x), 0.944
 * of the staged route's time; 1.00 so. */
static void test_doubted_timed_again(void) {
  /* its first timing, x its model: calls and GPU work; whether in doubt
   * (off IBP_CHOOSE_DEAD_BAND's 6 %, either way) */
  static const struct {
    double cpu, gpu;
    int doubt;
  } first[] = {{1, 1, 0},   {1, 3, 1},    {1, 0.5, 1},  {4, 1, 1},  {1, 0.9, 1},
               {1, 1.1, 1}, {1, 0.96, 0}, {1.04, 1, 0}, {0.9, 1, 1}};
  for (int big = 0; big < 2; big++)
    for (size_t f = 0; f < sizeof first / sizeof first[0]; f++) {
      const double gpu = big ? 300000 : 50000;
      const ibp_route_cost prior[IBP_ROUTES] = {
          {.cpu_ns = 2500, .gpu_ns = gpu}};
      sim m;
      sim_init(&m);
      long second = -1;
      for (long i = 0; i < 12 && second < 0; i++) {
        ibp_choice c;
        ibp__choose_decide(&m.k, prior, 1u, TIMING_NS, 1, 0, m.now, &c);
        CHECK(c.route == IBP_ROUTE_DRIVER && !c.explore);
        if (!c.timed)
          continue;
        if (i)
          second = i;
        else /* its first copy, timed at once */
          ibp__choose_learn(&m.k, IBP_ROUTE_DRIVER, 0, first[f].cpu * 2500,
                            2500, first[f].gpu * gpu, gpu, m.now);
        m.now += gpu;
      }
      fprintf(stderr,
              "%s copies, first timing calls %.1fx, GPU %.1fx: second timed "
              "at %ld\n",
              big ? "300 us" : "50 us", first[f].cpu, first[f].gpu, second);
      CHECK(second == (big ? (first[f].doubt ? 1 : 3)
                           : (first[f].doubt ? 4 : IBP_CHOOSE_UNJUDGED_EVERY)));
    }
}

/* A two-stage choice whose windows are judged but whose whole spans are
 * not is timed as an unjudged one: its first copy at once, the second --
 * where that first whole read off the model's joining -- as soon as that
 * costs the exploration share (50 us copies: after 4), else at the
 * unjudged spacing (the staged path's windows judged, its one whole
 * 1.33x, its next timed 100 copies later: 4 KiB weights staged at 0.962
 * of the driver's time, h100-pcie5 under a random truth). */
static void test_whole_open_timed(void) {
  /* its first whole, whether in doubt, its windows as judged (x model):
   * windows judged off the model (1.5x) put it in no doubt -- its
   * estimate stands on them -- where its first whole read as modelled */
  static const struct {
    double whole;
    int doubt;
    double windows;
  } first[] = {{1.33, 1, 1.0},
               {0.8, 1, 1.0},
               {1.0, 0, 1.0},
               {1.03, 0, 1.0},
               {1.0, 0, 1.5}};
  for (size_t f = 0; f < sizeof first / sizeof first[0]; f++) {
    const ibp_route_cost prior[IBP_ROUTES] = {
        [IBP_ROUTE_STAGED] = {.cpu_ns = 2500,
                              .gpu_ns = 50000,
                              .sm_ns = 40000,
                              .pipelined = 1,
                              .engine = 1}};
    sim m;
    sim_init(&m);
    learn_twice(&m, IBP_ROUTE_STAGED, 0, 2500, 2500, first[f].windows * 50000,
                50000);
    long second = -1;
    for (long i = 0; i < 40 && second < 0; i++) {
      ibp_choice c;
      ibp__choose_decide(&m.k, prior, 1u << IBP_ROUTE_STAGED, TIMING_NS, 1, 0,
                         m.now, &c);
      CHECK(c.route == IBP_ROUTE_STAGED && !c.explore);
      if (!c.timed)
        continue;
      if (i)
        second = i;
      else /* its first copy, timed at once */
        ibp__choose_learn_whole(&m.k, IBP_ROUTE_STAGED, first[f].whole, m.now);
      m.now += 50000;
    }
    fprintf(stderr, "staged's first whole %.2fx: second timed at %ld\n",
            first[f].whole, second);
    CHECK(first[f].doubt ? second == 4
                         : second > 4 && second <= IBP_CHOOSE_UNJUDGED_EVERY);
  }
}

/* A prior whose decode terms are a guess (ibp_route_cost.guessed: never
 * measured with the running decoder) is the first alternative explored,
 * before a cheaper unmeasured one, as soon as the share covers it: the
 * staged path (110 us modelled, a guess) before the kernel (100 us). */
static void test_guessed_explored_first(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {2500, 80000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 100000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 110000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  sim m;
  sim_init(&m);
  run plain = simulate(&m, prior, prior, 2000, IBP_ROUTE_DRIVER, 1);
  prior[IBP_ROUTE_STAGED].guessed = 1;
  sim_init(&m);
  run guessed = simulate(&m, prior, prior, 2000, IBP_ROUTE_DRIVER, 1);
  CHECK(plain.first_explored == IBP_ROUTE_ZEROCOPY);
  CHECK(guessed.first_explored == IBP_ROUTE_STAGED);
  CHECK(guessed.explore <=
        IBP_CHOOSE_EXPLORE_SHARE * guessed.spent + 110000 + TIMING_NS);
}

/* A guessed route that could win were its decoder as fast as it may be
 * (ibp_route_cost.hope_gpu_ns under the choice's estimate) is explored at
 * once, on a loan, twice: the kernel 100 us modelled, 25 us at its hope,
 * 33 us true (its decoder 3x faster than the profile says) is the class's
 * choice within its first few copies -- where the share alone would take
 * ~150 copies to cover the first exploration.  One whose hope cannot win
 * (link-bound: 90 us at best) waits for the share; and where the prior is
 * right, the first early exploration measures worse, there is no second,
 * and the loan is paid back before the share explores again. */
static void test_hopeful_explored_early(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {2500, 80000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {2800, 100000, 0, 0, 1, 0, 0, 0, 0, 0, 0, 25000, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, prior, sizeof truth);
  truth[IBP_ROUTE_ZEROCOPY].gpu_ns = 33000;
  sim m;
  sim_init(&m);
  run fast = simulate(&m, prior, truth, 50, IBP_ROUTE_ZEROCOPY, 1);
  CHECK(fast.first_explored == IBP_ROUTE_ZEROCOPY);
  CHECK(fast.settled >= 0 && fast.settled <= 4);
  CHECK(fast.explored == IBP_CHOOSE_MIN_SAMPLES);
  /* not hopeful: nothing explored in 50 copies */
  prior[IBP_ROUTE_ZEROCOPY].hope_gpu_ns = 90000;
  sim_init(&m);
  run hopeless = simulate(&m, prior, truth, 50, IBP_ROUTE_ZEROCOPY, 1);
  CHECK(hopeless.explored == 0);
  /* truth = prior: one early exploration, then the loan is repaid (at
   * the share) before the next */
  prior[IBP_ROUTE_ZEROCOPY].hope_gpu_ns = 25000;
  sim_init(&m);
  run right = simulate(&m, prior, prior, 50, IBP_ROUTE_DRIVER, 1);
  CHECK(right.explored == 1); /* it measured worse: no second */
  CHECK(right.settled == 0);
  CHECK(right.first_explore_at == 1); /* not before a copy was timed */
  CHECK(right.took[IBP_ROUTE_DRIVER] == 49);
  sim_init(&m);
  right = simulate(&m, prior, prior, 5000, IBP_ROUTE_DRIVER, 1);
  CHECK(right.explore <= IBP_CHOOSE_EXPLORE_SHARE * right.spent +
                             2 * (20000 + 2800 + TIMING_NS) + 1000);
  /* explorations dropped before they were read (settled untimed: the
   * staged ring busy, the batch's one timing taken) leave no sample and
   * no back-off: early explorations still stop at IBP_CHOOSE_MIN_SAMPLES,
   * the rest wait for the share (unbounded, 999 of 1000 copies) */
  sim_init(&m);
  (void)simulate(&m, prior, prior, 1, IBP_ROUTE_DRIVER, 1); /* timed */
  long dropped = 0;
  for (int i = 0; i < 1000; i++) {
    ibp_choice c;
    ibp__choose_decide(&m.k, prior, 15u, TIMING_NS, 1, 0, m.now, &c);
    if (c.explore) {
      dropped++;
      ibp__choose_settle(&m.k, c.route, c.charged_ns, -1, 0);
    }
    m.now += 80000;
  }
  CHECK(dropped < 20); /* 2 early, then at the share's pace */
  /* of two guessed routes, the one that could win is explored early,
   * before a cheaper one that cannot */
  prior[IBP_ROUTE_ZEROCOPY].gpu_ns = 90000;
  prior[IBP_ROUTE_ZEROCOPY].hope_gpu_ns = 88000;
  prior[IBP_ROUTE_STAGED] = prior[IBP_ROUTE_ZEROCOPY];
  prior[IBP_ROUTE_STAGED].gpu_ns = 110000;
  prior[IBP_ROUTE_STAGED].hope_gpu_ns = 30000;
  sim_init(&m);
  run two = simulate(&m, prior, prior, 50, IBP_ROUTE_DRIVER, 1);
  CHECK(two.first_explored == IBP_ROUTE_STAGED);
  CHECK(two.explored == 1);
  /* only a class the driver serves explores early: with the staged path
   * the choice (60 us), the kernel hopeful at 25 us waits for the share */
  prior[IBP_ROUTE_STAGED].gpu_ns = 60000;
  prior[IBP_ROUTE_STAGED].engine = 1; /* its timed copies: what is seen */
  prior[IBP_ROUTE_ZEROCOPY].gpu_ns = 100000;
  prior[IBP_ROUTE_ZEROCOPY].hope_gpu_ns = 25000;
  sim_init(&m);
  run served = simulate(&m, prior, prior, 50, IBP_ROUTE_STAGED, 1);
  CHECK(served.settled == 0 && served.explored == 0);
  /* nor another class of the key whose choice is the driver's copy
   * (held copies, for which going alone is the driver's and the staged
   * path is closed): libibp serves the key already */
  ibp__choose_class_init(&m.k, m.route);
  m.k.calls = m.learn_calls = &m.calls;
  ibp_route_cost held[IBP_ROUTES];
  memcpy(held, prior, sizeof held);
  memset(&held[IBP_ROUTE_STAGED], 0, sizeof held[IBP_ROUTE_STAGED]);
  served = simulate(&m, held, held, 50, IBP_ROUTE_DRIVER, 1);
  CHECK(served.settled == 0 && served.explored == 0);
  /* the hope is taken at the calls as first seen: where the driver's
   * calls measure 4x their model, a route of many calls (30 us of them,
   * 25 us on the GPU at its hope) has no hope against the driver's 80 us,
   * and is not explored early (it would take 120 us a copy) */
  const ibp_route_cost small[IBP_ROUTES] = {
      {2500, 80000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
      {30000, 100000, 0, 0, 1, 0, 0, 0, 0, 0, 0, 25000, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  ibp_route_cost dear[IBP_ROUTES];
  memcpy(dear, small, sizeof dear);
  dear[IBP_ROUTE_DRIVER].cpu_ns *= 4;
  dear[IBP_ROUTE_ZEROCOPY].cpu_ns *= 4;
  sim_init(&m);
  run calls = simulate(&m, small, dear, 50, IBP_ROUTE_DRIVER, 1);
  CHECK(calls.explored == 0);
  sim_init(&m);
  run cheap = simulate(&m, small, small, 50, IBP_ROUTE_DRIVER, 1);
  CHECK(cheap.explored == 1); /* as modelled: hopeful (then worse) */
  /* and at the link as first seen, against the choice as first seen: the
   * driver's first copy 3x slower than modelled (a link a third as fast;
   * its 2 us of set-up read as 4x dearer first, hoped_link: a link 2.97x
   * slower) makes the driver 240 us, and a kernel of 100 us modelled
   * hoping for 90 us hopes for 267 us at that link: none, not explored
   * early (it takes 300 us); read at the modelled link, its hope of 90 us
   * would have been explored at once */
  ibp_route_cost wide[IBP_ROUTES] = {
      {2500, 80000, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 2000, 0},
      {2800, 100000, 0, 0, 1, 0, 0, 0, 0, 0, 0, 90000, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  memcpy(dear, wide, sizeof dear);
  dear[IBP_ROUTE_DRIVER].gpu_ns *= 3;
  dear[IBP_ROUTE_ZEROCOPY].gpu_ns *= 3;
  sim_init(&m);
  run link = simulate(&m, wide, dear, 50, IBP_ROUTE_DRIVER, 1);
  CHECK(link.first_explore_at != 1);
  /* a kernel hoping for 30 us (89 us at that link) is explored as soon
   * as the driver's first copy was seen at 240 us (kv_blocks under driver
   * calls 4x dearer than h100-pcie5: batched launches explored in its
   * second step, not its third, 0.87 -> 0.92 of the batched route's
   * time); and where the model is right, once (then it measured worse) */
  wide[IBP_ROUTE_ZEROCOPY].hope_gpu_ns = 30000;
  memcpy(dear, wide, sizeof dear);
  dear[IBP_ROUTE_DRIVER].gpu_ns *= 3;
  dear[IBP_ROUTE_ZEROCOPY].gpu_ns *= 3;
  sim_init(&m);
  link = simulate(&m, wide, dear, 50, IBP_ROUTE_DRIVER, 1);
  CHECK(link.first_explore_at == 1);
  sim_init(&m);
  link = simulate(&m, wide, wide, 50, IBP_ROUTE_DRIVER, 1);
  CHECK(link.explored == 1);
  /* against the driver's copy only: a class the prior stages (50 us, the
   * driver 80) under calls 4x dearer sees its staged copy at 80 us, and a
   * kernel of few calls hoping for 60 us could beat that -- but the
   * staged route's own second timing settles the class, and the kernel
   * waits for the share (a weight class under driver calls 4x dearer
   * than h100-pcie5 explored the kernel first and staged a second copy
   * on the prior) */
  ibp_route_cost staged[IBP_ROUTES] = {
      {.cpu_ns = 2500, .gpu_ns = 80000, .engine = 1},
      {.cpu_ns = 3000, .gpu_ns = 100000, .guessed = 1, .hope_gpu_ns = 60000},
      {.cpu_ns = 20000, .gpu_ns = 50000, .engine = 1}};
  memcpy(dear, staged, sizeof dear);
  for (int r = 0; r < IBP_ROUTES; r++)
    dear[r].cpu_ns *= 4;
  sim_init(&m);
  /* the calls as another class of the region measured them */
  ibp__choose_learn_calls(&m.calls, 4 * 2500, 2500, m.now);
  run settles = simulate(&m, staged, dear, 50, IBP_ROUTE_DRIVER, 1);
  CHECK(settles.took[IBP_ROUTE_STAGED] >= 1);
  CHECK(settles.first_explored < 0 || settles.first_explore_at > 1);
}

/* Learning off (no event calls): the model's route, never timed or
 * explored, whatever was measured before. */
/* m, new, after kv_blocks' timed copies on a link a third as fast: the
 * driver's twice (2.44x), batches of one twice (as modelled) and, when
 * `large`, batches of 64 twice (3x). */
static void learn_kv_blocks(sim *m, int large) {
  sim_init(m);
  for (int i = 0; i < 2; i++) {
    ibp__choose_learn(&m->k, IBP_ROUTE_DRIVER, 0, 2200, 2200, 8710, 3570,
                      m->now);
    if (large)
      ibp__choose_learn(&m->k, IBP_ROUTE_BATCHED, 64, 5200, 5200, 3 * 236000,
                        236000, m->now);
    ibp__choose_learn(&m->k, IBP_ROUTE_BATCHED, 1, 5200, 5200, 16100, 16093,
                      m->now);
  }
}

/* kv_blocks on a link a third as fast (a100-pcie4): a batch of one copy
 * (an exploration) measures mostly the launch's fixed costs, as modelled;
 * a batch of 64 measures the link, 3x its model.  What batches of one
 * measured does not stand for a batch of 64: the driver, measured 2.44x
 * its model, wins those; a batch of one is judged by its like, a batch
 * like neither by the larger, and a batch of 64 with only batches of one
 * timed takes the driver's link. */
static void test_batch_sizes_apart(void) {
  ibp_route_cost prior[IBP_ROUTES] = {
      {.cpu_ns = 2200, .gpu_ns = 3570, .engine = 1},
      {.cpu_ns = 0},
      {.cpu_ns = 0},
      {.cpu_ns = 320,
       .gpu_ns = 3686,
       .serial = 1,
       .once_ns = 16093,
       .copies = 64}};
  sim m;
  learn_kv_blocks(&m, 1);
  double cr, gr;
  ibp__choose_ratios(&m.k, IBP_ROUTE_BATCHED, 64, m.now, &cr, &gr);
  CHECK(fabs(gr - 3.0) < 1e-9);
  ibp__choose_ratios(&m.k, IBP_ROUTE_BATCHED, 32, m.now, &cr, &gr);
  CHECK(fabs(gr - 3.0) < 1e-9);
  ibp__choose_ratios(&m.k, IBP_ROUTE_BATCHED, 1, m.now, &cr, &gr);
  CHECK(gr == 1.0);
  ibp_choice c;
  CHECK(ibp__choose_decide(&m.k, prior, 9u, TIMING_NS, 1, 1, m.now, &c) ==
        IBP_ROUTE_DRIVER);
  CHECK(fabs(c.est_ns[IBP_ROUTE_BATCHED] - (320 + 3 * 3686)) < 1);
  /* a batch of 2 (unlike 64, and unlike 1 by less than IBP_CHOOSE_LIKE)
   * takes the batches of one's */
  prior[IBP_ROUTE_BATCHED].copies = 2;
  ibp__choose_ratios(&m.k, IBP_ROUTE_BATCHED, 2, m.now, &cr, &gr);
  CHECK(gr == 1.0);
  /* a batch of 8, alike neither, is judged by the larger (it measured the
   * link), not left unmeasured to take the driver's 2.44 */
  prior[IBP_ROUTE_BATCHED].copies = 8;
  ibp__choose_decide(&m.k, prior, 9u, TIMING_NS, 1, 1, m.now, &c);
  CHECK(fabs(c.est_ns[IBP_ROUTE_BATCHED] - (320 + 3 * 3686)) < 1);
  /* a batch of 64 with only batches of one timed (the larger not yet, or
   * aged) is unmeasured: the driver's link ratio, 2.44, not theirs */
  learn_kv_blocks(&m, 0);
  prior[IBP_ROUTE_BATCHED].copies = 64;
  CHECK(ibp__choose_decide(&m.k, prior, 9u, TIMING_NS, 1, 1, m.now, &c) ==
        IBP_ROUTE_DRIVER);
  CHECK(fabs(c.est_ns[IBP_ROUTE_BATCHED] - (320 + 3686 * 8710.0 / 3570)) < 1);
}

/* The driver's part of an application's batch call, timed whole (64
 * entries, half their model: entries set up cheaper than the prior said),
 * stands for the call's entries -- and for a call of 32 -- but never for
 * a copy of its own call of the same key, which stays at its prior until
 * timed itself, and then takes its own. */
static void test_call_apart(void) {
  sim m;
  sim_init(&m);
  for (int i = 0; i < 2; i++)
    ibp__choose_learn(&m.k, IBP_ROUTE_DRIVER, 64, 2200, 2200, 0.5 * 228000,
                      228000, m.now);
  double cr, gr;
  ibp__choose_ratios(&m.k, IBP_ROUTE_DRIVER, 64, m.now, &cr, &gr);
  CHECK(fabs(gr - 0.5) < 1e-9);
  ibp__choose_ratios(&m.k, IBP_ROUTE_DRIVER, 32, m.now, &cr, &gr);
  CHECK(fabs(gr - 0.5) < 1e-9);
  ibp__choose_ratios(&m.k, IBP_ROUTE_DRIVER, 0, m.now, &cr, &gr);
  CHECK(gr == 1.0);
  for (int i = 0; i < 2; i++)
    ibp__choose_learn(&m.k, IBP_ROUTE_DRIVER, 0, 2200, 2200, 1.5 * 3570, 3570,
                      m.now);
  ibp__choose_ratios(&m.k, IBP_ROUTE_DRIVER, 0, m.now, &cr, &gr);
  CHECK(fabs(gr - 1.5) < 1e-9);
  ibp__choose_ratios(&m.k, IBP_ROUTE_DRIVER, 64, m.now, &cr, &gr);
  CHECK(fabs(gr - 0.5) < 1e-9);
}

/* Driver calls 4x dearer than modelled (a batched launch's flush measured
 * so): a batch's hold and the tracker's scan, libibp's own work, stay as
 * they are; only its calls take the ratio. */
static void test_own_work(void) {
  const ibp_route_cost prior[IBP_ROUTES] = {
      {.cpu_ns = 2500, .gpu_ns = 1016, .engine = 1},
      {.cpu_ns = 0},
      {.cpu_ns = 0},
      {.cpu_ns = 1000,
       .own_ns = 800,
       .gpu_ns = 500,
       .serial = 1,
       .copies = 16}};
  sim m;
  sim_init(&m);
  learn_twice(&m, IBP_ROUTE_BATCHED, 16, 20800, 5200, 8000, 8000);
  ibp_choice c;
  ibp__choose_decide(&m.k, prior, 8u, TIMING_NS, 1, 1, m.now, &c);
  CHECK(fabs(c.est_ns[IBP_ROUTE_BATCHED] - (200 * 4 + 800 + 500)) < 1);
}

/* A single copy on an idle stream: the GPU waits for each route's lead
 * (libibp's sync of the tracker, then the calls up to its first GPU work).
 * h100-pcie5's 15 MiB KV prefix restore: staged is 2.3 us ahead on
 * overlapped terms, 18 us behind once its 20.7 us scan is waited for. */
static void test_idle_lead(void) {
  const ibp_route_cost prior[IBP_ROUTES] = {
      {.cpu_ns = 2500, .gpu_ns = 286975, .engine = 1, .lead_ns = 2500},
      {.cpu_ns = 0},
      {.cpu_ns = 47800,
       .gpu_ns = 204391,
       .sm_ns = 80318,
       .engine = 1,
       .own_ns = 20700,
       .lead_ns = 23200},
      {.cpu_ns = 0}};
  sim m;
  sim_init(&m);
  ibp_choice c;
  CHECK(ibp__choose_decide(&m.k, prior, 5u, TIMING_NS, 1, 1, m.now, &c) ==
        IBP_ROUTE_DRIVER);
  CHECK(fabs(c.est_ns[IBP_ROUTE_DRIVER] - 289475) < 1);
  CHECK(fabs(c.est_ns[IBP_ROUTE_STAGED] - 307909) < 1);
  /* calls measured twice as dear: the lead's calls scale, the scan not */
  learn_twice(&m, IBP_ROUTE_STAGED, 0, 2 * 27100, 27100, 204391, 204391);
  ibp__choose_decide(&m.k, prior, 5u, TIMING_NS, 1, 1, m.now, &c);
  CHECK(fabs(c.est_ns[IBP_ROUTE_STAGED] - (2 * 2500 + 20700 + 284709)) < 1);
  /* a busy stream's work covers the lead: the two terms overlap */
  ibp_route_cost busy[IBP_ROUTES];
  memcpy(busy, prior, sizeof busy);
  busy[IBP_ROUTE_DRIVER].lead_ns = busy[IBP_ROUTE_STAGED].lead_ns = 0;
  sim_init(&m);
  CHECK(ibp__choose_decide(&m.k, busy, 5u, TIMING_NS, 1, 1, m.now, &c) ==
        IBP_ROUTE_STAGED);
}

/* A route the class cannot time inherits the others' measured ratios, but
 * a copy-engine route only from its kind: batched launches whose decode
 * measured 53x its model leave the driver's estimate as modelled (else the
 * rows, the driver believed 53x dearer, stayed batched), while the
 * zero-copy kernel, a decode too, takes the ratio. */
static void test_untimed_engine(void) {
  const ibp_route_cost prior[IBP_ROUTES] = {
      {.cpu_ns = 2500, .gpu_ns = 1010, .engine = 1},
      {.cpu_ns = 2800, .gpu_ns = 4518},
      {.cpu_ns = 0},
      {.cpu_ns = 5200, .gpu_ns = 74, .serial = 1, .copies = 224}};
  sim m;
  sim_init(&m);
  learn_twice(&m, IBP_ROUTE_BATCHED, 224, 5200, 5200, 883288, 16623);
  ibp_choice c;
  const unsigned batched_only = 1u << IBP_ROUTE_BATCHED;
  CHECK(ibp__choose_decide(&m.k, prior, batched_only, TIMING_NS, 1, 1, m.now,
                           &c) == IBP_ROUTE_DRIVER);
  CHECK(c.est_ns[IBP_ROUTE_DRIVER] < 2501);
  CHECK(c.est_ns[IBP_ROUTE_ZEROCOPY] > 4518 * 50);
}

static void test_learning_off(void) {
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, PRIOR, sizeof truth);
  truth[IBP_ROUTE_ZEROCOPY].gpu_ns *= 4;
  sim m;
  sim_init(&m);
  simulate(&m, PRIOR, truth, 100, IBP_ROUTE_DRIVER, 1); /* learned */
  for (int i = 0; i < 1000; i++) {
    ibp_choice c;
    ibp_route r =
        ibp__choose_decide(&m.k, PRIOR, 7u, TIMING_NS, 0, 0, m.now, &c);
    CHECK(r == IBP_ROUTE_ZEROCOPY && !c.timed && !c.explore);
  }
}

/* A dry look spends nothing and counts nothing. */
static void test_dry(void) {
  sim m;
  sim_init(&m);
  sim before = m;
  ibp_choice c;
  for (int i = 0; i < 100; i++)
    ibp__choose_decide(&m.k, PRIOR, 7u, TIMING_NS, 1, 1, m.now, &c);
  CHECK(memcmp(&m.k.last, &before.k.last,
               sizeof m.k - offsetof(ibp_choose_class, last)) == 0);
  CHECK(memcmp(m.route, before.route, sizeof m.route) == 0);
}

/* The assessment a class keeps (choose.c, assessed) changes no decision:
 * along a random run of decisions, timed copies, settled explorations,
 * short and long waits (samples aging) and priors that change, each
 * decision equals the one a copy of the class makes with nothing kept. */
static uint32_t lcg(uint32_t *x) {
  *x = *x * 1664525u + 1013904223u;
  return *x >> 8;
}

static int same_choice(const ibp_choice *a, const ibp_choice *b) {
  int same = a->route == b->route && a->timed == b->timed &&
             a->explore == b->explore && a->modelled == b->modelled &&
             a->charged_ns == b->charged_ns && a->choice_ns == b->choice_ns &&
             a->copies == b->copies && a->cpu_ns == b->cpu_ns;
  for (int r = 0; r < IBP_ROUTES; r++)
    same = same && a->est_ns[r] == b->est_ns[r];
  return same;
}

static void test_assessment_kept(void) {
  /* two sets of priors: the driver cheapest, and a guessed batched route
   * that could win at its hope */
  ibp_route_cost set[2][IBP_ROUTES];
  memcpy(set[0], PRIOR, sizeof set[0]);
  memcpy(set[1], PRIOR, sizeof set[1]);
  set[0][IBP_ROUTE_DRIVER].cpu_ns = 1500;
  set[0][IBP_ROUTE_DRIVER].gpu_ns = 30000;
  set[1][IBP_ROUTE_BATCHED] = (ibp_route_cost){.cpu_ns = 3000,
                                               .gpu_ns = 60000,
                                               .serial = 1,
                                               .guessed = 1,
                                               .copies = 64,
                                               .hope_gpu_ns = 20000};
  set[1][IBP_ROUTE_STAGED] = (ibp_route_cost){.cpu_ns = 4000,
                                              .gpu_ns = 40000,
                                              .sm_ns = 30000,
                                              .pipelined = 1,
                                              .engine = 1};
  sim m;
  sim_init(&m);
  uint32_t x = 12345;
  long differ = 0, steps = 20000;
  for (long i = 0; i < steps; i++) {
    const ibp_route_cost *prior = set[(i / 97) % 2];
    const uint32_t op = lcg(&x) % 100;
    if (op < 65) {
      sim fresh = m; /* the same class with nothing kept */
      fresh.k.route = fresh.route;
      fresh.k.calls = fresh.learn_calls = &fresh.calls;
      fresh.k.assessed.valid = 0;
      const int dry = op < 5;
      ibp_choice a, b;
      ibp__choose_decide(&m.k, prior, 15u, TIMING_NS, 1, dry, m.now, &a);
      ibp__choose_decide(&fresh.k, prior, 15u, TIMING_NS, 1, dry, m.now, &b);
      differ += !same_choice(&a, &b) ||
                m.k.explore_credit_ns != fresh.k.explore_credit_ns ||
                m.k.timing_credit_ns != fresh.k.timing_credit_ns ||
                m.k.last != fresh.k.last;
      if (a.explore && !dry && lcg(&x) % 2)
        ibp__choose_settle(&m.k, a.route, a.charged_ns,
                           a.charged_ns * (lcg(&x) % 3), lcg(&x) % 2);
      if (a.timed && !dry) {
        const double f = 0.25 + (lcg(&x) % 16) / 4.0;
        ibp__choose_learn(&m.k, a.route, prior[a.route].copies,
                          prior[a.route].cpu_ns * f, prior[a.route].cpu_ns,
                          prior[a.route].gpu_ns * f, prior[a.route].gpu_ns,
                          m.now);
        if (prior[a.route].engine)
          ibp__choose_learn_calls(m.learn_calls, prior[a.route].cpu_ns * f,
                                  prior[a.route].cpu_ns, m.now);
        if (prior[a.route].sm_ns > 0)
          ibp__choose_learn_whole(&m.k, a.route, f, m.now);
      }
      m.now += 1e3 + lcg(&x) % 100000;
    } else if (op < 95) {
      m.now += 1e4 * (lcg(&x) % 1000);
    } else {
      m.now += IBP_CHOOSE_AGE_NS * (0.3 + (lcg(&x) % 8) / 8.0);
    }
  }
  CHECK(differ == 0);
}

/* A quiet run (ibp__choose_quiet): after a decision that took its route
 * untimed and unexplored, the n copies it promises are decided alike --
 * each the same route, untimed, unexplored -- and ibp__choose_quiet_take
 * leaves the class as those n decisions do.  Random class states as in
 * test_assessment_kept, the run's copies decided at times before its end. */
static void sim_clone(sim *c, const sim *m) {
  *c = *m;
  c->k.route = c->route;
  c->k.calls = c->learn_calls = &c->calls;
}

static int same_class(const ibp_choose_class *a, const ibp_choose_class *b) {
  int same = a->copies == b->copies && a->last == b->last &&
             a->overruled == b->overruled && a->spent_ns == b->spent_ns &&
             a->explore_credit_ns == b->explore_credit_ns &&
             a->timing_credit_ns == b->timing_credit_ns &&
             a->explore_cap_ns == b->explore_cap_ns &&
             a->unjudged_next == b->unjudged_next;
  for (int r = 0; r < IBP_ROUTES; r++)
    same = same && a->route[r].wait == b->route[r].wait &&
           a->route[r].chosen == b->route[r].chosen;
  return same;
}

static void test_quiet_run(void) {
  ibp_route_cost set[2][IBP_ROUTES];
  memcpy(set[0], PRIOR, sizeof set[0]);
  memcpy(set[1], PRIOR, sizeof set[1]);
  set[0][IBP_ROUTE_DRIVER].cpu_ns = 1500;
  set[0][IBP_ROUTE_DRIVER].gpu_ns = 30000;
  set[1][IBP_ROUTE_STAGED] = (ibp_route_cost){.cpu_ns = 4000,
                                              .gpu_ns = 40000,
                                              .sm_ns = 30000,
                                              .pipelined = 1,
                                              .engine = 1};
  sim m;
  sim_init(&m);
  uint32_t x = 777;
  long runs = 0, run_copies = 0, wrong = 0;
  for (long i = 0; i < 20000; i++) {
    const ibp_route_cost *prior = set[(i / 89) % 2];
    ibp_choice a;
    ibp__choose_decide(&m.k, prior, 15u, TIMING_NS, 1, 0, m.now, &a);
    if (a.timed) {
      const double f = 0.25 + (lcg(&x) % 16) / 4.0;
      ibp__choose_learn(&m.k, a.route, prior[a.route].copies,
                        prior[a.route].cpu_ns * f, prior[a.route].cpu_ns,
                        prior[a.route].gpu_ns * f, prior[a.route].gpu_ns,
                        m.now);
      if (a.explore && lcg(&x) % 2)
        ibp__choose_settle(&m.k, a.route, a.charged_ns,
                           a.charged_ns * (lcg(&x) % 3), lcg(&x) % 2);
    } else {
      double until;
      const uint32_t n = ibp__choose_quiet(&m.k, a.route, m.now, 64, &until);
      CHECK(n == 0 || until > m.now);
      if (n && n < 64) { /* counted past the promise: every copy counted */
        sim past;
        sim_clone(&past, &m);
        const uint64_t copies = past.k.copies;
        CHECK(ibp__choose_quiet_take(&past.k, a.route, n + 1) >= n);
        CHECK(past.k.copies == copies + n + 1);
      }
      if (n) {
        sim decided;
        sim_clone(&decided, &m);
        double t = m.now;
        for (uint32_t j = 0; j < n; j++) {
          ibp_choice b;
          t += (until - t) / (2 + lcg(&x) % 4); /* before the run's end */
          ibp__choose_decide(&decided.k, prior, 15u, TIMING_NS, 1, 0, t, &b);
          wrong += b.route != a.route || b.timed || b.explore;
        }
        CHECK(ibp__choose_quiet_take(&m.k, a.route, n) == n);
        wrong += !same_class(&m.k, &decided.k);
        runs++;
        run_copies += n;
      }
    }
    m.now += 1e3 + lcg(&x) % 100000;
    if (lcg(&x) % 50 == 0)
      m.now += IBP_CHOOSE_AGE_NS * (0.3 + (lcg(&x) % 8) / 8.0);
  }
  CHECK(wrong == 0);
  /* runs happen, and are long: most copies of a settled class */
  CHECK(runs > 100);
  CHECK(run_copies > 10 * runs);
  /* none where another route is nearly as good: a copy of another offset
   * or stored size might choose it */
  sim close;
  sim_init(&close);
  ibp_route_cost near[IBP_ROUTES] = {{0}};
  near[IBP_ROUTE_DRIVER] =
      (ibp_route_cost){.cpu_ns = 2000, .gpu_ns = 50000, .engine = 1};
  near[IBP_ROUTE_ZEROCOPY] = (ibp_route_cost){.cpu_ns = 3000, .gpu_ns = 52000};
  long quiet = 0;
  for (int i = 0; i < 2000; i++) {
    ibp_choice a;
    double until;
    ibp__choose_decide(&close.k, near, 0u, TIMING_NS, 1, 0, close.now, &a);
    quiet += ibp__choose_quiet(&close.k, a.route, close.now, 64, &until);
    close.now += 1e4;
  }
  CHECK(quiet == 0);
  near[IBP_ROUTE_ZEROCOPY].gpu_ns = 60000; /* 20 % dearer: runs */
  ibp_choice a;
  double until;
  ibp__choose_decide(&close.k, near, 0u, TIMING_NS, 1, 0, close.now, &a);
  CHECK(ibp__choose_quiet(&close.k, a.route, close.now, 64, &until) == 64);
}

/* A quiet run ends where an alternative's wait runs out: from there the
 * class would assess again with that route explorable, so no run is
 * promised past it. */
static void test_quiet_until_wait(void) {
  sim m;
  sim_init(&m);
  learn_twice(&m, IBP_ROUTE_ZEROCOPY, 0, 2800, 2800, 50000, 50000);
  learn_twice(&m, IBP_ROUTE_DRIVER, 0, 2500, 2500, 1.2 * 80000, 80000);
  int explored = 0;
  for (long i = 0; i < 2000 && !explored; i++) {
    ibp_choice c;
    ibp__choose_decide(&m.k, PRIOR, 1u, TIMING_NS, 1, 0, m.now, &c);
    if (c.explore) { /* measured worse again: it waits */
      ibp__choose_learn(&m.k, c.route, 0, 2500, 2500, 1.2 * 80000, 80000,
                        m.now);
      ibp__choose_settle(&m.k, c.route, c.charged_ns, c.charged_ns, 1);
      explored = 1;
    }
    m.now += 50000;
  }
  CHECK(explored);
  ibp_choice c;
  ibp__choose_decide(&m.k, PRIOR, 1u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(c.route == IBP_ROUTE_ZEROCOPY && !c.explore && !c.timed);
  const uint32_t wait = m.k.route[IBP_ROUTE_DRIVER].wait;
  double until;
  const uint32_t n =
      ibp__choose_quiet(&m.k, IBP_ROUTE_ZEROCOPY, m.now, 1000, &until);
  CHECK(wait > 0 && n > 0 && n <= wait);
}

/* What another class of the key did counts too: class B (held copies)
 * taking the batched route makes the key served, which ends class A's
 * early explorations -- A's kept assessment must not outlive that (an
 * early exploration of the staged path, its sample dropped, then B's
 * choice: A's next decision as a class with nothing kept makes it). */
static void decide_both(ibp_choose_class *k, ibp_choose_route *routes,
                        ibp_choose_route *calls, const ibp_route_cost *p,
                        double now, ibp_choice *kept, ibp_choice *fresh) {
  ibp_choose_class f = *k;
  ibp_choose_route fr[IBP_ROUTES], fc = *calls;
  memcpy(fr, routes, sizeof fr);
  f.route = fr;
  f.calls = &fc;
  f.assessed.valid = 0;
  ibp__choose_decide(&f, p, 15u, TIMING_NS, 1, 0, now, fresh);
  ibp__choose_decide(k, p, 15u, TIMING_NS, 1, 0, now, kept);
}

static void test_served_by_another_class(void) {
  static ibp_choose_route route[IBP_ROUTES], calls;
  ibp_choose_class a, b;
  ibp_route_cost pa[IBP_ROUTES] = {{0}}, pb[IBP_ROUTES] = {{0}};
  pa[IBP_ROUTE_DRIVER] =
      (ibp_route_cost){.cpu_ns = 2500, .gpu_ns = 80000, .engine = 1};
  pa[IBP_ROUTE_STAGED] = (ibp_route_cost){.cpu_ns = 4000,
                                          .gpu_ns = 120000,
                                          .sm_ns = 30000,
                                          .pipelined = 1,
                                          .engine = 1,
                                          .guessed = 1,
                                          .hope_gpu_ns = 40000,
                                          .hope_sm_ns = 5000};
  pb[IBP_ROUTE_DRIVER] = pa[IBP_ROUTE_DRIVER];
  pb[IBP_ROUTE_BATCHED] = (ibp_route_cost){
      .cpu_ns = 1000, .gpu_ns = 20000, .serial = 1, .copies = 64};
  ibp__choose_routes_init(route);
  memset(&calls, 0, sizeof calls);
  ibp__choose_class_init(&a, route);
  ibp__choose_class_init(&b, route);
  a.calls = b.calls = &calls;
  double now = 1e9;
  ibp_choice kept, fresh;
  decide_both(&a, route, &calls, pa, now, &kept, &fresh); /* the driver */
  ibp__choose_learn(&a, IBP_ROUTE_DRIVER, 0, 2500, 2500, 80000, 80000, now);
  ibp__choose_learn_calls(&calls, 2500, 2500, now);
  now += 1e5;
  decide_both(&a, route, &calls, pa, now, &kept, &fresh);
  CHECK(kept.explore && kept.route == IBP_ROUTE_STAGED);         /* early */
  ibp__choose_settle(&a, IBP_ROUTE_STAGED, a.explore_ns, -1, 0); /* dropped */
  now += 1e5;
  decide_both(&b, route, &calls, pb, now, &kept, &fresh);
  CHECK(kept.route == IBP_ROUTE_BATCHED && !kept.explore);
  now += 1e5;
  decide_both(&a, route, &calls, pa, now, &kept, &fresh);
  CHECK(same_choice(&kept, &fresh));
  CHECK(!kept.explore); /* the key is served: no early exploration */
}

static void test_classes(void) {
  CHECK(ibp__choose_class_index(1, 0, IBP_CLASS_SINGLE) == 0);
  CHECK(ibp__choose_class_index(4096, 1, IBP_CLASS_BATCHED) !=
        ibp__choose_class_index(4096, 0, IBP_CLASS_BATCHED));
  CHECK(ibp__choose_class_index(4096, 0, IBP_CLASS_SINGLE) ==
        ibp__choose_class_index(8191, 0, IBP_CLASS_SINGLE));
  CHECK(ibp__choose_class_index(4096, 0, IBP_CLASS_SINGLE) !=
        ibp__choose_class_index(8192, 0, IBP_CLASS_SINGLE));
  CHECK(ibp__choose_class_index(UINT64_MAX, 1, IBP_CLASS_APP_BATCH) <
        IBP_CHOOSE_CLASSES);
  /* every (size, busy, mode) its own class; the modes of one size and
   * busy one key */
  static unsigned char seen[IBP_CHOOSE_CLASSES];
  for (unsigned sz = 0; sz < IBP_CHOOSE_SIZES; sz++)
    for (int b = 0; b < 2; b++) {
      const unsigned key = ibp__choose_key(
          ibp__choose_class_index(1ull << sz, b, IBP_CLASS_SINGLE));
      CHECK(key < IBP_CHOOSE_KEYS);
      for (int mode = 0; mode < IBP_CLASS_MODES; mode++) {
        unsigned c =
            ibp__choose_class_index(1ull << sz, b, (ibp_class_mode)mode);
        CHECK(c < IBP_CHOOSE_CLASSES && !seen[c]);
        if (c < IBP_CHOOSE_CLASSES)
          seen[c] = 1;
        CHECK(ibp__choose_key(c) == key);
      }
    }
}

/* A route's one measurement of its own outranks what it inherits: the
 * driver's copies measure 2.5x their model (their set-up, under driver
 * calls and set-up 4x dearer), which a kernel route, unmeasured,
 * inherits (12.5 us of GPU for its 5) -- until its first timed copy
 * says it took its model: believed at its prior then (8 us, under the
 * driver's 10), it is taken from then on.  Believing the inheritance until
 * judged, it waited for a second exploration. */
static void test_own_outranks_inherited(void) {
  const ibp_route_cost prior[IBP_ROUTES] = {
      {.cpu_ns = 2500, .gpu_ns = 4000, .engine = 1},
      {.cpu_ns = 3000, .gpu_ns = 5000, .serial = 1},
      {.cpu_ns = 0}};
  ibp_route_cost truth[IBP_ROUTES];
  memcpy(truth, prior, sizeof truth);
  truth[IBP_ROUTE_DRIVER].gpu_ns = 10000;
  sim m;
  sim_init(&m);
  run o = simulate(&m, prior, truth, 400, IBP_ROUTE_ZEROCOPY, 1);
  fprintf(stderr,
          "own outranks inherited: settled at %ld, explored %ld, driver %ld\n",
          o.settled, o.explored, o.took[IBP_ROUTE_DRIVER]);
  CHECK(o.settled >= 0 && o.settled <= 120);
  /* one that measured dearer than its model is believed as it measured
   * (1.2x: 9 us, still taken; 1.6x: 11 us, left to the driver) */
  truth[IBP_ROUTE_ZEROCOPY].gpu_ns = 6000;
  sim_init(&m);
  o = simulate(&m, prior, truth, 400, IBP_ROUTE_ZEROCOPY, 1);
  CHECK(o.settled >= 0 && o.settled <= 120);
  truth[IBP_ROUTE_ZEROCOPY].gpu_ns = 8000;
  sim_init(&m);
  o = simulate(&m, prior, truth, 400, IBP_ROUTE_DRIVER, 1);
  fprintf(stderr, "own 1.6x: zero-copy taken %ld times\n",
          o.took[IBP_ROUTE_ZEROCOPY]);
  CHECK(o.settled == 0 && o.took[IBP_ROUTE_ZEROCOPY] <= 8);
  /* one copy measured cheaper than its model does not make it cheaper
   * than its model: a prior dearer than the driver as measured (11 us) is
   * not the choice on one copy at 0.5x, only once judged */
  ibp_route_cost dear[IBP_ROUTES];
  memcpy(dear, prior, sizeof dear);
  dear[IBP_ROUTE_ZEROCOPY].gpu_ns = 8000;
  truth[IBP_ROUTE_ZEROCOPY].gpu_ns = 4000;
  sim_init(&m);
  o = simulate(&m, dear, truth, 400, IBP_ROUTE_ZEROCOPY, 1);
  fprintf(stderr, "own 0.5x, prior dearer: settled at %ld, explored %ld\n",
          o.settled, o.explored);
  /* (taken at the first copy's 0.5x, it settled at copy 147: the second
   * exploration's wait, 16 copies, sooner) */
  CHECK(o.settled > 150 && o.explored >= 2);
}

/* A large copy is explored on its first eighth (at least 256 KiB) ending on
 * a tensor's end, where that is under a quarter of it; else whole. */
static void test_explore_part(void) {
  const uint64_t K = 1024, M = K * K;
  CHECK(ibp__choose_explore_part(0, 16 * M, 4 * K) == 2 * M);
  /* kv_offload's prefix restore: 240 blocks of 64 KiB */
  CHECK(ibp__choose_explore_part(0, 240 * 64 * K, 4 * K) == 480 * 4 * K);
  /* from inside a tensor: to the end of the tensor the share ends in */
  CHECK(ibp__choose_explore_part(100, 16 * M, 4 * K) == 513 * 4 * K - 100);
  CHECK(ibp__choose_explore_part(4 * K - 1, 16 * M, 4 * K) == 512 * 4 * K + 1);
  /* an eighth, at least 256 KiB, and under a quarter of the copy */
  CHECK(ibp__choose_explore_part(0, 4 * M + 4 * K, 4 * K) == 516 * K);
  CHECK(ibp__choose_explore_part(0, M + 4 * K, 4 * K) == 256 * K);
  CHECK(ibp__choose_explore_part(0, M, 4 * K) == 0);
  CHECK(ibp__choose_explore_part(0, 512 * K, 4 * K) == 0);
  /* tensors so large that the part would be a quarter or more */
  CHECK(ibp__choose_explore_part(0, 8 * M, M) == M);
  CHECK(ibp__choose_explore_part(0, 8 * M, 2 * M) == 0);
  CHECK(ibp__choose_explore_part(M / 2, 8 * M, 3 * M) == 0);
  CHECK(ibp__choose_explore_part(0, 64 * M, 3 * M) == 9 * M);
  CHECK(ibp__choose_explore_part(0, 16 * M, 0) == 0);
}

/* A choice not judged yet (the driver's copy, timed once) whose own timed
 * copy measured it clearly dearer than a route the class has judged
 * meanwhile (explored early against it) gives way to that route at once,
 * the one sample read at most IBP_CHOOSE_SEEN_MAX times its estimate: a
 * call of kv_blocks' entries under driver calls and set-up 4x dearer
 * (h100-pcie5) went to the driver on its prior after two explored batched
 * calls had judged them 2.5 us to its 5.2 seen.  Not where the sample
 * says it is nearly as cheap, nor for a route timed once. */
static void test_seen_choice_gives_way(void) {
  const ibp_route_cost prior[IBP_ROUTES] = {
      {.cpu_ns = 1000, .gpu_ns = 2200, .engine = 1, .copies = 64},
      {.cpu_ns = 0},
      {.cpu_ns = 0},
      {.cpu_ns = 700, .gpu_ns = 2200, .serial = 1, .copies = 64}};
  ibp_choice c;
  sim m;
  sim_init(&m);
  ibp__choose_decide(&m.k, prior, 9u, TIMING_NS, 1, 1, m.now, &c);
  CHECK(c.chosen == IBP_ROUTE_DRIVER); /* 2.2 us against 2.9 */
  /* the driver seen at 2.4x (read as 2x: 4.4 us), batched judged at its
   * model */
  ibp__choose_learn(&m.k, IBP_ROUTE_DRIVER, 64, 1000, 1000, 5280, 2200, m.now);
  learn_twice(&m, IBP_ROUTE_BATCHED, 64, 700, 700, 2200, 2200);
  ibp__choose_decide(&m.k, prior, 9u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(c.chosen == IBP_ROUTE_BATCHED);
  CHECK(fabs(c.choice_ns - c.est_ns[IBP_ROUTE_BATCHED]) < 1);
  /* seen at 1.34x (2.95 us): within the hysteresis of the batch's 2.9 */
  sim_init(&m);
  ibp__choose_learn(&m.k, IBP_ROUTE_DRIVER, 64, 1000, 1000, 2950, 2200, m.now);
  learn_twice(&m, IBP_ROUTE_BATCHED, 64, 700, 700, 2200, 2200);
  ibp__choose_decide(&m.k, prior, 9u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(c.chosen == IBP_ROUTE_DRIVER);
  /* the batch timed once: not judged */
  sim_init(&m);
  ibp__choose_learn(&m.k, IBP_ROUTE_DRIVER, 64, 1000, 1000, 5280, 2200, m.now);
  ibp__choose_learn(&m.k, IBP_ROUTE_BATCHED, 64, 700, 700, 2200, 2200, m.now);
  ibp__choose_decide(&m.k, prior, 9u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(c.chosen == IBP_ROUTE_DRIVER);
  /* the driver not timed at all: its prior stands */
  sim_init(&m);
  learn_twice(&m, IBP_ROUTE_BATCHED, 64, 700, 700, 2200, 2200);
  ibp__choose_decide(&m.k, prior, 9u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(c.chosen == IBP_ROUTE_DRIVER);
  /* single copies (a second sample costs one copy): the driver's one
   * sample, a 10x spike, is settled at once -- the class gives way, and
   * explores the driver on the next decision; its second sample at the
   * model, the driver is the choice again.  Not for the calls above
   * (their driver part is explored whole): they wait for the share. */
  const ibp_route_cost single[IBP_ROUTES] = {
      {.cpu_ns = 200, .gpu_ns = 1200, .engine = 1},
      {.cpu_ns = 0},
      {.cpu_ns = 0},
      {.cpu_ns = 300, .gpu_ns = 1200, .serial = 1}};
  sim_init(&m);
  learn_twice(&m, IBP_ROUTE_BATCHED, 0, 300, 300, 1200, 1200);
  ibp__choose_learn(&m.k, IBP_ROUTE_DRIVER, 0, 200, 200, 12000, 1200, m.now);
  ibp__choose_decide(&m.k, single, 9u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(c.chosen == IBP_ROUTE_BATCHED && c.explore &&
        c.route == IBP_ROUTE_DRIVER);
  ibp__choose_settle(&m.k, IBP_ROUTE_DRIVER, c.charged_ns, 0, 0);
  ibp__choose_learn(&m.k, IBP_ROUTE_DRIVER, 0, 200, 200, 1200, 1200, m.now);
  ibp__choose_decide(&m.k, single, 9u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(c.chosen == IBP_ROUTE_DRIVER);
  sim_init(&m);
  ibp__choose_learn(&m.k, IBP_ROUTE_DRIVER, 64, 1000, 1000, 5280, 2200, m.now);
  learn_twice(&m, IBP_ROUTE_BATCHED, 64, 700, 700, 2200, 2200);
  ibp__choose_decide(&m.k, prior, 9u, TIMING_NS, 1, 0, m.now, &c);
  CHECK(c.chosen == IBP_ROUTE_BATCHED && !c.explore);
}

int main(void) {
  test_classes();
  test_truth_is_prior();
  test_prior_too_kind();
  test_prior_too_harsh();
  test_exploration_bounded();
  test_batched_prior_too_kind();
  test_batched_prior_too_harsh();
  test_staged_too_harsh();
  test_driver_too_kind();
  test_batched_driver_cheaper();
  test_spike();
  test_aging();
  test_credit_capped();
  test_timing_paused();
  test_timing_capped();
  test_backoff_only_worse();
  test_modes_share();
  test_dead_band();
  test_model_varies();
  test_hysteresis();
  test_hysteresis_beyond();
  test_hysteresis_own();
  test_whole_no_band();
  test_bounds();
  test_exploration_costly();
  test_recovery();
  test_rules();
  test_untimable_inherits();
  test_unmeasured_inherit_driver();
  test_staged_link_third();
  test_driver_cheaper_while_staged();
  test_staged_windows_dear();
  test_driver_hoped_after_one_staged();
  test_staged_one_at_a_time();
  test_calls_shared();
  test_busy_twin();
  test_twin_disagrees();
  test_twin_no_hope();
  test_calls_dear_charged();
  test_unjudged_spaced();
  test_whole_open_timed();
  test_doubted_timed_again();
  test_staged_overlap_less();
  test_one_sample_not_enough();
  test_whole_median();
  test_whole_bound();
  test_explore_charged_own();
  test_guessed_explored_first();
  test_hopeful_explored_early();
  test_early_loan_bounded();
  test_hope_reads_setup();
  test_call_explored_whole();
  test_setup_probed();
  test_batch_sizes_apart();
  test_call_apart();
  test_own_work();
  test_idle_lead();
  test_untimed_engine();
  test_learning_off();
  test_dry();
  test_assessment_kept();
  test_served_by_another_class();
  test_quiet_run();
  test_quiet_until_wait();
  test_explore_part();
  test_own_outranks_inherited();
  test_seen_choice_gives_way();
  if (failures)
    fprintf(stderr, "test_choose: %d failures\n", failures);
  return failures ? 1 : 0;
}
