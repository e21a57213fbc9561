/* The codec seam (docs/FORMAT.md §9): a tensor's stream is the IBP stream
 * of the tensor with its stage's field zeroed, then the stage's bits, then
 * zero padding to a byte.  This file composes the two for every stage
 * kind and holds the stage list's dispatch; each stage lives in its own
 * file behind ibp__stage_ops (stage_internal.h). */
#include <stdlib.h>

#include "stage_internal.h"

const ibp__stage_ops *ibp__stage_ops_of(const ibp_stage *st) {
  if (!st)
    return NULL;
  switch (st->kind) {
  case IBP_STAGE_EXP:
    return &ibp__stage_exp;
  default:
    return NULL;
  }
}

const char *ibp_stage_name(uint32_t kind) {
  switch (kind) {
#define IBP_STAGE_NAME_(name, value, text)                                     \
  case value:                                                                  \
    return text;
    IBP_STAGE_LIST(IBP_STAGE_NAME_)
#undef IBP_STAGE_NAME_
  default:
    return "?";
  }
}

const char *ibp_dtype_name(uint32_t dtype) {
  switch (dtype) {
#define IBP_DTYPE_NAME_(name, value, text, b, l, n)                            \
  case value:                                                                  \
    return text;
    IBP_DTYPE_LIST(IBP_DTYPE_NAME_)
#undef IBP_DTYPE_NAME_
  default:
    return "?";
  }
}

uint32_t ibp_dtype_bytes(uint32_t dtype) {
  switch (dtype) {
#define IBP_DTYPE_BYTES_(name, value, text, b, l, n)                           \
  case value:                                                                  \
    return b;
    IBP_DTYPE_LIST(IBP_DTYPE_BYTES_)
#undef IBP_DTYPE_BYTES_
  default:
    return 0;
  }
}

/* ---- building ------------------------------------------------------------ */

ibp_status ibp_stage_init(ibp_stage *st, uint32_t kind, uint32_t dtype,
                          uint32_t segment_log2, uint32_t tensor_bytes) {
  if (!st || tensor_bytes == 0 || tensor_bytes > IBP_MAX_TENSOR_BYTES)
    return IBP_ERR_INVALID_ARGUMENT;
  memset(st, 0, sizeof *st);
  st->kind = kind;
  if (kind == IBP_STAGE_NONE)
    return dtype == IBP_DTYPE_NONE ? IBP_OK : IBP_ERR_INVALID_ARGUMENT;
  const ibp__stage_ops *ops = ibp__stage_ops_of(st);
  if (!ops)
    return IBP_ERR_INVALID_ARGUMENT;
  st->dtype = dtype;
  st->segment_log2 = segment_log2;
  return ops->init(st, tensor_bytes);
}

void ibp_stage_count(ibp_stage *st, const void *tensor, uint32_t R) {
  const ibp__stage_ops *ops = ibp__stage_ops_of(st);
  if (ops && tensor)
    ops->count(st, tensor, R);
}

ibp_status ibp_stage_finish(ibp_stage *st) {
  if (!st)
    return IBP_ERR_INVALID_ARGUMENT;
  const ibp__stage_ops *ops = ibp__stage_ops_of(st);
  return ops ? ops->finish(st) : IBP_OK;
}

void ibp_stage_field(const ibp_stage *st, uint8_t *field, uint32_t R) {
  const ibp__stage_ops *ops = ibp__stage_ops_of(st);
  memset(field, 0, R);
  if (ops)
    ops->field(st, field, R);
}

void ibp_stage_strip(const ibp_stage *st, const void *tensor, void *out,
                     uint32_t R) {
  const ibp__stage_ops *ops = ibp__stage_ops_of(st);
  if (ops)
    ops->strip(st, tensor, out, R);
  else if (out != tensor)
    memcpy(out, tensor, R);
}

