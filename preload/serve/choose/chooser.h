/*
 * The chooser of a region on a device (chooser.c; docs/ARCHITECTURE.md
 * "The gate"): its classes' estimates (serve/choose/choose.h) under one
 * lock, and the timing of a bounded sample of copies with two events the
 * GPU stamps around each one's submission on the caller's stream.
 *
 * Timing rules: an event is never waited for -- a sample is read at a
 * later decision of the same region and device, once the model says it ran,
 * with cuEventElapsedTime, which answers CUDA_ERROR_NOT_READY until both
 * events completed; nothing is timed on a stream that is capturing (the
 * caller checks, and ibp__timing_begin checks again); every query and
 * event call runs in relaxed capture mode; a failing event call (create,
 * record, elapsed time) pauses timing in that copy's class for a while
 * (ibp__choose_timing_failed), with one info line per process, its copies
 * chosen meanwhile on what the class knows.  The events live in the
 * device slot's memory (serve/region.h, ibp_device_memory.timing) and end
 * with it.
 */
#ifndef IBP_PRELOAD_CHOOSER_H
#define IBP_PRELOAD_CHOOSER_H

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>

#include "profile/profile.h"
#include "serve/choose/choose.h"
#include "serve/region.h"
#include "stats/stats.h"

/* A timed copy as the streams table queued it (ibp__streams_queued), in
 * the estimates' units: the other streams' link work it waits for beyond
 * its own stream's (ahead_ns), and its own there (link_ns).  Where that
 * work took turns with it on the link, its span on the link, from its
 * stream's last work, holds their share besides its own, in proportion
 * (chooser.c, span_gpu_ns).  known = 0: not known (a batched launch or a
 * call's part, queued after it is timed). */
typedef struct ibp_timing_queue {
  int known;
  double ahead_ns, link_ns;
} ibp_timing_queue;

/* One timed copy, from its first event to its reading. */
typedef struct ibp_timing_sample {
  int state; /* 0 free, 1 being recorded, 2 recorded: waiting for the GPU */
  unsigned cls;
  ibp_route route;
  int marked;               /* the marker event was recorded before it */
  double mark_ns;           /* device clock from the marker to t0_ns: the
                               start events' calls */
  unsigned others;          /* events recorded on other streams whose work
                               queued before it it may wait for (contention) */
  unsigned others_gapped;   /* ... those whose work leaves gaps on the link
                               (ibp__streams_mark_others) */
  double due_ns;            /* device clock: not queried before (look) */
  double look;              /* due_ns is t0_ns, the calls and this many
                               times the model's span (chooser.c, look_at) */
  int explore;              /* an exploration (ibp__choose_settle) */
  double charged_ns;        /* ... what it was charged */
  double choice_ns;         /* ... the estimate of the choice it replaced */
  uint32_t explored_copies; /* ... the launch it stood for (a batch's
                               copies as costed; 0: one) */
  double runtime_ns;        /* the runtime's share of the model's CPU time */
  double timing_ns;         /* what timing it cost (model) */
  double t0_ns;             /* device clock after the first event */
  double cpu_ns;            /* measured: the submission on the calling thread */
  double cpu_model_ns;      /* the model's for the same calls */
  double lead_model_ns;     /* the model's CPU time before the route's first
                               GPU work (not the GPU's where its stream had
                               run dry: the marker says) */
  double setup_ns;          /* the model's GPU time before its first turn on
                               the link */
  double gpu_model_ns;      /* the model's GPU time (of a two-stage route, its
                               first stage: ibp_route_cost.sm_ns) */
  double sm_model_ns;       /* the model's second stage, not measured here */
  int pipelined;            /* ... and how it adds up (ibp__choose_gpu_ns) */
  int serial;               /* its CPU and GPU times add up (a batched
                               launch: its GPU work begins after its copies
                               were held, ibp_route_cost.serial) */
  double held_ns;           /* ... the model's CPU time of holding its
                               copies (their calls and holds), beside the
                               calls its span holds */
  int engine;       /* a copy-engine route: its calls are every route's calls */
  uint32_t copies;  /* the copies its launch carried (0: one) */
  CUstream stream;  /* where its span is timed (ev[0], ev[1]) */
  CUstream caller;  /* timed on another stream: the caller's, whose
                       span holds both stages (events
                       IBP_TIMING_CALLER..) */
  pthread_t thread; /* that named them (CU_STREAM_PER_THREAD is its own:
                       ibp__stream_same) */
  unsigned caller_others; /* its other streams' events */
  int dev;                /* its device */
  uint64_t own_mark;      /* libibp's own uploads there at its start
                             (ibp__streams_own_mark) */
  int probe;              /* a set-up probe (ibp_choice.probe) */
  double probe_base_ns, probe_setup_ns; /* ... its model's parts */
  ibp_timing_queue queue;               /* as it was queued */
} ibp_timing_sample;

