/*
 * The emulated decompress kernel against the original bytes (and so
 * against the host codec that compressed them): random tensor sizes
 * 1 B - 64 KiB, every chunk width, every data and mask kind, random copy
 * ranges (whole region, partial first/last tensor, the raw tail, single
 * bytes), raw and dirty tensors, host bases misaligned to 128 B, one
 * Mask/Bitval pair (even cases) or K = 2 .. 256 with a cluster id per
 * tensor (odd cases), destinations at any offset from a 16-byte boundary,
 * and in 0.3 % of cases one or two tensors of 64 KiB - 1 MiB.  Tensors of
 * IBP_KERNEL_BLOCK_R bytes and more (a sixth of the cases) are decoded by
 * whole blocks in rounds (ibp_kernels.h), the others by one warp each.
 * Then the decode plan is broken on purpose -- one set bit of one stage
 * mask cleared -- and the copy must come out wrong: a kernel that ignored
 * its plan would pass the rest (every other broken plan with tensors a
 * block decodes).  Likewise clustered cases whose every tensor fits its
 * own cluster's random Mask, with one tensor's id changed to another
 * cluster, and one cluster's plan given a wrong Bitval bit: both copies
 * must come out wrong.
 * IBP_TEST_ITERATIONS = cases (default 2 x 10^4: 10^4 with one pair, 10^4
 * with clusters); SIMT_SEED / IBP_TEST_SEED.
 */
#include <stdio.h>

#include "gen_data.h"
#include "kcase.h"
#include "kernels_emu.h"

#define BROKEN_PLANS 64
#define BROKEN_CLUSTERS 32

static void shape_for(rng *r, kcase_shape *s) {
  kcase_random_shape(r, s, 16);
  s->dirty_share = rng_chance(r, 0.2) ? 0.3 : 0;
  /* clusters: ids of 1, 2, 4 and 8 bits (main keeps K = 1 in even cases) */
  static const unsigned ks[] = {2, 3, 4, 5, 9, 16, 17, 40, 100, 256};
  s->clusters = ks[rng_below(r, 10)];
  if (s->clusters > 40 && s->R > 2048) { /* plans of K x (4 + S) x R bytes */
    s->R = (uint32_t)rng_range(r, 1, 2048);
    s->tail %= s->R;
  }
  if (rng_chance(r, 0.003)) { /* a large tensor, up to 1 MiB */
    s->R = (uint32_t)rng_log_uniform(r, 65536, 1u << 20);
    s->n = rng_range(r, 1, 2);
    s->tail = rng_chance(r, 0.3) ? rng_below(r, 4096) : 0;
  }
}

/* A Mask with 4 to 8 invariant bits per byte at random places and tensors
 * that fit it everywhere (random elsewhere): every tensor is compressed and
 * every kept bit carries random data. */
static void fit_everything(kcase *k, rng *r) {
  for (uint32_t b = 0; b < k->R; b++) {
    k->mask[b] = (uint8_t)(rng_next(r) | (0xF0u >> rng_below(r, 4)));
    k->bitval[b] = (uint8_t)(rng_next(r) & k->mask[b]);
  }
  ibp_params_free(&k->params);
  CHECK_OK(ibp_params_from_masks(k->R, k->c, k->mask, k->bitval, &k->params));
  for (uint64_t i = 0; i < k->n; i++)
    for (uint32_t b = 0; b < k->R; b++) {
      uint8_t *t = k->orig + i * k->R + b;
      *t = (uint8_t)((rng_next(r) & ~k->mask[b]) | k->bitval[b]);
    }
  kcase_compress(k);
  for (uint64_t i = 0; i < k->n; i++)
    CHECK(kcase_stored(k, i) < k->R);
}

/* One set bit of one stage mask of the plan, cleared: the deposit loses a
 * bit.  The copy of every tensor must differ somewhere. */
