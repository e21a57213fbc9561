/* Unit tests of config/ (IBP_* parsing).  Usage:
 *   test_config               the table-driven checks
 *   test_config --robustness  random byte strings into the parsers */
#include "config/config.h"

#include <fcntl.h>
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

/* ---- IBP_REGIONS: accepted inputs --------------------------------------- */

static ibp_config parse_ok(const char *text, unsigned n_rules) {
  ibp_config c;
  ibp_config_error e;
  ibp_config_init(&c);
  int rc = ibp_config_parse_regions(text, &c, &e);
  if (rc != 0 || c.n_rules != n_rules) {
    char msg[320];
    ibp_config_format_error(&e, msg, sizeof msg);
    fprintf(stderr, "parse_ok(\"%s\"): rc %d, %u rules: %s\n", text, rc,
            c.n_rules, rc ? msg : "");
    failures++;
  }
  return c;
}

static void test_defaults(void) {
  ibp_config c = parse_ok("min=1", 1);
  const ibp_rule *r = &c.rules[0];
  CHECK(r->selectors == IBP_SELECT_MIN && r->min == 1);
  CHECK(r->tensor_bytes == 4096 && r->chunk == 0 && r->threshold == 0.0);
  CHECK(r->sample == 0.0 && r->mode == IBP_MODE_SHADOW);
  CHECK(r->track == IBP_TRACK_PROTECT && r->name[0] == '\0');
  CHECK(r->index == 1 && r->clusters == 0);
  ibp_config d;
  ibp_config_init(&d);
  CHECK(!d.disabled && d.log_level == IBP_LOG_WARN && d.n_rules == 0);
  CHECK(d.stats == IBP_STATS_OFF && d.min_copy_bytes == 0);
}

static void test_every_key(void) {
  ibp_config c = parse_ok("size=3M,min=1K,nth=7,name=w.e-i_ght5,tensor=8K,"
                          "chunk=2,threshold=0.75,sample=0.25,mode=inplace,"
                          "track=trust,clusters=16",
                          1);
  const ibp_rule *r = &c.rules[0];
  CHECK(r->selectors == (IBP_SELECT_SIZE | IBP_SELECT_MIN | IBP_SELECT_NTH));
  CHECK(r->size == 3u << 20 && r->min == 1024 && r->nth == 7);
  CHECK(strcmp(r->name, "w.e-i_ght5") == 0 && r->tensor_bytes == 8192);
  CHECK(r->chunk == 2 && r->threshold == 0.75 && r->sample == 0.25);
  CHECK(r->mode == IBP_MODE_INPLACE && r->track == IBP_TRACK_TRUST);
  CHECK(r->clusters == 16);
  CHECK(parse_ok("min=0,clusters=auto", 1).rules[0].clusters == 0);
  CHECK(parse_ok("min=0,clusters=AUTO", 1).rules[0].clusters == 0);
  CHECK(parse_ok("min=0,clusters=1", 1).rules[0].clusters == 1);
  CHECK(parse_ok("min=0,clusters=256", 1).rules[0].clusters == 256);
  c = parse_ok("min=0,chunk=auto,threshold=auto,mode=shadow,track=protect", 1);
  CHECK(c.rules[0].chunk == 0 && c.rules[0].threshold == 0.0);
  CHECK(parse_ok("min=0,chunk=1", 1).rules[0].chunk == 1);
  CHECK(parse_ok("min=0,chunk=4", 1).rules[0].chunk == 4);
  CHECK(parse_ok("min=0,chunk=8", 1).rules[0].chunk == 8);
  CHECK(parse_ok("MIN=0,Mode=INPLACE", 1).rules[0].mode == IBP_MODE_INPLACE);
  CHECK(parse_ok("min=0,mode=Compact", 1).rules[0].mode == IBP_MODE_COMPACT);
}

