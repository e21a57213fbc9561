/*
 * Add / find / remove against a brute-force list: random non-overlapping
 * ranges (tiny, small, multi-bucket, adjacent), queries at every boundary
 * (first/last byte, one before/after, straddling, gaps, huge spans).
 * Addresses are synthetic: the registry never dereferences them.
 */
#include "reg_check.h"
#include "registry/registry.h"

#include <string.h>

#define MAX_REGIONS 400
#define WINDOW_BASE ((uint64_t)0x100000000000ull)
#define WINDOW_BYTES ((uint64_t)16 << 30)

typedef struct model {
  uint64_t base[MAX_REGIONS], bytes[MAX_REGIONS];
  int64_t id[MAX_REGIONS];
  int n;
} model;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t random_size(void) {
  switch (reg_below(&rng, 4)) {
  case 0:
    return 1 + reg_below(&rng, 64);
  case 1:
    return 1 + reg_below(&rng, 8192);
  case 2:
    return 1 + reg_below(&rng, (uint64_t)8 << 20);
  default:
    return 1 + reg_below(&rng, (uint64_t)96 << 20);
  }
}

static int model_overlap(const model *m, uint64_t b, uint64_t n) {
  for (int i = 0; i < m->n; i++)
    if (b < m->base[i] + m->bytes[i] && m->base[i] < b + n)
      return 1;
  return 0;
}

/* Expected result and id of the lowest-based overlapping region. */
static ibp_find_result model_find(const model *m, uint64_t a, uint64_t len,
                                  int64_t *id) {
  uint64_t last = a + (len ? len - 1 : 0);
  int best = -1;
  for (int i = 0; i < m->n; i++)
    if (a <= m->base[i] + m->bytes[i] - 1 && m->base[i] <= last &&
        (best < 0 || m->base[i] < m->base[best]))
      best = i;
  *id = best < 0 ? 0 : m->id[best];
  if (best < 0)
    return IBP_FIND_NONE;
  if (m->base[best] <= a && last <= m->base[best] + m->bytes[best] - 1)
    return IBP_FIND_FOUND;
  return IBP_FIND_STRADDLES;
}

static void query(const model *m, uint64_t a, uint64_t len) {
  int64_t want_id;
  ibp_find_result want = model_find(m, a, len, &want_id);
  ibp_region_rec *r = (ibp_region_rec *)1;
  ibp_find_result got = ibp_registry_find((const void *)(uintptr_t)a, len, &r);
  CHECK(got == want);
  if (want == IBP_FIND_NONE) {
    CHECK(r == NULL);
  } else if (r != NULL) {
    CHECK((int64_t)r->id == want_id);
    ibp_region_release(r);
  } else {
    CHECK(r != NULL);
  }
}

static void add_random(model *m) {
  uint64_t b, n = random_size();
  if (m->n > 0 && reg_below(&rng, 4) == 0) {
    int j = (int)reg_below(&rng, (uint64_t)m->n); /* adjacent to a region */
    b = m->base[j] + m->bytes[j];
  } else {
    b = WINDOW_BASE + reg_below(&rng, WINDOW_BYTES);
  }
  int overlap = model_overlap(m, b, n);
  int64_t id = ibp_registry_add((void *)(uintptr_t)b, n, NULL, "r");
  if (overlap) {
    CHECK(id == IBP_REGISTRY_EOVERLAP);
    return;
  }
  CHECK(id >= 1);
  m->base[m->n] = b;
  m->bytes[m->n] = n;
  m->id[m->n++] = id;
}

static void boundary_queries(const model *m, int i) {
  uint64_t b = m->base[i], n = m->bytes[i], e = b + n;
  uint64_t lens[] = {0, 1, 2, 7, 4096, n, n + 1, (uint64_t)3 << 21, 1ull << 33};
  for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
    query(m, b, lens[k]);
    query(m, b - 1, lens[k]);
    query(m, e - 1, lens[k]);
    query(m, e, lens[k]);
    query(m, b + n / 2, lens[k]);
    if (lens[k] <= b)
      query(m, b - lens[k], lens[k]);
  }
}

static void random_queries(const model *m, int count) {
  for (int k = 0; k < count; k++) {
    uint64_t a = WINDOW_BASE - 4096 + reg_below(&rng, WINDOW_BYTES + 8192);
    query(m, a, reg_below(&rng, 2) ? reg_below(&rng, 64) : random_size());
  }
}

static void check_all(const model *m) {
  CHECK(ibp_registry_count() == (size_t)m->n);
  CHECK(ibp_registry_empty() == (m->n == 0));
  for (int i = 0; i < m->n; i++)
    boundary_queries(m, i);
  random_queries(m, 20000);
}

static void remove_some(model *m) {
  for (int i = 0; i < m->n;) {
    if (reg_below(&rng, 2)) {
      if (m->bytes[i] > 1) /* base+1 lies inside: not a region start */
        CHECK(ibp_registry_remove((void *)(uintptr_t)(m->base[i] + 1)) == -1);
      CHECK(ibp_registry_remove((void *)(uintptr_t)m->base[i]) == 0);
      m->n--;
      m->base[i] = m->base[m->n];
      m->bytes[i] = m->bytes[m->n];
      m->id[i] = m->id[m->n];
    } else {
      i++;
    }
  }
}

static void round_trip(int target) {
  model m;
  memset(&m, 0, sizeof m);
  ibp_registry_fini();
  check_all(&m);
  while (m.n < target)
    add_random(&m);
  check_all(&m);
  remove_some(&m);
  check_all(&m);
  while (m.n < target)
    add_random(&m);
  check_all(&m);
  while (m.n > 0) {
    CHECK(ibp_registry_remove((void *)(uintptr_t)m.base[m.n - 1]) == 0);
    m.n--;
  }
  check_all(&m);
}

static void edge_cases(void) {
  ibp_region_rec *r;
  ibp_registry_fini();
  CHECK(ibp_registry_add(NULL, 10, NULL, NULL) == IBP_REGISTRY_EINVAL);
  CHECK(ibp_registry_add((void *)4096, 0, NULL, NULL) == IBP_REGISTRY_EINVAL);
  CHECK(ibp_registry_add((void *)(UINTPTR_MAX - 10), 100, NULL, NULL) ==
        IBP_REGISTRY_EINVAL);
  CHECK(ibp_registry_add((void *)(UINTPTR_MAX - 99), 100, NULL, "top") >= 1);
  CHECK(ibp_registry_find((void *)(UINTPTR_MAX - 5), 1000, &r) ==
        IBP_FIND_FOUND);
  ibp_region_release(r);
  CHECK(ibp_registry_find((void *)(UINTPTR_MAX - 100), 2, &r) ==
        IBP_FIND_STRADDLES);
  ibp_region_release(r);
  CHECK(ibp_registry_remove((void *)4096) == -1);
  ibp_registry_fini();
  CHECK(ibp_registry_find((void *)(UINTPTR_MAX - 5), 1, &r) == IBP_FIND_NONE);
}

int main(void) {
  edge_cases();
  int targets[] = {1, 2, 10, 100, 300};
  for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++)
    for (int rep = 0; rep < 3; rep++)
      round_trip(targets[t]);
  ibp_registry_fini();
  return reg_result();
}
