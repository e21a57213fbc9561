/*
 * The exponent stage chosen per cluster (ibp_stage_choose with IBP alone's
 * pairs as `versus`, docs/FORMAT.md §9.5):
 *
 *   - bf16 regions of two kinds of tensor, one whose sign+exponent field
 *     varies (the stage codes it in ~3 of its 9 bits) and one whose field
 *     is the same in every value (IBP alone stores it in 0 bits, the stage
 *     in 1 a value): the choice keeps the stage on some clusters and off on
 *     others, stores fewer bytes than both the stage on every cluster and
 *     IBP alone, and what it measured is what the region and a version-4
 *     container store; both round-trip;
 *   - random bytes and a field the same everywhere (the stage pays on no
 *     cluster): the choice is IBP alone's pairs, every stage off, its
 *     bytes IBP alone's;
 *   - one cluster asked: the better of the two on the whole region;
 *   - judged apart (libibp's choice on a sample): alternating tensors, bf16
 *     weights N(0, 0.02^2) then +-uniform[1, 2), where an evenly spaced
 *     sample of half the region would hold the first kind only (learnt and
 *     judged there, the stage looked to pay and stored the region in more;
 *     learnt there and judged apart, it was refused though it pays on the
 *     region): the sample holds both kinds, the stage pays and stores the
 *     region in fewer bytes than IBP alone, the totals judged apart within
 *     1 % of the region's; on a quarter of a MIXED region, likewise.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibp/container.h"
#include "ibp/stage.h"
#include "test_util.h"

enum { MIXED, RANDOM, FIXED };

/* bf16 values: the field varying (sign random, the exponent 120 minus a
 * geometric count) or, for every third tensor of MIXED and all of FIXED,
 * 0x3F8 (1.0 <= v < 2.0); mantissas random. */
static uint8_t *make_data(rng *r, int kind, uint32_t R, uint64_t n) {
  uint8_t *d = xmalloc(n * R);
  rng_fill(r, d, n * R);
  if (kind == RANDOM)
    return d;
  for (uint64_t i = 0; i < n; i++)
    for (uint32_t b = 0; b < R; b += 2) {
      uint32_t f = 0x3F8;
      if (kind == MIXED && i % 3 != 0) {
        uint32_t e = 120;
        while (e > 100 && rng_chance(r, 0.5))
          e--;
        f = (uint32_t)rng_below(r, 2) << 8 | e;
      }
      const uint32_t v = f << 7 | (uint32_t)(rng_next(r) & 0x7F);
      d[i * R + b] = (uint8_t)v;
      d[i * R + b + 1] = (uint8_t)(v >> 8);
    }
  return d;
}

static ibp_clusters ibp_alone(const uint8_t *d, uint32_t R, uint64_t n,
                              uint32_t clusters) {
  ibp_search_options so = {.threshold = -1, .threads = 1};
  ibp_params p;
  memset(&p, 0, sizeof p);
  CHECK_OK(ibp_search(d, n, R, &so, &p, NULL));
  ibp_cluster_options co = {.clusters = clusters, .threads = 1};
  ibp_clusters cl = {0};
  CHECK_OK(ibp_cluster_search(d, n, &p, &co, &cl, NULL));
  ibp_params_free(&p);
  return cl;
}

static ibp_status choose(const uint8_t *d, uint32_t R, uint64_t n,
                         uint32_t clusters, const ibp_clusters *versus,
                         ibp_stage_choice *c) {
  ibp_stage_choose_options o = {.dtype = IBP_DTYPE_BF16,
                                .search = {.threshold = -1, .threads = 1},
                                .cluster = {.clusters = clusters, .threads = 1},
                                .versus = versus,
                                .threads = 1};
  return ibp_stage_choose(d, n * R, R, &o, c);
}

static uint32_t stages_on(const ibp_stage_choice *c) {
  uint32_t on = 0;
  for (uint32_t k = 0; k < c->clusters.count; k++)
    on += c->stages[k].kind != IBP_STAGE_NONE;
  return on;
}

/* The tensors c's stage codes, counted one by one: stored compressed
 * (fewer than R bytes) in a cluster whose stage is on -- those a decoder
 * runs the stage on, what ibp_region_summary.tensors_staged counts. */
