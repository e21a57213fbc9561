/*
 * Micro-benchmark (not a test): ns per ibp_registry_find for a miss with no
 * regions, a miss with 100 regions, and a hit.  Single thread.
 */
#include "registry/registry.h"

#include <stdio.h>
#include <time.h>

#define ITERS 20000000L

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double ns_per_lookup(uintptr_t addr, size_t len) {
  volatile long sink = 0;
  double t0 = now();
  for (long i = 0; i < ITERS; i++) {
    ibp_region_rec *r;
    uintptr_t a = addr + (uintptr_t)(i & 1023) * 64;
    sink += ibp_registry_find((void *)a, len, &r);
    ibp_region_release(r);
  }
  (void)sink;
  return (now() - t0) * 1e9 / (double)ITERS;
}

int main(void) {
  uintptr_t area = (uintptr_t)0x100000000000ull;
  printf("miss, no regions:    %6.1f ns\n", ns_per_lookup(area, 4096));
  for (int i = 0; i < 100; i++)
    ibp_registry_add((void *)(area + (uintptr_t)i * (64u << 20)), 32u << 20,
                     NULL, "bench");
  printf("miss, 100 regions:   %6.1f ns\n",
         ns_per_lookup(area + (48u << 20), 4096));
  printf("hit, 100 regions:    %6.1f ns\n",
         ns_per_lookup(area + (50u * 64u << 20) + 4096, 4096));
  ibp_registry_fini();
  return 0;
}
