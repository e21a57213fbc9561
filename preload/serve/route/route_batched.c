/* The route BATCHED: a copy held for its stream's batched launch
 * (serve/route/route.h; serve/batch/batch.h, docs/ARCHITECTURE.md
 * "Batched launches").
 *
 *   prior  (the sum of its two terms: a batch's GPU work starts after its
 *          copies were held), for a batch of n copies, over the margin:
 *          CPU: runtime_call_us (a call of its own; 0 for an entry of the
 *               application's cuMemcpyBatchAsync) + ibp_hold_us
 *               + (driver_copy_call_us + driver_launch_call_us
 *                  + driver_call_us) / n  + the tracker's scan / n
 *          GPU: (ibp__gate_decode_us(n x host bytes, n x bytes, sms; the
 *                exponent stage's term where the region has it)
 *                + ce_setup_us) / n
 *
 * Open only to a copy that may be held (decided by its stream's batch,
 * which holds it: no submit here); explored while going alone is the
 * choice, it is the smallest batch alike the one expected
 * (ibp_route_cost.explores, .once_ns). */
#include "serve/route/route_batched.h"

#include "serve/route/batch_model.h"
#include "serve/route/route.h"

static int feasible(const ibp_route_copy *x) {
  return x->mode != IBP_CLASS_SINGLE;
}

/* An explored batched launch, where the class expects batches of
 * x->batch_n copies: the class's next copies join it (serve/batch/batch.c)
 * up to the smallest batch alike the one expected -- from a quarter of it
 * (IBP_CHOOSE_LIKE), doubling -- whose copies the model costs at most
 * IBP_BATCH_EXPLORE_SPREAD times as much each (per: the expected batch's,
 * ns): what it measures stands for the class's batches only where its
 * fixed costs are spread nearly as thin (kv_blocks' calls of 64 entries:
 * a quarter of one 2.0-2.6x each, half 1.1-1.4x) and where its time is
 * off the model as the expected batch's would be, wherever the profile is
 * wrong (ibp__batch_stands_for, serve/route/batch_model.c).  Returns its
 * copies, at least 1, and its cost before the margin in *ns. */
static uint32_t explored(const ibp_route_copy *x, int own_call, double per,
                         double *ns) {
  const uint32_t expected = (uint32_t)x->batch_n;
  uint32_t n = (uint32_t)((expected + IBP_CHOOSE_LIKE - 1) / IBP_CHOOSE_LIKE);
  for (n = n ? n : 1;; n = n * 2 < expected ? n * 2 : expected) {
    double cpu, gpu;
    ibp__route_batched_split(x->p, &x->g, n, own_call, &cpu, &gpu);
    *ns = n * (cpu + gpu) + x->scan_ns;
    if (n >= expected ||
        (*ns <= n * per * IBP_BATCH_EXPLORE_SPREAD &&
         ibp__batch_stands_for(x->p, &x->g, n, expected, own_call)))
      return n;
  }
}

static ibp_route_cost prior(ibp_route_copy *x) {
  const int own_call = !x->c->hold_only;
  double cpu, gpu, once;
  ibp__route_batched_split(x->p, &x->g, x->batch_n, own_call, &cpu, &gpu);
  const uint32_t explores =
      explored(x, own_call, cpu + gpu + x->scan_ns / x->batch_n, &once);
  ibp_route_cost c = {.cpu_ns = cpu / IBP_BATCH_MARGIN,
                      .gpu_ns = gpu / IBP_BATCH_MARGIN,
                      .serial = 1,
                      .once_ns = once / IBP_BATCH_MARGIN,
                      .copies = (uint32_t)x->batch_n,
                      .explores = explores};
  if (x->hope) {
    double hope_cpu;
    ibp__route_batched_split(x->hope, &x->g, x->batch_n, own_call, &hope_cpu,
                             &c.hope_gpu_ns);
    c.hope_gpu_ns /= IBP_BATCH_MARGIN;
  }
  c.cpu_ns += x->scan_ns / x->batch_n / IBP_BATCH_MARGIN;
  /* the hold and the scan are libibp's own, not driver calls */
  c.own_ns =
      (1e3 * x->p->ibp_hold_us + x->scan_ns / x->batch_n) / IBP_BATCH_MARGIN;
  x->batched_ns = cpu + gpu;
  return c;
}

/* the flush's job-list copy and launch */
static double lead_ns(const ibp_profile *p) {
  return 1e3 * (p->driver_copy_call_us + p->driver_launch_call_us);
}

/* its job list copy's set-up */
static double setup_ns(const ibp_profile *p) {
  return 1e3 * p->ce_setup_us;
}

const ibp_route_ops ibp__route_batched = {.what = "batched launch",
                                          .feasible = feasible,
                                          .prior = prior,
                                          .lead_ns = lead_ns,
                                          .setup_ns = setup_ns,
                                          .submit = NULL,
                                          .link_stream = NULL};
