/* Quiet and hold runs (serve/choose/chooser.h) against full decisions: the
 * real chooser.c fed the same copies twice -- one world deciding every
 * copy, the other taking what its runs promise, as substitute.c and
 * batch.c do (a run's copy first; else the batched class's decision, then
 * the single copy's, each opening a run where it may).  Copies of one
 * size on one stream, the stream idle or busy (single classes C1, C2: two
 * keys), both offered to one batched class B first; with `timed`, every
 * 7th copy is of another size (class D) whose timed copies are read back
 * between them; with `rows`, B's batched route is the cheaper one, and its
 * copies are held by hold runs.  Every copy a run takes must be one the
 * full decision takes the same way, untimed and unexplored, and at the end
 * every class must have counted the same copies and hold the same credits.
 * Then runs against ordering marks, and against threads' per-thread
 * default streams (one handle, a stream of each thread).
 *
 *   test_chooser_quiet PATTERN [timed] [rows]   (every PATTERN-th copy busy)
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/clock.h"
#include "base/driver.h"
#include "base/log.h"
#include "serve/choose/chooser.h"
#include "serve/choose/streams.h"
#include "serve/route/route.h"

#include "chooser_stubs.h"

/* ---- the worlds ---------------------------------------------------------- */

#define TIMABLE                                                                \
  (1u << IBP_ROUTE_DRIVER | 1u << IBP_ROUTE_ZEROCOPY | 1u << IBP_ROUTE_STAGED)
#define KEY 42 /* the copies' key: all alike */
#define STREAM ((CUstream)0x10)

static ibp_route_cost single[IBP_ROUTES], batched[IBP_ROUTES];
static const ibp_profile prof = {.driver_call_us = 0.5};
static int timed_copies;

typedef struct world {
  ibp_served_region *s;
  ibp_device_slot *slot;
  ibp_chooser *ch;
} world;

static void world_init(world *w) {
  w->s = calloc(1, sizeof *w->s);
  w->slot = calloc(1, sizeof *w->slot);
  if (!w->s || !w->slot || !(w->ch = ibp__chooser_of(w->slot))) {
    fprintf(stderr, "test_chooser_quiet: out of memory\n");
    exit(2);
  }
}

static void world_free(world *w) {
  ibp__chooser_free(w->ch);
  free(w->slot);
  free(w->s);
}

/* A copy's decision: b, B's; c, the single class's (route -1: held). */
typedef struct outcome {
  int taken; /* by a run */
  ibp_choice b, c;
} outcome;

/* A timed copy's span, read back at the next decision. */
static void time_it(world *w, unsigned cls, const ibp_choice *c,
                    const ibp_route_cost *prior) {
  if (!timed_copies) {
    ibp__chooser_untimed(w->ch, cls, c);
    return;
  }
  ibp_timing t;
  ibp__timing_begin(w->slot, w->ch, &prof, STREAM, STREAM, cls, c,
                    &prior[c->route], 0, 0, 0, 0, 0, NULL, &t);
  ibp__timing_end(w->slot, w->ch, STREAM, &t, 1);
}

/* One copy of single class C offered to batched class B; runs: take what
 * the runs promise and open them. */
static outcome copy(world *w, int runs, unsigned C, unsigned B) {
  static const ibp_copy cp = {.bytes = 65536, .stream = STREAM};
  ibp_route_copy x = {.c = &cp, .batch_cls = IBP_CHOOSE_CLASSES, .alone = -1};
  outcome o = {0};
  double est;
  o.c.route = (ibp_route)-1;
  if (runs && ibp__chooser_quiet_take(w->ch, C, KEY, STREAM, 0, &est)) {
    o.taken = 1; /* the driver's (substitute.c, quiet) */
    o.b.route = o.c.route = IBP_ROUTE_DRIVER;
    return o;
  }
  if (runs)
    ibp__chooser_quiet_report(w->ch, C, STREAM, &x);
  if (runs && ibp__chooser_quiet_take(w->ch, B, KEY, STREAM, 0, &est)) {
    o.taken = 1; /* held (batch.c, hold_locked) */
    o.b.route = IBP_ROUTE_BATCHED;
    return o;
  }
  ibp__chooser_decide(w->s, w->slot, w->ch, &prof, B, batched,
                      1u << IBP_ROUTE_BATCHED, 0, &o.b);
  if (o.b.route == IBP_ROUTE_BATCHED) {
    if (runs)
      ibp__chooser_hold_open(w->ch, B, &o.b, KEY, STREAM);
    if (o.b.timed)
      ibp__chooser_untimed(w->ch, B, &o.b); /* its launch: not timed here */
    return o;
  }
  if (o.b.timed)
    ibp__chooser_untimed(w->ch, B, &o.b);
  x.batch_cls = B;
  x.alone = o.b.timed || o.b.explore ? -1 : (int)o.b.route;
  x.alone_own_ns = o.b.cpu_ns;
  ibp__chooser_decide(w->s, w->slot, w->ch, &prof, C, single, TIMABLE, 0, &o.c);
  if (o.c.timed)
    time_it(w, C, &o.c, single);
  if (runs && o.c.route == IBP_ROUTE_DRIVER)
    ibp__chooser_quiet_open(w->ch, C, &o.c, &x, KEY);
  return o;
}

