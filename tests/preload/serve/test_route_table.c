/* The routes' table's own rules (serve/route/table.c), over stand-in
 * routes: a route that is not feasible, or whose prior is closed, is not
 * weighed; a compact region's copy is not the driver's where a GPU route
 * can serve it -- a single copy, and a copy its stream's batch holds
 * (alone it goes to the single copy's decision, never to the driver) --
 * while an entry of the application's batch keeps the driver, its one way
 * alone; the driver's copy where no GPU route can. */
#include <stdio.h>
#include <string.h>

#include "serve/choose/gate.h"
#include "serve/route/route.h"
#include "serve/route/table.h"

static int failures;

#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c);    \
      failures++;                                                              \
    }                                                                          \
  } while (0)

/* the gate's parts the table asks (serve/choose/gate.c): no hope, no
 * guesses to flag */
const ibp_profile *ibp__gate_hope(int dev) {
  (void)dev;
  return NULL;
}

void ibp__gate_flag_guesses(int dev, ibp_route_cost prior[IBP_ROUTES]) {
  (void)dev;
  (void)prior;
}

/* Stand-in routes: each feasible where `open_to` has its bit for the
 * copy's mode, at a fixed cost. */
static unsigned open_to[IBP_ROUTES];

#define STAND_IN(name, route, cpu, gpu)                                        \
  static int name##_feasible(const ibp_route_copy *x) {                        \
    return open_to[route] >> x->mode & 1u;                                     \
  }                                                                            \
  static ibp_route_cost name##_prior(ibp_route_copy *x) {                      \
    (void)x;                                                                   \
    return (ibp_route_cost){.cpu_ns = cpu, .gpu_ns = gpu};                     \
  }                                                                            \
  static double name##_ns(const ibp_profile *p) {                              \
    (void)p;                                                                   \
    return 100;                                                                \
  }                                                                            \
  const ibp_route_ops name = {.what = #name,                                   \
                              .feasible = name##_feasible,                     \
                              .prior = name##_prior,                           \
                              .lead_ns = name##_ns,                            \
                              .setup_ns = name##_ns}

STAND_IN(ibp__route_driver, IBP_ROUTE_DRIVER, 2000, 10000);
STAND_IN(ibp__route_zerocopy, IBP_ROUTE_ZEROCOPY, 2500, 20000);
STAND_IN(ibp__route_staged, IBP_ROUTE_STAGED, 4000, 9000);
STAND_IN(ibp__route_batched, IBP_ROUTE_BATCHED, 1400, 20000);

static int open_route(const ibp_route_cost prior[IBP_ROUTES], ibp_route r) {
  return prior[r].cpu_ns > 0 || prior[r].gpu_ns > 0;
}

/* The priors of a copy of `mode` from a compact region or not. */
static void priors(ibp_class_mode mode, int compact,
                   ibp_route_cost prior[IBP_ROUTES]) {
  static const ibp_profile p;
  static ibp_copy c;
  memset(&c, 0, sizeof c);
  c.bytes = 1 << 20;
  c.hold_only = mode == IBP_CLASS_APP_BATCH;
  ibp_route_copy x;
  memset(&x, 0, sizeof x);
  x.c = &c;
  x.p = &p;
  x.mode = mode;
  x.busy = 1; /* no lead added */
  x.compact = compact;
  ibp__route_priors(&x, prior);
  /* the driver's cost, closed or not (what a compact copy costs over it) */
  CHECK(x.driver_ns == 10000);
}

int main(void) {
  ibp_route_cost prior[IBP_ROUTES];
  /* as the routes are: staged single copies only, batched held ones */
  const unsigned single = 1u << IBP_CLASS_SINGLE,
                 held = 1u << IBP_CLASS_BATCHED | 1u << IBP_CLASS_APP_BATCH;
  open_to[IBP_ROUTE_DRIVER] = single | held;
  open_to[IBP_ROUTE_ZEROCOPY] = single | 1u << IBP_CLASS_BATCHED;
  open_to[IBP_ROUTE_STAGED] = single;
  open_to[IBP_ROUTE_BATCHED] = held;

  /* a region that is not compact: every feasible route weighed */
  priors(IBP_CLASS_SINGLE, 0, prior);
  CHECK(open_route(prior, IBP_ROUTE_DRIVER));
  CHECK(open_route(prior, IBP_ROUTE_ZEROCOPY));
  CHECK(open_route(prior, IBP_ROUTE_STAGED));
  CHECK(!open_route(prior, IBP_ROUTE_BATCHED));
  priors(IBP_CLASS_BATCHED, 0, prior);
  CHECK(open_route(prior, IBP_ROUTE_DRIVER));
  CHECK(!open_route(prior, IBP_ROUTE_STAGED));
  CHECK(open_route(prior, IBP_ROUTE_BATCHED));

  /* compact: not the driver's, single or held -- a batch class that
   * weighed the driver's copy it can never make held no copy of weights
   * the single copies served by the kernel (bench/ab's compact weights
   * line under h100-pcie5) */
  priors(IBP_CLASS_SINGLE, 1, prior);
  CHECK(!open_route(prior, IBP_ROUTE_DRIVER));
  CHECK(open_route(prior, IBP_ROUTE_ZEROCOPY));
  CHECK(open_route(prior, IBP_ROUTE_STAGED));
  priors(IBP_CLASS_BATCHED, 1, prior);
  CHECK(!open_route(prior, IBP_ROUTE_DRIVER));
  CHECK(open_route(prior, IBP_ROUTE_ZEROCOPY));
  CHECK(open_route(prior, IBP_ROUTE_BATCHED));
  /* an entry of the application's batch: alone, the driver's */
  priors(IBP_CLASS_APP_BATCH, 1, prior);
  CHECK(open_route(prior, IBP_ROUTE_DRIVER));
  CHECK(open_route(prior, IBP_ROUTE_BATCHED));

  /* compact, no GPU route alone: the driver's copy, reading the pages */
  open_to[IBP_ROUTE_ZEROCOPY] = 0;
  open_to[IBP_ROUTE_STAGED] = 0;
  priors(IBP_CLASS_SINGLE, 1, prior);
  CHECK(open_route(prior, IBP_ROUTE_DRIVER));
  priors(IBP_CLASS_BATCHED, 1, prior);
  CHECK(open_route(prior, IBP_ROUTE_DRIVER));

  /* the table's rows are the routes' files' */
  CHECK(ibp__route(IBP_ROUTE_STAGED) == &ibp__route_staged);

  if (failures)
    fprintf(stderr, "test_route_table: %d failures\n", failures);
  else
    printf("test_route_table: ok\n");
  return failures != 0;
}
