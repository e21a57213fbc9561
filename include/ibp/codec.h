/*
 * libibp host codec: Invariant Bit Packing (IBP) on the CPU.
 *
 * A region is n tensors of R bytes each (tensor i at byte i*R), followed by a
 * tail shorter than R that is never compressed.  Bits that hold the same value
 * in most tensors are described once by a Mask and a Bitval (R bytes each) and
 * removed from every chunk of a tensor that agrees with them.  The format is
 * defined in docs/FORMAT.md; this header is its host implementation:
 *
 *   statistics  per-bit "ones" counters over (a sample of) the tensors
 *   widths      the valid chunk widths, one list (ibp/chunk_widths.h)
 *   params      Mask/Bitval + chunk width, built from statistics
 *   search      threshold and chunk width that save the most bytes
 *   tensor      compressed size / compress / decompress of one tensor
 *   region      compress a whole region into R-byte slots + flag bits,
 *               decompress any byte range of it
 *
 * Threading: every function is reentrant; objects are not shared-mutable
 * (a const ibp_params may be used by any number of threads at once).  The
 * functions that take a `threads` argument start and join their own workers.
 *
 * Ownership: objects initialised by an *_init / *_build function own heap
 * memory and are released with the matching *_free, which accepts a zeroed
 * or already freed object.
 *
 * Errors: every fallible function returns an ibp_status.  The library never
 * prints, never exits and never aborts.
 *
 * Safety: the decoders never read outside the source span they are given and
 * never write outside [dst, dst+len); corrupted input yields IBP_ERR_CORRUPT.
 */
#ifndef IBP_CODEC_H
#define IBP_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "ibp/chunk_widths.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The format version this library writes, and the older ones it reads
 * (docs/FORMAT.md §8): version 1 is one Mask/Bitval per region, version 2
 * adds clusters (K > 1 Mask/Bitval pairs and a cluster id per tensor),
 * version 3 keeps version 2's coding and layout for every K (1 .. 256) and
 * takes the container's checksums from libxxhash (XXH64), version 4 adds
 * a coding stage per cluster after IBP (docs/FORMAT.md §9; a writer writes
 * version 3 when no cluster has one, version 4 otherwise). */
#define IBP_FORMAT_VERSION 4u           /* with a coding stage (ibp/stage.h) */
#define IBP_FORMAT_VERSION_XXH64 3u     /* written when no stage is on */
#define IBP_FORMAT_VERSION_CLUSTERS 2u  /* read only */
#define IBP_FORMAT_VERSION_SINGLE 1u    /* read only */
#define IBP_MAX_TENSOR_BYTES (1u << 20) /* 1 MiB */

/* ---- errors -------------------------------------------------------------- */

/* X(name, value, message): values are pinned, never reused. */
#define IBP_STATUS_LIST(X)                                                     \
  X(IBP_OK, 0, "success")                                                      \
  X(IBP_ERR_INVALID_ARGUMENT, 1, "invalid argument")                           \
  X(IBP_ERR_TENSOR_BYTES, 2, "tensor size must be 1 B to 1 MiB")               \
  X(IBP_ERR_CHUNK_BYTES, 3,                                                    \
    "chunk width must be " IBP_CHUNK_WIDTHS_TEXT " bytes")                     \
  X(IBP_ERR_THRESHOLD, 4, "threshold must lie in [0.5, 1.0]")                  \
  X(IBP_ERR_SAMPLE, 5, "sample fraction must lie in (0, 1]")                   \
  X(IBP_ERR_NO_TENSORS, 6, "no tensors to work on")                            \
  X(IBP_ERR_NO_MEMORY, 7, "out of memory")                                     \
  X(IBP_ERR_THREAD, 8, "could not start a worker thread")                      \
  X(IBP_ERR_CORRUPT, 9, "compressed data is corrupt")                          \
  X(IBP_ERR_RANGE, 10, "byte range lies outside the region")                   \
  X(IBP_ERR_BUFFER_TOO_SMALL, 11, "buffer too small")                          \
  X(IBP_ERR_UNSUPPORTED, 12, "not supported on this CPU or build")             \
  X(IBP_ERR_BAD_MAGIC, 13, "not an ibp container (bad magic)")                 \
  X(IBP_ERR_VERSION, 14, "unsupported container version")                      \
  X(IBP_ERR_TRUNCATED, 15, "container is truncated")                           \
  X(IBP_ERR_CHECKSUM, 16, "checksum mismatch: data is corrupt")                \
  X(IBP_ERR_MISMATCH, 17, "decoded bytes differ from the original")            \
  X(IBP_ERR_IO, 18, "read or write failed")

