/*
 * Test helper for the ibp CLI tests: deterministic input files and byte
 * surgery on containers.
 *
 *   ibp_cli_gen floats BYTES SEED   float32 rows like trained weights
 *   ibp_cli_gen random BYTES SEED   uniformly random bytes (incompressible)
 *   ibp_cli_gen flip FILE OFFSET    invert every bit of the byte at OFFSET
 *
 * "floats": rows of 256 float32, each row ~normal (sum of four uniforms)
 * with mean 0 and a per-row scale in [0.05, 0.5).  Only integer and basic
 * IEEE arithmetic is used (no libm), so the bytes are the same everywhere.
 * Output goes to stdout.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double unit(uint64_t *s) {
  return (double)(next(s) >> 11) * 0x1.0p-53;
}

/* The next 4 bytes of the stream. */
static void next_word(const char *kind, uint64_t i, uint64_t *s, double *scale,
                      uint8_t v[4]) {
  if (strcmp(kind, "random") == 0) {
    uint64_t x = next(s);
    for (int k = 0; k < 4; k++)
      v[k] = (uint8_t)(x >> (8 * k));
    return;
  }
  if (i % 256 == 0)
    *scale = 0.05 + 0.45 * unit(s);
  /* Sum of four uniforms: mean 2, variance 1/3. */
  double n = unit(s) + unit(s) + unit(s) + unit(s) - 2.0;
  float f = (float)(n * 1.7320508075688772 * *scale);
  uint32_t u;
  memcpy(&u, &f, 4);
  for (int k = 0; k < 4; k++)
    v[k] = (uint8_t)(u >> (8 * k));
}

static int gen(const char *kind, uint64_t bytes, uint64_t seed) {
  uint64_t s = seed;
  double scale = 0.0;
  for (uint64_t i = 0; bytes > 0; i++) {
    uint8_t v[4];
    next_word(kind, i, &s, &scale, v);
    size_t len = bytes < 4 ? (size_t)bytes : 4;
    fwrite(v, 1, len, stdout);
    bytes -= len;
  }
  return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}

static int flip(const char *path, uint64_t offset) {
  FILE *f = fopen(path, "r+b");
  if (f == NULL || fseek(f, (long)offset, SEEK_SET) != 0) {
    perror(path);
    return 1;
  }
  int c = fgetc(f);
  if (c == EOF || fseek(f, (long)offset, SEEK_SET) != 0 ||
      fputc(c ^ 0xff, f) == EOF || fclose(f) != 0) {
    fprintf(stderr, "%s: cannot flip byte %llu\n", path,
            (unsigned long long)offset);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "flip") == 0)
    return flip(argv[2], strtoull(argv[3], NULL, 10));
  if (argc == 4 &&
      (strcmp(argv[1], "floats") == 0 || strcmp(argv[1], "random") == 0))
    return gen(argv[1], strtoull(argv[2], NULL, 10),
               strtoull(argv[3], NULL, 10));
  fprintf(stderr, "usage: ibp_cli_gen floats|random BYTES SEED\n"
                  "       ibp_cli_gen flip FILE OFFSET\n");
  return 2;
}
