/*
 * The chooser (choose.c; docs/ARCHITECTURE.md "The gate"): the one place
 * that picks a copy's route and owns what is known of each route's cost
 * where it runs.
 *
 * Each route (the driver's copy, the zero-copy kernel, the staged path)
 * gives, for one copy, the model's cost on the device's profile
 * (docs/PROFILE.md): the calling thread's time and the GPU's.  That is the
 * prior.  For each class of copies (ibp__choose_class_index: the copy's
 * size in powers of two, whether the caller's stream was busy, single or
 * batched) the chooser keeps per route what the copies it timed measured
 * against the model's figures for them (a ratio for the CPU's time and one
 * for the GPU's, the smallest of the last few); a route's estimate is its prior
 * times its ratios, and the copy takes the route with the smallest estimate,
 * sticking with the class's last choice unless another one is clearly better
 * (hysteresis).  Now and then, within a budget of what it may cost, an
 * alternative is explored (taken and timed), backing off while it keeps
 * measuring worse.
 *
 * The decision logic (this header's ibp__choose_* functions on one class)
 * is pure: no CUDA call, no clock, no lock; serve/choose/timing.h times
 * the copies and feeds the results back.  Threads: a class is touched under
 * its table's lock (ibp_chooser.lock).
 */
#ifndef IBP_PRELOAD_CHOOSE_H
#define IBP_PRELOAD_CHOOSE_H

#include <stdint.h>

/* The routes a copy may take (docs/ARCHITECTURE.md "The gate"): a single
 * copy among the first three (serve/substitute.c), a copy that may be held
 * for a batched launch between BATCHED and going alone
 * (serve/batch/batch.c). */
typedef enum ibp_route {
/* DRIVER: the driver's own copy; ZEROCOPY: the kernel reads the streams
 * over PCIe; STAGED: the copy engine moves them, the kernel decodes;
 * BATCHED: held for its stream's batched launch (stats/routes.def) */
#define IBP_ROUTE(name, text, ops) IBP_ROUTE_##name,
#include "stats/routes.def"
#undef IBP_ROUTE
  IBP_ROUTES
} ibp_route;

/* How a copy arrived: on its own, held for a batched launch, or as an
 * entry of the application's own batch (serve/batch/batch_call.h). */
typedef enum ibp_class_mode {
  IBP_CLASS_SINGLE = 0,
  IBP_CLASS_BATCHED = 1,
  IBP_CLASS_APP_BATCH = 2,
  IBP_CLASS_MODES
} ibp_class_mode;

/* Size classes: floor(log2(bytes)), 0 .. IBP_CHOOSE_SIZES - 1 (larger
 * copies share the last).  A class is a size, whether the copy's stream was
 * busy, and how it came (the mode).  What is known of the routes is kept
 * per size and busy (a *key*): a single copy and a held one of the same
 * size learn from each other's timed copies of the routes both can
 * take. */
#define IBP_CHOOSE_SIZES 40
#define IBP_CHOOSE_KEYS (IBP_CHOOSE_SIZES * 2)
#define IBP_CHOOSE_CLASSES (IBP_CHOOSE_KEYS * IBP_CLASS_MODES)

/* Below this many timed copies of a route in a class its ratios are not
 * used: a class whose chosen route measures worse than its prior says
 * leaves it after 2 timed copies of it (the first copy, then one per
 * timing_ns / (IBP_CHOOSE_TIMING_SHARE x its estimate) copies: 21 copies of
 * 50 us at 2 us a timing; tests/preload/serve/test_choose.c). */