typedef enum ibp_status {
#define IBP_STATUS_ENUM_(name, value, msg) name = value,
  IBP_STATUS_LIST(IBP_STATUS_ENUM_)
#undef IBP_STATUS_ENUM_
} ibp_status;

/* "IBP_ERR_CORRUPT"; "IBP_ERR_UNKNOWN" for values outside the list. */
const char *ibp_status_name(ibp_status s);
/* Human-readable message; never NULL. */
const char *ibp_status_message(ibp_status s);

/* ---- CPU implementation -------------------------------------------------- */

/* The portable path runs everywhere; the BMI2 path uses pext/pdep and is
 * chosen by CPUID when the CPU has BMI2 and it is fast (not AMD before
 * Zen 3, where pext/pdep are microcoded).  Both give identical bytes. */
typedef enum ibp_impl {
  IBP_IMPL_AUTO = 0,
  IBP_IMPL_PORTABLE = 1,
  IBP_IMPL_BMI2 = 2,
} ibp_impl;

/* The path in use by this process. */
ibp_impl ibp_impl_active(void);
/* Nonzero when `impl` can run on this CPU (AUTO and PORTABLE always can). */
int ibp_impl_available(ibp_impl impl);
/* Select the path process-wide (AUTO = CPUID choice).  Meant for tests and
 * benchmarks; not to be called while other threads use the codec.
 * IBP_ERR_UNSUPPORTED when the CPU lacks it. */
ibp_status ibp_impl_select(ibp_impl impl);
/* "auto", "portable", "bmi2". */
const char *ibp_impl_name(ibp_impl impl);

/* ---- sampling ------------------------------------------------------------ */

/* Which tensors the statistics (and the search) look at.  A zeroed struct
 * means "every tensor".  `fraction` in (0,1] keeps about that share of the
 * tensors, evenly spaced; `stride` >= 1 keeps tensors 0, stride, 2*stride...
 * When both are set, stride wins. */
typedef struct ibp_sampling {
  double fraction;
  uint64_t stride;
} ibp_sampling;

/* ---- per-bit statistics -------------------------------------------------- */

typedef struct ibp_bitstats {
  uint32_t tensor_bytes; /* R */
  uint64_t tensors;      /* tensors counted so far */
  uint64_t *ones;        /* 8*R counters: tensors whose bit k is 1 */
} ibp_bitstats;

/* R in [1, IBP_MAX_TENSOR_BYTES]. */
ibp_status ibp_bitstats_init(ibp_bitstats *st, uint32_t tensor_bytes);
void ibp_bitstats_free(ibp_bitstats *st);

/* Counts the bits of the sampled tensors among `n` tensors at `data`
 * (n*R bytes) and adds them to `st`; `threads` 0 = one per CPU. */
ibp_status ibp_bitstats_add(ibp_bitstats *st, const void *data, uint64_t n,
                            const ibp_sampling *sampling, unsigned threads);

/* Share of bits whose majority value is held by >= `share` of the counted
 * tensors (e.g. 0.8 for the paper's "80p-invariant" bits). */
double ibp_bitstats_invariant_fraction(const ibp_bitstats *st, double share);

/* The per-bit entropy limit: the sum over the 8R bit positions of the
 * binary entropy of each position's empirical share of ones, in bits per
 * tensor.  Coding every bit position at its own entropy would store a
 * tensor in this many bits; 1 - limit / (8R) is the share it would save.
 * 0 when no tensor was counted. */
double ibp_bitstats_entropy_bits(const ibp_bitstats *st);

/* ---- parameters (Mask / Bitval) ------------------------------------------ */

typedef struct ibp_params {
  uint32_t tensor_bytes; /* R */
  uint32_t chunk_bytes;  /* c: one of IBP_CHUNK_WIDTHS (ibp/chunk_widths.h) */
  double threshold;      /* agreement share the mask was built with */
  uint8_t *mask;         /* R bytes: 1 = invariant bit */
  uint8_t *bitval;       /* R bytes: value of invariant bits, 0 elsewhere */
} ibp_params;

/* Bit k is invariant when at least ceil(threshold * tensors) counted tensors
 * agree on its majority value (ties count as 0); threshold in [0.5, 1.0]. */
ibp_status ibp_params_build(const ibp_bitstats *st, double threshold,
                            uint32_t chunk_bytes, ibp_params *out);

