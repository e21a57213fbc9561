/* The link timeline of the virtual clock (simclock.h): transfers share a
 * link's time -- a transfer that is ready earlier but reserved later still
 * gets the gap before a later one -- its busy time is the sum of the
 * transfers, every transfer ends no earlier than ready + duration, and
 * random reservations always finish (floating-point ends once made the
 * last piece of a transfer never end).  The SM timeline: kernels share a
 * device's SMs (times computed by hand), degenerate input, devices apart,
 * reset, and random reservations past the pruning.  Exit 0 = pass. */
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

/* ---- the SMs (16 of them) ---------------------------------------------- */

#define SMS 16

static double sms(double ready, unsigned want, double dur) {
  return simclock_sms_reserve(0, ready, SMS, want, dur);
}

/* Each wants every SM: the second runs when the first is done. */
static void sms_back_to_back(void) {
  simclock_reset();
  CHECK(sms(0, SMS, 100) == 100);
  CHECK(sms(0, SMS, 100) == 200);
}

/* Each wants half: two run side by side, a third after them. */
static void sms_halves(void) {
  simclock_reset();
  CHECK(sms(0, SMS / 2, 100) == 100);
  CHECK(sms(0, SMS / 2, 100) == 100);
  CHECK(sms(0, SMS / 2, 100) == 200);
}

/* Started mid-way through a kernel that holds them all, a kernel wanting
 * half gets none until it ends: 100 + 100.  Beside one holding 12 of 16,
 * a kernel wanting 8 for 100 (800 SM-ns) started at 50 gets 4 to 100
 * (200 SM-ns), then its 8 for the 600 left: 75 more, 175.  A third,
 * wanting all 16 for 10 (160 SM-ns) from 0, is reserved last but gets
 * the 4 SMs the 12 left before 50: 40. */
static void sms_mid_way(void) {
  simclock_reset();
  CHECK(sms(0, SMS, 100) == 100);
  CHECK(sms(50, SMS / 2, 100) == 200);
  simclock_reset();
  CHECK(sms(0, 12, 100) == 100);
  CHECK(sms(50, 8, 100) == 175);
  CHECK(sms(0, SMS, 10) == 40);
  /* now [0,40) 16, [40,50) 12, [50,100) 16, [100,175) 8: 8 SMs for 10
   * from 90 get 8 at 100, 110 */
  CHECK(sms(90, 8, 10) == 110);
}

/* want 0 is 1, want above total is total (total 0 is 1), dur <= 0 (or
 * NaN) reserves nothing. */
static void sms_degenerate(void) {
  simclock_reset();
  CHECK(sms(0, 0, 100) == 100);
  /* 15 free to 100 (1500 SM-ns of 1600), then 16 for 6.25 */
  CHECK(sms(0, SMS, 100) == 106.25);
  simclock_reset();
  CHECK(sms(0, 4 * SMS, 100) == 100);
  CHECK(sms(0, 1, 100) == 200); /* it took them all */
  CHECK(sms(5, SMS, 0) == 5);
  CHECK(sms(5, SMS, -1) == 5);
  CHECK(sms(5, SMS, NAN) == 5);
  /* nothing was reserved by those: 15 free from 100 for 160 SM-ns */
  CHECK(sms(0, SMS, 10) == 100 + 160.0 / 15);
  simclock_reset();
  CHECK(simclock_sms_reserve(0, 0, 0, 4, 100) == 100);
  CHECK(simclock_sms_reserve(0, 0, 0, 0, 100) == 200);
  /* work past a double (want x dur overflows) holds no SMs: the next
   * kernel runs at once */
  simclock_reset();
  CHECK(sms(0, SMS, 1e308) == 1e308);
  CHECK(sms(0, SMS, 100) == 100);
}

/* Devices have SMs of their own; reset forgets every reservation. */
static void sms_devices_and_reset(void) {
  simclock_reset();
  CHECK(sms(0, SMS, 100) == 100);
  CHECK(simclock_sms_reserve(1, 0, SMS, SMS, 100) == 100);
  CHECK(simclock_sms_reserve(1, 0, SMS, SMS, 100) == 200);
  simclock_reset();
  CHECK(sms(0, SMS, 100) == 100);
  CHECK(simclock_sms_reserve(1, 0, SMS, SMS, 100) == 100);
}

/* Random kernels far along the clock, past the pruning of old steps:
 * each ends no earlier than ready + dur, none sooner than it could on the
 * SMs it wants, and every reservation returns.  Kernels wanting them all
 * from 0 end at the sum of their times. */
static void sms_random(void) {
  srand(3);
  simclock_reset();
  double base = 1e12;
  for (int i = 0; i < 200000; i++) {
    base += (rand() % 100) * 0.37;
    double ready = base + (rand() % 1000) * 1.3 - 500;
    double dur = (rand() % 500) * 0.71 + 0.001;
    unsigned want = 1 + (unsigned)(rand() % SMS);
    double end = sms(ready, want, dur);
    CHECK(end >= ready + dur - 1e-3);
  }
  simclock_reset();
  double sum = 0, last = 0;
  for (int i = 0; i < 1000; i++) {
    double d = 0.001 + (rand() % 1000) * 0.37;
    sum += d;
    last = sms(0, SMS, d);
  }
  CHECK(fabs(last - sum) <= 1e-6 * sum);
}

int main(void) {
  interleave();
  conserved();
  random_ends();
  sms_back_to_back();
  sms_halves();
  sms_mid_way();
  sms_degenerate();
  sms_devices_and_reset();
  sms_random();
  if (failures)
    return 1;
  puts("test_simclock: ok");
  return 0;
}