static void test_sizes_and_bounds(void) {
  CHECK(parse_ok("size=17", 1).rules[0].size == 17);
  CHECK(parse_ok("size=2K", 1).rules[0].size == 2048);
  CHECK(parse_ok("size=2k", 1).rules[0].size == 2048);
  CHECK(parse_ok("size=5M", 1).rules[0].size == 5u << 20);
  CHECK(parse_ok("size=3G", 1).rules[0].size == (uint64_t)3 << 30);
  CHECK(parse_ok("size=17179869183G", 1).rules[0].size == (uint64_t)17179869183
                                                              << 30);
  CHECK(parse_ok("size=18446744073709551615", 1).rules[0].size == UINT64_MAX);
  CHECK(parse_ok("min=0,tensor=1", 1).rules[0].tensor_bytes == 1);
  CHECK(parse_ok("min=0,tensor=1M", 1).rules[0].tensor_bytes == 1u << 20);
  CHECK(parse_ok("min=0,tensor=1048576", 1).rules[0].tensor_bytes == 1u << 20);
  CHECK(parse_ok("min=0,threshold=0.5", 1).rules[0].threshold == 0.5);
  CHECK(parse_ok("min=0,threshold=1.0", 1).rules[0].threshold == 1.0);
  CHECK(parse_ok("min=0,threshold=1", 1).rules[0].threshold == 1.0);
  CHECK(parse_ok("min=0,threshold=0.999999999", 1).rules[0].threshold > 0.99);
  CHECK(parse_ok("min=0,sample=1", 1).rules[0].sample == 1.0);
  CHECK(parse_ok("min=0,sample=0.000000001", 1).rules[0].sample > 0.0);
  CHECK(parse_ok("nth=1", 1).rules[0].nth == 1);
}

static void test_auto_whitespace_empty(void) {
  ibp_config c = parse_ok("auto", 1);
  CHECK(c.rules[0].selectors == IBP_SELECT_MIN);
  CHECK(c.rules[0].min == (uint64_t)64 << 20);
  CHECK(c.rules[0].tensor_bytes == 4096 && c.rules[0].chunk == 0);
  parse_ok(" AUTO ", 1);
  parse_ok("size=1K;auto", 2);
  parse_ok("", 0);
  parse_ok(NULL, 0);
  parse_ok(" ; ;; ", 0);
  parse_ok(";;min=1;;", 1);
  parse_ok("min=1;", 1);
  parse_ok("min=1,,tensor=2K,", 1);
  c = parse_ok("  min = 1G , tensor\t= 4K ;\n size=5 ", 2);
  CHECK(c.rules[0].min == 1u << 30 && c.rules[0].tensor_bytes == 4096);
  CHECK(c.rules[1].size == 5 && c.rules[1].index == 2);
}

static void test_matching(void) {
  ibp_config c = parse_ok("size=1000,name=exact;nth=3,name=third;"
                          "min=1M,name=big;min=64,size=100,name=both",
                          4);
  CHECK(ibp_config_match(&c, 1000, 3) == &c.rules[0]);
  CHECK(strcmp(ibp_config_match(&c, 5, 3)->name, "third") == 0);
  CHECK(strcmp(ibp_config_match(&c, 2u << 20, 3)->name, "third") == 0);
  CHECK(strcmp(ibp_config_match(&c, 1u << 20, 4)->name, "big") == 0);
  CHECK(strcmp(ibp_config_match(&c, 100, 9)->name, "both") == 0);
  CHECK(ibp_config_match(&c, 101, 9) == NULL);
  CHECK(ibp_config_match(&c, (1u << 20) - 1, 2) == NULL);
  c.disabled = 1;
  CHECK(ibp_config_match(&c, 1000, 3) == NULL);
  ibp_config none;
  ibp_config_init(&none);
  CHECK(ibp_config_match(&none, 1u << 30, 1) == NULL);
  ibp_config a = parse_ok("auto", 1);
  CHECK(ibp_config_match(&a, (64u << 20) - 1, 1) == NULL);
  CHECK(ibp_config_match(&a, 64u << 20, 1) == &a.rules[0]);
}

static void test_appends_and_limit(void) {
  ibp_config c;
  ibp_config_error e;
  ibp_config_init(&c);
  char text[1024] = "";
  for (int i = 0; i < IBP_CONFIG_MAX_RULES; i++)
    strcat(text, "min=1;");
  CHECK(ibp_config_parse_regions(text, &c, &e) == 0);
  CHECK(c.n_rules == IBP_CONFIG_MAX_RULES);
  CHECK(ibp_config_parse_regions("size=1", &c, &e) == -1);
  CHECK(strstr(e.message, "too many rules") != NULL);
  CHECK(c.n_rules == IBP_CONFIG_MAX_RULES);
  ibp_config_init(&c);
  CHECK(ibp_config_parse_regions("min=1;size=2", &c, &e) == 0);
  CHECK(ibp_config_parse_regions("min=3;size=bad", &c, &e) == -1);
  CHECK(c.n_rules == 2 && c.rules[1].size == 2);
}

/* ---- IBP_REGIONS: rejected inputs ---------------------------------------- */

typedef struct bad_case {
  const char *text;
  unsigned rule;       /* expected err.rule */
  const char *token;   /* expected err.token */
  const char *message; /* a substring of err.message */
} bad_case;

