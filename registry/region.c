/* Region records: allocation, references, state machine. */
#include "registry_internal.h"

#include <stdlib.h>
#include <string.h>

static ibp_region_release_hook release_hook;
static void *release_ctx;

void ibp__region_set_hook(ibp_region_release_hook hook, void *ctx) {
  release_hook = hook;
  release_ctx = ctx;
}

ibp_region_rec *ibp__region_new(uint64_t id, uintptr_t base, uint64_t bytes,
                                const ibp_region_rule *rule, const char *name) {
  ibp_region_rec *r = calloc(1, sizeof *r);
  if (r == NULL)
    return NULL;
  r->id = id;
  r->base = base;
  r->bytes = bytes;
  if (rule != NULL)
    r->rule = *rule;
  if (name != NULL)
    strncpy(r->name, name, sizeof r->name - 1);
  atomic_init(&r->state, IBP_REGION_CANDIDATE);
  atomic_init(&r->refs, 1);
  return r;
}

void ibp_region_acquire(ibp_region_rec *r) {
  atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
}

void ibp_region_release(ibp_region_rec *r) {
  if (r == NULL)
    return;
  if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
    return;
  if (release_hook != NULL)
    release_hook(r, release_ctx);
  free(r);
}

int ibp_region_transition_legal(ibp_region_state from, ibp_region_state to) {
  switch (from) {
  case IBP_REGION_CANDIDATE:
    return to == IBP_REGION_COMPRESSING;
  case IBP_REGION_COMPRESSING:
    return to == IBP_REGION_READY || to == IBP_REGION_DEGRADED;
  case IBP_REGION_READY:
    return to == IBP_REGION_DEGRADED || to == IBP_REGION_CANDIDATE;
  default:
    return 0;
  }
}

int ibp_region_transition(ibp_region_rec *r, ibp_region_state from,
                          ibp_region_state to) {
  if (!ibp_region_transition_legal(from, to))
    return 0;
  int expected = (int)from;
  return atomic_compare_exchange_strong_explicit(&r->state, &expected, (int)to,
                                                 memory_order_acq_rel,
                                                 memory_order_acquire);
}

ibp_region_state ibp_region_state_get(const ibp_region_rec *r) {
  return (ibp_region_state)atomic_load_explicit((_Atomic int *)&r->state,
                                                memory_order_acquire);
}

const char *ibp_region_state_name(ibp_region_state s) {
  static const char *const names[] = {"candidate", "compressing", "ready",
                                      "degraded"};
  if ((unsigned)s >= sizeof names / sizeof names[0])
    return "unknown";
  return names[s];
}
