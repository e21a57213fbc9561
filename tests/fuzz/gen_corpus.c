/*
 * Writes the seed corpus checked in under tests/fuzz/corpus/:
 *   fuzz_tensor/     valid compressed and raw tensors in the tensor_input.h
 *                    layout (encoded with the reference codec), a few sizes,
 *                    every chunk width and mask mode;
 *   fuzz_stage/      exponent-stage streams (fuzz_stage.c's layout): a
 *                    size byte, a mode byte, a descriptor, a stream
 *                    (*_bad_stream, *_stream_ends_on_word and
 *                    *_segment_length_off: fuzzer findings against
 *                    mutants, kept by hand, not written here);
 *   fuzz_container/  small valid containers written by the library
 *                    (version 3, and version 4 with the exponent stage:
 *                    *_exp_*, on one of two clusters in *_mixed): one
 *                    Mask/Bitval and K clusters.  The
 *                    seeds named *_v1 and *_v2 were written by the library
 *                    before version 3 (docs/FORMAT.md §8) and are kept.
 * Usage: gen_fuzz_corpus <corpus dir>   (the subdirectories must exist)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_data.h"
#include "ibp/container.h"
#include "ibp/stage.h"
#include "ref_codec.h"
#include "tensor_input.h"

static void write_file(const char *dir, const char *name, const void *buf,
                       size_t len) {
  char path[4096];
  int n = snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = n > 0 && (size_t)n < sizeof path ? fopen(path, "wb") : NULL;
  if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

/* One tensor seed: header (+ explicit masks) + the tensor's stored form. */
static void tensor_seed(const char *dir, rng *r, uint32_t R, uint32_t c,
                        unsigned mode) {
  uint8_t hdr[TENSOR_INPUT_HEADER + 2];
  uint32_t seed = (uint32_t)rng_next(r);
  tensor_input_header(R, c, 1, mode ? mode : 5, seed,
                      hdr); /* 0: random masks, written out */
  tensor_input in;
  memset(hdr + TENSOR_INPUT_HEADER, 0, 2);
  if (tensor_input_parse(hdr, sizeof hdr, &in) != 0)
    exit(1);
  uint8_t *t = malloc(R), *slot = malloc(R);
  rng_fill(r, t, R);
  for (uint32_t b = 0; b < R; b++) /* mostly fitting, a few misses */
    if (rng_below(r, 16))
      t[b] = (uint8_t)((t[b] & ~in.mask[b]) | in.bitval[b]);
  ref_params rp = {R, c, in.mask, in.bitval};
  int comp;
  size_t len = ref_store(&rp, t, slot, &comp);
  size_t total = TENSOR_INPUT_HEADER + (mode ? 0 : 2 * (size_t)R) + len;
  uint8_t *out = malloc(total), *p = out;
  tensor_input_header(R, c, comp, mode, seed, p);
  p += TENSOR_INPUT_HEADER;
  if (mode == 0) {
    memcpy(p, in.mask, R);
    memcpy(p + R, in.bitval, R);
    p += 2 * (size_t)R;
  }
  memcpy(p, slot, len);
  char name[64];
  snprintf(name, sizeof name, "R%u_c%u_mode%u_%s", R, c, mode,
           comp ? "comp" : "raw");
  write_file(dir, name, out, total);
  free(out);
  free(t);
  free(slot);
  tensor_input_free(&in);
}

typedef struct membuf {
  uint8_t *buf;
  uint64_t len;
} membuf;

static int mem_write(void *ctx, uint64_t off, const void *buf, size_t len) {
  membuf *m = ctx;
  if (off + len > m->len) {
    m->buf = realloc(m->buf, (size_t)(off + len));
    if (!m->buf)
      return -1;
    memset(m->buf + m->len, 0, (size_t)(off + len - m->len));
    m->len = off + len;
  }
  memcpy(m->buf + off, buf, len);
  return 0;
}

