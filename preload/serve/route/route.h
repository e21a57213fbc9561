/*
 * A route: one way to make a host-to-device copy (docs/ARCHITECTURE.md
 * "The copy path", "The gate").  Every route fills the same small table,
 * ibp_route_ops -- whether it can serve this copy, what it would cost by
 * the device's profile (its prior), how to submit it, and what to know
 * when it is timed -- in a file of its own (route_driver.c,
 * route_zerocopy.c, route_staged.c, route_batched.c), and has one row in
 * stats/routes.def, which makes the table (serve/route/table.h).  The
 * chooser (serve/choose/) alone weighs the priors against what was
 * measured and picks; a route never asks another route or the chooser.
 *
 * A copy is described once (ibp_route_copy, filled by the copy path,
 * serve/substitute.c, or by a stream's batch, serve/batch/batch.c); the
 * routes read it, and write only their own part of it (the staged plan).
 * Threads: a description is the calling thread's.
 */
#ifndef IBP_PRELOAD_ROUTE_H
#define IBP_PRELOAD_ROUTE_H

#include <cuda.h>
#include <stdint.h>

#include "ibp_kernels.h"
#include "profile/profile.h"
#include "registry/registry.h"
#include "serve/choose/choose.h"
#include "serve/choose/gate.h"
#include "serve/copy.h"
#include "serve/region.h"
#include "serve/staged/staged.h"

/* Over the stored bytes, what a copy's first and last partial sectors
 * add to a kernel's PCIe reads, on average (bench/README.md, bench_pcie). */
#define IBP_ROUTE_SECTOR_SLACK 32

/* One copy as the routes see it. */
typedef struct ibp_route_copy {
  const ibp_copy *c;
  ibp_region_rec *r;
  ibp_served_region *s;
  ibp_device_slot *slot;   /* the region on the copy's device */
  const ibp_profile *p;    /* that device's cost profile */
  const ibp_profile *hope; /* p at its hope where its decode is a guess
                              (ibp__gate_guessed, ibp__gate_hope), else
                              NULL */
  CUcontext ctx;           /* current */
  int dev;
  ibp_class_mode mode;  /* single, or a copy that may be held for a batch */
  unsigned busy;        /* 0: its stream runs none of libibp's earlier work,
                           by the chooser's estimates; else how many of the
                           device's streams do, its own included
                           (ibp__streams_busy) */
  int busy_known;       /* busy was asked already (a quiet run's look) */
  double link_ahead_ns; /* the link's queued work still to run, every
                           stream's (ibp__streams_link_ahead_ns): what hides
                           a route's lead on an idle stream */
  int compact;          /* the region's memory is the shadow's (compact.h) */
  ibp_gate_copy g;      /* as the model sees it */
  double sync_ns;       /* the write tracker's sync of its span, modelled: what
                           a route that serves it alone spends first (the
                           driver's copy, which reads the pages, spares it) */
  double driver_ns;     /* the driver's copy's model (ns), weighed or not
                           (ibp__route_priors): what another route saves */
  /* a single copy's launch, prepared once (between its decision and its
   * launch: `launching` held) */
  ibp_decompress_args a;
  ibp_kernel_plan plan;
  ibp_staged_plan sp; /* route_staged's plan, made by its prior */
  /* a timed copy's start event where its route records it (link_stream:
   * after what its work there waits for), NULL: none; started: it did */
  CUevent start;
  int started;
  /* ... and the CPU time within its span that timed something of its own
   * (the staged path's decode probe), not the route's calls */
  double aside_ns;
  /* a copy that may be held: the batch it would join */
  uint32_t batch_n;  /* copies the batch is expected to hold */
  double scan_ns;    /* the write tracker's scan at its flush */
  double batched_ns; /* route_batched's, made by its prior: its model per
                        copy (ns), before the margin and the scan */
  /* the copy path's (serve/substitute.c): why the copy went to the
   * driver (IBP_PASSED_*), counted once at its end; -1: it did not */
  int passed;
  /* a quiet run (serve/choose/chooser.h): the batched class the copy was
   * offered to and left (IBP_CHOOSE_CLASSES: none), its decision there
   * (`alone`, untimed and unexplored, else -1); and the copies of its
   * stream runs left to the driver undecided since the last offer, with
   * their modelled CPU time (what the batch's rate counts as its own) */
  unsigned batch_cls;
  int alone;
  int time_alone; /* that class explored going alone: the copy's decision
                     alone is timed, whatever its credit (what the batched
                     class learns its driver's cost from) */
  double alone_own_ns;
  uint32_t skipped;
  double skipped_own_ns;
  /* counted in its stream's run of copies (batch.c): offered to the batch
   * (hold_locked) or taken by a quiet run -- its own call to the driver
   * then ends no run (ibp__serve_htod's 2) */
  int in_run;
  /* a quiet run it opens ends where its stream's ordering points pass
   * this mark (1 + ibp__batch_order_mark; 0: at none -- its own copy ends
   * its stream's run, in_run 0) */
  uint64_t order_mark;
} ibp_route_copy;

