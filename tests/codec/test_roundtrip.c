/*
 * Random round trips: R log-uniform in [1, max R], every chunk width,
 * realistic and random data and masks; each tensor is compared byte for byte
 * with the reference encoder and decoded back (tensor_check.c).
 *
 * Usage: test_roundtrip [--max-r N] [--iterations N]
 *   --iterations sets the default round-trip count (IBP_TEST_ITERATIONS
 *   still wins); the "long" CTest test roundtrip_1e6 passes 1000000.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_check.h"

#define GROUP_MAX 8 /* tensors per Mask/Bitval setting */

static mask_kind pick_mask(rng *r) {
  if (rng_chance(r, 0.5))
    return MASK_STATS;
  return (mask_kind)rng_below(r, MASK_KINDS);
}

/* One Mask/Bitval setting and up to GROUP_MAX tensors; returns how many
 * tensors were checked, *compressed counts those stored compressed. */
static uint64_t run_group(tensor_check *tc, rng *r, uint32_t max_R,
                          uint64_t left, uint64_t *compressed) {
  uint32_t R = rng_log_uniform(r, 1, max_R), c = rng_chunk(r);
  uint64_t n = 1 + rng_below(r, GROUP_MAX);
  if (n > left)
    n = left;
  data_kind dk = (data_kind)rng_below(r, DATA_KINDS);
  mask_kind mk = pick_mask(r);
  test_case("R=%u c=%u tensors=%llu data=%s mask=%s", R, c,
            (unsigned long long)n, data_kind_name(dk), mask_kind_name(mk));
  uint8_t *data = xmalloc((size_t)n * R);
  gen_data(r, dk, R, n, data);
  fixture f;
  fixture_init(&f, R, c);
  fixture_gen(&f, r, mk, data, n);
  for (uint64_t i = 0; i < n; i++) {
    test_case("R=%u c=%u tensor %llu of %llu data=%s mask=%s", R, c,
              (unsigned long long)i, (unsigned long long)n, data_kind_name(dk),
              mask_kind_name(mk));
    *compressed += (uint64_t)tensor_check_run(tc, &f, data + i * R);
  }
  fixture_free(&f);
  free(data);
  return n;
}

static uint64_t arg_u64(int argc, char **argv, const char *name,
                        uint64_t fallback) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0)
      return strtoull(argv[i + 1], NULL, 0);
  return fallback;
}

int main(int argc, char **argv) {
  uint32_t max_R = (uint32_t)arg_u64(argc, argv, "--max-r", 65536);
  uint64_t iters =
      test_begin("test_roundtrip", arg_u64(argc, argv, "--iterations", 6000));
  tensor_check tc;
  tensor_check_init(&tc, max_R);
  uint64_t done = 0, compressed = 0;
  for (uint64_t g = 0; done < iters; g++) {
    rng r;
    test_iteration(&r, g);
    done += run_group(&tc, &r, max_R, iters - done, &compressed);
  }
  tensor_check_free(&tc);
  printf("test_roundtrip: %llu round trips (R <= %u), %llu compressed\n",
         (unsigned long long)done, max_R, (unsigned long long)compressed);
  return test_end();
}