#define IBP_CHOOSE_MIN_SAMPLES 2
/* A ratio within this much of 1 counts as 1: the model is right there. */
#define IBP_CHOOSE_DEAD_BAND 0.06
/* Another route replaces the class's last choice only when its estimate is
 * smaller by this share -- IBP_CHOOSE_HYSTERESIS_OWN where the class timed
 * both itself (each judged on its own copies, a two-stage route in its
 * whole spans too): issue R's bound on what the gate may lose is 2 %, and
 * KV restores whose staged span measured 3.8 % dearer than the driver's
 * copy kept it at 5 % (a100-pcie4 under a link 1.5x as wide, 0.973 of the
 * driver's time).  Not 2 % throughout: weight streams flapped into batched
 * launches estimated a little cheaper and far dearer as they ran
 * (a100-pcie4 at truth = prior, bench/ab line 03: 1.123 -> 1.089; 1.123
 * with the narrow band only where both are judged so). */
#define IBP_CHOOSE_HYSTERESIS 0.05
#define IBP_CHOOSE_HYSTERESIS_OWN 0.02
/* Exploration may cost at most this share of the class's copies'
 * estimated time; timing the chosen route at most this share (beyond the
 * class's first copy, timed at once). */
#define IBP_CHOOSE_EXPLORE_SHARE 0.01
#define IBP_CHOOSE_TIMING_SHARE 0.002
/* A chosen route with too few fresh timed copies to be judged is timed
 * beyond the timing share: the class's first copy, then one in this many
 * of the class. */
#define IBP_CHOOSE_UNJUDGED_EVERY 8
/* The exploration credit saved up at most, in explorations of the
 * cheapest alternative: a class whose alternatives all wait does not
 * save up for a burst of them. */
#define IBP_CHOOSE_EXPLORE_CREDIT_MAX 2.0
/* An unjudged choice, seen dearer than its estimate by its first timed
 * copies, counts as this many times its estimate at most in an early
 * exploration's loan (driver calls 4x dearer: the driver's entries seen at
 * 1.8x). */
#define IBP_CHOOSE_SEEN_MAX 2.0
/* An unmeasured route's exploration is charged this share of its estimate
 * besides its estimated excess (the prior may be that wrong). */
#define IBP_CHOOSE_UNMEASURED 1.0
/* An early exploration (a guessed route that could win, explored before
 * the share covers it) borrows at most what the exploration share earns
 * in this many of the class's copies: where the prior is right, a bet on
 * the hope costs a run of that many copies at most the share again. */
#define IBP_CHOOSE_EARLY_REPAY 256
/* A span measured dearer than its model may be a dearer set-up instead of
 * a slower link; a hope reads it so, the set-up up to this many times its
 * model (as wide as the decode terms' hope, IBP_GATE_GUESS_SPAN). */
#define IBP_CHOOSE_SETUP_SPAN 4.0
/* The driver's copy hoped for where a route of libibp's is the choice and
 * its copy-engine windows saw the link faster than modelled
 * (link_seen_cheaper): explored early while its hope is below the
 * choice's estimate plus this share of it -- a faster link is the
 * driver's more than the windows show (their spans hold waits the one
 * copy does not: h100-pcie5 under a link twice as wide, 512 KiB staged
 * windows read 0.63-0.67 of their model, the driver's copy 0.55), so its
 * hope is doubted in its favour. */
#define IBP_CHOOSE_DRIVER_DOUBT 0.25
/* The driver's entries' set-up in an application's batch call is measured
 * by a set-up probe: a timed driver part with one entry in
 * IBP_CHOOSE_PROBE_EVERY copied as two halves (each at least
 * IBP_CHOOSE_PROBE_MIN bytes), whose span against a timed call's ratio
 * says what an entry's set-up costs (ibp__choose_learn_setup) -- the same
 * bytes, as many more set-ups.  Paired (IBP_PROBE_PAIRED): the class's
 * first timed call made as two driver calls, its first half whole, then
 * its second probed; halved (IBP_PROBE_HALVED): a later timed call
 * probed whole, where that reading alone makes a route hopeful and no
 * paired probe measured it.  At most IBP_CHOOSE_PROBES tries that come to
 * nothing (dropped, not timed); then the reading stands. */
