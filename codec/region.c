/* Whole regions: compress every tensor into its slot with the cluster
 * that stores it in the fewest bytes (threads split the tensors in blocks
 * of 8 so that each owns whole flag bytes and whole id bytes), and decode
 * any byte range of the original from slots + flags + ids. */
#include <stdlib.h>

#include "stage_internal.h"

uint64_t ibp_region_flag_bytes(const ibp_params *p, uint64_t bytes) {
  if (!p || p->tensor_bytes == 0)
    return 0;
  return (bytes / p->tensor_bytes + 7) / 8;
}

typedef struct compress_job {
  const ibp_params *p;     /* k params */
  const ibp_stage *stages; /* k stages or NULL */
  uint32_t k;
  const uint8_t *src;
  uint8_t *slots;
  uint8_t *flags;
  uint8_t *ids;          /* NULL when k == 1 */
  uint64_t i0, i1;       /* tensors [i0, i1); i0 % 8 == 0 */
  uint64_t n_compressed; /* out */
  uint64_t n_staged;     /* out: of those, in a cluster with a stage on */
  uint64_t stored_bytes; /* out */
  int failed;            /* out: no scratch memory */
} compress_job;

/* Writes tensor i's id; ids of a block of 8 tensors fill whole bytes. */
static void put_id(uint8_t *ids, uint32_t bits, uint64_t i, uint32_t id) {
  uint64_t at = i * bits;
  uint8_t m = (uint8_t)(((1u << bits) - 1) << (at % 8));
  ids[at / 8] = (uint8_t)((ids[at / 8] & ~m) | (id << (at % 8)));
}

/* Compresses (or, without slots, only measures) tensors [i0, i1). */
static void compress_task(void *arg) {
  compress_job *jb = arg;
  const ibp__pack_ops *pack = ibp__pack();
  const uint32_t R = jb->p->tensor_bytes;
  const uint32_t bits = ibp_cluster_id_bits(jb->k);
  uint8_t flag = 0;
  uint8_t *scratch = jb->stages ? malloc(R) : NULL;
  if (jb->stages && !scratch) {
    jb->failed = 1;
    return;
  }
  for (uint64_t i = jb->i0; i < jb->i1; i++) {
    const uint8_t *t = jb->src + i * R;
    size_t len = 0;
    uint32_t id = 0; /* one cluster: no need to measure before compressing */
    if (jb->k > 1 || !jb->slots)
      id = ibp__best_cluster_staged(pack, jb->p, jb->stages, jb->k, t, scratch,
                                    &len);
    if (jb->slots)
      len = ibp__staged_compress(pack, &jb->p[id],
                                 jb->stages ? &jb->stages[id] : NULL, t,
                                 jb->slots + i * R, scratch);
    if (jb->ids)
      put_id(jb->ids, bits, i, id);
    jb->stored_bytes += len;
    if (len < R) {
      jb->n_compressed++;
      jb->n_staged += jb->stages && !ibp__stage_off(&jb->stages[id]);
      flag |= (uint8_t)(1u << (i % 8));
    }
    if (jb->flags && (i % 8 == 7 || i + 1 == jb->i1)) {
      jb->flags[i / 8] = flag;
      flag = 0;
    }
  }
  free(scratch);
}

static int overlaps(const void *a, const void *b, uint64_t len) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return len && x < y + len && y < x + len;
}

/* Runs compress_task over the region's tensors on `threads` threads;
 * slots, flags and ids may all be NULL (measure only). */
