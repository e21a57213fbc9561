/* The chooser of a region on a device: its lock, its classes, and the
 * timed copies (serve/choose/chooser.h; docs/ARCHITECTURE.md "The gate"). */
#include "serve/choose/chooser.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/clock.h"
#include "base/driver.h"
#include "base/log.h"
#include "serve/choose/beside.h"
#include "serve/choose/streams.h"
#include "serve/route/route.h"
#include "stats/stats.h"

enum { SAMPLE_FREE = 0, SAMPLE_RECORDING = 1, SAMPLE_PENDING = 2 };

/* Queries and event creation run in relaxed capture mode: they must not
 * invalidate another thread's capture (docs/ARCHITECTURE.md "Nothing under
 * capture"). */
static CUstreamCaptureMode relaxed(const ibp_driver *d) {
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (d->cuThreadExchangeStreamCaptureMode)
    d->cuThreadExchangeStreamCaptureMode(&mode);
  return mode;
}

static void restore(const ibp_driver *d, CUstreamCaptureMode mode) {
  if (d->cuThreadExchangeStreamCaptureMode)
    d->cuThreadExchangeStreamCaptureMode(&mode);
}

/* Something a run's promise was made of changed outside a decision (a
 * sample read, an exploration settled, timing paused): the runs take no
 * more (lock held). */
static void quiet_count_all(ibp_chooser *ch);

static void changed(ibp_chooser *ch) {
  quiet_count_all(ch);
  ch->learnt++;
}

ibp_chooser *ibp__chooser_of(ibp_device_slot *slot) {
  ibp_chooser *ch = atomic_load_explicit(&slot->chooser, memory_order_acquire);
  if (ch)
    return ch;
  ch = calloc(1, sizeof *ch);
  if (!ch)
    return NULL;
  if (pthread_mutex_init(&ch->lock, NULL) != 0) {
    free(ch);
    return NULL;
  }
  for (unsigned k = 0; k < IBP_CHOOSE_KEYS; k++)
    ibp__choose_routes_init(ch->know[k]);
  for (unsigned k = 0; k < IBP_CHOOSE_CLASSES; k++) {
    ibp__choose_class_init(&ch->cls[k], ch->know[ibp__choose_key(k)]);
    ch->cls[k].calls = &ch->calls;
    ch->cls[k].twin = ch->know[ibp__choose_twin(ibp__choose_key(k))];
  }
  ibp_chooser *none = NULL;
  if (atomic_compare_exchange_strong_explicit(&slot->chooser, &none, ch,
                                              memory_order_acq_rel,
                                              memory_order_acquire))
    return ch;
  ibp__chooser_free(ch); /* another thread's came first */
  return none;
}

void ibp__chooser_free(ibp_chooser *ch) {
  if (!ch)
    return;
  pthread_mutex_destroy(&ch->lock);
  free(ch);
}

void ibp__chooser_figures(ibp_chooser *ch,
                          ibp_stat_route out[IBP_STAT_ROUTES]) {
  if (!ch)
    return;
  pthread_mutex_lock(&ch->lock);
  for (int r = 0; r < IBP_ROUTES; r++) {
    out[r].timed += ch->timed[r];
    out[r].measured_ns += ch->measured_ns[r];
    out[r].model_ns += ch->model_ns[r];
    out[r].cpu_ns += ch->cpu_ns[r];
    out[r].cpu_model_ns += ch->cpu_model_ns[r];
  }
  for (int r = 0; r < IBP_ROUTES; r++)
    out[r].copies += atomic_load_explicit(&ch->ran[r], memory_order_relaxed);
  for (unsigned key = 0; key < IBP_CHOOSE_KEYS; key++)
    for (int r = 0; r < IBP_ROUTES; r++)
      out[r].explored += ch->know[key][r].explored;
  for (unsigned c = 0; c < IBP_CHOOSE_CLASSES; c++)
    if (ch->cls[c].copies && ch->cls[c].last >= 0)
      out[ch->cls[c].last].classes++;
  pthread_mutex_unlock(&ch->lock);
}

void ibp__chooser_untimed(ibp_chooser *ch, unsigned cls, const ibp_choice *c) {
  if (!ch || cls >= IBP_CHOOSE_CLASSES || (!c->explore && !c->probe))
    return;
  pthread_mutex_lock(&ch->lock);
  changed(ch);
  if (c->explore)
    ibp__choose_settle(&ch->cls[cls], c->route, c->charged_ns, -1, 0);
  if (c->probe) /* not made */
    ibp__choose_probe_release(&ch->cls[cls], c->route);
  pthread_mutex_unlock(&ch->lock);
}

void ibp__chooser_ran(ibp_chooser *ch, ibp_route r, uint64_t copies) {
  if (ch && (unsigned)r < IBP_ROUTES)
    atomic_fetch_add_explicit(&ch->ran[r], copies, memory_order_relaxed);
}

/* ---- quiet runs (chooser.h) ---------------------------------------------
 *
 * A run's copies are counted in its classes when it ends, or when another
 * class of a key it touches decides for real (quiet_close_for): then it
 * is stale -- that decision moved what its promise was made of (the
 * routes' waits and states, which the classes of a key share) -- and takes
 * nothing more until another run's opening weighs it again
 * (quiet_promise). */

/* The countdowns a copy of a run of class cls (and batched class also)
 * makes on key's routes' waits: each of its decisions counts them down
 * (choose.c, count). */
static unsigned dec_of(unsigned cls, unsigned also, unsigned key) {
  return (ibp__choose_key(cls) == key) +
         (also < IBP_CHOOSE_CLASSES && ibp__choose_key(also) == key);
}

/* The copies a run of class cls (batched class also) may take before a
 * wait of a key it touches could run out, the open runs' promises but its
 * own counted down first (lock held): a wait run out changes what the
 * assessments read. */
