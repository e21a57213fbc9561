/* Single-tensor library-vs-reference comparison (see tensor_check.h). */
#include "tensor_check.h"

#include <stdlib.h>
#include <string.h>

void tensor_check_init(tensor_check *tc, uint32_t max_R) {
  guard_init(&tc->slot, max_R);
  guard_init(&tc->src, max_R);
  guard_init(&tc->dst, max_R);
  tc->want = xmalloc(max_R);
}

void tensor_check_free(tensor_check *tc) {
  guard_free(&tc->slot);
  guard_free(&tc->src);
  guard_free(&tc->dst);
  free(tc->want);
}

static void fill_sentinel(uint8_t *buf, size_t n) {
  for (size_t i = 0; i < n; i++)
    buf[i] = (uint8_t)(0xA5 ^ (i * 37));
}

/* The oracle agrees with itself: its stream decodes back to t. */
static void check_reference(tensor_check *tc, const fixture *f,
                            const uint8_t *t, size_t len, int comp) {
  if (!comp)
    return;
  uint8_t *dst = guard_tail(&tc->dst, f->R);
  size_t got = 0;
  CHECKF(ref_decode(&f->ref, tc->want, len, dst, &got) == 0,
         "reference decoder rejects the reference stream");
  CHECK_U64(got, len);
  CHECK_MEM(dst, t, f->R, "reference round trip");
}

/* Library compress vs reference store; returns the stored length. */
static size_t check_compress(tensor_check *tc, const fixture *f,
                             const uint8_t *t, int *comp) {
  uint32_t R = f->R;
  size_t want_len = ref_store(&f->ref, t, tc->want, comp);
  uint8_t *slot = guard_tail(&tc->slot, R);
  fill_sentinel(slot, R);
  int got_comp = -1;
  size_t got_len = ibp_compress_tensor(&f->lib, t, slot, &got_comp);
  CHECK_U64(got_len, want_len);
  CHECK_U64(got_comp, *comp);
  CHECK_MEM(slot, tc->want, want_len, "compressed slot");
  /* bytes past want_len are unspecified; the guard page after the slot
   * catches any write past R */
  CHECK_U64(ibp_compressed_size(&f->lib, t), want_len);
  CHECK_U64(ibp_compress_tensor(&f->lib, t, slot, NULL), want_len);
  check_reference(tc, f, t, want_len, *comp);
  return want_len;
}

/* Decodes the stored form given src_len readable bytes. */
static void check_decode(tensor_check *tc, const fixture *f, const uint8_t *t,
                         size_t len, int comp, size_t src_len) {
  uint8_t *src = guard_tail(&tc->src, src_len);
  memcpy(src, tc->want, len);
  memset(src + len, 0, src_len - len);
  uint8_t *dst = guard_tail(&tc->dst, f->R);
  fill_sentinel(dst, f->R);
  CHECK_OK(ibp_decompress_tensor(&f->lib, src, src_len, comp, dst));
  CHECK_MEM(dst, t, f->R, "decompressed tensor");
  if (comp) {
    size_t got = 0;
    CHECK_OK(ibp_compressed_length(&f->lib, src, src_len, &got));
    CHECK_U64(got, len);
  }
}

int tensor_check_run(tensor_check *tc, const fixture *f, const uint8_t *t) {
  int comp;
  size_t len = check_compress(tc, f, t, &comp);
  check_decode(tc, f, t, len, comp, len);  /* exactly the stored bytes */
  check_decode(tc, f, t, len, comp, f->R); /* the whole slot */
  return comp;
}
