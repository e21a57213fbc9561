/* Unit tests of profile/ (device cost profiles).  Usage:
 *   test_profile builtin|roundtrip|errors|load|model|locale
 *   test_profile decoder SOURCE_DIR
 * (one CTest test each; `locale` exits 77 where no locale with a decimal
 * comma is installed; `decoder` loads the profile files of the source
 * tree). */
#include <dirent.h>

#include "profile/profile.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      failures++;                                                              \
    }                                                                          \
  } while (0)

/* The parameters, for loops over every field. */
typedef struct param {
  const char *key, *unit;
  double lo, hi;
  size_t offset;
} param;

static const param params[] = {
#define IBP_PROFILE_PARAM(key, unit, lo, hi, what)                             \
  {#key, unit, lo, hi, offsetof(ibp_profile, key)},
#include "profile/profile.def"
#undef IBP_PROFILE_PARAM
};
#define PARAM_COUNT (sizeof params / sizeof params[0])

static double *field(ibp_profile *p, size_t i) {
  return (double *)(void *)((char *)p + params[i].offset);
}

static int is_whole(const param *d) {
  return d->unit[0] == '\0' || strcmp(d->unit, "B") == 0;
}

/* Same name, decoder build and bit-identical values. */
static int same_profile(const ibp_profile *a, const ibp_profile *b) {
  if (strcmp(a->name, b->name) != 0 ||
      strcmp(a->decoder_build, b->decoder_build) != 0)
    return 0;
  for (size_t i = 0; i < PARAM_COUNT; i++) {
    double x = *field((ibp_profile *)a, i), y = *field((ibp_profile *)b, i);
    if (memcmp(&x, &y, sizeof x) != 0)
      return 0;
  }
  return 1;
}

static char *format_alloc(const ibp_profile *p) {
  size_t n = ibp_profile_format(p, NULL, 0);
  char *buf = malloc(n + 1);
  if (buf == NULL)
    abort();
  CHECK(ibp_profile_format(p, buf, n + 1) == n);
  CHECK(strlen(buf) == n);
  return buf;
}

static ibp_profile must_load(const char *spec) {
  ibp_profile p;
  char err[256];
  if (ibp_profile_load(spec, &p, err, sizeof err) != 0) {
    fprintf(stderr, "load %s: %s\n", spec, err);
    failures++;
  }
  return p;
}

/* ---- the built-ins ------------------------------------------------------- */

static void test_builtin(void) {
  const char *const *names = ibp_profile_builtin_names();
  CHECK(names[0] != NULL && strcmp(names[0], "a100-pcie4") == 0);
  CHECK(names[1] != NULL && strcmp(names[1], "h100-pcie5") == 0);
  CHECK(names[2] == NULL);
  CHECK(ibp_profile_builtin_text("a100") == NULL);
  CHECK(ibp_profile_builtin_text(NULL) == NULL);
  for (int i = 0; names[i] != NULL; i++) {
    const char *text = ibp_profile_builtin_text(names[i]);
    ibp_profile p;
    char err[256];
    CHECK(text != NULL);
    int rc =
        ibp_profile_parse(text, strlen(text), names[i], &p, err, sizeof err);
    if (rc != 0)
      fprintf(stderr, "built-in %s: %s\n", names[i], err);
    CHECK(rc == 0 && strcmp(p.name, names[i]) == 0);
    /* The decode terms of every built-in were measured with the kernel
     * before its decode plan (docs/PROFILE.md). */
    CHECK(rc == 0 && strcmp(p.decoder_build, "word-pdep") == 0);
    /* An H200 timed the exponent stage's decode with decode-plan-4: its
     * terms are measured for that build alone (docs/PROFILE.md). */
    CHECK(rc == 0 && strcmp(p.stage_decoder_build, "decode-plan-4") == 0);
    CHECK(rc == 0 && ibp_profile_stage_measured(&p, "decode-plan-4"));
    CHECK(rc == 0 && !ibp_profile_stage_measured(&p, "word-pdep"));
    /* Every value comes right after a comment (its source, or an
     * ASSUMPTION and the reasoning), and so does the decoder build. */
    for (size_t k = 0; k <= PARAM_COUNT; k++) {
      char key[64];
      snprintf(key, sizeof key,
               "\n%s = ", k < PARAM_COUNT ? params[k].key : "decoder_build");
      const char *at = strstr(text, key);
      CHECK(at != NULL && at > text);
      const char *prev = at;
      while (at != NULL && prev > text && prev[-1] != '\n')
        prev--;
      CHECK(at != NULL && prev[0] == '#');
    }
  }
  ibp_profile a = must_load("a100-pcie4");
  CHECK(a.ce_h2d_gbps == 25.5 && a.ce_d2h_gbps == 25.5 && a.ce_setup_us == 1.0);
  CHECK(a.runtime_call_us == 0.3 && a.driver_copy_call_us == 2.2);
  CHECK(a.driver_launch_call_us == 2.5 && a.driver_call_us == 0.5);
  CHECK(a.launch_latency_us == 3.0 && a.sm_h2d_gbps == 25.0);
  CHECK(a.sm_read_rtt_us == 1.5 && a.sm_inflight_bytes == 32768);
  CHECK(a.sector_bytes == 32 && a.dram_gbps == 1555);
  CHECK(a.decode_gbps_per_sm == 2.26 && a.decode_tensor_us == 0.135);
  CHECK(a.decode_h2d_gbps == 14.1 && a.sms == 108);
  ibp_profile h = must_load("h100-pcie5");
  CHECK(h.ce_h2d_gbps == 55 && h.ce_d2h_gbps == 55 && h.ce_setup_us == 1.0);
  CHECK(h.runtime_call_us == 0.3 && h.driver_copy_call_us == 2.2);
  CHECK(h.driver_launch_call_us == 2.5 && h.driver_call_us == 0.5);
  CHECK(h.launch_latency_us == 3.0 && h.sm_h2d_gbps == 35);
  CHECK(h.sm_read_rtt_us == 1.2 && h.sm_inflight_bytes == 32768);
  CHECK(h.sector_bytes == 32 && h.dram_gbps == 2000);
  CHECK(h.decode_gbps_per_sm == 3.17 && h.decode_tensor_us == 0.096);
  CHECK(h.decode_h2d_gbps == 28.8 && h.sms == 114);
}

/* ---- format -> parse ----------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static double uniform01(void) {
  return (double)(rng() >> 11) * 0x1.0p-53;
}

/* A valid value of parameter d: an edge, uniform, or log-uniform. */
static double random_value(const param *d) {
  double v;
  switch (rng() % 4) {
  case 0:
    v = rng() % 2 ? d->lo : d->hi;
    break;
  case 1:
    v = d->lo + uniform01() * (d->hi - d->lo);
    break;
  default: {
    double lo = d->lo > 0 ? d->lo : 1e-3;
    v = lo * pow(d->hi / lo, uniform01());
  }
  }
  if (is_whole(d))
    v = floor(v);
  if (v < d->lo)
    v = d->lo;
  if (v > d->hi)
    v = d->hi;
  return v;
}

/* 1..63 printable characters, no spaces, no '#'. */
static void random_name(char *out) {
  size_t n = 1 + rng() % (IBP_PROFILE_NAME_MAX - 1);
  for (size_t i = 0; i < n; i++) {
    char c;
    do
      c = (char)(0x21 + rng() % 94);
    while (c == '#');
    out[i] = c;
  }
}

static ibp_profile random_profile(void) {
  ibp_profile p;
  memset(&p, 0, sizeof p);
  random_name(p.name);
  random_name(p.decoder_build);
  for (size_t i = 0; i < PARAM_COUNT; i++)
    *field(&p, i) = random_value(&params[i]);
  return p;
}

static void check_roundtrip(const ibp_profile *p) {
  char *text = format_alloc(p);
  ibp_profile q;
  char err[256];
  int rc =
      ibp_profile_parse(text, strlen(text), "formatted", &q, err, sizeof err);
  if (rc != 0)
    fprintf(stderr, "%s\n--- %s\n", text, err);
  CHECK(rc == 0 && same_profile(p, &q));
  char *again = format_alloc(&q);
  CHECK(strcmp(text, again) == 0);
  free(again);
  free(text);
}

static void test_roundtrip(void) {
  for (const char *const *n = ibp_profile_builtin_names(); *n; n++) {
    ibp_profile p = must_load(*n);
    check_roundtrip(&p);
    char *text = format_alloc(&p);
    /* Every parameter is written with its unit. */
    CHECK(strstr(text, "# GB/s: copy-engine host-to-device") != NULL);
    CHECK(strstr(text, "\nce_h2d_gbps = 25.5\n") != NULL ||
          strstr(text, "\nce_h2d_gbps = 55\n") != NULL);
    CHECK(strstr(text, "\nruntime_call_us = 0.3\n") != NULL);
    CHECK(strstr(text, "\nsm_inflight_bytes = 32768\n") != NULL);
    CHECK(strstr(text, "# count: streaming multiprocessors\n") != NULL);
    CHECK(strstr(text, "\ndecoder_build = word-pdep\n") != NULL);
    /* Cut short: a prefix, NUL-terminated, and the full length. */
    size_t n_full = strlen(text);
    char small[17];
    memset(small, 'x', sizeof small);
    CHECK(ibp_profile_format(&p, small, sizeof small) == n_full);
    CHECK(small[16] == '\0' && memcmp(small, text, 16) == 0);
    CHECK(ibp_profile_format(&p, small, 1) == n_full && small[0] == '\0');
    free(text);
  }
  int iterations = 5000;
  const char *env = getenv("IBP_TEST_ITERATIONS");
  if (env != NULL && atoi(env) > 0)
    iterations = atoi(env);
  for (int i = 0; i < iterations; i++) {
    ibp_profile p = random_profile();
    check_roundtrip(&p);
  }
  /* Values needing 17 digits. */
  ibp_profile p = must_load("a100-pcie4");
  p.ce_h2d_gbps = nextafter(25.5, 30);
  p.sm_read_rtt_us = 0.1 + 0.2;
  p.ce_setup_us = 5e-324; /* subnormal, within [0, 1000] */
  check_roundtrip(&p);
}

/* ---- errors -------------------------------------------------------------- */

static char *base_text; /* a100-pcie4, formatted */

/* Line number (from 1) of the first `from` in base_text. */
static int line_of(const char *from) {
  const char *at = strstr(base_text, from);
  int line = 1;
  for (const char *s = base_text; at != NULL && s < at; s++)
    line += *s == '\n';
  return line;
}

/* Parses base_text with the first `from` replaced by `to` (len: bytes of
 * `to`, for NUL bytes) and checks -1 with the message "t:LINE: <want>",
 * LINE being the replaced line's plus `delta` (delta < 0: no line). */
static void expect_error_n(const char *from, const char *to, size_t len,
                           int delta, const char *want) {
  const char *at = strstr(base_text, from);
  if (at == NULL) {
    fprintf(stderr, "no '%s' in the base text\n", from);
    failures++;
    return;
  }
  size_t head = (size_t)(at - base_text), from_n = strlen(from);
  size_t total = head + len + strlen(at + from_n);
  char *text = malloc(total + 1);
  memcpy(text, base_text, head);
  memcpy(text + head, to, len);
  strcpy(text + head + len, at + from_n);
  char expect[512], err[512];
  if (delta >= 0)
    snprintf(expect, sizeof expect, "t:%d: %s", line_of(from) + delta, want);
  else
    snprintf(expect, sizeof expect, "t: %s", want);
  ibp_profile p;
  int rc = ibp_profile_parse(text, total, "t", &p, err, sizeof err);
  if (rc != -1 || strcmp(err, expect) != 0) {
    fprintf(stderr, "'%s' -> '%s': rc %d, message\n  %s\nexpected\n  %s\n",
            from, to, rc, err, expect);
    failures++;
  }
  free(text);
}

static void expect_error(const char *from, const char *to, const char *want) {
  expect_error_n(from, to, strlen(to), 0, want);
}

/* The error on the line `delta` lines after the replaced one. */
static void expect_error_after(const char *from, const char *to, int delta,
                               const char *want) {
  expect_error_n(from, to, strlen(to), delta, want);
}

static void test_errors(void) {
  ibp_profile a = must_load("a100-pcie4");
  base_text = format_alloc(&a);
  /* keys */
  expect_error_after("sms = 108\n", "sms = 108\nfoo = 1\n", 1,
                     "foo: unknown key");
  expect_error_after("sms = 108\n", "sms = 108\nSMS = 1\n", 1,
                     "SMS: unknown key");
  char want[128];
  snprintf(want, sizeof want, "ce_h2d_gbps: repeated (first given on line %d)",
           line_of("ce_h2d_gbps = 25.5\n"));
  expect_error_after("ce_h2d_gbps = 25.5\n",
                     "ce_h2d_gbps = 25.5\nce_h2d_gbps = 1\n", 1, want);
  expect_error_after("name = a100", "name = x\nname = a100", 1,
                     "name: repeated (first given on line 2)");
  expect_error_n("sms = 108\n", "", 0, -1,
                 "sms: missing (a profile gives every parameter)");
  expect_error_n("name = a100-pcie4\n", "", 0, -1,
                 "name: missing (a profile gives every parameter)");
  expect_error_after("decoder_build = word-pdep",
                     "decoder_build = a\ndecoder_build = b", 1,
                     "decoder_build: repeated (first given on line 5)");
  expect_error("decoder_build = word-pdep", "decoder_build = plan 2",
               "decoder_build: 'plan 2' is not a name (1 to 63 printable "
               "characters, no spaces)");
  expect_error("decoder_build = word-pdep",
               "decoder_build =", "decoder_build: no value");
  expect_error("stage_decoder_build = decode-plan-4",
               "stage_decoder_build = a b",
               "stage_decoder_build: 'a b' is not a name (1 to 63 printable "
               "characters, no spaces)");
  /* the exponent stage's terms, like any other */
  expect_error_n("stage_tensor_us = 0\n", "", 0, -1,
                 "stage_tensor_us: missing (a profile gives every parameter)");
  expect_error_n("stage_decode_gbps_per_sm = 0.92\n", "", 0, -1,
                 "stage_decode_gbps_per_sm: missing (a profile gives every "
                 "parameter)");
  expect_error("stage_decode_gbps_per_sm = 0.92",
               "stage_decode_gbps_per_sm = 0.001",
               "stage_decode_gbps_per_sm: 0.001 is out of range [0.01, "
               "10000]");
  expect_error("stage_tensor_us = 0", "stage_tensor_us = 1001",
               "stage_tensor_us: 1001 is out of range [0, 1000]");
  expect_error("stage_tensor_us = 0", "stage_tensor_us = -0.5",
               "stage_tensor_us: -0.5 is out of range [0, 1000]");
  expect_error("sms = 108", "sms 108", "expected 'key = value'");
  expect_error("sms = 108", "= 108", "expected 'key = value' (no key)");
  expect_error("sms = 108", "sms =  # none", "sms: no value");
  expect_error("sms = 108", "s\001ms = 1",
               "s?ms: unknown key"); /* shown printable */
  /* numbers */
  static const char *const bad_numbers[] = {
      "1O8", "+108", "0x10", "inf", "nan", "1e",   ".",  "1 2",
      "1,5", "1.5.", "e5",   "--1", "1e+", "1e5x", "1_0"};
  for (size_t i = 0; i < sizeof bad_numbers / sizeof bad_numbers[0]; i++) {
    char to[64];
    snprintf(to, sizeof to, "sms = %s", bad_numbers[i]);
    snprintf(want, sizeof want, "sms: '%s' is not a decimal number",
             bad_numbers[i]);
    expect_error("sms = 108", to, want);
  }
  expect_error("sms = 108",
               "sms = 1234567890123456789012345678901234567890"
               "1234567890123456789012345",
               "sms: '1234567890123456789012345678901234567...' is not a "
               "decimal number");
  expect_error("sms = 108", "sms = 0", "sms: 0 is out of range [1, 4096]");
  expect_error("sms = 108", "sms = 4097",
               "sms: 4097 is out of range [1, 4096]");
  expect_error("sms = 108", "sms = 1.5", "sms: 1.5 is not a whole number");
  expect_error("sector_bytes = 32", "sector_bytes = 32.5",
               "sector_bytes: 32.5 is not a whole number");
  expect_error("ce_h2d_gbps = 25.5", "ce_h2d_gbps = 0.05",
               "ce_h2d_gbps: 0.05 is out of range [0.1, 10000]");
  expect_error("ce_h2d_gbps = 25.5", "ce_h2d_gbps = 1e400",
               "ce_h2d_gbps: 1e400 is out of range [0.1, 10000]");
  expect_error("ce_setup_us = 1", "ce_setup_us = -1",
               "ce_setup_us: -1 is out of range [0, 1000]");
  expect_error("ce_setup_us = 1", "ce_setup_us = 1e-400",
               "ce_setup_us: 1e-400 is out of range [0, 1000]");
  /* the name */
  expect_error("name = a100-pcie4", "name = a b",
               "name: 'a b' is not a name (1 to 63 printable characters, no "
               "spaces)");
  expect_error("name = a100-pcie4",
               "name = 0123456789012345678901234567890123456789"
               "012345678901234567890123",
               "name: '0123456789012345678901234567890123456...' is not a "
               "name (1 to 63 printable characters, no spaces)");
  expect_error("name = a100-pcie4", "name = \xc3\xa9",
               "name: '?\?' is not a name (1 to 63 printable characters, no "
               "spaces)");
  /* lines */
  expect_error_n("sms = 108",
                 "sms = 1\0"
                 "08",
                 10, 0, "NUL byte (not a text file)");
  char long_line[1100];
  memset(long_line, ' ', sizeof long_line);
  long_line[0] = '#';
  long_line[sizeof long_line - 1] = '\0';
  expect_error("# GB/s: copy-engine host-to-device", long_line,
               "line longer than 1024 bytes");

  /* Accepted: comments, blank lines, spaces, CRLF, a 1024-byte line,
   * a last line without '\n', and a name of 63 characters. */
  char text[8192];
  long_line[1024] = '\0';
  int n = snprintf(text, sizeof text, "%s\n  \t\r\n# c\nname=%s # tail\r\n%s",
                   long_line,
                   "012345678901234567890123456789012345678901234567890123"
                   "456789012",
                   strstr(base_text, "\n# GB/s: copy-engine host-to-device"));
  text[n - 1] = '\0'; /* no final '\n' */
  ibp_profile p;
  char err[256];
  int rc = ibp_profile_parse(text, (size_t)n - 1, "ok", &p, err, sizeof err);
  if (rc != 0)
    fprintf(stderr, "accepted text: %s\n", err);
  CHECK(rc == 0 && strlen(p.name) == 63 && p.sms == 108);
  /* Small or absent message buffers. */
  char tiny[8];
  CHECK(ibp_profile_parse("x", 1, "origin", &p, tiny, sizeof tiny) == -1);
  CHECK(strcmp(tiny, "origin:") == 0);
  CHECK(ibp_profile_parse("x", 1, "origin", &p, NULL, 0) == -1);
  CHECK(ibp_profile_parse("", 0, NULL, &p, err, sizeof err) == -1);
  CHECK(strcmp(err, "profile: name: missing (a profile gives every "
                    "parameter)") == 0);
  /* ce_batch_setup_us may be missing (a file written before it): then
   * ce_setup_us's value; given, its own; any other parameter missing is an
   * error */
  const char *entry = strstr(base_text, "\nce_batch_setup_us = ");
  const char *setup = strstr(base_text, "\nce_setup_us = ");
  CHECK(entry != NULL && setup != NULL);
  if (entry && setup) {
    const char *end = strchr(entry + 1, '\n');
    size_t head = (size_t)(entry - base_text);
    char *cut = malloc(strlen(base_text) + 1);
    memcpy(cut, base_text, head);
    strcpy(cut + head, end);
    char *one = strstr(cut, "\nce_setup_us = ") + strlen("\nce_setup_us = ");
    memcpy(one, "7.5", 3); /* "1.0" in the base text */
    CHECK(ibp_profile_parse(cut, strlen(cut), "t", &p, err, sizeof err) == 0);
    CHECK(p.ce_setup_us == 7.5 && p.ce_batch_setup_us == 7.5);
    CHECK(ibp_profile_parse(base_text, strlen(base_text), "t", &p, err,
                            sizeof err) == 0 &&
          p.ce_batch_setup_us == 1.0);
    free(cut);
  }
  expect_error_n("ce_setup_us = 1\n", "", 0, -1,
                 "ce_setup_us: missing (a profile gives every parameter)");
  free(base_text);
}

/* ---- loading files ------------------------------------------------------- */

static char dir[] = "/tmp/test_profile_XXXXXX";

static void write_file(const char *name, const char *data, size_t len) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

/* Loads dir/name (or spec itself when name is NULL) expecting -1 and a
 * message "SPEC: <want>". */
static void expect_load_error(const char *name, const char *spec,
                              const char *want) {
  char path[256], expect[512], err[512];
  if (name != NULL) {
    snprintf(path, sizeof path, "%s/%s", dir, name);
    spec = path;
  }
  snprintf(expect, sizeof expect, "%s: %s", spec, want);
  ibp_profile p;
  int rc = ibp_profile_load(spec, &p, err, sizeof err);
  if (rc != -1 || strcmp(err, expect) != 0) {
    fprintf(stderr, "load %s: rc %d, message\n  %s\nexpected\n  %s\n", spec, rc,
            err, expect);
    failures++;
  }
}

static void test_load(void) {
  alarm(60); /* a blocking open or read fails the test */
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    exit(1);
  }
  ibp_profile h = must_load("h100-pcie5");
  char *text = format_alloc(&h);
  size_t len = strlen(text);
  write_file("h.prof", text, len);
  char path[256];
  snprintf(path, sizeof path, "%s/h.prof", dir);
  ibp_profile p = must_load(path);
  CHECK(same_profile(&p, &h));

  /* Exactly IBP_PROFILE_FILE_MAX bytes is accepted, one more is not. */
  char *big = malloc(IBP_PROFILE_FILE_MAX + 2);
  memset(big, '\n', IBP_PROFILE_FILE_MAX + 2);
  memcpy(big, text, len);
  write_file("max.prof", big, IBP_PROFILE_FILE_MAX);
  snprintf(path, sizeof path, "%s/max.prof", dir);
  p = must_load(path);
  CHECK(same_profile(&p, &h));
  write_file("big.prof", big, IBP_PROFILE_FILE_MAX + 1);
  expect_load_error("big.prof", NULL, "larger than 65536 bytes");
  free(big);

  /* A NUL byte, a parse error: messages name the path and the line. */
  char *nul = strdup(text);
  *strstr(nul, "sms = 114") = '\0';
  write_file("nul.prof", nul, len);
  free(nul);
  snprintf(path, sizeof path, "%s/nul.prof", dir);
  int line = 1;
  for (const char *s = text; s < strstr(text, "sms = 114"); s++)
    line += *s == '\n';
  char want[128];
  snprintf(want, sizeof want, "%d: NUL byte (not a text file)", line);
  char expect[512], err[512];
  snprintf(expect, sizeof expect, "%s:%s", path, want);
  CHECK(ibp_profile_load(path, &p, err, sizeof err) == -1);
  CHECK(strcmp(err, expect) == 0);
  write_file("bad.prof", "name = x\nfoo = 1\n", 17);
  snprintf(path, sizeof path, "%s/bad.prof", dir);
  snprintf(expect, sizeof expect, "%s:2: foo: unknown key", path);
  CHECK(ibp_profile_load(path, &p, err, sizeof err) == -1);
  CHECK(strcmp(err, expect) == 0);

  /* Not regular files: refused without reading (or blocking). */
  expect_load_error("missing.prof", NULL,
                    "not a built-in profile, and cannot be opened: No such "
                    "file or directory");
  expect_load_error(NULL, dir, "not a regular file (a directory)");
  expect_load_error(NULL, "/dev/zero",
                    "not a regular file (a character device)");
  snprintf(path, sizeof path, "%s/fifo", dir);
  if (mkfifo(path, 0600) != 0) {
    perror("mkfifo");
    failures++;
  } else {
    expect_load_error("fifo", NULL, "not a regular file (a FIFO)");
  }
  CHECK(ibp_profile_load("", &p, err, sizeof err) == -1);
  CHECK(strcmp(err, "profile: empty name or path") == 0);
  CHECK(ibp_profile_load(NULL, &p, err, sizeof err) == -1);
  CHECK(strcmp(err, "profile: empty name or path") == 0);

  /* A built-in name wins over a file of that name. */
  write_file("a100-pcie4", text, len);
  if (chdir(dir) == 0) {
    p = must_load("a100-pcie4");
    CHECK(strcmp(p.name, "a100-pcie4") == 0 && p.sms == 108);
  }
  free(text);
  static const char *const files[] = {"h.prof",    "max.prof", "big.prof",
                                      "nul.prof",  "bad.prof", "fifo",
                                      "a100-pcie4"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  CHECK(chdir("/") == 0 && rmdir(dir) == 0);
}

/* ---- the model ----------------------------------------------------------- */

static int near(double got, double want) {
  int ok = fabs(got - want) <= 1e-12 * fabs(want) + 1e-12;
  if (!ok)
    fprintf(stderr, "got %.17g, want %.17g\n", got, want);
  return ok;
}

/* Every whole tensor of a GiB of 1 KiB tensors: a region the stage codes
 * throughout. */
#define ALL (UINT64_C(1) << 20)

/* The exponent stage's decode terms: a stage-coded copy costs its term
 * more than the plain one where the decode bounds it, nothing more
 * without stage-coded bytes; whether the stage pays. */
static void test_model_stage(void) {
  ibp_profile h = must_load("h100-pcie5");
  h.stage_decode_gbps_per_sm = 0.5;
  h.stage_tensor_us = 2;
  const uint64_t MiB = 1048576, GiB = 1024 * MiB;
  double term = ibp_profile_stage_us(&h, MiB, 1024, 114);
  CHECK(near(term, MiB / (0.5e3 * 114) + 1024 * 2.0 / 114));
  CHECK(ibp_profile_stage_us(&h, 0, 0, 114) == 0);
  CHECK(ibp_profile_stage_us(&h, MiB, 1024, 5000) == term); /* clamped */
  /* no host reads: the decode bounds the kernel, with or without */
  double plain = ibp_profile_decode_us(&h, 0, MiB, 1024, 114);
  double staged =
      ibp_profile_decode_staged_us(&h, 0, MiB, 1024, MiB, 1024, 114);
  CHECK(near(staged - plain, term));
  CHECK(near(ibp_profile_decode_staged_us(&h, 0, MiB, 1024, MiB, 1024, 7) -
                 ibp_profile_decode_us(&h, 0, MiB, 1024, 7),
             ibp_profile_stage_us(&h, MiB, 1024, 7)));
  /* without stage-coded bytes: the plain model, bit for bit */
  for (unsigned sms = 1; sms <= 114; sms += 17)
    CHECK(ibp_profile_decode_staged_us(&h, 3 * MiB, MiB, 1000, 0, 0, sms) ==
          ibp_profile_decode_us(&h, 3 * MiB, MiB, 1000, sms));
  /* a whole region's copy: link and decode, and each route's time */
  ibp_profile_region_cost c =
      ibp_profile_region_copy(&h, GiB, 1024, GiB / 2, 0, 32);
  CHECK(near(c.link_us, (GiB / 2) / 55e3));
  CHECK(near(c.decode_us, GiB / (3.17e3 * 114) + 1048576 * 0.096 / 114));
  CHECK(near(c.zerocopy_us,
             ibp_profile_decode_us(&h, GiB / 2, GiB, 1048576, 114)));
  CHECK(near(c.staged_us, ibp_profile_decode_us(&h, 0, GiB, 1048576, 32)));
  CHECK(near(ibp_profile_region_best_us(&c), c.staged_us));
  ibp_profile_region_cost cs =
      ibp_profile_region_copy(&h, GiB + 100, 1024, GiB / 2, ALL, 32);
  CHECK(near(cs.decode_us, (GiB + 100) / (3.17e3 * 114) +
                               1048577 * 0.096 / 114 +
                               ibp_profile_stage_us(&h, GiB, 1048576, 114)));
  CHECK(near(cs.staged_us, ibp_profile_decode_staged_us(
                               &h, 0, GiB + 100, 1048577, GiB, 1048576, 32)));
  /* the pick: a stage that stores 10 % fewer bytes pays where it decodes
   * fast, not where it decodes slowly, nor where it stores more */
  const uint64_t alone = GiB * 3 / 4, with = alone * 9 / 10;
  h.stage_decode_gbps_per_sm = 10000;
  h.stage_tensor_us = 0;
  CHECK(ibp_profile_stage_pays(&h, GiB, 1024, alone, with, ALL, 32) == 1);
  CHECK(ibp_profile_stage_pays(&h, GiB, 1024, alone, alone + 1, ALL, 32) == 0);
  CHECK(ibp_profile_stage_pays(&h, GiB, 1024, alone, 0, ALL, 32) == 0);
  h.stage_decode_gbps_per_sm = 0.01;
  CHECK(ibp_profile_stage_pays(&h, GiB, 1024, alone, with, ALL, 32) == 0);
  h.stage_decode_gbps_per_sm = 10000;
  h.stage_tensor_us = 100;
  CHECK(ibp_profile_stage_pays(&h, GiB, 1024, alone, with, ALL, 32) == 0);
}

/* The pick weighs each route as it runs, link and decode overlapped: on
 * h100-pcie5 with cnn_f32_to_bf16's figures (1 KiB tensors, IBP alone
 * 77.0 % of the bytes, the stage 71.9 %) the staged route's 32 SMs decode
 * the stage slower than the link brings the bytes, so the stage does not
 * pay; under a link a third as fast, the link bounds both and the stage's
 * fewer bytes win (the stage's decode added to the link's time would say
 * it does not: 42.1 + 11.2 ms > 45.1 + 3.9 ms per GiB). */
static void test_stage_pays_routes(void) {
  ibp_profile h = must_load("h100-pcie5");
  const uint64_t GiB = 1ull << 30;
  const uint64_t alone = GiB * 770 / 1000, with = GiB * 719 / 1000;
  CHECK(ibp_profile_stage_pays(&h, GiB, 1024, alone, with, ALL, 32) == 0);
  ibp_profile_region_cost s =
      ibp_profile_region_copy(&h, GiB, 1024, with, ALL, 32);
  CHECK(s.staged_us > ibp_profile_ce_copy_us(&h, with, 1)); /* decode-bound */
  /* with every SM on the staged route's decode it pays */
  CHECK(ibp_profile_stage_pays(&h, GiB, 1024, alone, with, ALL, 114) == 1);
  h.ce_h2d_gbps /= 3;
  CHECK(ibp_profile_stage_pays(&h, GiB, 1024, alone, with, ALL, 32) == 1);
  ibp_profile_region_cost a =
      ibp_profile_region_copy(&h, GiB, 1024, alone, 0, 32);
  s = ibp_profile_region_copy(&h, GiB, 1024, with, ALL, 32);
  CHECK(s.link_us + s.decode_us > a.link_us + a.decode_us);
  /* slower than the driver's copy of the raw bytes both ways: no gain */
  h = must_load("h100-pcie5");
  h.sm_h2d_gbps = h.decode_h2d_gbps = 10; /* zero-copy: read-bound */
  h.decode_gbps_per_sm = 0.3;             /* staged: decode-bound */
  h.stage_decode_gbps_per_sm = 10000;
  a = ibp_profile_region_copy(&h, GiB, 1024, alone, 0, 32);
  s = ibp_profile_region_copy(&h, GiB, 1024, with, ALL, 32);
  CHECK(ibp_profile_region_best_us(&s) < ibp_profile_region_best_us(&a));
  CHECK(ibp_profile_region_best_us(&s) > ibp_profile_ce_copy_us(&h, GiB, 1));
  CHECK(ibp_profile_stage_pays(&h, GiB, 1024, alone, with, ALL, 32) == 0);
}

/* The stage's decode is charged on the tensors it codes, IBP's on all
 * (kernels/ibp_decompress.cu runs decode_stage after a tensor's IBP
 * decode, in the same pass, only for a tensor of a cluster with a stage):
 * a GiB of 1 KiB tensors whose stage is on one cluster of a quarter of
 * them costs a quarter of the stage's term -- the file of 25 % weights and
 * 75 % random bits -- and one coded throughout costs what it did, the
 * whole term (before the charge per tensor, every region with the stage
 * was charged so). */
static void test_stage_charge_part(void) {
  ibp_profile h = must_load("h100-pcie5");
  h.stage_decode_gbps_per_sm = 5; /* the routes' decode-bound side */
  h.stage_tensor_us = 0.05;
  const uint64_t GiB = 1ull << 30, n = GiB / 1024, q = n / 4;
  const uint64_t alone = GiB * 9 / 10, with = GiB * 85 / 100;
  const ibp_profile_region_cost plain =
      ibp_profile_region_copy(&h, GiB, 1024, with, 0, 32);
  const ibp_profile_region_cost part =
      ibp_profile_region_copy(&h, GiB, 1024, with, q, 32);
  const ibp_profile_region_cost all =
      ibp_profile_region_copy(&h, GiB, 1024, with, n, 32);
  /* a quarter coded: the stage's term on that quarter, nothing else */
  CHECK(near(part.decode_us - plain.decode_us,
             ibp_profile_stage_us(&h, q * 1024, q, 114)));
  CHECK(near(part.decode_us - plain.decode_us,
             (all.decode_us - plain.decode_us) / 4));
  /* the staged route: the link's copy against that decode on 32 SMs, the
   * slower (the link here) */
  CHECK(near(part.staged_us, fmax(ibp_profile_ce_copy_us(&h, with, 1),
                                  ibp_profile_decode_staged_us(
                                      &h, 0, GiB, n, q * 1024, q, 32))));
  CHECK(near(part.staged_us, ibp_profile_ce_copy_us(&h, with, 1)));
  CHECK(near(part.zerocopy_us,
             ibp_profile_decode_staged_us(&h, with, GiB, n, q * 1024, q, 114)));
  CHECK(part.link_us == plain.link_us && part.link_us == all.link_us);
  /* coded throughout: the whole term, as before the charge per tensor */
  CHECK(near(all.decode_us,
             plain.decode_us + ibp_profile_stage_us(&h, GiB, n, 114)));
  CHECK(near(all.staged_us,
             ibp_profile_decode_staged_us(&h, 0, GiB, n, GiB, n, 32)));
  CHECK(all.staged_us > ibp_profile_ce_copy_us(&h, with, 1)); /* decode */
  /* more than the region's whole tensors: clamped to them; the tail and
   * a count of 0 add nothing */
  const ibp_profile_region_cost over =
      ibp_profile_region_copy(&h, GiB + 100, 1024, with, n + 5, 32);
  const ibp_profile_region_cost tail =
      ibp_profile_region_copy(&h, GiB + 100, 1024, with, 0, 32);
  CHECK(near(over.decode_us - tail.decode_us,
             ibp_profile_stage_us(&h, GiB, n, 114)));
  /* the pick follows: the stage's bytes pay where it codes a quarter, not
   * where its decode runs on every tensor */
  CHECK(ibp_profile_stage_pays(&h, GiB, 1024, alone, with, q, 32) == 1);
  CHECK(ibp_profile_stage_pays(&h, GiB, 1024, alone, with, n, 32) == 0);
  CHECK(ibp_profile_stage_pays(&h, GiB, 1024, alone, with, 0, 32) == 1);
}

static void test_model(void) {
  ibp_profile a = must_load("a100-pcie4");
  ibp_profile h = must_load("h100-pcie5");
  /* round decode rates for the figures below */
  a.decode_gbps_per_sm = h.decode_gbps_per_sm = 8;
  /* copies */
  CHECK(near(ibp_profile_ce_copy_us(&a, 1048576, 1), 1.0 + 1048576 / 25.5e3));
  CHECK(near(ibp_profile_ce_copy_us(&a, 0, 1), 1.0));
  CHECK(near(ibp_profile_ce_copy_us(&h, 1 << 30, 0), 1.0 + 1073741824 / 55e3));
  a.ce_d2h_gbps = 12.5;
  CHECK(near(ibp_profile_ce_copy_us(&a, 1000000, 0), 1.0 + 80.0));
  CHECK(near(ibp_profile_ce_copy_us(&a, 1000000, 1), 1.0 + 1e6 / 25.5e3));
  /* SM reads: 32 KiB per 1.5 us per SM, at most 25 GB/s. */
  CHECK(near(ibp_profile_sm_read_gbps(&a, 1), 32768 / 1500.0));
  CHECK(near(ibp_profile_sm_read_gbps(&a, 0), 32768 / 1500.0));
  CHECK(near(ibp_profile_sm_read_gbps(&a, 2), 25.0));
  CHECK(near(ibp_profile_sm_read_gbps(&a, 108), 25.0));
  CHECK(near(ibp_profile_sm_read_gbps(&a, 100000), 25.0));
  CHECK(near(ibp_profile_sm_read_gbps(&h, 1), 32768 / 1200.0));
  CHECK(near(ibp_profile_sm_read_gbps(&h, 2), 35.0));
  a.sm_inflight_bytes = 4096;
  CHECK(near(ibp_profile_sm_read_gbps(&a, 4), 4 * 4096 / 1500.0));
  CHECK(near(ibp_profile_sm_read_gbps(&a, 10), 25.0));
  a.sm_inflight_bytes = 32768;
  /* kernels: no host bytes: launch + max(decode, dram). */
  CHECK(near(ibp_profile_kernel_us(&a, 0, 0, 108), 3.0));
  CHECK(near(ibp_profile_kernel_us(&a, 0, 1048576, 108),
             3.0 + 1048576 / (8 * 108 * 1e3)));
  a.decode_gbps_per_sm = 100;
  CHECK(
      near(ibp_profile_kernel_us(&a, 0, 1048576, 108), 3.0 + 1048576 / 1555e3));
  a.decode_gbps_per_sm = 8;
  /* host bytes: + one round trip; reads limit on all SMs, decode on one. */
  CHECK(near(ibp_profile_kernel_us(&a, 1048576, 2097152, 108),
             3.0 + 1.5 + 1048576 / 25e3));
  CHECK(near(ibp_profile_kernel_us(&a, 1048576, 2097152, 1),
             3.0 + 1.5 + 2097152 / 8e3));
  CHECK(near(ibp_profile_kernel_us(&a, 1048576, 0, 1),
             3.0 + 1.5 + 1048576 / (32768 / 1.5e3) / 1e3));
  CHECK(near(ibp_profile_kernel_us(&a, 32, 0, 108), 3.0 + 1.5 + 32 / 25e3));
  /* sms clamped to [1, p->sms] */
  CHECK(ibp_profile_kernel_us(&a, 1048576, 2097152, 5000) ==
        ibp_profile_kernel_us(&a, 1048576, 2097152, 108));
  CHECK(ibp_profile_kernel_us(&a, 1048576, 2097152, 0) ==
        ibp_profile_kernel_us(&a, 1048576, 2097152, 1));
  CHECK(near(ibp_profile_kernel_us(&h, 0, 1048576, 1000),
             3.0 + 1048576 / (8 * 114 * 1e3)));
  /* the decompress kernels: host reads at most decode_h2d_gbps, a fixed
   * time per tensor on each SM */
  a.decode_h2d_gbps = 10;
  CHECK(near(ibp_profile_decode_read_gbps(&a, 108), 10.0));
  CHECK(near(ibp_profile_decode_read_gbps(&a, 1), 10.0));
  a.sm_inflight_bytes = 4096;
  CHECK(near(ibp_profile_decode_read_gbps(&a, 2), 2 * 4096 / 1500.0));
  a.sm_inflight_bytes = 32768;
  CHECK(near(ibp_profile_decode_us(&a, 1048576, 0, 0, 108),
             3.0 + 1.5 + 1048576 / 10e3));
  a.decode_tensor_us = 0.1;
  CHECK(near(ibp_profile_decode_us(&a, 0, 1048576, 256, 108),
             3.0 + 1048576 / (8 * 108 * 1e3) + 256 * 0.1 / 108));
  CHECK(near(ibp_profile_decode_us(&a, 0, 1048576, 256, 4),
             3.0 + 1048576 / (8 * 4 * 1e3) + 256 * 0.1 / 4));
  /* the plain kernel has no per-tensor time and reads at the SMs' rate */
  CHECK(near(ibp_profile_kernel_us(&a, 1048576, 0, 108),
             3.0 + 1.5 + 1048576 / 25e3));
  a.decode_h2d_gbps = 1000;
  CHECK(ibp_profile_decode_us(&a, 1048576, 0, 0, 108) ==
        ibp_profile_kernel_us(&a, 1048576, 0, 108));
  test_model_stage();
  test_stage_pays_routes();
  test_stage_charge_part();
}

/* ---- the locale ---------------------------------------------------------- */

/* A locale with a decimal comma: installed, else from $IBP_TEST_LOCPATH
 * (built by the profile_locale_setup test). */
static const char *set_comma_locale(void) {
  static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "de_DE",
                                      "fr_FR.UTF-8", "fr_FR.utf8", NULL};
  for (int round = 0; round < 2; round++) {
    for (int i = 0; names[i] != NULL; i++)
      if (setlocale(LC_ALL, names[i]) != NULL)
        return names[i];
    const char *dir = getenv("IBP_TEST_LOCPATH");
    if (dir == NULL || dir[0] == '\0' || setenv("LOCPATH", dir, 1) != 0)
      break;
  }
  return NULL;
}