static int broken_plan(simt_entry entry, uint64_t i) {
  rng r;
  test_iteration(&r, i);
  kcase_shape s;
  kcase_random_shape(&r, &s, 1);
  const int block = i % 2; /* tensors a whole block decodes */
  s.R = (uint32_t)(block ? rng_range(&r, IBP_KERNEL_BLOCK_R, 32768)
                         : rng_range(&r, 16, 4096));
  s.n = block ? 16 : 32; /* a lost bit may match its neighbour by chance */
  s.tail = 0;
  s.mask_kind = MASK_RANDOM;
  s.adjacent = 1;
  kcase k;
  kcase_build(&k, &r, &s);
  fit_everything(&k, &r);
  test_case("broken plan: R=%u c=%u S=%u", s.R, s.c, k.plan_stages);
  char err[512] = "";
  uint64_t mismatch;
  CHECKF(kcase_run(&k, entry, 0, k.bytes, k.packed_bytes, NULL, &mismatch, err,
                   sizeof err) == 0 &&
             mismatch == 0,
         "the intact plan: %s", err);
  const unsigned S = k.plan_stages, words = (4 + S) * 4;
  const int tried = S > 0;
  if (tried) {
    const uint64_t blocks = (s.R + 15) / 16;
    uint32_t *w;
    do { /* a random set bit of a random stage word */
      w = k.plan + rng_below(&r, blocks) * words + 16 + rng_below(&r, 4 * S);
    } while (*w == 0);
    unsigned bit;
    do
      bit = (unsigned)rng_below(&r, 32);
    while (!((*w >> bit) & 1));
    *w &= ~(1u << bit);
    CHECKF(kcase_run(&k, entry, 0, k.bytes, k.packed_bytes, NULL, &mismatch,
                     err, sizeof err) == 0,
           "emulator: %s", err);
    CHECKF(mismatch != 0, "a broken plan decoded right (stage word %u)",
           (unsigned)(w - k.plan));
  }
  kcase_free(&k);
  return tried;
}

/* K random Masks (4 to 8 invariant bits per byte) and tensors, tensor i
 * fitting cluster i % K everywhere: every tensor is compressed, and a
 * tensor decoded with another cluster's plan comes out wrong. */
static void fit_clusters(kcase *k, rng *r) {
  const uint32_t stride = (k->R + 15) & ~15u, K = k->clusters;
  for (uint32_t c = 0; c < K; c++) {
    uint8_t *m = k->mask + (size_t)c * stride,
            *v = k->bitval + (size_t)c * stride;
    for (uint32_t b = 0; b < k->R; b++) {
      m[b] = (uint8_t)(rng_next(r) | (0xF0u >> rng_below(r, 4)));
      v[b] = (uint8_t)(rng_next(r) & m[b]);
    }
    ibp_params_free(&k->cl[c]);
    CHECK_OK(ibp_params_from_masks(k->R, k->c, m, v, &k->cl[c]));
  }
  for (uint64_t i = 0; i < k->n; i++) {
    const uint8_t *m = k->mask + (i % K) * stride,
                  *v = k->bitval + (i % K) * stride;
    for (uint32_t b = 0; b < k->R; b++) {
      uint8_t *t = k->orig + i * k->R + b;
      *t = (uint8_t)((rng_next(r) & ~m[b]) | v[b]);
    }
  }
  kcase_compress(k);
  for (uint64_t i = 0; i < k->n; i++)
    CHECK(kcase_stored(k, i) < k->R);
}

static uint32_t get_id(const kcase *k, uint64_t t) {
  const uint32_t b = ibp_cluster_id_bits(k->clusters);
  const uint64_t at = t * b;
  return (k->ids[at / 32] >> (at % 32)) & ((1u << b) - 1);
}

static void put_id(kcase *k, uint64_t t, uint32_t id) {
  const uint32_t b = ibp_cluster_id_bits(k->clusters);
  const uint64_t at = t * b;
  const uint32_t m = ((1u << b) - 1) << (at % 32);
  k->ids[at / 32] = (k->ids[at / 32] & ~m) | ((id << (at % 32)) & m);
}

/* Runs the whole region; returns whether it came out right. */
static int decodes_right(kcase *k, simt_entry entry, const char *what) {
  char err[512] = "";
  uint64_t mismatch;
  CHECKF(kcase_run(k, entry, 0, k->bytes, k->packed_bytes, NULL, &mismatch, err,
                   sizeof err) == 0,
         "%s: emulator: %s", what, err);
  return mismatch == 0;
}

