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

#endif
