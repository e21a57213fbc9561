/* Generated data for stage_e2e.sh where bench/data is not built (a fresh
 * clone's CI): bf16 weights of a normal-like spread (a sum of three
 * uniforms, sd 0.02: as tests/preload/core/core_stage.c's), seeded, so
 * that every run writes the same bytes.
 *
 *   gen_bf16 FILE BYTES     (BYTES a positive multiple of 2) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed = 12345;

static float uniform(void) { /* [0, 1) */
  seed = seed * 6364136223846793005ull + 1442695040888963407ull;
  return (float)(seed >> 40) / (float)(1 << 24);
}

/* v rounded to the nearest bf16, ties to even */
static uint16_t bf16(float v) {
  uint32_t b;
  memcpy(&b, &v, 4);
  return (uint16_t)((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}

int main(int argc, char **argv) {
  char *end = NULL;
  const unsigned long long bytes = argc == 3 ? strtoull(argv[2], &end, 10) : 0;
  if (argc != 3 || !end || *end || bytes == 0 || bytes % 2) {
    fprintf(stderr, "usage: gen_bf16 FILE BYTES (a positive even count)\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "wb");
  if (!f) {
    fprintf(stderr, "gen_bf16: cannot write %s\n", argv[1]);
    return 1;
  }
  for (unsigned long long i = 0; i < bytes / 2; i++) {
    float u = 0;
    for (int k = 0; k < 3; k++)
      u += uniform() - 0.5f;
    const uint16_t v = bf16(u * 0.02f);
    if (fwrite(&v, 2, 1, f) != 1) {
      fprintf(stderr, "gen_bf16: cannot write %s\n", argv[1]);
      fclose(f);
      return 1;
    }
  }
  return fclose(f) == 0 ? 0 : 1;
}
