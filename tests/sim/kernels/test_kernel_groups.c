/*
 * Groups of small tensors (docs/ARCHITECTURE.md "Groups of small tensors")
 * against the original bytes: tensor sizes that are multiples of 16 up to
 * 3 KiB (the ones a warp groups) and sizes around them (1, 255, 400, 401,
 * 4095, ...), every chunk width, data and mask kind, up to 200 tensors,
 * copies of the whole region, of whole tensors and of anything, dirty and
 * busy tensors, moved streams, host bases misaligned to 128 B,
 * destinations aligned (groups) or not, 1 or K clusters, any walk length.
 * Then a copy of whole aligned tensors through the marked kernels
 * (variant_marks.cc) must have run group steps (flat ones, or for tensors
 * of a whole number of 512-byte steps a group's tensors one by one): the
 * cases above test the group paths, not only the one-tensor path.
 * IBP_TEST_ITERATIONS = cases (default 3000); SIMT_SEED / IBP_TEST_SEED.
 */
#include <stdio.h>

#include "count_marks.h"
#include "gen_data.h"
#include "kcase.h"
#include "kernels_emu.h"

static uint32_t pick_size(rng *r) {
  static const uint32_t edges[] = {1,   15,   16,   17,   255,  256,  400,
                                   401, 1008, 3008, 3072, 4095, 4096, 8192};
  if (rng_chance(r, 0.2))
    return edges[rng_below(r, sizeof edges / sizeof *edges)];
  return 16 * (uint32_t)rng_range(r, 1, 192);
}

static void one_case(simt_entry entry, uint64_t i, uint64_t *bytes) {
  rng r;
  test_iteration(&r, i);
  kcase_shape s;
  kcase_random_shape(&r, &s, 200);
  s.R = pick_size(&r);
  s.n = rng_range(&r, 1, 200);
  s.tail = rng_chance(&r, 0.2) ? rng_below(&r, s.R) : 0;
  s.dirty_share = rng_chance(&r, 0.3) ? 0.1 : 0;
  s.clusters = rng_chance(&r, 0.15) ? (unsigned)rng_range(&r, 2, 5) : 1;
  s.adjacent = rng_chance(&r, 0.7);
  kcase k;
  kcase_build(&k, &r, &s);
  uint64_t off = 0, len = k.bytes, mismatch;
  if (rng_chance(&r, 0.4))
    kcase_pick_range(&r, &k, &off, &len);
  k.walk = rng_chance(&r, 0.3) ? (unsigned)rng_range(&r, 1, s.n + 2) : 0;
  k.grid_cap = rng_chance(&r, 0.3) ? 1 : 0;
  k.dst_misalign = rng_chance(&r, 0.8) ? 0 : (unsigned)rng_below(&r, 16);
  test_case("R=%u c=%u n=%llu tail=%llu misalign=%u/%u data=%s mask=%s "
            "dirty=%.1f K=%u adjacent=%d copy [%llu, +%llu) walk=%u "
            "grid_cap=%u dst+%u",
            s.R, s.c, (unsigned long long)s.n, (unsigned long long)s.tail,
            s.orig_misalign, s.packed_misalign,
            data_kind_name((data_kind)s.data_kind),
            mask_kind_name((mask_kind)s.mask_kind), s.dirty_share, s.clusters,
            s.adjacent, (unsigned long long)off, (unsigned long long)len,
            k.walk, k.grid_cap, k.dst_misalign);
  char err[512] = "";
  simt_set_seed(rng_next(&r) | 1);
  int rc = kcase_run(&k, entry, off, len, k.packed_bytes, NULL, &mismatch, err,
                     sizeof err);
  CHECKF(rc == 0, "emulator: %s", err);
  CHECKF(mismatch == 0, "byte %llu of the copy differs",
         (unsigned long long)(mismatch - 1));
  *bytes += len;
  kcase_free(&k);
}

/* Whole aligned tensors of R bytes, chunk width c: the marked kernels must
 * run group steps, and get every byte right. */
static void groups_run(uint32_t R, uint32_t c) {
  rng r;
  rng_seed(&r, R * 16 + c);
  kcase_shape s = {R, c, 96, 0, 0, 0, DATA_FLIPS, MASK_STATS, 0, 1, 1};
  kcase k;
  kcase_build(&k, &r, &s);
  uint64_t mismatch;
  char err[512] = "";
  count_marks_reset();
  CHECKF(kcase_run(&k, ibp_emu_entry("ibp_decompress_marks"), 0, k.bytes,
                   k.packed_bytes, NULL, &mismatch, err, sizeof err) == 0 &&
             mismatch == 0,
         "R=%u c=%u: %s", R, c, err);
  /* (tensors of whole steps take a group's tensor by tensor, the others
   * its flat steps) */
  const unsigned mark =
      R % 512 ? count_marks_group_step() : count_marks_group_tensor();
  CHECKF(count_marks_warp_passes(mark) > 0, "R=%u c=%u: no group step ran", R,
         c);
  kcase_free(&k);
}

int main(void) {
  uint64_t iters = test_begin("test_kernel_groups", 3000), bytes = 0;
  simt_entry entry = ibp_emu_entry(IBP_KERNEL_DECOMPRESS);
  CHECK(entry != NULL);
  for (uint64_t i = 0; i < iters; i++)
    one_case(entry, i, &bytes);
  printf("test_kernel_groups: %llu cases, %llu bytes, 0 mismatches\n",
         (unsigned long long)iters, (unsigned long long)bytes);
  static const uint32_t sizes[] = {16, 256, 400, 512, 1024};
  for (unsigned w = 1; w <= 8; w *= 2)
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++)
      groups_run(sizes[i], w);
  printf("test_kernel_groups: group steps ran for every width\n");
  return test_end();
}