/* A quiet run: copies alike the one that opened it -- one class, one
 * stream, one `key` (the caller's: what else the priors depend on) -- left
 * to the driver without a decision each, as many as the classes' last
 * decisions promise (ibp__choose_quiet): the driver's copy took it
 * untimed and unexplored, and so did the batched class it was offered to
 * first.  What they would have counted is counted when the run ends
 * (ibp__choose_quiet_take): before either class decides again. */
typedef struct ibp_quiet_run {
  uint64_t key;
  CUstream stream;
  pthread_t thread;    /* that named it (ibp__stream_same) */
  ibp_route route;     /* the copies' (the driver's; a hold run: batched) */
  uint32_t left;       /* copies it may still take */
  uint32_t taken;      /* taken, not yet counted in the classes */
  uint32_t unreported; /* taken, not yet told to the stream's batch */
  int stale;           /* counted since another class of a key it touches
                          decided: takes nothing until weighed again */
  unsigned also;       /* the batched class (IBP_CHOOSE_CLASSES: none) */
  ibp_route also_route;
  uint64_t learnt; /* ibp_chooser.learnt at its opening */
  uint64_t order;  /* its stream's ordering mark at its opening
                      (ibp_route_copy.order_mark; 0: none ends it) */
  double until_ns; /* device clock: it ends */
  double est_ns;   /* the driver's copy's estimate, each */
  double own_ns;   /* what the batch's rate counts as its own, each */
} ibp_quiet_run;

struct ibp_route_copy;

/* The most copies a quiet run takes: what was learnt meanwhile (samples
 * read by other classes' decisions) is weighed this often at least. */
#define IBP_QUIET_MOST 64
/* Runs open at once per device slot (one per class and stream in use;
 * the oldest is ended for another). */
#define IBP_QUIET_OPEN 8

/* A copy libibp queued on the link on another stream than timed copies'
 * while they ran (serve/choose/beside.h): the event after it on `stream`
 * (ibp_device_memory.beside) says whether it shared their spans. */
typedef struct ibp_beside {
  CUstream stream;
  double link_ns;   /* its estimated time on the link */
  uint32_t waiting; /* bit i: sample i may have run beside it, not read yet
                       (0: a free entry) */
  int queued;       /* the copy and the event after it are queued */
  unsigned gen;     /* its owner's (ibp__beside_begin): a freed entry taken
                       again is not the first owner's to end */
} ibp_beside;

typedef struct ibp_chooser {
  pthread_mutex_t lock;
  ibp_timing_sample sample[IBP_TIMING_SAMPLES];
  _Atomic uint32_t live; /* bit i: sample i is not free (lock-free reads) */
  ibp_beside beside[IBP_TIMING_BESIDE];
  ibp_choose_class cls[IBP_CHOOSE_CLASSES];
  ibp_choose_route know[IBP_CHOOSE_KEYS][IBP_ROUTES]; /* the classes' */
  ibp_choose_route calls; /* the copy-engine routes' calls, every class's */
  /* per route, the timed copies: how many, what they took, what the model
   * gave them (ns) */
  uint64_t timed[IBP_ROUTES];
  double measured_ns[IBP_ROUTES], model_ns[IBP_ROUTES];
  double cpu_ns[IBP_ROUTES], cpu_model_ns[IBP_ROUTES];
  _Atomic uint64_t ran[IBP_ROUTES];        /* copies by the route that ran */
  ibp_quiet_run quiet[IBP_CHOOSE_CLASSES]; /* per single class */
  unsigned open[IBP_QUIET_OPEN];           /* the runs not yet counted */
  unsigned nopen;
  uint64_t learnt; /* samples read */
} ibp_chooser;

/* Slot's chooser, made on first use; NULL on out of memory (the caller
 * then takes the model's choice). */
ibp_chooser *ibp__chooser_of(ibp_device_slot *slot);

/* Adds what ch saw of each route to out[] (the statistics; under its
 * lock). */
void ibp__chooser_figures(ibp_chooser *ch, ibp_stat_route out[IBP_STAT_ROUTES]);

/* Frees a chooser (with its served region; its events are the slot's). */
void ibp__chooser_free(ibp_chooser *ch);

/* What timing one copy costs on profile p, ns: three event records (its
 * start, its end, the marker) and two readings. */
double ibp__timing_cost_ns(const ibp_profile *p);

/* Decides a copy of class cls (ibp__choose_class_index) of region s on the
 * slot's device among the routes prior[] leaves open (timable: as
 * ibp__choose_decide; IBP_FORCE_ROUTE narrows them): reads the samples
 * the GPU has finished first (never waits).  dry: a look only.  ch NULL:
 * the model's choice.  Returns out->route; counts explored copies in s's
 * statistics. */
