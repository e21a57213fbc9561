/* The decompress kernel's input for `ibp calibrate` (calibrate_decode.h). */
#include "calibrate_decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth_data.h"

#define SEED 7

static int fail(char *err, size_t errlen, const char *what, ibp_status s) {
  snprintf(err, errlen, "the decode rate's test data: %s: %s", what,
           ibp_status_message(s));
  return -1;
}

int decode_case_build(decode_case *c, uint64_t bytes, uint32_t tensor_bytes,
                      char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  const uint64_t n = bytes / tensor_bytes;
  if (n == 0)
    return fail(err, errlen, "size", IBP_ERR_INVALID_ARGUMENT);
  c->tensor_bytes = tensor_bytes;
  c->tensors = n;
  c->original = malloc(n * tensor_bytes);
  uint8_t *slots = malloc(n * tensor_bytes);
  c->offsets = malloc((n + 1) * sizeof *c->offsets);
  c->lengths = malloc(n * sizeof *c->lengths);
  if (!c->original || !slots || !c->offsets || !c->lengths) {
    free(slots);
    return fail(err, errlen, "allocation", IBP_ERR_NO_MEMORY);
  }
  synth_floats(c->original, n * tensor_bytes, SEED, 0);
  /* libibp's defaults: chunk width and threshold searched */
  ibp_search_options opt = {.threshold = -1};
  ibp_status s =
      ibp_search(c->original, n, tensor_bytes, &opt, &c->params, NULL);
  const char *what = "ibp_search";
  if (s == IBP_OK) {
    c->flag_bytes = (ibp_region_flag_bytes(&c->params, n * tensor_bytes) + 4) &
                    ~(uint64_t)3;
    c->flags = calloc(1, c->flag_bytes);
    s = c->flags ? IBP_OK : IBP_ERR_NO_MEMORY;
  }
  ibp_region reg = {&c->params, slots, n * tensor_bytes, c->flags};
  if (s == IBP_OK &&
      (s = ibp_compress_region(&c->params, c->original, n * tensor_bytes, slots,
                               c->flags, 0, NULL)) != IBP_OK)
    what = "ibp_compress_region";
  if (s == IBP_OK && (s = ibp_region_pack_offsets(&reg, c->offsets)) != IBP_OK)
    what = "ibp_region_pack_offsets";
  if (s == IBP_OK) {
    c->packed = malloc(c->offsets[n] ? c->offsets[n] : 1);
    s = c->packed ? IBP_OK : IBP_ERR_NO_MEMORY;
    what = "allocation";
  }
  if (s == IBP_OK &&
      (s = ibp_region_pack(&reg, c->offsets, c->packed)) != IBP_OK)
    what = "ibp_region_pack";
  free(slots);
  if (s != IBP_OK) {
    decode_case_free(c);
    return fail(err, errlen, what, s);
  }
  for (uint64_t i = 0; i < n; i++)
    c->lengths[i] = (uint32_t)(c->offsets[i + 1] - c->offsets[i]);
  return 0;
}

void decode_case_free(decode_case *c) {
  if (c->params.mask)
    ibp_params_free(&c->params);
  free(c->original);
  free(c->flags);
  free(c->offsets);
  free(c->lengths);
  free(c->packed);
  memset(c, 0, sizeof *c);
}
