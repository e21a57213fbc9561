/* The gate (serve/choose/gate.h; docs/ARCHITECTURE.md "The gate"): each
 * device's cost profile, the copy as the model sees it, and the fit of a
 * region's tensor size to its copies.  Each route's model of a copy (its
 * prior) is its own file's (serve/route/route_*.c); the same model the
 * simulated GPU's virtual clock runs (tests/sim/driver/src/simcuda_vclock.c).
 */
#include "serve/choose/gate.h"

#include <stdatomic.h>
#include <string.h>

#include "base/base.h"
#include "base/driver.h"
#include "base/log.h"
#include "kernels/ibp_kernels.h"
#include "serve/region.h"
#include "stats/discover.h"
#include "stats/stats.h"

#define DEFAULT_PROFILE "a100-pcie4"
/* Copies seen before a region's fit is judged. */
#define MISMATCH_AFTER 32

static ibp_profile profiles[IBP_MAX_DEVICES];
/* each profile with its unmeasured decode terms at their hope (gate.h,
 * ibp__gate_hope) */
static ibp_profile hopes[IBP_MAX_DEVICES];
/* ibp_profile_decode_measured(profile, IBP_DECODER_BUILD), once; the
 * stage's, ibp_profile_stage_measured(profile, IBP_STAGE_BUILD) */
static int decode_measured[IBP_MAX_DEVICES];
static int stage_measured[IBP_MAX_DEVICES];
static _Atomic int ready[IBP_MAX_DEVICES];

_Static_assert(IBP_MAX_DEVICES <= IBP_STATS_DEVICES,
               "the exit report notes every device's profile");

static void load_builtin(ibp_profile *p, const char *name) {
  const char *text = ibp_profile_builtin_text(name);
  char err[256];
  if (!text ||
      ibp_profile_parse(text, strlen(text), name, p, err, sizeof err) != 0)
    memset(p, 0, sizeof *p); /* cannot happen: the built-ins are tested */
}

void ibp__gate_setup_device(int dev) {
  if (dev < 0 || dev >= IBP_MAX_DEVICES ||
      atomic_load_explicit(&ready[dev], memory_order_acquire))
    return;
  const ibp_profile *o = ibp__profile_override();
  if (o) {
    profiles[dev] = *o;
  } else {
    char name[256] = "";
    const ibp_driver *d = ibp__driver();
    if (d && d->cuDeviceGetName)
      d->cuDeviceGetName(name, (int)sizeof name - 1, dev);
    const char *b = ibp_profile_builtin_for_device(name);
    if (!b)
      ibp__log(IBP_LOG_INFO,
               "device %d ('%s'): no built-in cost profile names it; "
               "modelling it as %s (IBP_PROFILE chooses another, "
               "docs/PROFILE.md)",
               dev, name, DEFAULT_PROFILE);
    load_builtin(&profiles[dev], b ? b : DEFAULT_PROFILE);
  }
  const ibp_profile *p = &profiles[dev];
  decode_measured[dev] = ibp_profile_decode_measured(p, IBP_DECODER_BUILD);
  stage_measured[dev] = ibp_profile_stage_measured(p, IBP_STAGE_BUILD);
  hopes[dev] = *p;
  if (!decode_measured[dev]) {
    hopes[dev].decode_gbps_per_sm *= IBP_GATE_GUESS_SPAN;
    hopes[dev].decode_h2d_gbps *= IBP_GATE_GUESS_SPAN;
    hopes[dev].decode_tensor_us /= IBP_GATE_GUESS_SPAN;
  }
  if (!stage_measured[dev]) {
    hopes[dev].stage_decode_gbps_per_sm *= IBP_GATE_GUESS_SPAN;
    hopes[dev].stage_tensor_us /= IBP_GATE_GUESS_SPAN;
  }
  ibp__stats_note_profile(dev, p->name, p->decoder_build, decode_measured[dev]);
  atomic_store_explicit(&ready[dev], 1, memory_order_release);
}

const ibp_profile *ibp__gate_profile(int dev) {
  if (dev < 0 || dev >= IBP_MAX_DEVICES ||
      !atomic_load_explicit(&ready[dev], memory_order_acquire))
    return NULL;
  return &profiles[dev];
}

const ibp_profile *ibp__gate_hope(int dev) {
  if (dev < 0 || dev >= IBP_MAX_DEVICES ||
      !atomic_load_explicit(&ready[dev], memory_order_acquire) ||
      (decode_measured[dev] && stage_measured[dev]))
    return NULL;
  return &hopes[dev];
}

int ibp__gate_decode_measured(int dev) {
  if (dev < 0 || dev >= IBP_MAX_DEVICES ||
      !atomic_load_explicit(&ready[dev], memory_order_acquire))
    return 0;
  return decode_measured[dev];
}

uint64_t ibp__gate_units(uint64_t R, uint64_t n, uint64_t off, uint64_t len) {
  uint64_t first = off / R, last = (off + len - 1) / R;
  if (last > n) /* the tail is one unit */
    last = n;
  if (first > n)
    first = n;
  return last - first + 1;
}