enum { IBP_PROBE_NONE, IBP_PROBE_HALVED, IBP_PROBE_PAIRED };
#define IBP_CHOOSE_PROBE_EVERY 2
#define IBP_CHOOSE_PROBE_MIN 256
#define IBP_CHOOSE_PROBES 2
/* After an exploration a route waits IBP_CHOOSE_WAIT_COPIES << backoff
 * copies before the next; backoff grows by one each time it measured
 * worse than the class's choice (at most IBP_CHOOSE_BACKOFF_MAX), and is
 * reset when it measured better. */
#define IBP_CHOOSE_WAIT_COPIES 16
#define IBP_CHOOSE_BACKOFF_MAX 12
/* A timed copy counts in its route's estimate for this long (ns, the
 * device's clock): a GPU whose clocks, load or neighbours change is
 * noticed -- a route whose samples all aged is unmeasured again, and
 * explored first. */
#define IBP_CHOOSE_AGE_NS 2e9
/* A failing event call pauses timing in its class for this long (ns),
 * twice as long after each failure in a row, at most IBP_CHOOSE_PAUSE_MAX_NS.
 */
#define IBP_CHOOSE_PAUSE_NS 1e6
#define IBP_CHOOSE_PAUSE_MAX_NS 1e10

/* A route's cost for one copy, in ns: the calling thread's time and the
 * GPU's, which copies back to back overlap (the model's figure is the
 * larger, docs/ARCHITECTURE.md "The gate").  Both 0: the route is not open
 * for the copy. */
typedef struct ibp_route_cost {
  double cpu_ns;
  double gpu_ns;
  int serial;     /* the two add up instead: a batched launch's GPU work
                     starts after its copies were held (serve/choose/gate.h) */
  double once_ns; /* what exploring it costs while another route is the
                     choice (a batch of the copies it takes, explores),
                     where that is more than as many copies at its model;
                     0: as much */
  int guessed;    /* its decode terms were never measured with the running
                     decoder (docs/PROFILE.md, "Which decoder the decode
                     terms are of"): while the class has not measured it,
                     it is the first alternative explored, as soon as the
                     exploration share covers it */
  /* A route of two GPU stages (the staged path): gpu_ns is then its first,
   * on the link or the copy engine -- what its timed copies measure and
   * its ratio scales -- and sm_ns its second, a decode in device memory
   * (measured apart: serve/staged/staged.c's decode probe), which follows
   * it (0: none).  pipelined: copies back to back overlap one's first
   * stage with another's second, and only the slower counts; otherwise
   * they add up. */
  double sm_ns;
  int pipelined;
  int engine;      /* gpu_ns is a copy-engine transfer alone (the driver's copy,
                      the staged path's windows): what it measures, the link and
                      the calls, holds for every such route (choose.c,
                      inherit) */
  double own_ns;   /* of cpu_ns, libibp's own work (holding a copy, the
                      tracker's scan), which the calls' measured ratio
                      does not scale */
  uint32_t copies; /* the copies one launch of it carries, as costed (a
                      batch's; 0: one): its ratios are taken from timed
                      launches of a like size only (choose.c, alike) */
  double lead_ns;  /* of cpu_ns, what runs before its first GPU work where
                      the copy's stream is idle: the GPU waits for it, so
                      it adds to the GPU's time instead of overlapping it
                      (0: the stream's queued work covers it); libibp's own
                      work comes first in it (own_ns, up to lead_ns) */
  /* A guessed route's GPU terms (gpu_ns, sm_ns) were the running decoder
   * as fast as it may be (ibp__gate_hope): whether it could win at all,
   * which is what makes it worth exploring early (0, 0: not guessed). */
  double hope_gpu_ns, hope_sm_ns;
  uint32_t explores; /* the copies an exploration of it takes (0: one): an
                        explored batched launch is joined by the class's
                        copies that follow (serve/batch/batch.c), and what
                        exploring costs is theirs together */
  double setup_ns;   /* of gpu_ns, the copy engine's set-up: a span measured
                        dearer may be it instead of the link (choose.c,
                        hoped_link) */
  int probeable;     /* a set-up probe may measure it (IBP_CHOOSE_PROBE_EVERY:
                        an entry of an application's call of entries alike) */
} ibp_route_cost;