static ibp_status run_region(const ibp_params *p, const ibp_stage *stages,
                             uint32_t k, const void *src, uint64_t bytes,
                             void *slots, uint8_t *flags, uint8_t *ids,
                             unsigned threads, ibp_region_summary *summary) {
  const uint32_t R = p->tensor_bytes;
  const uint64_t n = bytes / R, tail = bytes % R;
  uint64_t blocks = (n + 7) / 8;
  unsigned t = ibp__threads(threads);
  if (t > blocks)
    t = blocks ? (unsigned)blocks : 1;
  compress_job *jobs = calloc(t, sizeof *jobs);
  if (!jobs)
    return IBP_ERR_NO_MEMORY;
  if (ids && n) /* unused bits of the last id byte are 0 */
    ids[ibp_cluster_id_bytes(k, n) - 1] = 0;
  for (unsigned i = 0; i < t; i++) {
    uint64_t b0 = blocks * i / t, b1 = blocks * (i + 1) / t;
    jobs[i] = (compress_job){
        p, stages, k, src, slots, flags, ids, 8 * b0, 8 * b1 < n ? 8 * b1 : n,
        0, 0,      0, 0};
  }
  ibp_status s = ibp__run_parallel(compress_task, jobs, sizeof *jobs, t);
  ibp_region_summary sum = {
      .tensors = n,
      .tail_bytes = tail,
      .compressed_bytes = tail,
      .metadata_bytes = ibp_cluster_metadata_bytes(k, R, n) +
                        (stages ? ibp_stage_metadata_bytes(stages, k) : 0)};
  for (unsigned i = 0; i < t; i++) {
    if (jobs[i].failed && s == IBP_OK)
      s = IBP_ERR_NO_MEMORY;
    sum.tensors_compressed += jobs[i].n_compressed;
    sum.tensors_staged += jobs[i].n_staged;
    sum.compressed_bytes += jobs[i].stored_bytes;
  }
  free(jobs);
  if (tail && slots)
    memcpy((uint8_t *)slots + n * R, (const uint8_t *)src + n * R, tail);
  if (summary)
    *summary = sum;
  return s;
}

/* NULL when no stage is on (the plain IBP path), else stages; a stage
 * that does not fit its params is IBP_ERR_INVALID_ARGUMENT. */
static ibp_status stages_in_use(const ibp_params *p, const ibp_stage *stages,
                                uint32_t k, const ibp_stage **out) {
  *out = NULL;
  for (uint32_t c = 0; stages && c < k; c++) {
    if (ibp__stage_off(&stages[c]))
      continue;
    ibp_stage probe;
    if (ibp_stage_init(&probe, stages[c].kind, stages[c].dtype,
                       stages[c].segment_log2, p->tensor_bytes) != IBP_OK ||
        ibp_stage_check_params(&stages[c], &p[c]) != IBP_OK)
      return IBP_ERR_INVALID_ARGUMENT;
    *out = stages;
  }
  return IBP_OK;
}

ibp_status ibp_compress_region_clustered(const ibp_params *p, uint32_t k,
                                         const void *src, uint64_t bytes,
                                         void *slots, uint8_t *flags,
                                         uint8_t *ids, unsigned threads,
                                         ibp_region_summary *summary) {
  return ibp_compress_region_staged(p, NULL, k, src, bytes, slots, flags, ids,
                                    threads, summary);
}

ibp_status ibp_compress_region_staged(const ibp_params *p,
                                      const ibp_stage *stages, uint32_t k,
                                      const void *src, uint64_t bytes,
                                      void *slots, uint8_t *flags, uint8_t *ids,
                                      unsigned threads,
                                      ibp_region_summary *summary) {
  ibp_status s = ibp_clusters_check(p, k);
  if (s != IBP_OK)
    return s;
  if ((!src || !slots) && bytes)
    return IBP_ERR_INVALID_ARGUMENT;
  if (overlaps(src, slots, bytes))
    return IBP_ERR_INVALID_ARGUMENT;
  const uint64_t n = bytes / p->tensor_bytes;
  if (n && (!flags || (k > 1 && !ids)))
    return IBP_ERR_INVALID_ARGUMENT;
  const ibp_stage *on;
  s = stages_in_use(p, stages, k, &on);
  if (s != IBP_OK)
    return s;
  return run_region(p, on, k, src, bytes, slots, flags, k > 1 ? ids : NULL,
                    threads, summary);
}

ibp_status ibp_measure_region_clustered(const ibp_params *p, uint32_t k,
                                        const void *src, uint64_t bytes,
                                        unsigned threads,
                                        ibp_region_summary *summary) {
  return ibp_measure_region_staged(p, NULL, k, src, bytes, threads, summary);
}