static int test_locale(void) {
  const char *got = set_comma_locale();
  if (got == NULL || strcmp(localeconv()->decimal_point, ",") != 0) {
    printf("no locale with a decimal comma installed: skipped\n");
    return 77;
  }
  printf("locale %s\n", got);
  CHECK(strtod("25.5", NULL) == 25.0); /* the locale is in force */
  ibp_profile a = must_load("a100-pcie4");
  CHECK(a.ce_h2d_gbps == 25.5 && a.runtime_call_us == 0.3);
  char *text = format_alloc(&a);
  CHECK(strstr(text, "\nce_h2d_gbps = 25.5\n") != NULL);
  CHECK(strstr(text, "25,5") == NULL);
  free(text);
  for (int i = 0; i < 2000; i++) {
    ibp_profile p = random_profile();
    check_roundtrip(&p);
  }
  ibp_profile p;
  char err[256];
  CHECK(ibp_profile_parse("name = x\nsms = 1,5\n", 19, "t", &p, err,
                          sizeof err) == -1);
  CHECK(strcmp(err, "t:2: sms: '1,5' is not a decimal number") == 0);
  CHECK(ibp_profile_parse("name = x\nsms = 0.5\n", 19, "t", &p, err,
                          sizeof err) == -1);
  CHECK(strcmp(err, "t:2: sms: 0.5 is out of range [1, 4096]") == 0);
  /* The thread's locale is the program's again. */
  CHECK(strcmp(localeconv()->decimal_point, ",") == 0);
  CHECK(uselocale((locale_t)0) == LC_GLOBAL_LOCALE);
  return 0;
}