static uint32_t wait_room(const ibp_chooser *ch, unsigned cls, unsigned also,
                          uint32_t most) {
  const unsigned keys[2] = {ibp__choose_key(cls), also < IBP_CHOOSE_CLASSES
                                                      ? ibp__choose_key(also)
                                                      : ibp__choose_key(cls)};
  for (int i = 0; i < 2; i++) {
    const unsigned key = keys[i], d = dec_of(cls, also, key);
    uint64_t promised = 0;
    for (unsigned k = 0; k < ch->nopen; k++) {
      const ibp_quiet_run *q = &ch->quiet[ch->open[k]];
      if (ch->open[k] != cls && !q->stale)
        promised += (uint64_t)q->left * dec_of(ch->open[k], q->also, key);
    }
    for (int r = 0; r < IBP_ROUTES; r++) {
      const uint64_t w = ch->know[key][r].wait;
      if (w) {
        const uint64_t room = w > promised ? (w - promised) / d : 0;
        most = room < most ? (uint32_t)room : most;
      }
    }
  }
  return most;
}

static void quiet_count(ibp_chooser *ch, unsigned cls, ibp_quiet_run *q);

/* The copies the open runs other than class self's have promised class
 * x's decisions (as theirs or as their batched class's), their taken
 * copies counted first (lock held). */
static uint64_t promised_on(ibp_chooser *ch, unsigned x, unsigned self) {
  uint64_t p = 0;
  for (unsigned k = 0; k < ch->nopen; k++) {
    ibp_quiet_run *q = &ch->quiet[ch->open[k]];
    if (ch->open[k] != self && (ch->open[k] == x || q->also == x)) {
      quiet_count(ch, ch->open[k], q);
      p += q->stale ? 0 : q->left;
    }
  }
  return p;
}

/* At most `most` of the next copies of class x that its last decision
 * would decide quietly by `route`, past what the other runs promised it
 * (lock held). */
static uint32_t promise_of(ibp_chooser *ch, unsigned x, ibp_route route,
                           unsigned self, uint32_t most, double now,
                           double *until) {
  const uint64_t others = promised_on(ch, x, self), want = most + others;
  const uint32_t h =
      ibp__choose_quiet(&ch->cls[x], route, now,
                        want < UINT32_MAX ? (uint32_t)want : UINT32_MAX, until);
  return h > others ? (uint32_t)(h - others < most ? h - others : most) : 0;
}

/* What a run of class cls may promise now, at most `most` copies (lock
 * held): as many as both its classes' last decisions would decide alike
 * quietly and the waits allow -- its batched class's decisions shared
 * with the other open runs offered to it (their copies counted first,
 * their promises taken off) -- and no further than a timing sample falls
 * due (its reading changes what the classes know); *until_ns: when it
 * ends at the latest. */
static uint32_t quiet_promise(ibp_chooser *ch, unsigned cls, ibp_route route,
                              unsigned also, ibp_route also_route,
                              uint32_t most, double now, double *until_ns) {
  double until = 1e300, until_also = 1e300;
  uint32_t n = wait_room(ch, cls, also, most);
  if (n)
    n = promise_of(ch, cls, route, cls, n, now, &until);
  if (n && also < IBP_CHOOSE_CLASSES)
    n = promise_of(ch, also, also_route, cls, n, now, &until_also);
  for (int i = 0; i < IBP_TIMING_SAMPLES; i++)
    if (ch->sample[i].state == SAMPLE_PENDING && ch->sample[i].due_ns < until)
      until = ch->sample[i].due_ns;
  if (until_also < until)
    until = until_also;
  if (until <= now)
    n = 0;
  *until_ns = n ? until : now;
  return n;
}

/* Counts run q's taken copies in its classes (lock held). */
static void quiet_count(ibp_chooser *ch, unsigned cls, ibp_quiet_run *q) {
  if (q->taken) {
    ibp__choose_quiet_take(&ch->cls[cls], q->route, q->taken);
    if (q->also < IBP_CHOOSE_CLASSES)
      ibp__choose_quiet_take(&ch->cls[q->also], q->also_route, q->taken);
  }
  q->taken = 0;
}

/* Counts every open run's taken copies (lock held): before what they were
 * promised on changes. */
static void quiet_count_all(ibp_chooser *ch) {
  for (unsigned k = 0; k < ch->nopen; k++)
    quiet_count(ch, ch->open[k], &ch->quiet[ch->open[k]]);
}

/* Counts and ends open run k (lock held); what its stream's batch was not
 * told stays for it. */
static void quiet_close(ibp_chooser *ch, unsigned k) {
  ibp_quiet_run *q = &ch->quiet[ch->open[k]];
  quiet_count(ch, ch->open[k], q);
  q->left = 0;
  q->stale = 0;
  ch->open[k] = ch->open[--ch->nopen];
}

/* Before class cls decides for real (lock held): its own run ends; the
 * runs of classes of its key, or whose batched class is of it, are
 * counted and go stale. */
static void quiet_close_for(ibp_chooser *ch, unsigned cls) {
  const unsigned key = ibp__choose_key(cls);
  for (unsigned k = 0; k < ch->nopen;) {
    ibp_quiet_run *q = &ch->quiet[ch->open[k]];
    if (ch->open[k] == cls) {
      quiet_close(ch, k);
      continue;
    }
    if (dec_of(ch->open[k], q->also, key)) {
      quiet_count(ch, ch->open[k], q);
      q->stale = 1;
    }
    k++;
  }
}

/* Opens class cls's run of route c->route (lock not held): see
 * ibp__chooser_quiet_open; also: the batched class the copies were
 * offered to first (IBP_CHOOSE_CLASSES: none), own_ns what the batch's
 * rate counts as its own per copy. */
