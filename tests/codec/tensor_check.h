/*
 * The core single-tensor comparison shared by the round-trip, adversarial
 * and BMI2 tests: library compress == reference stored form (bytes, flag,
 * length, untouched slot tail), ibp_compressed_size/_length == L, and
 * library decompress == original, with every span the library reads or
 * writes ending at a PROT_NONE guard page.
 */
#ifndef IBP_TEST_TENSOR_CHECK_H
#define IBP_TEST_TENSOR_CHECK_H

#include "fixture.h"
#include "guard_buf.h"

typedef struct tensor_check {
  guard_buf slot, src, dst;
  uint8_t *want; /* reference slot, max_R bytes */
} tensor_check;

void tensor_check_init(tensor_check *tc, uint32_t max_R);
void tensor_check_free(tensor_check *tc);

/* Runs every comparison on tensor t; returns 1 when it was stored
 * compressed.  Fails the test on any difference. */
int tensor_check_run(tensor_check *tc, const fixture *f, const uint8_t *t);

#endif /* IBP_TEST_TENSOR_CHECK_H */