/* ---- which decoder the decode terms are of ------------------------------- */

/* text without its decoder_build line. */
/* text without its line `key = ...`. */
static char *without_key(const char *text, const char *key) {
  char *out = strdup(text);
  char line[64];
  snprintf(line, sizeof line, "\n%s = ", key);
  char *at = out ? strstr(out, line) : NULL;
  if (out == NULL || at == NULL)
    abort();
  char *eol = strchr(at + 1, '\n');
  memmove(at, eol, strlen(eol) + 1);
  return out;
}

static int parse_text(const char *text, ibp_profile *p) {
  char err[256];
  int rc = ibp_profile_parse(text, strlen(text), "t", p, err, sizeof err);
  if (rc != 0)
    fprintf(stderr, "parse: %s\n", err);
  return rc;
}

/* Every *.prof / *.profile file under src/dir loads; returns how many. */
static int load_all(const char *src, const char *dir_name, const char *ext,
                    int *unknown) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", src, dir_name);
  DIR *d = opendir(path);
  CHECK(d != NULL);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
    size_t len = strlen(e->d_name), k = strlen(ext);
    if (len <= k || strcmp(e->d_name + len - k, ext) != 0)
      continue;
    snprintf(path, sizeof path, "%s/%s/%s", src, dir_name, e->d_name);
    ibp_profile p = must_load(path);
    *unknown += strcmp(p.decoder_build, IBP_PROFILE_DECODER_UNKNOWN) == 0;
    n++;
  }
  if (d)
    closedir(d);
  return n;
}

