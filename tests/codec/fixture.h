/*
 * One Mask/Bitval setting seen both ways: as the reference codec's
 * ref_params and as the library's ibp_params (built with
 * ibp_params_from_masks from the same bytes).
 */
#ifndef IBP_TEST_FIXTURE_H
#define IBP_TEST_FIXTURE_H

#include "gen_data.h"
#include "ibp/codec.h"
#include "ref_codec.h"

typedef struct fixture {
  uint32_t R, c;
  uint8_t *mask, *bitval; /* R bytes each, owned */
  ref_params ref;
  ibp_params lib;
} fixture;

/* Zeroed masks of R bytes, chunk width c; no library params yet. */
void fixture_init(fixture *f, uint32_t R, uint32_t c);
/* Builds f->lib from f->mask/f->bitval (fails the test on error) and
 * checks that the library kept the bytes. */
void fixture_commit(fixture *f);
/* gen_masks + fixture_commit. */
void fixture_gen(fixture *f, rng *r, mask_kind kind, const uint8_t *data,
                 uint64_t n);
void fixture_free(fixture *f);

#endif /* IBP_TEST_FIXTURE_H */
