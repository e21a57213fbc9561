/*
 * Compressing a region straight into its packed layout (serve/compress.c,
 * docs/ARCHITECTURE.md "Preparing a region"): no buffer as large as the
 * region besides the shadow itself.
 *
 *   1. sizes: every tensor's stored length (ibp_compressed_size), its flag
 *      bit, whether it is all zero;
 *   2. the caller lays out the offsets and allocates the shadow;
 *   3. streams: every compressed tensor is compressed again into a small
 *      buffer of the thread's own and copied to its place.  A tensor whose
 *      length differs from pass 1 was written meanwhile: it is marked dirty
 *      (served raw from the original) and its place stays unused.
 *
 * Both passes run on ibp__pack_threads() threads at lower scheduling
 * priority (nice +10), each on a contiguous range of whole 32-tensor words.
 */
#ifndef IBP_PRELOAD_SERVE_PACK_H
#define IBP_PRELOAD_SERVE_PACK_H

#include <stdint.h>

#include "ibp/codec.h"
#include "track/track.h"

typedef struct ibp_pack {
  const ibp_params *params;
  const uint8_t *data; /* the region: n tensors of R bytes */
  uint64_t n;
  uint8_t *flags;     /* (n + 31) / 32 * 4 bytes: bit i = i stored compressed */
  uint32_t *lengths;  /* n: stored stream length, 0 = raw */
  uint64_t *offsets;  /* n + 1: laid out by the caller after pass 1 */
  uint8_t *shadow;    /* pass 2 writes here */
  ibp_tracked *track; /* tensors found rewritten are marked dirty here */
  /* pass 3: bit i set while tensor i's stream is not written yet; each
   * 32-tensor word is cleared (release) once its streams are in place.
   * NULL: none. */
  _Atomic uint32_t *busy;
  const _Atomic int *stop;        /* nonzero: pass 3 stops (NULL: never) */
  _Atomic uint64_t first_word_ns; /* CLOCK_MONOTONIC when the first word
                                     was cleared; 0 before */
  /* results of pass 1 */
  uint64_t compressed_tensors, zero_tensors;
  /* results of pass 2: tensors rewritten between the passes */
  uint64_t rewritten;
} ibp_pack;

/* Threads the passes use: IBP_THREADS, else a quarter of the CPUs (>= 1). */
unsigned ibp__pack_threads(void);

/* Pass 1.  Returns 0, or -1 (out of memory, no thread). */
int ibp__pack_sizes(ibp_pack *p);

/* Pass 3 (after offsets and shadow are set).  Returns 0, or -1 (out of
 * memory, or stopped: some tensors stay busy). */
int ibp__pack_streams(ibp_pack *p);

#endif /* IBP_PRELOAD_SERVE_PACK_H */
