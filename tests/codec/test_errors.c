/*
 * Status strings and argument checking:
 *   - every ibp_status has a distinct name (its identifier) and a distinct
 *     message; unknown values give "IBP_ERR_UNKNOWN" and a non-NULL message;
 *   - the chunk-width list (ibp/chunk_widths.h): the format's widths,
 *     ascending, its message texts match it, the codec accepts exactly it;
 *   - invalid arguments (R = 0, R > 1 MiB, chunk 3, threshold 0.4 / 1.1,
 *     bad sampling, NULL pointers, no tensors) return the documented errors.
 * All mismatches are listed before the test fails.  Deterministic.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibp/container.h"
#include "test_util.h"

static int failures;

static void expect(const char *expr, int line, ibp_status got,
                   ibp_status want) {
  if (got == want)
    return;
  fprintf(stderr, "test_errors.c:%d: %s: got %s, want %s\n", line, expr,
          ibp_status_name(got), ibp_status_name(want));
  failures++;
}

#define EXPECT(expr, want) expect(#expr, __LINE__, (expr), (want))

/* Either of two statuses is acceptable. */
static void expect2(const char *expr, int line, ibp_status got, ibp_status a,
                    ibp_status b) {
  expect(expr, line, got, got == b ? b : a);
}

#define EXPECT2(expr, a, b) expect2(#expr, __LINE__, (expr), (a), (b))

/* ---- status strings ------------------------------------------------------ */

static const struct {
  const char *name;
  ibp_status value;
} statuses[] = {
#define STATUS_ROW_(name, value, msg) {#name, name},
    IBP_STATUS_LIST(STATUS_ROW_)
#undef STATUS_ROW_
};
#define NSTATUS (sizeof statuses / sizeof *statuses)

static void check_status_strings(void) {
  for (size_t i = 0; i < NSTATUS; i++) {
    const char *name = ibp_status_name(statuses[i].value);
    const char *msg = ibp_status_message(statuses[i].value);
    CHECKF(name && strcmp(name, statuses[i].name) == 0, "name of %s is %s",
           statuses[i].name, name ? name : "NULL");
    CHECKF(msg && *msg, "message of %s is empty", statuses[i].name);
    CHECKF((int)statuses[i].value == (int)i, "%s has value %d, listed %zu",
           statuses[i].name, (int)statuses[i].value, i);
    for (size_t j = 0; j < i; j++) {
      CHECKF(strcmp(msg, ibp_status_message(statuses[j].value)) != 0,
             "%s and %s share a message", statuses[i].name, statuses[j].name);
      CHECK(strcmp(name, ibp_status_name(statuses[j].value)) != 0);
    }
  }
  CHECK(strcmp(ibp_status_name((ibp_status)NSTATUS), "IBP_ERR_UNKNOWN") == 0);
  CHECK(strcmp(ibp_status_name((ibp_status)-1), "IBP_ERR_UNKNOWN") == 0);
  CHECK(ibp_status_message((ibp_status)999) != NULL);
  CHECK(strcmp(ibp_impl_name(IBP_IMPL_AUTO), "auto") == 0);
  CHECK(strcmp(ibp_impl_name(IBP_IMPL_PORTABLE), "portable") == 0);
  CHECK(strcmp(ibp_impl_name(IBP_IMPL_BMI2), "bmi2") == 0);
}

/* ---- chunk widths -------------------------------------------------------- */

/* The list (ibp/chunk_widths.h) is the format's: exactly the widths that
 * divide a 64-bit word (docs/FORMAT.md), ascending; its message texts are
 * the list in words; the codec accepts exactly its widths. */