static uint32_t open_run(ibp_chooser *ch, unsigned cls, const ibp_choice *c,
                         uint64_t key, CUstream stream, uint64_t order,
                         unsigned also, ibp_route also_route, double own_ns) {
  pthread_mutex_lock(&ch->lock);
  quiet_close_for(ch, cls);
  const double now = ibp__clock_ns();
  double until = now;
  /* the class's last decision is c's (another thread's may have come
   * between: a promise on its priors would not be c's) */
  const ibp_choose_assessed *a = &ch->cls[cls].assessed;
  const uint32_t n = a->valid && memcmp(a->est, c->est_ns, sizeof a->est) == 0
                         ? quiet_promise(ch, cls, c->route, also, also_route,
                                         IBP_QUIET_MOST, now, &until)
                         : 0;
  if (n) {
    if (ch->nopen == IBP_QUIET_OPEN)
      quiet_close(ch, 0);
    ibp_quiet_run *q = &ch->quiet[cls];
    const uint32_t unreported =
        ibp__stream_same(q->stream, q->thread, stream) ? q->unreported : 0;
    *q = (ibp_quiet_run){.key = key,
                         .stream = stream,
                         .thread = pthread_self(),
                         .route = c->route,
                         .left = n,
                         .unreported = unreported,
                         .also = also,
                         .also_route = also_route,
                         .learnt = ch->learnt,
                         .order = order,
                         .until_ns = until,
                         .est_ns = c->est_ns[c->route],
                         .own_ns = own_ns};
    ch->open[ch->nopen++] = cls;
  }
  /* the stale runs weighed again, now that the decisions that moved
   * their promises are made */
  for (unsigned k = 0; k < ch->nopen; k++) {
    ibp_quiet_run *q = &ch->quiet[ch->open[k]];
    if (!q->stale)
      continue;
    q->stale = 0;
    q->left = q->left && q->learnt == ch->learnt
                  ? quiet_promise(ch, ch->open[k], q->route, q->also,
                                  q->also_route, q->left, now, &q->until_ns)
                  : 0;
  }
  pthread_mutex_unlock(&ch->lock);
  return n;
}

uint32_t ibp__chooser_quiet_open(ibp_chooser *ch, unsigned cls,
                                 const ibp_choice *c,
                                 const struct ibp_route_copy *x, uint64_t key) {
  if (!ch || cls >= IBP_CHOOSE_CLASSES || c->route != IBP_ROUTE_DRIVER ||
      c->timed || c->explore ||
      (x->batch_cls < IBP_CHOOSE_CLASSES &&
       (x->alone < 0 || x->batch_cls == cls)))
    return 0;
  return open_run(ch, cls, c, key, x->c->stream, x->order_mark, x->batch_cls,
                  (ibp_route)(x->alone >= 0 ? x->alone : 0), x->alone_own_ns);
}

uint32_t ibp__chooser_hold_open(ibp_chooser *ch, unsigned cls,
                                const ibp_choice *c, uint64_t key,
                                CUstream stream) {
  if (!ch || cls >= IBP_CHOOSE_CLASSES || c->route != IBP_ROUTE_BATCHED ||
      c->timed || c->explore)
    return 0;
  return open_run(ch, cls, c, key, stream, 0, IBP_CHOOSE_CLASSES, 0, 0);
}

int ibp__chooser_quiet_take(ibp_chooser *ch, unsigned cls, uint64_t key,
                            CUstream stream, uint64_t order, double *est_ns) {
  if (!ch || cls >= IBP_CHOOSE_CLASSES)
    return 0;
  pthread_mutex_lock(&ch->lock);
  ibp_quiet_run *q = &ch->quiet[cls];
  const int take = q->left && !q->stale && q->key == key &&
                   ibp__stream_same(q->stream, q->thread, stream) &&
                   q->learnt == ch->learnt &&
                   (!q->order || q->order == order) &&
                   ibp__clock_ns() < q->until_ns;
  if (take) {
    q->left--;
    q->taken++;
    q->unreported++;
    *est_ns = q->est_ns;
  } else {
    q->left = 0; /* counted at the class's next decision */
  }
  pthread_mutex_unlock(&ch->lock);
  return take;
}

void ibp__chooser_quiet_report(ibp_chooser *ch, unsigned cls, CUstream stream,
                               struct ibp_route_copy *x) {
  x->skipped = 0;
  x->skipped_own_ns = 0;
  if (!ch || cls >= IBP_CHOOSE_CLASSES)
    return;
  pthread_mutex_lock(&ch->lock);
  ibp_quiet_run *q = &ch->quiet[cls];
  if (ibp__stream_same(q->stream, q->thread, stream) && q->unreported) {
    x->skipped = q->unreported;
    x->skipped_own_ns = q->unreported * q->own_ns;
    q->unreported = 0;
  }
  pthread_mutex_unlock(&ch->lock);
}

double ibp__timing_cost_ns(const ibp_profile *p) {
  /* three records and two elapsed times: driver calls each */
  return 5e3 * p->driver_call_us;
}

/* An event call failed timing a copy of class cls: timing pauses in that
 * class (lock held).  One line per process, at info level: the copies are
 * served as the class's estimates choose them, and a failing driver call
 * usually has its own warning where it matters (docs/ARCHITECTURE.md
 * "Fail open"). */
static void timing_failed(ibp_chooser *ch, unsigned cls, const char *what,
                          CUresult e) {
  static atomic_int told;
  changed(ch);
  ibp__choose_timing_failed(&ch->cls[cls], ibp__clock_ns());
  if (atomic_exchange(&told, 1) == 0)
    ibp__log(IBP_LOG_INFO,
             "timing a copy: %s failed (CUresult %d); timing pauses for "
             "copies like it, which are chosen on what was measured so far "
             "(docs/ARCHITECTURE.md, \"The gate\")",
             what, (int)e);
}