static uint64_t count_staged(const ibp_stage_choice *c, const uint8_t *d,
                             uint32_t R, uint64_t n) {
  uint8_t *scratch = xmalloc(R);
  uint64_t staged = 0;
  for (uint64_t i = 0; i < n; i++) {
    size_t stored = 0;
    const uint32_t id =
        ibp_cluster_best_staged(c->clusters.params, c->stages,
                                c->clusters.count, d + i * R, scratch, &stored);
    staged += stored < R && c->stages[id].kind != IBP_STAGE_NONE;
  }
  free(scratch);
  return staged;
}

static int write_mem(void *ctx, uint64_t offset, const void *buf, size_t len) {
  memcpy((uint8_t *)ctx + offset, buf, len);
  return 0;
}

typedef struct cmp_ctx {
  const uint8_t *want;
  int bad;
} cmp_ctx;

static int compare_out(void *ctx, uint64_t offset, const void *buf,
                       size_t len) {
  cmp_ctx *c = ctx;
  c->bad |= memcmp(c->want + offset, buf, len) != 0;
  return 0;
}

/* What c measured is what a region and a container store; both decode. */
static void round_trip(const ibp_stage_choice *c, const uint8_t *d, uint32_t R,
                       uint64_t n, uint32_t version) {
  const uint32_t k = c->clusters.count;
  uint8_t *slots = xmalloc(n * R), *out = xmalloc(n * R);
  uint8_t *flags = xcalloc(n / 8 + 1);
  uint8_t *ids = xcalloc(ibp_cluster_id_bytes(k, n) + 1);
  ibp_region_summary sum;
  CHECK_OK(ibp_compress_region_staged(c->clusters.params, c->stages, k, d,
                                      n * R, slots, flags, ids, 2, &sum));
  CHECK_U64(sum.tensors_staged, count_staged(c, d, R, n));
  ibp_region reg = {c->clusters.params, slots, n * R, flags};
  CHECK_OK(ibp_decompress_range_staged(&reg, ids, k, c->stages, 0, n * R, out));
  CHECK_MEM(out, d, n * R, "region");
  uint8_t *file = xcalloc(
      128 + k * (2ull * R + IBP_STAGE_DESCRIPTOR_MAX_BYTES) + n + n * R);
  ibp_container_info info;
  CHECK_OK(ibp_container_write_staged(c->clusters.params, c->stages, k, d,
                                      n * R, 2, write_mem, file, &info));
  CHECK_U64(info.version, version);
  CHECK_U64(info.container_bytes, 128 + c->total);
  cmp_ctx cc = {d, 0};
  CHECK_OK(ibp_container_decode(file, info.container_bytes, compare_out, &cc));
  CHECK(!cc.bad);
  free(file), free(ids), free(flags), free(out), free(slots);
}

/* Stage on some clusters, off on others, fewer bytes than either alone. */
static void mixed(rng *r, uint32_t R, uint64_t n) {
  test_case("mixed R=%u n=%llu", R, (unsigned long long)n);
  uint8_t *d = make_data(r, MIXED, R, n);
  ibp_clusters v = ibp_alone(d, R, n, 0);
  ibp_stage_choice c, pure;
  CHECK_OK(choose(d, R, n, 0, &v, &c));
  CHECK_OK(choose(d, R, n, 0, NULL, &pure));
  CHECK(c.dtype == IBP_DTYPE_BF16 && pure.dtype == IBP_DTYPE_BF16);
  CHECKF(c.total < c.versus_total && c.total < pure.total,
         "mixed %llu, IBP alone %llu, the stage everywhere %llu",
         (unsigned long long)c.total, (unsigned long long)c.versus_total,
         (unsigned long long)pure.total);
  const uint32_t on = stages_on(&c);
  CHECKF(on >= 1 && on < c.clusters.count, "stage on %u of %u clusters", on,
         c.clusters.count);
  CHECK(ibp_stage_pays(&c, c.versus_total));
  /* the stage codes a part of the tensors, those of its clusters: what its
   * decode is charged for (ibp_profile_region_copy) */
  const uint64_t staged = count_staged(&c, d, R, n);
  CHECK_U64(c.stage_tensors, staged);
  CHECK_U64(c.exact.tensors_staged, staged);
  CHECKF(staged > 0 && staged < c.exact.tensors_compressed,
         "the stage on %llu of %llu compressed tensors",
         (unsigned long long)staged,
         (unsigned long long)c.exact.tensors_compressed);
  CHECK_U64(pure.stage_tensors, count_staged(&pure, d, R, n));
  round_trip(&c, d, R, n, IBP_FORMAT_VERSION);
  ibp_stage_choice_free(&c);
  ibp_stage_choice_free(&pure);
  ibp_clusters_free(&v);
  free(d);
}

