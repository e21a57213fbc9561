/* The route DRIVER: the driver's own copy (serve/route/route.h).
 *
 *   prior  CPU: runtime_call_us + driver_copy_call_us (an entry of the
 *               application's batch: 0, its call is paid either way)
 *          GPU: ce_setup_us + bytes / ce_h2d_gbps; an entry of the
 *               application's cuMemcpyBatchAsync of n entries: its share
 *               of the call's set-up instead (route_driver.h), as a launch
 *               of n copies -- what a copy of its own call measured is
 *               not what an entry costs (an H200 set up 64 KiB copies of
 *               their own calls in 2.3 us, entries of one call in ~0.75)
 *
 * Submitted here only when the copy is timed (libibp queues it between the
 * chooser's events); otherwise the application's own call runs. */
#include "serve/route/route_driver.h"

#include "base/driver.h"
#include "serve/route/route.h"

double ibp__route_driver_call_setup_ns(const ibp_profile *p, size_t entries) {
  const double n = entries ? (double)entries : 1;
  return 1e3 * (p->ce_setup_us + (n - 1) * p->ce_batch_setup_us);
}

/* An entry's share of its call's set-up (ns). */
static double entry_setup_ns(const ibp_profile *p, size_t entries) {
  return ibp__route_driver_call_setup_ns(p, entries) /
         (entries ? (double)entries : 1);
}

double ibp__route_driver_entry_ns(const ibp_profile *p, uint64_t bytes,
                                  size_t entries) {
  return entry_setup_ns(p, entries) +
         1e3 * (ibp_profile_ce_copy_us(p, bytes, 1) - p->ce_setup_us);
}

static int feasible(const ibp_route_copy *x) {
  (void)x; /* always: the one route that never fails open */
  return 1;
}

static ibp_route_cost prior(ibp_route_copy *x) {
  const ibp_profile *p = x->p;
  const double ce = 1e3 * ibp_profile_ce_copy_us(p, x->g.bytes, 1);
  const double setup = 1e3 * p->ce_setup_us;
  if (x->c->entries) /* its call is paid either way; set up in it */
    return (ibp_route_cost){
        .gpu_ns = ibp__route_driver_entry_ns(p, x->g.bytes, x->c->entries),
        .engine = 1,
        .copies =
            (uint32_t)(x->c->entries < UINT32_MAX ? x->c->entries : UINT32_MAX),
        .setup_ns = entry_setup_ns(p, x->c->entries),
        .probeable = x->c->probeable};
  if (x->c->hold_only) /* a row of a 2D copy: likewise paid */
    return (ibp_route_cost){.gpu_ns = ce, .engine = 1, .setup_ns = setup};
  return (ibp_route_cost){.cpu_ns = 1e3 * p->runtime_call_us +
                                    1e3 * p->driver_copy_call_us,
                          .gpu_ns = ce,
                          .engine = 1,
                          .setup_ns = setup};
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