/* Params from explicit Mask/Bitval (copied; bitval is ANDed with mask). */
ibp_status ibp_params_from_masks(uint32_t tensor_bytes, uint32_t chunk_bytes,
                                 const void *mask, const void *bitval,
                                 ibp_params *out);

void ibp_params_free(ibp_params *p);

/* IBP_OK when p is well formed (R, chunk width, buffers, bitval within mask).
 */
ibp_status ibp_params_check(const ibp_params *p);

/* ---- threshold and chunk search ------------------------------------------ */

/* chunk_bytes 0 = choose among IBP_CHUNK_WIDTHS; threshold < 0 = search.  The
 * search measures the exact bytes stored (bitmap and byte rounding included)
 * for thresholds over [0.50, 1.00]: the whole grid on a scout sample of
 * eval_max_bytes/8 of tensors, then thresholds within 0.05 of the scout's
 * best on eval_max_bytes (0 = 64 MiB) of tensors, then its finalists on 16
 * times as much.  Samples are spread evenly over the data; when the data is
 * smaller than a sample, the sample is every tensor. */
typedef struct ibp_search_options {
  uint32_t chunk_bytes;
  double threshold;
  ibp_sampling sampling; /* for the statistics */
  uint64_t eval_max_bytes;
  unsigned threads; /* 0 = one per CPU */
} ibp_search_options;

#define IBP_REPORT_THRESHOLDS 8

typedef struct ibp_search_report {
  uint64_t tensors;            /* tensors in the data */
  uint64_t stat_tensors;       /* tensors counted for the statistics */
  uint64_t eval_tensors;       /* tensors the final search stage measured */
  uint64_t table_tensors;      /* tensors the table below was measured on */
  double invariant80_fraction; /* bits invariant in >= 80% of tensors */
  /* saved share of the evaluated tensors' bytes, per chunk width (index i:
   * ibp_chunk_width(i)) at the fixed thresholds below; negative when not
   * evaluated. */
  double table_thresholds[IBP_REPORT_THRESHOLDS];
  double table_saved[IBP_CHUNK_WIDTH_COUNT][IBP_REPORT_THRESHOLDS];
  /* best found per chunk width (threshold, saved share); -1 if skipped */
  double best_threshold[IBP_CHUNK_WIDTH_COUNT];
  double best_saved[IBP_CHUNK_WIDTH_COUNT];
} ibp_search_report;

/* Searches Mask/Bitval for the `n` tensors of R bytes at `data`.
 * `report` may be NULL. */
ibp_status ibp_search(const void *data, uint64_t n, uint32_t tensor_bytes,
                      const ibp_search_options *opt, ibp_params *out,
                      ibp_search_report *report);

/* ---- one tensor ---------------------------------------------------------- */

/* Bytes the tensor takes in its slot: its compressed length when that is
 * strictly shorter than R, else R (stored raw). */
size_t ibp_compressed_size(const ibp_params *p, const void *tensor);

/* Writes the tensor into its R-byte slot: compressed when strictly shorter
 * than R, else a raw copy.  Bytes of the slot past the returned length may
 * be overwritten (their content is unspecified).  Returns the length
 * written; *compressed (may be NULL) is set to 1 or 0. */
size_t ibp_compress_tensor(const ibp_params *p, const void *tensor, void *slot,
                           int *compressed);

/* Decodes one tensor from `src` (src_len readable bytes; a compressed
 * tensor may need fewer than R) into dst (R bytes).  Raw tensors need
 * src_len >= R.  IBP_ERR_CORRUPT when the stream runs past src_len, reaches
 * R bytes, or has nonzero padding bits. */
ibp_status ibp_decompress_tensor(const ibp_params *p, const void *src,
                                 size_t src_len, int compressed, void *dst);

/* Length in bytes of the compressed tensor at src (parsed from its bitmap
 * without decoding).  IBP_ERR_CORRUPT as for ibp_decompress_tensor. */
ibp_status ibp_compressed_length(const ibp_params *p, const void *src,
                                 size_t src_len, size_t *len);

/* Decodes bytes [off, off+len) of one tensor (0 <= off, off+len <= R).
 * Only the part of the stream up to the window is parsed, so corruption
 * after it is detected only by windows that reach the end. */
ibp_status ibp_decompress_tensor_part(const ibp_params *p, const void *src,
                                      size_t src_len, int compressed,
                                      uint32_t off, uint32_t len, void *dst);

/* ---- region -------------------------------------------------------------- */