static const bad_case bad_regions[] = {
    {"foo=1", 1, "foo=1", "unknown key"},
    {"min=1;bar=2", 2, "bar=2", "unknown key"},
    {"min=1,tensor", 1, "tensor", "expected key=value"},
    {"min", 1, "min", "expected key=value"},
    {"min=1,min=2", 1, "min=2", "twice"},
    {"min=1,name=a,name=b", 1, "name=b", "twice"},
    {"min=1;size=3;tensor=5X,min=1", 3, "tensor=5X", "suffix must be K, M"},
    {"min=", 1, "min=", "empty value"},
    {"size=", 1, "size=", "empty value"},
    {"min=-1", 1, "min=-1", "negative"},
    {"min=abc", 1, "min=abc", "whole number"},
    {"min=1KB", 1, "min=1KB", "suffix must be K, M or G"},
    {"min=1 K", 1, "min=1 K", "suffix"},
    {"min=1T", 1, "min=1T", "suffix"},
    {"min=0x10", 1, "min=0x10", "suffix"},
    {"min=+5", 1, "min=+5", "whole number"},
    {"min=99999999999G", 1, "min=99999999999G", "64 bits"},
    {"min=18446744073709551616", 1, "min=18446744073709551616", "64 bits"},
    {"size=0", 1, "size=0", "at least 1"},
    {"nth=0", 1, "nth=0", "from 1"},
    {"nth=1K", 1, "nth=1K", "whole number"},
    {"nth=-2", 1, "nth=-2", "whole number"},
    {"min=0,tensor=0", 1, "tensor=0", "tensor must be"},
    {"min=0,tensor=1048577", 1, "tensor=1048577", "tensor must be"},
    {"min=0,tensor=2M", 1, "tensor=2M", "tensor must be"},
    {"min=0,chunk=3", 1, "chunk=3", "chunk must be"},
    {"min=0,chunk=16", 1, "chunk=16", "chunk must be"},
    {"min=0,chunk=", 1, "chunk=", "chunk must be"},
    {"min=0,threshold=0.49", 1, "threshold=0.49", "0.5 to 1.0"},
    {"min=0,threshold=1.01", 1, "threshold=1.01", "0.5 to 1.0"},
    {"min=0,threshold=0.4999999999", 1, "threshold=0.4999999999", "9 decimal"},
    {"min=0,threshold=0,75", 1, "threshold=0", "0.5 to 1.0"},
    {"min=0,threshold=.75", 1, "threshold=.75", "decimal number"},
    {"min=0,threshold=-0.7", 1, "threshold=-0.7", "decimal number"},
    {"min=0,threshold=0.7x", 1, "threshold=0.7x", "decimal number"},
    {"min=0,threshold=99999999999999999999", 1,
     "threshold=99999999999999999999", "out of range"},
    {"min=0,sample=0", 1, "sample=0", "(0, 1]"},
    {"min=0,sample=0.0", 1, "sample=0.0", "(0, 1]"},
    {"min=0,sample=1.5", 1, "sample=1.5", "(0, 1]"},
    {"min=0,sample=", 1, "sample=", "empty value"},
    {"min=0,mode=copy", 1, "mode=copy", "shadow, compact or inplace"},
    {"min=0,track=never", 1, "track=never", "protect or trust"},
    {"min=0,clusters=0", 1, "clusters=0", "clusters must be auto or"},
    {"min=0,clusters=257", 1, "clusters=257", "from 1 to 256"},
    {"min=0,clusters=1K", 1, "clusters=1K", "clusters must be auto or"},
    {"min=0,clusters=-1", 1, "clusters=-1", "clusters must be auto or"},
    {"min=0,clusters=two", 1, "clusters=two", "clusters must be auto or"},
    {"min=0,clusters=", 1, "clusters=", "empty value"},
    {"min=0,clusters=2,clusters=4", 1, "clusters=4", "twice"},
    {"min=0,name=", 1, "name=", "name must be"},
    {"min=0,name=a b", 1, "name=a b", "name must be"},
    {"min=0,name=w/x", 1, "name=w/x", "name must be"},
    {"min=0,name=0123456789012345678901234567890123456789012345678901234567890"
     "123",
     1, "name=0123456789012345678901234567890123456789012345678901234...",
     "name must be"},
    {"tensor=4K", 1, "tensor=4K", "needs a selector"},
    {"name=weights", 1, "name=weights", "needs a selector"},
    {"min=1;auto,tensor=8K", 2, "auto", "expected key=value"},
    {"=5", 1, "=5", "unknown key"},
};

