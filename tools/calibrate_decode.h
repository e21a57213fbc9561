/*
 * The decompress kernel's input for `ibp calibrate`'s decode rate
 * (docs/PROFILE.md, "Calibration"): synthetic trained weights
 * (synth_data.h) compressed as libibp compresses a region (ibp_search with
 * its defaults), in the packed layout the kernel reads (docs/FORMAT.md §3).
 * Host memory only; calibrate_gpu.c uploads it.
 */
#ifndef IBP_TOOLS_CALIBRATE_DECODE_H
#define IBP_TOOLS_CALIBRATE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "ibp/codec.h"

typedef struct decode_case {
  uint32_t tensor_bytes; /* R */
  uint64_t tensors;      /* n; the case is n * R bytes, no tail */
  uint8_t *original;     /* n * R bytes */
  ibp_params params;
  uint8_t *flags;      /* bit i: tensor i stored compressed */
  uint64_t flag_bytes; /* a multiple of 4 (the kernel reads words) */
  uint64_t *offsets;   /* n + 1: stream i at packed + offsets[i] */
  uint32_t *lengths;   /* n: its length (0: stored raw) */
  uint8_t *packed;     /* offsets[n] bytes (at least 1) */
} decode_case;

/* Builds a case of about `bytes` bytes (whole tensors) of R-byte tensors.
 * 0, or -1 with a one-line message in err. */
int decode_case_build(decode_case *c, uint64_t bytes, uint32_t tensor_bytes,
                      char *err, size_t errlen);
void decode_case_free(decode_case *c);

#endif /* IBP_TOOLS_CALIBRATE_DECODE_H */
