/* A stream's expected batch from its runs (serve/batch/batch_runs.c): the
 * copies between two of its ordering points bound the batch expected, and
 * the time between runs does not slow the rate within one. */
#include <stdio.h>
#include <string.h>

#include "serve/batch/batch_runs.h"

static int failures;

#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c);    \
      failures++;                                                              \
    }                                                                          \
  } while (0)

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

int main(void) {
  ibp_batch_runs r;
  int over;
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