static void check_bad(const bad_case *b) {
  ibp_config c;
  ibp_config_error e;
  ibp_config_init(&c);
  memset(&e, 0x55, sizeof e);
  int rc = ibp_config_parse_regions(b->text, &c, &e);
  int ok = rc == -1 && c.n_rules == 0 && e.rule == b->rule && e.line == 0 &&
           strcmp(e.variable, "IBP_REGIONS") == 0 &&
           strcmp(e.token, b->token) == 0 && strstr(e.message, b->message);
  if (!ok) {
    fprintf(stderr,
            "bad \"%s\": rc %d rule %u token '%.64s' message '%.160s'\n",
            b->text, rc, e.rule, e.token, e.message);
    failures++;
  }
}

static void test_bad_regions(void) {
  for (size_t i = 0; i < sizeof bad_regions / sizeof bad_regions[0]; i++)
    check_bad(&bad_regions[i]);
}

static void test_format(void) {
  ibp_config c;
  ibp_config_error e;
  char msg[320];
  ibp_config_init(&c);
  CHECK(ibp_config_parse_regions("min=1;size=3;tensor=5X,min=1", &c, &e) == -1);
  ibp_config_format_error(&e, msg, sizeof msg);
  CHECK(strcmp(msg, "[ibp] IBP_REGIONS rule 3, token 'tensor=5X': size "
                    "suffix must be K, M or G \xe2\x80\x94 libibp passes "
                    "everything through") == 0);
  char tiny[8];
  ibp_config_format_error(&e, tiny, sizeof tiny);
  CHECK(strcmp(tiny, "[ibp] I") == 0);
  ibp_config_format_error(&e, NULL, 0);
}

/* ---- ibp_config_load with an injected environment ------------------------ */

static const char *const *fake_env; /* name, value, name, value, ..., NULL */

static const char *fake_getenv(const char *name) {
  for (const char *const *p = fake_env; *p; p += 2)
    if (strcmp(p[0], name) == 0)
      return p[1];
  return NULL;
}

static int load(const char *const *env, ibp_config *c, ibp_config_error *e) {
  fake_env = env;
  return ibp_config_load(c, fake_getenv, e);
}

static void expect_load_error(const char *const *env, const char *variable,
                              const char *token, const char *message) {
  ibp_config c;
  ibp_config_error e;
  int rc = load(env, &c, &e);
  int ok = rc == -1 && c.disabled && c.n_rules == 0 &&
           c.log_level == IBP_LOG_WARN && strcmp(e.variable, variable) == 0 &&
           strcmp(e.token, token) == 0 && strstr(e.message, message);
  if (!ok) {
    fprintf(stderr, "load error for %s: rc %d var '%s' token '%s' msg '%s'\n",
            variable, rc, e.variable, e.token, e.message);
    failures++;
  }
}

