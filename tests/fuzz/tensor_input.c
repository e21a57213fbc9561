/* fuzz_tensor input layout (see tensor_input.h). */
#include "tensor_input.h"

#include <stdlib.h>
#include <string.h>

uint64_t tensor_input_next(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static void derive_masks(tensor_input *in) {
  uint64_t st = 0x9E3779B97F4A7C15ull ^ in->seed;
  uint32_t R = in->R, last = (R - 1) / in->c * in->c;
  unsigned density = (unsigned)(tensor_input_next(&st) % 256);
  for (uint32_t b = 0; b < R; b++) {
    uint8_t m = 0;
    switch (in->mode) {
    case 1:
      m = 0xFF;
      break;
    case 3:
      m = 0x55;
      break;
    case 4:
      m = 0xAA;
      break;
    case 6:
      m = b >= last ? 0xFF : 0x00;
      break;
    case 5:
    case 7:
      for (int k = 0; k < 8; k++)
        if (tensor_input_next(&st) % 256 < density)
          m |= (uint8_t)(1u << k);
      break;
    default:
      break; /* 2: all zeros */
    }
    in->mask[b] = m;
    in->bitval[b] = in->mode == 7 ? m : (uint8_t)(tensor_input_next(&st) & m);
  }
}

int tensor_input_parse(const uint8_t *data, size_t size, tensor_input *in) {
  memset(in, 0, sizeof *in);
  if (size < TENSOR_INPUT_HEADER)
    return -1;
  in->c = 1u << (data[0] & 3);
  in->compressed = (data[0] >> 2) & 1;
  in->mode = (data[0] >> 3) & 7;
  in->R = 1 + (uint32_t)(data[1] | data[2] << 8) % TENSOR_INPUT_MAX_R;
  in->seed = (uint32_t)data[3] | (uint32_t)data[4] << 8 |
             (uint32_t)data[5] << 16 | (uint32_t)data[6] << 24;
  size_t pos = TENSOR_INPUT_HEADER;
  if (in->mode == 0 && size - pos < 2 * (size_t)in->R)
    return -1;
  in->mask = malloc(in->R);
  in->bitval = malloc(in->R);
  if (!in->mask || !in->bitval) {
    tensor_input_free(in);
    return -1;
  }
  if (in->mode == 0) {
    memcpy(in->mask, data + pos, in->R);
    for (uint32_t b = 0; b < in->R; b++)
      in->bitval[b] = data[pos + in->R + b] & in->mask[b];
    pos += 2 * (size_t)in->R;
  } else {
    derive_masks(in);
  }
  in->src = data + pos;
  in->src_len = size - pos;
  return 0;
}

void tensor_input_free(tensor_input *in) {
  free(in->mask);
  free(in->bitval);
  in->mask = in->bitval = NULL;
}

void tensor_input_header(uint32_t R, uint32_t c, int compressed, unsigned mode,
                         uint32_t seed, uint8_t *out) {
  unsigned lc = c == 1 ? 0 : c == 2 ? 1 : c == 4 ? 2 : 3;
  out[0] = (uint8_t)(lc | (compressed ? 4 : 0) | (mode & 7) << 3);
  out[1] = (uint8_t)((R - 1) & 0xFF);
  out[2] = (uint8_t)((R - 1) >> 8);
  for (int i = 0; i < 4; i++)
    out[3 + i] = (uint8_t)(seed >> (8 * i));
}
