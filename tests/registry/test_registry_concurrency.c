/*
 * 8 reader threads look up random ranges while a writer adds and removes
 * regions.  Every result must be consistent: a FOUND region contains the
 * range, a STRADDLES region overlaps it without containing it, the record is
 * alive (its name encodes its base), and regions that are never removed are
 * always found.  At the end every record has been released exactly once.
 * Argument: seconds to run (default 1.5).
 */
#include "reg_check.h"
#include "registry/registry.h"

#include <pthread.h>
#include <time.h>

#define READERS 8
#define SLOTS 64
#define SLOT_SPACING ((uint64_t)8 << 20)
#define AREA ((uint64_t)0x200000000000ull)
#define STABLE_EVERY 8 /* slots 0, 8, 16, ... are never removed */

static _Atomic int stop;
static _Atomic long freed, errors, lookups;

static void on_release(ibp_region_rec *r, void *ctx) {
  (void)ctx;
  (void)r;
  atomic_fetch_add(&freed, 1);
}

static uint64_t slot_base(int s) {
  return AREA + (uint64_t)s * SLOT_SPACING;
}

static int check_record(const ibp_region_rec *r, uint64_t a, uint64_t len,
                        ibp_find_result res) {
  uint64_t last = a + len - 1, rlast = r->base + r->bytes - 1;
  if (strtoull(r->name, NULL, 16) != r->base || atomic_load(&r->refs) < 1)
    return 0;
  if (a > rlast || last < r->base)
    return 0;
  int inside = r->base <= a && last <= rlast;
  return res == IBP_FIND_FOUND ? inside : !inside;
}

static void *reader(void *arg) {
  uint64_t rng = 0x1234567ull + (uint64_t)(uintptr_t)arg * 7919;
  long n = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    int s = (int)reg_below(&rng, SLOTS);
    uint64_t a = slot_base(s) + reg_below(&rng, SLOT_SPACING);
    uint64_t len = 1 + reg_below(&rng, reg_below(&rng, 2) ? 64 : 8 << 20);
    if (s % STABLE_EVERY == 0) { /* stable: first 4 KiB always registered */
      a = slot_base(s) + reg_below(&rng, 4000);
      len = 1 + reg_below(&rng, 96);
    }
    ibp_region_rec *r;
    ibp_find_result res = ibp_registry_find((void *)(uintptr_t)a, len, &r);
    if (res != IBP_FIND_NONE && !check_record(r, a, len, res))
      atomic_fetch_add(&errors, 1);
    if (s % STABLE_EVERY == 0 && res != IBP_FIND_FOUND)
      atomic_fetch_add(&errors, 1);
    ibp_region_release(r);
    n++;
  }
  atomic_fetch_add(&lookups, n);
  return NULL;
}

static int64_t add_slot(int s, uint64_t bytes) {
  char name[32];
  snprintf(name, sizeof name, "%llx", (unsigned long long)slot_base(s));
  return ibp_registry_add((void *)(uintptr_t)slot_base(s), bytes, NULL, name);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.5;
  ibp_registry_init(on_release, NULL);
  int present[SLOTS] = {0};
  long added = 0, writes = 0;
  for (int s = 0; s < SLOTS; s += STABLE_EVERY) {
    CHECK(add_slot(s, 4096) >= 1);
    present[s] = 1;
    added++;
  }
  pthread_t th[READERS];
  for (long i = 0; i < READERS; i++)
    CHECK(pthread_create(&th[i], NULL, reader, (void *)i) == 0);
  uint64_t rng = 42;
  double end = now() + seconds;
  while (now() < end) {
    int s = (int)reg_below(&rng, SLOTS);
    if (s % STABLE_EVERY == 0)
      continue;
    if (present[s]) {
      CHECK(ibp_registry_remove((void *)(uintptr_t)slot_base(s)) == 0);
      present[s] = 0;
    } else {
      CHECK(add_slot(s, 1 + reg_below(&rng, SLOT_SPACING)) >= 1);
      present[s] = 1;
      added++;
    }
    writes++;
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < READERS; i++)
    pthread_join(th[i], NULL);
  ibp_registry_fini();
  printf("%ld writes, %ld lookups, %ld errors\n", writes, (long)lookups,
         (long)errors);
  CHECK(errors == 0);
  CHECK(freed == added);
  CHECK(writes > 10 && lookups > 1000); /* 9 threads on 2 cores here */
  return reg_result();
}
