/*
 * A random region for the region-level tests: original bytes (n tensors of
 * R bytes + a raw tail), Mask/Bitval, and its compressed form built by the
 * reference codec (slots + flags + counts).
 */
#ifndef IBP_TEST_REGION_UTIL_H
#define IBP_TEST_REGION_UTIL_H

#include "fixture.h"

#define REGION_SENTINEL 0x5Au /* slot bytes nobody wrote */

typedef struct test_region {
  fixture f;
  uint64_t bytes, n, tail;
  uint8_t *data;       /* bytes */
  uint8_t *ref_slots;  /* bytes; REGION_SENTINEL past each stored length */
  uint8_t *ref_flags;  /* flag_bytes */
  uint64_t flag_bytes; /* ceil(n / 8) */
  uint64_t ref_compressed, ref_stored;
  data_kind dk;
  mask_kind mk;
} test_region;

/* R log-uniform in [1, max_R], 1 <= n <= max_n, tail < R. */
void test_region_gen(test_region *tr, rng *r, uint32_t max_R, uint64_t max_n);
/* Half the time many tiny tensors (R <= 64, n <= 600), else a few up to
 * 16 KiB (n <= 24): the mix the region-level tests use. */
void test_region_gen_mixed(test_region *tr, rng *r);
void test_region_free(test_region *tr);
/* Stored length of tensor i in the reference slots. */
size_t test_region_stored_len(const test_region *tr, uint64_t i);
/* Compares every slot with the reference within its stored length (the
 * bytes past it are unspecified) and the raw tail byte for byte. */
void test_region_check_slots(const test_region *tr, const uint8_t *slots,
                             const char *what);
/* An ibp_region over the given slots and flags with tr's params. */
ibp_region test_region_view(const test_region *tr, const uint8_t *slots,
                            const uint8_t *flags);

#endif /* IBP_TEST_REGION_UTIL_H */