static void test_load_scalars(void) {
  ibp_config c;
  ibp_config_error e;
  const char *empty[] = {NULL};
  CHECK(load(empty, &c, &e) == 0 && !c.disabled && c.n_rules == 0);
  CHECK(c.log_level == IBP_LOG_WARN && c.stats == IBP_STATS_OFF);
  const char *all[] = {
      "IBP_DISABLE",  "0",   "IBP_LOG",     " debug ", "IBP_STATS", "1",
      "IBP_MIN_COPY", "64K", "IBP_REGIONS", "auto",    NULL};
  CHECK(load(all, &c, &e) == 0 && !c.disabled && c.n_rules == 1);
  CHECK(c.log_level == IBP_LOG_DEBUG && c.stats == IBP_STATS_STDERR);
  CHECK(c.min_copy_bytes == 65536 && c.rules[0].min == 64u << 20);
  const char *levels[] = {"IBP_LOG",     "error", "IBP_STATS",    "/tmp/s.json",
                          "IBP_DISABLE", "",      "IBP_MIN_COPY", "",
                          NULL};
  CHECK(load(levels, &c, &e) == 0 && c.log_level == IBP_LOG_ERROR);
  CHECK(c.stats == IBP_STATS_JSON && strcmp(c.stats_path, "/tmp/s.json") == 0);
  const char *info[] = {"IBP_LOG", "INFO", "IBP_STATS", "0", NULL};
  CHECK(load(info, &c, &e) == 0 && c.log_level == IBP_LOG_INFO);
  CHECK(c.stats == IBP_STATS_OFF);
  const char *warn[] = {"IBP_LOG", "warn", "IBP_STATS", "", NULL};
  CHECK(load(warn, &c, &e) == 0 && c.log_level == IBP_LOG_WARN);
  CHECK(!c.wait_ready && c.profile[0] == '\0');
  const char *wait[] = {"IBP_WAIT_READY", " 1 ", "IBP_PROFILE", "h100-pcie5",
                        NULL};
  CHECK(load(wait, &c, &e) == 0 && c.wait_ready &&
        strcmp(c.profile, "h100-pcie5") == 0);
  CHECK(c.tracker == IBP_TRACKER_AUTO && c.threads == 0);
  const char *th[] = {"IBP_THREADS", " 2 ", NULL};
  CHECK(load(th, &c, &e) == 0 && c.threads == 2);
  const char *th64[] = {"IBP_THREADS", "64", NULL};
  CHECK(load(th64, &c, &e) == 0 && c.threads == 64);
  CHECK(c.staging_bytes == IBP_STAGING_DEFAULT &&
        c.max_sms == IBP_MAX_SMS_DEFAULT && c.path == IBP_PATH_AUTO);
  const char *staged[] = {"IBP_STAGING", "4M",       "IBP_MAX_SMS", "4096",
                          "IBP_PATH",    "zerocopy", NULL};
  CHECK(load(staged, &c, &e) == 0 && c.staging_bytes == 4u << 20 &&
        c.max_sms == 4096 && c.path == IBP_PATH_ZEROCOPY);
  const char *nostage[] = {"IBP_STAGING", "0",      "IBP_MAX_SMS", "1",
                           "IBP_PATH",    "staged", NULL};
  CHECK(load(nostage, &c, &e) == 0 && c.staging_bytes == 0 && c.max_sms == 1 &&
        c.path == IBP_PATH_STAGED);
  CHECK(c.scanners == IBP_SCANNERS_DEFAULT && c.force_route == IBP_FORCE_NONE);
  const char *force[] = {"IBP_FORCE_ROUTE", "staged", NULL};
  CHECK(load(force, &c, &e) == 0 && c.force_route == IBP_FORCE_STAGED);
  const char *fb[] = {"IBP_FORCE_ROUTE", "batched", NULL};
  CHECK(load(fb, &c, &e) == 0 && c.force_route == IBP_FORCE_BATCHED);
  const char *sc0[] = {"IBP_SCANNERS", "0", NULL};
  CHECK(load(sc0, &c, &e) == 0 && c.scanners == 0);
  const char *sc16[] = {"IBP_SCANNERS", "16", NULL};
  CHECK(load(sc16, &c, &e) == 0 && c.scanners == 16);
  /* IBP_TRACK_QUIET: milliseconds, 0 (never quiet) to an hour */
  CHECK(c.track_quiet_ms == IBP_TRACK_QUIET_DEFAULT &&
        IBP_TRACK_QUIET_DEFAULT == 250);
  const char *q0[] = {"IBP_TRACK_QUIET", "0", NULL};
  CHECK(load(q0, &c, &e) == 0 && c.track_quiet_ms == 0);
  const char *q20[] = {"IBP_TRACK_QUIET", " 20 ", NULL};
  CHECK(load(q20, &c, &e) == 0 && c.track_quiet_ms == 20);
  const char *qmax[] = {"IBP_TRACK_QUIET", "3600000", NULL};
  CHECK(load(qmax, &c, &e) == 0 && c.track_quiet_ms == 3600000);
  const char *qnone[] = {"IBP_TRACKER", "auto", NULL};
  CHECK(load(qnone, &c, &e) == 0 &&
        c.track_quiet_ms == IBP_TRACK_QUIET_DEFAULT);
  const char *trackers[] = {"auto", "userfaultfd", "mprotect"};
  for (int i = 0; i < 3; i++) {
    const char *t[] = {"IBP_TRACKER", trackers[i], NULL};
    CHECK(load(t, &c, &e) == 0 && c.tracker == (ibp_tracker)i);
  }
  /* IBP_DISABLE=1 wins and hides everything else, even bad values. */
  const char *off[] = {"IBP_DISABLE", "1", "IBP_REGIONS", "junk", NULL};
  CHECK(load(off, &c, &e) == 0 && c.disabled && c.n_rules == 0);
  CHECK(ibp_config_match(&c, 1u << 30, 1) == NULL);
}

/* A 299-character value of `variable`: "too long", the token cut to 60
 * characters and "...". */
static void expect_too_long(const char *variable, char fill) {
  char value[300], token[64];
  memset(value, fill, sizeof value - 1);
  value[sizeof value - 1] = '\0';
  memset(token, fill, 60);
  memcpy(token + 60, "...", 4);
  const char *env[] = {variable, value, NULL};
  expect_load_error(env, variable, token, "too long");
}

