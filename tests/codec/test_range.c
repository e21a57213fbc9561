/*
 * ibp_decompress_range and ibp_decompress_tensor_part against slices of the
 * original: the whole region, empty ranges, ranges inside one tensor, partial
 * first/last tensors, ranges touching or inside the tail, random ranges; and
 * IBP_ERR_RANGE outside.  The regions decoded are built by the reference
 * encoder (so the library decoder is checked against an independent encoder)
 * and by the library.  dst always ends at a guard page.
 * IBP_TEST_ITERATIONS = regions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guard_buf.h"
#include "region_util.h"

#define RANGES_PER_REGION 24

static void check_range(const ibp_region *reg, const uint8_t *data,
                        guard_buf *dst_buf, uint64_t off, uint64_t len) {
  uint8_t *dst = guard_tail(dst_buf, (size_t)len);
  memset(dst, 0xCC, (size_t)len);
  ibp_status st = ibp_decompress_range(reg, off, len, dst);
  CHECKF(st == IBP_OK, "range [%llu, +%llu) of %llu: %s",
         (unsigned long long)off, (unsigned long long)len,
         (unsigned long long)reg->bytes, ibp_status_name(st));
  CHECK_MEM(dst, data + off, (size_t)len, "decoded range");
}

static void check_range_error(const ibp_region *reg, guard_buf *dst_buf,
                              uint64_t off, uint64_t len) {
  uint8_t *dst = guard_tail(dst_buf, 16);
  ibp_status st = ibp_decompress_range(reg, off, len, dst);
  CHECKF(st == IBP_ERR_RANGE, "range [%llu, +%llu) of %llu: got %s, want %s",
         (unsigned long long)off, (unsigned long long)len,
         (unsigned long long)reg->bytes, ibp_status_name(st),
         ibp_status_name(IBP_ERR_RANGE));
}

/* A random [off, off+len) of one shape (see the file comment). */
static void pick_range(rng *r, const test_region *tr, int shape, uint64_t *off,
                       uint64_t *len) {
  uint64_t R = tr->f.R, bytes = tr->bytes, body = tr->n * R, i, a, b;
  switch (shape) {
  case 0: /* whole region */
    *off = 0, *len = bytes;
    return;
  case 1: /* empty, anywhere including the end */
    *off = rng_range(r, 0, bytes), *len = 0;
    return;
  case 2: /* inside one tensor */
    i = rng_below(r, tr->n);
    a = rng_range(r, 0, R), b = rng_range(r, a, R);
    *off = i * R + a, *len = b - a;
    return;
  case 3: /* partial first and last tensor */
    a = rng_below(r, body), b = rng_range(r, a, body);
    *off = a, *len = b - a;
    return;
  case 4: /* from inside the tensors into the tail */
    a = rng_below(r, body), *off = a, *len = rng_range(r, body, bytes) - a;
    return;
  case 5: /* inside the tail */
    a = rng_range(r, body, bytes), b = rng_range(r, a, bytes);
    *off = a, *len = b - a;
    return;
  default: /* anything */
    a = rng_range(r, 0, bytes), b = rng_range(r, a, bytes);
    *off = a, *len = b - a;
    return;
  }
}

static void check_region_ranges(rng *r, const test_region *tr,
                                const ibp_region *reg, guard_buf *dst_buf) {
  for (int k = 0; k < RANGES_PER_REGION; k++) {
    uint64_t off, len;
    pick_range(r, tr, k % 7, &off, &len);
    check_range(reg, tr->data, dst_buf, off, len);
  }
  uint64_t bytes = tr->bytes;
  check_range(reg, tr->data, dst_buf, bytes, 0);
  check_range_error(reg, dst_buf, 0, bytes + 1);
  check_range_error(reg, dst_buf, bytes, 1);
  check_range_error(reg, dst_buf, bytes + 1, 0);
  check_range_error(reg, dst_buf, 1 + rng_below(r, bytes), bytes);
  check_range_error(reg, dst_buf, 2, UINT64_MAX - 1); /* off+len wraps */
  check_range_error(reg, dst_buf, UINT64_MAX, 2);
}

static void check_part(const test_region *tr, guard_buf *src_buf,
                       guard_buf *dst_buf, uint64_t i, uint32_t off,
                       uint32_t len, ibp_status want) {
  uint32_t R = tr->f.R;
  size_t src_len = test_region_stored_len(tr, i);
  const uint8_t *src = guard_place(src_buf, tr->ref_slots + i * R, src_len);
  int comp = ref_get_bit(tr->ref_flags, i);
  uint8_t *dst = guard_tail(dst_buf, want == IBP_OK ? len : 16);
  ibp_status st =
      ibp_decompress_tensor_part(&tr->f.lib, src, src_len, comp, off, len, dst);
  CHECKF(st == want, "tensor %llu part [%u, +%u) of R=%u: got %s, want %s",
         (unsigned long long)i, off, len, R, ibp_status_name(st),
         ibp_status_name(want));
  if (want == IBP_OK)
    CHECK_MEM(dst, tr->data + i * R + off, len, "decoded tensor part");
}

static void check_parts(rng *r, const test_region *tr, guard_buf *src_buf,
                        guard_buf *dst_buf) {
  uint32_t R = tr->f.R;
  for (int k = 0; k < 8; k++) {
    uint64_t i = rng_below(r, tr->n);
    uint32_t a = (uint32_t)rng_range(r, 0, R);
    uint32_t b = (uint32_t)rng_range(r, a, R);
    check_part(tr, src_buf, dst_buf, i, a, b - a, IBP_OK);
    check_part(tr, src_buf, dst_buf, i, 0, R, IBP_OK);
    check_part(tr, src_buf, dst_buf, i, R, 0, IBP_OK);
    check_part(tr, src_buf, dst_buf, i, a, R - a + 1, IBP_ERR_RANGE);
    check_part(tr, src_buf, dst_buf, i, R + 1, 0, IBP_ERR_RANGE);
    check_part(tr, src_buf, dst_buf, i, UINT32_MAX, 2, IBP_ERR_RANGE);
  }
}

int main(void) {
  uint64_t iters = test_begin("test_range", 600);
  guard_buf dst_buf, src_buf;
  guard_init(&dst_buf, 1 << 20);
  guard_init(&src_buf, 1 << 16);
  for (uint64_t it = 0; it < iters; it++) {
    rng r;
    test_iteration(&r, it);
    test_region tr;
    test_region_gen(&tr, &r, rng_chance(&r, 0.5) ? 64 : 8192, 40);
    ibp_region ref_view = test_region_view(&tr, tr.ref_slots, tr.ref_flags);
    check_region_ranges(&r, &tr, &ref_view, &dst_buf);
    uint8_t *slots = xmalloc(tr.bytes), *flags = xmalloc(tr.flag_bytes);
    CHECK_OK(ibp_compress_region(&tr.f.lib, tr.data, tr.bytes, slots, flags, 2,
                                 NULL));
    ibp_region lib_view = test_region_view(&tr, slots, flags);
    check_region_ranges(&r, &tr, &lib_view, &dst_buf);
    check_parts(&r, &tr, &src_buf, &dst_buf);
    free(slots);
    free(flags);
    test_region_free(&tr);
  }
  guard_free(&dst_buf);
  guard_free(&src_buf);
  return test_end();
}