void ibp_stage_fit_params(const ibp_stage *st, ibp_params *p) {
  const ibp__stage_ops *ops = ibp__stage_ops_of(st);
  if (!ops || !p || !p->mask)
    return;
  uint8_t *f = malloc(p->tensor_bytes);
  if (!f)
    return;
  ops->field(st, f, p->tensor_bytes);
  for (uint32_t b = 0; b < p->tensor_bytes; b++) {
    p->mask[b] |= f[b];
    p->bitval[b] &= (uint8_t)~f[b];
  }
  free(f);
}

ibp_status ibp_stage_check_params(const ibp_stage *st, const ibp_params *p) {
  const ibp__stage_ops *ops = ibp__stage_ops_of(st);
  if (ibp__stage_off(st))
    return IBP_OK;
  if (!ops || !p || !p->mask)
    return IBP_ERR_CORRUPT;
  uint8_t *f = malloc(p->tensor_bytes);
  if (!f)
    return IBP_ERR_NO_MEMORY;
  ops->field(st, f, p->tensor_bytes);
  ibp_status s = IBP_OK;
  for (uint32_t b = 0; b < p->tensor_bytes && s == IBP_OK; b++)
    if ((p->mask[b] & f[b]) != f[b] || (p->bitval[b] & f[b]))
      s = IBP_ERR_CORRUPT;
  free(f);
  return s;
}

/* ---- descriptors --------------------------------------------------------- */

size_t ibp_stage_descriptor_bytes(const ibp_stage *st) {
  const ibp__stage_ops *ops = ibp__stage_ops_of(st);
  return 1 + (ops ? ops->table_bytes(st) : 0);
}

void ibp_stage_write(const ibp_stage *st, uint8_t *out) {
  const ibp__stage_ops *ops = ibp__stage_ops_of(st);
  out[0] = (uint8_t)(st ? st->kind : IBP_STAGE_NONE);
  if (ops)
    ops->write(st, out + 1);
}

ibp_status ibp_stage_read(ibp_stage *st, const uint8_t *src, size_t avail,
                          uint32_t R, size_t *used) {
  if (!st || !src || !used)
    return IBP_ERR_INVALID_ARGUMENT;
  if (avail < 1)
    return IBP_ERR_CORRUPT;
  memset(st, 0, sizeof *st);
  st->kind = src[0];
  if (st->kind == IBP_STAGE_NONE) {
    *used = 1;
    return IBP_OK;
  }
  const ibp__stage_ops *ops = ibp__stage_ops_of(st);
  if (!ops)
    return IBP_ERR_CORRUPT;
  ibp_status s = ops->read(st, src + 1, avail - 1, R);
  if (s == IBP_OK)
    *used = 1 + ops->table_bytes(st);
  return s;
}

uint64_t ibp_stage_metadata_bytes(const ibp_stage *stages, uint32_t k) {
  uint64_t b = 0;
  for (uint32_t c = 0; c < k; c++)
    b += ibp_stage_descriptor_bytes(stages ? &stages[c] : NULL);
  return b;
}

/* ---- one tensor ---------------------------------------------------------- */

/* The stage's field in every 8 bytes (its value size divides 8). */
static uint64_t field_word(const ibp__stage_ops *ops, const ibp_stage *st) {
  uint8_t pat[8];
  ops->field(st, pat, 8);
  return ibp__load64(pat);
}

/* Nonzero when p's Mask is exactly the stage's field: every chunk of a
 * stripped tensor fits, so the stream omits the bitmap (docs/FORMAT.md
 * §9).  Asked once per tensor compressed or sized: its first 8 bytes
 * against the field, then the rest against the 8 before it (the field
 * repeats every 8 bytes) by one memcmp: a 4 KiB Mask in ~640 instructions
 * rather than the 8-byte loop's ~3 650, 5.5 % of a staged compress of
 * bf16 tensors of 4 KiB. */
static int bitmap_omitted(const ibp_params *p, const ibp__stage_ops *ops,
                          const ibp_stage *st) {
  const uint64_t f = field_word(ops, st);
  const uint32_t R = p->tensor_bytes;
  if (R >= 8)
    return ibp__load64(p->mask) == f &&
           memcmp(p->mask, p->mask + 8, R - 8) == 0;
  for (uint32_t b = 0; b < R; b++)
    if (p->mask[b] != (uint8_t)(f >> (8 * b)))
      return 0;
  return 1;
}

