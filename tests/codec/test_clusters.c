/*
 * Clusters (docs/FORMAT.md §4): K Mask/Bitval pairs per region.
 *
 *   - random regions with K = 1 .. 40 (and now and then 256) pairs: every
 *     tensor's id is the pair that stores it in the fewest bytes (ties: the
 *     lowest id), its slot is the reference codec's stream for that pair,
 *     ids, flags, the measure-only summary and the packed offsets agree, and
 *     whole-region and random-range decoding give back the original; an id
 *     >= K is rejected; every tensor counts as one round trip;
 *   - every 8th region also as a container: version 3 (exactly
 *     ibp_container_write's bytes with K = 1), decoded back;
 *   - the search: planted clusters are found and save bytes, metadata
 *     included; random data stays at one cluster; the result never stores
 *     more than one cluster, metadata included; a given K is honoured;
 *   - the per-bit entropy limit against a direct computation.
 *
 * Usage: test_clusters [--max-r N] [--iterations N] (round trips; the long
 * CTest test clusters_1e6 passes 1000000).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "ibp/container.h"

#define MAX_K 40
#define MAX_TENSORS 48

/* ---- one random region --------------------------------------------------- */

typedef struct cregion {
  uint32_t R, c, k;
  uint64_t n, bytes;
  uint8_t *data;
  fixture f[IBP_MAX_CLUSTERS];
  ibp_params p[IBP_MAX_CLUSTERS]; /* copies of f[i].lib, contiguous */
} cregion;

static void cregion_build(cregion *g, rng *r, uint32_t max_R, uint64_t left) {
  memset(g, 0, sizeof *g);
  g->R = rng_log_uniform(r, 1, max_R);
  g->c = rng_chunk(r);
  g->k =
      rng_chance(r, 0.02) ? IBP_MAX_CLUSTERS : (uint32_t)rng_range(r, 1, MAX_K);
  g->n = 1 + rng_below(r, MAX_TENSORS);
  if (g->n > left)
    g->n = left;
  uint64_t tail = rng_chance(r, 0.3) ? rng_below(r, g->R) : 0;
  g->bytes = g->n * g->R + tail;
  g->data = xmalloc(g->bytes + 1);
  gen_data(r, (data_kind)rng_below(r, DATA_KINDS), g->R, g->n, g->data);
  rng_fill(r, g->data + g->n * g->R, tail);
  for (uint32_t i = 0; i < g->k; i++) { /* each pair from its own tensors */
    uint64_t first = rng_below(r, g->n);
    uint64_t cnt = rng_range(r, 1, g->n - first);
    mask_kind mk =
        rng_chance(r, 0.5) ? MASK_STATS : (mask_kind)rng_below(r, MASK_KINDS);
    fixture_init(&g->f[i], g->R, g->c);
    fixture_gen(&g->f[i], r, mk, g->data + first * g->R, cnt);
    g->p[i] = g->f[i].lib;
  }
}

static void cregion_free(cregion *g) {
  for (uint32_t i = 0; i < g->k; i++)
    fixture_free(&g->f[i]);
  free(g->data);
}

/* The id the format's rule gives tensor t: the pair with the fewest stored
 * bytes, the lowest on ties. */
static uint32_t expected_id(const cregion *g, const uint8_t *t) {
  uint32_t best = 0;
  size_t least = ibp_compressed_size(&g->p[0], t);
  for (uint32_t i = 1; i < g->k; i++) {
    size_t len = ibp_compressed_size(&g->p[i], t);
    if (len < least) {
      least = len;
      best = i;
    }
  }
  return best;
}

/* Slots, flags and ids against the reference codec, tensor by tensor. */
static void check_slots(const cregion *g, const uint8_t *slots,
                        const uint8_t *flags, const uint8_t *ids,
                        uint64_t *stored) {
  uint8_t *ref = xmalloc(g->R);
  *stored = g->bytes - g->n * g->R;
  for (uint64_t i = 0; i < g->n; i++) {
    const uint8_t *t = g->data + i * g->R;
    uint32_t id = ibp_cluster_id(ids, g->k, i);
    CHECKF(id == expected_id(g, t), "tensor %llu: id %u, want %u",
           (unsigned long long)i, id, expected_id(g, t));
    size_t best_len = 0;
    CHECKF(ibp_cluster_best(g->p, g->k, t, &best_len) == id &&
               best_len == ibp_compressed_size(&g->p[id], t),
           "tensor %llu: ibp_cluster_best", (unsigned long long)i);
    int compressed;
    size_t len = ref_store(&g->f[id].ref, t, ref, &compressed);
    CHECKF(((flags[i / 8] >> (i % 8)) & 1) == compressed, "tensor %llu: flag",
           (unsigned long long)i);
    CHECK_MEM(slots + i * g->R, ref, len, "slot vs reference");
    *stored += len;
  }
  free(ref);
  uint64_t id_bytes = ibp_cluster_id_bytes(g->k, g->n);
  uint32_t used = (uint32_t)(g->n * ibp_cluster_id_bits(g->k) % 8);
  if (used)
    CHECKF((ids[id_bytes - 1] >> used) == 0, "unused id bits are not 0");
}

