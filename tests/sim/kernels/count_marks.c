/*
 * The emulator's half of bench/kernel_sass.sh's all-in count
 * (docs/ARCHITECTURE.md "Counting a tensor's instructions"): runs the
 * marked kernels (variant_marks.cc) on a copy of whole tensors of R bytes
 * per size and chunk width and prints how often each warp passed each
 * mark.  bench/lib/sass_marks.py weighs the passes with the SASS of each
 * mark.
 *   count_marks [--sizes R,R,...] [--widths W,W,...] [--bytes B]
 *               [--stage-sizes R,R,...]
 * Prints per case `case size=R width=W bytes=B tensors=N` and then
 * `hits mark=ID warp_passes=P` per mark.  The data is the calibrate
 * workload's kind: 10 of every 64 bits invariant (random positions), 0-2
 * chunks per tensor that do not fit; one cluster, no dirty tensors,
 * page-aligned buffers, a 16-byte aligned destination; the copy is the
 * whole region (B bytes, at least one tensor), planned for a 4-SM device
 * so that walks have their full length.
 *
 * Then, per stage size R (default none; under 16 KiB: the block path has
 * no stage, and libibp never prepares a region of larger tensors with one)
 * and width W, a region with the exponent stage (docs/FORMAT.md §9), its
 * case line `case stage=exp dtype=bf16 size=R width=W bytes=B tensors=N
 * picked=P no_bitmap=0|1 saved=S`: bf16 values drawn from a normal
 * distribution of standard deviation 0.02 (a Box-Muller pair per two
 * values, rounded to bf16 to nearest even), as an ML weight matrix's rows,
 * prepared as libibp prepares it (ibp_stage_choose for bf16, one cluster,
 * every tensor looked at, IBP's search on the stripped tensors with chunk
 * width W; P is the width the search picks when free to, S the share of
 * the bytes the stage and IBP save together); the same layout and copy as
 * above.  IBP_COUNT_STAGE_FILE=PATH takes the stage regions' bytes from
 * that file instead (bf16 values, e.g. bench/data's cnn_f32_to_bf16.bin),
 * from byte IBP_COUNT_STAGE_SKIP on (default 0): the count on real data.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "count_marks.h"
#include "ibp/stage.h"
#include "kcase.h"
#include "kernels_emu.h"

static void build(kcase *k, rng *r, uint32_t R, uint32_t c, uint64_t n) {
  kcase_shape s = {R, c, n, 0, 0, 0, 0, 0, 0, 1, 1};
  kcase_build(k, r, &s); /* geometry and buffers; contents replaced below */
  for (uint32_t b = 0; b < R; b++) {
    uint8_t m = 0;
    for (int bit = 0; bit < 8; bit++)
      m |= (uint8_t)(rng_chance(r, 10.0 / 64) << bit);
    k->mask[b] = m;
    k->bitval[b] = (uint8_t)rng_next(r) & m;
  }
  for (uint64_t i = 0; i < n * R; i++)
    k->orig[i] = (uint8_t)((rng_next(r) & ~k->mask[i % R]) | k->bitval[i % R]);
  for (uint64_t i = 0; i < n; i++)
    for (uint64_t f = rng_below(r, 3); f > 0; f--) {
      uint32_t b = (uint32_t)rng_below(r, R);
      uint8_t m = k->mask[b];
      if (m)
        k->orig[i * R + b] ^= m & (uint8_t)(0 - m);
    }
  ibp_params_free(&k->params);
  CHECK_OK(ibp_params_from_masks(R, c, k->mask, k->bitval, &k->params));
  kcase_compress(k);
}

/* float32 x rounded to bf16 (to nearest even; x finite). */
static uint16_t to_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

#define TWO_PI 6.283185307179586

/* `bytes` bytes of bf16 values ~ N(0, 0.02^2). */
static void weights_bf16(rng *r, uint8_t *out, uint64_t bytes) {
  for (uint64_t i = 0; i + 4 <= bytes; i += 4) {
    const double u = 1.0 - rng_unit(r), v = rng_unit(r);
    const double m = 0.02 * sqrt(-2.0 * log(u));
    const uint16_t a = to_bf16((float)(m * cos(TWO_PI * v)));
    const uint16_t b = to_bf16((float)(m * sin(TWO_PI * v)));
    memcpy(out + i, &a, 2);
    memcpy(out + i + 2, &b, 2);
  }
}

/* The stage's choice for the region's bytes with IBP's chunk width c (0:
 * searched). */
static void choose(const uint8_t *data, uint64_t bytes, uint32_t R, uint32_t c,
                   ibp_stage_choice *out) {
  ibp_stage_choose_options o;
  memset(&o, 0, sizeof o);
  o.dtype = IBP_DTYPE_BF16;
  o.search.chunk_bytes = c;
  o.search.threshold = -1;
  o.cluster.clusters = 1;
  o.threads = 1;
  CHECK_OK(ibp_stage_choose(data, bytes, R, &o, out));
  CHECK(out->dtype == IBP_DTYPE_BF16 && out->clusters.count == 1);
}

/* A stage region of n tensors of R bytes (the header), IBP's chunk width
 * c; *picked: the width the search picks unasked, *saved: the share of
 * the bytes stored less. */
