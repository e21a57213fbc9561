/*
 * The emulated decompress kernel against the original bytes (and so
 * against the host codec that compressed them): random tensor sizes
 * 1 B - 64 KiB, every chunk width, every data and mask kind, random copy
 * ranges (whole region, partial first/last tensor, the raw tail, single
 * bytes), raw and dirty tensors, host bases misaligned to 128 B, one
 * Mask/Bitval pair (even cases) or K = 2 .. 40 with a cluster id per
 * tensor (odd cases).
 * IBP_TEST_ITERATIONS = cases (default 2 x 10^4: 10^4 with one pair, 10^4
 * with clusters); SIMT_SEED / IBP_TEST_SEED.
 */
#include <stdio.h>

#include "gen_data.h"
#include "kcase.h"
#include "kernels_emu.h"

static void shape_for(rng *r, kcase_shape *s) {
  kcase_random_shape(r, s, 16);
  s->dirty_share = rng_chance(r, 0.2) ? 0.3 : 0;
  /* clusters: ids of 1, 2, 4 and 8 bits (main keeps K = 1 in even cases) */
  static const unsigned ks[] = {2, 3, 4, 5, 9, 16, 17, 40};
  s->clusters = ks[rng_below(r, 8)];
}

int main(void) {
  uint64_t iters = test_begin("test_kernel_decode", 20000);
  simt_entry entry = ibp_emu_entry(IBP_KERNEL_DECOMPRESS);
  CHECK(entry != NULL);
  uint64_t bytes_out = 0;
  for (uint64_t i = 0; i < iters; i++) {
    rng r;
    test_iteration(&r, i);
    kcase_shape s;
    shape_for(&r, &s);
    if (i % 2 == 0)
      s.clusters = 1;
    kcase k;
    kcase_build(&k, &r, &s);
    uint64_t off, len, mismatch;
    kcase_pick_range(&r, &k, &off, &len);
    k.grid_cap = rng_chance(&r, 0.5) ? 1 : 0; /* one block: 4 warps share */
    k.walk = rng_chance(&r, 0.5) ? (unsigned)rng_range(&r, 1, s.n + 2) : 0;
    test_case("R=%u c=%u n=%llu tail=%llu misalign=%u/%u data=%s mask=%s "
              "dirty=%.1f K=%u copy [%llu, +%llu) grid_cap=%u walk=%u",
              s.R, s.c, (unsigned long long)s.n, (unsigned long long)s.tail,
              s.orig_misalign, s.packed_misalign,
              data_kind_name((data_kind)s.data_kind),
              mask_kind_name((mask_kind)s.mask_kind), s.dirty_share, s.clusters,
              (unsigned long long)off, (unsigned long long)len, k.grid_cap,
              k.walk);
    char err[512] = "";
    simt_set_seed(rng_next(&r) | 1);
    int rc = kcase_run(&k, entry, off, len, k.packed_bytes, NULL, &mismatch,
                       err, sizeof err);
    CHECKF(rc == 0, "emulator: %s", err);
    CHECKF(mismatch == 0, "byte %llu of the copy differs",
           (unsigned long long)(mismatch - 1));
    bytes_out += len;
    kcase_free(&k);
  }
  printf("test_kernel_decode: %llu cases, %llu bytes decoded, 0 mismatches\n",
         (unsigned long long)iters, (unsigned long long)bytes_out);
  return test_end();
}
