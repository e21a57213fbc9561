/*
 * convert — float32 to float16 / bfloat16, round to nearest, ties to even.
 *
 *   convert f16|bf16 IN OUT   IN: little-endian float32s; OUT: little-endian
 *                             binary16 or bfloat16 values, same order
 *   convert selftest          checks fixed vectors (instant)
 *   convert selftest-all      also checks every float32 against the
 *                             compiler's _Float16 cast (minutes)
 *
 * Rules (IEEE 754 roundTiesToEven):
 *   - bfloat16 keeps the top 16 bits of the float32 after rounding the low
 *     16 away; overflow rounds to infinity; NaN stays NaN (made quiet, sign
 *     and top payload kept).
 *   - binary16: 5 exponent bits, 10 fraction bits.  Magnitudes that round to
 *     >= 65520 become infinity; below 2^-14 the result is subnormal, rounded
 *     at 2^-24; NaN becomes the quiet NaN 0x7e00 with its sign.
 * The byte order is fixed (little-endian) whatever the host's.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint16_t f32_to_bf16(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
  uint32_t bias = 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)((u + bias) >> 16);
}

/* Rounds m >> shift to nearest, ties to even (1 <= shift <= 31). */
static uint32_t shift_rne(uint32_t m, unsigned shift) {
  uint32_t q = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u)))
    q++;
  return q;
}

static uint16_t f32_to_f16(uint32_t u) {
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u)
    return sign | 0x7e00u; /* NaN */
  if (a >= 0x477ff000u)
    return sign | 0x7c00u; /* >= 65520 (or inf): rounds to infinity */
  if (a >= 0x38800000u) {  /* normal: rebias the exponent from 127 to 15 */
    /* A carry out of the fraction correctly bumps the exponent. */
    return sign | (uint16_t)shift_rne(a - 0x38000000u, 13);
  }
  if (a <= 0x33000000u)
    return sign; /* <= 2^-25: half the smallest subnormal or less -> 0 */
  /* subnormal: value = m * 2^(e-150); result unit is 2^-24 */
  uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
  return sign | (uint16_t)shift_rne(m, 126u - e);
}

static uint32_t load_le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static int convert_file(int bf16, const char *in_path, const char *out_path) {
  FILE *in = fopen(in_path, "rb");
  FILE *out = in ? fopen(out_path, "wb") : NULL;
  unsigned char ibuf[1 << 16], obuf[1 << 15];
  size_t got, carry = 0;
  int rc = 0;
  if (!in || !out) {
    perror(in ? out_path : in_path);
    if (in)
      fclose(in);
    return 1;
  }
  while ((got = fread(ibuf, 1, sizeof(ibuf), in)) > 0) {
    size_t whole = got / 4 * 4;
    carry = got - whole;
    for (size_t i = 0; i < whole; i += 4) {
      uint32_t u = load_le32(ibuf + i);
      uint16_t h = bf16 ? f32_to_bf16(u) : f32_to_f16(u);
      obuf[i / 2] = (unsigned char)(h & 0xffu);
      obuf[i / 2 + 1] = (unsigned char)(h >> 8);
    }
    if (fwrite(obuf, 1, whole / 2, out) != whole / 2) {
      perror(out_path);
      rc = 1;
      break;
    }
  }
  if (ferror(in) || carry != 0) {
    fprintf(stderr, "convert: %s: read error or size not a multiple of 4\n",
            in_path);
    rc = 1;
  }
  fclose(in);
  if (fclose(out) != 0) {
    perror(out_path);
    rc = 1;
  }
  return rc;
}

/* ------------------------------------------------------------ selftest */

static int expect(const char *what, uint32_t in, unsigned got, unsigned want) {
  if (got == want)
    return 0;
  fprintf(stderr, "selftest %s(0x%08x) = 0x%04x, want 0x%04x\n", what,
          (unsigned)in, got, want);
  return 1;
}

