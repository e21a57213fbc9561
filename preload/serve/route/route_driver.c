/* The route DRIVER: the driver's own copy (serve/route/route.h).
 *
 *   prior  CPU: runtime_call_us + driver_copy_call_us (an entry of the
 *               application's batch: 0, its call is paid either way)
 *          GPU: ce_setup_us + bytes / ce_h2d_gbps
 *
 * Submitted here only when the copy is timed (libibp queues it between the
 * chooser's events); otherwise the application's own call runs. */
#include "base/driver.h"
#include "serve/route/route.h"

static int feasible(const ibp_route_copy *x) {
  (void)x; /* always: the one route that never fails open */
  return 1;
}

static ibp_route_cost prior(ibp_route_copy *x) {
  const ibp_profile *p = x->p;
  const double ce = 1e3 * ibp_profile_ce_copy_us(p, x->g.bytes, 1);
  if (x->c->hold_only) /* its call is paid either way */
    return (ibp_route_cost){.gpu_ns = ce, .engine = 1};
  return (ibp_route_cost){.cpu_ns = 1e3 * p->runtime_call_us +
                                    1e3 * p->driver_copy_call_us,
                          .gpu_ns = ce,
                          .engine = 1};
}

static double lead_ns(const ibp_profile *p) {
  return 1e3 * p->driver_copy_call_us;
}

static int submit(ibp_route_copy *x, CUresult *err) {
  const ibp_copy *c = x->c;
  *err = ibp__driver()->cuMemcpyHtoDAsync(c->dst, c->src, c->bytes, c->stream);
  return *err == CUDA_SUCCESS ? IBP_SUBMIT_QUEUED : IBP_SUBMIT_FAILED;
}

/* its copy engine's set-up */
static double setup_ns(const ibp_profile *p) {
  return 1e3 * p->ce_setup_us;
}

const ibp_route_ops ibp__route_driver = {.what = "driver's copy",
                                         .feasible = feasible,
                                         .prior = prior,
                                         .lead_ns = lead_ns,
                                         .setup_ns = setup_ns,
                                         .submit = submit,
                                         .link_stream = NULL};