static void check_chunk_widths(void) {
  char text[64] = "", commas[64] = "", bars[64] = "auto";
  unsigned n = IBP_CHUNK_WIDTH_COUNT;
  for (unsigned i = 0; i < n; i++) {
    uint32_t c = ibp_chunk_width(i);
    char word[16];
    snprintf(word, sizeof word, "%u", c);
    CHECKF(ibp_chunk_width_index(c) == (int)i, "index of %u is %d, not %u", c,
           ibp_chunk_width_index(c), i);
    CHECK(i == 0 || c > ibp_chunk_width(i - 1));
    strcat(text, i == 0 ? "" : i + 1 < n ? ", " : " or ");
    strcat(text, word);
    strcat(commas, i == 0 ? "" : ", ");
    strcat(commas, word);
    strcat(bars, "|");
    strcat(bars, word);
  }
  CHECK(ibp_chunk_width(n - 1) == IBP_CHUNK_WIDTH_MAX);
  CHECK(ibp_chunk_width(n) == 0);
  CHECKF(strcmp(text, IBP_CHUNK_WIDTHS_TEXT) == 0,
         "IBP_CHUNK_WIDTHS_TEXT is \"%s\", the list says \"%s\"",
         IBP_CHUNK_WIDTHS_TEXT, text);
  CHECKF(strcmp(commas, IBP_CHUNK_WIDTHS_COMMAS) == 0,
         "IBP_CHUNK_WIDTHS_COMMAS is \"%s\", the list says \"%s\"",
         IBP_CHUNK_WIDTHS_COMMAS, commas);
  CHECK(strcmp(bars, IBP_CHUNK_WIDTHS_AUTO_BARS) == 0);
  CHECK(strstr(ibp_status_message(IBP_ERR_CHUNK_BYTES), text) != NULL);

  uint8_t mask[16] = {0}, bitval[16] = {0};
  for (uint32_t c = 0; c <= 2 * IBP_CHUNK_WIDTH_MAX; c++) {
    int format = c >= 1 && c <= 8 && 8 % c == 0;
    CHECKF(ibp_chunk_width_valid(c) == format, "width %u: valid %d", c,
           ibp_chunk_width_valid(c));
    CHECK((ibp_chunk_width_index(c) >= 0) == format);
    ibp_params p = {0};
    EXPECT(ibp_params_from_masks(16, c, mask, bitval, &p),
           format ? IBP_OK : IBP_ERR_CHUNK_BYTES);
    ibp_params_free(&p);
  }
}

/* ---- statistics and params ----------------------------------------------- */

static void check_bitstats_args(void) {
  ibp_bitstats st = {0};
  uint8_t data[64] = {0};
  EXPECT(ibp_bitstats_init(&st, 0), IBP_ERR_TENSOR_BYTES);
  EXPECT(ibp_bitstats_init(&st, IBP_MAX_TENSOR_BYTES + 1),
         IBP_ERR_TENSOR_BYTES);
  EXPECT(ibp_bitstats_init(&st, UINT32_MAX), IBP_ERR_TENSOR_BYTES);
  EXPECT(ibp_bitstats_init(NULL, 8), IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_bitstats_init(&st, IBP_MAX_TENSOR_BYTES), IBP_OK);
  ibp_bitstats_free(&st);
  EXPECT(ibp_bitstats_init(&st, 8), IBP_OK);
  ibp_sampling s = {0};
  EXPECT(ibp_bitstats_add(NULL, data, 8, &s, 1), IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_bitstats_add(&st, NULL, 8, &s, 1), IBP_ERR_INVALID_ARGUMENT);
  s.fraction = 1.5;
  EXPECT(ibp_bitstats_add(&st, data, 8, &s, 1), IBP_ERR_SAMPLE);
  s.fraction = -0.5;
  EXPECT(ibp_bitstats_add(&st, data, 8, &s, 1), IBP_ERR_SAMPLE);
  s.fraction = NAN;
  EXPECT(ibp_bitstats_add(&st, data, 8, &s, 1), IBP_ERR_SAMPLE);
  CHECK_U64(st.tensors, 0);

  ibp_params p = {0};
  EXPECT(ibp_params_build(&st, 0.9, 1, &p), IBP_ERR_NO_TENSORS);
  s.fraction = 0;
  EXPECT(ibp_bitstats_add(&st, data, 8, &s, 1), IBP_OK);
  EXPECT(ibp_params_build(&st, 0.4, 1, &p), IBP_ERR_THRESHOLD);
  EXPECT(ibp_params_build(&st, 1.1, 1, &p), IBP_ERR_THRESHOLD);
  EXPECT(ibp_params_build(&st, 0.499999, 1, &p), IBP_ERR_THRESHOLD);
  EXPECT(ibp_params_build(&st, NAN, 1, &p), IBP_ERR_THRESHOLD);
  EXPECT(ibp_params_build(&st, 0.9, 3, &p), IBP_ERR_CHUNK_BYTES);
  EXPECT(ibp_params_build(&st, 0.9, 0, &p), IBP_ERR_CHUNK_BYTES);
  EXPECT(ibp_params_build(&st, 0.9, 16, &p), IBP_ERR_CHUNK_BYTES);
  EXPECT(ibp_params_build(NULL, 0.9, 1, &p), IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_params_build(&st, 0.9, 1, NULL), IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_params_build(&st, 0.5, 8, &p), IBP_OK);
  ibp_params_free(&p);
  EXPECT(ibp_params_build(&st, 1.0, 2, &p), IBP_OK);
  ibp_params_free(&p);
  ibp_bitstats_free(&st);
  ibp_bitstats_free(&st);
  ibp_bitstats zero = {0};
  ibp_bitstats_free(&zero);
}

