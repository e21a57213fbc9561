/* The route STAGED: the copy engine moves the packed streams into a ring
 * of device buffers, the kernel decodes them chunk by chunk
 * (serve/route/route.h; serve/staged/staged.h, docs/ARCHITECTURE.md
 * "Staged copies").
 *
 *   prior  CPU: runtime_call_us + k x driver_launch_call_us
 *               + w x (driver_copy_call_us + 4 x driver_call_us)
 *               + the tracker's sync
 *          GPU: the k chunks as a two-stage pipeline (planned by
 *               ibp__staged_plan: ibp_gate_staged.gpu_us)
 *
 * for k chunks, w of them with streams to move.  A single copy's route,
 * not under IBP_PATH=zerocopy; its prior is its plan, which fails (closed)
 * where the ring cannot serve the copy. */
#include "base/base.h"
#include "serve/route/route.h"

static int feasible(const ibp_route_copy *x) {
  return x->mode == IBP_CLASS_SINGLE && ibp__cfg.path != IBP_PATH_ZEROCOPY;
}

/* The calling thread's share (us): the runtime's call, a launch per chunk,
 * per window the copy, then an event, a wait, an event and the next use's
 * wait (the calls serve/staged/staged.c makes). */
static double cpu_us(const ibp_profile *p, const ibp_gate_staged *c) {
  const double k = c->chunks ? c->chunks : 1, w = c->windows;
  return p->runtime_call_us + k * p->driver_launch_call_us +
         w * (p->driver_copy_call_us + 4 * p->driver_call_us);
}

/* Its decodes' time at their hope over their time on the profile, for
 * decodes that read host_bytes from the host (the plan's: tensors read
 * raw, the tail; the rest from device memory):
 * the kernel's model on each (its plan's figures are the profile's); 0
 * where x has no hope. */
static double hope(const ibp_route_copy *x, uint64_t host_bytes) {
  const ibp_gate_copy *g = &x->g;
  const unsigned sms = g->sms ? g->sms : 1;
  if (!x->hope)
    return 0;
  const double now =
      ibp__gate_decode_us(x->p, g->stage, host_bytes, g->bytes, g->units, sms);
  return now > 0 ? ibp__gate_decode_us(x->hope, g->stage, host_bytes, g->bytes,
                                       g->units, sms) /
                       now
                 : 0;
}

/* Two stages: the copy engine's windows, what a timed copy measures (on
 * its copy stream: timed_stream), then the decodes, which the slot's
 * decode probe measures; back to back the slower one counts, one at a
 * time the decode's part that no window overlaps follows them. */
static ibp_route_cost prior(ibp_route_copy *x) {
  if (ibp__staged_plan(x->s, x->slot, x->ctx, x->dev, x->c, x->busy, &x->a,
                       &x->sp) != 0)
    return (ibp_route_cost){0};
  const ibp_gate_staged *g = &x->sp.gate;
  const double cpu = 1e3 * cpu_us(x->p, g) + x->sync_ns;
  if (g->link_us <= 0) /* no window: the decodes alone, reading the host */
    return (ibp_route_cost){.cpu_ns = cpu,
                            .gpu_ns = 1e3 * g->gpu_us,
                            .hope_gpu_ns =
                                1e3 * g->gpu_us * hope(x, g->host_bytes),
                            .own_ns = x->sync_ns};
  const double sm = g->sm_us > 0 ? 1e3 * g->sm_us : 0;
  return (ibp_route_cost){.cpu_ns = cpu,
                          .gpu_ns = 1e3 * g->link_us,
                          .sm_ns = sm,
                          .pipelined = g->pipelined,
                          .hope_gpu_ns = x->hope ? 1e3 * g->link_us : 0,
                          .hope_sm_ns = sm * hope(x, g->host_bytes),
                          .engine = 1,
                          .own_ns = x->sync_ns};
}

/* its first window's copy (the span starts after its buffer's wait) */
static double lead_ns(const ibp_profile *p) {
  return 1e3 * p->driver_copy_call_us;
}

static int submit(ibp_route_copy *x, CUresult *err) {
  ibp_device_slot *slot = x->slot;
  const ibp_staged_args sx = {slot,
                              x->dev,
                              slot->fn,
                              slot->sms,
                              &x->a,
                              &slot->staged_plan,
                              &slot->staged_args,
                              &x->sp,
                              x->start,
                              &x->started,
                              &x->aside_ns};
  *err = CUDA_SUCCESS;
  const int rc = ibp__staged_copy(x->s, x->ctx, x->c, &sx, err);
  if (rc == 1) /* no buffer free of other streams' work */
    return IBP_SUBMIT_NOT_NOW;
  if (rc == 2) /* ... for a later chunk */
    return IBP_SUBMIT_CUT;
  if (rc < 0) {
    if (*err == CUDA_SUCCESS)
      *err = CUDA_ERROR_UNKNOWN;
    return IBP_SUBMIT_FAILED;
  }
  return IBP_SUBMIT_QUEUED;
}

/* its first window copy's set-up */
static double setup_ns(const ibp_profile *p) {
  return 1e3 * p->ce_setup_us;
}

/* its copy stream, which moves the windows (none: the decodes read every
 * byte over PCIe, on the caller's stream) */
static CUstream link_stream(ibp_route_copy *x) {
  return x->sp.gate.windows
             ? ibp__staged_copy_stream(x->ctx, x->dev, x->c->stream)
             : NULL;
}

/* its windows and the tensors its decodes read raw from the host */
static uint64_t pcie_bytes(const ibp_route_copy *x) {
  return x->sp.gate.ce_bytes + x->sp.gate.host_bytes;
}

const ibp_route_ops ibp__route_staged = {.what = "staged copy",
                                         .feasible = feasible,
                                         .prior = prior,
                                         .lead_ns = lead_ns,
                                         .setup_ns = setup_ns,
                                         .submit = submit,
                                         .link_stream = link_stream,
                                         .pcie_bytes = pcie_bytes,
                                         .replans = 1};
