/* The staged path's decode as measured (serve/staged/decode_probe.h): its
 * readings against what the model gave, the smallest recent one as the
 * scale, aged after IBP_CHOOSE_AGE_NS, and the pauses after failing event
 * calls -- doubling, capped, reset by a reading. */
#include <math.h>
#include <stdio.h>

#include "check.h"
#include "serve/choose/choose.h"
#include "serve/staged/decode_probe.h"

static int near(double a, double b) {
  return fabs(a - b) < 1e-9 * (fabs(b) + 1);
}

/* Readings: the decode alone where it ran slower (the latency left out),
 * whole where faster or the model is near its latency; within [1/16, 16]. */
static void test_readings(void) {
  ibp_decode_probe p = {0};
  CHECK(near(ibp__probe_read(&p, 40, 20, 4, 0), 36.0 / 16));
  CHECK(near(ibp__probe_read(&p, 10, 20, 4, 0), 0.5));
  CHECK(near(ibp__probe_read(&p, 14, 6, 4, 0), 14.0 / 6)); /* 6 < 2 x 4 */
  CHECK(near(ibp__probe_read(&p, 1000, 20, 0, 0), 16));
  CHECK(near(ibp__probe_read(&p, 0.1, 20, 0, 0), 1.0 / 16));
}

/* The scale: 1 unmeasured; the smallest of the last IBP_DECODE_PROBES
 * readings (one slow decode does not count); only readings not older
 * than IBP_CHOOSE_AGE_NS -- the model again once none is. */
static void test_scale(void) {
  ibp_decode_probe p = {0};
  CHECK(ibp__probe_scale(&p, 0) == 1.0);
  ibp__probe_read(&p, 40, 10, 0, 0);   /* 4x */
  ibp__probe_read(&p, 20, 10, 0, 1e6); /* 2x */
  ibp__probe_read(&p, 90, 10, 0, 2e6); /* 9x: a spike */
  CHECK(near(ibp__probe_scale(&p, 3e6), 2));
  /* the 4x and 2x pushed out by readings of 3x */
  ibp__probe_read(&p, 30, 10, 0, 4e6);
  ibp__probe_read(&p, 30, 10, 0, 5e6);
  CHECK(near(ibp__probe_scale(&p, 6e6), 3));
  /* the 3x ones aged, the 9x one first: then the model */
  CHECK(near(ibp__probe_scale(&p, 2e6 + IBP_CHOOSE_AGE_NS + 1), 3));
  CHECK(near(ibp__probe_scale(&p, 4e6 + IBP_CHOOSE_AGE_NS + 1), 3));
  CHECK(ibp__probe_scale(&p, 5e6 + IBP_CHOOSE_AGE_NS + 1) == 1.0);
  /* a fresh reading counts at once */
  ibp__probe_read(&p, 5, 10, 0, 3e9);
  CHECK(near(ibp__probe_scale(&p, 3e9), 0.5));
}

/* Pacing and pauses: due after its gap; a failure pauses it
 * IBP_CHOOSE_PAUSE_NS, twice as long each time in a row, at most
 * IBP_CHOOSE_PAUSE_MAX_NS; a reading resets the pause. */
static void test_pauses(void) {
  ibp_decode_probe p = {0};
  CHECK(ibp__probe_due(&p, 0));
  ibp__probe_timed(&p, 100, 400e3);
  CHECK(!ibp__probe_due(&p, 100 + 399e3) && ibp__probe_due(&p, 100 + 400e3));
  double now = 1e9, pause = IBP_CHOOSE_PAUSE_NS;
  for (int i = 0; i < 20; i++) {
    ibp__probe_failed(&p, now);
    CHECK(!ibp__probe_due(&p, now + pause - 1) &&
          ibp__probe_due(&p, now + pause));
    now += pause;
    pause = 2 * pause < IBP_CHOOSE_PAUSE_MAX_NS ? 2 * pause
                                                : IBP_CHOOSE_PAUSE_MAX_NS;
  }
  CHECK(pause == IBP_CHOOSE_PAUSE_MAX_NS);
  ibp__probe_read(&p, 10, 10, 0, now);
  ibp__probe_failed(&p, now);
  CHECK(ibp__probe_due(&p, now + IBP_CHOOSE_PAUSE_NS));
}

int main(void) {
  test_readings();
  test_scale();
  test_pauses();
  if (failures) {
    fprintf(stderr, "test_decode_probe: %d failures\n", failures);
    return 1;
  }
  printf("test_decode_probe: ok\n");
  return 0;
}