/* ---- tensor size against the copies ------------------------------------ */

static void fold_gcd(_Atomic uint64_t *g, uint64_t v) {
  uint64_t cur = atomic_load_explicit(g, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(
      g, &cur, ibp__gcd(cur, v), memory_order_relaxed, memory_order_relaxed))
    ;
}

static void fold_min(_Atomic uint64_t *m, uint64_t v) {
  uint64_t cur = atomic_load_explicit(m, memory_order_relaxed);
  while ((cur == 0 || v < cur) &&
         !atomic_compare_exchange_weak_explicit(
             m, &cur, v, memory_order_relaxed, memory_order_relaxed))
    ;
}

static void fold_max(_Atomic uint64_t *m, uint64_t v) {
  uint64_t cur = atomic_load_explicit(m, memory_order_relaxed);
  while (v > cur && !atomic_compare_exchange_weak_explicit(
                        m, &cur, v, memory_order_relaxed, memory_order_relaxed))
    ;
}

/* A tensor size every copy seen starts and ends on -- from the gcd of
 * their offsets and lengths (at most the largest copy), chosen as
 * discovery chooses it (stats/discover.h), so the warning and
 * `ibp run --discover` name the same size. */
static uint64_t fitting_tensor(const ibp_gate_seen *g) {
  uint64_t t = atomic_load_explicit(&g->gcd, memory_order_relaxed);
  uint64_t most = atomic_load_explicit(&g->max_len, memory_order_relaxed);
  return ibp__discover_fit_tensor(t && t <= most ? t : most);
}

uint64_t ibp__gate_stored_estimate(const ibp_served_region *s, uint64_t bytes) {
  const ibp_gate_seen *g = &s->gate;
  if (atomic_load_explicit(&g->copies, memory_order_relaxed) < MISMATCH_AFTER)
    return 0;
  /* written, busy or not yet placed tensors are read raw: count exactly */
  if (atomic_load_explicit(&s->track.dirty_tensors, memory_order_relaxed) ||
      atomic_load_explicit(&s->refresh.refreshing, memory_order_relaxed) ||
      atomic_load_explicit(&s->layout.filled, memory_order_relaxed) <
          s->geometry.tensors)
    return 0;
  uint64_t req = atomic_load_explicit(&g->requested, memory_order_relaxed);
  uint64_t host = atomic_load_explicit(&g->host_bytes, memory_order_relaxed);
  if (!req || !host)
    return 0;
  return (uint64_t)((double)bytes * (double)host / (double)req) + 1;
}

int ibp__gate_misfit(ibp_region_rec *r, uint64_t offset, uint64_t bytes,
                     uint64_t stored) {
  ibp_served_region *s = ibp__served(r);
  ibp_gate_seen *g = &s->gate;
  /* judged once, on the first copies: after that, one relaxed load */
  if (atomic_load_explicit(&g->copies, memory_order_relaxed) >= MISMATCH_AFTER)
    return 0;
  uint64_t n = atomic_fetch_add_explicit(&g->copies, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&g->requested, bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&g->host_bytes, stored, memory_order_relaxed);
  fold_min(&g->min_len, bytes);
  fold_max(&g->max_len, bytes);
  fold_gcd(&g->gcd, bytes);
  fold_gcd(&g->gcd, offset);
  if (n + 1 != MISMATCH_AFTER)
    return 0;
  uint64_t req = atomic_load_explicit(&g->requested, memory_order_relaxed);
  uint64_t host = atomic_load_explicit(&g->host_bytes, memory_order_relaxed);
  if (host <= req)
    return 0;
  return 1;
}

void ibp__gate_warn_misfit(const ibp_region_rec *r) {
  const ibp_served_region *s = ibp__served(r);
  const ibp_gate_seen *g = &s->gate;
  uint64_t req = atomic_load_explicit(&g->requested, memory_order_relaxed);
  uint64_t host = atomic_load_explicit(&g->host_bytes, memory_order_relaxed);
  char rule[32], fix[80];
  ibp__log(
      IBP_LOG_WARN,
      "region '%s' (%s): its %u-byte tensors do not fit its copies "
      "(%llu to %llu bytes): they would read %llu bytes over PCIe for "
      "%llu requested; it passes through -- try %s",
      r->name, ibp__rule_label(r->rule.index, rule, sizeof rule),
      s->geometry.tensor_bytes, (unsigned long long)atomic_load(&g->min_len),
      (unsigned long long)atomic_load(&g->max_len), (unsigned long long)host,
      (unsigned long long)req,
      ibp__rule_tensor_fix(r->rule.index, fitting_tensor(g), fix, sizeof fix));
}

int ibp__gate_guessed(int dev, int stage) {
  return !ibp__gate_decode_measured(dev) || (stage && !stage_measured[dev]);
}

void ibp__gate_flag_guesses(int dev, int stage,
                            ibp_route_cost prior[IBP_ROUTES]) {
  if (!ibp__gate_guessed(dev, stage))
    return;
  for (int r = 0; r < IBP_ROUTES; r++)
    if (r != IBP_ROUTE_DRIVER)
      prior[r].guessed = 1;
}
