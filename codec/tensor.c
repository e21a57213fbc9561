/* Public per-tensor API: argument checks, then the selected CPU path. */
#include "internal.h"

/* Cheap checks only: per-tensor calls are hot, full validation
 * (ibp_params_check) belongs to whoever built the params. */
static int params_usable(const ibp_params *p) {
  return p && p->mask && p->bitval && p->tensor_bytes > 0 &&
         p->tensor_bytes <= IBP_MAX_TENSOR_BYTES &&
         ibp_chunk_width_valid(p->chunk_bytes);
}

size_t ibp_compressed_size(const ibp_params *p, const void *tensor) {
  if (!params_usable(p) || !tensor)
    return 0;
  return ibp__pack()->stored_size(p, tensor);
}

size_t ibp_compress_tensor(const ibp_params *p, const void *tensor, void *slot,
                           int *compressed) {
  if (!params_usable(p) || !tensor || !slot) {
    if (compressed)
      *compressed = 0;
    return 0;
  }
  size_t len = ibp__pack()->compress(p, tensor, slot);
  if (compressed)
    *compressed = len < p->tensor_bytes;
  return len;
}

ibp_status ibp_decompress_tensor_part(const ibp_params *p, const void *src,
                                      size_t src_len, int compressed,
                                      uint32_t off, uint32_t len, void *dst) {
  if (!params_usable(p) || !src || (!dst && len))
    return IBP_ERR_INVALID_ARGUMENT;
  if (off > p->tensor_bytes || len > p->tensor_bytes - off)
    return IBP_ERR_RANGE;
  if (!compressed) {
    if (src_len < p->tensor_bytes)
      return IBP_ERR_CORRUPT;
    if (len)
      memcpy(dst, (const uint8_t *)src + off, len);
    return IBP_OK;
  }
  if (len == 0)
    return IBP_OK;
  return ibp__pack()->decode(p, src, src_len, off, len, dst, NULL);
}

ibp_status ibp_decompress_tensor(const ibp_params *p, const void *src,
                                 size_t src_len, int compressed, void *dst) {
  if (!params_usable(p))
    return IBP_ERR_INVALID_ARGUMENT;
  return ibp_decompress_tensor_part(p, src, src_len, compressed, 0,
                                    p->tensor_bytes, dst);
}

ibp_status ibp_compressed_length(const ibp_params *p, const void *src,
                                 size_t src_len, size_t *len) {
  if (!params_usable(p) || !src || !len)
    return IBP_ERR_INVALID_ARGUMENT;
  return ibp__pack()->length(p, src, src_len, len);
}
