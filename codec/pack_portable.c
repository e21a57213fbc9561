/* Portable packing: pext/pdep from 256x256 byte tables (ibp__pext8/pdep8).
 * Runs on any CPU; gives the same bytes as the BMI2 path. */
#include "internal.h"

static inline uint64_t portable_pext(uint64_t w, uint64_t m) {
  const uint8_t(*t)[256] = ibp__pext8_table();
  uint64_t r = 0;
  unsigned n = 0;
  for (unsigned i = 0; i < 64; i += 8) {
    unsigned mb = (unsigned)(m >> i) & 0xFF;
    r |= (uint64_t)t[mb][(w >> i) & 0xFF] << n;
    n += (unsigned)__builtin_popcount(mb);
  }
  return r;
}

static inline uint64_t portable_pdep(uint64_t v, uint64_t m) {
  const uint8_t(*t)[256] = ibp__pdep8_table();
  uint64_t r = 0;
  for (unsigned i = 0; i < 64; i += 8) {
    unsigned mb = (unsigned)(m >> i) & 0xFF;
    r |= (uint64_t)t[mb][v & 0xFF] << i;
    v >>= __builtin_popcount(mb);
  }
  return r;
}

#define PACK_NAME(x) portable_##x
#define PACK_TARGET
#define PACK_PEXT(w, m) portable_pext(w, m)
#define PACK_PDEP(v, m) portable_pdep(v, m)
#define PACK_POPCNT(x) __builtin_popcountll(x)
#include "pack_body.h"

const ibp__pack_ops ibp__pack_portable = {
    portable_stored_size,   portable_compress,    portable_decode,
    portable_length,        portable_stored_bits, portable_ibp_bits,
    portable_compress_bits, portable_fit_put,     portable_fit_put_word,
    portable_fit_get,
};
