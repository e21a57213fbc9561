/*
 * State machine legality, references (remove while held), release hook,
 * device slots, foreach order, ids.
 */
#include "reg_check.h"
#include "registry/registry.h"

#include <string.h>

static int hook_calls;
static uint64_t hook_last_id;

static void on_release(ibp_region_rec *r, void *ctx) {
  CHECK(ctx == &hook_calls);
  CHECK(atomic_load(&r->refs) == 0);
  hook_calls++;
  hook_last_id = r->id;
}

static void legality_table(void) {
  /* legal[from][to] */
  static const int legal[4][4] = {
      {0, 1, 0, 0}, /* candidate -> compressing */
      {0, 0, 1, 1}, /* compressing -> ready | degraded */
      {1, 0, 0, 1}, /* ready -> candidate | degraded */
      {0, 0, 0, 0}, /* degraded is terminal */
  };
  for (int f = 0; f < 4; f++)
    for (int t = 0; t < 4; t++)
      CHECK(ibp_region_transition_legal(f, t) == legal[f][t]);
  CHECK(!ibp_region_transition_legal(4, 0));
  CHECK(!ibp_region_transition_legal(0, 4));
  CHECK(strcmp(ibp_region_state_name(IBP_REGION_READY), "ready") == 0);
  CHECK(strcmp(ibp_region_state_name(9), "unknown") == 0);
}

static ibp_region_rec *find_one(uintptr_t a) {
  ibp_region_rec *r = NULL;
  CHECK(ibp_registry_find((void *)a, 1, &r) == IBP_FIND_FOUND);
  return r;
}

static void transitions(void) {
  ibp_region_rule rule = {.tensor_bytes = 4096,
                          .chunk = 4,
                          .threshold = 0.9,
                          .sample = 0.5,
                          .clusters = 2,
                          .track = 1};
  CHECK(ibp_registry_add((void *)0x10000, 1 << 20, &rule, "emb") >= 1);
  ibp_region_rec *r = find_one(0x10000);
  CHECK(r->rule.tensor_bytes == 4096 && r->rule.track == 1);
  CHECK(r->rule.clusters == 2);
  CHECK(strcmp(r->name, "emb") == 0);
  CHECK(ibp_region_state_get(r) == IBP_REGION_CANDIDATE);
  CHECK(!ibp_region_transition(r, IBP_REGION_CANDIDATE, IBP_REGION_READY));
  CHECK(!ibp_region_transition(r, IBP_REGION_READY, IBP_REGION_DEGRADED));
  CHECK(ibp_region_transition(r, IBP_REGION_CANDIDATE, IBP_REGION_COMPRESSING));
  CHECK(ibp_region_transition(r, IBP_REGION_COMPRESSING, IBP_REGION_READY));
  CHECK(ibp_region_transition(r, IBP_REGION_READY, IBP_REGION_CANDIDATE));
  CHECK(ibp_region_transition(r, IBP_REGION_CANDIDATE, IBP_REGION_COMPRESSING));
  CHECK(ibp_region_transition(r, IBP_REGION_COMPRESSING, IBP_REGION_DEGRADED));
  for (int t = 0; t < 4; t++)
    CHECK(!ibp_region_transition(r, IBP_REGION_DEGRADED, t));
  CHECK(ibp_region_state_get(r) == IBP_REGION_DEGRADED);

  ibp_region_release(r);
  CHECK(ibp_registry_remove((void *)0x10000) == 0);
}

static void held_across_remove(void) {
  hook_calls = 0;
  int64_t id = ibp_registry_add((void *)0x200000, 4096, NULL, "held");
  ibp_region_rec *r = find_one(0x200100);
  ibp_region_rec *r2 = find_one(0x200fff);
  CHECK(r == r2 && atomic_load(&r->refs) == 3);
  CHECK(ibp_registry_remove((void *)0x200000) == 0);
  CHECK(ibp_registry_remove((void *)0x200000) == -1);
  ibp_region_rec *none = (ibp_region_rec *)1;
  CHECK(ibp_registry_find((void *)0x200100, 1, &none) == IBP_FIND_NONE);
  CHECK(none == NULL);
  CHECK(hook_calls == 0);
  CHECK(atomic_load(&r->removed) == 1 && (int64_t)r->id == id);
  CHECK(strcmp(r->name, "held") == 0 && r->bytes == 4096);
  ibp_region_set_owner(r, &hook_calls); /* still writable */
  ibp_region_release(r2);
  CHECK(hook_calls == 0);
  ibp_region_release(r);
  CHECK(hook_calls == 1 && hook_last_id == (uint64_t)id);
  ibp_region_release(NULL);
}

static void fini_while_held(void) {
  hook_calls = 0;
  CHECK(ibp_registry_add((void *)0x400000, 10, NULL, NULL) >= 1);
  CHECK(ibp_registry_add((void *)0x500000, 10, NULL, NULL) >= 1);
  ibp_region_rec *r = find_one(0x400000);
  ibp_registry_fini();
  CHECK(hook_calls == 1 && ibp_registry_empty());
  CHECK(r->base == 0x400000);
  ibp_region_release(r);
  CHECK(hook_calls == 2);
}

static void count_visit(const ibp_region_rec *r, void *ctx) {
  uintptr_t *prev = ctx;
  CHECK(r->base > *prev);
  *prev = r->base;
}

static void foreach_and_ids(void) {
  uintptr_t bases[] = {0x9000000, 0x1000, 0x300000, 0x300010, 0x7000};
  int64_t prev_id = 0;
  for (size_t i = 0; i < 5; i++) {
    int64_t id = ibp_registry_add((void *)bases[i], 16, NULL,
                                  "a-very-long-name-that-is-longer-than-"
                                  "sixty-three-characters-for-sure-yes-it-is");
    CHECK(id > prev_id);
    prev_id = id;
  }
  CHECK(ibp_registry_add((void *)0x300008, 16, NULL, NULL) ==
        IBP_REGISTRY_EOVERLAP);
  uintptr_t prev = 0;
  CHECK(ibp_registry_foreach(count_visit, &prev) == 5);
  CHECK(prev == 0x9000000);
  ibp_region_rec *r = find_one(0x1000);
  CHECK(strlen(r->name) == IBP_REGISTRY_NAME_MAX - 1);
  ibp_region_release(r);
  ibp_registry_fini();
  CHECK(hook_calls == 2 + 5);
}

int main(void) {
  ibp_registry_init(on_release, &hook_calls);
  legality_table();
  transitions();
  held_across_remove();
  fini_while_held();
  foreach_and_ids();
  ibp_registry_reset_after_fork();
  CHECK(ibp_registry_add((void *)0x1000, 1, NULL, NULL) >= 1);
  ibp_registry_fini();
  ibp_registry_init(NULL, NULL);
  return reg_result();
}