static void check_decode(const cregion *g, rng *r, const uint8_t *slots,
                         const uint8_t *flags, const uint8_t *ids) {
  ibp_region reg = {g->p, slots, g->bytes, flags};
  uint8_t *out = xmalloc(g->bytes + 1);
  CHECK_OK(ibp_decompress_range_clustered(&reg, ids, g->k, 0, g->bytes, out));
  CHECK_MEM(out, g->data, g->bytes, "decoded region");
  uint64_t off = rng_below(r, g->bytes + 1);
  uint64_t len = rng_below(r, g->bytes - off + 1);
  CHECK_OK(ibp_decompress_range_clustered(&reg, ids, g->k, off, len, out));
  CHECK_MEM(out, g->data + off, len, "decoded range");
  free(out);
}

static void check_packed(const cregion *g, const uint8_t *slots,
                         const uint8_t *flags, const uint8_t *ids) {
  ibp_region reg = {g->p, slots, g->bytes, flags};
  uint64_t *off = xmalloc((g->n + 1) * sizeof *off);
  CHECK_OK(ibp_region_pack_offsets_clustered(&reg, ids, g->k, off));
  for (uint64_t i = 0; i < g->n; i++) {
    int compressed = (flags[i / 8] >> (i % 8)) & 1;
    uint64_t want = 0;
    if (compressed)
      want = ibp_compressed_size(&g->p[ibp_cluster_id(ids, g->k, i)],
                                 g->data + i * g->R);
    CHECK_U64(off[i + 1] - off[i], want);
  }
  free(off);
}

/* An id >= K (possible when K is not a power of two) is corrupt. */
static void check_bad_id(const cregion *g, const uint8_t *slots,
                         const uint8_t *flags, uint8_t *ids) {
  const uint32_t bits = ibp_cluster_id_bits(g->k);
  if (g->k < 2 || g->k == (1u << bits) || g->n == 0)
    return;
  uint8_t saved = ids[0];
  ids[0] = (uint8_t)((ids[0] & ~((1u << bits) - 1)) | ((1u << bits) - 1));
  ibp_region reg = {g->p, slots, g->bytes, flags};
  uint8_t *out = xmalloc(g->R);
  CHECK_STATUS(ibp_decompress_range_clustered(&reg, ids, g->k, 0, g->R, out),
               IBP_ERR_CORRUPT);
  free(out);
  ids[0] = saved;
}

/* ---- containers ---------------------------------------------------------- */

typedef struct sink {
  uint8_t *buf;
  uint64_t len, cap;
} sink;