/* The stage pays nowhere: IBP alone's pairs, every stage off. */
static void nowhere(rng *r, int kind, uint32_t R, uint64_t n,
                    uint32_t clusters) {
  test_case("nowhere kind=%d R=%u n=%llu clusters=%u", kind, R,
            (unsigned long long)n, clusters);
  uint8_t *d = make_data(r, kind, R, n);
  ibp_clusters v = ibp_alone(d, R, n, clusters);
  ibp_stage_choice c;
  CHECK_OK(choose(d, R, n, clusters, &v, &c));
  CHECK(c.dtype == IBP_DTYPE_BF16);
  CHECK_U64(c.total, c.versus_total);
  CHECK_U64(stages_on(&c), 0);
  CHECK_U64(c.stage_tensors, 0); /* no decode of the stage to charge */
  CHECK_U64(c.clusters.count, v.count);
  for (uint32_t k = 0; k < v.count; k++)
    CHECK_MEM(c.clusters.params[k].mask, v.params[k].mask, R, "IBP's Mask");
  CHECK(!ibp_stage_pays(&c, c.versus_total));
  round_trip(&c, d, R, n, 3);
  ibp_stage_choice_free(&c);
  ibp_clusters_free(&v);
  free(d);
}

/* One cluster asked: one pair, the better of the stage and IBP alone. */
static void one_cluster(rng *r, uint32_t R, uint64_t n) {
  test_case("one cluster R=%u n=%llu", R, (unsigned long long)n);
  uint8_t *d = make_data(r, MIXED, R, n);
  ibp_clusters v = ibp_alone(d, R, n, 1);
  ibp_stage_choice c, pure;
  CHECK_OK(choose(d, R, n, 1, &v, &c));
  CHECK_OK(choose(d, R, n, 1, NULL, &pure));
  CHECK_U64(c.clusters.count, 1);
  const uint64_t best =
      pure.total < c.versus_total ? pure.total : c.versus_total;
  CHECK_U64(c.total, best);
  CHECK_U64(stages_on(&c), pure.total < c.versus_total);
  ibp_stage_choice_free(&c);
  ibp_stage_choice_free(&pure);
  ibp_clusters_free(&v);
  free(d);
}

