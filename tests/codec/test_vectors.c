/*
 * Golden vectors worked out by hand from the format text (tests/README.md),
 * checked against both the reference codec and the library: this pins the
 * oracle itself, so a shared misreading of the format cannot hide.
 */
#include <stdio.h>
#include <string.h>

#include "fixture.h"

typedef struct vector {
  const char *what;
  uint32_t R, c;
  uint8_t mask[8], bitval[8], tensor[8];
  size_t stored; /* stored length (R when raw) */
  int compressed;
  uint8_t stream[8]; /* when compressed */
} vector;

static const vector vectors[] = {
    /* docs/FORMAT.md section 5, tensor A: two float16 in [1, 2) */
    {"FORMAT.md example, tensor A",
     4,
     2,
     {0x00, 0xFC, 0x00, 0xFC},
     {0x00, 0x3C, 0x00, 0x3C},
     {0x12, 0x3C, 0x05, 0x3C},
     3,
     1,
     {0x4B, 0x50, 0x00}},
    /* docs/FORMAT.md section 5, tensor B: 28 bits, not shorter than R */
    {"FORMAT.md example, tensor B",
     4,
     2,
     {0x00, 0xFC, 0x00, 0xFC},
     {0x00, 0x3C, 0x00, 0x3C},
     {0x12, 0x3C, 0x05, 0xBC},
     4,
     0,
     {0}},
    /* chunk 0 fits (all mask), chunk 1 fits (no mask): bitmap 11, then the
     * 16 bits 0x3412: 3 | 0x3412 << 2 = 4b d0 00 (18 bits) */
    {"two fitting chunks",
     4,
     2,
     {0xFF, 0xFF, 0, 0},
     {0xAB, 0xCD, 0, 0},
     {0xAB, 0xCD, 0x12, 0x34},
     3,
     1,
     {0x4B, 0xD0, 0x00}},
    /* chunk 0 misses: bitmap 01 + 16 + 16 bits = 34 bits -> 5 >= 4: raw */
    {"miss -> raw",
     4,
     2,
     {0xFF, 0xFF, 0, 0},
     {0xAB, 0xCD, 0, 0},
     {0xAA, 0xCD, 0x12, 0x34},
     4,
     0,
     {0}},
    /* mask 0x0F, bitval 0x05: chunk 0 fits, its high nibbles 7 8 9 a give
     * 0xA987; chunk 1 misses (0x46): all 32 bits 0x46352515.
     * 1 | 0xA987 << 2 | 0x46352515 << 18 = 50 bits -> 7 bytes < 8 */
    {"nibble mask",
     8,
     4,
     {0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F},
     {5, 5, 5, 5, 5, 5, 5, 5},
     {0x75, 0x85, 0x95, 0xA5, 0x15, 0x25, 0x35, 0x46},
     7,
     1,
     {0x1D, 0xA6, 0x56, 0x94, 0xD4, 0x18, 0x01}},
    /* all mask, tensor == bitval: 8 one-byte chunks, bitmap ff only */
    {"only the bitmap",
     8,
     1,
     {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF},
     {1, 2, 3, 4, 5, 6, 7, 8},
     {1, 2, 3, 4, 5, 6, 7, 8},
     1,
     1,
     {0xFF}},
    /* 3 chunks of 2,2,1 bytes (last partial); all fit except chunk 1 (bytes
     * 2-3 = 01 02): bitmap 101, then chunk 1's 16 bits 0x0201.
     * 5 | 0x0201 << 3 = 19 bits -> 3 bytes < 5 */
    {"partial last chunk",
     5,
     2,
     {0xFF, 0xFF, 0xFF, 0xFF, 0xFF},
     {0, 0, 0, 0, 9},
     {0, 0, 1, 2, 9},
     3,
     1,
     {0x0D, 0x10, 0x00}},
    /* R = 1 can never compress (1 bitmap bit -> 1 byte) */
    {"R=1", 1, 8, {0xFF}, {0x42}, {0x42}, 1, 0, {0}},
};

static void check_vector(const vector *v) {
  test_case("vector '%s'", v->what);
  fixture f;
  fixture_init(&f, v->R, v->c);
  memcpy(f.mask, v->mask, v->R);
  memcpy(f.bitval, v->bitval, v->R);
  fixture_commit(&f);
  uint8_t ref_slot[8], lib_slot[8], out[8];
  int ref_comp, lib_comp;
  CHECK_U64(ref_store(&f.ref, v->tensor, ref_slot, &ref_comp), v->stored);
  CHECK_U64(ref_comp, v->compressed);
  CHECK_U64(ibp_compress_tensor(&f.lib, v->tensor, lib_slot, &lib_comp),
            v->stored);
  CHECK_U64(lib_comp, v->compressed);
  const uint8_t *want = v->compressed ? v->stream : v->tensor;
  CHECK_MEM(ref_slot, want, v->stored, "reference stored form");
  CHECK_MEM(lib_slot, want, v->stored, "library stored form");
  if (v->compressed) {
    size_t len;
    CHECK(ref_decode(&f.ref, v->stream, v->stored, out, &len) == 0);
    CHECK_MEM(out, v->tensor, v->R, "reference decode");
    CHECK_OK(ibp_decompress_tensor(&f.lib, v->stream, v->stored, 1, out));
    CHECK_MEM(out, v->tensor, v->R, "library decode");
    /* one byte short: both decoders must call it corrupt */
    CHECK(ref_decode(&f.ref, v->stream, v->stored - 1, out, &len) != 0);
    CHECK_STATUS(
        ibp_decompress_tensor(&f.lib, v->stream, v->stored - 1, 1, out),
        IBP_ERR_CORRUPT);
  }
  fixture_free(&f);
}

/* The "nibble mask" stream with a padding bit set, and streams whose length
 * reaches R, are corrupt. */
static void check_corrupt_vectors(void) {
  const vector *v = &vectors[4]; /* "nibble mask" */
  test_case("corrupt variants of '%s'", v->what);
  CHECK(strcmp(v->what, "nibble mask") == 0);
  fixture f;
  fixture_init(&f, v->R, v->c);
  memcpy(f.mask, v->mask, v->R);
  memcpy(f.bitval, v->bitval, v->R);
  fixture_commit(&f);
  uint8_t s[8], out[8];
  memcpy(s, v->stream, 7);
  s[6] |= 0x04; /* bit 50: padding */
  CHECK(ref_decode(&f.ref, s, 7, out, NULL) != 0);
  CHECK_STATUS(ibp_decompress_tensor(&f.lib, s, 7, 1, out), IBP_ERR_CORRUPT);
  size_t len;
  CHECK_STATUS(ibp_compressed_length(&f.lib, s, 7, &len), IBP_ERR_CORRUPT);
  memcpy(s, v->stream, 7);
  s[0] &= 0xFE; /* chunk 0 no longer fits: 2 + 32 + 32 bits = 9 bytes */
  s[7] = 0;
  CHECK(ref_decode(&f.ref, s, 8, out, NULL) != 0);
  CHECK_STATUS(ibp_decompress_tensor(&f.lib, s, 8, 1, out), IBP_ERR_CORRUPT);
  fixture_free(&f);
}

int main(void) {
  test_begin("test_vectors", 1);
  for (size_t i = 0; i < sizeof vectors / sizeof *vectors; i++)
    check_vector(&vectors[i]);
  check_corrupt_vectors();
  return test_end();
}