static void test_load_errors(void) {
  const char *d1[] = {"IBP_DISABLE", "yes", NULL};
  expect_load_error(d1, "IBP_DISABLE", "yes", "0 or 1");
  const char *d2[] = {"IBP_DISABLE", "2", NULL};
  expect_load_error(d2, "IBP_DISABLE", "2", "0 or 1");
  const char *w1[] = {"IBP_WAIT_READY", "yes", NULL};
  expect_load_error(w1, "IBP_WAIT_READY", "yes", "0 or 1");
  const char *bad_threads[] = {"0", "65", "2x", "-1", "99999999999"};
  for (int i = 0; i < 5; i++) {
    const char *th[] = {"IBP_THREADS", bad_threads[i], NULL};
    expect_load_error(th, "IBP_THREADS", bad_threads[i], "1 to 64");
  }
  const char *bad_sms[] = {"0", "4097", "8x", "-1"};
  for (int i = 0; i < 4; i++) {
    const char *sm[] = {"IBP_MAX_SMS", bad_sms[i], NULL};
    expect_load_error(sm, "IBP_MAX_SMS", bad_sms[i], "1 to 4096");
  }
  const char *bad_scanners[] = {"17", "2x", "-1", "100000000000"};
  for (int i = 0; i < 4; i++) {
    const char *sc[] = {"IBP_SCANNERS", bad_scanners[i], NULL};
    expect_load_error(sc, "IBP_SCANNERS", bad_scanners[i], "0 to 16");
  }
  const char *bad_quiet[] = {"3600001", "5ms", "-1", "99999999999", "0x10"};
  for (int i = 0; i < 5; i++) {
    const char *q[] = {"IBP_TRACK_QUIET", bad_quiet[i], NULL};
    expect_load_error(q, "IBP_TRACK_QUIET", bad_quiet[i],
                      "milliseconds from 0 to 3600000");
  }
  const char *bad_staging[] = {"2G", "65M", "64K", "1"};
  for (int i = 0; i < 4; i++) {
    const char *st[] = {"IBP_STAGING", bad_staging[i], NULL};
    expect_load_error(st, "IBP_STAGING", bad_staging[i],
                      "0 or from 128K to 64M");
  }
  const char *st2[] = {"IBP_STAGING", "8Q", NULL};
  expect_load_error(st2, "IBP_STAGING", "8Q", "suffix");
  const char *p1[] = {"IBP_PATH", "dma", NULL};
  expect_load_error(p1, "IBP_PATH", "dma", "auto, zerocopy or staged");
  const char *f1[] = {"IBP_FORCE_ROUTE", "kernel", NULL};
  expect_load_error(f1, "IBP_FORCE_ROUTE", "kernel",
                    "none, driver, zerocopy, staged or batched");
  const char *t1[] = {"IBP_TRACKER", "uffd", NULL};
  expect_load_error(t1, "IBP_TRACKER", "uffd", "auto, userfaultfd or mprotect");
  expect_too_long("IBP_PROFILE", 'n');
  const char *l1[] = {"IBP_LOG", "verbose", NULL};
  expect_load_error(l1, "IBP_LOG", "verbose", "error, warn, info or debug");
  const char *m1[] = {"IBP_MIN_COPY", "4Q", NULL};
  expect_load_error(m1, "IBP_MIN_COPY", "4Q", "suffix");
  const char *m2[] = {"IBP_MIN_COPY", "-1", NULL};
  expect_load_error(m2, "IBP_MIN_COPY", "-1", "negative");
  expect_too_long("IBP_STATS", 'p');
  const char *r1[] = {"IBP_LOG", "debug", "IBP_REGIONS", "min=1;min=1,x=2",
                      NULL};
  expect_load_error(r1, "IBP_REGIONS", "x=2", "unknown key");
  ibp_config c;
  ibp_config_error e;
  char msg[320];
  CHECK(load(r1, &c, &e) == -1 && e.rule == 2);
  ibp_config_format_error(&e, msg, sizeof msg);
  CHECK(strstr(msg, "[ibp] IBP_REGIONS rule 2, token 'x=2': unknown key"));
  CHECK(load(l1, &c, NULL) == -1 && c.disabled);
}

/* ---- IBP_CONFIG files ---------------------------------------------------- */

static void write_file(char *path, const char *text) {
  strcpy(path, "/tmp/ibp_config_test_XXXXXX");
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0)
    return;
  CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  close(fd);
}