/* A clustered case broken on purpose, two ways: one tensor's cluster id
 * names another cluster, and one invariant bit of one cluster's Bitval in
 * the plan is flipped.  Either copy must come out wrong (a kernel that
 * ignored the ids, or read every tensor with cluster 0's plan, would
 * decode the first right). */
static void broken_clusters(simt_entry entry, uint64_t i) {
  rng r;
  test_iteration(&r, i);
  kcase_shape s;
  kcase_random_shape(&r, &s, 1);
  const int block = i % 2; /* tensors a whole block decodes */
  static const unsigned ks[] = {2, 3, 5, 16, 17};
  s.R = (uint32_t)(block ? rng_range(&r, IBP_KERNEL_BLOCK_R, 32768)
                         : rng_range(&r, 16, 2048));
  s.n = block ? 8 : 32;
  s.tail = 0;
  s.mask_kind = MASK_RANDOM;
  s.adjacent = 1;
  s.clusters = ks[rng_below(&r, 5)];
  kcase k;
  kcase_build(&k, &r, &s);
  fit_clusters(&k, &r);
  test_case("broken clusters: R=%u c=%u K=%u", s.R, s.c, s.clusters);
  CHECKF(decodes_right(&k, entry, "intact"), "the intact clusters");
  const uint64_t t = rng_below(&r, k.n);
  const uint32_t id = get_id(&k, t);
  put_id(&k, t,
         (id + 1 + (uint32_t)rng_below(&r, k.clusters - 1)) % k.clusters);
  CHECKF(!decodes_right(&k, entry, "wrong id"),
         "tensor %llu decoded right with another cluster's id",
         (unsigned long long)t);
  put_id(&k, t, id);
  CHECKF(decodes_right(&k, entry, "restored"), "the id put back");
  /* Bitval word of a block of cluster id's plan, at a bit inside R that
   * its Mask makes invariant (keep bit 0) */
  const uint32_t S = k.plan_stages, blocks = (s.R + 15) / 16;
  const uint64_t stride = ibp_kernels_plan_bytes(s.R, 1, S) / 4;
  uint32_t b, w, bit;
  do {
    b = (uint32_t)rng_below(&r, blocks);
    w = (uint32_t)rng_below(&r, 4);
    bit = (uint32_t)rng_below(&r, 32);
  } while (16 * b + 4 * w + bit / 8 >= s.R);
  uint32_t *g = k.plan + id * stride + (uint64_t)b * (4 + S) * 4;
  while ((g[w] >> bit) & 1) /* a kept bit: the next one (4+ per byte are not) */
    bit = (bit & ~7u) | ((bit + 1) & 7u);
  g[4 + w] ^= 1u << bit;
  CHECKF(!decodes_right(&k, entry, "wrong bitval"),
         "cluster %u decoded right with a Bitval bit flipped", id);
  kcase_free(&k);
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
    k.dst_misalign = rng_chance(&r, 0.5) ? 0 : (unsigned)rng_below(&r, 16);
    test_case("R=%u c=%u n=%llu tail=%llu misalign=%u/%u data=%s mask=%s "
              "dirty=%.1f K=%u copy [%llu, +%llu) grid_cap=%u walk=%u dst+%u",
              s.R, s.c, (unsigned long long)s.n, (unsigned long long)s.tail,
              s.orig_misalign, s.packed_misalign,
              data_kind_name((data_kind)s.data_kind),
              mask_kind_name((mask_kind)s.mask_kind), s.dirty_share, s.clusters,
              (unsigned long long)off, (unsigned long long)len, k.grid_cap,
              k.walk, k.dst_misalign);
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
  unsigned broken = 0;
  for (uint64_t i = 0; i < BROKEN_PLANS; i++)
    broken += (unsigned)broken_plan(entry, iters + i);
  CHECK(broken >= BROKEN_PLANS / 2); /* most random Masks need stages */
  printf("test_kernel_decode: %u broken plans, every one caught\n", broken);
  for (uint64_t i = 0; i < BROKEN_CLUSTERS; i++)
    broken_clusters(entry, iters + BROKEN_PLANS + i);
  printf("test_kernel_decode: %u broken cluster ids and plans, every one "
         "caught\n",
         BROKEN_CLUSTERS);
  return test_end();
}
