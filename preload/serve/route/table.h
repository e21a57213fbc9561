/*
 * The routes' table (table.c): one row per route of stats/routes.def, in
 * the chooser's order, each the ibp_route_ops of its file
 * (serve/route/route.h).
 */
#ifndef IBP_PRELOAD_ROUTE_TABLE_H
#define IBP_PRELOAD_ROUTE_TABLE_H

#include "serve/route/route.h"

/* Route r's operations (r < IBP_ROUTES). */
const ibp_route_ops *ibp__route(ibp_route r);

/* The priors of copy x: each route's that can serve it (feasible, and an
 * open prior), the others' both 0 -- a compact region's single copy is not
 * the driver's where a GPU route can serve it (its memory is the
 * shadow's); the decoding routes flagged as guesses where x's device's
 * decode terms are unmeasured (ibp__gate_flag_guesses).  Sets
 * x->driver_ns. */
void ibp__route_priors(ibp_route_copy *x, ibp_route_cost prior[IBP_ROUTES]);

/* Route r's lead on profile p, ns (ibp_route_ops.lead_ns). */
double ibp__route_lead_ns(ibp_route r, const ibp_profile *p);

/* The routes a single copy's own decision may time (a bit per route):
 * those submitted by their own file (ibp_route_ops.submit). */
unsigned ibp__route_timable(void);

/* What route r read over PCIe serving x (0: the driver's copy). */
uint64_t ibp__route_pcie_bytes(ibp_route r, const ibp_route_copy *x);

/* The stream route r's work on the link runs on for copy x (decided for
 * r): its link_stream, else the copy's own. */
CUstream ibp__route_link_stream(ibp_route r, ibp_route_copy *x);

/* Route r's set-up on profile p, ns (ibp_route_ops.setup_ns). */
double ibp__route_setup_ns(ibp_route r, const ibp_profile *p);

/* The route to take when `failed` cannot take the copy now
 * (IBP_SUBMIT_NOT_NOW): the one of smallest estimate among the others
 * open in est_ns[] (the decision's), the driver's copy first among
 * equals; IBP_ROUTE_DRIVER when none is. */
ibp_route ibp__route_next(const double est_ns[IBP_ROUTES], ibp_route failed);

#endif /* IBP_PRELOAD_ROUTE_TABLE_H */
