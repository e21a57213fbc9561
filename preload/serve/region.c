/* Served regions: creation, host memory, device slot states
 * (serve/region.h). */
#include "serve/region.h"

#include <stdlib.h>

#include "config/config.h"

ibp_served_region *ibp__served_new(const ibp_region_rec *r) {
  ibp_served_region *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  /* config/ gives every rule a tensor size; 0 only from a hand-made rule */
  uint32_t R =
      r->rule.tensor_bytes ? r->rule.tensor_bytes : IBP_CONFIG_DEFAULT_TENSOR;
  s->geometry = (ibp_geometry){R, r->bytes / R};
  s->track.base = r->base;
  s->track.bytes = r->bytes;
  s->track.tensor_bytes = R;
  s->track.name = r->name;
  s->home_dev = -1;
  return s;
}

void ibp__served_free(ibp_served_region *s) {
  if (!s)
    return;
  ibp_clusters_free(&s->layout.clusters);
  free(s->layout.stages);
  free(s->layout.ids);
  free(s->layout.flags);
  free(s->layout.offsets);
  free(s->layout.lengths);
  free(s->layout.prefix);
  free(s->refresh.room);
  free(s);
}

int ibp__device_transition(ibp_served_region *s, unsigned dev,
                           ibp_device_state from, ibp_device_state to) {
  if (dev >= IBP_MAX_DEVICES)
    return 0;
  int expected = (int)from;
  return atomic_compare_exchange_strong_explicit(&s->dev[dev].state, &expected,
                                                 (int)to, memory_order_acq_rel,
                                                 memory_order_acquire);
}

ibp_device_state ibp__device_state(const ibp_served_region *s, unsigned dev) {
  if (dev >= IBP_MAX_DEVICES)
    return IBP_DEVICE_FAILED;
  return (ibp_device_state)atomic_load_explicit(
      (_Atomic int *)&s->dev[dev].state, memory_order_acquire);
}