/* Nonzero when none of the field's bits is set in t (R bytes). */
static int field_clear(const ibp__stage_ops *ops, const ibp_stage *st,
                       const uint8_t *t, uint32_t R) {
  const uint64_t f = field_word(ops, st);
  uint64_t any = 0;
  uint32_t b = 0;
  for (; b + 8 <= R; b += 8)
    any |= ibp__load64(t + b) & f;
  for (; b < R; b++)
    any |= t[b] & (uint8_t)(f >> (8 * (b % 8)));
  return any == 0;
}

/* Bits of the IBP part of stripped tensor s (the bitmap dropped when
 * `omit`: every bit outside Mask, which is the field), or more than the
 * limit. */
static uint64_t ibp_part_bits(const ibp__pack_ops *pack, const ibp_params *p,
                              const ibp__stage_ops *ops, const ibp_stage *st,
                              const uint8_t *s, int omit) {
  const uint64_t limit = 8 * (uint64_t)(p->tensor_bytes - 1);
  if (omit)
    return 8 * (uint64_t)p->tensor_bytes - ops->field_bits(st, p->tensor_bytes);
  return pack->stored_bits(p, s, limit);
}

/* Bits of the whole stream (IBP part + stage), or more than the limit. */
static uint64_t staged_bits(const ibp__pack_ops *pack, const ibp_params *p,
                            const ibp__stage_ops *ops, const ibp_stage *st,
                            const uint8_t *t, uint8_t *scratch) {
  const uint64_t limit = 8 * (uint64_t)(p->tensor_bytes - 1);
  const int omit = bitmap_omitted(p, ops, st);
  if (!omit)
    ops->strip(st, t, scratch, p->tensor_bytes);
  uint64_t b = ibp_part_bits(pack, p, ops, st, scratch, omit);
  if (b > limit)
    return b;
  return b + ops->bits(st, t, p->tensor_bytes);
}

size_t ibp__staged_size(const ibp__pack_ops *pack, const ibp_params *p,
                        const ibp_stage *st, const uint8_t *t,
                        uint8_t *scratch) {
  const ibp__stage_ops *ops = ibp__stage_ops_of(st);
  if (!ops)
    return pack->stored_size(p, t);
  uint64_t bits = staged_bits(pack, p, ops, st, t, scratch);
  return bits > 8 * (uint64_t)(p->tensor_bytes - 1) ? p->tensor_bytes
                                                    : (size_t)((bits + 7) / 8);
}

/* One pass per part: the IBP part (the payload alone when the bitmap is
 * omitted: t's bits outside Mask, the same in every word, so t needs no
 * stripping and each word's bits are known in advance), then the
 * stage's bits after it; a stream that would reach R bytes is abandoned
 * as soon as it does and the tensor stored raw.  scratch holds the
 * stripped tensor (R bytes). */
size_t ibp__staged_compress(const ibp__pack_ops *pack, const ibp_params *p,
                            const ibp_stage *st, const uint8_t *t,
                            uint8_t *slot, uint8_t *scratch) {
  const ibp__stage_ops *ops = ibp__stage_ops_of(st);
  const uint32_t R = p->tensor_bytes;
  if (!ops)
    return pack->compress(p, t, slot);
  const uint64_t limit = 8 * (uint64_t)(R - 1);
  uint64_t at;
  if (bitmap_omitted(p, ops, st)) {
    at = pack->fit_put_word(~field_word(ops, st), t, R, slot, limit);
  } else {
    ops->strip(st, t, scratch, R);
    at = pack->compress_bits(p, scratch, slot);
  }
  uint64_t end = at > limit ? at : ops->encode(st, t, R, slot, at, limit);
  if (end > limit) {
    memcpy(slot, t, R);
    return R;
  }
  return (size_t)((end + 7) / 8);
}

