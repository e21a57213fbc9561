/*
 * The BMI2 (pext/pdep) path against the portable path: for the same inputs,
 * compress, region compress, range decode and the decoding of corrupted
 * streams give identical bytes and statuses under
 * ibp_impl_select(IBP_IMPL_PORTABLE) and ibp_impl_select(IBP_IMPL_BMI2), and
 * both agree with the reference.  Exits 77 (skip) when the CPU has no BMI2.
 * IBP_TEST_ITERATIONS = regions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guard_buf.h"
#include "region_util.h"
#include "tensor_check.h"

#define MUTANTS 16
#define MAX_R 16384

static const ibp_impl impls[2] = {IBP_IMPL_PORTABLE, IBP_IMPL_BMI2};

/* What one implementation produced for one region. */
typedef struct outcome {
  uint8_t *slots, *flags, *decoded;
  ibp_status mutant_status[MUTANTS], mutant_len_status[MUTANTS];
  size_t mutant_len[MUTANTS];
  uint8_t *mutant_out; /* MUTANTS * R */
} outcome;

/* A corrupted copy of a tensor's stored stream and how much of it to read. */
typedef struct mutant {
  uint8_t *bytes; /* R bytes */
  size_t src_len;
} mutant;

static void make_mutants(rng *r, const test_region *tr, mutant *m) {
  uint32_t R = tr->f.R;
  for (int k = 0; k < MUTANTS; k++) {
    uint64_t i = rng_below(r, tr->n);
    m[k].bytes = xmalloc(R);
    memcpy(m[k].bytes, tr->ref_slots + i * R, R);
    int flips = (int)rng_below(r, 4);
    for (int f = 0; f < flips; f++) {
      uint64_t bit = rng_below(r, 8 * (uint64_t)R);
      ref_put_bit(m[k].bytes, bit, !ref_get_bit(m[k].bytes, bit));
    }
    m[k].src_len = (size_t)rng_range(r, 0, R);
  }
}

static void run_impl(ibp_impl impl, tensor_check *tc, guard_buf *g,
                     const test_region *tr, const mutant *m, outcome *o) {
  CHECK_OK(ibp_impl_select(impl));
  CHECK_U64(ibp_impl_active(), impl);
  uint32_t R = tr->f.R;
  for (uint64_t i = 0; i < tr->n; i++)
    tensor_check_run(tc, &tr->f, tr->data + i * R);
  o->slots = xmalloc(tr->bytes);
  memset(o->slots, REGION_SENTINEL, tr->bytes);
  o->flags = xmalloc(tr->flag_bytes);
  CHECK_OK(ibp_compress_region(&tr->f.lib, tr->data, tr->bytes, o->slots,
                               o->flags, 2, NULL));
  o->decoded = xmalloc(tr->bytes);
  ibp_region view = test_region_view(tr, tr->ref_slots, tr->ref_flags);
  CHECK_OK(ibp_decompress_range(&view, 0, tr->bytes, o->decoded));
  o->mutant_out = xcalloc((size_t)MUTANTS * R);
  for (int k = 0; k < MUTANTS; k++) {
    const uint8_t *src = guard_place(g, m[k].bytes, m[k].src_len);
    o->mutant_status[k] = ibp_decompress_tensor(&tr->f.lib, src, m[k].src_len,
                                                1, o->mutant_out + k * R);
    o->mutant_len[k] = 0;
    o->mutant_len_status[k] =
        ibp_compressed_length(&tr->f.lib, src, m[k].src_len, &o->mutant_len[k]);
  }
}

static void compare(const test_region *tr, const outcome *a, const outcome *b) {
  uint32_t R = tr->f.R;
  test_region_check_slots(tr, a->slots, "portable region slots");
  test_region_check_slots(tr, b->slots, "bmi2 region slots");
  CHECK_MEM(b->flags, a->flags, tr->flag_bytes, "bmi2 vs portable flags");
  CHECK_MEM(a->decoded, tr->data, tr->bytes, "portable range decode");
  CHECK_MEM(b->decoded, tr->data, tr->bytes, "bmi2 range decode");
  for (int k = 0; k < MUTANTS; k++) {
    CHECKF(a->mutant_status[k] == b->mutant_status[k],
           "mutant %d: portable %s, bmi2 %s", k,
           ibp_status_name(a->mutant_status[k]),
           ibp_status_name(b->mutant_status[k]));
    CHECKF(a->mutant_len_status[k] == b->mutant_len_status[k],
           "mutant %d length: portable %s, bmi2 %s", k,
           ibp_status_name(a->mutant_len_status[k]),
           ibp_status_name(b->mutant_len_status[k]));
    if (a->mutant_status[k] == IBP_OK)
      CHECK_MEM(b->mutant_out + k * R, a->mutant_out + k * R, R,
                "bmi2 vs portable decoded mutant");
    if (a->mutant_len_status[k] == IBP_OK)
      CHECK_U64(b->mutant_len[k], a->mutant_len[k]);
  }
}

static void outcome_free(outcome *o) {
  free(o->slots);
  free(o->flags);
  free(o->decoded);
  free(o->mutant_out);
}

int main(void) {
  uint64_t iters = test_begin("test_bmi2", 300);
  CHECK(ibp_impl_available(IBP_IMPL_PORTABLE));
  CHECK(ibp_impl_available(IBP_IMPL_AUTO));
  if (!ibp_impl_available(IBP_IMPL_BMI2)) {
    CHECK_STATUS(ibp_impl_select(IBP_IMPL_BMI2), IBP_ERR_UNSUPPORTED);
    test_skip("this CPU (or build) has no BMI2 path");
  }
  tensor_check tc;
  tensor_check_init(&tc, MAX_R);
  guard_buf g;
  guard_init(&g, MAX_R);
  for (uint64_t it = 0; it < iters; it++) {
    rng r;
    test_iteration(&r, it);
    test_region tr;
    test_region_gen(&tr, &r, MAX_R, 8);
    mutant m[MUTANTS];
    make_mutants(&r, &tr, m);
    outcome o[2];
    for (int k = 0; k < 2; k++)
      run_impl(impls[k], &tc, &g, &tr, m, &o[k]);
    compare(&tr, &o[0], &o[1]);
    for (int k = 0; k < 2; k++)
      outcome_free(&o[k]);
    for (int k = 0; k < MUTANTS; k++)
      free(m[k].bytes);
    test_region_free(&tr);
  }
  CHECK_OK(ibp_impl_select(IBP_IMPL_AUTO));
  ibp_impl active = ibp_impl_active();
  CHECKF(active == IBP_IMPL_PORTABLE || active == IBP_IMPL_BMI2,
         "after AUTO the active path is %d", (int)active);
  printf("test_bmi2: AUTO picks %s on this CPU\n", ibp_impl_name(active));
  guard_free(&g);
  tensor_check_free(&tc);
  return test_end();
}
