/*
 * e2e_rewritten: regions written between their copies in three ways, each
 * copy's bytes checked; the stats check (check_rewritten.cmake) wants the
 * first served and recompressed, the other two demoted as rewritten faster
 * than copied (docs/ARCHITECTURE.md, "No stale byte").
 *
 *   burst    every tensor rewritten once, with values of the same kind (a
 *            KV cache or a table refilled in one go, or a burst of writes
 *            that a gap in the tracking marks whole chunks of), then copied
 *            in pieces again and again: recompressed, served, never demoted
 *            -- however much of it one burst made dirty;
 *   staging  every tensor rewritten before it is copied, in 16 pieces (a
 *            data loader's pinned batch): demoted once its refreshes,
 *            each weighing the 32nds of the region it took up, outweigh a
 *            quarter of its copies -- refreshes counted one each would
 *            not;
 *   raw      every tensor rewritten once with random bytes, then copied
 *            again and again: the refresh cannot compress it, and it is
 *            demoted.
 *
 *   e2e_rewritten [rounds]
 *
 * rounds (argv[1], else IBP_E2E_COPIES, else 60): how many times each
 * region is copied after its writes, a few milliseconds apart (the worker
 * recompresses meanwhile).
 */
#include "e2e_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEV_BYTES ((size_t)8 << 20)
#define PIECES 4
#define STAGING_PIECES 16

enum { BURST, STAGING, RAW, NREGIONS };

static e2e_region regions[NREGIONS] = {
    [BURST] = {.name = "burst",
               .size = 2 << 20,
               .tensor = 1024,
               .alloc = E2E_HOST_ALLOC,
               .data = E2E_BF16},
    [STAGING] = {.name = "staging",
                 .size = (1 << 20) + (64 << 10),
                 .tensor = 4096,
                 .alloc = E2E_MALLOC_HOST,
                 .data = E2E_F32},
    [RAW] = {.name = "raw",
             .size = (3 << 19),
             .tensor = 4096,
             .alloc = E2E_MALLOC_HOST,
             .data = E2E_BF16},
};

static void pause_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* Copies all of g, in `pieces` copies on the legacy stream, and checks. */
static void copy_all(e2e_batch *b, const e2e_region *g, int pieces) {
  const cudaStream_t legacy = 0;
  const size_t piece =
      (g->size / pieces + g->tensor - 1) / g->tensor * g->tensor;
  for (size_t at = 0; at < g->size; at += piece) {
    const size_t n = g->size - at < piece ? g->size - at : piece;
    e2e_batch_copy(b, g, at, n, E2E_ASYNC_H2D, legacy);
  }
  e2e_batch_verify(b, &legacy, 1);
}

/* New bytes over all of g: values of its kind, or random ones. */
static void rewrite(e2e_region *g, e2e_rng *rng, int random) {
  if (random)
    e2e_rng_bytes(rng, g->mirror, g->size);
  else
    e2e_fill(rng, g->mirror, g->size, g->tensor, g->data);
  memcpy(g->host, g->mirror, g->size);
}

int main(int argc, char **argv) {
  e2e_begin("e2e_rewritten");
  const unsigned long rounds = argc > 1 ? strtoul(argv[1], NULL, 10)
                                        : e2e_env_count("IBP_E2E_COPIES", 60);
  e2e_regions_env(regions, NREGIONS);
  e2e_rng rng;
  e2e_rng_seed(&rng, e2e_seed(), 0);
  for (int g = 0; g < NREGIONS; g++) {
    e2e_region_alloc(&regions[g]);
    e2e_region_fill(&regions[g], &rng);
  }
  e2e_batch b;
  e2e_batch_init(&b, DEV_BYTES, 0);
  for (int g = 0; g < NREGIONS; g++)
    copy_all(&b, &regions[g], PIECES);

  rewrite(&regions[BURST], &rng, 0);
  rewrite(&regions[RAW], &rng, 1);
  for (unsigned long i = 0; i < rounds && !e2e_failures(); i++) {
    rewrite(&regions[STAGING], &rng, 0);
    for (int g = 0; g < NREGIONS; g++)
      copy_all(&b, &regions[g], g == STAGING ? STAGING_PIECES : PIECES);
    pause_ms(10); /* the worker recompresses meanwhile */
  }
  for (int g = 0; g < NREGIONS; g++) {
    e2e_region_check_host(&regions[g], "at the end");
    e2e_region_free(&regions[g]);
  }
  e2e_batch_destroy(&b);
  return e2e_end();
}
