/* Mask/Bitval construction and validation. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"
#include "params_internal.h"

static ibp_status params_alloc(ibp_params *out, uint32_t R, uint32_t c) {
  if (!out)
    return IBP_ERR_INVALID_ARGUMENT;
  *out = (ibp_params){0};
  if (R == 0 || R > IBP_MAX_TENSOR_BYTES)
    return IBP_ERR_TENSOR_BYTES;
  if (!ibp_chunk_width_valid(c))
    return IBP_ERR_CHUNK_BYTES;
  out->mask = calloc(R, 1);
  out->bitval = calloc(R, 1);
  if (!out->mask || !out->bitval) {
    ibp_params_free(out);
    return IBP_ERR_NO_MEMORY;
  }
  out->tensor_bytes = R;
  out->chunk_bytes = c;
  return IBP_OK;
}

void ibp_params_free(ibp_params *p) {
  if (!p)
    return;
  free(p->mask);
  free(p->bitval);
  *p = (ibp_params){0};
}

ibp_status ibp_params_check(const ibp_params *p) {
  if (!p || !p->mask || !p->bitval)
    return IBP_ERR_INVALID_ARGUMENT;
  if (p->tensor_bytes == 0 || p->tensor_bytes > IBP_MAX_TENSOR_BYTES)
    return IBP_ERR_TENSOR_BYTES;
  if (!ibp_chunk_width_valid(p->chunk_bytes))
    return IBP_ERR_CHUNK_BYTES;
  for (uint32_t i = 0; i < p->tensor_bytes; i++)
    if (p->bitval[i] & ~p->mask[i])
      return IBP_ERR_INVALID_ARGUMENT;
  return IBP_OK;
}

ibp_status ibp_params_from_masks(uint32_t tensor_bytes, uint32_t chunk_bytes,
                                 const void *mask, const void *bitval,
                                 ibp_params *out) {
  if (!mask || !bitval)
    return out ? (*out = (ibp_params){0}, IBP_ERR_INVALID_ARGUMENT)
               : IBP_ERR_INVALID_ARGUMENT;
  ibp_status s = params_alloc(out, tensor_bytes, chunk_bytes);
  if (s != IBP_OK)
    return s;
  const uint8_t *m = mask, *v = bitval;
  for (uint32_t i = 0; i < tensor_bytes; i++) {
    out->mask[i] = m[i];
    out->bitval[i] = v[i] & m[i];
  }
  out->threshold = -1.0; /* not built from statistics */
  return IBP_OK;
}

/* Smallest number of agreeing tensors that makes a bit invariant at
 * threshold T: ceil(T*n), robust to T having been computed as K/n. */
uint64_t ibp__min_agree(double threshold, uint64_t n) {
  long double k = ceill((long double)threshold * (long double)n - 1e-6L);
  if (k < 1)
    return 1;
  return k > (long double)n ? n : (uint64_t)k;
}

ibp_status ibp__params_build_count(const ibp_bitstats *st, uint64_t min_agree,
                                   uint32_t chunk_bytes, ibp_params *out) {
  if (!st || !st->ones)
    return out ? (*out = (ibp_params){0}, IBP_ERR_INVALID_ARGUMENT)
               : IBP_ERR_INVALID_ARGUMENT;
  ibp_status s = params_alloc(out, st->tensor_bytes, chunk_bytes);
  if (s != IBP_OK)
    return s;
  const uint64_t n = st->tensors;
  /* a byte at a time, without branches: the search builds hundreds */
  for (uint32_t i = 0; i < st->tensor_bytes; i++) {
    const uint64_t *ones = st->ones + 8 * (size_t)i;
    unsigned m = 0, v = 0;
    for (unsigned b = 0; b < 8; b++) {
      const unsigned majority = ones[b] > n - ones[b];
      const uint64_t agree = majority ? ones[b] : n - ones[b];
      const unsigned in = agree >= min_agree;
      m |= in << b;
      v |= (in & majority) << b;
    }
    out->mask[i] = (uint8_t)m;
    out->bitval[i] = (uint8_t)v;
  }
  /* min_agree > n (an empty mask) still reports the top of the range */
  out->threshold = n && min_agree <= n ? (double)min_agree / (double)n : 1.0;
  return IBP_OK;
}

ibp_status ibp__agreement_make(const ibp_bitstats *st, ibp__agreement *out) {
  *out = (ibp__agreement){0};
  if (!st || !st->ones)
    return IBP_ERR_INVALID_ARGUMENT;
  const uint32_t R = st->tensor_bytes;
  const uint64_t n = st->tensors;
  out->agree = malloc(8 * (size_t)R * sizeof *out->agree);
  out->majority = malloc(R);
  if (!out->agree || !out->majority) {
    ibp__agreement_free(out);
    return IBP_ERR_NO_MEMORY;
  }
  out->tensor_bytes = R;
  out->tensors = n;
  for (uint32_t i = 0; i < R; i++) {
    unsigned v = 0;
    for (unsigned b = 0; b < 8; b++) {
      const uint64_t ones = st->ones[8 * (size_t)i + b];
      const unsigned majority = ones > n - ones;
      out->agree[8 * (size_t)i + b] = majority ? ones : n - ones;
      v |= majority << b;
    }
    out->majority[i] = (uint8_t)v;
  }
  return IBP_OK;
}

void ibp__agreement_free(ibp__agreement *a) {
  if (!a)
    return;
  free(a->agree);
  free(a->majority);
  *a = (ibp__agreement){0};
}

ibp_status ibp__params_build_agreement(const ibp__agreement *a,
                                       uint64_t min_agree, uint32_t chunk_bytes,
                                       ibp_params *out) {
  if (!a || !a->agree)
    return out ? (*out = (ibp_params){0}, IBP_ERR_INVALID_ARGUMENT)
               : IBP_ERR_INVALID_ARGUMENT;
  ibp_status s = params_alloc(out, a->tensor_bytes, chunk_bytes);
  if (s != IBP_OK)
    return s;
  const uint64_t n = a->tensors;
  for (uint32_t i = 0; i < a->tensor_bytes; i++) {
    const uint64_t *agree = a->agree + 8 * (size_t)i;
    unsigned m = 0;
    for (unsigned b = 0; b < 8; b++)
      m |= (unsigned)(agree[b] >= min_agree) << b;
    out->mask[i] = (uint8_t)m;
    out->bitval[i] = (uint8_t)(m & a->majority[i]);
  }
  /* as ibp__params_build_count */
  out->threshold = n && min_agree <= n ? (double)min_agree / (double)n : 1.0;
  return IBP_OK;
}

ibp_status ibp_params_build(const ibp_bitstats *st, double threshold,
                            uint32_t chunk_bytes, ibp_params *out) {
  if (out)
    *out = (ibp_params){0};
  if (!st || !st->ones || !out)
    return IBP_ERR_INVALID_ARGUMENT;
  if (!(threshold >= 0.5 && threshold <= 1.0))
    return IBP_ERR_THRESHOLD;
  if (st->tensors == 0)
    return IBP_ERR_NO_TENSORS;
  ibp_status s = ibp__params_build_count(
      st, ibp__min_agree(threshold, st->tensors), chunk_bytes, out);
  if (s == IBP_OK)
    out->threshold = threshold;
  return s;
}
