/* Whole regions: compress every tensor into its slot (threads split the
 * tensors in blocks of 8 so that each owns whole flag bytes), and decode
 * any byte range of the original from slots + flags. */
#include <stdlib.h>

#include "internal.h"

uint64_t ibp_region_flag_bytes(const ibp_params *p, uint64_t bytes) {
  if (!p || p->tensor_bytes == 0)
    return 0;
  return (bytes / p->tensor_bytes + 7) / 8;
}

typedef struct compress_job {
  const ibp_params *p;
  const uint8_t *src;
  uint8_t *slots;
  uint8_t *flags;
  uint64_t i0, i1;       /* tensors [i0, i1); i0 % 8 == 0 */
  uint64_t n_compressed; /* out */
  uint64_t stored_bytes; /* out */
} compress_job;

static void compress_task(void *arg) {
  compress_job *jb = arg;
  const ibp__pack_ops *pack = ibp__pack();
  const uint32_t R = jb->p->tensor_bytes;
  uint8_t bits = 0;
  for (uint64_t i = jb->i0; i < jb->i1; i++) {
    size_t len = pack->compress(jb->p, jb->src + i * R, jb->slots + i * R);
    jb->stored_bytes += len;
    if (len < R) {
      jb->n_compressed++;
      bits |= (uint8_t)(1u << (i % 8));
    }
    if (i % 8 == 7 || i + 1 == jb->i1) {
      jb->flags[i / 8] = bits;
      bits = 0;
    }
  }
}

static int overlaps(const void *a, const void *b, uint64_t len) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return len && x < y + len && y < x + len;
}

ibp_status ibp_compress_region(const ibp_params *p, const void *src,
                               uint64_t bytes, void *slots, uint8_t *flags,
                               unsigned threads, ibp_region_summary *summary) {
  ibp_status s = ibp_params_check(p);
  if (s != IBP_OK)
    return s;
  if ((!src || !slots) && bytes)
    return IBP_ERR_INVALID_ARGUMENT;
  if (overlaps(src, slots, bytes))
    return IBP_ERR_INVALID_ARGUMENT;
  const uint32_t R = p->tensor_bytes;
  const uint64_t n = bytes / R, tail = bytes % R;
  if (n && !flags)
    return IBP_ERR_INVALID_ARGUMENT;
  uint64_t blocks = (n + 7) / 8;
  unsigned t = ibp__threads(threads);
  if (t > blocks)
    t = blocks ? (unsigned)blocks : 1;
  compress_job *jobs = calloc(t, sizeof *jobs);
  if (!jobs)
    return IBP_ERR_NO_MEMORY;
  for (unsigned i = 0; i < t; i++) {
    uint64_t b0 = blocks * i / t, b1 = blocks * (i + 1) / t;
    jobs[i] = (compress_job){
        p, src, slots, flags, 8 * b0, 8 * b1 < n ? 8 * b1 : n, 0, 0};
  }
  s = ibp__run_parallel(compress_task, jobs, sizeof *jobs, t);
  ibp_region_summary sum = {n, tail, 0, tail, 2 * (uint64_t)R + blocks};
  for (unsigned i = 0; i < t; i++) {
    sum.tensors_compressed += jobs[i].n_compressed;
    sum.compressed_bytes += jobs[i].stored_bytes;
  }
  free(jobs);
  if (tail)
    memcpy((uint8_t *)slots + n * R, (const uint8_t *)src + n * R, tail);
  if (summary)
    *summary = sum;
  return s;
}

ibp_status ibp_decompress_range(const ibp_region *r, uint64_t off, uint64_t len,
                                void *dst) {
  if (!r || !r->params || (!r->slots && r->bytes) || (!dst && len))
    return IBP_ERR_INVALID_ARGUMENT;
  const ibp_params *p = r->params;
  if (!p->mask || !p->bitval || p->tensor_bytes == 0 ||
      p->tensor_bytes > IBP_MAX_TENSOR_BYTES ||
      !ibp_chunk_width_valid(p->chunk_bytes))
    return IBP_ERR_INVALID_ARGUMENT;
  if (off > r->bytes || len > r->bytes - off)
    return IBP_ERR_RANGE;
  const uint32_t R = p->tensor_bytes;
  const uint64_t body = r->bytes / R * R;
  if (body && !r->flags)
    return IBP_ERR_INVALID_ARGUMENT;
  uint8_t *out = dst;
  while (len && off < body) {
    uint64_t i = off / R;
    uint32_t in = (uint32_t)(off % R);
    uint32_t part = len < (uint64_t)(R - in) ? (uint32_t)len : R - in;
    int compressed = (r->flags[i / 8] >> (i % 8)) & 1;
    ibp_status s = ibp_decompress_tensor_part(p, r->slots + i * R, R,
                                              compressed, in, part, out);
    if (s != IBP_OK)
      return s;
    out += part;
    off += part;
    len -= part;
  }
  if (len) /* the raw tail */
    memcpy(out, r->slots + off, len);
  return IBP_OK;
}
