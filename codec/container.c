/* The container file format (docs/FORMAT.md, "Container"): writer and a
 * reader that validates everything before trusting it. */
#include <stdlib.h>

#include "ibp/container.h"
#include "stage_internal.h"

#define HDR IBP_CONTAINER_HEADER_BYTES
#define META_SUM_AT 80
#define CLUSTERS_AT 88    /* versions 2 to 4: K */
#define STAGE_BYTES_AT 92 /* version 4: bytes of the stage descriptors */
#define RESERVED_AT(version)                                                   \
  ((version) >= IBP_FORMAT_VERSION            ? 96u                            \
   : (version) >= IBP_FORMAT_VERSION_CLUSTERS ? 92u                            \
                                              : 88u)
#define BLOCK_SOURCE_BYTES (32u << 20) /* source bytes compressed per step */
#define OUT_BUFFER_BYTES (4u << 20)

/* ---- little-endian header fields ---------------------------------------- */

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static void encode_header(const ibp_container_info *in, uint8_t *h) {
  uint64_t thr;
  memcpy(&thr, &in->threshold, 8);
  memset(h, 0, HDR);
  memcpy(h, IBP_CONTAINER_MAGIC, 8);
  put32(h + 8, in->version);
  put32(h + 12, HDR);
  put32(h + 16, in->tensor_bytes);
  put32(h + 20, in->chunk_bytes);
  put64(h + 24, thr);
  put64(h + 32, in->original_bytes);
  put64(h + 40, in->tensors);
  put64(h + 48, in->tail_bytes);
  put64(h + 56, in->tensors_compressed);
  put64(h + 64, in->payload_bytes);
  put64(h + 72, in->data_checksum);
  if (in->version >= IBP_FORMAT_VERSION_CLUSTERS)
    put32(h + CLUSTERS_AT, in->clusters);
  if (in->version >= IBP_FORMAT_VERSION)
    put32(h + STAGE_BYTES_AT, in->stage_bytes);
}

/* Checksum of the header (without its own field) and the metadata: each
 * cluster's Mask and Bitval, the stage descriptors (version 4), the ids,
 * the flags; the version's checksum (read from the header). */
static uint64_t meta_checksum(const uint8_t *h, const ibp_params *p, uint32_t k,
                              const uint8_t *desc, uint64_t desc_bytes,
                              const uint8_t *ids, uint64_t id_bytes,
                              const uint8_t *flags, uint64_t flag_bytes) {
  ibp__hash x;
  ibp__hash_init(&x, get32(h + 8));
  ibp__hash_update(&x, h, META_SUM_AT);
  ibp__hash_update(&x, h + META_SUM_AT + 8, HDR - META_SUM_AT - 8);
  for (uint32_t c = 0; c < k; c++) {
    ibp__hash_update(&x, p[c].mask, p[c].tensor_bytes);
    ibp__hash_update(&x, p[c].bitval, p[c].tensor_bytes);
  }
  if (desc_bytes)
    ibp__hash_update(&x, desc, desc_bytes);
  if (id_bytes) /* K > 1 only */
    ibp__hash_update(&x, ids, id_bytes);
  ibp__hash_update(&x, flags, flag_bytes);
  return ibp__hash_final(&x);
}

/* ---- buffered sequential output ------------------------------------------ */

typedef struct out_buf {
  ibp_write_fn write;
  void *ctx;
  uint64_t offset; /* file offset of buf[0] */
  uint8_t *buf;
  size_t used;
  int failed;
} out_buf;

static void out_flush(out_buf *o) {
  if (o->used && o->write && !o->failed)
    o->failed = o->write(o->ctx, o->offset, o->buf, o->used) != 0;
  o->offset += o->used;
  o->used = 0;
}

