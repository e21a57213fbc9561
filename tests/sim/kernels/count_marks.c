/*
 * The emulator's half of bench/kernel_sass.sh's all-in count
 * (docs/ARCHITECTURE.md "Counting a tensor's instructions"): runs the
 * marked kernels (variant_marks.cc) on a copy of whole tensors of R bytes
 * per size and chunk width and prints how often each warp passed each
 * mark.  bench/lib/sass_marks.py weighs the passes with the SASS of each
 * mark.
 *   count_marks [--sizes R,R,...] [--widths W,W,...] [--bytes B]
 * Prints per case `case size=R width=W bytes=B tensors=N` and then
 * `hits mark=ID warp_passes=P` per mark.  The data is the calibrate
 * workload's kind: 10 of every 64 bits invariant (random positions), 0-2
 * chunks per tensor that do not fit; one cluster, no dirty tensors,
 * page-aligned buffers, a 16-byte aligned destination; the copy is the
 * whole region (B bytes, at least one tensor), planned for a 4-SM device
 * so that walks have their full length.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "count_marks.h"
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
  int ns = 5, nw = 2;
  uint64_t bytes = 256 * 1024;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
      ns = parse_list(argv[++i], sizes, 16);
    else if (!strcmp(argv[i], "--widths") && i + 1 < argc)
      nw = parse_list(argv[++i], widths, 4);
    else if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
      bytes = strtoull(argv[++i], NULL, 10);
    else
      ns = -1;
    if (ns < 0 || nw < 0) {
      fprintf(stderr, "usage: count_marks [--sizes R,R,...] [--widths "
                      "W,W,...] [--bytes B]\n");
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
      uint64_t mismatch;
      char err[512];
      count_marks_reset();
      CHECKF(kcase_run(&k, entry, 0, k.bytes, k.packed_bytes, NULL, &mismatch,
                       err, sizeof err) == 0 &&
                 mismatch == 0,
             "R=%u c=%u: %s (mismatch at %llu)", R, c, err,
             (unsigned long long)mismatch);
      printf("case size=%u width=%u bytes=%llu tensors=%llu\n", R, c,
             (unsigned long long)k.bytes, (unsigned long long)n);
      for (unsigned id = 1; id < count_marks_ids(); id++)
        printf("hits mark=%u warp_passes=%llu\n", id,
               (unsigned long long)count_marks_warp_passes(id));
      kcase_free(&k);
    }
  return test_end();
}
