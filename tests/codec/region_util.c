/* Random regions and their reference compression (see region_util.h). */
#include "region_util.h"

#include <stdlib.h>
#include <string.h>

void test_region_gen(test_region *tr, rng *r, uint32_t max_R, uint64_t max_n) {
  memset(tr, 0, sizeof *tr);
  uint32_t R = rng_log_uniform(r, 1, max_R), c = rng_chunk(r);
  tr->n = 1 + rng_below(r, max_n);
  tr->tail = rng_below(r, 3) == 0 ? 0 : rng_below(r, R);
  tr->bytes = tr->n * R + tr->tail;
  tr->dk = (data_kind)rng_below(r, DATA_KINDS);
  tr->mk =
      rng_chance(r, 0.7) ? MASK_STATS : (mask_kind)rng_below(r, MASK_KINDS);
  test_case("region R=%u c=%u n=%llu tail=%llu data=%s mask=%s", R, c,
            (unsigned long long)tr->n, (unsigned long long)tr->tail,
            data_kind_name(tr->dk), mask_kind_name(tr->mk));
  tr->data = xmalloc(tr->bytes);
  gen_data(r, tr->dk, R, tr->n, tr->data);
  rng_fill(r, tr->data + tr->n * R, tr->tail);
  fixture_init(&tr->f, R, c);
  fixture_gen(&tr->f, r, tr->mk, tr->data, tr->n);
  tr->flag_bytes = (tr->n + 7) / 8;
  tr->ref_slots = xmalloc(tr->bytes);
  memset(tr->ref_slots, REGION_SENTINEL, tr->bytes);
  tr->ref_flags = xmalloc(tr->flag_bytes);
  tr->ref_compressed =
      ref_compress_region(&tr->f.ref, tr->data, tr->bytes, tr->ref_slots,
                          tr->ref_flags, &tr->ref_stored);
}

void test_region_free(test_region *tr) {
  fixture_free(&tr->f);
  free(tr->data);
  free(tr->ref_slots);
  free(tr->ref_flags);
  memset(tr, 0, sizeof *tr);
}

size_t test_region_stored_len(const test_region *tr, uint64_t i) {
  const uint8_t *t = tr->data + i * tr->f.R;
  if (!ref_get_bit(tr->ref_flags, i))
    return tr->f.R;
  uint8_t *tmp = xmalloc(ref_stream_capacity(&tr->f.ref));
  size_t len = ref_encode(&tr->f.ref, t, tmp, NULL);
  free(tmp);
  return len;
}

ibp_region test_region_view(const test_region *tr, const uint8_t *slots,
                            const uint8_t *flags) {
  return (ibp_region){&tr->f.lib, slots, tr->bytes, flags};
}

void test_region_check_slots(const test_region *tr, const uint8_t *slots,
                             const char *what) {
  const uint32_t R = tr->f.R;
  for (uint64_t i = 0; i < tr->n; i++) {
    size_t len = test_region_stored_len(tr, i);
    CHECKF(memcmp(slots + i * R, tr->ref_slots + i * R, len) == 0,
           "%s: slot %llu differs within its stored length %zu", what,
           (unsigned long long)i, len);
  }
  CHECK_MEM(slots + tr->n * R, tr->ref_slots + tr->n * R, tr->tail,
            "region tail");
}

void test_region_gen_mixed(test_region *tr, rng *r) {
  uint32_t max_R = rng_chance(r, 0.5) ? 64 : 16384;
  test_region_gen(tr, r, max_R, max_R == 64 ? 600 : 24);
}
