/*
 * libFuzzer target: the tensor decoders against the reference decoder.
 * Input layout: tensor_input.h.  For the source bytes at the end of the
 * input it checks that
 *   - ibp_decompress_tensor and ibp_compressed_length agree with the
 *     reference decoder (OK with identical bytes/length, or IBP_ERR_CORRUPT);
 *   - ibp_decompress_tensor_part matches on a seeded sub-range when the
 *     stream is valid;
 *   - ibp_decompress_range over the source viewed as a region (seeded flag
 *     bits) decodes every tensor as the reference does;
 *   - ibp_decompress_range_clustered over the same region with K = 3 pairs
 *     (the input's, its complement, none) and seeded 2-bit cluster ids
 *     decodes each tensor with its pair as the reference does, and rejects
 *     the region when an id is 3 (docs/FORMAT.md §4).
 * Any disagreement aborts; ASan catches reads past the input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibp/codec.h"
#include "ref_codec.h"
#include "tensor_input.h"

#define FUZZ_ASSERT(cond)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "fuzz_tensor: %s:%d: %s\n", __FILE__, __LINE__, #cond);  \
      abort();                                                                 \
    }                                                                          \
  } while (0)

static void check_tensor(const tensor_input *in, const ibp_params *p,
                         const ref_params *rp, uint8_t *dst, uint8_t *want,
                         uint64_t *rng) {
  uint32_t R = in->R;
  size_t want_len = 0, got_len = 0;
  int ok;
  if (in->compressed)
    ok = ref_decode(rp, in->src, in->src_len, want, &want_len) == 0;
  else if ((ok = in->src_len >= R))
    memcpy(want, in->src, R);
  ibp_status st =
      ibp_decompress_tensor(p, in->src, in->src_len, in->compressed, dst);
  FUZZ_ASSERT(ok ? st == IBP_OK : st != IBP_OK);
  FUZZ_ASSERT(!in->compressed || ok || st == IBP_ERR_CORRUPT);
  if (ok)
    FUZZ_ASSERT(memcmp(dst, want, R) == 0);
  if (in->compressed) {
    st = ibp_compressed_length(p, in->src, in->src_len, &got_len);
    FUZZ_ASSERT(st == (ok ? IBP_OK : IBP_ERR_CORRUPT));
    FUZZ_ASSERT(!ok || got_len == want_len);
  }
  uint32_t off = (uint32_t)(tensor_input_next(rng) % (R + 1));
  uint32_t len = (uint32_t)(tensor_input_next(rng) % (R - off + 1));
  st = ibp_decompress_tensor_part(p, in->src, in->src_len, in->compressed, off,
                                  len, dst);
  FUZZ_ASSERT(!ok || st == IBP_OK);
  if (ok)
    FUZZ_ASSERT(memcmp(dst, want + off, len) == 0);
}

/* The source as a region of src_len / R slots plus a tail. */
static void check_region(const tensor_input *in, const ibp_params *p,
                         const ref_params *rp, uint64_t *rng) {
  uint32_t R = in->R;
  uint64_t bytes = in->src_len, n = bytes / R;
  uint8_t *flags = calloc((size_t)(n + 8) / 8, 1);
  uint8_t *want = malloc((size_t)bytes + 1), *dst = malloc((size_t)bytes + 1);
  FUZZ_ASSERT(flags && want && dst);
  for (uint64_t i = 0; i < n; i++)
    if (tensor_input_next(rng) & 1)
      ref_put_bit(flags, i, 1);
  int all_ok = 1;
  for (uint64_t i = 0; i < n; i++) {
    const uint8_t *slot = in->src + i * R;
    if (!ref_get_bit(flags, i))
      memcpy(want + i * R, slot, R);
    else if (ref_decode(rp, slot, R, want + i * R, NULL) != 0)
      all_ok = 0;
  }
  memcpy(want + n * R, in->src + n * R, (size_t)(bytes - n * R));
  ibp_region reg = {p, in->src, bytes, flags};
  ibp_status st = ibp_decompress_range(&reg, 0, bytes, dst);
  FUZZ_ASSERT(st == (all_ok ? IBP_OK : IBP_ERR_CORRUPT));
  if (all_ok)
    FUZZ_ASSERT(memcmp(dst, want, (size_t)bytes) == 0);
  free(flags);
  free(want);
  free(dst);
}

