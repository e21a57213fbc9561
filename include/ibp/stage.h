/*
 * libibp coding stages: a second coding step after IBP, per cluster
 * (docs/FORMAT.md §9).
 *
 * A stage owns a fixed set of bits of every tensor of a cluster, its
 * **field** (the exponent stage: the sign and exponent bits of each bf16,
 * float16 or float32 value).  IBP codes the tensor with the field's bits
 * zeroed (the cluster's Mask covers them and its Bitval is 0 there, so
 * they cost IBP nothing); the stage codes the field after the IBP part of
 * the same stream with a table learned per cluster.  Every tensor stays
 * decodable on its own.
 *
 * Stages are one list (IBP_STAGE_LIST); a new stage is a row there and its
 * implementation behind the table in codec/stage_internal.h
 * (docs/ARCHITECTURE.md, "Where to change what").
 *
 * Threading: a finished (or read) ibp_stage is immutable and may be used
 * by any number of threads; ibp_stage_count mutates it.  No heap memory:
 * an ibp_stage is a plain value.
 *
 * Safety: the decoders never read outside the source span they are given
 * and never write outside the destination tensor; corrupt input yields
 * IBP_ERR_CORRUPT.
 */
#ifndef IBP_STAGE_H
#define IBP_STAGE_H

#include "ibp/codec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, text): values are pinned (they are stored in containers). */
#define IBP_STAGE_LIST(X)                                                      \
  X(IBP_STAGE_NONE, 0, "none")                                                 \
  X(IBP_STAGE_EXP, 1, "exp")

typedef enum ibp_stage_kind {
#define IBP_STAGE_ENUM_(name, value, text) name = value,
  IBP_STAGE_LIST(IBP_STAGE_ENUM_)
#undef IBP_STAGE_ENUM_
} ibp_stage_kind;

/* The value types whose sign+exponent field the exponent stage codes.
 * X(name, value, text, value bytes, field's lowest bit, field bits);
 * values pinned (stored in containers). */
#define IBP_DTYPE_LIST(X)                                                      \
  X(IBP_DTYPE_NONE, 0, "none", 0, 0, 0)                                        \
  X(IBP_DTYPE_BF16, 1, "bf16", 2, 7, 9)                                        \
  X(IBP_DTYPE_F16, 2, "f16", 2, 10, 6)                                         \
  X(IBP_DTYPE_F32, 3, "f32", 4, 23, 9)

typedef enum ibp_dtype {
#define IBP_DTYPE_ENUM_(name, value, text, bytes, lo, bits) name = value,
  IBP_DTYPE_LIST(IBP_DTYPE_ENUM_)
#undef IBP_DTYPE_ENUM_
} ibp_dtype;

#define IBP_STAGE_MAX_SYMBOLS 512u /* 2^9: the widest field */
#define IBP_STAGE_MAX_CODE_BITS 11u
#define IBP_STAGE_SEGMENT_LOG2_MIN 4u
#define IBP_STAGE_SEGMENT_LOG2_MAX 20u
#define IBP_STAGE_SEGMENT_LOG2_DEFAULT 8u /* 256 values per segment */
/* Largest serialized stage descriptor (kind byte + exp table). */
#define IBP_STAGE_DESCRIPTOR_MAX_BYTES (3u + (IBP_STAGE_MAX_SYMBOLS + 2) / 2)

/* One cluster's stage.  Set kind/dtype/segment_log2 with ibp_stage_init,
 * count tensors, then ibp_stage_finish; or ibp_stage_read. */
typedef struct ibp_stage {
  uint32_t kind;         /* ibp_stage_kind */
  uint32_t dtype;        /* ibp_dtype (IBP_STAGE_EXP) */
  uint32_t segment_log2; /* values per sync segment: 2^segment_log2 */
  uint32_t symbols;      /* 2^field bits */
  /* code length in bits per symbol, [symbols] = the escape; 0 = no code */
  uint8_t lengths[IBP_STAGE_MAX_SYMBOLS + 1];
  /* derived: per symbol the bits written (escape + raw symbol for an
   * uncoded one) and their count (0: none); the most bits
   * one value takes; the decode table (symbol | bits << 10, 0 = no code)
   * indexed by the next IBP_STAGE_MAX_CODE_BITS stream bits */
  uint32_t enc[IBP_STAGE_MAX_SYMBOLS];
  uint8_t enc_len[IBP_STAGE_MAX_SYMBOLS];
  uint8_t longest;
  uint16_t decode[1u << IBP_STAGE_MAX_CODE_BITS];
  uint64_t counts[IBP_STAGE_MAX_SYMBOLS]; /* ibp_stage_count */
} ibp_stage;

/* "none", "exp"; "?" for others. */
const char *ibp_stage_name(uint32_t kind);
/* "bf16", "f16", "f32", "none"; "?" for others. */
const char *ibp_dtype_name(uint32_t dtype);
/* Bytes of one value of the dtype (0 for none or unknown). */
uint32_t ibp_dtype_bytes(uint32_t dtype);

