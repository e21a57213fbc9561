/*
 * ibp_compress_region against the reference: with 1, 2, 3 and 8 threads the
 * slots and flags are byte-identical to the reference region (bytes past each
 * stored length unspecified), unused flag bits are 0, and the summary counts
 * match.  IBP_TEST_ITERATIONS = regions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guard_buf.h"
#include "region_util.h"

static const unsigned thread_counts[] = {1, 2, 3, 8};

static void check_summary(const test_region *tr, const ibp_region_summary *s) {
  CHECK_U64(s->tensors, tr->n);
  CHECK_U64(s->tail_bytes, tr->tail);
  CHECK_U64(s->tensors_compressed, tr->ref_compressed);
  CHECK_U64(s->compressed_bytes, tr->ref_stored);
  CHECK_U64(s->metadata_bytes, 2 * (uint64_t)tr->f.R + tr->flag_bytes);
}

static void check_threads(const test_region *tr, unsigned threads,
                          guard_buf *flags_buf) {
  test_case("region R=%u c=%u n=%llu tail=%llu data=%s mask=%s threads=%u",
            tr->f.R, tr->f.c, (unsigned long long)tr->n,
            (unsigned long long)tr->tail, data_kind_name(tr->dk),
            mask_kind_name(tr->mk), threads);
  uint8_t *slots = xmalloc(tr->bytes);
  memset(slots, REGION_SENTINEL, tr->bytes);
  uint8_t *flags = guard_tail(flags_buf, tr->flag_bytes);
  memset(flags, 0xFF, tr->flag_bytes); /* must be fully written */
  ibp_region_summary s;
  memset(&s, 0xEE, sizeof s);
  CHECK_OK(ibp_compress_region(&tr->f.lib, tr->data, tr->bytes, slots, flags,
                               threads, &s));
  CHECK_MEM(flags, tr->ref_flags, tr->flag_bytes, "region flags");
  test_region_check_slots(tr, slots, "region slots");
  check_summary(tr, &s);
  /* summary may be NULL */
  CHECK_OK(ibp_compress_region(&tr->f.lib, tr->data, tr->bytes, slots, flags,
                               threads, NULL));
  test_region_check_slots(tr, slots, "region slots (no summary)");
  free(slots);
}

int main(void) {
  uint64_t iters = test_begin("test_region", 300);
  guard_buf flags_buf;
  guard_init(&flags_buf, 1 << 16);
  for (uint64_t i = 0; i < iters; i++) {
    rng r;
    test_iteration(&r, i);
    test_region tr;
    test_region_gen_mixed(&tr, &r);
    CHECK_U64(ibp_region_flag_bytes(&tr.f.lib, tr.bytes), tr.flag_bytes);
    for (size_t t = 0; t < sizeof thread_counts / sizeof *thread_counts; t++)
      check_threads(&tr, thread_counts[t], &flags_buf);
    test_region_free(&tr);
  }
  guard_free(&flags_buf);
  return test_end();
}
