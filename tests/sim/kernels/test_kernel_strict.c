/*
 * The emulator is strict enough to catch what a real GPU would expose:
 * kernel variants with a missing cp.async wait, a missing __syncwarp, or a
 * read past the compressed length must fail (error or wrong bytes), while
 * the real kernel passes the same cases.  Each variant is tried on several
 * cases and lane-order seeds; it must be caught at least once, and the
 * read past the stream on every case.
 */
#include <stdio.h>
#include <stdlib.h>

#include "gen_data.h"
#include "kcase.h"
#include "kernels_emu.h"

#define CASES 24

/* A region of compressible float data; tensor 0 is compressed. */
static void build(kcase *k, rng *r, uint32_t R, uint64_t n) {
  kcase_shape s = {R, 4, n, 0, 0, 0, DATA_FLOAT, MASK_STATS, 0, 1, 0};
  for (int tries = 0; tries < 50; tries++) {
    kcase_build(k, r, &s);
    if (k->flags[0] & 1)
      return;
    kcase_free(k);
  }
  CHECKF(0, "could not make a compressible tensor of %u B", R);
}

/* Runs `variant` on CASES cases; returns how many it got wrong. */
static int caught(const char *variant, rng *r, int exact_end, int window) {
  simt_entry good = ibp_emu_entry(IBP_KERNEL_DECOMPRESS);
  simt_entry bad = ibp_emu_entry(variant);
  CHECKF(good && bad, "kernel %s not registered", variant);
  int wrong = 0;
  for (int i = 0; i < CASES; i++) {
    uint32_t R = rng_log_uniform(r, 64, 8192);
    kcase k;
    build(&k, r, R, exact_end ? 1 : 1 + rng_below(r, 4));
    /* exact_end: the pinned range ends where tensor 0's stream ends */
    uint64_t end =
        exact_end ? k.offsets[0] + kcase_stored(&k, 0) : k.packed_bytes;
    /* the whole region, or (nosync) from inside tensor 0: then the
     * window's payload offset comes from bitmap bytes other lanes staged */
    uint64_t off = window ? 8 + rng_below(r, R - 8) : 0;
    uint64_t len = exact_end ? R : k.bytes - off, mismatch;
    char err[512] = "";
    uint64_t seed = rng_next(r) | 1;
    test_case("%s R=%u case %d seed %llu", variant, R, i,
              (unsigned long long)seed);
    simt_set_seed(seed);
    CHECKF(kcase_run(&k, good, off, len, end, NULL, &mismatch, err,
                     sizeof err) == 0 &&
               mismatch == 0,
           "the real kernel fails: %s (mismatch %llu)", err,
           (unsigned long long)mismatch);
    simt_set_seed(seed);
    int rc =
        kcase_run(&k, bad, off, len, end, NULL, &mismatch, err, sizeof err);
    if (rc != 0 || mismatch != 0)
      wrong++;
    else if (getenv("KDEBUG"))
      printf("  not caught: R=%u stored=%llu bytes=%llu\n", R,
             (unsigned long long)end, (unsigned long long)k.bytes);
    kcase_free(&k);
  }
  printf("%s: caught in %d of %d cases\n", variant, wrong, CASES);
  return wrong;
}

int main(void) {
  test_begin("test_kernel_strict", 1);
  rng r;
  test_iteration(&r, 0);
  CHECK(caught("ibp_decompress_nowait", &r, 0, 0) > 0);
  CHECK(caught("ibp_decompress_nosync", &r, 0, 1) > 0);
  CHECK(caught("ibp_decompress_overread", &r, 1, 0) == CASES);
  return test_end();
}