/* Sample x is free again (lock held): read or dropped. */
static void sample_free(ibp_chooser *ch, ibp_timing_sample *x) {
  const int i = (int)(x - ch->sample);
  x->state = SAMPLE_FREE;
  atomic_fetch_and_explicit(&ch->live, ~(1u << i), memory_order_relaxed);
  ibp__beside_forget(ch, i);
}

/* A sample dropped before it was read (lock held): an exploration's
 * charge stands. */
static void drop(ibp_chooser *ch, ibp_timing_sample *x) {
  changed(ch);
  if (x->explore)
    ibp__choose_settle(&ch->cls[x->cls], x->route, x->charged_ns, -1, 0);
  if (x->probe)
    ibp__choose_learn_setup(&ch->cls[x->cls], x->route, x->copies, -1, 0, 0, 0);
  sample_free(ch, x);
}

/* The GPU's time of a span from ev[0] to ev[1] of ms milliseconds, mark_ms
 * from the marker to ev[1] (< 0: not known).  A stream that ran dry before
 * the route's calls queued its work (ev[0] completed before they ended:
 * idle, or its last copy ended meanwhile) waited for them: its work starts
 * no earlier than the marker, plus the start events' calls, plus the
 * route's calls before its first GPU work (the model's lead, scaled as the
 * calls measured) -- without it a KV window's driver copies, each queued
 * as the one before ended, measured 1.6x their model.  And a span that
 * shared the link, the copy engine or the SMs waited for the other
 * streams' work queued ahead of it: it starts no earlier than the last of
 * their events (others[0..n)) completed (one that completed after the
 * copy's end ran beside it, and one not completed yet still runs: neither
 * delayed its start), plus the route's set-up, which ran meanwhile.  But
 * work that leaves gaps on the link (`gapped`: a staged copy's windows,
 * waiting for their decodes) takes turns with the copy there instead, and
 * ends just before it: where the streams table said how the copy was
 * queued (x->queue), such work's share of the span is no more than its
 * share of the work queued, own_ns the copy's own estimate there -- two
 * streams' staged 4 MiB copies, 64 us each alone, read 8.9 us from the
 * other stream's last window (a100-pcie4 under a link 2x as wide, bench/ab
 * line 05).  Not for a copy held whole (a driver's copy): behind one, the
 * table's share was too small (the other stream's earlier copies,
 * queued on the link as their stream ran, were ahead too: staged windows
 * of gen_bf16 read 2.7x their model, h100-pcie5 under decodes 3x faster)
 * -- docs/ARCHITECTURE.md "The gate", contention. */
static double span_gpu_ns(const ibp_driver *d, const ibp_timing_sample *x,
                          const CUevent ev[2], const CUevent others[],
                          unsigned n, unsigned gapped, double own_ns, float ms,
                          float mark_ms) {
  double gpu = 1e6 * ms;
  if (mark_ms >= 0) {
    double lead = 0;
    if (x->cpu_model_ns > 0) {
      lead = x->lead_model_ns * x->cpu_ns / x->cpu_model_ns;
      lead = lead < x->cpu_ns ? lead : x->cpu_ns;
    }
    const double after_calls = 1e6 * mark_ms - x->mark_ns - lead;
    /* but no less than the span less the calls: the route's work was
     * queued no later than that after the start event, whenever the
     * marker was stamped (on a GPU whose front end reaches it late --
     * its stream sharing a hardware queue with busy work -- it read a
     * copy as free) */
    const double least = gpu > lead ? gpu - lead : 0;
    if (after_calls < gpu)
      gpu = after_calls > least ? after_calls : least;
  }
  /* from the span's start to the last of them: held whole, and gapped */
  double wait = 0, turns = 0;
  for (unsigned j = 0; j < n; j++) {
    float after = 0;
    double *w = gapped >> j & 1 ? &turns : &wait;
    if (others[j] &&
        d->cuEventElapsedTime(&after, others[j], ev[1]) == CUDA_SUCCESS &&
        after >= 0 && gpu - 1e6 * after - x->setup_ns > *w)
      *w = gpu - 1e6 * after - x->setup_ns;
  }
  const ibp_timing_queue *q = &x->queue;
  if (q->known && own_ns > 0) {
    const double theirs = gpu * q->ahead_ns / (own_ns + q->ahead_ns);
    turns = turns < theirs ? turns : theirs;
  }
  return gpu - (wait > turns ? wait : turns);
}

/* The marker's time to event `end` of sample x (ms; -1: none or not
 * known).  Returns 0 while the GPU has not run them both. */
static int mark_ms(const ibp_driver *d, const ibp_timing_sample *x,
                   const CUevent *ev, CUevent end, float *ms) {
  *ms = -1;
  if (!x->marked || !ev[IBP_TIMING_MARK] || !end)
    return 1;
  const CUresult q = d->cuEventElapsedTime(ms, ev[IBP_TIMING_MARK], end);
  if (q == CUDA_ERROR_NOT_READY)
    return 0;
  if (q != CUDA_SUCCESS)
    *ms = -1;
  return 1;
}

/* A timed copy whose model holds the link this long (or longer) is first
 * asked about at a quarter of its model: a copy of several MiB is made
 * again and again only a few times (eight KV restores a stream), and the
 * first reading of a route the model made several times too dear came too
 * late to matter -- asked about at twice its model, the driver's first
 * 8 MiB restore, 4x cheaper than the model on a link 4x as wide, was read
 * 11 copies' time later, after two more restores had gone to the staged
 * route at 3x its time (h100-pcie5, bench/ab line 12, 0.50 of the driver's
 * time).  One question (cuEventElapsedTime answering not ready) costs a
 * driver call, a small share of such a copy: then half as soon again each
 * time until twice the model, as every other sample, so at most three
 * more. */
