/*
 * Container round trip and damage:
 *   - write to memory -> layout is header(128) | Mask | Bitval | flags |
 *     stored tensors back to back | tail, matching the reference region,
 *     version 3 with K = 1 and both checksums XXH64 (libxxhash, computed
 *     here from the bytes docs/FORMAT.md §7 lists) -> read_info fields ->
 *     decode (in-order writes) == original;
 *   - every single-byte corruption of the header and metadata makes
 *     read_info and decode fail; sampled payload bit flips make decode
 *     fail or (don't-care bits) decode to the original; every truncation
 *     makes read_info and decode fail; nothing reads
 *     past the span (it ends at a guard page);
 *   - a failing write callback (at every call) gives IBP_ERR_IO, when
 *     writing and when decoding.
 * IBP_TEST_ITERATIONS = containers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "guard_buf.h"
#include "ibp/container.h"
#include "region_util.h"

#define PAYLOAD_CORRUPTIONS 64

static uint64_t g_harmless_flips; /* accepted payload flips (same bytes) */

/* ---- memory write callbacks ---------------------------------------------- */

typedef struct sink {
  uint8_t *buf;
  uint64_t len, cap;
  uint64_t calls, fail_at; /* fail_at: 1-based call that fails, 0 = never */
  int in_order;            /* decode: offsets must follow each other */
} sink;

static int sink_write(void *ctx, uint64_t offset, const void *buf, size_t len) {
  sink *s = ctx;
  if (++s->calls == s->fail_at)
    return -1;
  CHECKF(!s->in_order || offset == s->len,
         "decode wrote at offset %llu, expected %llu",
         (unsigned long long)offset, (unsigned long long)s->len);
  if (offset + len > s->cap) {
    uint64_t cap = (offset + len) * 2;
    s->buf = realloc(s->buf, (size_t)cap);
    CHECK(s->buf != NULL);
    memset(s->buf + s->cap, 0, (size_t)(cap - s->cap));
    s->cap = cap;
  }
  memcpy(s->buf + offset, buf, len);
  if (offset + len > s->len)
    s->len = offset + len;
  return 0;
}

/* ---- checks -------------------------------------------------------------- */

static void check_info_equal(const ibp_container_info *a,
                             const ibp_container_info *b) {
  CHECK_U64(a->version, b->version);
  CHECK_U64(a->tensor_bytes, b->tensor_bytes);
  CHECK_U64(a->chunk_bytes, b->chunk_bytes);
  CHECK(a->threshold == b->threshold);
  CHECK_U64(a->original_bytes, b->original_bytes);
  CHECK_U64(a->tensors, b->tensors);
  CHECK_U64(a->tail_bytes, b->tail_bytes);
  CHECK_U64(a->tensors_compressed, b->tensors_compressed);
  CHECK_U64(a->payload_bytes, b->payload_bytes);
  CHECK_U64(a->container_bytes, b->container_bytes);
  CHECK_U64(a->data_checksum, b->data_checksum);
}

static uint64_t le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Version 3's checksums: XXH64, seed 0, of the original bytes (at 72) and
 * of the header without its own field plus the metadata (at 80). */
static void check_checksums(const test_region *tr, const uint8_t *c,
                            uint64_t meta) {
  CHECK_U64(le64(c + 72), XXH64(tr->data, (size_t)tr->bytes, 0));
  XXH64_state_t *x = XXH64_createState();
  CHECK(x != NULL);
  XXH64_reset(x, 0);
  XXH64_update(x, c, 80);
  XXH64_update(x, c + 88, (size_t)meta - 88);
  CHECK_U64(le64(c + 80), XXH64_digest(x));
  XXH64_freeState(x);
}

static void check_layout(const test_region *tr, const uint8_t *c,
                         const ibp_container_info *info) {
  uint32_t R = tr->f.R;
  CHECK_MEM(c, IBP_CONTAINER_MAGIC, 8, "magic");
  CHECK_U64(info->version, 3);
  CHECK_U64(le64(c + 88) & 0xffffffffu, 1); /* K */
  CHECK_U64(info->tensor_bytes, R);
  CHECK_U64(info->chunk_bytes, tr->f.c);
  CHECK_U64(info->original_bytes, tr->bytes);
  CHECK_U64(info->tensors, tr->n);
  CHECK_U64(info->tail_bytes, tr->tail);
  CHECK_U64(info->tensors_compressed, tr->ref_compressed);
  CHECK_U64(info->payload_bytes, tr->ref_stored);
  uint64_t meta = IBP_CONTAINER_HEADER_BYTES + 2 * (uint64_t)R + tr->flag_bytes;
  CHECK_U64(info->container_bytes, meta + tr->ref_stored);
  const uint8_t *p = c + IBP_CONTAINER_HEADER_BYTES;
  CHECK_MEM(p, tr->f.mask, R, "container mask");
  CHECK_MEM(p + R, tr->f.bitval, R, "container bitval");
  CHECK_MEM(p + 2 * R, tr->ref_flags, tr->flag_bytes, "container flags");
  p = c + meta;
  for (uint64_t i = 0; i < tr->n; i++) {
    size_t len = test_region_stored_len(tr, i);
    CHECK_MEM(p, tr->ref_slots + i * R, len, "container tensor");
    p += len;
  }
  CHECK_MEM(p, tr->data + tr->n * R, tr->tail, "container tail");
  check_checksums(tr, c, meta);
}

static void check_decode(const uint8_t *c, uint64_t len,
                         const test_region *tr) {
  sink out = {0};
  out.in_order = 1;
  CHECK_OK(ibp_container_decode(c, len, sink_write, &out));
  CHECK_U64(out.len, tr->bytes);
  CHECK_MEM(out.buf, tr->data, tr->bytes, "decoded container");
  free(out.buf);
  CHECK_OK(ibp_container_decode(c, len, NULL, NULL)); /* verify only */
}

