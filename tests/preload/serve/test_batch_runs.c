/* A stream's expected batch from its runs (serve/batch/batch_runs.c): the
 * copies between two of its ordering points bound the batch expected, and
 * the time between runs does not slow the rate within one. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "serve/batch/batch_runs.h"

#define DEADLINE_NS 200e3
#define HELD_NS 2e3
#define MAX_RUN 256

/* `steps` steps of k copies `gap_ns` apart, an ordering point (a
 * cuStreamSynchronize, or a unified DtoH copy: hooks_copy.c counts both)
 * and `pause_ns` of the step's own work after each; the batch expected at
 * each copy after the first steps is at most k, and the last is returned. */
static double steps_of(ibp_batch_runs *r, unsigned k, unsigned steps,
                       double gap_ns, double pause_ns, int *over) {
  double now = 1e6, expect = 0;
  int ended = 0;
  *over = 0;
  for (unsigned s = 0; s < steps; s++) {
    for (unsigned i = 0; i < k; i++) {
      expect = ibp__batch_runs_offer(r, now, 1, ended, HELD_NS, DEADLINE_NS,
                                     MAX_RUN);
      ended = 0;
      if (s >= 2 && expect > k + 1e-9)
        *over = 1;
      now += gap_ns;
    }
    ended = 1; /* the step's ordering point */
    now += pause_ns;
  }
  return expect;
}

/* One offer of n copies at `now`, the paths they took costing own_ns. */
static double offer(ibp_batch_runs *r, double now, uint64_t n, int ended,
                    double own_ns) {
  r->own_ns += own_ns;
  return ibp__batch_runs_offer(r, now, n, ended, HELD_NS, DEADLINE_NS, MAX_RUN);
}

/* The first copies: EXPECTED_PRIOR (16) until RATE_EVERY (16) copies of a
 * run were timed, whatever the runs so far; a first offer is no rate
 * sample and ends no run. */
static void test_first(void) {
  ibp_batch_runs r;
  memset(&r, 0, sizeof r);
  CHECK(offer(&r, 1e3, 1, 1, 0) == 16);
  CHECK(r.offers == 0 && r.runs == 0 && r.run == 1);
  memset(&r, 0, sizeof r);
  offer(&r, 1e3, 1, 0, 0); /* 1 us after the clock's start */
  CHECK(r.offers == 0 && r.interval_ns == 0);
  memset(&r, 0, sizeof r);
  offer(&r, 1e3, 1, 1, 0);
  double e = 0, now = 1e3;
  for (int i = 0; i < 3; i++) /* 3 us a copy: 66.7 a deadline */
    e = offer(&r, now += 1e3, 1, 0, 0);
  CHECK(e == 16);
  for (int i = 0; i < 16; i++)
    e = offer(&r, now += 1e3, 1, 0, 0);
  CHECK(e > 66 && e < 67);
  /* offers of several copies count each: 4 offers of 5 are 20 samples */
  memset(&r, 0, sizeof r);
  offer(&r, now = 1e6, 1, 0, 0);
  for (int i = 0; i < 4; i++)
    e = offer(&r, now += 5e3, 5, 0, 0);
  CHECK(r.run == 21);
  CHECK(e > 66 && e < 67); /* 1 us a copy, not 5 */
}

/* The within-run rate: the application's time per copy (the paths' own
 * taken out, never below 0) plus a held copy's cost; the first sample
 * taken whole, a later one weighing its copies' share, at most all. */
static void test_rate(void) {
  ibp_batch_runs r;
  memset(&r, 0, sizeof r);
  double now = 1e6;
  offer(&r, now, 1, 0, 0);
  offer(&r, now += 1e3, 1, 0, 5e3); /* paths dearer than the gap */
  CHECK(r.interval_ns == HELD_NS);
  memset(&r, 0, sizeof r);
  offer(&r, now = 1e6, 1, 0, 0);
  offer(&r, now += 7e3, 1, 0, 0);
  CHECK(r.interval_ns == 9e3);
  for (int i = 0; i < 20; i++)
    offer(&r, now += 1e3, 1, 0, 0);
  CHECK(r.interval_ns > 3e3 && r.interval_ns < 3.3e3); /* 9 us fading */
  /* 32 copies 5 us apart at once: their rate, not past it */
  offer(&r, now += 32 * 5e3, 32, 0, 0);
  CHECK(r.interval_ns > 7e3 - 1 && r.interval_ns < 7e3 + 1);
  /* own_ns counts for one offer */
  memset(&r, 0, sizeof r);
  offer(&r, now = 1e6, 1, 0, 0);
  offer(&r, now += 300e3, 1, 0, 250e3); /* 50 us the application's */
  CHECK(r.runs == 0 && r.run == 2);
  offer(&r, now += 300e3, 1, 0, 0);
  CHECK(r.runs == 1 && r.run == 1);
}