/* Starts a stage for tensors of R bytes.  IBP_STAGE_NONE takes no dtype;
 * IBP_STAGE_EXP needs a dtype whose value size divides R and
 * segment_log2 in [IBP_STAGE_SEGMENT_LOG2_MIN, _MAX] (0 = the default).
 * IBP_ERR_INVALID_ARGUMENT otherwise. */
ibp_status ibp_stage_init(ibp_stage *st, uint32_t kind, uint32_t dtype,
                          uint32_t segment_log2, uint32_t tensor_bytes);

/* Adds one tensor (R bytes) to the stage's statistics. */
void ibp_stage_count(ibp_stage *st, const void *tensor, uint32_t tensor_bytes);

/* Builds the stage's table from what was counted (the exponent stage: a
 * canonical Huffman code of at most IBP_STAGE_MAX_CODE_BITS bits per
 * symbol, symbols never counted sent as an escape code + raw bits). */
ibp_status ibp_stage_finish(ibp_stage *st);

/* Bits of the tensor the stage owns: sets them in `field` (R bytes). */
void ibp_stage_field(const ibp_stage *st, uint8_t *field,
                     uint32_t tensor_bytes);

/* Copies the tensor with the stage's field zeroed (what IBP codes). */
void ibp_stage_strip(const ibp_stage *st, const void *tensor, void *out,
                     uint32_t tensor_bytes);

/* Makes p fit the stage: its Mask covers the field, Bitval 0 there. */
void ibp_stage_fit_params(const ibp_stage *st, ibp_params *p);

/* IBP_OK when p fits the stage (Mask covers the field, Bitval 0 there),
 * IBP_ERR_CORRUPT otherwise; always IBP_OK for none. */
ibp_status ibp_stage_check_params(const ibp_stage *st, const ibp_params *p);

/* Serialized size of the stage's descriptor (docs/FORMAT.md §9). */
size_t ibp_stage_descriptor_bytes(const ibp_stage *st);
/* Writes the descriptor (ibp_stage_descriptor_bytes bytes). */
void ibp_stage_write(const ibp_stage *st, uint8_t *out);
/* Reads and validates a descriptor from src[0, avail) for tensors of R
 * bytes; *used gets its size.  IBP_ERR_CORRUPT when malformed. */
ibp_status ibp_stage_read(ibp_stage *st, const uint8_t *src, size_t avail,
                          uint32_t tensor_bytes, size_t *used);

/* ---- one tensor, IBP + stage (st NULL or kind none: IBP alone) ---------- */

/* As ibp_compressed_size / ibp_compress_tensor / ibp_decompress_tensor /
 * ibp_compressed_length (codec.h) with the stage after IBP.  p must fit
 * the stage (ibp_stage_fit_params); the compressing functions return 0
 * otherwise, the others IBP_ERR_INVALID_ARGUMENT. */
size_t ibp_compressed_size_staged(const ibp_params *p, const ibp_stage *st,
                                  const void *tensor);
size_t ibp_compress_tensor_staged(const ibp_params *p, const ibp_stage *st,
                                  const void *tensor, void *slot,
                                  int *compressed);
ibp_status ibp_decompress_tensor_staged(const ibp_params *p,
                                        const ibp_stage *st, const void *src,
                                        size_t src_len, int compressed,
                                        void *dst);
ibp_status ibp_compressed_length_staged(const ibp_params *p,
                                        const ibp_stage *st, const void *src,
                                        size_t src_len, size_t *len);

/* ---- regions ------------------------------------------------------------- */

/* As ibp_compress_region_clustered / ibp_measure_region_clustered with
 * stages[0 .. k-1] (NULL: none); each tensor is stored with the cluster
 * that stores it in the fewest bytes, its stage included. */
ibp_status ibp_compress_region_staged(const ibp_params *params,
                                      const ibp_stage *stages, uint32_t k,
                                      const void *src, uint64_t bytes,
                                      void *slots, uint8_t *flags, uint8_t *ids,
                                      unsigned threads,
                                      ibp_region_summary *summary);
ibp_status ibp_measure_region_staged(const ibp_params *params,
                                     const ibp_stage *stages, uint32_t k,
                                     const void *src, uint64_t bytes,
                                     unsigned threads,
                                     ibp_region_summary *summary);

/* As ibp_decompress_range_clustered / ibp_region_pack_offsets_clustered
 * for a region compressed with stages[0 .. k-1] (NULL: none). */
ibp_status ibp_decompress_range_staged(const ibp_region *r, const uint8_t *ids,
                                       uint32_t k, const ibp_stage *stages,
                                       uint64_t off, uint64_t len, void *dst);
ibp_status ibp_region_pack_offsets_staged(const ibp_region *r,
                                          const uint8_t *ids, uint32_t k,
                                          const ibp_stage *stages,
                                          uint64_t *offsets);

/* Learns one stage of `kind`/`dtype` per cluster of params[0 .. k-1] (which
 * must already fit it: learned on stripped tensors): counts the tensors of
 * an even sample of at most `sample_bytes` (0 = 64 MiB) of the n tensors at
 * data, each in the cluster that stores its stripped form best, then
 * finishes every stage. */
