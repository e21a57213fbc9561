/*
 * Input layout of the fuzz_tensor target, shared with the corpus generator.
 *
 *   byte 0      bits 0-1: log2 chunk width; bit 2: "compressed" flag;
 *               bits 3-5: mask mode (below)
 *   bytes 1-2   R - 1, little-endian, taken modulo TENSOR_INPUT_MAX_R
 *   bytes 3-6   seed (little-endian) for the derived masks, the range picks
 *               and the region's flag bits
 *   mode 0      then R bytes Mask and R bytes Bitval (ANDed with Mask)
 *   rest        the source bytes handed to the decoders
 *
 * Mask modes: 0 explicit, 1 all ones, 2 all zeros, 3 0x55, 4 0xAA,
 * 5 random of random density, 6 ones only in the last chunk, 7 random
 * with Bitval = Mask (all invariant bits one).  Bitval is seeded random
 * within Mask unless stated.
 */
#ifndef IBP_FUZZ_TENSOR_INPUT_H
#define IBP_FUZZ_TENSOR_INPUT_H

#include <stddef.h>
#include <stdint.h>

#define TENSOR_INPUT_HEADER 7u
#define TENSOR_INPUT_MAX_R 8192u

typedef struct tensor_input {
  uint32_t R, c;
  int compressed;
  unsigned mode;
  uint32_t seed;
  uint8_t *mask, *bitval; /* R bytes each, malloc'd */
  const uint8_t *src;     /* points into the input; ends where it ends */
  size_t src_len;
} tensor_input;

/* Parses data; 0 on success (free with tensor_input_free), -1 when the input
 * is too short. */
int tensor_input_parse(const uint8_t *data, size_t size, tensor_input *in);
void tensor_input_free(tensor_input *in);

/* Writes the 7 header bytes for the given fields into out. */
void tensor_input_header(uint32_t R, uint32_t c, int compressed, unsigned mode,
                         uint32_t seed, uint8_t *out);

/* Small deterministic PRNG for the derived values (xorshift64*). */
uint64_t tensor_input_next(uint64_t *state);

#endif /* IBP_FUZZ_TENSOR_INPUT_H */
