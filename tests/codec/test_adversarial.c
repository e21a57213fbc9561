/*
 * Adversarial masks and sizes, enumerated rather than sampled: masks all
 * ones / all zeros / 0x55 / 0xAA / ones only in the last partial chunk,
 * R not divisible by c, tensors equal to Bitval, differing in one bit,
 * random, all zeros, all ones.  Every case goes through tensor_check (library
 * vs reference, both ways) and a few have closed-form lengths checked too.
 * IBP_TEST_ITERATIONS = passes over the whole enumeration (new random bits).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_check.h"

static const uint32_t sizes[] = {1,   2,   3,   4,    5,    7,    8,   9,
                                 13,  15,  16,  17,   31,   63,   64,  65,
                                 127, 129, 255, 1023, 1024, 1025, 4097};
static const mask_kind masks[] = {MASK_ONES, MASK_ZEROS, MASK_ALT55, MASK_ALTAA,
                                  MASK_LAST_CHUNK};

enum { T_BITVAL, T_ONE_FLIP, T_FREE_BITS, T_RANDOM, T_ZEROS, T_FFS, T_KINDS };
static const char *tensor_names[T_KINDS] = {
    "=bitval", "bitval^1bit", "bitval+free bits", "random", "zeros", "0xff"};

static void make_tensor(rng *r, int kind, const fixture *f, uint8_t *t) {
  uint32_t R = f->R;
  switch (kind) {
  case T_BITVAL:
  case T_ONE_FLIP:
    memcpy(t, f->bitval, R);
    if (kind == T_ONE_FLIP) {
      uint64_t k = rng_below(r, 8 * (uint64_t)R);
      ref_put_bit(t, k, !ref_get_bit(t, k));
    }
    break;
  case T_FREE_BITS: /* every chunk fits; the free bits are random */
    rng_fill(r, t, R);
    for (uint32_t b = 0; b < R; b++)
      t[b] = (uint8_t)((t[b] & ~f->mask[b]) | f->bitval[b]);
    break;
  case T_RANDOM:
    rng_fill(r, t, R);
    break;
  default:
    memset(t, kind == T_ZEROS ? 0x00 : 0xFF, R);
    break;
  }
}

/* Closed-form stored lengths where the format makes them obvious. */
static void check_closed_form(const fixture *f, mask_kind mk, int tk,
                              const uint8_t *t) {
  uint32_t R = f->R, nchunks = (R + f->c - 1) / f->c;
  size_t got = ibp_compressed_size(&f->lib, t);
  if (mk == MASK_ZEROS) /* every chunk fits but nothing is removed */
    CHECK_U64(got, R);
  if (mk == MASK_ONES && tk == T_BITVAL) { /* only the bitmap is left */
    size_t L = (nchunks + 7) / 8;
    CHECK_U64(got, L < R ? L : R);
  }
}

static void run_case(tensor_check *tc, rng *r, uint32_t R, uint32_t c,
                     mask_kind mk, uint8_t *t) {
  fixture f;
  fixture_init(&f, R, c);
  rng_fill(r, t, R); /* seeds random bitvals */
  fixture_gen(&f, r, mk, t, 1);
  for (int tk = 0; tk < T_KINDS; tk++) {
    make_tensor(r, tk, &f, t);
    test_case("R=%u c=%u mask=%s tensor=%s", R, c, mask_kind_name(mk),
              tensor_names[tk]);
    tensor_check_run(tc, &f, t);
    check_closed_form(&f, mk, tk, t);
  }
  fixture_free(&f);
}

int main(void) {
  uint64_t passes = test_begin("test_adversarial", 4);
  uint32_t max_R = sizes[sizeof sizes / sizeof *sizes - 1];
  tensor_check tc;
  tensor_check_init(&tc, max_R);
  uint8_t *t = xmalloc(max_R);
  uint64_t cases = 0;
  for (uint64_t pass = 0; pass < passes; pass++) {
    rng r;
    test_iteration(&r, pass);
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
      for (unsigned w = 0; w < IBP_CHUNK_WIDTH_COUNT; w++)
        for (size_t m = 0; m < sizeof masks / sizeof *masks; m++, cases++)
          run_case(&tc, &r, sizes[s], ibp_chunk_width(w), masks[m], t);
  }
  free(t);
  tensor_check_free(&tc);
  printf("test_adversarial: %llu mask settings x %d tensors\n",
         (unsigned long long)cases, T_KINDS);
  return test_end();
}
