/* REVIEW harness: chooser.c's quiet runs against full decisions.  Copies of
 * one size on one stream, the stream idle or busy (classes C1, C2: two keys)
 * -- both offered to the same batched class B first, as substitute.c does
 * (quiet() first; else B's decision in hold_locked, then the single one). */
#include <math.h>
#include <stdarg.h>
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

ibp_config ibp__cfg;
static double now_ns = 1e9;
double ibp__clock_ns(void) {
  return now_ns;
}
static float elapsed_ms = 0.004;
static CUresult ok_elapsed(float *ms, CUevent a, CUevent b) {
  (void)a;
  (void)b;
  *ms = elapsed_ms;
  return CUDA_SUCCESS;
}
static CUresult not_capturing(CUstream s, CUstreamCaptureStatus *cs) {
  (void)s;
  *cs = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
static int with_timing;
static CUresult ok_create(CUevent *e, unsigned f) {
  (void)f;
  *e = (CUevent)1;
  return CUDA_SUCCESS;
}
static CUresult ok_record(CUevent e, CUstream s) {
  (void)e;
  (void)s;
  return CUDA_SUCCESS;
}
static ibp_driver drv;
const ibp_driver *ibp__driver(void) {
  return &drv;
}
void ibp__log(ibp_log_level level, const char *fmt, ...) {
  (void)level;
  (void)fmt;
}
unsigned ibp__streams_mark_others(int dev, CUstream s, CUstream also,
                                  int link_only, double now, CUevent ev[],
                                  unsigned max) {
  (void)dev;
  (void)s;
  (void)also;
  (void)link_only;
  (void)now;
  (void)ev;
  (void)max;
  return 0;
}

#define TIMABLE                                                                \
  (1u << IBP_ROUTE_DRIVER | 1u << IBP_ROUTE_ZEROCOPY | 1u << IBP_ROUTE_STAGED)
static ibp_route_cost PS[IBP_ROUTES], PB[IBP_ROUTES];
static ibp_profile prof = {.driver_call_us = 0.5};

typedef struct world {
  ibp_served_region *s;
  ibp_device_slot *slot;
  ibp_chooser *ch;
} world;

static void world_init(world *w) {
  w->s = calloc(1, sizeof *w->s);
  w->slot = calloc(1, sizeof *w->slot);
  w->ch = ibp__chooser_of(w->slot);
}

/* One copy; quiet: quiet runs on.  Returns 1 if taken quietly; else *b, *c
 * the batched and single decisions. */
static int copy(world *w, int quiet, unsigned C, unsigned B, ibp_choice *b,
                ibp_choice *c) {
  static ibp_copy cp = {.bytes = 65536};
  cp.stream = (CUstream)0x10;
  ibp_route_copy x = {.c = &cp, .batch_cls = IBP_CHOOSE_CLASSES, .alone = -1};
  double est;
  if (quiet) {
    if (ibp__chooser_quiet_take(w->ch, C, 42, cp.stream, &est))
      return 1;
    ibp__chooser_quiet_report(w->ch, C, cp.stream, &x);
  }
  ibp__chooser_decide(w->s, w->slot, w->ch, &prof, B, PB,
                      1u << IBP_ROUTE_BATCHED, 0, b);
  if (b->route ==
      IBP_ROUTE_BATCHED) { /* held: its exploration's launch untimed here */
    ibp__chooser_untimed(w->ch, B, b);
    memset(c, 0, sizeof *c);
    c->route = -1;
    return 0;
  }
  if (b->timed)
    ibp__chooser_untimed(w->ch, B, b);
  x.batch_cls = B;
  x.alone = b->timed || b->explore ? -1 : (int)b->route;
  x.alone_own_ns = b->cpu_ns;
  ibp__chooser_decide(w->s, w->slot, w->ch, &prof, C, PS, TIMABLE, 0, c);
  if (c->timed && with_timing) {
    ibp_timing t;
    ibp__timing_begin(w->slot, w->ch, &prof, cp.stream, cp.stream, C, c,
                      &PS[c->route], 0, 0, 0, 0, 0, 0, &t);
    ibp__timing_end(w->slot, w->ch, cp.stream, &t, 1);
  } else if (c->timed)
    ibp__chooser_untimed(w->ch, C, c);
  if (quiet && c->route == IBP_ROUTE_DRIVER)
    ibp__chooser_quiet_open(w->ch, C, c, &x, 42);
  return 0;
}

int main(int argc, char **argv) {
  const int pattern =
      argc > 1 ? atoi(argv[1]) : 2; /* every pattern-th copy busy */
  drv.cuEventElapsedTime = ok_elapsed;
  drv.cuEventCreate = ok_create;
  drv.cuEventRecord = ok_record;
  drv.cuStreamIsCapturing = not_capturing;
  with_timing = argc > 2;
  const unsigned D = ibp__choose_class_index(4096, 0, IBP_CLASS_SINGLE),
                 BD = ibp__choose_class_index(4096, 0, IBP_CLASS_BATCHED);
  PS[IBP_ROUTE_DRIVER] =
      (ibp_route_cost){.cpu_ns = 2000, .gpu_ns = 5000, .engine = 1};
  PS[IBP_ROUTE_ZEROCOPY] = (ibp_route_cost){.cpu_ns = 3000, .gpu_ns = 9000};
  PB[IBP_ROUTE_DRIVER] = PS[IBP_ROUTE_DRIVER];
  PB[IBP_ROUTE_BATCHED] = (ibp_route_cost){
      .cpu_ns = 500, .gpu_ns = 9000, .serial = 1, .copies = 16};
  const unsigned C1 = ibp__choose_class_index(65536, 0, IBP_CLASS_SINGLE);
  const unsigned C2 = ibp__choose_class_index(65536, 1, IBP_CLASS_SINGLE);
  const unsigned B = ibp__choose_class_index(65536, 0, IBP_CLASS_BATCHED);
  world q, f;
  world_init(&q);
  world_init(&f);
  long taken = 0, wrong = 0, first = -1, bexp_f = 0, bexp_q = 0;
  const long N = 20000;
  for (long i = 0; i < N; i++) {
    const unsigned C = i % pattern == pattern - 1 ? C2 : C1;
    if (with_timing && i % 7 == 6) { /* a copy of another size: its decisions
                                        read every sample due */
      ibp_choice x1, x2;
      copy(&f, 0, D, BD, &x1, &x2);
      copy(&q, 1, D, BD, &x1, &x2);
    }
    ibp_choice fb, fc, qb, qc;
    copy(&f, 0, C, B, &fb, &fc);
    bexp_f += fb.explore;
    const int t = copy(&q, 1, C, B, &qb, &qc);
    taken += t;
    if (!t)
      bexp_q += qb.explore;
    /* a copy taken quietly where the full decision timed or explored it,
     * or took another route */
    const int bad =
        t && (fb.route != IBP_ROUTE_DRIVER || fb.timed || fb.explore ||
              fc.route != IBP_ROUTE_DRIVER || fc.timed || fc.explore);
    if (bad && first < 0) {
      first = i;
      printf("first: copy %ld class %s: full B route %d timed %d explore %d; C "
             "route %d timed %d explore %d\n",
             i, C == C1 ? "C1(idle)" : "C2(busy)", fb.route, fb.timed,
             fb.explore, fc.route, fc.timed, fc.explore);
      printf("  quiet world B: copies %llu credit %.0f; full world B: copies "
             "%llu credit %.0f\n",
             (unsigned long long)q.ch->cls[B].copies,
             q.ch->cls[B].explore_credit_ns,
             (unsigned long long)f.ch->cls[B].copies,
             f.ch->cls[B].explore_credit_ns);
      for (unsigned k = 0; k < q.ch->nopen; k++) {
        const ibp_quiet_run *r = &q.ch->quiet[q.ch->open[k]];
        printf("  open run cls %u also %u left %u taken %u stale %d\n",
               q.ch->open[k], r->also, r->left, r->taken, r->stale);
      }
    }
    wrong += bad;
    now_ns += 7000;
  }
  /* count the runs: a look at each class */
  ibp_choice d;
  ibp__chooser_decide(q.s, q.slot, q.ch, &prof, C1, PS, TIMABLE, 1, &d);
  ibp__chooser_decide(q.s, q.slot, q.ch, &prof, C2, PS, TIMABLE, 1, &d);
  ibp__chooser_decide(q.s, q.slot, q.ch, &prof, B, PB, 1u << IBP_ROUTE_BATCHED,
                      1, &d);
  printf("pattern %d: %ld of %ld copies quiet; quiet where the full decision "
         "was not: %ld (first at %ld)\n",
         pattern, taken, N, wrong, first);
  printf("B explorations: full %ld, quiet %ld\n", bexp_f, bexp_q);
  printf(
      "copies counted  C1 %llu/%llu  C2 %llu/%llu  B %llu/%llu (full/quiet)\n",
      (unsigned long long)f.ch->cls[C1].copies,
      (unsigned long long)q.ch->cls[C1].copies,
      (unsigned long long)f.ch->cls[C2].copies,
      (unsigned long long)q.ch->cls[C2].copies,
      (unsigned long long)f.ch->cls[B].copies,
      (unsigned long long)q.ch->cls[B].copies);
  /* and their credits as the decisions left them */
  const unsigned all[4] = {C1, C2, B, D};
  int credits = 0;
  for (int i = 0; i < 4; i++) {
    const ibp_choose_class *a = &f.ch->cls[all[i]], *b = &q.ch->cls[all[i]];
    credits += fabs(a->explore_credit_ns - b->explore_credit_ns) >
                   1e-6 * (1 + fabs(a->explore_credit_ns)) ||
               fabs(a->timing_credit_ns - b->timing_credit_ns) >
                   1e-6 * (1 + fabs(a->timing_credit_ns));
  }
  printf("classes whose credits differ: %d\n", credits);
  return wrong != 0 || credits || f.ch->cls[B].copies != q.ch->cls[B].copies ||
         f.ch->cls[C1].copies != q.ch->cls[C1].copies ||
         f.ch->cls[C2].copies != q.ch->cls[C2].copies ||
         f.ch->cls[D].copies != q.ch->cls[D].copies;
}