/* Route cost c's GPU time with its first stage's time scaled by gr (the
 * link ratio its class measured). */
double ibp__choose_gpu_ns(const ibp_route_cost *c, double gr);

/* Route cost c as the model alone gives it (no ratio measured). */
double ibp__choose_model_ns(const ibp_route_cost *c);

/* Timed copies a route's ratios are taken from: the smallest of the last
 * IBP_CHOOSE_WINDOW not older than IBP_CHOOSE_AGE_NS, so that one copy
 * slowed by something else (a spike) does not count against its route,
 * while a route that measures slower copy after copy does -- in either
 * direction: measured dearer than modelled is believed as much as
 * cheaper. */
#define IBP_CHOOSE_WINDOW 4
/* Launches of copies within this factor of each other are alike: a
 * route's ratios measured on one stand for the other. */
#define IBP_CHOOSE_LIKE 4.0

/* Whether launches of a and b copies (0: one) are alike. */
int ibp__choose_alike(uint32_t a, uint32_t b);

/* A large single copy is explored on a part of it (its first
 * 1/IBP_CHOOSE_EXPLORE_PARTS, at least IBP_CHOOSE_EXPLORE_PART_MIN bytes,
 * ending on a tensor's end), the driver copying the rest: an exploration
 * costs what its part costs, however wrong the prior is.  Under decodes
 * 4x slower than h100-pcie5 says, one early staged exploration of a
 * 15 MiB KV prefix restore took 834 us against the driver's 289 -- a
 * quarter of a 10-copy run.  The part's ratios stand for the copy's, as
 * another copy of its class would: the model's fixed costs are in both.
 * An eighth: a staged part's decodes run beside the rest's copy, which
 * hides them; a smaller part left the link idle while the calls of the
 * part were made (driver calls 4x dearer: 1/32 0.978 of the driver's
 * time, 1/16 0.983, 1/8 0.991; whole 0.985). */
#define IBP_CHOOSE_EXPLORE_PARTS 8
#define IBP_CHOOSE_EXPLORE_PART_MIN (256u << 10)

/* The bytes of the part a copy of `bytes` from region offset `off`
 * (tensors of R bytes) is explored on; 0: explored whole (a part would be
 * a quarter of it or more). */
uint64_t ibp__choose_explore_part(uint64_t off, uint64_t bytes, uint64_t R);

/* What is known of one route in a key (shared by the key's modes). */
typedef struct ibp_choose_route {
  double cpu_seen[IBP_CHOOSE_WINDOW], gpu_seen[IBP_CHOOSE_WINDOW];
  double seen_ns[IBP_CHOOSE_WINDOW];       /* when each was read */
  uint32_t seen_copies[IBP_CHOOSE_WINDOW]; /* its launch's copies */
  uint32_t samples;                        /* timed copies */
  uint32_t pending;                        /* explorations not yet settled */
  uint32_t wait; /* copies before it may be explored again */
  uint32_t backoff;
  uint64_t chosen;   /* copies decided for it */
  uint64_t explored; /* of those, explorations */
  /* a two-stage route's whole span over the model's joining of its stages
   * (ibp__choose_learn_whole): of the fresh ones, the smaller of two, the
   * median of 3 or more (choose.c, middle) */
  double whole_seen[IBP_CHOOSE_WINDOW], whole_ns[IBP_CHOOSE_WINDOW];
  uint32_t wholes;
  /* the copy engine's set-up as a set-up probe measured it, over its
   * model (ibp__choose_learn_setup), on a launch of setup_copies copies
   * (0: never), at setup_at_ns; probes asked and not read yet (the last
   * at setup_asked_ns: one unread for IBP_CHOOSE_AGE_NS is given up),
   * and tries made that came to nothing since the last reading */
  double setup_seen, setup_at_ns, setup_asked_ns;
  uint32_t setup_copies, setup_pending, setup_failed;
} ibp_choose_route;

