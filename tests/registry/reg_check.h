/* Minimal checking helpers for the registry tests. */
#ifndef IBP_TEST_REG_CHECK_H
#define IBP_TEST_REG_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int reg_failures;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      if (++reg_failures > 20)                                                 \
        exit(1);                                                               \
    }                                                                          \
  } while (0)

/* xorshift64*: deterministic, seedable. */
static inline uint64_t reg_rand(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}

static inline uint64_t reg_below(uint64_t *s, uint64_t n) {
  return n ? reg_rand(s) % n : 0;
}

static inline int reg_result(void) {
  if (reg_failures)
    fprintf(stderr, "%d check(s) failed\n", reg_failures);
  else
    printf("ok\n");
  return reg_failures ? 1 : 0;
}

#endif
