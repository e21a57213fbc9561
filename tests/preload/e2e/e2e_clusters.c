/*
 * e2e_clusters: regions whose tensors come from several bit populations,
 * so that libibp stores them with several Mask/Bitval pairs (clusters,
 * docs/FORMAT.md §4), every byte that arrives on the device checked.
 *
 *   e2e_clusters [copies]
 *
 * Three regions selected by IBP_REGIONS size= rules (clusters=auto, the
 * default): tensors of 1 KiB (cudaHostAlloc), of 4099 bytes (odd,
 * registered at an unaligned address) and of 20000 bytes (decoded by whole
 * blocks), each with a raw tail.  Each tensor is one of four kinds of
 * values -- float32 in [1, 2), small negative float32, bfloat16 pairs near
 * 1, small integers -- in runs of 1 to 5 tensors, and 2 % random bytes
 * (stored raw) and 1 % zeros.
 *
 *   1. fixed spans of every region (the whole region, its tensors only,
 *      from and to the middle of a tensor, into the tail, the tail alone,
 *      single tensors, 33 bytes at an odd offset, one byte, MiBs from
 *      inside a tensor) on every API and stream in turn;
 *   2. every tensor of a region copied on its own, asynchronously on one
 *      stream, then one synchronization (rows a batched launch may hold);
 *   3. random copies (e2e_random_copies);
 *   4. an eighth of each region's tensors rewritten with values of another
 *      kind (their best cluster changes), then the spans again at once
 *      (written tensors are read raw), whole regions in rounds while
 *      libibp recompresses them, each with the cluster that now stores it
 *      best, and the spans once more.
 *
 * The count of phase 3 is argv[1], else IBP_E2E_COPIES, else 200.  The
 * stats checks (check_clusters.cmake) want more than one cluster in every
 * region and the written tensors recompressed.
 */
#include "e2e_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NSTREAMS 4
#define DEV_BYTES ((size_t)16 << 20)
#define KINDS 4
#define REFRESH_ROUNDS 10

static e2e_region regions[] = {
    {.name = "k1024",
     .size = (2 << 20) + 777,
     .tensor = 1024,
     .alloc = E2E_HOST_ALLOC},
    {.name = "k4099",
     .size = (3 << 19) + 5,
     .tensor = 4099,
     .alloc = E2E_REGISTER,
     .misalign = 100},
    {.name = "k20000",
     .size = (3 << 20) + 123,
     .tensor = 20000,
     .alloc = E2E_MALLOC_HOST},
};
#define NREGIONS ((int)(sizeof regions / sizeof regions[0]))

static cudaStream_t streams[NSTREAMS];
static unsigned char *kinds[NREGIONS]; /* each tensor's kind; KINDS: raw */

static uint32_t word_of(e2e_rng *r, unsigned kind) {
  uint32_t x = (uint32_t)e2e_rng_next(r);
  switch (kind) {
  case 0: /* float32 in [1, 2) */
    return 0x3f800000u | (x & 0x007fffffu);
  case 1: /* small negative float32 */
    return 0xba000000u | (x & 0x00ffffffu);
  case 2: /* two bfloat16 near 1 */
    return 0x3f803f80u | (x & 0x007f007fu);
  default: /* four small integers */
    return x & 0x07070707u;
  }
}

/* Tensor bytes [0, len) of the given kind. */
static void fill_kind(e2e_rng *r, unsigned char *p, size_t len, unsigned kind) {
  for (size_t at = 0; at < len; at += 4) {
    uint32_t w = word_of(r, kind);
    memcpy(p + at, &w, len - at < 4 ? len - at : 4);
  }
}

/* Runs of 1 to 5 tensors of one kind; 2 % random, 1 % zeros. */
static void fill_region(e2e_region *g, int gi, e2e_rng *r) {
  const size_t T = g->tensor, n = g->size / T;
  kinds[gi] = malloc(n ? n : 1);
  E2E_SYS(kinds[gi] != NULL);
  unsigned kind = 0, left = 0;
  for (size_t i = 0; i < n; i++) {
    if (left == 0) {
      kind = (unsigned)e2e_rng_below(r, KINDS);
      left = 1 + (unsigned)e2e_rng_below(r, 5);
    }
    left--;
    uint64_t roll = e2e_rng_below(r, 100);
    kinds[gi][i] = roll < 2 ? KINDS : (unsigned char)kind;
    if (roll < 2)
      e2e_rng_bytes(r, g->mirror + i * T, T);
    else if (roll < 3)
      memset(g->mirror + i * T, 0, T);
    else
      fill_kind(r, g->mirror + i * T, T, kind);
  }
  e2e_rng_bytes(r, g->mirror + n * T, g->size - n * T); /* the tail */
  memcpy(g->host, g->mirror, g->size);
}

static e2e_api api_of(unsigned n) {
  return (e2e_api)(n % E2E_API_COUNT);
}

static cudaStream_t stream_of(unsigned n) {
  return streams[(n / E2E_API_COUNT) % NSTREAMS];
}

/* Copies [off, off+len) of g (clipped to it), verifying first when b is
 * full. */
