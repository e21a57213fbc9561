/*
 * A stream's expected batch from its runs (batch_runs.c; docs/ARCHITECTURE.md
 * "Batched launches"): a run is the copies offered between two of the
 * stream's ordering points, or two offers a deadline apart; the batch
 * expected is as many copies as arrive within the deadline at the rate
 * they arrive within a run, and no more than a run holds.
 */
#ifndef IBP_PRELOAD_BATCH_RUNS_H
#define IBP_PRELOAD_BATCH_RUNS_H

#include <stdint.h>

typedef struct ibp_batch_runs {
  uint64_t offers;    /* copies offered (held or not) within a run less than
                         a deadline after the one before: the within-run
                         rate's samples */
  double own_ns;      /* the modelled CPU time of the paths the copies
                         offered since the last offer took (held or not) */
  double interval_ns; /* between offers within a run were they all held,
                         smoothed; 0: not known yet */
  double offered_ns;  /* device clock at the last offer (run > 0) */
  uint64_t run;       /* copies offered in the current run (0: none offered
                         yet, ever) */
  uint64_t runs;      /* runs that ended, counted */
  double run_mean;    /* their copies (each max_run at most), smoothed */
} ibp_batch_runs;

/* An offer at device clock `now` of `offered` copies (the offered one and
 * those a quiet run left to the driver since the last offer: r->own_ns
 * already counts their modelled CPU time); `ended`: an ordering point of
 * the stream came since the last offer; `held_cpu_ns`: what holding a copy
 * costs the CPU; `max_run`: the most copies a batch holds.  Returns the
 * copies expected in the batch, before rounding and at least 1 is taken
 * (the caller's); r->own_ns starts again at 0. */
double ibp__batch_runs_offer(ibp_batch_runs *r, double now, uint64_t offered,
                             int ended, double held_cpu_ns, double deadline_ns,
                             uint32_t max_run);

#endif /* IBP_PRELOAD_BATCH_RUNS_H */
