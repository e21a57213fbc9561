/* The route ZEROCOPY: one launch of the decompress kernel on the caller's
 * stream, reading the packed streams over PCIe (serve/route/route.h).
 *
 *   prior  CPU: runtime_call_us + driver_launch_call_us + the tracker's sync
 *          GPU: ibp__gate_decode_us(host bytes, bytes, units, the SMs
 *               its grid is worth; the exponent stage's term where the
 *               region has it)
 *
 * Not for an entry of the application's batch (held or the driver's), nor
 * under IBP_PATH=staged. */
#include "base/base.h"
#include "base/driver.h"
#include "serve/route/route.h"

static int feasible(const ibp_route_copy *x) {
  return !x->c->hold_only && ibp__cfg.path != IBP_PATH_STAGED;
}

static ibp_route_cost prior(ibp_route_copy *x) {
  const ibp_profile *p = x->p;
  const ibp_gate_copy *g = &x->g;
  const unsigned sms = g->sms ? g->sms : 1;
  return (ibp_route_cost){
      .cpu_ns = 1e3 * p->runtime_call_us + 1e3 * p->driver_launch_call_us +
                x->sync_ns,
      .gpu_ns = 1e3 * ibp__gate_decode_us(p, g->stage, g->host_bytes, g->bytes,
                                          g->units, sms),
      .hope_gpu_ns =
          x->hope ? 1e3 * ibp__gate_decode_us(x->hope, g->stage, g->host_bytes,
                                              g->bytes, g->units, sms)
                  : 0,
      .own_ns = x->sync_ns};
}

static double lead_ns(const ibp_profile *p) {
  return 1e3 * p->driver_launch_call_us;
}

static int submit(ibp_route_copy *x, CUresult *err) {
  const ibp_device_slot *slot = x->slot;
  void *params[] = {&x->a};
  *err = ibp__driver()->cuLaunchKernel(
      slot->fn, x->plan.grid, 1, 1, x->plan.block, 1, 1, x->plan.dynamic_shared,
      x->c->stream, params, NULL);
  return *err == CUDA_SUCCESS ? IBP_SUBMIT_QUEUED : IBP_SUBMIT_FAILED;
}

/* its launch latency */
static double setup_ns(const ibp_profile *p) {
  return 1e3 * p->launch_latency_us;
}

/* the kernel's host reads: the stored bytes (its sectors' slack apart) */
static uint64_t pcie_bytes(const ibp_route_copy *x) {
  return x->g.host_bytes - IBP_ROUTE_SECTOR_SLACK;
}

const ibp_route_ops ibp__route_zerocopy = {.what = "kernel launch",
                                           .feasible = feasible,
                                           .prior = prior,
                                           .lead_ns = lead_ns,
                                           .setup_ns = setup_ns,
                                           .submit = submit,
                                           .link_stream = NULL,
                                           .pcie_bytes = pcie_bytes};
