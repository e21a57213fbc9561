/* Test harness: PRNG, knobs, failure reporting (see test_util.h). */
#include "test_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- PRNG ---------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void rng_seed(rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++)
    r->s[i] = splitmix64(&seed);
}

uint64_t rng_range(rng *r, uint64_t lo, uint64_t hi) {
  if (hi - lo == UINT64_MAX)
    return rng_next(r);
  return lo + rng_below(r, hi - lo + 1);
}

uint32_t rng_log_uniform(rng *r, uint32_t lo, uint32_t hi) {
  double a = log((double)lo), b = log((double)hi + 1.0);
  uint64_t v = (uint64_t)exp(a + rng_unit(r) * (b - a));
  if (v < lo)
    v = lo;
  if (v > hi)
    v = hi;
  return (uint32_t)v;
}

void rng_fill(rng *r, void *buf, size_t len) {
  uint8_t *b = buf;
  for (size_t i = 0; i < len; i += 8) {
    uint64_t v = rng_next(r);
    size_t n = len - i < 8 ? len - i : 8;
    memcpy(b + i, &v, n);
  }
}

uint32_t rng_chunk(rng *r) {
  return ibp_chunk_width((unsigned)rng_below(r, IBP_CHUNK_WIDTH_COUNT));
}

/* ---- knobs and reporting ------------------------------------------------- */

static const char *g_name = "test";
static uint64_t g_seed = TEST_DEFAULT_SEED;
static uint64_t g_iterations;
static uint64_t g_iteration = UINT64_MAX;
static char g_case[1024];

static uint64_t env_u64(const char *var, uint64_t fallback) {
  const char *s = getenv(var);
  if (!s || !*s)
    return fallback;
  char *end;
  unsigned long long v = strtoull(s, &end, 0);
  if (*end) {
    fprintf(stderr, "%s=%s is not a number; using %llu\n", var, s,
            (unsigned long long)fallback);
    return fallback;
  }
  return v;
}

uint64_t test_begin(const char *name, uint64_t default_iterations) {
  g_name = name;
  g_seed = env_u64("IBP_TEST_SEED", TEST_DEFAULT_SEED);
  /* IBP_TEST_REDUCE=N: the first 1/N of the default cases (rounded up);
   * an explicit IBP_TEST_ITERATIONS is never reduced. */
  uint64_t reduce = env_u64("IBP_TEST_REDUCE", 1);
  if (reduce > 1)
    default_iterations = (default_iterations + reduce - 1) / reduce;
  else
    reduce = 1;
  g_iterations = env_u64("IBP_TEST_ITERATIONS", default_iterations);
  printf("%s: IBP_TEST_SEED=0x%llx IBP_TEST_ITERATIONS=%llu", name,
         (unsigned long long)g_seed, (unsigned long long)g_iterations);
  if (reduce > 1 && !getenv("IBP_TEST_ITERATIONS"))
    printf(" (the default / IBP_TEST_REDUCE=%llu)", (unsigned long long)reduce);
  printf("\n");
  fflush(stdout);
  return g_iterations;
}

uint64_t test_seed(void) {
  return g_seed;
}

void test_iteration(rng *r, uint64_t i) {
  g_iteration = i;
  g_case[0] = 0;
  rng_seed(r, g_seed ^ (i * 0xD1342543DE82EF95ull + 0x632BE59BD9B4E019ull));
}

void test_case(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_case, sizeof g_case, fmt, ap);
  va_end(ap);
}

int test_end(void) {
  printf("%s: PASS\n", g_name);
  return 0;
}

_Noreturn void test_fail(const char *file, int line, const char *fmt, ...) {
  fflush(stdout);
  fprintf(stderr, "%s: FAIL at %s:%d: ", g_name, file, line);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n  case: %s\n", g_case[0] ? g_case : "(not set)");
  if (g_iteration != UINT64_MAX)
    fprintf(stderr,
            "  reproduce: IBP_TEST_SEED=0x%llx (iteration %llu of %llu)\n",
            (unsigned long long)g_seed, (unsigned long long)g_iteration,
            (unsigned long long)g_iterations);
  else
    fprintf(stderr, "  reproduce: IBP_TEST_SEED=0x%llx\n",
            (unsigned long long)g_seed);
  exit(1);
}

_Noreturn void test_skip(const char *why) {
  printf("%s: SKIP: %s\n", g_name, why);
  exit(TEST_SKIP);
}

void test_check_mem(const char *file, int line, const char *what,
                    const void *got, const void *want, size_t n) {
  const uint8_t *g = got, *w = want;
  for (size_t i = 0; i < n; i++)
    if (g[i] != w[i])
      test_fail(file, line,
                "%s differs at byte %zu of %zu: got 0x%02x, want 0x%02x", what,
                i, n, g[i], w[i]);
}

void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p)
    test_fail(__FILE__, __LINE__, "out of memory (%zu bytes)", n);
  return p;
}

void *xcalloc(size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (!p)
    test_fail(__FILE__, __LINE__, "out of memory (%zu bytes)", n);
  return p;
}
