/* The routes' table (serve/route/table.h): stats/routes.def's rows. */
#include "serve/route/table.h"

#include <string.h>

#define IBP_ROUTE(name, text, ops) extern const ibp_route_ops ops;
#include "stats/routes.def"
#undef IBP_ROUTE

static const ibp_route_ops *const table[IBP_ROUTES] = {
#define IBP_ROUTE(name, text, ops) [IBP_ROUTE_##name] = &ops,
#include "stats/routes.def"
#undef IBP_ROUTE
};

const ibp_route_ops *ibp__route(ibp_route r) {
  return table[r];
}

static int open_(const ibp_route_cost *c) {
  return c->cpu_ns > 0 || c->gpu_ns > 0;
}

void ibp__route_priors(ibp_route_copy *x, ibp_route_cost prior[IBP_ROUTES]) {
  memset(prior, 0, IBP_ROUTES * sizeof *prior);
  /* a hope only where the copy's decode is a guess (its region's stage
   * terms unmeasured count only for a region with the stage) */
  x->hope =
      ibp__gate_guessed(x->dev, x->g.stage) ? ibp__gate_hope(x->dev) : NULL;
  for (int r = 0; r < IBP_ROUTES; r++)
    if (table[r]->feasible(x))
      prior[r] = table[r]->prior(x);
  /* a single copy on an idle stream: the GPU waits for each route's calls
   * up to its first GPU work, and for libibp's own work before them --
   * beyond what the link still runs for other streams, which its work
   * would wait for anyway */
  if (x->mode == IBP_CLASS_SINGLE && !x->busy)
    for (int r = 0; r < IBP_ROUTES; r++)
      if (open_(&prior[r]) && !prior[r].serial) {
        const double lead = 1e3 * x->p->runtime_call_us +
                            table[r]->lead_ns(x->p) + prior[r].own_ns;
        prior[r].lead_ns =
            lead > x->link_ahead_ns ? lead - x->link_ahead_ns : 0;
      }
  x->driver_ns = ibp__choose_model_ns(&prior[IBP_ROUTE_DRIVER]);
  /* a compact region's memory is the shadow's (docs/ARCHITECTURE.md
   * "Compact regions"): a single copy of it is a GPU route's wherever one
   * can serve it, the driver's copy reading the pages only where none
   * can */
  int gpu_route = 0;
  for (int r = 0; r < IBP_ROUTES; r++)
    gpu_route |= r != IBP_ROUTE_DRIVER && open_(&prior[r]);
  if (x->compact && x->mode == IBP_CLASS_SINGLE && gpu_route)
    memset(&prior[IBP_ROUTE_DRIVER], 0, sizeof *prior);
  ibp__gate_flag_guesses(x->dev, x->g.stage, prior);
}

unsigned ibp__route_timable(void) {
  unsigned mask = 0;
  for (int r = 0; r < IBP_ROUTES; r++)
    mask |= table[r]->submit ? 1u << r : 0;
  return mask;
}

uint64_t ibp__route_pcie_bytes(ibp_route r, const ibp_route_copy *x) {
  return table[r]->pcie_bytes ? table[r]->pcie_bytes(x) : 0;
}

double ibp__route_lead_ns(ibp_route r, const ibp_profile *p) {
  return table[r]->lead_ns(p);
}

CUstream ibp__route_link_stream(ibp_route r, ibp_route_copy *x) {
  CUstream s = table[r]->link_stream ? table[r]->link_stream(x) : NULL;
  return s ? s : x->c->stream;
}

double ibp__route_setup_ns(ibp_route r, const ibp_profile *p) {
  return table[r]->setup_ns(p);
}

ibp_route ibp__route_next(const double est_ns[IBP_ROUTES], ibp_route failed) {
  ibp_route go = IBP_ROUTE_DRIVER;
  double best = 0;
  for (int r = 0; r < IBP_ROUTES; r++)
    if (r != (int)failed && est_ns[r] > 0 && (best == 0 || est_ns[r] < best)) {
      go = (ibp_route)r;
      best = est_ns[r];
    }
  return go;
}