/* A copy taken by a run where the full decision took another route, or
 * timed or explored it. */
static int broken(const outcome *run, const outcome *full) {
  if (!run->taken)
    return 0;
  if (run->b.route == IBP_ROUTE_BATCHED)
    return full->b.route != IBP_ROUTE_BATCHED || full->b.timed ||
           full->b.explore;
  return full->b.route == IBP_ROUTE_BATCHED || full->b.timed ||
         full->b.explore || full->c.route != IBP_ROUTE_DRIVER ||
         full->c.timed || full->c.explore;
}

static int differ(double a, double b) {
  return fabs(a - b) > 1e-6 * (1 + fabs(a));
}

/* Decides copies of class C on `stream` until a quiet run of at least 2
 * copies opens (order_mark: its stream's ordering mark, 0 none); 1 when
 * one did. */
static int open_quiet(world *w, unsigned C, CUstream stream,
                      uint64_t order_mark) {
  const ibp_copy cp = {.bytes = 65536, .stream = stream};
  ibp_route_copy x = {.c = &cp,
                      .batch_cls = IBP_CHOOSE_CLASSES,
                      .alone = -1,
                      .order_mark = order_mark};
  const int timed = timed_copies;
  timed_copies = 0; /* no span read between: its runs promise most */
  int opened = 0;
  for (int i = 0; i < 100 && !opened; i++, now_ns += 7000) {
    ibp_choice c;
    ibp__chooser_decide(w->s, w->slot, w->ch, &prof, C, single, TIMABLE, 0, &c);
    if (c.timed) {
      time_it(w, C, &c, single);
      continue;
    }
    opened = c.route == IBP_ROUTE_DRIVER &&
             ibp__chooser_quiet_open(w->ch, C, &c, &x, KEY) >= 2;
  }
  timed_copies = timed;
  return opened;
}

/* A run opened by a copy of its stream's run of copies (order_mark > 0)
 * takes copies only while the stream's ordering mark stays (its copies
 * are counted in the stream's run they came in: batch.h); one opened
 * without (0) whatever the mark. */
static int order_marks(unsigned C) {
  world w;
  world_init(&w);
  int bad = 0;
  for (int mark = 0; mark < 2; mark++) {
    double est;
    bad |= !open_quiet(&w, C, STREAM, mark ? 5 : 0);
    bad |= !ibp__chooser_quiet_take(w.ch, C, KEY, STREAM, 5, &est);
    /* an ordering point: the mark moved */
    bad |= ibp__chooser_quiet_take(w.ch, C, KEY, STREAM, 6, &est) == mark;
  }
  world_free(&w);
  if (bad)
    printf("a quiet run took a copy past its stream's ordering point, or "
           "one opened without a mark did not\n");
  return bad;
}

/* Another thread's take from w's class C on `stream` (a thread of its
 * own: the per-thread default stream is another stream there). */
typedef struct take_args {
  world *w;
  unsigned C;
  CUstream stream;
  int took;
} take_args;

static void *take_there(void *arg) {
  take_args *a = arg;
  double est;
  a->took = ibp__chooser_quiet_take(a->w->ch, a->C, KEY, a->stream, 0, &est);
  return NULL;
}

/* A run opened on the per-thread default stream is that thread's: another
 * thread's copy on its own per-thread stream (the same handle) does not
 * take from it; one opened on the legacy stream, every thread's, does. */
static int per_thread(unsigned C) {
  int bad = 0;
  static const CUstream streams[2] = {CU_STREAM_PER_THREAD, CU_STREAM_LEGACY};
  for (int k = 0; k < 2; k++) {
    world w;
    world_init(&w);
    double est;
    bad |= !open_quiet(&w, C, streams[k], 0);
    bad |= !ibp__chooser_quiet_take(w.ch, C, KEY, streams[k], 0, &est);
    take_args a = {&w, C, streams[k], -1};
    pthread_t t;
    if (pthread_create(&t, NULL, take_there, &a) != 0 ||
        pthread_join(t, NULL) != 0) {
      fprintf(stderr, "test_chooser_quiet: no thread\n");
      exit(2);
    }
    bad |= a.took != (streams[k] == CU_STREAM_LEGACY);
    world_free(&w);
  }
  if (bad)
    printf("a quiet run on one thread's per-thread stream took another "
           "thread's copy, or one on the legacy stream did not\n");
  return bad;
}