ibp_status ibp_measure_region_staged(const ibp_params *p,
                                     const ibp_stage *stages, uint32_t k,
                                     const void *src, uint64_t bytes,
                                     unsigned threads,
                                     ibp_region_summary *summary) {
  ibp_status s = ibp_clusters_check(p, k);
  if (s != IBP_OK)
    return s;
  if (!src && bytes)
    return IBP_ERR_INVALID_ARGUMENT;
  const ibp_stage *on;
  s = stages_in_use(p, stages, k, &on);
  if (s != IBP_OK)
    return s;
  ibp_status r =
      run_region(p, on, k, src, bytes, NULL, NULL, NULL, threads, summary);
  if (r == IBP_OK && summary && stages && !on) /* descriptors still count */
    summary->metadata_bytes += ibp_stage_metadata_bytes(stages, k);
  return r;
}

ibp_status ibp_compress_region(const ibp_params *p, const void *src,
                               uint64_t bytes, void *slots, uint8_t *flags,
                               unsigned threads, ibp_region_summary *summary) {
  return ibp_compress_region_clustered(p, 1, src, bytes, slots, flags, NULL,
                                       threads, summary);
}

ibp_status ibp_decompress_range(const ibp_region *r, uint64_t off, uint64_t len,
                                void *dst) {
  return ibp_decompress_range_clustered(r, NULL, 1, off, len, dst);
}

ibp_status ibp_decompress_range_clustered(const ibp_region *r,
                                          const uint8_t *ids, uint32_t k,
                                          uint64_t off, uint64_t len,
                                          void *dst) {
  return ibp_decompress_range_staged(r, ids, k, NULL, off, len, dst);
}

ibp_status ibp_decompress_range_staged(const ibp_region *r, const uint8_t *ids,
                                       uint32_t k, const ibp_stage *stages,
                                       uint64_t off, uint64_t len, void *dst) {
  if (!r || !r->params || (!r->slots && r->bytes) || (!dst && len))
    return IBP_ERR_INVALID_ARGUMENT;
  const ibp_params *p = r->params;
  if (k == 0 || k > IBP_MAX_CLUSTERS ||
      (k > 1 && !ids && r->bytes >= p->tensor_bytes))
    return IBP_ERR_INVALID_ARGUMENT;
  for (uint32_t c = 0; c < k; c++)
    if (!p[c].mask || !p[c].bitval || p[c].tensor_bytes != p->tensor_bytes ||
        p->tensor_bytes == 0 || p->tensor_bytes > IBP_MAX_TENSOR_BYTES ||
        !ibp_chunk_width_valid(p[c].chunk_bytes))
      return IBP_ERR_INVALID_ARGUMENT;
  if (off > r->bytes || len > r->bytes - off)
    return IBP_ERR_RANGE;
  const uint32_t R = p->tensor_bytes;
  const uint64_t body = r->bytes / R * R;
  if (body && !r->flags)
    return IBP_ERR_INVALID_ARGUMENT;
  uint8_t *out = dst, *whole = NULL;
  while (len && off < body) {
    uint64_t i = off / R;
    uint32_t in = (uint32_t)(off % R);
    uint32_t part = len < (uint64_t)(R - in) ? (uint32_t)len : R - in;
    int compressed = (r->flags[i / 8] >> (i % 8)) & 1;
    uint32_t id = ibp_cluster_id(ids, k, i);
    if (id >= k) {
      free(whole);
      return IBP_ERR_CORRUPT;
    }
    const ibp_stage *st = stages ? &stages[id] : NULL;
    ibp_status s;
    if (ibp__stage_off(st) || !compressed) {
      s = ibp_decompress_tensor_part(&p[id], r->slots + i * R, R, compressed,
                                     in, part, out);
    } else { /* a stage decodes whole tensors */
      if (!whole && !(whole = malloc(R)))
        return IBP_ERR_NO_MEMORY;
      s = ibp_decompress_tensor_staged(&p[id], st, r->slots + i * R, R, 1,
                                       whole);
      if (s == IBP_OK)
        memcpy(out, whole + in, part);
    }
    if (s != IBP_OK) {
      free(whole);
      return s;
    }
    out += part;
    off += part;
    len -= part;
  }
  free(whole);
  if (len) /* the raw tail */
    memcpy(out, r->slots + off, len);
  return IBP_OK;
}