static void check_params_args(void) {
  uint8_t mask[16], bitval[16];
  memset(mask, 0x0F, sizeof mask);
  memset(bitval, 0xFF, sizeof bitval);
  ibp_params p = {0};
  EXPECT(ibp_params_from_masks(0, 1, mask, bitval, &p), IBP_ERR_TENSOR_BYTES);
  EXPECT(ibp_params_from_masks(IBP_MAX_TENSOR_BYTES + 1, 1, mask, bitval, &p),
         IBP_ERR_TENSOR_BYTES);
  EXPECT(ibp_params_from_masks(16, 3, mask, bitval, &p), IBP_ERR_CHUNK_BYTES);
  EXPECT(ibp_params_from_masks(16, 1, NULL, bitval, &p),
         IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_params_from_masks(16, 1, mask, NULL, &p),
         IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_params_from_masks(16, 1, mask, bitval, NULL),
         IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_params_from_masks(16, 4, mask, bitval, &p), IBP_OK);
  for (int i = 0; i < 16; i++) /* bitval is ANDed with the mask */
    CHECK(p.bitval[i] == 0x0F && p.mask[i] == 0x0F);
  EXPECT(ibp_params_check(&p), IBP_OK);
  p.bitval[3] = 0x10; /* outside the mask */
  CHECK(ibp_params_check(&p) != IBP_OK);
  p.bitval[3] = 0x0F;
  p.chunk_bytes = 3;
  EXPECT(ibp_params_check(&p), IBP_ERR_CHUNK_BYTES);
  p.chunk_bytes = 4;
  p.tensor_bytes = 0;
  EXPECT(ibp_params_check(&p), IBP_ERR_TENSOR_BYTES);
  p.tensor_bytes = 16;
  uint8_t *saved = p.mask;
  p.mask = NULL;
  EXPECT(ibp_params_check(&p), IBP_ERR_INVALID_ARGUMENT);
  p.mask = saved;
  EXPECT(ibp_params_check(NULL), IBP_ERR_INVALID_ARGUMENT);
  ibp_params_free(&p);
  ibp_params_free(&p);
  ibp_params_free(&(ibp_params){0});
}

static void check_search_args(void) {
  uint8_t data[256] = {0};
  ibp_params p = {0};
  ibp_search_options o = {0};
  o.threshold = -1;
  EXPECT(ibp_search(data, 0, 16, &o, &p, NULL), IBP_ERR_NO_TENSORS);
  EXPECT(ibp_search(data, 16, 0, &o, &p, NULL), IBP_ERR_TENSOR_BYTES);
  EXPECT(ibp_search(data, 1, IBP_MAX_TENSOR_BYTES + 1, &o, &p, NULL),
         IBP_ERR_TENSOR_BYTES);
  EXPECT(ibp_search(NULL, 16, 16, &o, &p, NULL), IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_search(data, 16, 16, &o, NULL, NULL), IBP_ERR_INVALID_ARGUMENT);
  o.chunk_bytes = 3;
  EXPECT(ibp_search(data, 16, 16, &o, &p, NULL), IBP_ERR_CHUNK_BYTES);
  o.chunk_bytes = 0;
  o.threshold = 0.4;
  EXPECT(ibp_search(data, 16, 16, &o, &p, NULL), IBP_ERR_THRESHOLD);
  o.threshold = 1.1;
  EXPECT(ibp_search(data, 16, 16, &o, &p, NULL), IBP_ERR_THRESHOLD);
  o.threshold = -1;
  o.sampling.fraction = 2.0;
  EXPECT(ibp_search(data, 16, 16, &o, &p, NULL), IBP_ERR_SAMPLE);
  o.sampling.fraction = 0;
  EXPECT(ibp_search(data, 16, 16, &o, &p, NULL), IBP_OK);
  ibp_params_free(&p);
}