int main(int argc, char **argv) {
  const int pattern = argc > 1 ? atoi(argv[1]) : 2;
  int rows = 0;
  for (int i = 2; i < argc; i++) {
    timed_copies |= strcmp(argv[i], "timed") == 0;
    rows |= strcmp(argv[i], "rows") == 0;
  }
  if (pattern < 1) {
    fprintf(stderr, "usage: test_chooser_quiet PATTERN [timed] [rows]\n");
    return 2;
  }
  stub_driver_init();
  single[IBP_ROUTE_DRIVER] =
      (ibp_route_cost){.cpu_ns = 2000, .gpu_ns = 5000, .engine = 1};
  single[IBP_ROUTE_ZEROCOPY] = (ibp_route_cost){.cpu_ns = 3000, .gpu_ns = 9000};
  batched[IBP_ROUTE_DRIVER] = single[IBP_ROUTE_DRIVER];
  batched[IBP_ROUTE_BATCHED] = (ibp_route_cost){
      .cpu_ns = 500, .gpu_ns = rows ? 1000 : 9000, .serial = 1, .copies = 16};
  const unsigned C1 = ibp__choose_class_index(65536, 0, IBP_CLASS_SINGLE),
                 C2 = ibp__choose_class_index(65536, 1, IBP_CLASS_SINGLE),
                 B = ibp__choose_class_index(65536, 0, IBP_CLASS_BATCHED),
                 D = ibp__choose_class_index(4096, 0, IBP_CLASS_SINGLE),
                 DB = ibp__choose_class_index(4096, 0, IBP_CLASS_BATCHED);
  world run, full;
  world_init(&run);
  world_init(&full);
  long taken = 0, wrong = 0;
  const long N = 20000;
  for (long i = 0; i < N; i++) {
    if (timed_copies && i % 7 == 6) { /* its decisions read what is due */
      copy(&full, 0, D, DB);
      copy(&run, 1, D, DB);
    }
    const unsigned C = i % pattern == pattern - 1 ? C2 : C1;
    const outcome f = copy(&full, 0, C, B), q = copy(&run, 1, C, B);
    taken += q.taken;
    if (broken(&q, &f) && wrong++ == 0)
      printf("copy %ld: taken by a run, decided otherwise in full: B %d "
             "(timed %d explored %d), single %d (timed %d explored %d)\n",
             i, f.b.route, f.b.timed, f.b.explore, f.c.route, f.c.timed,
             f.c.explore);
    now_ns += 7000;
  }
  /* every run counted: a look at each class */
  ibp_choice look;
  const unsigned all[5] = {C1, C2, B, D, DB};
  for (int i = 0; i < 5; i++)
    ibp__chooser_decide(run.s, run.slot, run.ch, &prof, all[i],
                        all[i] == B || all[i] == DB ? batched : single, TIMABLE,
                        1, &look);
  int classes = 0;
  for (int i = 0; i < 5; i++) {
    const ibp_choose_class *a = &full.ch->cls[all[i]],
                           *b = &run.ch->cls[all[i]];
    if (a->copies != b->copies ||
        differ(a->explore_credit_ns, b->explore_credit_ns) ||
        differ(a->timing_credit_ns, b->timing_credit_ns)) {
      printf("class %u: copies %llu against %llu decided in full, credits "
             "%g/%g against %g/%g\n",
             all[i], (unsigned long long)b->copies,
             (unsigned long long)a->copies, b->explore_credit_ns,
             b->timing_credit_ns, a->explore_credit_ns, a->timing_credit_ns);
      classes++;
    }
  }
  printf("pattern %d%s%s: %ld of %ld copies taken by runs; %ld decided "
         "otherwise in full; %d classes counted otherwise\n",
         pattern, timed_copies ? " timed" : "", rows ? " rows" : "", taken, N,
         wrong, classes);
  /* the runs take most copies where nothing is timed between them */
  const int few = !timed_copies && taken < N / 2;
  if (few)
    printf("too few copies taken by runs\n");
  world_free(&run);
  world_free(&full);
  const int marks = order_marks(C1), threads = per_thread(C1);
  return wrong || classes || few || marks || threads ? 1 : 0;
}
