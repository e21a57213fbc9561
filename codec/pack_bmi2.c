/* BMI2 packing: pext/pdep instructions.  Compiled for bmi2+popcnt whatever
 * the build flags; only called when CPUID says the CPU has them
 * (dispatch.c). */
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("bmi2,popcnt"))),           \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("bmi2,popcnt")
#endif

#include "internal.h"

#define PACK_NAME(x) bmi2_##x
#define PACK_TARGET
#define PACK_PEXT(w, m) _pext_u64(w, m)
#define PACK_PDEP(v, m) _pdep_u64(v, m)
#define PACK_POPCNT(x) ((unsigned)_mm_popcnt_u64(x))
#include "pack_body.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const ibp__pack_ops ibp__pack_bmi2 = {
    bmi2_stored_size,  bmi2_compress, bmi2_decode,        bmi2_length,
    bmi2_stored_bits,  bmi2_ibp_bits, bmi2_compress_bits, bmi2_fit_put,
    bmi2_fit_put_word, bmi2_fit_get,
};