/* A compressed region as the GPU sees it: `bytes` bytes of slots laid out
 * like the original (slot i at i*R, the tail raw at n*R), and one flag bit
 * per tensor (bit i%8 of flags[i/8], 1 = compressed). */
typedef struct ibp_region {
  const ibp_params *params; /* K params for the *_clustered functions */
  const uint8_t *slots;
  uint64_t bytes;
  const uint8_t *flags;
} ibp_region;

typedef struct ibp_region_summary {
  uint64_t tensors;    /* n = bytes / R */
  uint64_t tail_bytes; /* bytes % R, kept raw */
  uint64_t tensors_compressed;
  uint64_t compressed_bytes; /* sum of slot lengths + tail */
  uint64_t metadata_bytes;   /* K x (Mask + Bitval) + flag bits + ids */
  uint64_t tensors_staged;   /* of tensors_compressed, those stored in a
                                cluster whose coding stage is on: the
                                tensors a decoder runs the stage on
                                (docs/FORMAT.md §9.5); 0 without stages */
} ibp_region_summary;

/* Number of flag bytes for a region of `bytes` bytes: ceil(n / 8). */
uint64_t ibp_region_flag_bytes(const ibp_params *p, uint64_t bytes);

/* Compresses `bytes` bytes at src into `slots` (bytes long, must not overlap
 * src) and `flags` (ibp_region_flag_bytes long; fully written).
 * `summary` may be NULL. */
ibp_status ibp_compress_region(const ibp_params *p, const void *src,
                               uint64_t bytes, void *slots, uint8_t *flags,
                               unsigned threads, ibp_region_summary *summary);

/* The same with K >= 1 Mask/Bitval pairs params[0..k-1] (same R and chunk
 * width): each tensor is stored with the pair that stores it in the fewest
 * bytes (ties: the lowest id), and its id is written to `ids`
 * (ibp_cluster_id_bytes(k, n) bytes, fully written; may be NULL when
 * k == 1).  k == 1 gives exactly the bytes of ibp_compress_region. */
ibp_status ibp_compress_region_clustered(const ibp_params *params, uint32_t k,
                                         const void *src, uint64_t bytes,
                                         void *slots, uint8_t *flags,
                                         uint8_t *ids, unsigned threads,
                                         ibp_region_summary *summary);

/* What ibp_compress_region_clustered would store, without writing
 * anything: fills `summary` (its compressed_bytes is the exact figure). */
ibp_status ibp_measure_region_clustered(const ibp_params *params, uint32_t k,
                                        const void *src, uint64_t bytes,
                                        unsigned threads,
                                        ibp_region_summary *summary);

/* Decodes bytes [off, off+len) of the original region into dst: partial
 * first and last tensors, raw tensors and the raw tail included. */
ibp_status ibp_decompress_range(const ibp_region *r, uint64_t off, uint64_t len,
                                void *dst);

/* The same for a region compressed with k clusters (r->params: k params;
 * ids: the cluster ids, NULL only when k == 1).  IBP_ERR_CORRUPT for an id
 * >= k. */
ibp_status ibp_decompress_range_clustered(const ibp_region *r,
                                          const uint8_t *ids, uint32_t k,
                                          uint64_t off, uint64_t len,
                                          void *dst);

/* ---- clusters (docs/FORMAT.md §4) --------------------------------------- */

/* A region may carry K Mask/Bitval pairs ("clusters", 1 <= K <=
 * IBP_MAX_CLUSTERS) and, when K > 1, one cluster id per tensor saying
 * which pair stores it.  Ids are ibp_cluster_id_bits(K) bits each, packed
 * LSB-first: tensor i's id is bits [i*b, (i+1)*b) of the id bytes. */
#define IBP_MAX_CLUSTERS 256u

/* 0 for K = 1, else the smallest of 1, 2, 4, 8 with 2^bits >= K; 0 also
 * for K outside [1, IBP_MAX_CLUSTERS]. */
uint32_t ibp_cluster_id_bits(uint32_t k);
/* Bytes of the ids of n tensors: ceil(n * ibp_cluster_id_bits(k) / 8). */
uint64_t ibp_cluster_id_bytes(uint32_t k, uint64_t n);
/* Tensor i's cluster id (0 when k <= 1 or ids is NULL). */
uint32_t ibp_cluster_id(const uint8_t *ids, uint32_t k, uint64_t i);

