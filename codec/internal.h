/*
 * Declarations shared by the files of codec/ (prefix ibp__).  Not installed;
 * nothing outside codec/ includes this.
 */
#ifndef IBP_CODEC_INTERNAL_H
#define IBP_CODEC_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "ibp/codec.h"
/* XXH64_state_t as a complete type (a stack object, no allocation) */
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

/* Loads and stores of little-endian 64-bit words at any alignment.  The
 * codec assumes a little-endian host (checked at compile time). */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libibp's codec assumes a little-endian host"
#endif

static inline uint64_t ibp__load64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static inline void ibp__store64(uint8_t *p, uint64_t v) {
  memcpy(p, &v, 8);
}

/* Loads n < 8 bytes into the low bytes of a word; the rest are zero. */
static inline uint64_t ibp__load_partial(const uint8_t *p, unsigned n) {
  uint64_t v = 0;
  memcpy(&v, p, n);
  return v;
}

/* The word-at-a-time packing (pack_body.h) handles any width that divides
 * a 64-bit word, with per-width tables of IBP_CHUNK_WIDTH_MAX + 1 entries
 * indexed by the width. */
#define IBP__CHUNK_DIVIDES_WORD(c)                                             \
  _Static_assert((c) >= 1 && IBP_CHUNK_WIDTH_MAX % (c) == 0,                   \
                 "chunk width " #c " does not divide IBP_CHUNK_WIDTH_MAX");
IBP_CHUNK_WIDTHS(IBP__CHUNK_DIVIDES_WORD)
#undef IBP__CHUNK_DIVIDES_WORD
#define IBP__CHUNK_IS_MAX(c) +((c) == IBP_CHUNK_WIDTH_MAX)
_Static_assert((0 IBP_CHUNK_WIDTHS(IBP__CHUNK_IS_MAX)) == 1,
               "IBP_CHUNK_WIDTH_MAX must be one of IBP_CHUNK_WIDTHS");
_Static_assert(IBP_CHUNK_WIDTH_MAX == 8, "the packing works on 64-bit words");
#undef IBP__CHUNK_IS_MAX

static inline uint32_t ibp__nchunks(uint32_t tensor_bytes, uint32_t c) {
  return (tensor_bytes + c - 1) / c;
}

/* One CPU implementation of the per-tensor packing (pack_body.h). */
typedef struct ibp__pack_ops {
  /* Stored length of the tensor: compressed length if < R, else R. */
  size_t (*stored_size)(const ibp_params *p, const uint8_t *t);
  /* Writes the stored form into slot (R bytes); returns its length. */
  size_t (*compress)(const ibp_params *p, const uint8_t *t, uint8_t *slot);
  /* Decodes bytes [off, off+len) of a compressed tensor into dst.  With
   * end_bit (only for the whole tensor) the stream's end is not checked:
   * *end_bit gets the bit where the IBP part ends (a stage follows). */
  ibp_status (*decode)(const ibp_params *p, const uint8_t *src, size_t src_len,
                       uint32_t off, uint32_t len, uint8_t *dst,
                       size_t *end_bit);
  /* Compressed length parsed from the bitmap. */
  ibp_status (*length)(const ibp_params *p, const uint8_t *src, size_t src_len,
                       size_t *out);
  /* Bits of the IBP stream of t (bitmap + payload, not rounded), or
   * limit + 1 as soon as it exceeds limit. */
  uint64_t (*stored_bits)(const ibp_params *p, const uint8_t *t,
                          uint64_t limit);
  /* Bit where the IBP part of a stream ends, parsed from its bitmap (a
   * stage's bits may follow). */
  ibp_status (*ibp_bits)(const ibp_params *p, const uint8_t *src,
                         size_t src_len, size_t *end);
  /* As compress, returning the stream's bits (not rounded; its last byte
   * zero-padded), or more than 8 (R - 1) when slot got t raw. */
  uint64_t (*compress_bits)(const ibp_params *p, const uint8_t *t,
                            uint8_t *slot);
  /* The payload alone of a tensor whose every chunk fits (a staged stream
   * without its bitmap, docs/FORMAT.md §9): t's bits outside Mask from bit
   * 0 of out (R bytes), zero-padded to a byte; returns the bits, or
   * limit + 1 once they exceed limit (out then unspecified). */
  uint64_t (*fit_put)(const ibp_params *p, const uint8_t *t, uint8_t *out,
                      uint64_t limit);
  /* fit_put where Mask is ~keep in every 8 bytes (R of them): the same
   * bits and return, fewer steps. */
  uint64_t (*fit_put_word)(uint64_t keep, const uint8_t *t, uint32_t R,
                           uint8_t *out, uint64_t limit);
  /* fit_put's inverse: dst (R bytes) gets the payload's bits outside Mask and
   * Bitval under it; *end the bit where the payload ends.  Never reads
   * outside src; IBP_ERR_CORRUPT when src is too short. */
  ibp_status (*fit_get)(const ibp_params *p, const uint8_t *src, size_t src_len,
                        uint8_t *dst, size_t *end);
} ibp__pack_ops;

extern const ibp__pack_ops ibp__pack_portable;
extern const ibp__pack_ops ibp__pack_bmi2;

/* The implementation selected for this process (dispatch.c). */
const ibp__pack_ops *ibp__pack(void);

/* Non-fit byte masks: ibp__nonfit_table(c)[f] has 0xFF in every byte of the
 * chunks of a word whose fit bit in f (one bit per chunk, 8/c bits) is 0. */
const uint64_t *ibp__nonfit_table(uint32_t c);

/* Byte tables for the portable pext/pdep: ibp__pext8[keep][byte] and
 * ibp__pdep8[keep][bits]. */
const uint8_t (*ibp__pext8_table(void))[256];
const uint8_t (*ibp__pdep8_table(void))[256];

/* The cluster of the k params p[0..k-1] that stores tensor t in the
 * fewest bytes (ties: the lowest id), and that size (cluster.c). */
uint32_t ibp__best_cluster(const ibp__pack_ops *pack, const ibp_params *p,
                           uint32_t k, const uint8_t *t, size_t *stored);

/* Number of worker threads to use for `requested` (0 = one per CPU). */
unsigned ibp__threads(unsigned requested);

/* Runs fn(arg_i) for i in [0, n) on n threads (the caller runs the first).
 * IBP_ERR_THREAD when a thread cannot start; the others are joined. */
typedef void (*ibp__task_fn)(void *arg);
ibp_status ibp__run_parallel(ibp__task_fn fn, void *args, size_t arg_size,
                             unsigned n);

/* The container's checksums (docs/FORMAT.md §7): XXH64 with seed 0 from
 * libxxhash in version 3, the legacy hash of hash_legacy.c in versions 1
 * and 2.  Not cryptographic: they detect corruption. */
typedef struct ibp__legacy_hash {
  uint64_t lane[4];
  uint8_t buf[32];
  unsigned buffered;
  uint64_t total;
} ibp__legacy_hash;

void ibp__legacy_hash_init(ibp__legacy_hash *h);
void ibp__legacy_hash_update(ibp__legacy_hash *h, const void *data, size_t len);
uint64_t ibp__legacy_hash_final(const ibp__legacy_hash *h);

/* A streaming checksum of one container version (checksum.c). */
typedef struct ibp__hash {
  int legacy; /* versions 1 and 2 */
  ibp__legacy_hash old;
  XXH64_state_t xxh;
} ibp__hash;

void ibp__hash_init(ibp__hash *h, uint32_t version);
void ibp__hash_update(ibp__hash *h, const void *data, size_t len);
uint64_t ibp__hash_final(const ibp__hash *h);

/* ---- sampling (shared by bitstats.c and search.c) ----------------------- */

/* Which of n tensors a sampling keeps: `count` of them, the j-th at
 * ibp__sample_at(&s, j).  With `jitter`, the j-th is one tensor of the
 * j-th of `count` equal strata of the n, picked by a fixed hash of j:
 * spread as evenly, in order, but no period of the data can line up with
 * it (an even sample of every other tensor holds one kind of tensor only
 * of data that alternates between two). */
typedef struct ibp__sample {
  uint64_t n, count, stride; /* stride 0: spread over count strata */
  int jitter;
} ibp__sample;

/* IBP_ERR_SAMPLE for a fraction outside (0, 1]. */
ibp_status ibp__sample_make(const ibp_sampling *sampling, uint64_t n,
                            ibp__sample *out);

/* At most `budget` bytes of tensors of R bytes, evenly spread over n
 * (every tensor when they fit). */
ibp_status ibp__sample_spread(uint64_t budget, uint32_t R, uint64_t n,
                              ibp__sample *out);

/* The same with jitter: for the choices that look at a sample's tensors
 * as kinds (the cluster search, the stage's choice), which an evenly
 * spaced sample of periodic data would show one kind of only.  (IBP's own
 * search counts bits and keeps the even sample: its figures, and the
 * tensor sizes discovery compares with them, stay as they were.) */
ibp_status ibp__sample_jittered(uint64_t budget, uint32_t R, uint64_t n,
                                ibp__sample *out);

/* splitmix64's finaliser: a well-mixed hash of x. */
static inline uint64_t ibp__mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static inline uint64_t ibp__sample_at(const ibp__sample *s, uint64_t j) {
  if (s->stride)
    return j * s->stride;
  const uint64_t lo = (uint64_t)(((unsigned __int128)j * s->n) / s->count);
  if (!s->jitter)
    return lo;
  const uint64_t hi =
      (uint64_t)(((unsigned __int128)(j + 1) * s->n) / s->count);
  return hi > lo + 1 ? lo + ibp__mix64(j) % (hi - lo) : lo;
}

#endif /* IBP_CODEC_INTERNAL_H */