/* What a route's submit answers. */
enum {
  IBP_SUBMIT_QUEUED = 0,  /* queued on the copy's stream */
  IBP_SUBMIT_NOT_NOW = 1, /* nothing was queued: it cannot take the copy now
                             (the staged ring has no free buffer); the next
                             route by the decision's estimates takes it */
  IBP_SUBMIT_FAILED = -1, /* failed (*err); work queued before the failure
                             wrote correct bytes, and the application's own
                             copy, queued after it, rewrites them all */
  IBP_SUBMIT_CUT = 2      /* a part queued, then it could not take the rest
                             now (no staged buffer free of other streams'
                             work): as a failure, but none -- it is no
                             reason to give the region up */
};

typedef struct ibp_route_ops {
  /* What a failure is called in the warning ("kernel launch"). */
  const char *what;
  /* Whether the route can serve copy x at all: IBP_PATH, how the copy
   * came (x->mode), what its region's memory is.  Checked before its
   * prior; a route that cannot is not weighed. */
  int (*feasible)(const ibp_route_copy *x);
  /* Its prior: the model's cost of x on x->p (docs/ARCHITECTURE.md "The
   * gate").  Both terms 0: it cannot serve this copy after all (the staged
   * path could not plan it). */
  ibp_route_cost (*prior)(ibp_route_copy *x);
  /* Its lead: the model's CPU time before its first GPU work, ns (a timed
   * copy on an idle stream: the span's part that is the calls'). */
  double (*lead_ns)(const ibp_profile *p);
  /* Its set-up: the model's GPU time before its first turn on the link, ns
   * (a copy's engine set-up, a kernel's launch latency), which may run
   * while another stream's transfer holds the link -- a timed span started
   * at that transfer's end does not hold it, and gets it back
   * (serve/choose/chooser.c, contention). */
  double (*setup_ns)(const ibp_profile *p);
  /* Queues x by this route on x->c->stream (the caller times it, and
   * synchronises a synchronous entry point): IBP_SUBMIT_*.  NULL: the
   * route is submitted where it is decided (a held copy: its stream's
   * batch, serve/batch/batch.c). */
  int (*submit)(ibp_route_copy *x, CUresult *err);
  /* The stream its work on the link runs on, where not x->c->stream (the
   * staged path's copy stream): a timed copy's span is taken there, and
   * other streams' spans may wait for it; its submit then records the
   * span's start there (x->start, x->started), after anything its work
   * waits for that is not the link.  NULL (the op or its answer): the
   * copy's own stream, the start recorded before the submission.  Called
   * only for the route decided. */
  CUstream (*link_stream)(ibp_route_copy *x);
  /* The bytes it read over PCIe serving x (the statistics).  NULL: none
   * of libibp's (the driver's copy). */
  uint64_t (*pcie_bytes)(const ibp_route_copy *x);
  /* Its prior is a plan of the copy's bytes as the tracker last saw them
   * (a tensor written since is read raw): made again once the copy's sync
   * has run, before it is submitted (serve/substitute.c). */
  int replans;
} ibp_route_ops;

#endif /* IBP_PRELOAD_ROUTE_H */