/* ---- tensors, regions, containers ---------------------------------------- */

static void check_codec_args(void) {
  uint8_t mask[16] = {0}, buf[64] = {0}, slots[64], flags[8] = {0};
  ibp_params p = {0};
  EXPECT(ibp_params_from_masks(16, 1, mask, mask, &p), IBP_OK);
  size_t len;
  EXPECT(ibp_decompress_tensor(NULL, buf, 16, 1, buf),
         IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_decompress_tensor(&p, NULL, 16, 1, buf), IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_decompress_tensor(&p, buf, 16, 1, NULL), IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_compressed_length(&p, buf, 16, NULL), IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_compressed_length(NULL, buf, 16, &len), IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_decompress_tensor_part(&p, buf, 16, 0, 17, 0, buf), IBP_ERR_RANGE);
  EXPECT(ibp_decompress_tensor_part(NULL, buf, 16, 0, 0, 1, buf),
         IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_compress_region(&p, NULL, 64, slots, flags, 1, NULL),
         IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_compress_region(&p, buf, 64, NULL, flags, 1, NULL),
         IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_compress_region(&p, buf, 64, slots, NULL, 1, NULL),
         IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_compress_region(NULL, buf, 64, slots, flags, 1, NULL),
         IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_decompress_range(NULL, 0, 1, buf), IBP_ERR_INVALID_ARGUMENT);
  ibp_region r = {&p, NULL, 64, flags};
  EXPECT(ibp_decompress_range(&r, 0, 1, buf), IBP_ERR_INVALID_ARGUMENT);
  ibp_params_free(&p);
  EXPECT2(ibp_impl_select((ibp_impl)7), IBP_ERR_INVALID_ARGUMENT,
          IBP_ERR_UNSUPPORTED);
  CHECK(!ibp_impl_available((ibp_impl)7));
}

static int discard(void *ctx, uint64_t off, const void *buf, size_t len) {
  (void)ctx, (void)off, (void)buf, (void)len;
  return 0;
}

static void check_container_args(void) {
  uint8_t mask[16] = {0}, buf[256] = {0};
  ibp_params p = {0};
  ibp_container_info info;
  EXPECT(ibp_params_from_masks(16, 1, mask, mask, &p), IBP_OK);
  EXPECT(ibp_container_write(NULL, buf, 64, 1, discard, NULL, NULL),
         IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_container_write(&p, NULL, 64, 1, discard, NULL, NULL),
         IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_container_write(&p, buf, 64, 1, NULL, NULL, NULL),
         IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_container_read_info(NULL, 256, &info), IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_container_read_info(buf, 256, NULL), IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_container_read_info(buf, 256, &info), IBP_ERR_BAD_MAGIC);
  EXPECT(ibp_container_decode(NULL, 256, NULL, NULL), IBP_ERR_INVALID_ARGUMENT);
  EXPECT(ibp_container_decode(buf, 256, NULL, NULL), IBP_ERR_BAD_MAGIC);
  memcpy(buf, IBP_CONTAINER_MAGIC, 8);
  EXPECT2(ibp_container_read_info(buf, 0, &info), IBP_ERR_TRUNCATED,
          IBP_ERR_BAD_MAGIC);
  EXPECT(ibp_container_read_info(buf, 100, &info), IBP_ERR_TRUNCATED);
  EXPECT(ibp_container_decode(buf, 100, NULL, NULL), IBP_ERR_TRUNCATED);
  ibp_params_free(&p);
}

int main(void) {
  test_begin("test_errors", 1);
  check_status_strings();
  check_chunk_widths();
  check_bitstats_args();
  check_params_args();
  check_search_args();
  check_codec_args();
  check_container_args();
  CHECKF(failures == 0, "%d argument checks returned the wrong status",
         failures);
  return test_end();
}
