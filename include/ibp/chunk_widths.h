/*
 * The chunk widths of the IBP format (docs/FORMAT.md): the one list of the
 * valid values of a chunk width c, in bytes.  Header only and free of any
 * other libibp declaration, so that config/ and the kernels' host planning
 * use it without linking the codec; include/ibp/codec.h includes it.
 *
 * Every width divides IBP_CHUNK_WIDTH_MAX (a 64-bit word holds 8/c whole
 * chunks); codec/internal.h checks this at compile time.
 */
#ifndef IBP_CHUNK_WIDTHS_H
#define IBP_CHUNK_WIDTHS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(c) for every chunk width c, ascending.  A width's position in this list
 * is its index i (ibp_chunk_width(i)), also used by the per-width arrays of
 * ibp_search_report. */
#define IBP_CHUNK_WIDTHS(X) X(1) X(2) X(4) X(8)

/* The widest chunk: the last of the list. */
#define IBP_CHUNK_WIDTH_MAX 8u

#define IBP__CHUNK_WIDTH_ONE(c) +1u
/* Number of chunk widths (a constant expression). */
#define IBP_CHUNK_WIDTH_COUNT (0u IBP_CHUNK_WIDTHS(IBP__CHUNK_WIDTH_ONE))

/* The list in words, for messages: the first form after "auto, " or alone
 * ("1, 2, 4 or 8"), the second before " or auto" ("1, 2, 4, 8").  They are
 * literals so that messages stay literals; test_errors (tests/codec) checks
 * them against the list. */
#define IBP_CHUNK_WIDTHS_TEXT "1, 2, 4 or 8"
#define IBP_CHUNK_WIDTHS_COMMAS "1, 2, 4, 8"

#define IBP__CHUNK_WIDTH_BAR(c) "|" #c
/* "auto|1|2|4|8", for usage lines. */
#define IBP_CHUNK_WIDTHS_AUTO_BARS "auto" IBP_CHUNK_WIDTHS(IBP__CHUNK_WIDTH_BAR)

#define IBP__CHUNK_WIDTH_ITEM(c) c,
/* The width at index i in [0, IBP_CHUNK_WIDTH_COUNT); 0 for any other i. */
static inline uint32_t ibp_chunk_width(unsigned i) {
  static const uint32_t widths[] = {IBP_CHUNK_WIDTHS(IBP__CHUNK_WIDTH_ITEM)};
  return i < IBP_CHUNK_WIDTH_COUNT ? widths[i] : 0;
}

/* Index of width c in the list; -1 when c is not a chunk width. */
static inline int ibp_chunk_width_index(uint32_t c) {
  for (unsigned i = 0; i < IBP_CHUNK_WIDTH_COUNT; i++)
    if (ibp_chunk_width(i) == c)
      return (int)i;
  return -1;
}

/* 1 when c is one of the chunk widths, else 0. */
static inline int ibp_chunk_width_valid(uint32_t c) {
  return ibp_chunk_width_index(c) >= 0;
}

#ifdef __cplusplus
}
#endif

#endif /* IBP_CHUNK_WIDTHS_H */
