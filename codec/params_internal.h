/* Count-based parameter construction shared by params.c and search.c. */
#ifndef IBP_PARAMS_INTERNAL_H
#define IBP_PARAMS_INTERNAL_H

#include "ibp/codec.h"

/* ceil(threshold * n), at least 1 and at most n. */
uint64_t ibp__min_agree(double threshold, uint64_t n);

/* Params whose invariant bits are those with >= min_agree agreeing tensors;
 * out->threshold = min_agree / tensors. */
ibp_status ibp__params_build_count(const ibp_bitstats *st, uint64_t min_agree,
                                   uint32_t chunk_bytes, ibp_params *out);

/* A statistics' bits read once for the many masks a search builds from
 * them (hundreds): per bit, how many tensors agree on its majority value;
 * per byte, the majority values (ties count as 0). */
typedef struct ibp__agreement {
  uint64_t *agree;   /* 8 R, bit b of byte i at 8 i + b */
  uint8_t *majority; /* R */
  uint32_t tensor_bytes;
  uint64_t tensors;
} ibp__agreement;

ibp_status ibp__agreement_make(const ibp_bitstats *st, ibp__agreement *out);
void ibp__agreement_free(ibp__agreement *a);

/* ibp__params_build_count's pair from the agreement of its statistics
 * (the same bytes; half its work a mask). */
ibp_status ibp__params_build_agreement(const ibp__agreement *a,
                                       uint64_t min_agree, uint32_t chunk_bytes,
                                       ibp_params *out);

#endif
