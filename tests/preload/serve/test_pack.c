/* Compressing straight into the packed layout, chunk by chunk
 * (preload/serve/prepare/pack.c): flags and lengths equal what the codec stores
 * for every tensor, the streams decode to the original, prefix sums and
 * offsets are consistent, chunks are published in order and their busy
 * words cleared only after publish returned, tensors that do not fit the
 * capacity are stored raw, a stop or a failed publish leaves the rest
 * busy -- whatever the number of threads.  Random regions of a few tensor
 * sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "serve/prepare/pack.h"

#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);    \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static uint64_t rng = 88172645463325252ull;
static uint32_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)rng;
}

/* Tensors of R bytes whose high bits are mostly shared; a few all zero,
 * a few random (stored raw). */
static void fill(uint8_t *t, uint32_t R) {
  uint32_t kind = next() % 10;
  for (uint32_t b = 0; b < R; b++)
    t[b] = kind == 0   ? 0
           : kind == 1 ? (uint8_t)next()
                       : (uint8_t)((b % 2 ? 0x3c : 0) | (next() & 0x0f));
}

static int flag(const uint8_t *flags, uint64_t i) {
  return flags[i / 8] >> (i % 8) & 1;
}

/* What publish saw: chunks in order, each one's busy bits still set. */
typedef struct seen {
  ibp_pack *p;
  uint64_t next_t0, calls, fail_at;
} seen;

static int on_publish(void *ctx, uint64_t t0, uint64_t t1) {
  seen *s = ctx;
  CHECK(t0 == s->next_t0 && t1 > t0 && t0 % 32 == 0);
  CHECK(atomic_load(s->p->filled) == t1);
  const ibp_pack *p = s->p;
  const uint32_t R = p->params->tensor_bytes;
  uint8_t *out = malloc(R);
  CHECK(out);
  for (uint64_t i = t0; i < t1; i++) {
    CHECK(atomic_load(&p->busy[i / 32]) >> (i % 32) & 1);
    /* what the device will be told is already true on the host */
    if (p->lengths[i]) {
      const uint32_t id = ibp_cluster_id(p->ids, p->clusters, i);
      CHECK(ibp_decompress_tensor_staged(
                &p->params[id], p->stages ? &p->stages[id] : NULL,
                p->shadow + p->offsets[i], p->lengths[i], 1, out) == IBP_OK);
      CHECK(memcmp(out, p->data + i * R, R) == 0);
    }
    CHECK(p->prefix[i + 1] ==
          p->prefix[i] + (p->lengths[i] ? p->lengths[i] : R));
  }
  free(out);
  s->next_t0 = t1;
  return ++s->calls == s->fail_at ? -1 : 0;
}

typedef struct region {
  uint32_t R;
  uint64_t n;
  uint8_t *data, *flags, *shadow;
  uint32_t *lengths;
  uint64_t *offsets, *prefix;
  _Atomic uint32_t *busy;
  _Atomic uint64_t filled;
  ibp_params params;
} region;

static void region_make(region *g, uint32_t R, uint64_t n) {
  *g = (region){.R = R, .n = n};
  g->data = malloc(n * R);
  CHECK(g->data);
  for (uint64_t i = 0; i < n; i++)
    fill(g->data + i * R, R);
  ibp_search_options opt = {.threshold = -1};
  CHECK(ibp_search(g->data, n, R, &opt, &g->params, NULL) == IBP_OK);
  uint64_t words = (n + 31) / 32;
  g->flags = calloc(words, 4);
  g->lengths = calloc(n, 4);
  g->offsets = calloc(n + 1, 8);
  g->prefix = calloc(n + 1, 8);
  g->busy = calloc(words, 4);
  g->shadow = malloc(n * R + 1);
  CHECK(g->flags && g->lengths && g->offsets && g->prefix && g->busy &&
        g->shadow);
  for (uint64_t w = 0; w < words; w++)
    atomic_store(&g->busy[w], UINT32_MAX);
  memset(g->shadow, 0xa5, n * R + 1);
}

static void region_free(region *g) {
  ibp_params_free(&g->params);
  free(g->data), free(g->flags), free(g->lengths), free(g->offsets);
  free(g->prefix), free((void *)g->busy), free(g->shadow);
}

static ibp_pack pack_of(region *g, uint64_t capacity, seen *s) {
  ibp_pack p = {.params = &g->params,
                .data = g->data,
                .n = g->n,
                .flags = g->flags,
                .lengths = g->lengths,
                .offsets = g->offsets,
                .prefix = g->prefix,
                .filled = &g->filled,
                .shadow = g->shadow,
                .capacity = capacity,
                .busy = g->busy,
                .publish = on_publish,
                .publish_ctx = s};
  return p;
}

/* Every tensor: flag, length, stream and prefix as the codec says (or raw
 * when it did not fit); no byte written past the capacity. */