#define LOOK_EARLY_NS 100e3
#define LOOK_FIRST 0.25
#define LOOK_LAST 2.0

/* Sets sample x's next moment to be asked about: look times its model's
 * span (its calls at least) after its calls. */
static void look_at(ibp_timing_sample *x, double look) {
  const double gpu_model = x->gpu_model_ns + x->sm_model_ns;
  x->look = look;
  x->due_ns = x->t0_ns + x->cpu_ns +
              look * (gpu_model > x->cpu_ns ? gpu_model : x->cpu_ns);
}

/* Sample x was asked about too early: asked again later. */
static void look_later(ibp_timing_sample *x) {
  if (x->look < LOOK_LAST)
    look_at(x, 2 * x->look < LOOK_LAST ? 2 * x->look : LOOK_LAST);
}

/* Sample x's whole span (w[0..1], its others' events after them;
 * whole_ms, whole_mark; its first stage ev[0..1], ms, mark, read as
 * `gpu`): the two stages as they ran on the caller's stream -- what ran beside
 * them on the SMs included: what their overlap gave as the application's
 * streams ran them (beside.h, its limits) -- less the larger of two cuts, never
 * both (they may be one wait): its others read from their end, and what its
 * first stage's reading was cut for the link the other streams took (turns,
 * copies beside it), which held the whole up as long -- where the windows set
 * its pace: decodes modelled as long take as long whatever the
 * windows waited.  Uncut, two streams' staged 4 MiB copies taking turns
 * on the link read their wholes at 1.4-2x their stages, and the driver
 * kept a weight stream that staged ran 1.15x faster (a100-pcie4 under a
 * link 2x as wide and decodes half as fast, bench/ab line 15).  Cut no
 * shorter than its first stage as read, nor than its decodes' model,
 * where it was not so already: its windows may have waited before the
 * whole began (an exploration's windows read 54.7 us uncut, 8.3 cut, in a
 * whole of 36.9: read 8.3 against decodes of 20), and its share is not
 * known further (the other streams' decodes; their windows ahead on the
 * copy stream).  Not its decodes as they ran after its windows' end:
 * there the other streams' decodes shared the SMs (99 us against 68 alone,
 * line 15 above).  -1 where it was not timed. */
static double whole_gpu_ns(const ibp_driver *d, const ibp_timing_sample *x,
                           const CUevent ev[2], const CUevent *w, float ms,
                           float mark, float whole_ms, float whole_mark,
                           double gpu) {
  if (whole_ms < 0)
    return -1;
  const double uncut = span_gpu_ns(d, x, w, w, 0, 0, 0, whole_ms, whole_mark);
  const double first = span_gpu_ns(d, x, ev, ev, 0, 0, 0, ms, mark);
  const double sm = x->sm_model_ns;
  const double pace = gpu > sm ? gpu : sm;
  const double link_cut = first > pace ? first - pace : 0;
  double whole =
      span_gpu_ns(d, x, w, w + 2, x->caller_others, 0, 0, whole_ms, whole_mark);
  whole = whole < uncut - link_cut ? whole : uncut - link_cut;
  const double floor = pace < uncut ? pace : uncut;
  return whole > floor ? whole : floor;
}

/* An explored sample's latency (ns; -1: not known): its whole span as
 * read (whole_gpu) where its first stage (ev[0]) began within it (w[0]
 * first) -- else from its first stage's start to the whole's end (w[1]),
 * uncut: the copy stream waits only for its staging buffers, so behind
 * the caller's earlier copies its windows run before the whole begins,
 * which then holds little more than its decodes (read so, a bound put the
 * staged path below its own link time: a simulated class 1.07-1.24x the
 * best route's time), and a busy stream's class would never learn one
 * (its explorations all begin so). */
static double explored_latency_ns(const ibp_driver *d, const CUevent *ev,
                                  const CUevent *w, double whole_gpu) {
  float ms = -1;
  if (d->cuEventElapsedTime(&ms, w[0], ev[0]) != CUDA_SUCCESS)
    return -1;
  if (ms >= 0)
    return whole_gpu;
  if (d->cuEventElapsedTime(&ms, ev[0], w[1]) != CUDA_SUCCESS || ms < 0)
    return -1;
  return 1e6 * ms;
}