ibp_status ibp_stage_learn(const ibp_params *params, uint32_t k, uint32_t kind,
                           uint32_t dtype, const void *data, uint64_t n,
                           uint64_t sample_bytes, unsigned threads,
                           ibp_stage *stages);

/* ---- the choice (codec/stage_choose.c) ----------------------------------
 *
 * Whether a region is stored with the exponent stage, and how: the one
 * decision `ibp analyze`, `ibp compress` and libibp's region preparation
 * make.  For each value type whose values divide R (or the one asked), IBP's
 * search -- and, unless cluster.clusters is 1, its cluster search, for the
 * best type only -- on the tensors with the type's field zeroed, the pairs
 * made to fit the stage, a stage per cluster learned on the tensors, and
 * the exact stored bytes of the tensors looked at: all of them, or an even
 * sample of at most sample_bytes of whole tensors (then without the tail).
 * The type that stores them in the fewest bytes, metadata included, is the
 * choice -- ranked, when several types fit, on a scout of a quarter of
 * those tensors (at most 1 MiB, its search measuring on it alone), the
 * best then measured on all of them; ibp_stage_pays then compares it with
 * IBP alone on the same tensors.
 *
 * judge_apart: when the sample is not every tensor, a choice with the
 * stage on is judged on tensors it was not learnt on (a sample judges
 * badly what it learnt: an even sample may hold one kind of tensor only).
 * Per gap between two tensors of the sample, one other tensor of the gap,
 * picked at random (a fixed seed); total and versus_total are then the
 * whole region's stored bytes (bytes / tensor_bytes tensors, no tail) with
 * the choice and with IBP alone, estimated: the tensors learnt on as
 * measured, the others as those judged, metadata for the whole region;
 * measured_bytes the whole region's tensors' (docs/FORMAT.md §9.5). */
typedef struct ibp_stage_choose_options {
  uint32_t dtype;              /* 0: every type; else that one only */
  ibp_search_options search;   /* IBP's search on the stripped tensors */
  ibp_cluster_options cluster; /* clusters 1: one pair, no cluster search */
  uint64_t sample_bytes;       /* 0: every tensor (and the tail) */
  const ibp_clusters *versus;  /* IBP alone's pairs, measured on the same
                                  tensors into versus_total (NULL: not) */
  int judge_apart;             /* 1: a sampled choice judged on other
                                  tensors (above; needs versus) */
  unsigned threads;            /* learning and measuring; 0 = per CPU */
} ibp_stage_choose_options;

typedef struct ibp_stage_choice {
  uint32_t dtype;           /* the type measured; IBP_DTYPE_NONE: none fits */
  ibp_clusters clusters;    /* K pairs, fitting the stages (heap) */
  ibp_stage *stages;        /* K stages (heap) */
  ibp_region_summary exact; /* over the tensors looked at (learnt on) */
  uint64_t measured_bytes;  /* their bytes (judged apart: the region's) */
  uint64_t total;           /* exact.compressed_bytes + metadata_bytes */
  uint64_t versus_total;    /* the same with o->versus's pairs alone */
  uint64_t judged_tensors;  /* tensors judged apart (0: not judged so) */
  uint64_t stage_tensors;   /* of measured_bytes' tensors, those the stage
                               codes (exact.tensors_staged; judged apart,
                               estimated as total is): what its decode is
                               charged for (ibp_profile_region_copy) */
} ibp_stage_choice;

/* Measures the choice for the `bytes` bytes at data, tensors of
 * tensor_bytes.  IBP_OK with out->dtype NONE when no type fits; an error
 * from the search or the allocations otherwise (out then zeroed).  Free
 * with ibp_stage_choice_free. */
ibp_status ibp_stage_choose(const void *data, uint64_t bytes,
                            uint32_t tensor_bytes,
                            const ibp_stage_choose_options *o,
                            ibp_stage_choice *out);

/* The pick: 1 when c stores the tensors it looked at in fewer bytes,
 * metadata included, than IBP alone does (ibp_total, the same tensors). */
int ibp_stage_pays(const ibp_stage_choice *c, uint64_t ibp_total);

void ibp_stage_choice_free(ibp_stage_choice *c);

/* For a writer that compresses many tensors with the same pairs (libibp):
 * ibp_cluster_best and ibp_compress_tensor_staged with the caller's
 * scratch tensor (R bytes), stages[0 .. k-1] fitting their pairs
 * (unchecked; NULL: none).  The slot holds R bytes. */
uint32_t ibp_cluster_best_staged(const ibp_params *params,
                                 const ibp_stage *stages, uint32_t k,
                                 const void *tensor, void *scratch,
                                 size_t *stored);
size_t ibp_compress_tensor_staged_with(const ibp_params *p, const ibp_stage *st,
                                       const void *tensor, void *slot,
                                       void *scratch, int *compressed);

/* Bytes of metadata the stages add to a region (their descriptors). */
uint64_t ibp_stage_metadata_bytes(const ibp_stage *stages, uint32_t k);

#ifdef __cplusplus
}
#endif
#endif /* IBP_STAGE_H */
