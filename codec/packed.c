/* The GPU layout of a compressed region (docs/FORMAT.md §3): the streams
 * of the compressed tensors back to back, in tensor order, with n+1
 * offsets; raw tensors and the tail take no bytes (the GPU reads them from
 * the original). */
#include <string.h>

#include "stage_internal.h"

static ibp_status check_region(const ibp_region *r, const uint8_t *ids,
                               uint32_t k) {
  if (!r || !r->params || !r->params->mask || !r->params->bitval)
    return IBP_ERR_INVALID_ARGUMENT;
  ibp_status s = ibp_clusters_check(r->params, k);
  if (s != IBP_OK)
    return s;
  const uint64_t n = r->bytes / r->params->tensor_bytes;
  if (n && (!r->slots || !r->flags || (k > 1 && !ids)))
    return IBP_ERR_INVALID_ARGUMENT;
  return IBP_OK;
}

static int compressed(const ibp_region *r, uint64_t i) {
  return (r->flags[i / 8] >> (i % 8)) & 1;
}

ibp_status ibp_region_pack_offsets(const ibp_region *r, uint64_t *offsets) {
  return ibp_region_pack_offsets_clustered(r, NULL, 1, offsets);
}

ibp_status ibp_region_pack_offsets_clustered(const ibp_region *r,
                                             const uint8_t *ids, uint32_t k,
                                             uint64_t *offsets) {
  return ibp_region_pack_offsets_staged(r, ids, k, NULL, offsets);
}

ibp_status ibp_region_pack_offsets_staged(const ibp_region *r,
                                          const uint8_t *ids, uint32_t k,
                                          const ibp_stage *stages,
                                          uint64_t *offsets) {
  ibp_status s = check_region(r, ids, k);
  if (s != IBP_OK || !offsets)
    return s != IBP_OK ? s : IBP_ERR_INVALID_ARGUMENT;
  const uint32_t R = r->params->tensor_bytes;
  const uint64_t n = r->bytes / R;
  uint64_t at = 0;
  for (uint64_t i = 0; i < n; i++) {
    offsets[i] = at;
    if (!compressed(r, i))
      continue;
    size_t len = 0;
    uint32_t id = ibp_cluster_id(ids, k, i);
    if (id >= k)
      return IBP_ERR_CORRUPT;
    s = ibp_compressed_length_staged(
        &r->params[id], stages ? &stages[id] : NULL, r->slots + i * R, R, &len);
    if (s != IBP_OK)
      return s;
    at += len;
  }
  offsets[n] = at;
  return IBP_OK;
}

ibp_status ibp_region_pack(const ibp_region *r, const uint64_t *offsets,
                           void *packed) {
  ibp_status s = check_region(r, NULL, 1); /* the first params suffice */
  if (s != IBP_OK || !offsets)
    return s != IBP_OK ? s : IBP_ERR_INVALID_ARGUMENT;
  const uint32_t R = r->params->tensor_bytes;
  const uint64_t n = r->bytes / R;
  if (offsets[n] && !packed)
    return IBP_ERR_INVALID_ARGUMENT;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t len = offsets[i + 1] - offsets[i];
    if (offsets[i + 1] < offsets[i] || len >= R ||
        (len != 0) != compressed(r, i))
      return IBP_ERR_INVALID_ARGUMENT;
    if (len)
      memcpy((uint8_t *)packed + offsets[i], r->slots + i * R, len);
  }
  return IBP_OK;
}