static void test_file_good(void) {
  char path[64];
  write_file(path, "# weights and the embedding table\n"
                   "\n"
                   "min=1G, tensor=4K, name=weights   # trailing comment\n"
                   "   \t\n"
                   "size=512M,name=emb;nth=2\n"
                   "auto");
  ibp_config c;
  ibp_config_error e;
  const char *env[] = {"IBP_REGIONS", "size=7", "IBP_CONFIG", path, NULL};
  CHECK(load(env, &c, &e) == 0 && c.n_rules == 5);
  CHECK(c.rules[0].size == 7 && strcmp(c.rules[1].name, "weights") == 0);
  CHECK(c.rules[2].size == 512u << 20 && c.rules[3].nth == 2);
  CHECK(c.rules[4].min == 64u << 20 && c.rules[4].index == 5);
  ibp_config_init(&c);
  CHECK(ibp_config_parse_file(path, &c, &e) == 0 && c.n_rules == 4);
  unlink(path);
}

static void expect_file_error(const char *text, unsigned line,
                              const char *token, const char *message) {
  char path[64];
  write_file(path, text);
  ibp_config c;
  ibp_config_error e;
  const char *env[] = {"IBP_CONFIG", path, NULL};
  int rc = load(env, &c, &e);
  int ok = rc == -1 && c.disabled && strcmp(e.variable, "IBP_CONFIG") == 0 &&
           e.line == line && strcmp(e.token, token) == 0 &&
           strstr(e.message, message);
  if (!ok) {
    fprintf(stderr, "file error: rc %d line %u token '%s' message '%s'\n", rc,
            e.line, e.token, e.message);
    failures++;
  }
  unlink(path);
}

static void test_file_errors(void) {
  expect_file_error("# ok\nmin=1\n\nmin=2,tensor=5X\n", 4, "tensor=5X",
                    "suffix");
  expect_file_error("min=1 # fine\nbogus\n", 2, "bogus", "expected key=value");
  expect_file_error("min=1;nth=0\n", 1, "nth=0", "from 1");
  ibp_config c;
  ibp_config_error e;
  char msg[320];
  const char *missing[] = {"IBP_CONFIG", "/nonexistent/ibp.conf", NULL};
  CHECK(load(missing, &c, &e) == -1 && c.disabled && e.line == 0);
  CHECK(strcmp(e.token, "/nonexistent/ibp.conf") == 0);
  CHECK(strstr(e.message, "no such file") != NULL);
  ibp_config_format_error(&e, msg, sizeof msg);
  CHECK(strstr(msg, "[ibp] IBP_CONFIG, token '/nonexistent/ibp.conf'"));
  const char *dir[] = {"IBP_CONFIG", "/tmp", NULL};
  CHECK(load(dir, &c, &e) == -1 && c.disabled && e.line == 0);
  CHECK(strstr(e.message, "directory") != NULL);
}

/* Files a rule file must not be: one message each, nothing read (a
 * device or a FIFO would hang the application's first CUDA call). */
static void expect_not_read(const char *path, const char *message) {
  ibp_config c;
  ibp_config_error e;
  const char *env[] = {"IBP_REGIONS", "min=1M", "IBP_CONFIG", path, NULL};
  int ok = load(env, &c, &e) == -1 && c.disabled && c.n_rules == 0 &&
           strcmp(e.variable, "IBP_CONFIG") == 0 &&
           strstr(e.message, message) != NULL;
  if (!ok) {
    fprintf(stderr, "%s: message '%s', want '%s'\n", path, e.message, message);
    failures++;
  }
}

static void test_file_not_text(void) {
  expect_not_read("/dev/zero", "not a regular file (a device)");
  char dir[] = "/tmp/ibp_config_fifo_XXXXXX", fifo[64];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  CHECK(mkfifo(fifo, 0600) == 0); /* nobody writes: a read would block */
  expect_not_read(fifo, "not a regular file (a FIFO)");
  unlink(fifo);
  rmdir(dir);
  char path[64];
  write_file(path, "min=1M\n");
  CHECK(truncate(path, (1 << 20) + 1) == 0); /* NUL bytes past 1 MiB */
  expect_not_read(path, "larger than 1 MiB");
  unlink(path);
  /* a NUL byte in a small file: not a text file, at its line */
  write_file(path, "min=1M\nsize=4");
  int fd = open(path, O_WRONLY | O_APPEND);
  CHECK(fd >= 0 && write(fd, "\0\n", 2) == 2);
  close(fd);
  ibp_config c;
  ibp_config_error e;
  const char *env[] = {"IBP_CONFIG", path, NULL};
  CHECK(load(env, &c, &e) == -1 && e.line == 2 &&
        strstr(e.message, "NUL byte") != NULL);
  unlink(path);
}