/* The same region with three pairs: the input's Mask/Bitval, the
 * complement Mask with seeded Bitval, and the empty Mask. */
static void check_clustered(const tensor_input *in, const ibp_params *p,
                            uint64_t *rng) {
  const uint32_t R = in->R, K = 3;
  uint64_t bytes = in->src_len, n = bytes / R;
  uint8_t *m = calloc(3 * (size_t)R, 1), *v = calloc(3 * (size_t)R, 1);
  uint8_t *ids = calloc((size_t)(n * 2 + 8) / 8, 1);
  uint8_t *flags = calloc((size_t)(n + 8) / 8, 1);
  uint8_t *want = malloc((size_t)bytes + 1), *dst = malloc((size_t)bytes + 1);
  FUZZ_ASSERT(m && v && ids && flags && want && dst);
  memcpy(m, p->mask, R);
  memcpy(v, p->bitval, R);
  for (uint32_t b = 0; b < R; b++) {
    m[R + b] = (uint8_t)~p->mask[b];
    v[R + b] = (uint8_t)tensor_input_next(rng) & m[R + b];
  }
  ibp_params ps[3] = {{0}, {0}, {0}};
  for (uint32_t k = 0; k < K; k++)
    FUZZ_ASSERT(ibp_params_from_masks(R, in->c, m + k * R, v + k * R, &ps[k]) ==
                IBP_OK);
  int all_ok = 1;
  for (uint64_t i = 0; i < n; i++) {
    const uint8_t *slot = in->src + i * R;
    uint32_t id = (uint32_t)(tensor_input_next(rng) & 3);
    int comp = (int)(tensor_input_next(rng) & 1);
    ref_put_bit(flags, i, comp);
    ref_put_bit(ids, 2 * i, (int)(id & 1));
    ref_put_bit(ids, 2 * i + 1, (int)(id >> 1));
    ref_params rp = {R, in->c, m + (id < K ? id : 0) * R,
                     v + (id < K ? id : 0) * R};
    if (id >= K)
      all_ok = 0;
    else if (!comp)
      memcpy(want + i * R, slot, R);
    else if (ref_decode(&rp, slot, R, want + i * R, NULL) != 0)
      all_ok = 0;
  }
  memcpy(want + n * R, in->src + n * R, (size_t)(bytes - n * R));
  ibp_region reg = {ps, in->src, bytes, flags};
  ibp_status st = ibp_decompress_range_clustered(&reg, ids, K, 0, bytes, dst);
  FUZZ_ASSERT(st == (all_ok ? IBP_OK : IBP_ERR_CORRUPT));
  if (all_ok)
    FUZZ_ASSERT(memcmp(dst, want, (size_t)bytes) == 0);
  for (uint32_t k = 0; k < K; k++)
    ibp_params_free(&ps[k]);
  free(m);
  free(v);
  free(ids);
  free(flags);
  free(want);
  free(dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tensor_input in;
  if (tensor_input_parse(data, size, &in) != 0)
    return 0;
  ibp_params p = {0};
  FUZZ_ASSERT(ibp_params_from_masks(in.R, in.c, in.mask, in.bitval, &p) ==
              IBP_OK);
  ref_params rp = {in.R, in.c, in.mask, in.bitval};
  uint8_t *dst = malloc(in.R), *want = malloc(in.R);
  FUZZ_ASSERT(dst && want);
  uint64_t rng = 0x51ED270B27F1A3C5ull ^ in.seed;
  check_tensor(&in, &p, &rp, dst, want, &rng);
  check_region(&in, &p, &rp, &rng);
  check_clustered(&in, &p, &rng);
  free(dst);
  free(want);
  ibp_params_free(&p);
  tensor_input_free(&in);
  return 0;
}