static void check_layout(region *g, const ibp_pack *p, uint64_t capacity) {
  uint8_t *slot = malloc(g->R + 16), *out = malloc(g->R);
  uint64_t at = 0, stored = 0, compressed = 0, raw_overflow = 0;
  for (uint64_t i = 0; i < g->n; i++) {
    int c = 0;
    size_t len = ibp_compress_tensor(&g->params, g->data + i * g->R, slot, &c);
    CHECK(g->offsets[i] == at && g->prefix[i] == stored);
    if (g->lengths[i]) {
      CHECK(c && flag(g->flags, i) && g->lengths[i] == len);
      CHECK(ibp_decompress_tensor(&g->params, g->shadow + at, len, 1, out) ==
            IBP_OK);
      CHECK(memcmp(out, g->data + i * g->R, g->R) == 0);
      compressed++;
    } else {
      CHECK(!flag(g->flags, i));
      raw_overflow += (uint64_t)c;
    }
    at += g->lengths[i];
    stored += g->lengths[i] ? g->lengths[i] : g->R;
  }
  CHECK(g->offsets[g->n] == at && g->prefix[g->n] == stored);
  CHECK(at <= capacity && p->packed_bytes == at);
  CHECK(p->compressed_tensors == compressed);
  CHECK(p->overflow_tensors >= raw_overflow);
  CHECK(g->shadow[capacity < g->n * g->R ? capacity : g->n * g->R] == 0xa5);
  for (uint64_t w = 0; w < (g->n + 31) / 32; w++)
    CHECK(atomic_load(&g->busy[w]) == 0);
  free(slot), free(out);
}

static void one(uint32_t R, uint64_t n, unsigned threads, int tight) {
  ibp__cfg.threads = threads;
  region g;
  region_make(&g, R, n);
  seen s = {0};
  ibp_pack probe = pack_of(&g, 0, &s);
  uint64_t est = ibp__pack_estimate(&probe, NULL);
  uint64_t capacity = tight ? est / 2 : n * R;
  ibp_pack p = pack_of(&g, capacity, &s);
  s.p = &p;
  CHECK(ibp__pack_fill(&p) == 0);
  CHECK(s.next_t0 == n && atomic_load(&g.filled) == n);
  CHECK(atomic_load(&p.first_chunk_ns) != 0);
  check_layout(&g, &p, capacity);
  if (tight)
    CHECK(p.overflow_tensors > 0);
  region_free(&g);
}

/* A publish that fails stops the fill: later chunks stay busy. */
static void failing_publish(void) {
  ibp__cfg.threads = 2;
  region g;
  region_make(&g, 64, 200000); /* 12.8 MB: two chunks */
  seen s = {.fail_at = 1};
  ibp_pack p = pack_of(&g, g.n * g.R, &s);
  s.p = &p;
  CHECK(ibp__pack_fill(&p) == -1);
  CHECK(s.calls == 1 && atomic_load(&g.filled) < g.n);
  for (uint64_t i = 0; i < g.n; i += 997)
    CHECK(atomic_load(&g.busy[i / 32]) >> (i % 32) & 1);
  region_free(&g);
}

/* Two kinds of tensors (high bits 0x3c or 0xfc in odd bytes, in runs of
 * three) and the codec's clusters of them: every tensor stored, and its id
 * written, exactly as ibp_compress_region_clustered stores it. */
static void clustered(uint32_t R, uint64_t n, unsigned threads) {
  ibp__cfg.threads = threads;
  region g;
  region_make(&g, R, n);
  for (uint64_t i = 0; i < n; i++)
    for (uint32_t b = 1; (i / 3) % 2 && b < R; b += 2)
      g.data[i * R + b] |= 0xc0;
  ibp_params_free(&g.params);
  ibp_search_options opt = {.threshold = -1};
  CHECK(ibp_search(g.data, n, R, &opt, &g.params, NULL) == IBP_OK);
  ibp_cluster_options co = {
      .clusters = 4, .train_max_bytes = 1 << 20, .threads = 1};
  ibp_clusters cl;
  CHECK(ibp_cluster_search(g.data, n, &g.params, &co, &cl, NULL) == IBP_OK);
  CHECK(cl.count > 1);
  const uint64_t id_bytes = ibp_cluster_id_bytes(cl.count, n);
  uint8_t *ids = calloc(id_bytes + 4, 1), *ref_ids = calloc(id_bytes + 4, 1);
  uint8_t *slots = malloc(n * R), *flags = calloc(n / 8 + 1, 1);
  uint8_t *out = malloc(R);
  CHECK(ids && ref_ids && slots && flags && out);
  seen s = {0};
  ibp_pack p = pack_of(&g, n * R, &s);
  p.params = cl.params;
  p.clusters = cl.count;
  p.ids = ids;
  s.p = &p;
  CHECK(ibp__pack_fill(&p) == 0);
  CHECK(ibp_compress_region_clustered(cl.params, cl.count, g.data, n * R, slots,
                                      flags, ref_ids, 1, NULL) == IBP_OK);
  CHECK(memcmp(ids, ref_ids, id_bytes) == 0);
  uint32_t used = 0; /* clusters some compressed tensor uses */
  for (uint64_t i = 0; i < n; i++) {
    const uint32_t id = ibp_cluster_id(ids, cl.count, i);
    CHECK(flag(g.flags, i) == flag(flags, i));
    if (!g.lengths[i])
      continue;
    used |= 1u << id;
    CHECK(memcmp(g.shadow + g.offsets[i], slots + i * R, g.lengths[i]) == 0);
    CHECK(ibp_decompress_tensor(&cl.params[id], g.shadow + g.offsets[i],
                                g.lengths[i], 1, out) == IBP_OK);
    CHECK(memcmp(out, g.data + i * R, R) == 0);
  }
  CHECK(__builtin_popcount(used) > 1);
  free(ids), free(ref_ids), free(slots), free(flags), free(out);
  ibp_clusters_free(&cl);
  region_free(&g);
}