static void test_file_too_long_line(void) {
  char path[64];
  static char text[IBP_CONFIG_LINE_MAX + 100];
  memset(text, 'x', sizeof text - 1);
  memcpy(text, "min=1\n", 6);
  write_file(path, text);
  ibp_config c;
  ibp_config_error e;
  ibp_config_init(&c);
  CHECK(ibp_config_parse_file(path, &c, &e) == -1 && e.line == 2);
  CHECK(strstr(e.message, "too long") != NULL && c.n_rules == 0);
  unlink(path);
}

/* ---- robustness: random input must never crash --------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t next_random(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Mostly grammar characters, sometimes any byte. */
static char random_char(void) {
  static const char alphabet[] = "=,;;# \t.-_0123456789KMGkmgsizemnthr"
                                 "autoshadowinplacetrustprotectchunk";
  uint64_t r = next_random();
  if (r % 8 == 0)
    return (char)(1 + (r >> 8) % 255);
  return alphabet[(r >> 8) % (sizeof alphabet - 1)];
}

/* Grammar-shaped text: random keys and values, mostly valid. */
static void random_rules(char *text, size_t cap) {
  static const char *const pieces[] = {"min=1G,",
                                       "size=4K,",
                                       "nth=2,",
                                       "tensor=8K,",
                                       "chunk=4,",
                                       "sample=0.5,",
                                       "threshold=0.9,",
                                       "mode=inplace,",
                                       "mode=compact,",
                                       "track=trust,",
                                       "name=w,",
                                       "auto",
                                       " ; ",
                                       ";",
                                       ";",
                                       ";",
                                       "min=",
                                       "=",
                                       "1",
                                       "G",
                                       "-"};
  size_t n = 0;
  text[0] = '\0';
  while (n + 16 < cap && next_random() % 12 != 0) {
    const char *p = pieces[next_random() % (sizeof pieces / sizeof *pieces)];
    size_t len = strlen(p);
    memcpy(text + n, p, len + 1);
    n += len;
  }
}

static void check_invariants(const ibp_config *c, int rc,
                             const ibp_config_error *e) {
  CHECK(c->n_rules <= IBP_CONFIG_MAX_RULES);
  if (rc != 0) {
    CHECK(rc == -1 && c->n_rules == 0);
    CHECK(memchr(e->token, 0, sizeof e->token) != NULL);
    CHECK(memchr(e->message, 0, sizeof e->message) && e->message[0]);
    return;
  }
  for (unsigned i = 0; i < c->n_rules; i++) {
    const ibp_rule *r = &c->rules[i];
    CHECK(r->selectors != 0 && r->index == i + 1);
    CHECK(r->tensor_bytes >= 1 && r->tensor_bytes <= IBP_CONFIG_MAX_TENSOR);
    CHECK(r->threshold == 0.0 || (r->threshold >= 0.5 && r->threshold <= 1));
    CHECK(r->sample >= 0.0 && r->sample <= 1.0);
  }
}

static int run_robustness(long iterations) {
  char text[256];
  char msg[320];
  long accepted = 0;
  for (long i = 0; i < iterations; i++) {
    if (i % 2) {
      random_rules(text, sizeof text);
    } else {
      size_t n = next_random() % sizeof text;
      for (size_t k = 0; k < n; k++)
        text[k] = random_char();
      text[n] = '\0';
    }
    ibp_config c;
    ibp_config_error e;
    ibp_config_init(&c);
    int rc = ibp_config_parse_regions(text, &c, &e);
    check_invariants(&c, rc, &e);
    if (rc != 0)
      ibp_config_format_error(&e, msg, sizeof msg);
    ibp_config_match(&c, next_random(), next_random() % 8);
    accepted += rc == 0 && c.n_rules > 0;
    if (failures) {
      fprintf(stderr, "robustness: failed on \"%s\"\n", text);
      return 1;
    }
  }
  printf("robustness: %ld random inputs (%ld accepted with rules), no "
         "failure\n",
         iterations, accepted);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--robustness") == 0) {
    const char *n = getenv("IBP_TEST_ITERATIONS");
    return run_robustness(n && *n ? atol(n) : 200000);
  }
  test_defaults();
  test_every_key();
  test_sizes_and_bounds();
  test_auto_whitespace_empty();
  test_matching();
  test_appends_and_limit();
  test_bad_regions();
  test_format();
  test_load_scalars();
  test_load_errors();
  test_file_good();
  test_file_errors();
  test_file_not_text();
  test_file_too_long_line();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("test_config: all checks passed\n");
  return 0;
}
