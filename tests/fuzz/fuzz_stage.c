/*
 * libFuzzer target: the exponent stage's CPU decoder (docs/FORMAT.md §9).
 * The input is a stage descriptor followed by a stream: byte 0 picks the
 * tensor size (1 .. 96 values of the descriptor's dtype), byte 1 the chunk
 * width (bits 0-1), whether Mask is the field alone (bit 2), the stream's
 * byte in a word for the device decoder (bits 3-4) and a shift of the
 * size (bits 5-7: up to 128 x, so that tensors of more than 16 segments
 * reach the device decoder's rounds before its last); then the descriptor
 * (ibp_stage_read) and the rest is a compressed tensor.  A malformed
 * descriptor or stream must give a status, never a read outside the input
 * or a write outside the tensor; what decodes must have the length
 * ibp_compressed_length_staged parses, re-encoding the decoded tensor
 * with the same stage must decode to the same bytes, and where the build
 * has the SIMT emulator (stage_device.h) the device decoder must decode
 * the stream to the same bytes as the CPU's, and a stream the CPU rejects
 * without writing outside the tensor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibp/stage.h"
#include "stage_device.h"

#define FUZZ_ASSERT(cond)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "fuzz_stage: %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
      abort();                                                                 \
    }                                                                          \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4)
    return 0;
  static const uint32_t widths[4] = {1, 2, 4, 8};
  const uint32_t dtype_bytes = data[3] == IBP_DTYPE_F32 ? 4 : 2;
  const uint32_t R = dtype_bytes * ((1u + data[0] % 96u) << (data[1] >> 5));
  const uint32_t c = widths[data[1] & 3];
  const int only_field = (data[1] >> 2) & 1;
  const unsigned lead = (data[1] >> 3) & 3u;
  ibp_stage st;
  size_t used = 0;
  if (ibp_stage_read(&st, data + 2, size - 2, R, &used) != IBP_OK)
    return 0;
  uint8_t *mask = calloc(R, 1), *bitval = calloc(R, 1);
  uint8_t *out = malloc(R), *slot = malloc(R), *again = malloc(R);
  ibp_params p;
  memset(&p, 0, sizeof p);
  if (!only_field) /* some invariant bits outside the field too */
    for (uint32_t b = 0; b < R; b++)
      mask[b] = (uint8_t)(0x11u << (b % 4));
  if (ibp_params_from_masks(R, c, mask, bitval, &p) == IBP_OK) {
    ibp_stage_fit_params(&st, &p);
    const uint8_t *src = data + 2 + used;
    size_t len = size - 2 - used, parsed = 0;
    /* an exact-size copy so that ASan sees reads past the stream */
    uint8_t *exact = malloc(len ? len : 1);
    memcpy(exact, src, len);
    ibp_status s = ibp_decompress_tensor_staged(&p, &st, exact, len, 1, out);
    ibp_status sl = ibp_compressed_length_staged(&p, &st, exact, len, &parsed);
    if (s == IBP_OK) {
      FUZZ_ASSERT(sl == IBP_OK && parsed <= len && parsed < R);
      FUZZ_ASSERT(stage_device_agrees(&p, &st, exact, parsed, lead, out) != 0);
      int compressed = 0;
      size_t n = ibp_compress_tensor_staged(&p, &st, out, slot, &compressed);
      FUZZ_ASSERT(n >= 1 && n <= R);
      FUZZ_ASSERT(ibp_decompress_tensor_staged(&p, &st, slot, n, compressed,
                                               again) == IBP_OK);
      FUZZ_ASSERT(memcmp(again, out, R) == 0);
    } else {
      FUZZ_ASSERT(stage_device_bounded(&p, &st, exact, len, lead) != 0);
    }
    free(exact);
  }
  ibp_params_free(&p);
  free(mask);
  free(bitval);
  free(out);
  free(slot);
  free(again);
  return 0;
}
