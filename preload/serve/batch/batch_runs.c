/* A stream's expected batch from its runs (batch_runs.h). */
#include "serve/batch/batch_runs.h"

/* ASSUMPTION: copies per batch the gate expects of a stream before it has
 * seen RATE_EVERY of them within its runs (then: as many as arrive within
 * the deadline at the rate they arrive within a run, and no more than a run
 * of them -- the copies between two of the stream's ordering points). */
#define EXPECTED_PRIOR 16
#define RATE_EVERY 16
/* Runs a stream's mean run is smoothed over, about. */
#define RUN_SMOOTH 4

double ibp__batch_runs_offer(ibp_batch_runs *r, double now, uint64_t offered,
                             int ended, double held_cpu_ns, double deadline_ns,
                             uint32_t max_run) {
  /* the copies' rate within a run: the application's own time since the
   * last offer, plus what a held copy costs -- not what the path the last
   * one took cost (copies refused because they arrive slowly must not
   * arrive slowly because they were refused).  The time between runs says
   * nothing of the rate within one: sampled every 16th offer across
   * kv_offload's steps, 16 copies a step under driver calls 4x dearer read
   * as a batch of 4, which went alone */
  if (r->run && !ended) {
    const double app = (now - r->offered_ns - r->own_ns) / (double)offered;
    const double gap = (app > 0 ? app : 0) + held_cpu_ns;
    if (gap < deadline_ns) {
      r->offers += offered;
      const double w =
          (double)offered /
          (double)(r->offers < RATE_EVERY ? r->offers : RATE_EVERY);
      r->interval_ns += (w < 1 ? w : 1) * (gap - r->interval_ns);
    } else {
      ended = 1;
    }
  }
  r->offered_ns = now;
  r->own_ns = 0;
  /* the copies a quiet run took since the last offer came before the
   * ordering point or the gap (a quiet run ends at its stream's next
   * ordering point: ibp__batch_order_mark); a run longer than
   * a batch counts as one as long as a batch, so that one long run (no
   * ordering point for a million copies) moves the mean as far as a full
   * batch's, no further */
  if (ended && r->run) {
    r->run += offered - 1;
    offered = 1;
    r->runs++;
    const double w =
        1.0 / (double)(r->runs < RUN_SMOOTH ? r->runs : RUN_SMOOTH);
    const double run = r->run < max_run ? (double)r->run : (double)max_run;
    r->run_mean += w * (run - r->run_mean);
    r->run = 0;
  }
  r->run += offered;
  /* as many as arrive within the deadline at that rate, no more than a
   * run (the mean run's, or this one's where it is longer already) */
  double expect = r->offers >= RATE_EVERY && r->interval_ns > 0
                      ? deadline_ns / r->interval_ns
                      : EXPECTED_PRIOR;
  const double run =
      r->run_mean > (double)r->run ? r->run_mean : (double)r->run;
  if (r->runs && expect > run)
    expect = run;
  return expect;
}
