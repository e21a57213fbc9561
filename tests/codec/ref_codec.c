/*
 * Reference IBP v1 codec: one bit at a time, no tables, no word tricks.
 * See ref_codec.h for the format it implements.
 */
#include "ref_codec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint32_t ref_nchunks(const ref_params *p) {
  return (p->R + p->c - 1) / p->c;
}

static uint32_t chunk_begin(const ref_params *p, uint32_t j) {
  return j * p->c;
}

static uint32_t chunk_end(const ref_params *p, uint32_t j) {
  uint32_t end = (j + 1) * p->c;
  return end < p->R ? end : p->R;
}

int ref_chunk_fits(const ref_params *p, const uint8_t *t, uint32_t j) {
  for (uint32_t b = chunk_begin(p, j); b < chunk_end(p, j); b++)
    if ((t[b] & p->mask[b]) != p->bitval[b])
      return 0;
  return 1;
}

size_t ref_stream_capacity(const ref_params *p) {
  return ((size_t)ref_nchunks(p) + 8 * (size_t)p->R + 7) / 8;
}

/* A bit of chunk data travels in the stream unless its chunk fits and the
 * mask says the bit is invariant. */
static int bit_is_stored(const ref_params *p, int fits, uint64_t k) {
  return !(fits && ref_get_bit(p->mask, k));
}

size_t ref_encode(const ref_params *p, const uint8_t *t, uint8_t *out,
                  uint64_t *bits) {
  uint32_t nchunks = ref_nchunks(p);
  memset(out, 0, ref_stream_capacity(p));
  uint64_t pos = 0;
  for (uint32_t j = 0; j < nchunks; j++)
    ref_put_bit(out, pos++, ref_chunk_fits(p, t, j));
  for (uint32_t j = 0; j < nchunks; j++) {
    int fits = ref_chunk_fits(p, t, j);
    for (uint64_t k = 8 * (uint64_t)chunk_begin(p, j);
         k < 8 * (uint64_t)chunk_end(p, j); k++)
      if (bit_is_stored(p, fits, k))
        ref_put_bit(out, pos++, ref_get_bit(t, k));
  }
  if (bits)
    *bits = pos;
  return (size_t)((pos + 7) / 8);
}

size_t ref_store(const ref_params *p, const uint8_t *t, uint8_t *slot,
                 int *compressed) {
  uint8_t *stream = malloc(ref_stream_capacity(p));
  if (!stream)
    abort();
  size_t len = ref_encode(p, t, stream, NULL);
  int comp = len < p->R;
  if (!comp)
    len = p->R;
  memcpy(slot, comp ? stream : t, len);
  free(stream);
  if (compressed)
    *compressed = comp;
  return len;
}

int ref_decode(const ref_params *p, const uint8_t *src, size_t src_len,
               uint8_t *dst, size_t *len) {
  uint32_t nchunks = ref_nchunks(p);
  uint64_t avail = 8 * (uint64_t)src_len;
  if (nchunks > avail)
    return -1; /* the bitmap alone runs past the source */
  uint64_t pos = nchunks;
  for (uint32_t j = 0; j < nchunks; j++) {
    int fits = ref_get_bit(src, j);
    for (uint64_t k = 8 * (uint64_t)chunk_begin(p, j);
         k < 8 * (uint64_t)chunk_end(p, j); k++) {
      int v;
      if (bit_is_stored(p, fits, k)) {
        if (pos >= avail)
          return -1; /* runs past the source */
        v = ref_get_bit(src, pos++);
      } else {
        v = ref_get_bit(p->bitval, k);
      }
      if (dst)
        ref_put_bit(dst, k, v);
    }
  }
  uint64_t L = (pos + 7) / 8;
  if (L >= p->R)
    return -1; /* would have been stored raw */
  for (uint64_t q = pos; q < 8 * L; q++)
    if (ref_get_bit(src, q))
      return -1; /* nonzero padding */
  if (len)
    *len = (size_t)L;
  return 0;
}

uint64_t ref_compress_region(const ref_params *p, const uint8_t *src,
                             uint64_t bytes, uint8_t *slots, uint8_t *flags,
                             uint64_t *stored_bytes) {
  uint64_t n = bytes / p->R, ncomp = 0, stored = 0;
  memset(flags, 0, (size_t)((n + 7) / 8));
  for (uint64_t i = 0; i < n; i++) {
    int comp;
    stored += ref_store(p, src + i * p->R, slots + i * p->R, &comp);
    if (comp) {
      ref_put_bit(flags, i, 1);
      ncomp++;
    }
  }
  uint64_t tail = bytes - n * p->R;
  memcpy(slots + n * p->R, src + n * p->R, (size_t)tail);
  if (stored_bytes)
    *stored_bytes = stored + tail;
  return ncomp;
}

uint64_t ref_saved_bytes(const ref_params *p, const uint8_t *data, uint64_t n) {
  uint8_t *slot = malloc(p->R);
  if (!slot)
    abort();
  uint64_t saved = 0;
  for (uint64_t i = 0; i < n; i++)
    saved += p->R - ref_store(p, data + i * p->R, slot, NULL);
  free(slot);
  return saved;
}

uint64_t ref_count_bits(uint32_t R, const uint8_t *data, uint64_t n,
                        uint64_t first, uint64_t step, uint64_t *ones) {
  uint64_t counted = 0;
  for (uint64_t i = first; i < n; i += step) {
    for (uint64_t k = 0; k < 8 * (uint64_t)R; k++)
      ones[k] += (uint64_t)ref_get_bit(data + i * R, k);
    counted++;
  }
  return counted;
}

uint64_t ref_need_double(double threshold, uint64_t tensors) {
  return (uint64_t)ceil(threshold * (double)tensors);
}

uint64_t ref_need_percent(unsigned percent, uint64_t tensors) {
  return (percent * tensors + 99) / 100;
}

void ref_masks_from_counts(uint32_t R, const uint64_t *ones, uint64_t tensors,
                           uint64_t need, uint8_t *mask, uint8_t *bitval) {
  memset(mask, 0, R);
  memset(bitval, 0, R);
  for (uint64_t k = 0; k < 8 * (uint64_t)R; k++) {
    uint64_t zeros = tensors - ones[k];
    int majority = ones[k] > zeros;
    uint64_t agree = majority ? ones[k] : zeros;
    if (agree >= need) {
      ref_put_bit(mask, k, 1);
      ref_put_bit(bitval, k, majority);
    }
  }
}
