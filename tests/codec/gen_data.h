/*
 * Test data: tensors shaped like real pinned buffers (float rows, mostly
 * equal rows with random bit flips, sparse rows, small integers) plus random
 * and constant ones, and Mask/Bitval choices from realistic (statistics) to
 * adversarial (all ones, alternating bits, ones only in the last chunk).
 */
#ifndef IBP_TEST_GEN_DATA_H
#define IBP_TEST_GEN_DATA_H

#include <stdint.h>

#include "test_util.h"

typedef enum data_kind {
  DATA_FLOAT,  /* float32 values of similar magnitude, mostly one sign */
  DATA_FLIPS,  /* one base tensor with a few random bit flips per tensor */
  DATA_SPARSE, /* mostly zero bytes */
  DATA_INTS,   /* little-endian uint32 below a random power of two */
  DATA_CONST,  /* every tensor identical */
  DATA_RANDOM, /* uniform bytes */
  DATA_KINDS
} data_kind;

typedef enum mask_kind {
  MASK_STATS,      /* the format's rule over the data, random threshold */
  MASK_RANDOM,     /* random mask of random density */
  MASK_ONES,       /* every bit invariant */
  MASK_ZEROS,      /* no bit invariant */
  MASK_ALT55,      /* 0x55 in every byte */
  MASK_ALTAA,      /* 0xAA in every byte */
  MASK_LAST_CHUNK, /* ones only in the last (possibly partial) chunk */
  MASK_KINDS
} mask_kind;

const char *data_kind_name(data_kind k);
const char *mask_kind_name(mask_kind k);

/* Fills n tensors of R bytes. */
void gen_data(rng *r, data_kind kind, uint32_t R, uint64_t n, uint8_t *out);

/* Fills mask and bitval (R bytes each) for tensors of chunk width c; the
 * data (n >= 1 tensors) seeds bitval so that some chunks fit. */
void gen_masks(rng *r, mask_kind kind, uint32_t R, uint32_t c,
               const uint8_t *data, uint64_t n, uint8_t *mask, uint8_t *bitval);

#endif /* IBP_TEST_GEN_DATA_H */