/* A damaged container must be rejected by read_info and decode. */
static void check_rejected(const uint8_t *c, uint64_t len, const char *what,
                           uint64_t where) {
  ibp_container_info info;
  ibp_status st = ibp_container_read_info(c, len, &info);
  CHECKF(st != IBP_OK, "read_info accepts %s at %llu", what,
         (unsigned long long)where);
  st = ibp_container_decode(c, len, NULL, NULL);
  CHECKF(st != IBP_OK, "decode accepts %s at %llu", what,
         (unsigned long long)where);
  sink out = {0};
  st = ibp_container_decode(c, len, sink_write, &out);
  free(out.buf);
  CHECKF(st != IBP_OK, "decode (with output) accepts %s at %llu", what,
         (unsigned long long)where);
}

/* A payload bit flip is rejected, or is harmless: the v1 stream has
 * don't-care bits (the fit bit of a chunk whose mask bits are all 0 changes
 * nothing), and a flip there decodes to the original bytes. */
static void check_payload_flip(const uint8_t *c, uint64_t len,
                               const test_region *tr, uint64_t where) {
  sink out = {0};
  ibp_status st = ibp_container_decode(c, len, sink_write, &out);
  if (st == IBP_OK) {
    CHECKF(out.len == tr->bytes && !memcmp(out.buf, tr->data, tr->bytes),
           "decode accepts a payload bit flip at %llu and returns other bytes",
           (unsigned long long)where);
    g_harmless_flips++;
  }
  free(out.buf);
}

static void check_corruptions(rng *r, const sink *w, uint64_t meta,
                              const test_region *tr, guard_buf *g,
                              int exhaustive) {
  uint8_t *c = guard_place(g, w->buf, (size_t)w->len);
  uint64_t step = exhaustive ? 1 : 1 + meta / 64;
  for (uint64_t i = 0; i < meta; i += step) {
    uint8_t x = (uint8_t)(1 + rng_below(r, 255));
    c[i] ^= x;
    check_rejected(c, w->len, "a header/metadata byte corruption", i);
    c[i] ^= x;
  }
  for (int k = 0; k < PAYLOAD_CORRUPTIONS && w->len > meta; k++) {
    uint64_t i = rng_range(r, meta, w->len - 1);
    uint8_t x = (uint8_t)(1u << rng_below(r, 8));
    c[i] ^= x;
    check_payload_flip(c, w->len, tr, i);
    c[i] ^= x;
  }
}

static void check_truncations(rng *r, const sink *w, guard_buf *g,
                              int exhaustive) {
  for (uint64_t len = 0; len < w->len; len++) {
    if (!exhaustive && len > 256 && len + 256 < w->len && rng_below(r, 64))
      continue;
    const uint8_t *c = guard_place(g, w->buf, (size_t)len);
    check_rejected(c, len, "a truncation to length", len);
  }
}

static void check_write_failures(const test_region *tr, const sink *w) {
  sink count = {0};
  CHECK_OK(ibp_container_write(&tr->f.lib, tr->data, tr->bytes, 1, sink_write,
                               &count, NULL));
  for (uint64_t k = 1; k <= count.calls; k++) {
    sink s = {0};
    s.fail_at = k;
    CHECK_STATUS(ibp_container_write(&tr->f.lib, tr->data, tr->bytes, 1,
                                     sink_write, &s, NULL),
                 IBP_ERR_IO);
    free(s.buf);
  }
  sink d = {0};
  CHECK_OK(ibp_container_decode(w->buf, w->len, sink_write, &d));
  for (uint64_t k = 1; k <= d.calls && k <= 64; k++) {
    sink s = {0};
    s.fail_at = k;
    CHECK_STATUS(ibp_container_decode(w->buf, w->len, sink_write, &s),
                 IBP_ERR_IO);
    free(s.buf);
  }
  free(count.buf);
  free(d.buf);
}

static void run_container(rng *r, guard_buf *g, int small) {
  test_region tr;
  if (small)
    test_region_gen(&tr, r, 512, 16);
  else
    test_region_gen(&tr, r, 65536, 12);
  unsigned threads = 1 + (unsigned)rng_below(r, 3);
  sink w = {0};
  ibp_container_info winfo, rinfo;
  CHECK_OK(ibp_container_write(&tr.f.lib, tr.data, tr.bytes, threads,
                               sink_write, &w, &winfo));
  CHECK_U64(w.len, winfo.container_bytes);
  check_layout(&tr, w.buf, &winfo);
  const uint8_t *c = guard_place(g, w.buf, (size_t)w.len);
  CHECK_OK(ibp_container_read_info(c, w.len, &rinfo));
  check_info_equal(&rinfo, &winfo);
  check_decode(c, w.len, &tr);
  uint64_t meta =
      IBP_CONTAINER_HEADER_BYTES + 2 * (uint64_t)tr.f.R + tr.flag_bytes;
  check_corruptions(r, &w, meta, &tr, g, small);
  check_truncations(r, &w, g, small);
  check_write_failures(&tr, &w);
  free(w.buf);
  test_region_free(&tr);
}

int main(void) {
  uint64_t iters = test_begin("test_container", 150);
  guard_buf g;
  guard_init(&g, 2u << 20);
  for (uint64_t it = 0; it < iters; it++) {
    rng r;
    test_iteration(&r, it);
    run_container(&r, &g, it % 4 != 3);
  }
  guard_free(&g);
  printf("test_container: %llu payload bit flips decoded to the original "
         "bytes (don't-care fit bits)\n",
         (unsigned long long)g_harmless_flips);
  return test_end();
}
