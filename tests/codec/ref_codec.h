/*
 * Reference IBP v1 codec for the tests: an independent, deliberately slow
 * bit-by-bit implementation of the format as written in the test brief
 * (tests/README.md, "The oracle").  It shares no code with codec/ and uses
 * no public header, so the library is always checked against a second,
 * obviously correct reading of the format.
 *
 * Format summary (v1):
 *   - tensor bit k = bit k%8 of byte k/8; Mask/Bitval numbered the same way;
 *   - chunk j = bytes [j*c, min((j+1)*c, R)); it FITS when
 *     (t[b] & mask[b]) == bitval[b] for all its bytes;
 *   - one bit stream: bits 0..nchunks-1 = fit bitmap, then per chunk its
 *     mask-0 bits if it fits, else all its bits (ascending); padding 0;
 *   - stored compressed iff ceil(B/8) < R, else raw.
 *
 * The decoder never reads outside [src, src+src_len).
 */
#ifndef IBP_TEST_REF_CODEC_H
#define IBP_TEST_REF_CODEC_H

#include <stddef.h>
#include <stdint.h>

typedef struct ref_params {
  uint32_t R;            /* tensor bytes */
  uint32_t c;            /* chunk width: 1, 2, 4 or 8 */
  const uint8_t *mask;   /* R bytes */
  const uint8_t *bitval; /* R bytes, subset of mask */
} ref_params;

/* Bit k of buf (LSB first).  Inline: the oracle goes bit by bit, and a
 * call per bit was most of the 10^6 round trips' time. */
static inline int ref_get_bit(const uint8_t *buf, uint64_t k) {
  return (buf[k / 8] >> (k % 8)) & 1;
}

static inline void ref_put_bit(uint8_t *buf, uint64_t k, int v) {
  uint8_t bit = (uint8_t)(1u << (k % 8));
  if (v)
    buf[k / 8] |= bit;
  else
    buf[k / 8] &= (uint8_t)~bit;
}

uint32_t ref_nchunks(const ref_params *p);
/* 1 when chunk j of tensor t fits the mask. */
int ref_chunk_fits(const ref_params *p, const uint8_t *t, uint32_t j);

/* Bytes a stream buffer for ref_encode needs: ceil((nchunks + 8R) / 8). */
size_t ref_stream_capacity(const ref_params *p);
/* Encodes t into out (ref_stream_capacity bytes, zeroed first).  Returns
 * the stream length L = ceil(B/8); *bits (may be NULL) receives B. */
size_t ref_encode(const ref_params *p, const uint8_t *t, uint8_t *out,
                  uint64_t *bits);

/* The tensor's stored form in its R-byte slot: the stream when L < R
 * (*compressed = 1), else a raw copy.  Writes only the returned length. */
size_t ref_store(const ref_params *p, const uint8_t *t, uint8_t *slot,
                 int *compressed);

/* Decodes a compressed stream: 0 and *len = L on success, -1 when corrupt
 * (runs past src_len, L >= R, or nonzero padding).  dst (R bytes) may be
 * NULL to only measure. */
int ref_decode(const ref_params *p, const uint8_t *src, size_t src_len,
               uint8_t *dst, size_t *len);

/* Region: n = bytes/R slots + raw tail; flags (ceil(n/8) bytes) are fully
 * written.  Returns the number of compressed tensors; *stored_bytes (may be
 * NULL) receives the sum of slot lengths plus the tail. */
uint64_t ref_compress_region(const ref_params *p, const uint8_t *src,
                             uint64_t bytes, uint8_t *slots, uint8_t *flags,
                             uint64_t *stored_bytes);

/* Bytes saved over n tensors (sum of R - stored length). */
uint64_t ref_saved_bytes(const ref_params *p, const uint8_t *data, uint64_t n);

/* Statistics: adds bit counts of tensors first, first+step, ... (< n) of the
 * n tensors at data into ones[8R]; returns how many were counted. */
uint64_t ref_count_bits(uint32_t R, const uint8_t *data, uint64_t n,
                        uint64_t first, uint64_t step, uint64_t *ones);

/* ceil(threshold * tensors) the way the format text writes it (double). */
uint64_t ref_need_double(double threshold, uint64_t tensors);
/* ceil(percent * tensors / 100) in exact integer arithmetic. */
uint64_t ref_need_percent(unsigned percent, uint64_t tensors);

/* Mask/Bitval from counters: bit k is invariant when its majority value
 * (1 iff ones > tensors - ones) is held by >= need tensors. */
void ref_masks_from_counts(uint32_t R, const uint64_t *ones, uint64_t tensors,
                           uint64_t need, uint8_t *mask, uint8_t *bitval);

#endif /* IBP_TEST_REF_CODEC_H */
