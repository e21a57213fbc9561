/* The link timeline of the virtual clock (simclock.h): transfers share a
 * link's time -- a transfer that is ready earlier but reserved later still
 * gets the gap before a later one -- its busy time is the sum of the
 * transfers, every transfer ends no earlier than ready + duration, and
 * random reservations always finish (floating-point ends once made the
 * last piece of a transfer never end).  Exit 0 = pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "simclock.h"

static int failures;

#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);    \
      failures++;                                                              \
    }                                                                          \
  } while (0)

static const simclock_link H2D = SIMCLOCK_LINK_H2D;

/* Reserved later but ready earlier: it gets the 2 ns gap, then the rest
 * after the other transfer; the link is busy for exactly both. */
static void interleave(void) {
  simclock_reset();
  CHECK(simclock_link_reserve(H2D, 5.5, 100) == 105.5);
  CHECK(simclock_link_reserve(H2D, 3.5, 100) == 203.5);
  CHECK(simclock_link_reserve(SIMCLOCK_LINK_D2H, 3.5, 100) == 103.5);
  CHECK(simclock_link_reserve(H2D, 0, 0) == 0); /* nothing to move */
}

/* All ready at 0: the link never idles, the last end is the sum. */
static void conserved(void) {
  srand(7);
  simclock_reset();
  double sum = 0, last = 0;
  for (int i = 0; i < 1000; i++) {
    double d = 0.001 + (rand() % 1000) * 0.37;
    sum += d;
    double end = simclock_link_reserve(H2D, 0, d);
    CHECK(end > last - 1e-9);
    last = end;
  }
  CHECK(fabs(last - sum) <= 1e-6 * sum);
}

/* Random ready times far along the clock: each ends after ready + dur,
 * and every reservation returns. */
static void random_ends(void) {
  srand(1);
  simclock_reset();
  double base = 1e12; /* where ulp(t) is far above the smallest pieces */
  for (int i = 0; i < 200000; i++) {
    base += (rand() % 100) * 0.37;
    double ready = base + (rand() % 1000) * 1.3 - 500;
    double dur = (rand() % 500) * 0.71 + 0.001;
    double end = simclock_link_reserve(H2D, ready, dur);
    CHECK(end >= ready + dur - 1e-3);
  }
}

int main(void) {
  interleave();
  conserved();
  random_ends();
  if (failures)
    return 1;
  puts("test_simclock: ok");
  return 0;
}