static void out_put(out_buf *o, const void *data, size_t len) {
  const uint8_t *p = data;
  while (len) {
    size_t take =
        OUT_BUFFER_BYTES - o->used < len ? OUT_BUFFER_BYTES - o->used : len;
    memcpy(o->buf + o->used, p, take);
    o->used += take;
    p += take;
    len -= take;
    if (o->used == OUT_BUFFER_BYTES)
      out_flush(o);
  }
}

/* ---- writer -------------------------------------------------------------- */

/* Compresses the tensors block by block and appends each stored slot. */
static ibp_status write_payload(const ibp_params *p, const ibp_stage *stages,
                                uint32_t k, const uint8_t *src, uint64_t n,
                                unsigned threads, uint8_t *flags, uint8_t *ids,
                                out_buf *o, ibp_container_info *info,
                                ibp__hash *data_sum) {
  const uint32_t R = p->tensor_bytes, bits = ibp_cluster_id_bits(k);
  uint64_t per_block = BLOCK_SOURCE_BYTES / R / 8 * 8;
  if (per_block < 8)
    per_block = 8;
  uint8_t *slots = malloc(per_block * R);
  if (!slots)
    return IBP_ERR_NO_MEMORY;
  ibp_status s = IBP_OK;
  for (uint64_t i0 = 0; i0 < n && s == IBP_OK; i0 += per_block) {
    uint64_t cnt = n - i0 < per_block ? n - i0 : per_block;
    ibp_region_summary sum;
    s = ibp_compress_region_staged(
        p, stages, k, src + i0 * R, cnt * R, slots, flags + i0 / 8,
        ids ? ids + i0 * bits / 8 : NULL, threads, &sum);
    for (uint64_t i = 0; i < cnt && s == IBP_OK; i++) {
      size_t len = R;
      uint32_t id = ibp_cluster_id(ids, k, i0 + i);
      if ((flags[(i0 + i) / 8] >> ((i0 + i) % 8)) & 1)
        s = ibp_compressed_length_staged(&p[id], stages ? &stages[id] : NULL,
                                         slots + i * R, R, &len);
      out_put(o, slots + i * R, len);
      info->payload_bytes += len;
    }
    ibp__hash_update(data_sum, src + i0 * R, cnt * R);
    info->tensors_compressed += sum.tensors_compressed;
  }
  free(slots);
  return s;
}

/* Writes the header and the metadata (after the payload: the header
 * carries its sizes and checksums). */
static int write_meta(const ibp_container_info *in, const ibp_params *p,
                      uint32_t k, const uint8_t *desc, const uint8_t *ids,
                      uint64_t id_bytes, const uint8_t *flags,
                      uint64_t flag_bytes, ibp_write_fn write, void *ctx) {
  const uint32_t R = p->tensor_bytes;
  uint8_t h[HDR];
  encode_header(in, h);
  put64(h + META_SUM_AT, meta_checksum(h, p, k, desc, in->stage_bytes, ids,
                                       id_bytes, flags, flag_bytes));
  int failed = write(ctx, 0, h, HDR);
  uint64_t at = HDR;
  for (uint32_t c = 0; c < k && !failed; c++, at += 2 * (uint64_t)R)
    failed = write(ctx, at, p[c].mask, R) || write(ctx, at + R, p[c].bitval, R);
  if (!failed && in->stage_bytes)
    failed = write(ctx, at, desc, (size_t)in->stage_bytes);
  at += in->stage_bytes;
  if (!failed && id_bytes)
    failed = write(ctx, at, ids, (size_t)id_bytes);
  at += id_bytes;
  if (!failed && flag_bytes)
    failed = write(ctx, at, flags, (size_t)flag_bytes);
  return failed;
}

/* The stage descriptors of a version-4 container (NULL, 0 bytes, when no
 * stage is on: version 3). */