/* What a class's last assessment read of its state (choose.c,
 * read_state). */
typedef struct ibp_choose_read {
  uint32_t samples[IBP_ROUTES], wholes[IBP_ROUTES];
  uint32_t flags[IBP_ROUTES]; /* waiting, pending, backed off, explored few,
                                 set-up probed or not */
  double setups[IBP_ROUTES];  /* when its set-up was measured (0: never) */
  uint32_t twins[IBP_ROUTES]; /* the twin's samples and wholes */
  uint32_t calls;             /* samples of the calls */
  int served, last;
} ibp_choose_read;

/* A class's last assessment: what its decision weighed before the credits
 * (the estimates, the choice, the alternative and what exploring it
 * costs), kept with what it was made of -- a copy with the same priors,
 * while the class's windows and states are as they were and no sample it
 * counted has aged, is decided on it (choose.c, assessed). */
typedef struct ibp_choose_assessed {
  int valid;
  ibp_route_cost prior[IBP_ROUTES];
  ibp_choose_read read;
  unsigned timable;
  double timing_ns, at_ns;
  double timing_cost_ns; /* timing_ns at the calls as measured */
  double
      oldest_ns; /* the oldest sample it counted (it stands until that ages) */
  double model[IBP_ROUTES], est[IBP_ROUTES], cpu[IBP_ROUTES];
  int modelled, go, alt, early, go_judged;
  int go_doubted;    /* go not judged, its one timing off its model */
  int go_whole_open; /* go a two-stage route whose wholes are not judged */
  int probe;         /* the choice's copy probes its set-up (IBP_PROBE_HALVED:
                        before alt is explored; IBP_PROBE_PAIRED: as it is timed) */
  double cost, choice_ns;
} ibp_choose_assessed;

/* One class of copies of a region on a device. */
typedef struct ibp_choose_class {
  ibp_choose_route *route; /* IBP_ROUTES: its key's (ibp__choose_class_init) */
  /* the calls as every class of the region on the device measured them
   * (ibp__choose_learn_calls; NULL: none): driver calls dearer than
   * modelled are so for copies of any size */
  const ibp_choose_route *calls;
  /* the routes of the key of its size on a stream the other way busy
   * (ibp__choose_twin; NULL: none): a route it has not judged takes
   * their judged ratios (choose.c, twinned) */
  const ibp_choose_route *twin;
  int last;           /* the last choice, -1 before the first */
  uint64_t copies;    /* decided */
  uint64_t explored;  /* copies that took an alternative to time it */
  uint64_t overruled; /* copies whose choice was not the model's (measured
                         costs said otherwise; explorations not counted) */
  double spent_ns;    /* the chosen routes' estimates, summed */
  double explore_ns;  /* what explorations cost over the choice, estimated */
  double explore_credit_ns, timing_credit_ns;
  double explore_cap_ns;          /* the exploration credit saved up at most */
  double paused_until_ns;         /* timing paused (an event call failed) */
  double pause_ns;                /* the next pause's length */
  uint64_t unjudged_next;         /* copies before an unjudged choice is timed
                                     beyond the share again */
  uint64_t unjudged_doubted_next; /* the same, its prior in doubt (a timed
                                     copy measured it off its model) */
  ibp_choose_assessed assessed;   /* the last (choose.c, assessed) */
} ibp_choose_class;

