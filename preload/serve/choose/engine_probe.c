/* The copy engine's set-up, measured with copies of libibp's own
 * (serve/choose/engine_probe.h). */
#include "serve/choose/engine_probe.h"

#include "base/clock.h"

/* The stream, destination and events, made on first use in slot's
 * context; 0 on failure. */
static int handles(const ibp_driver *d, ibp_device_memory *m) {
  if (!m->setup_stream &&
      (!d->cuStreamCreate ||
       d->cuStreamCreate(&m->setup_stream, CU_STREAM_NON_BLOCKING) !=
           CUDA_SUCCESS)) {
    m->setup_stream = NULL;
    return 0;
  }
  if (!m->setup_dst &&
      (!d->cuMemAlloc ||
       d->cuMemAlloc(&m->setup_dst, IBP_ENGINE_PROBE_BYTES) != CUDA_SUCCESS)) {
    m->setup_dst = 0;
    return 0;
  }
  for (int k = 0; k < 2; k++)
    if (!m->setup_ev[k] &&
        d->cuEventCreate(&m->setup_ev[k], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
      m->setup_ev[k] = NULL;
      return 0;
    }
  return 1;
}

/* Whether slot's context is the calling thread's (its handles are made
 * and used there). */
static int in_context(const ibp_driver *d, const ibp_device_slot *slot) {
  CUcontext c = NULL;
  return d->cuCtxGetCurrent && d->cuCtxGetCurrent(&c) == CUDA_SUCCESS && c &&
         c == slot->ctx;
}

void ibp__engine_probe_start(const ibp_driver *d, const ibp_profile *p,
                             ibp_device_slot *slot, ibp_engine_probe *e,
                             double now_ns) {
  if (e->failed || e->setup.probing || !e->src || !p || !d->cuMemcpyHtoDAsync ||
      !d->cuEventRecord || !d->cuEventElapsedTime)
    return;
  uint32_t fresh = 0;
  const ibp_choose_route *q = &e->setup.seen;
  const uint32_t n =
      q->samples < IBP_CHOOSE_WINDOW ? q->samples : IBP_CHOOSE_WINDOW;
  for (uint32_t i = 0; i < n; i++)
    fresh += !(q->seen_ns[i] < now_ns - IBP_CHOOSE_AGE_NS);
  if (fresh >= IBP_CHOOSE_MIN_SAMPLES || !in_context(d, slot))
    return;
  ibp_device_memory *m = &slot->mem;
  if (!handles(d, m)) {
    e->failed = 1;
    return;
  }
  const size_t bytes = e->src_bytes < IBP_ENGINE_PROBE_BYTES
                           ? e->src_bytes
                           : IBP_ENGINE_PROBE_BYTES;
  if (!bytes)
    return;
  if (d->cuEventRecord(m->setup_ev[0], m->setup_stream) != CUDA_SUCCESS) {
    e->failed = 1;
    return;
  }
  const double t0 = ibp__clock_ns();
  CUresult r =
      d->cuMemcpyHtoDAsync(m->setup_dst, e->src, bytes, m->setup_stream);
  const double t1 = ibp__clock_ns();
  if (r == CUDA_SUCCESS)
    r = d->cuEventRecord(m->setup_ev[1], m->setup_stream);
  if (r != CUDA_SUCCESS) {
    e->failed = 1;
    return;
  }
  e->call_ns = t1 - t0;
  e->model_ns = 1e3 * ibp_profile_ce_copy_us(p, bytes, 1);
  e->due_ns = t1 + 2 * e->model_ns;
  e->setup.probing = 1;
}

int ibp__engine_probe_read(const ibp_driver *d, ibp_device_slot *slot,
                           ibp_engine_probe *e, double now_ns) {
  if (!e->setup.probing || now_ns < e->due_ns)
    return 0;
  const ibp_device_memory *m = &slot->mem;
  float ms = 0;
  const CUresult q =
      m->setup_ev[0] && m->setup_ev[1]
          ? d->cuEventElapsedTime(&ms, m->setup_ev[0], m->setup_ev[1])
          : CUDA_ERROR_INVALID_HANDLE;
  if (q == CUDA_ERROR_NOT_READY)
    return 0;
  e->setup.probing = 0;
  if (q != CUDA_SUCCESS) {
    e->failed = 1;
    return 1;
  }
  /* the copy started once its call was made: the span less the call */
  const double gpu = 1e6 * ms - e->call_ns;
  ibp__choose_learn_setup(&e->setup, gpu > 0 ? gpu : 0, e->model_ns, now_ns);
  return 1;
}
