/*
 * Corrupted compressed tensors: random bytes, valid streams with bit flips,
 * set padding bits, and short source lengths, fed to ibp_decompress_tensor,
 * ibp_compressed_length, ibp_decompress_tensor_part and (as whole regions
 * of random slots and flags) ibp_decompress_range.  Every source and
 * destination ends at a PROT_NONE guard page, so an over-read or over-write
 * faults even without ASan.  Expected results come from the reference
 * decoder: OK with the same bytes and length, or IBP_ERR_CORRUPT.
 * IBP_TEST_ITERATIONS = Mask/Bitval settings (each tried on many inputs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guard_buf.h"
#include "region_util.h"

#define MAX_R 4096
#define INPUTS 48

typedef struct bufs {
  guard_buf src, dst;
  uint8_t *want; /* MAX_R */
} bufs;

static const char *shape_names[] = {"random bytes", "flipped bits",
                                    "padding bit set", "short source",
                                    "raw flag"};

/* Builds input `shape` for tensor t in raw (R + 16 bytes); returns src_len. */
static size_t make_input(rng *r, const fixture *f, const uint8_t *t, int shape,
                         uint8_t *raw) {
  uint32_t R = f->R;
  size_t cap = R + 16;
  uint64_t bits;
  uint8_t *stream = xcalloc(ref_stream_capacity(&f->ref) + 16);
  size_t L = ref_encode(&f->ref, t, stream, &bits);
  rng_fill(r, raw, cap);
  size_t n = L < cap ? L : cap, src_len;
  memcpy(raw, stream, n);
  switch (shape) {
  case 0:
    rng_fill(r, raw, cap);
    src_len = (size_t)rng_range(r, 0, cap);
    break;
  case 1:
    for (int k = 1 + (int)rng_below(r, 3); k > 0; k--) {
      uint64_t b = rng_below(r, 8 * (uint64_t)(n ? n : 1));
      ref_put_bit(raw, b, !ref_get_bit(raw, b));
    }
    src_len = rng_chance(r, 0.5) ? n : (size_t)rng_range(r, 0, cap);
    break;
  case 2:
    if (bits % 8 && L <= cap)
      ref_put_bit(raw, bits + rng_below(r, 8 - bits % 8), 1);
    src_len = n;
    break;
  default:
    src_len = n ? (size_t)rng_below(r, n) : 0;
    break;
  }
  free(stream);
  return src_len;
}

static void check_tensor_input(rng *r, bufs *b, const fixture *f,
                               const uint8_t *raw, size_t src_len) {
  uint32_t R = f->R;
  const uint8_t *src = guard_place(&b->src, raw, src_len);
  size_t want_len = 0, got_len = 0;
  int ok = ref_decode(&f->ref, src, src_len, b->want, &want_len) == 0;
  ibp_status want = ok ? IBP_OK : IBP_ERR_CORRUPT;
  uint8_t *dst = guard_tail(&b->dst, R);
  CHECK_STATUS(ibp_decompress_tensor(&f->lib, src, src_len, 1, dst), want);
  if (ok)
    CHECK_MEM(dst, b->want, R, "decoded stream");
  CHECK_STATUS(ibp_compressed_length(&f->lib, src, src_len, &got_len), want);
  if (ok)
    CHECK_U64(got_len, want_len);
  uint32_t off = (uint32_t)rng_range(r, 0, R);
  uint32_t len = (uint32_t)rng_range(r, 0, R - off);
  dst = guard_tail(&b->dst, len);
  ibp_status st =
      ibp_decompress_tensor_part(&f->lib, src, src_len, 1, off, len, dst);
  CHECKF(st == want || (!ok && st == IBP_OK),
         "tensor part [%u, +%u): got %s, reference %s", off, len,
         ibp_status_name(st), ibp_status_name(want));
  if (ok)
    CHECK_MEM(dst, b->want + off, len, "decoded stream part");
}

static void check_raw_flag(rng *r, bufs *b, const fixture *f,
                           const uint8_t *raw) {
  uint32_t R = f->R;
  size_t src_len = (size_t)rng_range(r, R > 8 ? R - 8 : 0, R + 16);
  const uint8_t *src = guard_place(&b->src, raw, src_len);
  uint8_t *dst = guard_tail(&b->dst, R);
  ibp_status st = ibp_decompress_tensor(&f->lib, src, src_len, 0, dst);
  if (src_len >= R) {
    CHECK_STATUS(st, IBP_OK);
    CHECK_MEM(dst, raw, R, "raw tensor");
  } else {
    CHECKF(st != IBP_OK, "raw tensor with src_len %zu < R = %u accepted",
           src_len, R);
  }
}

static void run_tensor_inputs(rng *r, bufs *b, const fixture *f,
                              const uint8_t *data, uint64_t n) {
  uint8_t *raw = xmalloc(f->R + 16);
  for (int k = 0; k < INPUTS; k++) {
    int shape = (int)rng_below(r, 5);
    const uint8_t *t = data + rng_below(r, n) * f->R;
    size_t src_len = make_input(r, f, t, shape, raw);
    test_case("R=%u c=%u input %d: %s, src_len=%zu", f->R, f->c, k,
              shape_names[shape], src_len);
    if (shape == 4)
      check_raw_flag(r, b, f, raw);
    else
      check_tensor_input(r, b, f, raw, src_len);
  }
  free(raw);
}

/* ---- whole regions of random slots and flags ----------------------------- */

static void check_random_region(rng *r, bufs *b, test_region *tr) {
  uint32_t R = tr->f.R;
  uint8_t *slots = tr->ref_slots, *flags = tr->ref_flags;
  for (uint64_t i = 0; i < tr->n; i++) /* damage some slots */
    if (rng_chance(r, 0.3))
      ref_put_bit(slots + i * R, rng_below(r, 8 * (uint64_t)R), 1);
  if (rng_chance(r, 0.3))
    rng_fill(r, flags, tr->flag_bytes);
  uint8_t *want = xmalloc(tr->bytes);
  int all_ok = 1;
  for (uint64_t i = 0; i < tr->n; i++) {
    if (!ref_get_bit(flags, i))
      memcpy(want + i * R, slots + i * R, R);
    else if (ref_decode(&tr->f.ref, slots + i * R, R, want + i * R, NULL))
      all_ok = 0;
  }
  memcpy(want + tr->n * R, slots + tr->n * R, tr->tail);
  ibp_region view = test_region_view(tr, slots, flags);
  uint8_t *dst = guard_tail(&b->dst, tr->bytes);
  CHECK_STATUS(ibp_decompress_range(&view, 0, tr->bytes, dst),
               all_ok ? IBP_OK : IBP_ERR_CORRUPT);
  if (all_ok)
    CHECK_MEM(dst, want, tr->bytes, "decoded damaged region");
  free(want);
}

int main(void) {
  uint64_t iters = test_begin("test_corrupt", 1000);
  bufs b;
  guard_init(&b.src, MAX_R + 16);
  guard_init(&b.dst, 1 << 20);
  b.want = xmalloc(MAX_R);
  for (uint64_t it = 0; it < iters; it++) {
    rng r;
    test_iteration(&r, it);
    test_region tr;
    test_region_gen(&tr, &r, MAX_R, 12);
    run_tensor_inputs(&r, &b, &tr.f, tr.data, tr.n);
    test_case("damaged region R=%u c=%u n=%llu", tr.f.R, tr.f.c,
              (unsigned long long)tr.n);
    check_random_region(&r, &b, &tr);
    test_region_free(&tr);
  }
  free(b.want);
  guard_free(&b.src);
  guard_free(&b.dst);
  return test_end();
}