static int sink_write(void *ctx, uint64_t offset, const void *buf, size_t len) {
  sink *s = ctx;
  if (offset + len > s->cap) {
    uint64_t cap = (offset + len) * 2 + 64;
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

static void check_container(const cregion *g, uint64_t stored) {
  sink s = {0}, back = {0};
  ibp_container_info info, read;
  CHECK_OK(ibp_container_write_clustered(g->p, g->k, g->data, g->bytes, 1,
                                         sink_write, &s, &info));
  CHECK_U64(info.version, IBP_FORMAT_VERSION_XXH64);
  CHECK_U64(info.clusters, g->k);
  CHECK_U64(info.payload_bytes, stored);
  CHECK_U64(s.len, IBP_CONTAINER_HEADER_BYTES +
                       ibp_cluster_metadata_bytes(g->k, g->R, g->n) + stored);
  CHECK_OK(ibp_container_read_info(s.buf, s.len, &read));
  CHECK_U64(read.clusters, g->k);
  CHECK_U64(read.version, info.version);
  CHECK_OK(ibp_container_decode(s.buf, s.len, sink_write, &back));
  CHECK_U64(back.len, g->bytes);
  CHECK_MEM(back.buf, g->data, g->bytes, "container decoded");
  if (g->k == 1) { /* one cluster: today's container, byte for byte */
    sink one = {0};
    CHECK_OK(ibp_container_write(g->p, g->data, g->bytes, 1, sink_write, &one,
                                 NULL));
    CHECK_U64(one.len, s.len);
    CHECK_MEM(s.buf, one.buf, s.len, "K=1 container vs ibp_container_write");
    free(one.buf);
  } else { /* damage to the ids is caught */
    s.buf[IBP_CONTAINER_HEADER_BYTES + 2ull * g->R * g->k] ^= 1;
    CHECK(ibp_container_read_info(s.buf, s.len, &read) != IBP_OK);
  }
  free(s.buf);
  free(back.buf);
}

/* ---- the round trips ----------------------------------------------------- */

static uint64_t run_region(rng *r, uint32_t max_R, uint64_t left, int box) {
  cregion g;
  cregion_build(&g, r, max_R, left);
  test_case("R=%u c=%u K=%u n=%llu bytes=%llu", g.R, g.c, g.k,
            (unsigned long long)g.n, (unsigned long long)g.bytes);
  uint8_t *slots = xmalloc(g.bytes + 1);
  uint8_t *flags = xcalloc((g.n + 7) / 8 + 1);
  uint8_t *ids = xmalloc(ibp_cluster_id_bytes(g.k, g.n) + 1);
  memset(ids, 0xA5, ibp_cluster_id_bytes(g.k, g.n) + 1); /* all written? */
  ibp_region_summary sum, measured;
  CHECK_OK(ibp_compress_region_clustered(g.p, g.k, g.data, g.bytes, slots,
                                         flags, ids,
                                         (unsigned)rng_range(r, 1, 4), &sum));
  uint64_t stored;
  check_slots(&g, slots, flags, g.k > 1 ? ids : NULL, &stored);
  CHECK_U64(sum.compressed_bytes, stored);
  CHECK_U64(sum.metadata_bytes, ibp_cluster_metadata_bytes(g.k, g.R, g.n));
  CHECK_OK(
      ibp_measure_region_clustered(g.p, g.k, g.data, g.bytes, 2, &measured));
  CHECK_U64(measured.compressed_bytes, sum.compressed_bytes);
  CHECK_U64(measured.tensors_compressed, sum.tensors_compressed);
  check_decode(&g, r, slots, flags, g.k > 1 ? ids : NULL);
  check_packed(&g, slots, flags, g.k > 1 ? ids : NULL);
  check_bad_id(&g, slots, flags, ids);
  if (box)
    check_container(&g, stored);
  free(slots);
  free(flags);
  free(ids);
  uint64_t n = g.n;
  cregion_free(&g);
  return n;
}

/* ---- the search ---------------------------------------------------------- */

/* n tensors of R bytes, tensor i near template i % groups: the top six
 * bits of each byte are the template's, the low two random. */
static uint8_t *planted(rng *r, uint32_t R, uint64_t n, unsigned groups) {
  uint8_t *tpl = xmalloc((size_t)groups * R), *d = xmalloc(n * R);
  rng_fill(r, tpl, (size_t)groups * R);
  for (uint64_t i = 0; i < n * R; i++)
    d[i] = (uint8_t)((tpl[(i / R % groups) * R + i % R] & 0xFC) |
                     (rng_next(r) & 3));
  free(tpl);
  return d;
}

/* Stored + metadata bytes of data with cl, exactly. */
static uint64_t total_bytes(const ibp_clusters *cl, const uint8_t *d,
                            uint64_t bytes) {
  ibp_region_summary s;
  CHECK_OK(
      ibp_measure_region_clustered(cl->params, cl->count, d, bytes, 0, &s));
  return s.compressed_bytes + s.metadata_bytes;
}

static void search(const uint8_t *d, uint64_t n, uint32_t R, uint32_t k,
                   ibp_params *base, ibp_clusters *cl,
                   ibp_cluster_report *rep) {
  ibp_search_options so = {.threshold = -1};
  CHECK_OK(ibp_search(d, n, R, &so, base, NULL));
  ibp_cluster_options co = {.clusters = k};
  CHECK_OK(ibp_cluster_search(d, n, base, &co, cl, rep));
  CHECK_OK(ibp_clusters_check(cl->params, cl->count));
  CHECK_U64(rep->chosen, cl->count);
}

static void check_search(rng *r) {
  const uint32_t R = 64;
  const uint64_t n = 4096;
  ibp_params base;
  ibp_clusters cl, one = {1, &base};
  ibp_cluster_report rep;

  test_case("search: 4 planted clusters");
  uint8_t *d = planted(r, R, n, 4);
  search(d, n, R, 0, &base, &cl, &rep);
  CHECKF(cl.count >= 2, "found %u clusters", cl.count);
  uint64_t with = total_bytes(&cl, d, n * R),
           without = total_bytes(&one, d, n * R);
  CHECKF(with < without * 9 / 10, "clusters: %llu B, one: %llu B",
         (unsigned long long)with, (unsigned long long)without);
  CHECK(rep.steps >= 2 && rep.k[0] == 1);
  ibp_clusters_free(&cl);

  test_case("search: K = 3 given");
  ibp_cluster_report rep3;
  ibp_cluster_options co = {.clusters = 3};
  CHECK_OK(ibp_cluster_search(d, n, &base, &co, &cl, &rep3));
  CHECK_U64(cl.count, 3);
  ibp_clusters_free(&cl);
  ibp_params_free(&base);
  free(d);

  test_case("search: random bytes");
  d = xmalloc(n * R);
  rng_fill(r, d, n * R);
  search(d, n, R, 0, &base, &cl, &rep);
  CHECK_U64(cl.count, 1);
  CHECK_MEM(cl.params[0].mask, base.mask, R, "K=1 keeps the base mask");
  ibp_clusters_free(&cl);
  ibp_params_free(&base);
  free(d);

  for (int kind = 0; kind < DATA_KINDS; kind++) { /* never worse */
    test_case("search: never worse, %s", data_kind_name((data_kind)kind));
    uint32_t Rk = (uint32_t)rng_range(r, 1, 300);
    uint64_t nk = rng_range(r, 1, 3000);
    d = xmalloc(nk * Rk);
    gen_data(r, (data_kind)kind, Rk, nk, d);
    search(d, nk, Rk, 0, &base, &cl, &rep);
    CHECK(total_bytes(&cl, d, nk * Rk) <= total_bytes(&one, d, nk * Rk));
    ibp_clusters_free(&cl);
    ibp_params_free(&base);
    free(d);
  }
}

/* ---- the entropy limit --------------------------------------------------- */

static void check_entropy(rng *r) {
  test_case("entropy limit");
  const uint32_t R = 37;
  const uint64_t n = 777;
  uint8_t *d = xmalloc(n * R);
  gen_data(r, DATA_FLOAT, R, n, d);
  uint64_t *ones = xcalloc(8 * R * sizeof *ones);
  CHECK_U64(ref_count_bits(R, d, n, 0, 1, ones), n);
  double want = 0;
  for (uint32_t k = 0; k < 8 * R; k++) {
    double p = (double)ones[k] / (double)n;
    if (p > 0 && p < 1)
      want += -p * log2(p) - (1 - p) * log2(1 - p);
  }
  ibp_bitstats st;
  CHECK_OK(ibp_bitstats_init(&st, R));
  CHECK(ibp_bitstats_entropy_bits(&st) == 0.0); /* nothing counted */
  CHECK_OK(ibp_bitstats_add(&st, d, n, NULL, 2));
  double got = ibp_bitstats_entropy_bits(&st);
  CHECKF(fabs(got - want) < 1e-9 * (want + 1), "entropy %.12f, want %.12f", got,
         want);
  CHECK(got > 0 && got < 8.0 * R);
  ibp_bitstats_free(&st);
  free(ones);
  free(d);
}

static uint64_t arg_u64(int argc, char **argv, const char *name,
                        uint64_t fallback) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0)
      return strtoull(argv[i + 1], NULL, 0);
  return fallback;
}

int main(int argc, char **argv) {
  uint32_t max_R = (uint32_t)arg_u64(argc, argv, "--max-r", 4096);
  uint64_t iters =
      test_begin("test_clusters", arg_u64(argc, argv, "--iterations", 20000));
  rng r;
  test_iteration(&r, UINT64_MAX);
  check_entropy(&r);
  check_search(&r);
  uint64_t done = 0, regions = 0;
  for (uint64_t g = 0; done < iters; g++, regions++) {
    test_iteration(&r, g);
    done += run_region(&r, max_R, iters - done, g % 8 == 0);
  }
  printf("test_clusters: %llu round trips in %llu regions (R <= %u)\n",
         (unsigned long long)done, (unsigned long long)regions, max_R);
  return test_end();
}