/* K = 1: base; else one pair per K-th of the tensors (threshold 0.9). */
static ibp_status clusters_of(const uint8_t *data, uint64_t n,
                              const ibp_params *base, uint32_t k,
                              ibp_clusters *out) {
  const uint32_t R = base->tensor_bytes;
  out->params = calloc(k, sizeof *out->params);
  out->count = k;
  if (!out->params)
    return IBP_ERR_NO_MEMORY;
  if (k == 1)
    return ibp_params_from_masks(R, base->chunk_bytes, base->mask, base->bitval,
                                 &out->params[0]);
  ibp_status s = IBP_OK;
  for (uint32_t c = 0; c < k && s == IBP_OK; c++) {
    uint64_t i0 = n * c / k, i1 = n * (c + 1) / k;
    ibp_bitstats st;
    s = ibp_bitstats_init(&st, R);
    if (s == IBP_OK)
      s = ibp_bitstats_add(&st, data + i0 * R, i1 - i0, NULL, 1);
    if (s == IBP_OK)
      s = ibp_params_build(&st, 0.9, base->chunk_bytes, &out->params[c]);
    ibp_bitstats_free(&st);
  }
  return s;
}

static void container_seed(const char *dir, rng *r, uint32_t R, uint64_t n,
                           uint64_t tail, data_kind dk, uint32_t k) {
  uint64_t bytes = n * R + tail;
  uint8_t *data = malloc((size_t)bytes);
  gen_data(r, dk, R, n, data);
  rng_fill(r, data + n * R, (size_t)tail);
  ibp_params p = {0};
  ibp_search_options opt = {0};
  opt.threshold = -1;
  opt.threads = 1;
  membuf m = {0};
  ibp_clusters cl = {0};
  if (ibp_search(data, n, R, &opt, &p, NULL) != IBP_OK ||
      clusters_of(data, n, &p, k, &cl) != IBP_OK ||
      ibp_container_write_clustered(cl.params, cl.count, data, bytes, 1,
                                    mem_write, &m, NULL) != IBP_OK) {
    fprintf(stderr, "container R=%u n=%llu failed\n", R, (unsigned long long)n);
    exit(1);
  }
  char name[64];
  if (cl.count > 1)
    snprintf(name, sizeof name, "R%u_n%llu_tail%llu_%s_k%u", R,
             (unsigned long long)n, (unsigned long long)tail,
             data_kind_name(dk), cl.count);
  else
    snprintf(name, sizeof name, "R%u_n%llu_tail%llu_%s", R,
             (unsigned long long)n, (unsigned long long)tail,
             data_kind_name(dk));
  ibp_clusters_free(&cl);
  write_file(dir, name, m.buf, (size_t)m.len);
  free(m.buf);
  free(data);
  ibp_params_free(&p);
}

/* Float-like values: random mantissas, a few exponents around one. */
static void float_like(rng *r, uint8_t *d, uint64_t bytes, uint32_t w,
                       uint32_t lo) {
  rng_fill(r, d, (size_t)bytes);
  for (uint64_t j = 0; j + w <= bytes; j += w) {
    uint32_t v = 0, e = 120 - (uint32_t)rng_below(r, 6);
    if (lo == 10) /* float16: a 5-bit exponent */
      e = 12 - (uint32_t)rng_below(r, 6);
    for (uint32_t b = 0; b < w; b++)
      v |= (uint32_t)d[j + b] << (8 * b);
    v = (v & ((1u << lo) - 1)) |
        (e | (uint32_t)rng_below(r, 2) << (lo == 10 ? 5 : 8)) << lo;
    for (uint32_t b = 0; b < w; b++)
      d[j + b] = (uint8_t)(v >> (8 * b));
  }
}