/* Reads sample i if the GPU has run it (lock held; never waits). */
static void read_sample(const ibp_driver *d, ibp_served_region *s,
                        ibp_device_slot *slot, ibp_chooser *ch, int i,
                        double now) {
  ibp_timing_sample *x = &ch->sample[i];
  CUevent *ev = &slot->mem.timing[IBP_TIMING_EVENTS * i];
  if (!ev[0] || !ev[1]) { /* its context ended with the events */
    drop(ch, x);
    return;
  }
  /* the elapsed time is the query: CUDA_ERROR_NOT_READY until both events
   * completed (and, unlike cuEventQuery, it says nothing the host must
   * have waited for) */
  float ms = 0;
  CUresult q = d->cuEventElapsedTime(&ms, ev[0], ev[1]);
  if (q == CUDA_ERROR_NOT_READY) {
    look_later(x);
    return;
  }
  if (q != CUDA_SUCCESS) {
    drop(ch, x);
    timing_failed(ch, x->cls, "cuEventElapsedTime", q);
    return;
  }
  /* timed on another stream: the whole span on the caller's too, which
   * ends later (its decodes) */
  float whole_ms = -1;
  const CUevent *w = ev + IBP_TIMING_CALLER;
  if (x->caller && w[0] && w[1]) {
    q = d->cuEventElapsedTime(&whole_ms, w[0], w[1]);
    if (q == CUDA_ERROR_NOT_READY) {
      look_later(x);
      return;
    }
    if (q != CUDA_SUCCESS)
      whole_ms = -1;
  }
  float mark = -1, whole_mark = -1;
  if (!mark_ms(d, x, ev, ev[1], &mark) ||
      (whole_ms >= 0 && !mark_ms(d, x, ev, w[1], &whole_mark))) {
    look_later(x);
    return;
  }
  /* a span libibp's own uploads shared the link with says nothing of the
   * route's GPU time (streams.h): dropped, an exploration's charge
   * standing -- but the calls, timed on the host, are what they are: a
   * copy-engine route's stand for every such route's (h100-pcie5 under
   * driver calls 4x dearer: the first staged and driver copies overlapped
   * the region's upload, and 4 staged copies went on the prior, 2.7 %
   * slower than the driver alone) */
  if (!ibp__streams_own_clear(x->dev, x->t0_ns)) {
    if (x->engine)
      ibp__choose_learn_calls(&ch->calls, x->cpu_ns, x->cpu_model_ns, now);
    drop(ch, x);
    return;
  }
  /* less what the other streams queued beside it took of the link
   * (beside.h) */
  const double gpu = ibp__beside_less(d, slot, ch, i, ev[1],
                                      span_gpu_ns(d, x, ev, ev + 2, x->others,
                                                  x->others_gapped,
                                                  x->queue.link_ns, ms, mark),
                                      x->gpu_model_ns);
  ibp_choose_class *k = &ch->cls[x->cls];
  /* a two-stage route's second stage, as modelled (its decode probe
   * corrects it) */
  const ibp_route_cost stages = {
      .gpu_ns = gpu, .sm_ns = x->sm_model_ns, .pipelined = x->pipelined};
  const ibp_route_cost model = {.gpu_ns = x->gpu_model_ns,
                                .sm_ns = x->sm_model_ns,
                                .pipelined = x->pipelined};
  const double gpu_all = ibp__choose_gpu_ns(&stages, 1);
  const double gpu_all_model = ibp__choose_gpu_ns(&model, 1);
  const double whole_gpu =
      whole_gpu_ns(d, x, ev, w, ms, mark, whole_ms, whole_mark, gpu);
  sample_free(ch, x);
  changed(ch);
  /* what it took as its estimate counts it: a serial route's terms added
   * up, its held copies' CPU time with them (an explored batch of KV
   * blocks whose span was 0.5x the driver's copies' estimate made the
   * steps that held it slower: the copies wait for the flush) */
  const double cpu_all = x->cpu_ns + x->runtime_ns,
               cpu_model = x->cpu_model_ns + x->runtime_ns;
  const double span = x->serial           ? cpu_all + gpu_all
                      : cpu_all > gpu_all ? cpu_all
                                          : gpu_all;
  const double took = span + x->held_ns;
  /* the statistics: what was timed against its model (the held copies'
   * modelled CPU in neither) */
  ch->timed[x->route]++;
  ch->measured_ns[x->route] += span;
  ch->cpu_ns[x->route] += x->cpu_ns;
  ch->cpu_model_ns[x->route] += x->cpu_model_ns;
  ch->model_ns[x->route] += x->serial ? cpu_model + gpu_all_model
                            : cpu_model > gpu_all_model ? cpu_model
                                                        : gpu_all_model;
  if (x->explore) { /* what it really cost over the choice: its stages
                     * as they ran where timed -- an explored staged copy
                     * whose decodes ran 3.8x their model took 834 us
                     * against 289 modelled and its windows' 243 measured
                     * (kv_offload's prefix restores, h100-pcie5 under
                     * decodes 4x slower), and was charged nothing */
    const double ran = whole_gpu > took ? whole_gpu : took;
    double excess = ran > x->choice_ns ? ran - x->choice_ns : 0;
    /* worse only where it ran as the launch it stood for: an explored
     * batch flushed after a copy or two measures a launch's fixed costs,
     * not the batch (kv_blocks under driver calls 4x dearer: half the runs
     * backed off so, 0.28 of the batched route's time) */
    ibp__choose_settle(k, x->route, x->charged_ns, excess + x->timing_ns,
                       ran > x->choice_ns &&
                           ibp__choose_alike(x->copies, x->explored_copies));
  }
  /* a set-up probe's span is of halved entries: what their set-ups took,
   * not the route's ratio for its calls as made */
  if (x->probe)
    ibp__choose_learn_setup(k, x->route, x->copies, gpu, x->probe_base_ns,
                            x->probe_setup_ns, now);
  else
    ibp__choose_learn(k, x->route, x->copies, x->cpu_ns, x->cpu_model_ns, gpu,
                      x->gpu_model_ns, now);
  if (x->engine)
    ibp__choose_learn_calls(&ch->calls, x->cpu_ns, x->cpu_model_ns, now);
  /* the two stages together as they ran, against the model's joining of
   * them (its first stage as just measured): what the stages' overlap
   * really gave -- for the class's own choice, whose copies ran back to
   * back with their like; an exploration among other routes' copies
   * measures its latency, no less than what it adds to a stream of its
   * own: a bound (ibp__choose_learn_whole_bound) */
  if (whole_gpu >= 0 && !x->explore && gpu_all > 0)
    ibp__choose_learn_whole(k, x->route, whole_gpu / gpu_all, now);
  else if (whole_gpu >= 0 && gpu_all > 0) {
    const double latency = explored_latency_ns(d, ev, w, whole_gpu);
    if (latency >= 0)
      ibp__choose_learn_whole_bound(k, x->route, latency / gpu_all, now);
  }
  ibp__count(&s->counters, copies_timed, 1);
}