/* A decision. */
typedef struct ibp_choice {
  ibp_route route;
  int timed;         /* time this copy (serve/choose/timing.h) */
  int explore;       /* it takes an alternative, to measure it */
  int modelled;      /* the route the model alone would take */
  double charged_ns; /* an exploration's cost as estimated, charged to the
                        budget (ibp__choose_settle corrects it) */
  double choice_ns;  /* the estimate of the class's choice (which an
                        exploration stands in for) */
  ibp_route chosen;  /* the class's choice (an exploration's: the route it
                        stands in for) */
  uint32_t copies;   /* the copies the route taken was costed for (its
                        ibp_route_cost.copies) */
  double est_ns[IBP_ROUTES]; /* each open route's estimate (0: closed) */
  double cpu_ns;             /* the calling thread's term of the route
                                taken's estimate (its calls as measured) */
  int probe;            /* timed as a set-up probe (IBP_CHOOSE_PROBE_EVERY): the
                           driver's part of its call with entries halved
                           (IBP_PROBE_HALVED), or its second half so after its
                           first whole (IBP_PROBE_PAIRED) */
  double probe_base_ns; /* ... the model's GPU time of that part whole */
  double probe_setup_ns; /* ... and of the set-ups the halves add */
} ibp_choice;

/* The class of a copy of `bytes` bytes; busy: its stream had work
 * queued. */
unsigned ibp__choose_class_index(uint64_t bytes, int busy, ibp_class_mode mode);

/* The key of class cls (the index of its routes' knowledge). */
unsigned ibp__choose_key(unsigned cls);

/* The key of key's size on a stream the other way busy. */
unsigned ibp__choose_twin(unsigned key);

/* A key's routes, nothing known; then a class of that key. */
void ibp__choose_routes_init(ibp_choose_route route[IBP_ROUTES]);
void ibp__choose_class_init(ibp_choose_class *k,
                            ibp_choose_route route[IBP_ROUTES]);

/* Route r's ratios at now_ns for launches of `copies` copies (0: one),
 * measured over modelled on launches of a like size (1 where too few fresh
 * timed copies or within the dead band). */
void ibp__choose_ratios(const ibp_choose_class *k, ibp_route r, uint32_t copies,
                        double now_ns, double *cpu, double *gpu);

/* Route r's estimate for a copy whose model cost is c: c's larger term
 * (their sum when c->serial), each term scaled by what the class measured
 * (when it has). */
double ibp__choose_estimate(const ibp_choose_class *k, ibp_route r,
                            const ibp_route_cost *c, double now_ns);

/* Decides a copy of class k among the routes whose prior[] is open, at
 * now_ns on the device's clock.  timable: the routes whose copies of this
 * class can be timed (bit r: route r); only those are timed or explored.
 * timing_ns: what timing a copy costs (two event records and their
 * reading).  learn = 0: the model alone (no measurement used, nothing
 * explored or timed: timing is off).  dry: only looks (nothing counted, no
 * credit spent).  Returns out->route. */
ibp_route ibp__choose_decide(ibp_choose_class *k,
                             const ibp_route_cost prior[IBP_ROUTES],
                             unsigned timable, double timing_ns, int learn,
                             int dry, double now_ns, ibp_choice *out);

/* A quiet run (serve/choose/chooser.h): after a decision of class k that
 * took `route` neither timed nor explored, how many more copies alike
 * (the same priors and timable routes, nothing learnt meanwhile, before
 * *until_ns on the device's clock) would be decided the same way -- at
 * most `most`; 0 unless every other open route's estimate exceeds the
 * choice's by IBP_CHOOSE_QUIET_MARGIN (copies of one size class differ a
 * little in what they store).  Pure, like ibp__choose_decide. */
#define IBP_CHOOSE_QUIET_MARGIN 0.10
uint32_t ibp__choose_quiet(const ibp_choose_class *k, ibp_route route,
                           double now_ns, uint32_t most, double *until_ns);

/* Counts n copies of class k decided as its last assessment decides
 * them, `route` untimed -- what n decisions would have counted and spent
 * -- without deciding each.  Returns how many of them such a decision
 * would have left untimed and unexplored (those ibp__choose_quiet
 * promised); the others are counted all the same, their credits saved and
 * none spent (they went to `route`, untimed). */
