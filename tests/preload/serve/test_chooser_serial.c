/* A timed batched launch as its estimate counts it (serve/choose/chooser.c,
 * read_sample): a serial route's terms added up, its held copies' calls
 * and holds with its span.  An explored batch of 16 copies whose span (4
 * us on the GPU) is far below the driver's estimate for those copies (40
 * us) but whose copies were held 60 us before it began measured worse than
 * the driver -- backed off, charged its excess -- where the same batch held
 * 1 us is no worse.  Read as a span alone, both looked better and the
 * exploration was refunded: a KV window's explored batches, each a fifth
 * of its span over the driver's copies, were explored again and again. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "serve/choose/chooser.h"
#include "serve/route/route.h"

#include "chooser_stubs.h"

#define STREAM ((CUstream)0x10)
#define COPIES 16
#define DRIVER_EACH_NS 2500.0 /* the driver's estimate for one copy */
#define CHARGED_NS 1000.0

static const ibp_profile prof = {.driver_call_us = 0.5};

/* One explored batched launch of class cls held `held_ns` before its
 * flush, timed and read back; returns its class. */
static const ibp_choose_class *explore_batch(double held_ns, ibp_chooser **out,
                                             ibp_device_slot *slot,
                                             ibp_served_region *s) {
  ibp_chooser *ch = ibp__chooser_of(slot);
  if (!ch) {
    fprintf(stderr, "test_chooser_serial: out of memory\n");
    exit(2);
  }
  const unsigned cls = ibp__choose_class_index(65536, 0, IBP_CLASS_BATCHED);
  /* what batch_route.c times: the flush's calls, the held copies' own */
  const ibp_route_cost model = {.cpu_ns = 1000 + held_ns,
                                .gpu_ns = 4000,
                                .serial = 1,
                                .own_ns = held_ns,
                                .copies = COPIES};
  ibp_choice c;
  memset(&c, 0, sizeof c);
  c.route = IBP_ROUTE_BATCHED;
  c.chosen = IBP_ROUTE_DRIVER;
  c.explore = 1;
  c.timed = 1;
  c.charged_ns = CHARGED_NS;
  c.choice_ns = COPIES * DRIVER_EACH_NS;
  c.copies = COPIES;
  const double credit = ch->cls[cls].explore_credit_ns;
  ibp_timing t;
  ibp__timing_begin(slot, ch, &prof, STREAM, STREAM, cls, &c, &model, 0, 0, 0,
                    0, 0, NULL, &t);
  ibp__timing_end(slot, ch, STREAM, &t, 1);
  /* a decision after it ran reads it */
  now_ns += 1e6;
  ibp_route_cost prior[IBP_ROUTES];
  memset(prior, 0, sizeof prior);
  prior[IBP_ROUTE_DRIVER] = (ibp_route_cost){.cpu_ns = 2000, .gpu_ns = 2500};
  prior[IBP_ROUTE_BATCHED] = model;
  ibp_choice look;
  ibp__chooser_decide(s, slot, ch, &prof, cls, prior, 0, 0, &look);
  CHECK(ch->timed[IBP_ROUTE_BATCHED] == 1);
  /* the statistics: the span's 4 us (its calls took no time here)
   * against the model's calls and GPU time, the holds in neither */
  CHECK(fabs(ch->measured_ns[IBP_ROUTE_BATCHED] - 4000) < 1);
  CHECK(fabs(ch->model_ns[IBP_ROUTE_BATCHED] - (1000 + 4000)) < 1);
  /* charged what it cost over the driver's copies and its timing beyond
   * its charge, or the charge given back less the timing (the decision
   * that read it adds a share of a copy's estimate: a few ns) */
  const double excess = 4000 + held_ns - COPIES * DRIVER_EACH_NS;
  const double moved = ch->cls[cls].explore_credit_ns - credit;
  CHECK(fabs(moved - (CHARGED_NS - (excess > 0 ? excess : 0) -
                      ibp__timing_cost_ns(&prof))) < 100);
  *out = ch;
  return &ch->cls[cls];
}

int main(void) {
  stub_driver_init();
  ibp_device_slot *slot = calloc(2, sizeof *slot);
  ibp_served_region *s = calloc(1, sizeof *s);
  if (!slot || !s)
    return 2;
  ibp_chooser *ch;
  /* held 60 us: 64 us against the driver's 40 -- worse */
  const ibp_choose_class *k = explore_batch(60000, &ch, &slot[0], s);
  CHECK(k->route[IBP_ROUTE_BATCHED].backoff == 1);
  ibp__chooser_free(ch);
  /* held 1 us: 5 us -- better, no back-off */
  k = explore_batch(1000, &ch, &slot[1], s);
  CHECK(k->route[IBP_ROUTE_BATCHED].backoff == 0);
  ibp__chooser_free(ch);
  free(slot);
  free(s);
  if (failures)
    fprintf(stderr, "test_chooser_serial: %d failures\n", failures);
  else
    printf("test_chooser_serial: ok\n");
  return failures != 0;
}
