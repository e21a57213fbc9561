/* What the serve/ unit tests share: CHECK(c) counts a condition that does
 * not hold in `failures` (one count per test program) and says where. */
#ifndef IBP_TEST_SERVE_CHECK_H
#define IBP_TEST_SERVE_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c);    \
      failures++;                                                              \
    }                                                                          \
  } while (0)

#endif /* IBP_TEST_SERVE_CHECK_H */