static void read_samples(const ibp_driver *d, ibp_served_region *s,
                         ibp_device_slot *slot, ibp_chooser *ch) {
  /* a sample is queried only once the model says it ran (twice over; a
   * long one sooner, look_at): an event is never waited for, nor asked
   * about much too early */
  const double now = ibp__clock_ns();
  int any = 0;
  for (int i = 0; i < IBP_TIMING_SAMPLES; i++)
    any |= ch->sample[i].state == SAMPLE_PENDING && now >= ch->sample[i].due_ns;
  if (!any)
    return;
  CUstreamCaptureMode mode = relaxed(d);
  /* set-up probes last: each is read against its pair's first half */
  for (int probes = 0; probes < 2; probes++)
    for (int i = 0; i < IBP_TIMING_SAMPLES; i++)
      if (ch->sample[i].state == SAMPLE_PENDING &&
          !ch->sample[i].probe == !probes && now >= ch->sample[i].due_ns)
        read_sample(d, s, slot, ch, i, now);
  restore(d, mode);
}

static int free_sample(const ibp_chooser *ch) {
  for (int i = 0; i < IBP_TIMING_SAMPLES; i++)
    if (ch->sample[i].state == SAMPLE_FREE)
      return i;
  return -1;
}

/* IBP_FORCE_ROUTE, an input to the decision: where the forced route can
 * serve the copy it is the only one weighed; where it cannot, a copy that
 * may be held goes alone (the batch is not weighed), to be forced in its
 * single copy's decision. */
static const ibp_route_cost *forced(const ibp_route_cost prior[IBP_ROUTES],
                                    ibp_route_cost only[IBP_ROUTES]) {
  if (ibp__cfg.force_route == IBP_FORCE_NONE)
    return prior;
  const ibp_route f = (ibp_route)(ibp__cfg.force_route - IBP_FORCE_DRIVER);
  const ibp_route_cost *q = &prior[f];
  memcpy(only, prior, IBP_ROUTES * sizeof *only);
  if (q->cpu_ns > 0 || q->gpu_ns > 0) {
    memset(only, 0, IBP_ROUTES * sizeof *only);
    only[f] = *q;
  } else {
    memset(&only[IBP_ROUTE_BATCHED], 0, sizeof *only);
  }
  return only;
}

ibp_route ibp__chooser_decide(ibp_served_region *s, ibp_device_slot *slot,
                              ibp_chooser *ch, const ibp_profile *p,
                              unsigned cls,
                              const ibp_route_cost prior[IBP_ROUTES],
                              unsigned timable, int dry, ibp_choice *out) {
  const ibp_driver *d = ibp__driver();
  ibp_route_cost only[IBP_ROUTES];
  prior = forced(prior, only);
  if (!ch || cls >= IBP_CHOOSE_CLASSES || !d) {
    ibp_choose_class k;
    ibp_choose_route none[IBP_ROUTES];
    ibp__choose_routes_init(none);
    ibp__choose_class_init(&k, none);
    return ibp__choose_decide(&k, prior, 0, 0, 0, 1, 0, out);
  }
  pthread_mutex_lock(&ch->lock);
  if (ch->nopen)
    quiet_close_for(ch, cls);
  if (!dry)
    read_samples(d, s, slot, ch);
  const int learn =
      d->cuEventElapsedTime && d->cuEventCreate && d->cuEventRecord;
  /* no room for another sample: nothing timed or explored */
  if (free_sample(ch) < 0)
    timable = 0;
  ibp__choose_decide(&ch->cls[cls], prior, timable, ibp__timing_cost_ns(p),
                     learn, dry, ibp__clock_ns(), out);
  pthread_mutex_unlock(&ch->lock);
  if (out->explore && !dry)
    ibp__count(&s->counters, copies_explored, 1);
  return out->route;
}

/* The first n events of sample i, created on first use (lock held). */
static int sample_events(const ibp_driver *d, ibp_device_slot *slot,
                         ibp_chooser *ch, int i, unsigned n, unsigned cls) {
  CUevent *ev = &slot->mem.timing[IBP_TIMING_EVENTS * i];
  CUstreamCaptureMode mode = relaxed(d);
  int ok = 1;
  for (unsigned k = 0; k < n && ok; k++) {
    CUresult e;
    if (!ev[k] && (e = d->cuEventCreate(&ev[k], CU_EVENT_DEFAULT))) {
      ev[k] = NULL;
      timing_failed(ch, cls, "cuEventCreate", e);
      ok = 0;
    }
  }
  /* the markers' stream: without it spans are read whole, as if their
   * stream never ran dry (an upper bound) */
  if (ok && !slot->mem.mark && !slot->mem.mark_failed &&
      (!d->cuStreamCreate ||
       d->cuStreamCreate(&slot->mem.mark, CU_STREAM_NON_BLOCKING) !=
           CUDA_SUCCESS)) {
    slot->mem.mark = NULL;
    slot->mem.mark_failed = 1;
  }
  restore(d, mode);
  return ok;
}