/* Checks the end of a whole stream at bit `end` (as pack_body.h does). */
static ibp_status check_end(const uint8_t *src, size_t src_len, size_t end,
                            uint32_t R) {
  size_t len = (end + 7) / 8;
  if (len >= R || len > src_len)
    return IBP_ERR_CORRUPT;
  if ((end & 7) && (src[end >> 3] >> (end & 7)) != 0)
    return IBP_ERR_CORRUPT;
  return IBP_OK;
}

static int params_usable(const ibp_params *p) {
  return p && p->mask && p->bitval && p->tensor_bytes > 0 &&
         p->tensor_bytes <= IBP_MAX_TENSOR_BYTES &&
         ibp_chunk_width_valid(p->chunk_bytes);
}

/* The stage is usable with p: a known kind whose init accepts R. */
static int stage_usable(const ibp_stage *st, const ibp_params *p) {
  if (ibp__stage_off(st))
    return 1;
  ibp_stage probe;
  return ibp__stage_ops_of(st) &&
         ibp_stage_init(&probe, st->kind, st->dtype, st->segment_log2,
                        p->tensor_bytes) == IBP_OK;
}

size_t ibp_compressed_size_staged(const ibp_params *p, const ibp_stage *st,
                                  const void *tensor) {
  if (!params_usable(p) || !tensor || !stage_usable(st, p))
    return 0;
  if (ibp__stage_off(st))
    return ibp__pack()->stored_size(p, tensor);
  uint8_t *scratch = malloc(p->tensor_bytes);
  if (!scratch)
    return 0;
  size_t n = ibp__staged_size(ibp__pack(), p, st, tensor, scratch);
  free(scratch);
  return n;
}

size_t ibp_compress_tensor_staged(const ibp_params *p, const ibp_stage *st,
                                  const void *tensor, void *slot,
                                  int *compressed) {
  if (compressed)
    *compressed = 0;
  if (!params_usable(p) || !tensor || !slot || !stage_usable(st, p) ||
      ibp_stage_check_params(st, p) != IBP_OK)
    return 0;
  uint8_t *scratch = ibp__stage_off(st) ? NULL : malloc(p->tensor_bytes);
  if (!ibp__stage_off(st) && !scratch)
    return 0;
  size_t n = ibp__staged_compress(ibp__pack(), p, st, tensor, slot, scratch);
  free(scratch);
  if (compressed)
    *compressed = n < p->tensor_bytes;
  return n;
}

/* Decodes the IBP part of a staged stream into dst; *end gets the bit
 * where it ends. */
static ibp_status ibp_part_decode(const ibp_params *p,
                                  const ibp__stage_ops *ops,
                                  const ibp_stage *st, const uint8_t *src,
                                  size_t src_len, uint8_t *dst, size_t *end) {
  const uint32_t R = p->tensor_bytes;
  if (!bitmap_omitted(p, ops, st))
    return ibp__pack()->decode(p, src, src_len, 0, R, dst, end);
  return ibp__pack()->fit_get(p, src, src_len, dst, end);
}

ibp_status ibp_decompress_tensor_staged(const ibp_params *p,
                                        const ibp_stage *st, const void *src,
                                        size_t src_len, int compressed,
                                        void *dst) {
  if (!params_usable(p) || !src || !dst || !stage_usable(st, p))
    return IBP_ERR_INVALID_ARGUMENT;
  const ibp__stage_ops *ops = ibp__stage_ops_of(st);
  const uint32_t R = p->tensor_bytes;
  if (!ops || !compressed)
    return ibp_decompress_tensor(p, src, src_len, compressed, dst);
  size_t pos = 0;
  ibp_status s = ibp_part_decode(p, ops, st, src, src_len, dst, &pos);
  if (s != IBP_OK)
    return s;
  if (!field_clear(ops, st, dst, R))
    return IBP_ERR_CORRUPT; /* the field travelled in IBP's payload: not 0 */
  s = ops->decode(st, src, src_len, &pos, dst, R);
  return s == IBP_OK ? check_end(src, src_len, pos, R) : s;
}

