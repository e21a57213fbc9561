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

#define IBP_FORMAT_VERSION 1u
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
  const ibp_params *params;
  const uint8_t *slots;
  uint64_t bytes;
  const uint8_t *flags;
} ibp_region;

typedef struct ibp_region_summary {
  uint64_t tensors;    /* n = bytes / R */
  uint64_t tail_bytes; /* bytes % R, kept raw */
  uint64_t tensors_compressed;
  uint64_t compressed_bytes; /* sum of slot lengths + tail */
  uint64_t metadata_bytes;   /* Mask + Bitval + flag bits */
} ibp_region_summary;

/* Number of flag bytes for a region of `bytes` bytes: ceil(n / 8). */
uint64_t ibp_region_flag_bytes(const ibp_params *p, uint64_t bytes);

/* Compresses `bytes` bytes at src into `slots` (bytes long, must not overlap
 * src) and `flags` (ibp_region_flag_bytes long; fully written).
 * `summary` may be NULL. */
ibp_status ibp_compress_region(const ibp_params *p, const void *src,
                               uint64_t bytes, void *slots, uint8_t *flags,
                               unsigned threads, ibp_region_summary *summary);

/* Decodes bytes [off, off+len) of the original region into dst: partial
 * first and last tensors, raw tensors and the raw tail included. */
ibp_status ibp_decompress_range(const ibp_region *r, uint64_t off, uint64_t len,
                                void *dst);

/* ---- the GPU layout (packed) --------------------------------------------- */

/* Offsets of the packed GPU layout (docs/FORMAT.md §3) of a compressed
 * region: offsets[i] (n+1 entries, n = bytes / R) is where tensor i's
 * stream starts, offsets[i+1] - offsets[i] its length (0 for a tensor
 * stored raw), offsets[n] the packed size.  IBP_ERR_CORRUPT when a slot
 * marked compressed does not hold a valid stream. */
ibp_status ibp_region_pack_offsets(const ibp_region *r, uint64_t *offsets);

/* Copies the compressed streams of r to packed (offsets[n] bytes) at the
 * offsets ibp_region_pack_offsets computed. */
ibp_status ibp_region_pack(const ibp_region *r, const uint64_t *offsets,
                           void *packed);

#ifdef __cplusplus
}
#endif
#endif /* IBP_CODEC_H */