static int fixed_vectors(void) {
  static const uint32_t f16_cases[][2] = {
      {0x3f800000u, 0x3c00u}, /* 1.0 */
      {0xc0000000u, 0xc000u}, /* -2.0 */
      {0x3dcccccdu, 0x2e66u}, /* 0.1 */
      {0x477fe000u, 0x7bffu}, /* 65504, largest finite */
      {0x477fefffu, 0x7bffu}, /* just below the tie to infinity */
      {0x477ff000u, 0x7c00u}, /* 65520 ties to even: infinity */
      {0x7f800000u, 0x7c00u}, /* inf */
      {0xff800000u, 0xfc00u}, /* -inf */
      {0x7fc00000u, 0x7e00u}, /* quiet NaN */
      {0xff800001u, 0xfe00u}, /* signalling NaN, negative */
      {0x3f801000u, 0x3c00u}, /* 1 + 2^-11: tie, stays even */
      {0x3f803000u, 0x3c02u}, /* 1 + 3*2^-11: tie, rounds up to even */
      {0x3f801001u, 0x3c01u}, /* just above the tie */
      {0x38800000u, 0x0400u}, /* 2^-14, smallest normal */
      {0x387fc000u, 0x03ffu}, /* largest subnormal */
      {0x387fe000u, 0x0400u}, /* rounds up into the normals */
      {0x33800000u, 0x0001u}, /* 2^-24, smallest subnormal */
      {0x33000000u, 0x0000u}, /* 2^-25: tie to even -> 0 */
      {0x33000001u, 0x0001u}, /* just above 2^-25 */
      {0x33c00000u, 0x0002u}, /* 1.5 * 2^-24: tie -> 2 (even) */
      {0x80000000u, 0x8000u}, /* -0 */
      {0x00000001u, 0x0000u}, /* float32 subnormal */
  };
  static const uint32_t bf16_cases[][2] = {
      {0x3f800000u, 0x3f80u}, {0x3f808000u, 0x3f80u}, /* tie, even */
      {0x3f818000u, 0x3f82u},                         /* tie, up to even */
      {0x3f808001u, 0x3f81u}, {0x7f7fffffu, 0x7f80u}, /* overflow to inf */
      {0xff800000u, 0xff80u}, {0x7f800001u, 0x7fc0u}, /* NaN made quiet */
      {0xffc12345u, 0xffc1u}, {0x00000001u, 0x0000u},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof(f16_cases) / sizeof(f16_cases[0]); i++)
    bad += expect("f16", f16_cases[i][0], f32_to_f16(f16_cases[i][0]),
                  f16_cases[i][1]);
  for (size_t i = 0; i < sizeof(bf16_cases) / sizeof(bf16_cases[0]); i++)
    bad += expect("bf16", bf16_cases[i][0], f32_to_bf16(bf16_cases[i][0]),
                  bf16_cases[i][1]);
  return bad;
}

#ifdef __FLT16_MAX__
/* Every float32 against the compiler's own conversion (NaNs: class only). */
static int exhaustive_f16(void) {
  uint32_t u = 0;
  int bad = 0;
  do {
    float f;
    memcpy(&f, &u, 4);
    _Float16 h = (_Float16)f;
    uint16_t want;
    memcpy(&want, &h, 2);
    uint16_t got = f32_to_f16(u);
    int nan = (got & 0x7c00u) == 0x7c00u && (got & 0x3ffu);
    int want_nan = (want & 0x7c00u) == 0x7c00u && (want & 0x3ffu);
    if (nan != want_nan || (!nan && got != want))
      bad += bad < 10 ? expect("f16 exhaustive", u, got, want) : 1;
  } while (++u != 0);
  return bad;
}
#else
static int exhaustive_f16(void) {
  fprintf(stderr, "selftest: no _Float16 here, exhaustive check skipped\n");
  return 0;
}
#endif

int main(int argc, char **argv) {
  int all = argc == 2 && strcmp(argv[1], "selftest-all") == 0;
  if (all || (argc == 2 && strcmp(argv[1], "selftest") == 0)) {
    int bad = fixed_vectors() + (all ? exhaustive_f16() : 0);
    printf("convert selftest: %s\n", bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
  }
  if (argc == 4 &&
      (strcmp(argv[1], "f16") == 0 || strcmp(argv[1], "bf16") == 0))
    return convert_file(strcmp(argv[1], "bf16") == 0, argv[2], argv[3]);
  fprintf(stderr, "usage: convert f16|bf16 IN OUT | convert selftest[-all]\n");
  return 2;
}
