/*
 * The codec seam: what a coding stage after IBP implements (docs/FORMAT.md
 * §9).  stage.c composes IBP with the stage of a tensor's cluster and
 * dispatches on ibp_stage.kind through ibp__stage_ops(); a stage's file
 * (stage_exp.c) fills one table.  Shared by codec files only.
 */
#ifndef IBP_CODEC_STAGE_INTERNAL_H
#define IBP_CODEC_STAGE_INTERNAL_H

#include "ibp/stage.h"
#include "internal.h"

typedef struct ibp__stage_ops {
  /* Checks dtype / segment_log2 against R and fills what init derives. */
  ibp_status (*init)(ibp_stage *st, uint32_t tensor_bytes);
  void (*count)(ibp_stage *st, const uint8_t *t, uint32_t R);
  ibp_status (*finish)(ibp_stage *st);
  /* Sets the field's bits in field (R bytes). */
  void (*field)(const ibp_stage *st, uint8_t *field, uint32_t R);
  /* Copy of t with the field zeroed. */
  void (*strip)(const ibp_stage *st, const uint8_t *t, uint8_t *out,
                uint32_t R);
  /* Bits the stage writes for tensor t (more than 8 R when it cannot). */
  uint64_t (*bits)(const ibp_stage *st, const uint8_t *t, uint32_t R);
  /* Bits of the field in a tensor of R bytes. */
  uint64_t (*field_bits)(const ibp_stage *st, uint32_t R);
  /* Writes those bits from bit `at` of out, keeping out's bits below
   * `at`; returns the bit where they end (the last byte zero-padded), or
   * limit + 1 as soon as they would pass bit `limit` (out's bytes from
   * at / 8 then unspecified).  Writes below byte (limit + 7) / 8 only. */
  uint64_t (*encode)(const ibp_stage *st, const uint8_t *t, uint32_t R,
                     uint8_t *out, uint64_t at, uint64_t limit);
  /* Reads the stage's bits from bit *pos of src[0, src_len), ORs the
   * field into dst (R bytes; NULL: parse only) and advances *pos.  Never
   * reads outside src; IBP_ERR_CORRUPT on a malformed stream. */
  ibp_status (*decode)(const ibp_stage *st, const uint8_t *src, size_t src_len,
                       size_t *pos, uint8_t *dst, uint32_t R);
  /* Descriptor bytes after the kind byte; write; read + validate. */
  size_t (*table_bytes)(const ibp_stage *st);
  void (*write)(const ibp_stage *st, uint8_t *out);
  ibp_status (*read)(ibp_stage *st, const uint8_t *src, size_t avail,
                     uint32_t R);
} ibp__stage_ops;

extern const ibp__stage_ops ibp__stage_exp;

/* The ops of a stage; NULL for none or an unknown kind. */
const ibp__stage_ops *ibp__stage_ops_of(const ibp_stage *st);

/* Nonzero when st is NULL or none. */
static inline int ibp__stage_off(const ibp_stage *st) {
  return !st || st->kind == IBP_STAGE_NONE;
}

/* Per-tensor composition with a caller's scratch tensor (R bytes): the
 * stored size and the compress of region.c / cluster.c's hot loops. */
size_t ibp__staged_size(const ibp__pack_ops *pack, const ibp_params *p,
                        const ibp_stage *st, const uint8_t *t,
                        uint8_t *scratch);
size_t ibp__staged_compress(const ibp__pack_ops *pack, const ibp_params *p,
                            const ibp_stage *st, const uint8_t *t,
                            uint8_t *slot, uint8_t *scratch);

/* The cluster of params/stages[0 .. k-1] that stores t in the fewest
 * bytes (ties: the lowest id) and that size; stages may be NULL. */
uint32_t ibp__best_cluster_staged(const ibp__pack_ops *pack,
                                  const ibp_params *p, const ibp_stage *stages,
                                  uint32_t k, const uint8_t *t,
                                  uint8_t *scratch, size_t *stored);

#endif /* IBP_CODEC_STAGE_INTERNAL_H */