/* A stage seed (fuzz_stage.c): values, mode, descriptor, stream. */
static void stage_seed(const char *dir, rng *r, uint32_t dtype, uint32_t values,
                       unsigned mode) {
  /* (values > 96: 96 or fewer shifted by mode's bits 5-7) */
  static const uint32_t widths[4] = {1, 2, 4, 8};
  const uint32_t w = ibp_dtype_bytes(dtype), R = w * values;
  const uint32_t lo = dtype == IBP_DTYPE_F16    ? 10
                      : dtype == IBP_DTYPE_BF16 ? 7
                                                : 23;
  uint8_t *d = malloc(8 * (size_t)R), *mask = calloc(R, 1), *bv = calloc(R, 1);
  float_like(r, d, 8 * (uint64_t)R, w, lo);
  if (!(mode & 4))
    for (uint32_t b = 0; b < R; b++)
      mask[b] = (uint8_t)(0x11u << (b % 4));
  for (uint64_t b = 0; b < 8 * (uint64_t)R; b++) /* chunks that fit */
    d[b] &= (uint8_t)~mask[b % R];
  ibp_params p = {0};
  ibp_stage st;
  static uint8_t out[IBP_STAGE_DESCRIPTOR_MAX_BYTES + 2 + (64u << 10)];
  if (ibp_params_from_masks(R, widths[mode & 3], mask, bv, &p) != IBP_OK ||
      ibp_stage_init(&st, IBP_STAGE_EXP, dtype, 4, R) != IBP_OK) {
    fprintf(stderr, "stage seed failed\n");
    exit(1);
  }
  ibp_stage_fit_params(&st, &p);
  for (int i = 0; i < 8; i++)
    ibp_stage_count(&st, d + (size_t)i * R, R);
  ibp_stage_finish(&st);
  out[0] = (uint8_t)((values >> (mode >> 5)) - 1);
  out[1] = (uint8_t)mode;
  size_t n = ibp_stage_descriptor_bytes(&st), len;
  ibp_stage_write(&st, out + 2);
  int compressed;
  len = ibp_compress_tensor_staged(&p, &st, d, out + 2 + n, &compressed);
  char name[64];
  snprintf(name, sizeof name, "%s_v%u_m%u%s", ibp_dtype_name(dtype), values,
           mode, compressed ? "" : "_raw");
  write_file(dir, name, out, 2 + n + len);
  ibp_params_free(&p);
  free(d);
  free(mask);
  free(bv);
}

/* A version-4 container: K = 1 pair fitted to the exponent stage. */
static void stage_container_seed(const char *dir, rng *r, uint32_t dtype,
                                 uint32_t values, uint64_t n) {
  const uint32_t w = ibp_dtype_bytes(dtype), R = w * values;
  const uint32_t lo = dtype == IBP_DTYPE_F16    ? 10
                      : dtype == IBP_DTYPE_BF16 ? 7
                                                : 23;
  uint64_t bytes = n * R + 1;
  uint8_t *d = malloc((size_t)bytes);
  float_like(r, d, bytes, w, lo);
  ibp_params p = {0};
  ibp_search_options opt = {0};
  opt.threshold = -1;
  opt.threads = 1;
  ibp_stage st;
  membuf m = {0};
  if (ibp_stage_init(&st, IBP_STAGE_EXP, dtype, 4, R) != IBP_OK ||
      ibp_search(d, n, R, &opt, &p, NULL) != IBP_OK) {
    fprintf(stderr, "stage container failed\n");
    exit(1);
  }
  ibp_stage_fit_params(&st, &p);
  if (ibp_stage_learn(&p, 1, IBP_STAGE_EXP, dtype, d, n, 0, 1, &st) != IBP_OK ||
      ibp_container_write_staged(&p, &st, 1, d, bytes, 1, mem_write, &m,
                                 NULL) != IBP_OK) {
    fprintf(stderr, "stage container failed\n");
    exit(1);
  }
  char name[64];
  snprintf(name, sizeof name, "R%u_n%llu_tail1_exp_%s", R,
           (unsigned long long)n, ibp_dtype_name(dtype));
  write_file(dir, name, m.buf, (size_t)m.len);
  free(m.buf);
  free(d);
  ibp_params_free(&p);
}

/* A version-4 container of K = 2 pairs: the stage on the first, off on
 * the second (IBP alone's pair, not fitted: docs/FORMAT.md §9.5), half the
 * tensors float-like and half with one sign+exponent everywhere. */
