/*
 * Shared test harness: a seeded PRNG, the iteration/seed knobs, and CHECK
 * macros that print the failing case and how to reproduce it, then exit 1.
 *
 * Knobs (environment):
 *   IBP_TEST_ITERATIONS  iteration count of every randomized test
 *   IBP_TEST_REDUCE      N >= 1: without IBP_TEST_ITERATIONS, the first 1/N
 *                        of the default count (the sanitizer builds set it;
 *                        tests/README.md, "Under the sanitizers")
 *   IBP_TEST_SEED        base seed (decimal or 0x hex); iteration i uses a
 *                        PRNG seeded from (seed, i)
 * Exit codes: 0 pass, 1 fail, 77 skip (CTest SKIP_RETURN_CODE).
 */
#ifndef IBP_TEST_UTIL_H
#define IBP_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "ibp/codec.h"

#define TEST_SKIP 77
#define TEST_DEFAULT_SEED 0x1B9C0DEC5EEDull

/* ---- PRNG (xoshiro256**, seeded with splitmix64) ------------------------- */

typedef struct rng {
  uint64_t s[4];
} rng;

void rng_seed(rng *r, uint64_t seed);

/* Inline: the generators call these for every byte they make. */
static inline uint64_t rng__rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

static inline uint64_t rng_next(rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rng__rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rng__rotl(s[3], 45);
  return result;
}

/* Uniform in [0, n); n > 0. */
static inline uint64_t rng_below(rng *r, uint64_t n) {
  return rng_next(r) % n; /* the bias is irrelevant for tests */
}

/* Uniform in [lo, hi]. */
uint64_t rng_range(rng *r, uint64_t lo, uint64_t hi);

/* Uniform in [0, 1). */
static inline double rng_unit(rng *r) {
  return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Log-uniform integer in [lo, hi], lo >= 1. */
uint32_t rng_log_uniform(rng *r, uint32_t lo, uint32_t hi);

/* 1 with probability p. */
static inline int rng_chance(rng *r, double p) {
  return rng_unit(r) < p;
}

void rng_fill(rng *r, void *buf, size_t len);
/* One of the chunk widths (IBP_CHUNK_WIDTHS), uniformly. */
uint32_t rng_chunk(rng *r);

/* ---- knobs and reporting ------------------------------------------------- */

/* Prints "name: seed=... iterations=..." and remembers them for failures.
 * Returns the iteration count (IBP_TEST_ITERATIONS, or `default_iterations`
 * divided by IBP_TEST_REDUCE). */
uint64_t test_begin(const char *name, uint64_t default_iterations);
uint64_t test_seed(void);
/* Seeds r for iteration i and makes i the "current iteration". */
void test_iteration(rng *r, uint64_t i);
/* Describes the current case (printf format); printed on failure. */
void test_case(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints a summary line and returns 0. */
int test_end(void);

_Noreturn void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Exits 77 after printing why. */
_Noreturn void test_skip(const char *why);

/* Compares n bytes; on mismatch fails naming the first differing offset. */
void test_check_mem(const char *file, int line, const char *what,
                    const void *got, const void *want, size_t n);

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond))                                                               \
      test_fail(__FILE__, __LINE__, "%s", #cond);                              \
  } while (0)

#define CHECKF(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      test_fail(__FILE__, __LINE__, __VA_ARGS__);                              \
  } while (0)

#define CHECK_STATUS(expr, want)                                               \
  do {                                                                         \
    ibp_status got_ = (expr), want_ = (want);                                  \
    if (got_ != want_)                                                         \
      test_fail(__FILE__, __LINE__, "%s: got %s, want %s", #expr,              \
                ibp_status_name(got_), ibp_status_name(want_));                \
  } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, IBP_OK)

#define CHECK_U64(got, want)                                                   \
  do {                                                                         \
    uint64_t g_ = (uint64_t)(got), w_ = (uint64_t)(want);                      \
    if (g_ != w_)                                                              \
      test_fail(__FILE__, __LINE__, "%s = %llu, want %s = %llu", #got,         \
                (unsigned long long)g_, #want, (unsigned long long)w_);        \
  } while (0)

#define CHECK_MEM(got, want, n, what)                                          \
  test_check_mem(__FILE__, __LINE__, what, got, want, n)

/* malloc that fails the test instead of returning NULL (n may be 0). */
void *xmalloc(size_t n);
void *xcalloc(size_t n);

#endif /* IBP_TEST_UTIL_H */