/* A run ends where the next copy comes a deadline or more after the last
 * (the held copy's cost counted), not before. */
static void test_deadline(void) {
  const double apps[] = {178e3, 197e3, 198e3, 199e3, 218e3};
  const int ends[] = {0, 0, 1, 1, 1};
  for (int i = 0; i < 5; i++) {
    ibp_batch_runs r;
    memset(&r, 0, sizeof r);
    offer(&r, 1e6, 1, 0, 0);
    offer(&r, 1e6 + apps[i], 1, 0, 0);
    CHECK(r.runs == (uint64_t)ends[i]);
  }
}

/* Runs: a quiet run's copies since the last offer count in the run that
 * ended (15 quiet of 16 a step: runs of 16), copies offered together
 * within a run count each; the mean smoothed over about RUN_SMOOTH (4)
 * runs; a run longer than the mean is expected whole. */
static void test_runs(void) {
  ibp_batch_runs r;
  memset(&r, 0, sizeof r);
  double now = 1e6, e = 0;
  for (int s = 0; s < 10; s++, now += 5e6)
    e = offer(&r, now, 1 + (s ? 15 : 0), s > 0, 0);
  CHECK(r.run_mean > 16 - 1e-9 && r.run_mean < 16 + 1e-9);
  CHECK(e > 16 - 1e-9 && e < 16 + 1e-9);
  CHECK(r.run == 1);
  /* runs of 4, then one of 16: the mean moves a quarter of the way */
  memset(&r, 0, sizeof r);
  now = 1e6;
  for (int s = 0; s < 12; s++)
    for (int i = 0; i < 4; i++)
      offer(&r, now += 1e3, 1, i == 0, 0);
  for (int i = 0; i < 16; i++)
    e = offer(&r, now += 1e3, 1, i == 0, 0);
  CHECK(e > 16 - 1e-9 && e < 16 + 1e-9); /* the run so far */
  offer(&r, now += 1e3, 1, 1, 0);
  CHECK(r.run_mean > 7 - 1e-9 && r.run_mean < 7 + 1e-9);
}

int main(void) {
  ibp_batch_runs r;
  int over;
  test_first();
  test_rate();
  test_deadline();
  test_runs();
  /* copies 1 us apart: the rate alone expects 100 a batch; runs of 4, 8,
   * 16 bound it (steps a long pause apart, or none) */
  const unsigned ks[] = {4, 8, 16};
  for (unsigned i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    memset(&r, 0, sizeof r);
    const double e = steps_of(&r, ks[i], 40, 1e3, 5e6, &over);
    CHECK(!over);
    CHECK(e >= ks[i] - 1e-9 && e <= ks[i] + 1e-9);
    memset(&r, 0, sizeof r);
    steps_of(&r, ks[i], 40, 1e3, 0, &over);
    CHECK(!over);
  }
  /* the pause between steps does not count in the rate: 16 copies a step
   * 10 us apart (20 fit the deadline), steps 5 ms apart, expect 16 */
  memset(&r, 0, sizeof r);
  CHECK(steps_of(&r, 16, 40, 10e3, 5e6, &over) > 15.9);
  /* a first run of a million copies with no ordering point counts as a
   * batch at most: 24 runs of 4 bring the batch expected below 5 (4 once
   * rounded down; unclamped, a mean of a million took 50) */
  memset(&r, 0, sizeof r);
  double now = 1e6;
  for (unsigned i = 0; i < 1000000; i++, now += 1e3)
    ibp__batch_runs_offer(&r, now, 1, 0, HELD_NS, DEADLINE_NS, MAX_RUN);
  CHECK(r.run_mean == 0 && r.run == 1000000);
  double e = 0;
  for (unsigned s = 0; s < 24; s++)
    for (unsigned i = 0; i < 4; i++, now += 1e3)
      e = ibp__batch_runs_offer(&r, now, 1, i == 0, HELD_NS, DEADLINE_NS,
                                MAX_RUN);
  CHECK(r.run_mean < 5);
  CHECK(e < 5);
  /* a copy two deadlines after the last ends the run too */
  memset(&r, 0, sizeof r);
  now = 1e6;
  for (unsigned s = 0; s < 20; s++, now += 2 * DEADLINE_NS)
    for (unsigned i = 0; i < 3; i++, now += 1e3)
      e = ibp__batch_runs_offer(&r, now, 1, 0, HELD_NS, DEADLINE_NS, MAX_RUN);
  CHECK(e <= 3 + 1e-9);
  if (failures)
    fprintf(stderr, "test_batch_runs: %d failures\n", failures);
  return failures != 0;
}
