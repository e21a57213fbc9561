/* Test data and masks (see gen_data.h). */
#include "gen_data.h"

#include <stdlib.h>
#include <string.h>

#include "ref_codec.h"

const char *data_kind_name(data_kind k) {
  static const char *names[DATA_KINDS] = {"float", "flips", "sparse",
                                          "ints",  "const", "random"};
  return k < DATA_KINDS ? names[k] : "?";
}

const char *mask_kind_name(mask_kind k) {
  static const char *names[MASK_KINDS] = {
      "stats", "random", "ones", "zeros", "0x55", "0xAA", "last-chunk"};
  return k < MASK_KINDS ? names[k] : "?";
}

/* Writes len (<= 4) low bytes of v little-endian. */
static void put_le(uint8_t *dst, uint32_t v, uint32_t len) {
  for (uint32_t i = 0; i < len; i++)
    dst[i] = (uint8_t)(v >> (8 * i));
}

static void gen_float_tensor(rng *r, uint32_t R, int exp0, double neg,
                             uint8_t *t) {
  for (uint32_t b = 0; b < R; b += 4) {
    float mant = (float)(1.0 + rng_unit(r));
    int e = exp0 + (int)rng_below(r, 3);
    float f = mant * (float)(1u << e) / 1024.0f;
    if (rng_chance(r, neg))
      f = -f;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    put_le(t + b, bits, R - b < 4 ? R - b : 4);
  }
}

static void gen_ints_tensor(rng *r, uint32_t R, unsigned width, uint8_t *t) {
  for (uint32_t b = 0; b < R; b += 4) {
    uint32_t v = (uint32_t)(rng_next(r) & ((1ull << width) - 1));
    put_le(t + b, v, R - b < 4 ? R - b : 4);
  }
}

static void flip_bits(rng *r, uint32_t R, double rate, uint8_t *t) {
  uint64_t bits = 8 * (uint64_t)R;
  uint64_t flips = rng_below(r, (uint64_t)(2.0 * rate * (double)bits) + 2);
  for (uint64_t f = 0; f < flips; f++) {
    uint64_t k = rng_below(r, bits);
    ref_put_bit(t, k, !ref_get_bit(t, k));
  }
}

static void gen_sparse_tensor(rng *r, uint32_t R, double density, uint8_t *t) {
  memset(t, 0, R);
  for (uint32_t b = 0; b < R; b++)
    if (rng_chance(r, density))
      t[b] = (uint8_t)rng_next(r);
}

void gen_data(rng *r, data_kind kind, uint32_t R, uint64_t n, uint8_t *out) {
  int exp0 = (int)rng_below(r, 20);
  double neg = rng_chance(r, 0.5) ? 0.0 : rng_unit(r) * 0.5;
  double rate = 0.0005 + rng_unit(r) * 0.05;
  double density = 0.005 + rng_unit(r) * 0.2;
  unsigned width = 1 + (unsigned)rng_below(r, 24);
  for (uint64_t i = 0; i < n; i++) {
    uint8_t *t = out + i * R;
    switch (kind) {
    case DATA_FLOAT:
      gen_float_tensor(r, R, exp0, neg, t);
      break;
    case DATA_FLIPS:
    case DATA_CONST:
      if (i == 0) {
        rng_fill(r, t, R);
      } else {
        memcpy(t, out, R);
        if (kind == DATA_FLIPS)
          flip_bits(r, R, rate, t);
      }
      break;
    case DATA_SPARSE:
      gen_sparse_tensor(r, R, density, t);
      break;
    case DATA_INTS:
      gen_ints_tensor(r, R, width, t);
      break;
    default:
      rng_fill(r, t, R);
      break;
    }
  }
}

static void fill_pattern(uint8_t *mask, uint32_t R, uint8_t v) {
  memset(mask, v, R);
}

static void gen_random_mask(rng *r, uint32_t R, uint8_t *mask) {
  double density = rng_chance(r, 0.5) ? rng_unit(r) : 0.9 + 0.1 * rng_unit(r);
  memset(mask, 0, R);
  for (uint64_t k = 0; k < 8 * (uint64_t)R; k++)
    if (rng_chance(r, density))
      ref_put_bit(mask, k, 1);
}

static void gen_stats_mask(rng *r, uint32_t R, const uint8_t *data, uint64_t n,
                           uint8_t *mask, uint8_t *bitval) {
  uint64_t *ones = xcalloc(8 * (size_t)R * sizeof *ones);
  ref_count_bits(R, data, n, 0, 1, ones);
  double threshold = 0.5 + 0.5 * rng_unit(r);
  ref_masks_from_counts(R, ones, n, ref_need_double(threshold, n), mask,
                        bitval);
  free(ones);
}

/* Bitval inside the mask: usually the first tensor's bits (so chunks fit),
 * sometimes random. */
static void gen_bitval(rng *r, uint32_t R, const uint8_t *data,
                       const uint8_t *mask, uint8_t *bitval) {
  int from_data = rng_chance(r, 0.75);
  for (uint32_t b = 0; b < R; b++)
    bitval[b] = (uint8_t)((from_data ? data[b] : rng_next(r)) & mask[b]);
}

void gen_masks(rng *r, mask_kind kind, uint32_t R, uint32_t c,
               const uint8_t *data, uint64_t n, uint8_t *mask,
               uint8_t *bitval) {
  uint32_t last = (R - 1) / c * c;
  switch (kind) {
  case MASK_STATS:
    gen_stats_mask(r, R, data, n, mask, bitval);
    return;
  case MASK_RANDOM:
    gen_random_mask(r, R, mask);
    break;
  case MASK_ONES:
    fill_pattern(mask, R, 0xFF);
    break;
  case MASK_ZEROS:
    fill_pattern(mask, R, 0x00);
    break;
  case MASK_ALT55:
    fill_pattern(mask, R, 0x55);
    break;
  case MASK_ALTAA:
    fill_pattern(mask, R, 0xAA);
    break;
  default:
    fill_pattern(mask, R, 0x00);
    memset(mask + last, 0xFF, R - last);
    break;
  }
  gen_bitval(r, R, data, mask, bitval);
}