void ibp__timing_begin(ibp_device_slot *slot, ibp_chooser *ch,
                       const ibp_profile *p, CUstream stream, CUstream caller,
                       unsigned cls, const ibp_choice *c,
                       const ibp_route_cost *prior, double runtime_ns,
                       double lead_ns, double setup_ns, int deferred, int dev,
                       const ibp_timing_queue *queue, ibp_timing *t) {
  const ibp_driver *d = ibp__driver();
  t->index = -1;
  t->start = NULL;
  t->aside_ns = 0;
  if (!ch || cls >= IBP_CHOOSE_CLASSES)
    return;
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  const int capturing = !d ||
                        d->cuStreamIsCapturing(stream, &cs) != CUDA_SUCCESS ||
                        cs != CU_STREAM_CAPTURE_STATUS_NONE;
  pthread_mutex_lock(&ch->lock);
  int i = free_sample(ch);
  if (i >= 0) {
    ibp_timing_sample *x = &ch->sample[i];
    changed(ch); /* one sample fewer free: what every class may time */
    /* the calls its span holds: not the runtime's, nor libibp's own work
     * before them */
    double cpu = prior->cpu_ns - runtime_ns - prior->own_ns;
    *x = (ibp_timing_sample){.state = SAMPLE_RECORDING,
                             .stream = stream,
                             .thread = pthread_self(),
                             .cls = cls,
                             .route = c->route,
                             .explore = c->explore,
                             .charged_ns = c->charged_ns,
                             .choice_ns = c->choice_ns,
                             .explored_copies = c->copies,
                             .runtime_ns = runtime_ns,
                             .timing_ns = ibp__timing_cost_ns(p),
                             .cpu_model_ns = cpu > 0 ? cpu : 0,
                             .lead_model_ns = lead_ns,
                             .setup_ns = setup_ns,
                             .gpu_model_ns = prior->gpu_ns,
                             .sm_model_ns = prior->sm_ns,
                             .pipelined = prior->pipelined,
                             .serial = prior->serial,
                             .held_ns = prior->serial ? prior->own_ns : 0,
                             .engine = prior->engine,
                             .copies = prior->copies,
                             .dev = dev,
                             .probe = c->probe,
                             .probe_base_ns = c->probe_base_ns,
                             .probe_setup_ns = c->probe_setup_ns};
    if (queue)
      x->queue = *queue;
    atomic_fetch_or_explicit(&ch->live, 1u << i, memory_order_relaxed);
    /* nothing is timed under capture */
    if (capturing || !sample_events(d, slot, ch, i, IBP_TIMING_EVENTS, cls)) {
      drop(ch, x);
      i = -1;
    }
  } else if (c->explore || c->probe) {
    changed(ch);
    if (c->explore)
      ibp__choose_settle(&ch->cls[cls], c->route, c->charged_ns, -1, 0);
    if (c->probe) /* not made */
      ibp__choose_probe_release(&ch->cls[cls], c->route);
  }
  pthread_mutex_unlock(&ch->lock);
  if (i < 0)
    return;
  CUevent *ev = &slot->mem.timing[IBP_TIMING_EVENTS * i];
  /* the other streams' first: an event of theirs that completes before the
   * copy's start event says nothing more than it */
  CUstreamCaptureMode mode = relaxed(d);
  unsigned gapped = 0;
  const unsigned recorded =
      ibp__streams_mark_others(dev, stream, caller, 1, ibp__clock_ns(), ev + 2,
                               IBP_TIMING_OTHERS, &gapped);
  unsigned whole = 0;
  CUresult e = CUDA_SUCCESS;
  if (deferred) /* the whole span on the caller's stream as well */
    whole = ibp__streams_mark_others(dev, caller, stream, 0, ibp__clock_ns(),
                                     ev + IBP_TIMING_CALLER + 2,
                                     IBP_TIMING_CALLER_OTHERS, NULL);
  /* the host's moment on the GPU's clock, last before the start events */
  const CUstream mark = slot->mem.mark;
  if (mark)
    e = d->cuEventRecord(ev[IBP_TIMING_MARK], mark);
  const double marked = ibp__clock_ns();
  if (e == CUDA_SUCCESS && deferred)
    e = d->cuEventRecord(ev[IBP_TIMING_CALLER], caller);
  restore(d, mode);
  if (e == CUDA_SUCCESS && !deferred)
    e = d->cuEventRecord(ev[0], stream);
  if (e != CUDA_SUCCESS) {
    pthread_mutex_lock(&ch->lock);
    drop(ch, &ch->sample[i]);
    timing_failed(ch, cls, "cuEventRecord", e);
    pthread_mutex_unlock(&ch->lock);
    return;
  }
  ch->sample[i].others = recorded; /* the sample is this thread's */
  ch->sample[i].others_gapped = gapped;
  ch->sample[i].caller = deferred ? caller : NULL;
  ch->sample[i].caller_others = whole;
  ch->sample[i].t0_ns = ibp__clock_ns();
  ch->sample[i].marked = mark != NULL;
  ch->sample[i].mark_ns = ch->sample[i].t0_ns - marked;
  t->index = i;
  if (deferred)
    t->start = ev[0];
}

void ibp__timing_end(ibp_device_slot *slot, ibp_chooser *ch, CUstream stream,
                     ibp_timing *t, int submitted) {
  const int i = t->index;
  if (i < 0 || !ch)
    return;
  t->index = -1;
  const ibp_driver *d = ibp__driver();
  const double span = ibp__clock_ns() - ch->sample[i].t0_ns;
  const double cpu = span > t->aside_ns ? span - t->aside_ns : 0;
  CUevent *ev = &slot->mem.timing[IBP_TIMING_EVENTS * i];
  CUresult e = submitted && d ? d->cuEventRecord(ev[1], stream) : CUDA_SUCCESS;
  if (e == CUDA_SUCCESS && submitted && d && ch->sample[i].caller)
    e = d->cuEventRecord(ev[IBP_TIMING_CALLER + 1], ch->sample[i].caller);
  pthread_mutex_lock(&ch->lock);
  ibp_timing_sample *x = &ch->sample[i];
  x->cpu_ns = cpu;
  x->state = SAMPLE_PENDING;
  changed(ch); /* a run opened while it was recording knows no due time */
  const double gpu_model = x->gpu_model_ns + x->sm_model_ns;
  look_at(x, gpu_model >= LOOK_EARLY_NS ? LOOK_FIRST : LOOK_LAST);
  const unsigned cls = x->cls;
  if (!submitted || e != CUDA_SUCCESS)
    drop(ch, x);
  if (e != CUDA_SUCCESS)
    timing_failed(ch, cls, "cuEventRecord", e);
  pthread_mutex_unlock(&ch->lock);
}