static ibp_status make_descriptors(const ibp_stage *stages, uint32_t k,
                                   uint8_t **desc, uint32_t *bytes) {
  int any = 0;
  *desc = NULL;
  *bytes = 0;
  for (uint32_t c = 0; stages && c < k; c++)
    any |= !ibp__stage_off(&stages[c]);
  if (!any)
    return IBP_OK;
  uint64_t total = ibp_stage_metadata_bytes(stages, k);
  uint8_t *d = malloc(total);
  if (!d)
    return IBP_ERR_NO_MEMORY;
  uint64_t at = 0;
  for (uint32_t c = 0; c < k; c++) {
    ibp_stage_write(&stages[c], d + at);
    at += ibp_stage_descriptor_bytes(&stages[c]);
  }
  *desc = d;
  *bytes = (uint32_t)total;
  return IBP_OK;
}

ibp_status ibp_container_write_clustered(const ibp_params *p, uint32_t k,
                                         const void *src, uint64_t bytes,
                                         unsigned threads, ibp_write_fn write,
                                         void *ctx, ibp_container_info *info) {
  return ibp_container_write_staged(p, NULL, k, src, bytes, threads, write, ctx,
                                    info);
}

ibp_status ibp_container_write_staged(const ibp_params *p,
                                      const ibp_stage *stages, uint32_t k,
                                      const void *src, uint64_t bytes,
                                      unsigned threads, ibp_write_fn write,
                                      void *ctx, ibp_container_info *info) {
  ibp_status s = ibp_clusters_check(p, k);
  if (s != IBP_OK)
    return s;
  if (!write || (!src && bytes))
    return IBP_ERR_INVALID_ARGUMENT;
  const uint32_t R = p->tensor_bytes;
  const uint64_t n = bytes / R, flag_bytes = (n + 7) / 8;
  const uint64_t id_bytes = ibp_cluster_id_bytes(k, n);
  uint8_t *desc;
  uint32_t desc_bytes;
  s = make_descriptors(stages, k, &desc, &desc_bytes);
  if (s != IBP_OK)
    return s;
  ibp_container_info in = {.version = desc ? IBP_FORMAT_VERSION
                                           : IBP_FORMAT_VERSION_XXH64,
                           .tensor_bytes = R,
                           .chunk_bytes = p->chunk_bytes,
                           .threshold = p->threshold,
                           .original_bytes = bytes,
                           .tensors = n,
                           .tail_bytes = bytes % R,
                           .clusters = k,
                           .stage_bytes = desc_bytes};
  const uint64_t payload_at =
      HDR + 2 * (uint64_t)R * k + desc_bytes + id_bytes + flag_bytes;
  uint8_t *flags = calloc(flag_bytes + 1, 1);
  uint8_t *ids = k > 1 ? calloc(id_bytes + 1, 1) : NULL;
  out_buf o = {write, ctx, payload_at, malloc(OUT_BUFFER_BYTES), 0, 0};
  ibp__hash data_sum;
  ibp__hash_init(&data_sum, in.version);
  if (!flags || !o.buf || (k > 1 && !ids)) {
    free(flags);
    free(ids);
    free(o.buf);
    free(desc);
    return IBP_ERR_NO_MEMORY;
  }
  s = write_payload(p, desc ? stages : NULL, k, src, n, threads, flags, ids, &o,
                    &in, &data_sum);
  if (s == IBP_OK) {
    const uint8_t *tail = (const uint8_t *)src + n * R;
    out_put(&o, tail, in.tail_bytes);
    ibp__hash_update(&data_sum, tail, in.tail_bytes);
    in.payload_bytes += in.tail_bytes;
    in.data_checksum = ibp__hash_final(&data_sum);
    in.container_bytes = payload_at + in.payload_bytes;
    out_flush(&o);
    o.failed = o.failed || write_meta(&in, p, k, desc, ids, id_bytes, flags,
                                      flag_bytes, write, ctx);
    if (o.failed)
      s = IBP_ERR_IO;
  }
  free(desc);
  free(flags);
  free(ids);
  free(o.buf);
  if (s == IBP_OK && info)
    *info = in;
  return s;
}