ibp_status ibp_compressed_length_staged(const ibp_params *p,
                                        const ibp_stage *st, const void *src,
                                        size_t src_len, size_t *len) {
  if (!params_usable(p) || !src || !len || !stage_usable(st, p))
    return IBP_ERR_INVALID_ARGUMENT;
  const ibp__stage_ops *ops = ibp__stage_ops_of(st);
  if (!ops)
    return ibp_compressed_length(p, src, src_len, len);
  size_t pos = 0;
  ibp_status s = IBP_OK;
  if (bitmap_omitted(p, ops, st))
    pos = (size_t)ibp_part_bits(NULL, p, ops, st, NULL, 1);
  else
    s = ibp__pack()->ibp_bits(p, src, src_len, &pos);
  if (s == IBP_OK && pos > 8 * (uint64_t)src_len)
    s = IBP_ERR_CORRUPT;
  if (s == IBP_OK)
    s = ops->decode(st, src, src_len, &pos, NULL, p->tensor_bytes);
  if (s == IBP_OK)
    s = check_end(src, src_len, pos, p->tensor_bytes);
  if (s == IBP_OK)
    *len = (pos + 7) / 8;
  return s;
}

/* ---- clusters ------------------------------------------------------------ */

uint32_t ibp__best_cluster_staged(const ibp__pack_ops *pack,
                                  const ibp_params *p, const ibp_stage *stages,
                                  uint32_t k, const uint8_t *t,
                                  uint8_t *scratch, size_t *stored) {
  if (!stages)
    return ibp__best_cluster(pack, p, k, t, stored);
  uint32_t best = 0;
  size_t least = ibp__staged_size(pack, &p[0], &stages[0], t, scratch);
  for (uint32_t c = 1; c < k; c++) {
    size_t len = ibp__staged_size(pack, &p[c], &stages[c], t, scratch);
    if (len < least) {
      least = len;
      best = c;
    }
  }
  *stored = least;
  return best;
}

/* ---- learning ------------------------------------------------------------ */

#define LEARN_SAMPLE_BYTES (64ull << 20)

ibp_status ibp_stage_learn(const ibp_params *params, uint32_t k, uint32_t kind,
                           uint32_t dtype, const void *data, uint64_t n,
                           uint64_t sample_bytes, unsigned threads,
                           ibp_stage *stages) {
  (void)threads;
  ibp_status s = ibp_clusters_check(params, k);
  if (s != IBP_OK)
    return s;
  if (!stages || (!data && n))
    return IBP_ERR_INVALID_ARGUMENT;
  const uint32_t R = params->tensor_bytes;
  for (uint32_t c = 0; c < k && s == IBP_OK; c++)
    s = ibp_stage_init(&stages[c], kind, dtype, 0, R);
  if (s != IBP_OK || kind == IBP_STAGE_NONE)
    return s;
  ibp__sample smp;
  s = ibp__sample_jittered(sample_bytes ? sample_bytes : LEARN_SAMPLE_BYTES, R,
                           n, &smp);
  uint8_t *scratch = malloc(R);
  if (s == IBP_OK && !scratch)
    s = IBP_ERR_NO_MEMORY;
  const ibp__pack_ops *pack = ibp__pack();
  for (uint64_t j = 0; s == IBP_OK && j < smp.count; j++) {
    const uint8_t *t = (const uint8_t *)data + ibp__sample_at(&smp, j) * R;
    uint32_t id = 0;
    if (k > 1) {
      size_t least;
      ibp_stage_strip(&stages[0], t, scratch, R);
      id = ibp__best_cluster(pack, params, k, scratch, &least);
    }
    ibp_stage_count(&stages[id], t, R);
  }
  free(scratch);
  for (uint32_t c = 0; c < k && s == IBP_OK; c++)
    s = ibp_stage_finish(&stages[c]);
  return s;
}