static void build_stage(kcase *k, rng *r, uint32_t R, uint32_t c, uint64_t n,
                        ibp_stage_choice *ch, uint32_t *picked, double *saved) {
  kcase_shape s = {R, c, n, 0, 0, 0, 0, 0, 0, 1, 1};
  kcase_build(k, r, &s); /* geometry and buffers; contents replaced below */
  weights_bf16(r, k->orig, k->bytes);
  const char *file = getenv("IBP_COUNT_STAGE_FILE");
  if (file) { /* the file's bf16 bytes instead, from the offset (header) */
    FILE *f = fopen(file, "rb");
    CHECK(f != NULL);
    const char *skip = getenv("IBP_COUNT_STAGE_SKIP");
    CHECK(fseek(f, skip ? atol(skip) : 0, SEEK_SET) == 0);
    CHECK(fread(k->orig, 1, k->bytes, f) == k->bytes);
    fclose(f);
  }
  choose(k->orig, k->bytes, R, 0, ch);
  *picked = ch->clusters.params[0].chunk_bytes;
  ibp_stage_choice_free(ch);
  choose(k->orig, k->bytes, R, c, ch);
  const ibp_params *p = &ch->clusters.params[0];
  CHECK(p->chunk_bytes == c);
  *saved = 1.0 - (double)ch->total / (double)k->bytes;
  memcpy(k->mask, p->mask, R);
  memcpy(k->bitval, p->bitval, R);
  ibp_params_free(&k->params);
  CHECK_OK(ibp_params_from_masks(R, c, k->mask, k->bitval, &k->params));
  k->stages = ch->stages;
  kcase_compress(k);
}

/* Runs the marked kernel over the whole region of k. */
static void count(const kcase *k, simt_entry entry) {
  uint64_t mismatch;
  char err[512];
  count_marks_reset();
  CHECKF(kcase_run(k, entry, 0, k->bytes, k->packed_bytes, NULL, &mismatch, err,
                   sizeof err) == 0 &&
             mismatch == 0,
         "R=%u c=%u: %s (mismatch at %llu)", k->R, k->c, err,
         (unsigned long long)mismatch);
}

static void print_hits(void) {
  for (unsigned id = 1; id < count_marks_ids(); id++)
    printf("hits mark=%u warp_passes=%llu\n", id,
           (unsigned long long)count_marks_warp_passes(id));
}

static int parse_list(const char *s, uint32_t *out, int most) {
  int n = 0;
  while (*s && n < most) {
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (end == s || v == 0 || v > (1u << 24))
      return -1;
    out[n++] = (uint32_t)v;
    s = *end == ',' ? end + 1 : end;
  }
  return *s ? -1 : n;
}

int main(int argc, char **argv) {
  uint32_t sizes[16] = {256, 400, 1024, 4096, 65536}, widths[4] = {1, 8};
  uint32_t stage_sizes[16];
  int ns = 5, nw = 2, nst = 0;
  uint64_t bytes = 256 * 1024;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
      ns = parse_list(argv[++i], sizes, 16);
    else if (!strcmp(argv[i], "--widths") && i + 1 < argc)
      nw = parse_list(argv[++i], widths, 4);
    else if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
      bytes = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--stage-sizes") && i + 1 < argc)
      nst = parse_list(argv[++i], stage_sizes, 16);
    else
      ns = -1;
    for (int j = 0; j < nst; j++)
      if (stage_sizes[j] % 2 || stage_sizes[j] >= IBP_KERNEL_BLOCK_R)
        nst = -1;
    if (ns < 0 || nw < 0 || nst < 0) {
      fprintf(stderr,
              "usage: count_marks [--sizes R,R,...] [--widths "
              "W,W,...] [--bytes B] [--stage-sizes R,R,...] (stage "
              "sizes even, under %u)\n",
              IBP_KERNEL_BLOCK_R);
      return 2;
    }
  }
  test_begin("count_marks", 1);
  simt_entry entry = ibp_emu_entry("ibp_decompress_marks");
  CHECK(entry != NULL);
  rng r;
  rng_seed(&r, 36);
  for (int si = 0; si < ns; si++)
    for (int wi = 0; wi < nw; wi++) {
      const uint32_t R = sizes[si], c = widths[wi];
      const uint64_t n = bytes / R ? bytes / R : 1;
      kcase k;
      build(&k, &r, R, c, n);
      count(&k, entry);
      printf("case size=%u width=%u bytes=%llu tensors=%llu\n", R, c,
             (unsigned long long)k.bytes, (unsigned long long)n);
      print_hits();
      kcase_free(&k);
    }
  for (int si = 0; si < nst; si++)
    for (int wi = 0; wi < nw; wi++) {
      const uint32_t R = stage_sizes[si], c = widths[wi];
      const uint64_t n = bytes / R ? bytes / R : 1;
      kcase k;
      ibp_stage_choice ch;
      uint32_t picked;
      double saved;
      build_stage(&k, &r, R, c, n, &ch, &picked, &saved);
      count(&k, entry);
      printf("case stage=exp dtype=bf16 size=%u width=%u bytes=%llu "
             "tensors=%llu picked=%u no_bitmap=%u saved=%.3f\n",
             R, c, (unsigned long long)k.bytes, (unsigned long long)n, picked,
             k.kstages[0].no_bitmap, saved);
      print_hits();
      k.stages = NULL;
      kcase_free(&k);
      ibp_stage_choice_free(&ch);
    }
  return test_end();
}