ibp_status ibp_container_write(const ibp_params *p, const void *src,
                               uint64_t bytes, unsigned threads,
                               ibp_write_fn write, void *ctx,
                               ibp_container_info *info) {
  return ibp_container_write_clustered(p, 1, src, bytes, threads, write, ctx,
                                       info);
}

/* ---- reader -------------------------------------------------------------- */

typedef struct parsed {
  ibp_container_info info;
  ibp_params params[IBP_MAX_CLUSTERS]; /* point into the buffer */
  ibp_stage *stages;                   /* K, owned; NULL before version 4 */
  const uint8_t *ids;                  /* NULL when K = 1 */
  const uint8_t *flags;
  const uint8_t *payload;
} parsed;

static ibp_status check_fields(const ibp_container_info *in) {
  if (in->tensor_bytes == 0 || in->tensor_bytes > IBP_MAX_TENSOR_BYTES ||
      !ibp_chunk_width_valid(in->chunk_bytes))
    return IBP_ERR_CORRUPT;
  if (in->clusters < (in->version == IBP_FORMAT_VERSION_CLUSTERS ? 2u : 1u) ||
      in->clusters > IBP_MAX_CLUSTERS)
    return IBP_ERR_CORRUPT; /* version 2 wrote one cluster as version 1 */
  if (in->version >= IBP_FORMAT_VERSION &&
      (in->stage_bytes < in->clusters ||
       in->stage_bytes > in->clusters * IBP_STAGE_DESCRIPTOR_MAX_BYTES))
    return IBP_ERR_CORRUPT; /* version 4: a descriptor per cluster */
  if (in->tensors != in->original_bytes / in->tensor_bytes ||
      in->tail_bytes != in->original_bytes % in->tensor_bytes ||
      in->tensors_compressed > in->tensors)
    return IBP_ERR_CORRUPT;
  if (in->payload_bytes > in->original_bytes ||
      in->payload_bytes < in->tail_bytes)
    return IBP_ERR_CORRUPT;
  return IBP_OK;
}

static ibp_status check_flags(const uint8_t *flags, uint64_t n,
                              uint64_t expected) {
  uint64_t set = 0;
  for (uint64_t i = 0; i < (n + 7) / 8; i++)
    set += (uint64_t)__builtin_popcount(flags[i]);
  if (n % 8 && (flags[n / 8] >> (n % 8)))
    return IBP_ERR_CORRUPT; /* unused flag bits must be zero */
  return set == expected ? IBP_OK : IBP_ERR_CORRUPT;
}

/* Every id names a cluster; unused bits of the last id byte are zero. */
static ibp_status check_ids(const uint8_t *ids, uint32_t k, uint64_t n) {
  const uint32_t bits = ibp_cluster_id_bits(k);
  if (!ids)
    return IBP_OK;
  for (uint64_t i = 0; i < n; i++)
    if (ibp_cluster_id(ids, k, i) >= k)
      return IBP_ERR_CORRUPT;
  if ((n * bits) % 8 && (ids[n * bits / 8] >> ((n * bits) % 8)))
    return IBP_ERR_CORRUPT;
  return IBP_OK;
}

/* The header fields; their consistency is checked by check_fields. */
static ibp_status read_header(const uint8_t *b, ibp_container_info *in) {
  uint64_t thr = get64(b + 24);
  in->version = get32(b + 8);
  if (in->version != IBP_FORMAT_VERSION_SINGLE &&
      in->version != IBP_FORMAT_VERSION_CLUSTERS &&
      in->version != IBP_FORMAT_VERSION_XXH64 &&
      in->version != IBP_FORMAT_VERSION)
    return IBP_ERR_VERSION;
  if (get32(b + 12) != HDR)
    return IBP_ERR_CORRUPT;
  for (unsigned i = RESERVED_AT(in->version); i < HDR; i++)
    if (b[i])
      return IBP_ERR_CORRUPT; /* reserved bytes */
  in->tensor_bytes = get32(b + 16);
  in->chunk_bytes = get32(b + 20);
  memcpy(&in->threshold, &thr, 8);
  in->original_bytes = get64(b + 32);
  in->tensors = get64(b + 40);
  in->tail_bytes = get64(b + 48);
  in->tensors_compressed = get64(b + 56);
  in->payload_bytes = get64(b + 64);
  in->data_checksum = get64(b + 72);
  in->clusters =
      in->version >= IBP_FORMAT_VERSION_CLUSTERS ? get32(b + CLUSTERS_AT) : 1;
  in->stage_bytes =
      in->version >= IBP_FORMAT_VERSION ? get32(b + STAGE_BYTES_AT) : 0;
  return check_fields(in);
}