ibp_route ibp__chooser_decide(ibp_served_region *s, ibp_device_slot *slot,
                              ibp_chooser *ch, const ibp_profile *p,
                              unsigned cls,
                              const ibp_route_cost prior[IBP_ROUTES],
                              unsigned timable, int dry, ibp_choice *out);

/* A decision *c of class cls that asked for timing will not be timed
 * after all: an exploration's charge stands. */
void ibp__chooser_untimed(ibp_chooser *ch, unsigned cls, const ibp_choice *c);

/* Copies of the chooser's region ran by route r: what ran, whatever was
 * decided first (a staged copy the ring could not take, a held copy whose
 * batched launch was declined; the statistics' per-route copies).  Any
 * thread; lock-free. */
void ibp__chooser_ran(ibp_chooser *ch, ibp_route r, uint64_t copies);

/* After single class cls's decision c left a copy to the driver untimed
 * and unexplored (and, where x->alone >= 0, its batched class's left it
 * alone so too): opens a quiet run for the copies alike (`key`, stream)
 * that follow, until the stream's next ordering point where
 * x->order_mark says so.  Returns the copies it may take (0: none). */
uint32_t ibp__chooser_quiet_open(ibp_chooser *ch, unsigned cls,
                                 const ibp_choice *c,
                                 const struct ibp_route_copy *x, uint64_t key);

/* A hold run: after batched class cls's decision c held a copy untimed
 * and unexplored (a row of a gather), the copies alike (`key`: what its
 * batch's priors were made of, stream) that follow are held with no
 * decision each, as many as the class's decision promises. */
uint32_t ibp__chooser_hold_open(ibp_chooser *ch, unsigned cls,
                                const ibp_choice *c, uint64_t key,
                                CUstream stream);

/* A copy of class cls alike the run's (key, stream; `order`: its stream's
 * ordering mark, 1 + ibp__batch_order_mark, where the run was opened with
 * one): taken by the run (1; *est_ns: the estimate of the run's route) or
 * not (0: decide it). */
int ibp__chooser_quiet_take(ibp_chooser *ch, unsigned cls, uint64_t key,
                            CUstream stream, uint64_t order, double *est_ns);

/* The copies of stream's run in class cls not yet told to its batch
 * (x->skipped, x->skipped_own_ns), now told. */
void ibp__chooser_quiet_report(ibp_chooser *ch, unsigned cls, CUstream stream,
                               struct ibp_route_copy *x);

/* A timing in progress (index -1: not timed). */
typedef struct ibp_timing {
  int index;
  CUevent start;   /* deferred: the first event, for the route to record */
  double aside_ns; /* the span's CPU time that was not the route's (the
                      caller's to set before ibp__timing_end) */
} ibp_timing;

/* Starts timing a copy of class cls by route c->route (decided by
 * ibp__chooser_decide, which asked for it: c->timed) on `stream` (not
 * capturing; the slot's context current), where the route's work on the
 * link runs -- the caller's stream, or the staged path's copy stream for
 * caller stream `caller` (neither is another stream the span may wait
 * for): records the first event -- or, deferred, leaves it to the route
 * (t->start: recorded where its work on the link may begin, after what
 * else it waits for; ibp__timing_end is then told whether it was).
 * prior: the route's model cost for it; runtime_ns: the share of
 * prior->cpu_ns the runtime spends before libibp sees the copy; lead_ns:
 * the model's CPU time before the route's first GPU work; setup_ns: its GPU
 * time before its first turn on the link (ibp_route_ops.setup_ns); dev: the
 * device, whose other streams still running libibp's work
 * (ibp__streams_others) get an event each, so that the span is not charged
 * for waiting behind them.  Before the first event a marker is recorded on
 * the slot's stream that runs nothing (ibp_device_memory.mark): the host's
 * moment on the GPU's clock, so that a span whose stream ran dry before the
 * route's calls queued its work is not charged for those calls.  queue:
 * as the streams table queued it (NULL: not known).  Leaves
 * t->index -1 when the copy is not timed (no free sample, capturing, an event
 * call failed). */
void ibp__timing_begin(ibp_device_slot *slot, ibp_chooser *ch,
                       const ibp_profile *p, CUstream stream, CUstream caller,
                       unsigned cls, const ibp_choice *c,
                       const ibp_route_cost *prior, double runtime_ns,
                       double lead_ns, double setup_ns, int deferred, int dev,
                       const ibp_timing_queue *queue, ibp_timing *t);

/* Ends the timing t after the copy's submission: records the second
 * event.  submitted = 0: the copy was not queued after all (the sample is
 * dropped). */
void ibp__timing_end(ibp_device_slot *slot, ibp_chooser *ch, CUstream stream,
                     ibp_timing *t, int submitted);

#endif /* IBP_PRELOAD_CHOOSER_H */
