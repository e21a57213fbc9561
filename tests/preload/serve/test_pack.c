/* Compressing straight into the packed layout (preload/serve/pack.c):
 * pass 1's sizes and flags equal what the codec stores for every tensor,
 * the streams pass 3 writes decode to the original, and a tensor rewritten
 * between the passes is marked dirty -- its place left unused -- whatever
 * the number of threads.  Random regions of a few tensor sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "serve/pack.h"

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

static void one(uint32_t R, uint64_t n, unsigned threads) {
  ibp__cfg.threads = threads;
  uint8_t *data = malloc(n * R);
  CHECK(data);
  for (uint64_t i = 0; i < n; i++)
    fill(data + i * R, R);
  ibp_params params;
  ibp_search_options opt = {.threshold = -1};
  CHECK(ibp_search(data, n, R, &opt, &params, NULL) == IBP_OK);
  uint64_t words = (n + 31) / 32;
  uint8_t *flags = calloc(words, 4);
  uint32_t *lengths = calloc(n, 4);
  uint64_t *offsets = calloc(n + 1, 8);
  _Atomic uint32_t *dirty = calloc(words + 1, 4);
  CHECK(flags && lengths && offsets && dirty);
  ibp_tracked t = {.base = (uintptr_t)data,
                   .bytes = n * R,
                   .tensor_bytes = R,
                   .name = "test",
                   .dirty = dirty};
  ibp_pack p = {.params = &params,
                .data = data,
                .n = n,
                .flags = flags,
                .lengths = lengths,
                .offsets = offsets,
                .track = &t};
  CHECK(ibp__pack_sizes(&p) == 0);
  uint64_t at = 0, compressed = 0;
  uint8_t *slot = malloc(R + 16);
  for (uint64_t i = 0; i < n; i++) {
    int c = 0;
    size_t len = ibp_compress_tensor(&params, data + i * R, slot, &c);
    CHECK(flag(flags, i) == c && lengths[i] == (c ? len : 0));
    compressed += (uint64_t)c;
    offsets[i] = at;
    at += lengths[i];
  }
  offsets[n] = at;
  CHECK(p.compressed_tensors == compressed);
  /* rewrite some tensors between the passes: random bytes store raw */
  uint8_t *rewritten = calloc(n, 1);
  for (uint64_t i = 0; i < n; i++)
    if (lengths[i] && next() % 7 == 0) {
      for (uint32_t b = 0; b < R; b++)
        data[i * R + b] = (uint8_t)next();
      rewritten[i] = 1;
    }
  uint8_t *shadow = malloc(at + 1);
  memset(shadow, 0xa5, at + 1);
  p.shadow = shadow;
  CHECK(ibp__pack_streams(&p) == 0);
  uint8_t *out = malloc(R);
  uint64_t seen = 0;
  for (uint64_t i = 0; i < n; i++) {
    int d = atomic_load(&dirty[i / 32]) >> (i % 32) & 1;
    if (rewritten[i] && ibp_compressed_size(&params, data + i * R) >= R) {
      CHECK(d); /* its stream no longer fits its place */
      seen++;
      continue;
    }
    if (!lengths[i] || d)
      continue;
    CHECK(ibp_decompress_tensor(&params, shadow + offsets[i], lengths[i], 1,
                                out) == IBP_OK);
    CHECK(memcmp(out, data + i * R, R) == 0);
  }
  CHECK(p.rewritten >= seen);
  CHECK(shadow[at] == 0xa5); /* nothing written past the packed streams */
  ibp_params_free(&params);
  free(data), free(flags), free(lengths), free(offsets), free((void *)dirty);
  free(slot), free(rewritten), free(shadow), free(out);
}

int main(void) {
  const uint32_t sizes[] = {64, 256, 1000, 4096};
  for (int k = 0; k < 4; k++)
    for (unsigned threads = 1; threads <= 4; threads++)
      one(sizes[k], 37 + next() % 300, threads);
  printf("test_pack: ok\n");
  return 0;
}