/* Version 4: one stage descriptor per cluster, filling desc exactly, each
 * fitting its cluster's Mask/Bitval (docs/FORMAT.md §9). */
static ibp_status read_stages(parsed *out, const uint8_t *desc,
                              uint64_t desc_bytes) {
  const uint32_t k = out->info.clusters, R = out->info.tensor_bytes;
  if (!desc_bytes)
    return IBP_OK;
  out->stages = malloc(k * sizeof *out->stages);
  if (!out->stages)
    return IBP_ERR_NO_MEMORY;
  uint64_t at = 0;
  for (uint32_t c = 0; c < k; c++) {
    size_t used = 0;
    ibp_status s = ibp_stage_read(&out->stages[c], desc + at,
                                  (size_t)(desc_bytes - at), R, &used);
    if (s != IBP_OK ||
        ibp_stage_check_params(&out->stages[c], &out->params[c]) != IBP_OK)
      return IBP_ERR_CORRUPT;
    at += used;
  }
  return at == desc_bytes ? IBP_OK : IBP_ERR_CORRUPT;
}

static void parsed_free(parsed *p) {
  free(p->stages);
  p->stages = NULL;
}

static ibp_status parse(const uint8_t *b, uint64_t len, parsed *out) {
  out->stages = NULL;
  if (len < 8 || memcmp(b, IBP_CONTAINER_MAGIC, 8) != 0)
    return len < 8 && memcmp(b, IBP_CONTAINER_MAGIC, len) == 0
               ? IBP_ERR_TRUNCATED
               : IBP_ERR_BAD_MAGIC;
  if (len < HDR)
    return IBP_ERR_TRUNCATED;
  ibp_container_info *in = &out->info;
  ibp_status s = read_header(b, in);
  if (s != IBP_OK)
    return s;
  const uint32_t R = in->tensor_bytes, k = in->clusters;
  const uint64_t flag_bytes = (in->tensors + 7) / 8;
  const uint64_t id_bytes = ibp_cluster_id_bytes(k, in->tensors);
  const uint64_t pairs = 2 * (uint64_t)R * k, desc_bytes = in->stage_bytes;
  const uint64_t meta = pairs + desc_bytes + id_bytes + flag_bytes;
  in->container_bytes = HDR + meta + in->payload_bytes;
  if (len < in->container_bytes)
    return IBP_ERR_TRUNCATED;
  if (len > in->container_bytes)
    return IBP_ERR_CORRUPT; /* trailing bytes */
  for (uint32_t c = 0; c < k; c++) {
    const uint8_t *m = b + HDR + 2 * (uint64_t)R * c;
    out->params[c] =
        (ibp_params){R, in->chunk_bytes, in->threshold, (uint8_t *)(uintptr_t)m,
                     (uint8_t *)(uintptr_t)(m + R)};
  }
  const uint8_t *desc = b + HDR + pairs;
  out->ids = k > 1 ? desc + desc_bytes : NULL;
  out->flags = desc + desc_bytes + id_bytes;
  out->payload = out->flags + flag_bytes;
  if (get64(b + META_SUM_AT) != meta_checksum(b, out->params, k, desc,
                                              desc_bytes, out->ids, id_bytes,
                                              out->flags, flag_bytes))
    return IBP_ERR_CHECKSUM;
  if (ibp_clusters_check(out->params, k) != IBP_OK ||
      check_ids(out->ids, k, in->tensors) != IBP_OK)
    return IBP_ERR_CORRUPT;
  s = read_stages(out, desc, desc_bytes);
  if (s != IBP_OK)
    return s;
  return check_flags(out->flags, in->tensors, in->tensors_compressed);
}

