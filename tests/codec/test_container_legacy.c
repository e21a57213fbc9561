/*
 * Containers of versions 1 to 3 (docs/FORMAT.md §8) still read: the files
 * tests/codec/data/legacy_v1.ibp (one Mask/Bitval) and legacy_v2.ibp (two
 * clusters) were written by the library before version 3, with the legacy
 * checksum, from the bytes fill() makes here (R = 64, 2000 bytes: 31
 * tensors and a 16-byte tail); legacy_v3.ibp (one pair, from fill()'s
 * bytes) and legacy_v3_k2.ibp (two clusters, from fill_two()'s 8000
 * bytes) by the library before version 4 (the exponent stage), with XXH64
 * checksums.  Each must give info fields as written, decode to those
 * bytes, and fail with IBP_ERR_CHECKSUM when its data checksum or its
 * metadata checksum is changed by one bit (so the checksum is checked,
 * not skipped).  test_container checks version 3's XXH64 checksums as
 * written today.
 *
 * Usage: test_container_legacy <directory of the .ibp files>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibp/container.h"
#include "test_util.h"

#define BYTES 2000u
#define BYTES_TWO 8000u
#define R 64u

/* The original bytes: every third tensor zero, else bytes alternating
 * between a pseudo-random value and 0x3c/0x3d. */
static void fill(uint8_t *b, size_t n) {
  uint32_t x = 12345;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    size_t t = i / R;
    b[i] = (t % 3 == 0)   ? 0
           : (i % 2 != 0) ? (uint8_t)(0x3c | ((x >> 16) & 1))
                          : (uint8_t)(x >> 16);
  }
}

/* Two kinds of tensors, alternating: bytes with the high nibble 0, and
 * with it 0xf; the low nibble pseudo-random. */
static void fill_two(uint8_t *b, size_t n) {
  uint32_t x = 12345;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    b[i] = (uint8_t)((((i / R) % 2) ? 0xf0 : 0) | ((x >> 16) & 0x0f));
  }
}

typedef struct sink {
  uint8_t buf[BYTES_TWO + 4096];
  uint64_t len;
} sink;

static int sink_write(void *ctx, uint64_t offset, const void *buf, size_t len) {
  sink *s = ctx;
  if (offset + len > sizeof s->buf)
    return -1;
  memcpy(s->buf + offset, buf, len);
  if (offset + len > s->len)
    s->len = offset + len;
  return 0;
}

static uint8_t *read_file(const char *dir, const char *name, uint64_t *len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  CHECKF(f != NULL, "cannot open %s", path);
  uint8_t *b = malloc(1 << 16);
  CHECK(b != NULL);
  *len = fread(b, 1, 1 << 16, f);
  fclose(f);
  return b;
}

static void check_legacy(const char *dir, const char *name, uint32_t version,
                         uint32_t k, const uint8_t *want, uint64_t bytes) {
  uint64_t len;
  uint8_t *b = read_file(dir, name, &len);
  ibp_container_info info;
  CHECK_OK(ibp_container_read_info(b, len, &info));
  CHECK_U64(info.version, version);
  CHECK_U64(info.clusters, k);
  CHECK_U64(info.tensor_bytes, R);
  CHECK_U64(info.original_bytes, bytes);
  CHECK_U64(info.container_bytes, len);
  sink *s = calloc(1, sizeof *s);
  CHECK(s != NULL);
  CHECK_OK(ibp_container_decode(b, len, sink_write, s));
  CHECK_U64(s->len, bytes);
  CHECK_MEM(s->buf, want, bytes, name);
  b[72] ^= 1; /* data checksum */
  CHECK_STATUS(ibp_container_decode(b, len, NULL, NULL), IBP_ERR_CHECKSUM);
  b[72] ^= 1;
  b[80] ^= 1; /* metadata checksum */
  CHECK_STATUS(ibp_container_read_info(b, len, &info), IBP_ERR_CHECKSUM);
  free(s);
  free(b);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_container_legacy <data directory>\n");
    return 2;
  }
  static uint8_t want[BYTES], two[BYTES_TWO];
  fill(want, BYTES);
  fill_two(two, BYTES_TWO);
  check_legacy(argv[1], "legacy_v1.ibp", IBP_FORMAT_VERSION_SINGLE, 1, want,
               BYTES);
  check_legacy(argv[1], "legacy_v2.ibp", IBP_FORMAT_VERSION_CLUSTERS, 2, want,
               BYTES);
  check_legacy(argv[1], "legacy_v3.ibp", IBP_FORMAT_VERSION_XXH64, 1, want,
               BYTES);
  check_legacy(argv[1], "legacy_v3_k2.ibp", IBP_FORMAT_VERSION_XXH64, 2, two,
               BYTES_TWO);
  printf("test_container_legacy: ok\n");
  return 0;
}