/* The pair of params[0 .. k-1] (same R and chunk width, k <= IBP_MAX_CLUSTERS;
 * 0 counts as 1) that stores `tensor` (R bytes) in the fewest bytes, the
 * lowest id on ties: the choice ibp_compress_region_clustered makes.
 * *stored (may be NULL) gets that pair's ibp_compressed_size. */
uint32_t ibp_cluster_best(const ibp_params *params, uint32_t k,
                          const void *tensor, size_t *stored);

/* K params with the same R and chunk width, owned. */
typedef struct ibp_clusters {
  uint32_t count;
  ibp_params *params;
} ibp_clusters;

void ibp_clusters_free(ibp_clusters *cl);

/* IBP_OK when the k params are well formed and share R and chunk width
 * (IBP_ERR_INVALID_ARGUMENT when k is 0 or above IBP_MAX_CLUSTERS). */
ibp_status ibp_clusters_check(const ibp_params *params, uint32_t k);

/* Metadata bytes of a region of n tensors with K clusters: K x 2R, the
 * flags and the ids. */
uint64_t ibp_cluster_metadata_bytes(uint32_t k, uint32_t tensor_bytes,
                                    uint64_t n);

typedef struct ibp_cluster_options {
  uint32_t clusters;        /* 0 = auto (the K of 1, 2, 4, ... up to
                               max_clusters that stores the region in the
                               fewest bytes, metadata included); else
                               exactly this many (1 .. IBP_MAX_CLUSTERS)
                               unless they would store it in more bytes
                               than one cluster does */
  uint32_t max_clusters;    /* auto's bound; 0 = 16 */
  uint64_t train_max_bytes; /* tensors the clustering learns on; 0 = 8 MiB */
  uint64_t eval_max_bytes;  /* tensors each K is measured on (4 times as
                               many confirm the winner); 0 = 16 MiB */
  unsigned threads;         /* 0 = one per CPU */
} ibp_cluster_options;

#define IBP_REPORT_CLUSTER_STEPS 9 /* K = 1, 2, 4, ..., 256 */

typedef struct ibp_cluster_report {
  uint32_t steps;                            /* entries below */
  uint32_t k[IBP_REPORT_CLUSTER_STEPS];      /* K tried, ascending (1 first) */
  uint64_t stored[IBP_REPORT_CLUSTER_STEPS]; /* estimated stored bytes of
                                                the n tensors, from the
                                                eval sample */
  uint64_t metadata[IBP_REPORT_CLUSTER_STEPS]; /* metadata bytes at K */
  uint64_t eval_tensors; /* tensors each K was measured on */
  uint32_t chosen;       /* K returned */
} ibp_cluster_report;

/* Learns K Mask/Bitval pairs for the n tensors of R bytes at data, starting
 * from `base` (the single-cluster result of ibp_search, whose chunk width
 * every cluster keeps).  Tensors are split by bit similarity and then
 * re-assigned, over a few rounds, to the pair that stores them in the
 * fewest bytes while each pair is rebuilt from its tensors; each K is
 * measured in exact stored bytes.  out->params[0] .. [count-1]; count 1
 * (a copy of base) when no K > 1 saves bytes.  `report` may be NULL. */
ibp_status ibp_cluster_search(const void *data, uint64_t n,
                              const ibp_params *base,
                              const ibp_cluster_options *opt, ibp_clusters *out,
                              ibp_cluster_report *report);

/* ---- the GPU layout (packed) --------------------------------------------- */

/* Offsets of the packed GPU layout (docs/FORMAT.md §3) of a compressed
 * region: offsets[i] (n+1 entries, n = bytes / R) is where tensor i's
 * stream starts, offsets[i+1] - offsets[i] its length (0 for a tensor
 * stored raw), offsets[n] the packed size.  IBP_ERR_CORRUPT when a slot
 * marked compressed does not hold a valid stream. */
ibp_status ibp_region_pack_offsets(const ibp_region *r, uint64_t *offsets);

/* The same for a region compressed with k clusters (as for
 * ibp_decompress_range_clustered).  ibp_region_pack needs no ids. */
ibp_status ibp_region_pack_offsets_clustered(const ibp_region *r,
                                             const uint8_t *ids, uint32_t k,
                                             uint64_t *offsets);

/* Copies the compressed streams of r to packed (offsets[n] bytes) at the
 * offsets ibp_region_pack_offsets computed. */
ibp_status ibp_region_pack(const ibp_region *r, const uint64_t *offsets,
                           void *packed);

#ifdef __cplusplus
}
#endif
#endif /* IBP_CODEC_H */