/* stage_decoder_build: the exponent stage's decode terms, apart from the
 * decode terms' decoder_build. */
static void test_stage_decoder(const char *src) {
  (void)src;
  ibp_profile h = must_load("h100-pcie5"), p;
  char *text = format_alloc(&h);
  CHECK(strstr(text, "\nstage_decoder_build = decode-plan-4\n") != NULL);
  char *old = without_key(text, "stage_decoder_build");
  CHECK(strstr(old, "stage_decoder_build") == NULL);
  CHECK(parse_text(old, &p) == 0 &&
        strcmp(p.stage_decoder_build, "unknown") == 0);
  CHECK(ibp_profile_stage_measured(&p, "unknown") == 0);
  size_t n = strlen(old) + 64;
  char *mine = malloc(n);
  snprintf(mine, n, "%sstage_decoder_build = decode-plan-3\n", old);
  CHECK(parse_text(mine, &p) == 0);
  CHECK(strcmp(p.stage_decoder_build, "decode-plan-3") == 0);
  CHECK(strcmp(p.decoder_build, "word-pdep") == 0);
  CHECK(ibp_profile_stage_measured(&p, "decode-plan-3") == 1);
  CHECK(ibp_profile_decode_measured(&p, "decode-plan-3") == 0);
  CHECK(ibp_profile_stage_measured(&p, "word-pdep") == 0);
  CHECK(ibp_profile_stage_measured(&p, NULL) == 0);
  CHECK(ibp_profile_stage_measured(NULL, "decode-plan-3") == 0);
  /* written back, read back */
  char *again = format_alloc(&p);
  CHECK(strstr(again, "\nstage_decoder_build = decode-plan-3\n") != NULL);
  free(again);
  free(mine);
  free(old);
  free(text);
}