static void copy(e2e_batch *b, const e2e_region *g, size_t off, size_t len) {
  static unsigned n;
  if (off >= g->size || len == 0)
    return;
  if (len > g->size - off)
    len = g->size - off;
  if (!e2e_batch_fits(b, len))
    e2e_batch_verify(b, streams, NSTREAMS);
  e2e_batch_copy(b, g, off, len, api_of(n), stream_of(n));
  n++;
}

/* Phase 1: spans that start and end inside tensors, sectors and the tail. */
static void fixed_spans(e2e_batch *b, const e2e_region *g) {
  const size_t T = g->tensor, body = g->size / T * T, n = g->size / T;
  copy(b, g, 0, g->size);                         /* whole, with the tail */
  copy(b, g, 0, body);                            /* tensors only */
  copy(b, g, T / 2 + 3, g->size - T - 5 - T / 2); /* mid to mid */
  copy(b, g, body - 3 * T - 7, g->size);          /* into the tail */
  copy(b, g, body, g->size - body);               /* the tail alone */
  copy(b, g, 0, T);                               /* single tensors */
  copy(b, g, n / 2 * T, T);
  copy(b, g, (n - 1) * T, T);
  copy(b, g, (n - 2) * T + 1, T); /* two halves */
  copy(b, g, 5 * T + 7, 33);      /* partial sectors */
  copy(b, g, 3 * T + T / 3, 1);   /* one byte */
  copy(b, g, 7 * T + 13, (1 << 20) + 17);
}

/* Phase 2: every tensor on its own, one stream, one synchronization. */
static void rows(e2e_batch *b, const e2e_region *g) {
  const size_t T = g->tensor, n = g->size / T;
  for (size_t i = 0; i < n; i++) {
    if (!e2e_batch_fits(b, T))
      e2e_batch_verify(b, &streams[1], 1);
    e2e_batch_copy(b, g, i * T, T, E2E_ASYNC_H2D, streams[1]);
  }
  e2e_batch_verify(b, &streams[1], 1);
}

/* Phase 4: an eighth of g's tensors (kinds 0 .. KINDS-1 only) rewritten
 * with the next kind. */
static void rewrite(e2e_region *g, int gi, e2e_rng *r) {
  const size_t T = g->tensor, n = g->size / T;
  for (size_t i = 0; i < n; i++) {
    if (kinds[gi][i] == KINDS || e2e_rng_below(r, 8) != 0)
      continue;
    kinds[gi][i] = (unsigned char)((kinds[gi][i] + 1) % KINDS);
    fill_kind(r, g->mirror + i * T, T, kinds[gi][i]);
    memcpy(g->host + i * T, g->mirror + i * T, T);
  }
}

static void pause_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

int main(int argc, char **argv) {
  e2e_begin("e2e_clusters");
  unsigned long copies = argc > 1 ? strtoul(argv[1], NULL, 10)
                                  : e2e_env_count("IBP_E2E_COPIES", 200);
  e2e_regions_env(regions, NREGIONS);
  e2e_rng rng;
  e2e_rng_seed(&rng, e2e_seed(), 0);
  streams[0] = 0; /* the legacy default stream */
  for (int i = 1; i < NSTREAMS; i++)
    E2E_CK(cudaStreamCreateWithFlags(&streams[i], i % 2 ? cudaStreamNonBlocking
                                                        : cudaStreamDefault));
  for (int g = 0; g < NREGIONS; g++) {
    e2e_region_alloc(&regions[g]);
    fill_region(&regions[g], g, &rng);
  }
  e2e_batch b;
  e2e_batch_init(&b, DEV_BYTES, 0);
  for (int g = 0; g < NREGIONS; g++)
    fixed_spans(&b, &regions[g]);
  e2e_batch_verify(&b, streams, NSTREAMS);
  for (int g = 0; g < NREGIONS; g++)
    rows(&b, &regions[g]);
  e2e_random_plan plan = {.regions = regions,
                          .nregions = NREGIONS,
                          .streams = streams,
                          .nstreams = NSTREAMS,
                          .copies = copies};
  e2e_random_copies(&b, &plan, &rng);
  for (int g = 0; g < NREGIONS; g++)
    rewrite(&regions[g], g, &rng);
  for (int g = 0; g < NREGIONS; g++) /* written tensors read raw */
    fixed_spans(&b, &regions[g]);
  e2e_batch_verify(&b, streams, NSTREAMS);
  for (int round = 0; round < REFRESH_ROUNDS && !e2e_failures(); round++) {
    pause_ms(50); /* the worker recompresses the written tensors */
    for (int g = 0; g < NREGIONS; g++)
      copy(&b, &regions[g], 0, regions[g].size);
    e2e_batch_verify(&b, streams, NSTREAMS);
  }
  for (int g = 0; g < NREGIONS; g++) /* ... and read compressed again */
    fixed_spans(&b, &regions[g]);
  e2e_batch_verify(&b, streams, NSTREAMS);
  for (int g = 0; g < NREGIONS; g++) {
    e2e_region_check_host(&regions[g], "at the end");
    e2e_region_free(&regions[g]);
    free(kinds[g]);
  }
  e2e_batch_destroy(&b);
  return e2e_end();
}