/* bf16 values about N(0, s), s = 1 or 2^-10 in runs of five tensors: the
 * exponent stage's choice (ibp_stage_choose, K pairs asked) picks it, and
 * the fill stores every tensor, and its id, exactly as
 * ibp_compress_region_staged does; every stream decodes. */
static void staged(uint32_t R, uint64_t n, unsigned threads, uint32_t K) {
  ibp__cfg.threads = threads;
  region g;
  region_make(&g, R, n);
  for (uint64_t i = 0; i < n; i++)
    for (uint32_t b = 0; b + 1 < R; b += 2) {
      double u = ((double)(next() % 2000001) - 1000000.0) / 400000.0;
      float f = (float)(u * u * u * ((i / 5) % 2 ? 1.0 / 1024 : 1.0));
      uint32_t w;
      memcpy(&w, &f, 4);
      g.data[i * R + b] = (uint8_t)(w >> 16);
      g.data[i * R + b + 1] = (uint8_t)(w >> 24);
    }
  ibp_stage_choose_options o = {.search = {.threshold = -1},
                                .cluster = {.clusters = K, .threads = 1},
                                .sample_bytes = 1 << 20,
                                .threads = 1};
  ibp_stage_choice c;
  CHECK(ibp_stage_choose(g.data, n * R, R, &o, &c) == IBP_OK);
  CHECK(c.dtype == IBP_DTYPE_BF16 && c.total < c.measured_bytes);
  const uint32_t k = c.clusters.count;
  const uint64_t id_bytes = ibp_cluster_id_bytes(k, n);
  uint8_t *ids = calloc(id_bytes + 4, 1), *ref_ids = calloc(id_bytes + 4, 1);
  uint8_t *slots = malloc(n * R), *flags = calloc(n / 8 + 1, 1);
  uint8_t *out = malloc(R);
  CHECK(ids && ref_ids && slots && flags && out);
  seen s = {0};
  ibp_pack p = pack_of(&g, n * R, &s);
  p.params = c.clusters.params;
  p.clusters = k;
  p.stages = c.stages;
  p.ids = k > 1 ? ids : NULL;
  s.p = &p;
  CHECK(ibp__pack_fill(&p) == 0);
  CHECK(ibp_compress_region_staged(c.clusters.params, c.stages, k, g.data,
                                   n * R, slots, flags, ref_ids, 1,
                                   NULL) == IBP_OK);
  CHECK(k == 1 || memcmp(ids, ref_ids, id_bytes) == 0);
  for (uint64_t i = 0; i < n; i++) {
    const uint32_t id = ibp_cluster_id(ids, k, i);
    CHECK(flag(g.flags, i) == flag(flags, i));
    if (!g.lengths[i])
      continue;
    CHECK(memcmp(g.shadow + g.offsets[i], slots + i * R, g.lengths[i]) == 0);
    CHECK(ibp_decompress_tensor_staged(&c.clusters.params[id], &c.stages[id],
                                       g.shadow + g.offsets[i], g.lengths[i], 1,
                                       out) == IBP_OK);
    CHECK(memcmp(out, g.data + i * R, R) == 0);
  }
  CHECK(p.compressed_tensors > n / 2);
  free(ids), free(ref_ids), free(slots), free(flags), free(out);
  ibp_stage_choice_free(&c);
  region_free(&g);
}

int main(void) {
  const uint32_t sizes[] = {64, 256, 1000, 4096};
  for (int k = 0; k < 4; k++)
    for (unsigned threads = 1; threads <= 4; threads++)
      one(sizes[k], 37 + next() % 3000, threads, 0);
  /* several chunks (8 MiB of region each), and a capacity too small */
  one(64, 300000, 3, 0);
  one(256, 20000, 2, 1);
  failing_publish();
  clustered(256, 3001, 1);
  clustered(1000, 9000, 3); /* two chunks */
  staged(256, 3001, 2, 1);
  staged(1024, 9000, 3, 4); /* two chunks, clusters */
  printf("test_pack: ok\n");
  return 0;
}