uint32_t ibp__choose_quiet_take(ibp_choose_class *k, ibp_route route,
                                uint32_t n);

/* A timed launch of route r in class k carrying `copies` copies (0: one),
 * read at now_ns, took cpu_ns on the calling thread and gpu_ns on the GPU,
 * where the model said cpu_model_ns and gpu_model_ns.  Folds them into the
 * route's ratios. */
void ibp__choose_learn(ibp_choose_class *k, ibp_route r, uint32_t copies,
                       double cpu_ns, double cpu_model_ns, double gpu_ns,
                       double gpu_model_ns, double now_ns);

/* A timed copy of a copy-engine route (ibp_route_cost.engine) took cpu_ns
 * on the calling thread where the model said cpu_model_ns: its calls'
 * ratio, kept in *calls for every class (ibp_choose_class.calls). */
void ibp__choose_learn_calls(ibp_choose_route *calls, double cpu_ns,
                             double cpu_model_ns, double now_ns);

/* A timed copy of two-stage route r in class k, read at now_ns, the
 * class's choice (not an exploration): its whole span -- both stages as
 * they overlapped -- took `ratio` times the model's joining of them with
 * its first stage as measured.  Scales the route's GPU estimate. */
void ibp__choose_learn_whole(ibp_choose_class *k, ibp_route r, double ratio,
                             double now_ns);

/* An explored copy of two-stage route r read its latency at `ratio` of
 * the model's joining of its stages (its whole span, or from its first
 * stage's start where that began before it): alone among other routes'
 * copies, no less than what it adds to a stream of its like, so a bound, learnt
 * only where the route's wholes are not judged (read as the model's joining)
 * and it reads less (a route that lost its class before its wholes were judged
 * is explored, never chosen: without it its estimate stayed at the model's
 * joining, decodes 2x dearer than they ran, for good). */
void ibp__choose_learn_whole_bound(ibp_choose_class *k, ibp_route r,
                                   double ratio, double now_ns);

/* An exploration of route r charged charged_ns (ibp_choice.charged_ns)
 * turned out to cost excess_ns more than the class's choice would have
 * (measured, the timing included; < 0: never measured, the charge
 * stands): the budget is corrected by the difference, so exploration
 * stays within its share of what the copies really took.  worse: it
 * measured dearer than the choice -- it backs off further; otherwise it is
 * explored freely again. */
void ibp__choose_settle(ibp_choose_class *k, ibp_route r, double charged_ns,
                        double excess_ns, int worse);

/* A set-up probe of route r in class k (ibp_choice.probe) carrying
 * `copies` copies, read at now_ns, took gpu_ns on the GPU: base_ns the
 * model's for its copies whole, setup_ns for the set-ups its halves add.
 * Against the route's last timed launches alike (their ratio), what the
 * added set-ups took over setup_ns is the set-up's ratio, kept within
 * [0, IBP_CHOOSE_SETUP_SPAN] for the hope to read (choose.c, hoped_link).
 * gpu_ns < 0: the probe came to nothing (not timed, dropped). */
void ibp__choose_learn_setup(ibp_choose_class *k, ibp_route r, uint32_t copies,
                             double gpu_ns, double base_ns, double setup_ns,
                             double now_ns);

/* A set-up probe of route r in class k (ibp_choice.probe) was not made
 * after all (its call timed for another class, not timed, its entries
 * too small to halve): no longer under way, no try spent. */
void ibp__choose_probe_release(ibp_choose_class *k, ibp_route r);

/* An event call failed while timing a copy of class k at now_ns: its
 * copies are not timed (nor explored) for a while, longer after each
 * failure in a row; a timed copy read since ends the row. */
void ibp__choose_timing_failed(ibp_choose_class *k, double now_ns);

#endif /* IBP_PRELOAD_CHOOSE_H */
