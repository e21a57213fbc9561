/*
 * The packed GPU layout (docs/FORMAT.md §3) against the reference region:
 * offsets are the running sum of the reference's compressed lengths (0 for
 * raw tensors), the packed bytes are the reference streams back to back and
 * decode to the original; bad offsets and corrupt slots are refused.
 * IBP_TEST_ITERATIONS = regions.
 */
#include <stdlib.h>
#include <string.h>

#include "guard_buf.h"
#include "region_util.h"

static int compressed(const test_region *tr, uint64_t i) {
  return (tr->ref_flags[i / 8] >> (i % 8)) & 1;
}

static void check_packed(const test_region *tr, rng *r) {
  test_case("packed R=%u c=%u n=%llu tail=%llu data=%s mask=%s", tr->f.R,
            tr->f.c, (unsigned long long)tr->n, (unsigned long long)tr->tail,
            data_kind_name(tr->dk), mask_kind_name(tr->mk));
  const uint32_t R = tr->f.R;
  ibp_region reg = test_region_view(tr, tr->ref_slots, tr->ref_flags);
  uint64_t *off = xmalloc((tr->n + 1) * sizeof *off);
  CHECK_OK(ibp_region_pack_offsets(&reg, off));
  uint64_t at = 0;
  for (uint64_t i = 0; i < tr->n; i++) {
    CHECK_U64(off[i], at);
    if (compressed(tr, i))
      at += test_region_stored_len(tr, i);
  }
  CHECK_U64(off[tr->n], at);

  /* exactly offsets[n] bytes are written: a guard page follows them */
  guard_buf g;
  guard_init(&g, at + 1);
  uint8_t *packed = guard_tail(&g, at);
  CHECK_OK(ibp_region_pack(&reg, off, at ? packed : NULL));
  uint8_t *out = xmalloc(R);
  for (uint64_t i = 0; i < tr->n; i++) {
    uint64_t len = off[i + 1] - off[i];
    if (!compressed(tr, i)) {
      CHECK_U64(len, 0);
      continue;
    }
    CHECK_MEM(packed + off[i], tr->ref_slots + i * R, len, "packed stream");
    /* each stream decodes from exactly its own bytes */
    CHECK_OK(ibp_decompress_tensor(&tr->f.lib, packed + off[i], len, 1, out));
    CHECK_MEM(out, tr->data + i * R, R, "decoded from the packed layout");
  }
  free(out);

  /* offsets that disagree with the flags are refused */
  if (tr->n) {
    uint64_t i = rng_below(r, tr->n);
    uint64_t *bad = xmalloc((tr->n + 1) * sizeof *bad);
    memcpy(bad, off, (tr->n + 1) * sizeof *bad);
    for (uint64_t k = i + 1; k <= tr->n; k++)
      bad[k] += compressed(tr, i) ? (uint64_t)0 - (off[i + 1] - off[i]) : 1;
    CHECK(ibp_region_pack(&reg, bad, packed) == IBP_ERR_INVALID_ARGUMENT);
    free(bad);
  }
  guard_free(&g);
  free(off);
}

/* A compressed slot whose stream runs past R: IBP_ERR_CORRUPT. */
static void check_corrupt(const test_region *tr) {
  uint64_t i = 0;
  while (i < tr->n && !compressed(tr, i))
    i++;
  if (i == tr->n)
    return;
  const uint32_t R = tr->f.R;
  uint8_t *slots = xmalloc(tr->bytes);
  memcpy(slots, tr->ref_slots, tr->bytes);
  memset(slots + i * R, 0, R); /* no chunk fits: every bit travels, L > R */
  ibp_region reg = test_region_view(tr, slots, tr->ref_flags);
  uint64_t *off = xmalloc((tr->n + 1) * sizeof *off);
  CHECK(ibp_region_pack_offsets(&reg, off) == IBP_ERR_CORRUPT);
  free(off);
  free(slots);
}

int main(void) {
  uint64_t iters = test_begin("test_packed", 300);
  for (uint64_t k = 0; k < iters; k++) {
    rng r;
    test_iteration(&r, k);
    test_region tr;
    test_region_gen_mixed(&tr, &r);
    check_packed(&tr, &r);
    check_corrupt(&tr);
    test_region_free(&tr);
  }
  ibp_region none = {0};
  uint64_t one = 0;
  CHECK(ibp_region_pack_offsets(&none, &one) != IBP_OK);
  CHECK(ibp_region_pack_offsets(NULL, &one) == IBP_ERR_INVALID_ARGUMENT);
  return test_end();
}