static void stage_mixed_seed(const char *dir, rng *r, uint32_t values,
                             uint64_t n) {
  const uint32_t R = 2 * values;
  uint64_t bytes = n * R + 1;
  uint8_t *d = malloc((size_t)bytes);
  float_like(r, d, bytes, 2, 7);
  for (uint64_t b = n / 2 * R; b + 1 < n * R; b += 2)
    d[b + 1] = 0x3F, d[b] = (uint8_t)(d[b] | 0x80); /* the field 0x07F */
  ibp_params p[2] = {{0}, {0}};
  ibp_search_options opt = {0};
  opt.threshold = -1;
  opt.threads = 1;
  ibp_stage st[2];
  membuf m = {0};
  if (ibp_stage_init(&st[0], IBP_STAGE_EXP, IBP_DTYPE_BF16, 4, R) != IBP_OK ||
      ibp_stage_init(&st[1], IBP_STAGE_NONE, IBP_DTYPE_NONE, 0, R) != IBP_OK ||
      ibp_search(d, n, R, &opt, &p[1], NULL) != IBP_OK ||
      ibp_params_from_masks(R, p[1].chunk_bytes, p[1].mask, p[1].bitval,
                            &p[0]) != IBP_OK) {
    fprintf(stderr, "mixed stage container failed\n");
    exit(1);
  }
  ibp_stage_fit_params(&st[0], &p[0]);
  if (ibp_stage_learn(p, 1, IBP_STAGE_EXP, IBP_DTYPE_BF16, d, n / 2, 0, 1,
                      st) != IBP_OK ||
      ibp_container_write_staged(p, st, 2, d, bytes, 1, mem_write, &m, NULL) !=
          IBP_OK) {
    fprintf(stderr, "mixed stage container failed\n");
    exit(1);
  }
  char name[64];
  snprintf(name, sizeof name, "R%u_n%llu_tail1_exp_bf16_k2_mixed", R,
           (unsigned long long)n);
  write_file(dir, name, m.buf, (size_t)m.len);
  free(m.buf);
  free(d);
  ibp_params_free(&p[0]);
  ibp_params_free(&p[1]);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  char dir[4096];
  rng r;
  rng_seed(&r, 0xC0FFEE);
  snprintf(dir, sizeof dir, "%s/fuzz_tensor", argv[1]);
  static const uint32_t sizes[] = {1, 7, 16, 61, 256};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
    for (unsigned mode = 0; mode < 8; mode++)
      tensor_seed(dir, &r, sizes[s], 1u << ((s + mode) % 4), mode);
  snprintf(dir, sizeof dir, "%s/fuzz_container", argv[1]);
  container_seed(dir, &r, 1, 40, 0, DATA_INTS, 1);
  container_seed(dir, &r, 7, 9, 3, DATA_FLIPS, 1);
  container_seed(dir, &r, 64, 16, 0, DATA_FLOAT, 1);
  container_seed(dir, &r, 100, 5, 99, DATA_SPARSE, 1);
  container_seed(dir, &r, 256, 8, 17, DATA_CONST, 1);
  container_seed(dir, &r, 1000, 3, 1, DATA_RANDOM, 1);
  /* K > 1: ids of 1, 2 and 4 bits (a given K that beats one pair) */
  container_seed(dir, &r, 16, 200, 5, DATA_FLIPS, 2);
  container_seed(dir, &r, 24, 300, 0, DATA_INTS, 3);
  container_seed(dir, &r, 8, 640, 1, DATA_FLOAT, 5);
  stage_container_seed(dir, &r, IBP_DTYPE_BF16, 64, 40);
  stage_container_seed(dir, &r, IBP_DTYPE_F16, 33, 20);
  stage_container_seed(dir, &r, IBP_DTYPE_F32, 17, 20);
  snprintf(dir, sizeof dir, "%s/fuzz_stage", argv[1]);
  static const uint32_t types[] = {IBP_DTYPE_BF16, IBP_DTYPE_F16,
                                   IBP_DTYPE_F32};
  static const uint32_t counts[] = {1, 7, 40, 96};
  for (unsigned t = 0; t < 3; t++)
    for (unsigned v = 0; v < 4; v++)
      stage_seed(dir, &r, types[t], counts[v], (t + v) % 8);
  /* its own stream: the seeds above stay as they were */
  rng_seed(&r, 0xC0FFEE + 4);
  snprintf(dir, sizeof dir, "%s/fuzz_container", argv[1]);
  stage_mixed_seed(dir, &r, 64, 40);
  /* tensors of more than 16 segments (the device decoder's rounds before
   * its last), from a stream of their own: 96 << 3 bf16 values (48
   * segments), 40 << 4 float32 values (40 segments), the stream at byte
   * 1 and 3 of a word */
  rng_seed(&r, 0xC0FFEE + 5);
  snprintf(dir, sizeof dir, "%s/fuzz_stage", argv[1]);
  stage_seed(dir, &r, IBP_DTYPE_BF16, 96u << 3, 3u << 5 | 1u << 3 | 1u);
  stage_seed(dir, &r, IBP_DTYPE_F32, 40u << 4, 4u << 5 | 3u << 3 | 4u);
  return 0;
}
