/*
 * libibp's own uploads in the streams table (serve/choose/streams.c,
 * ibp__streams_own_*): a span is clear of them only when none runs and
 * none ended after the span's start, on the device's clock, and only on
 * the device they ran on; a forked child forgets the ones its parent was
 * running.
 */
#include <stdio.h>

#include "base/clock.h"
#include "base/driver.h"
#include "serve/choose/streams.h"

static double clock_now;
static int failures;

double ibp__clock_ns(void) {
  return clock_now;
}

const ibp_driver *ibp__driver(void) {
  return NULL;
}

#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);                  \
      failures++;                                                              \
    }                                                                          \
  } while (0)

int main(void) {
  CHECK(ibp__streams_own_clear(0, 0));
  CHECK(!ibp__streams_own_clear(-1, 0)); /* no such device */
  clock_now = 100;
  ibp__streams_own_begin(0);
  CHECK(!ibp__streams_own_clear(0, 50));   /* one runs */
  CHECK(!ibp__streams_own_clear(0, 1000)); /* still */
  CHECK(ibp__streams_own_clear(1, 50));    /* another device */
  ibp__streams_own_begin(0);               /* a second, on another thread */
  clock_now = 300;
  ibp__streams_own_end(0);
  CHECK(!ibp__streams_own_clear(0, 1000)); /* the second still runs */
  clock_now = 400;
  ibp__streams_own_end(0);
  CHECK(!ibp__streams_own_clear(0, 50));  /* ended after the span began */
  CHECK(!ibp__streams_own_clear(0, 399)); /* likewise */
  CHECK(ibp__streams_own_clear(0, 400));  /* began as it ended */
  CHECK(ibp__streams_own_clear(0, 500));
  ibp__streams_own_end(0); /* one end too many: no harm */
  CHECK(ibp__streams_own_clear(0, 500));
  ibp__streams_own_begin(0);
  ibp__streams_after_fork_child(); /* its thread is gone */
  CHECK(ibp__streams_own_clear(0, 0));
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("test_streams_own: ok\n");
  return 0;
}