ibp_status ibp_container_read_info(const void *buf, uint64_t len,
                                   ibp_container_info *info) {
  parsed p;
  if (!buf || !info)
    return IBP_ERR_INVALID_ARGUMENT;
  ibp_status s = parse(buf, len, &p);
  if (s == IBP_OK)
    *info = p.info;
  parsed_free(&p);
  return s;
}

/* Decodes the tensors in order into the output buffer. */
static ibp_status decode_tensors(const parsed *pc, out_buf *o, ibp__hash *sum,
                                 uint64_t *pos) {
  const uint32_t R = pc->info.tensor_bytes;
  const uint64_t slots_end = pc->info.payload_bytes - pc->info.tail_bytes;
  uint8_t *tensor = malloc(R);
  ibp_status s = tensor ? IBP_OK : IBP_ERR_NO_MEMORY;
  for (uint64_t i = 0; i < pc->info.tensors && s == IBP_OK && !o->failed; i++) {
    const uint8_t *src = pc->payload + *pos;
    int compressed = (pc->flags[i / 8] >> (i % 8)) & 1;
    const uint32_t id = ibp_cluster_id(pc->ids, pc->info.clusters, i);
    const ibp_params *p = &pc->params[id];
    const ibp_stage *st = pc->stages ? &pc->stages[id] : NULL;
    size_t avail = (size_t)(slots_end - *pos), len = R;
    if (compressed)
      s = ibp_compressed_length_staged(p, st, src, avail, &len);
    else if (avail < R)
      s = IBP_ERR_CORRUPT;
    if (s == IBP_OK)
      s = ibp_decompress_tensor_staged(p, st, src, len, compressed, tensor);
    if (s == IBP_OK) {
      ibp__hash_update(sum, tensor, R);
      out_put(o, tensor, R);
      *pos += len;
    }
  }
  free(tensor);
  return s;
}

ibp_status ibp_container_decode(const void *buf, uint64_t len,
                                ibp_write_fn write, void *ctx) {
  parsed pc;
  if (!buf)
    return IBP_ERR_INVALID_ARGUMENT;
  ibp_status s = parse(buf, len, &pc);
  if (s != IBP_OK) {
    parsed_free(&pc);
    return s;
  }
  out_buf o = {write, ctx, 0, malloc(OUT_BUFFER_BYTES), 0, 0};
  ibp__hash sum;
  uint64_t pos = 0;
  if (!o.buf) {
    parsed_free(&pc);
    return IBP_ERR_NO_MEMORY;
  }
  ibp__hash_init(&sum, pc.info.version);
  s = decode_tensors(&pc, &o, &sum, &pos);
  if (s == IBP_OK && o.failed)
    s = IBP_ERR_IO; /* stopped early: the output cannot be written */
  if (s == IBP_OK && pos != pc.info.payload_bytes - pc.info.tail_bytes)
    s = IBP_ERR_CORRUPT; /* slots do not fill the payload exactly */
  if (s == IBP_OK) {
    ibp__hash_update(&sum, pc.payload + pos, pc.info.tail_bytes);
    out_put(&o, pc.payload + pos, pc.info.tail_bytes);
    out_flush(&o);
    if (ibp__hash_final(&sum) != pc.info.data_checksum)
      s = IBP_ERR_CHECKSUM;
    else if (o.failed)
      s = IBP_ERR_IO;
  }
  free(o.buf);
  parsed_free(&pc);
  return s;
}