/* The bf16 value nearest to v (round to nearest even). */
static uint16_t bf16_of(float v) {
  uint32_t b;
  memcpy(&b, &v, 4);
  return (uint16_t)((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}

/* Even tensors N(0, 0.02^2) (Box-Muller), odd ones +-uniform[1, 2). */
static uint8_t *make_alternating(rng *r, uint32_t R, uint64_t n) {
  uint8_t *d = xmalloc(n * R);
  for (uint64_t i = 0; i < n; i++)
    for (uint32_t b = 0; b < R; b += 2) {
      const double u = rng_unit(r), w = rng_unit(r);
      double v = 0.02 * sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * w);
      if (i % 2)
        v = (rng_below(r, 2) ? -1.0 : 1.0) * (1.0 + u);
      const uint16_t h = bf16_of((float)v);
      d[i * R + b] = (uint8_t)h;
      d[i * R + b + 1] = (uint8_t)(h >> 8);
    }
  return d;
}

/* The stored bytes of the whole region with c's pairs and stages (NULL:
 * versus's pairs alone), metadata included. */
static uint64_t region_total(const ibp_clusters *cl, const ibp_stage *st,
                             const uint8_t *d, uint64_t bytes) {
  ibp_region_summary sum;
  CHECK_OK(
      ibp_measure_region_staged(cl->params, st, cl->count, d, bytes, 1, &sum));
  return sum.compressed_bytes + sum.metadata_bytes;
}

/* Within `pct` percent of `want`. */
static int near(uint64_t got, uint64_t want, double pct) {
  const double d = (double)got - (double)want;
  return (d < 0 ? -d : d) <= pct / 100.0 * (double)want;
}

/* A choice learnt on a sample of alternating tensors (an evenly spaced
 * sample of half of them would hold one kind only), judged apart. */
static void judged_apart(rng *r, uint32_t R, uint64_t n) {
  test_case("judged apart R=%u n=%llu", R, (unsigned long long)n);
  uint8_t *d = make_alternating(r, R, n);
  ibp_clusters v = ibp_alone(d, R, n, 0);
  ibp_stage_choose_options o = {.dtype = IBP_DTYPE_BF16,
                                .search = {.threshold = -1, .threads = 1},
                                .cluster = {.threads = 1},
                                .sample_bytes = n * R / 2,
                                .versus = &v,
                                .judge_apart = 1,
                                .threads = 1};
  ibp_stage_choice c;
  CHECK_OK(ibp_stage_choose(d, n * R, R, &o, &c));
  CHECK(c.dtype == IBP_DTYPE_BF16);
  const uint64_t with = region_total(&c.clusters, c.stages, d, n * R);
  const uint64_t alone = region_total(&v, NULL, d, n * R);
  printf("  judged on %llu tensors: the choice %llu B (region %llu B), IBP "
         "alone %llu B (region %llu B), stage on %u of %u clusters\n",
         (unsigned long long)c.judged_tensors, (unsigned long long)c.total,
         (unsigned long long)with, (unsigned long long)c.versus_total,
         (unsigned long long)alone, stages_on(&c), c.clusters.count);
  CHECKF(!ibp_stage_pays(&c, c.versus_total) || with < alone,
         "the stage picked, storing the region in %llu B against IBP "
         "alone's %llu B",
         (unsigned long long)with, (unsigned long long)alone);
  /* the sample is one tensor of every pair (ibp__sample_jittered),
   * so both kinds are learnt on and the stage pays; the judged are other
   * tensors (one per gap where the gap has one), the estimates the
   * region's within 1 % */
  CHECK(c.judged_tensors > 0 && c.judged_tensors <= n / 2);
  CHECK(ibp_stage_pays(&c, c.versus_total) && with < alone);
  CHECK(near(c.total, with, 1.0) && near(c.versus_total, alone, 1.0));
  CHECK_U64(c.measured_bytes, n * R);
  ibp_stage_choice_free(&c);
  ibp_clusters_free(&v);
  free(d);
}

/* A choice on a quarter of a MIXED region, judged apart: its totals the
 * region's within 1 %. */
static void judged_estimate(rng *r, uint32_t R, uint64_t n) {
  test_case("judged estimate R=%u n=%llu", R, (unsigned long long)n);
  uint8_t *d = make_data(r, MIXED, R, n);
  ibp_clusters v = ibp_alone(d, R, n, 0);
  ibp_stage_choose_options o = {.dtype = IBP_DTYPE_BF16,
                                .search = {.threshold = -1, .threads = 1},
                                .cluster = {.threads = 1},
                                .sample_bytes = n * R / 4,
                                .versus = &v,
                                .judge_apart = 1,
                                .threads = 1};
  ibp_stage_choice c;
  CHECK_OK(ibp_stage_choose(d, n * R, R, &o, &c));
  CHECK(stages_on(&c) > 0);
  const uint64_t with = region_total(&c.clusters, c.stages, d, n * R);
  const uint64_t alone = region_total(&v, NULL, d, n * R);
  printf("  judged on %llu tensors: the choice %llu B (region %llu B), IBP "
         "alone %llu B (region %llu B)\n",
         (unsigned long long)c.judged_tensors, (unsigned long long)c.total,
         (unsigned long long)with, (unsigned long long)c.versus_total,
         (unsigned long long)alone);
  CHECK(c.judged_tensors > 0 && c.judged_tensors <= n / 4);
  CHECK(near(c.total, with, 1.0) && near(c.versus_total, alone, 1.0));
  /* the tensors the stage codes, estimated as the totals are */
  const uint64_t staged = count_staged(&c, d, R, n);
  CHECKF(near(c.stage_tensors, staged, 2.0),
         "the stage on %llu tensors estimated, %llu in the region",
         (unsigned long long)c.stage_tensors, (unsigned long long)staged);
  CHECK(ibp_stage_pays(&c, c.versus_total) && with < alone);
  ibp_stage_choice_free(&c);
  ibp_clusters_free(&v);
  free(d);
}

int main(void) {
  test_begin("test_stage_choose", 1);
  rng r;
  test_iteration(&r, 0);
  mixed(&r, 512, 3000);
  mixed(&r, 200, 6000);
  nowhere(&r, RANDOM, 256, 2000, 0);
  nowhere(&r, FIXED, 512, 2000, 0);
  nowhere(&r, RANDOM, 256, 2000, 1);
  one_cluster(&r, 512, 3000);
  judged_apart(&r, 1024, 4096);
  judged_estimate(&r, 512, 8000);
  return test_end();
}