static void test_decoder(const char *src) {
  ibp_profile h = must_load("h100-pcie5"), p;
  char *text = format_alloc(&h);
  /* The key parsed. */
  CHECK(parse_text(text, &p) == 0 && strcmp(p.decoder_build, "word-pdep") == 0);
  CHECK(ibp_profile_decode_measured(&p, "word-pdep") == 1);
  CHECK(ibp_profile_decode_measured(&p, "decode-plan-1") == 0);
  /* A file without it (every profile before the key): unknown, and never
   * measured, whatever the running build. */
  char *old = without_key(text, "decoder_build");
  CHECK(strstr(old, "\ndecoder_build") == NULL);
  CHECK(parse_text(old, &p) == 0);
  CHECK(strcmp(p.decoder_build, IBP_PROFILE_DECODER_UNKNOWN) == 0);
  CHECK(strcmp(p.decoder_build, "unknown") == 0);
  CHECK(p.sms == 114 && p.decode_gbps_per_sm == 3.17);
  CHECK(ibp_profile_decode_measured(&p, "word-pdep") == 0);
  CHECK(ibp_profile_decode_measured(&p, "unknown") == 0);
  /* ... and written back with the key, as unknown. */
  char *again = format_alloc(&p);
  CHECK(strstr(again, "\ndecoder_build = unknown\n") != NULL);
  free(again);
  /* No running build, an empty one, no profile; a profile not from the
   * parser (zeroed). */
  CHECK(parse_text(text, &p) == 0);
  CHECK(ibp_profile_decode_measured(&p, NULL) == 0);
  CHECK(ibp_profile_decode_measured(&p, "") == 0);
  CHECK(ibp_profile_decode_measured(NULL, "word-pdep") == 0);
  CHECK(ibp_profile_decode_measured(&p, "word-pdep2") == 0);
  CHECK(ibp_profile_decode_measured(&p, "word-pde") == 0);
  memset(&p, 0, sizeof p);
  CHECK(ibp_profile_decode_measured(&p, "word-pdep") == 0);
  again = format_alloc(&p);
  CHECK(strstr(again, "\ndecoder_build = unknown\n") != NULL);
  free(again);
  /* Another build, 63 characters long: parsed, measured only for itself. */
  char build[IBP_PROFILE_NAME_MAX];
  memset(build, 'b', sizeof build - 1);
  build[sizeof build - 1] = '\0';
  size_t n = strlen(old) + strlen(build) + 32;
  char *mine = malloc(n);
  snprintf(mine, n, "%sdecoder_build = %s\n", old, build);
  CHECK(parse_text(mine, &p) == 0 && strcmp(p.decoder_build, build) == 0);
  CHECK(ibp_profile_decode_measured(&p, build) == 1);
  CHECK(ibp_profile_decode_measured(&p, "word-pdep") == 0);
  free(mine);
  free(old);
  free(text);
  test_stage_decoder(src);
  /* The truths the gate is tried with, and the tests' profiles: written
   * before the key, they still load, as unknown. */
  int unknown = 0;
  int truths = load_all(src, "profile/truth", ".prof", &unknown);
  CHECK(truths >= 8 && unknown == truths);
  unknown = 0;
  int tests = load_all(src, "tests/preload", ".profile", &unknown) +
              load_all(src, "tests/cli", ".profile", &unknown);
  CHECK(tests >= 2 && unknown == tests);
}

int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "";
  int rc = 0;
  if (strcmp(what, "builtin") == 0)
    test_builtin();
  else if (strcmp(what, "roundtrip") == 0)
    test_roundtrip();
  else if (strcmp(what, "errors") == 0)
    test_errors();
  else if (strcmp(what, "load") == 0)
    test_load();
  else if (strcmp(what, "model") == 0)
    test_model();
  else if (strcmp(what, "locale") == 0)
    rc = test_locale();
  else if (strcmp(what, "decoder") == 0 && argc > 2)
    test_decoder(argv[2]);
  else {
    fprintf(stderr,
            "usage: test_profile builtin|roundtrip|errors|load|model|locale"
            "\n       test_profile decoder SOURCE_DIR\n");
    return 2;
  }
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  if (rc == 0)
    printf("test_profile %s: ok\n", what);
  return rc;
}
