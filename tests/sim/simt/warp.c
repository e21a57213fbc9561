/*
 * Warp collectives and __syncthreads, with the checks a real GPU leaves
 * undefined:
 *   - every lane named in a collective's mask must call the same collective
 *     with the same mask; a named lane that has exited, does not exist, waits
 *     at __syncthreads or calls another collective is an error;
 *   - a shuffle may only read a lane inside the mask;
 *   - __syncthreads waits for every thread of the block that has not exited;
 *     a thread that exits while others wait there is an error.
 * Groups with disjoint masks (divergent halves of a warp) may be in progress
 * at the same time.  The last lane to arrive computes every lane's result.
 */
#include "simt_internal.h"

#include <stdio.h>
#include <string.h>

const char *simt__op_name(unsigned op) {
  static const char *const names[] = {
      "__syncwarp",       "__ballot_sync",   "__any_sync",
      "__all_sync",       "__shfl_sync",     "__shfl_up_sync",
      "__shfl_down_sync", "__shfl_xor_sync", "warp scan (add)",
  };
  return op < sizeof names / sizeof names[0] ? names[op] : "?";
}

/* The lane a shuffle of lane `lane` reads (width 32, PTX shfl.sync rules),
 * or -1 when it keeps its own value. */
static inline int shfl_source(unsigned op, unsigned lane, uint32_t arg) {
  switch (op) {
  case SIMT_OP_SHFL:
    return (int)(arg % SIMT_WARP);
  case SIMT_OP_SHFL_UP:
    return arg <= lane ? (int)(lane - arg) : -1;
  case SIMT_OP_SHFL_DOWN:
    return arg < SIMT_WARP - lane ? (int)(lane + arg) : -1;
  case SIMT_OP_SHFL_XOR:
    return (lane ^ arg) < SIMT_WARP ? (int)(lane ^ arg) : -1;
  default:
    return -1;
  }
}

static uint32_t groups_mask(const struct simt_warp *w) {
  uint32_t m = 0;
  for (unsigned i = 0; i < w->ngroups; i++)
    m |= w->groups[i].mask;
  return m;
}

/* Host read counters of lanes that meet again are aligned, so that a lane
 * that skipped a read (divergence) does not shift its later reads into the
 * wrong warp-wide request. */
static void align_reads(struct simt_run *r, struct simt_warp *w,
                        uint32_t mask) {
  /* No open request: every live lane's counter already equals the base
   * (pcie.c), so there is nothing to align. */
  if (w->reads.count == 0)
    return;
  uint64_t top = 0;
  for (uint32_t m = mask; m; m &= m - 1) {
    uint64_t k = w->lane[__builtin_ctz(m)]->host_reads;
    top = k > top ? k : top;
  }
  for (uint32_t m = mask; m; m &= m - 1)
    w->lane[__builtin_ctz(m)]->host_reads = top;
  simt__pcie_settle(r, w);
}

static uint32_t votes(const struct simt_warp *w, uint32_t mask) {
  uint32_t v = 0;
  for (uint32_t m = mask; m; m &= m - 1) {
    unsigned l = (unsigned)__builtin_ctz(m);
    v |= (uint32_t)(w->val[l] != 0) << l;
  }
  return v;
}

/* Every lane's result; one loop per operation, as this runs for every
 * collective. */
static void compute(struct simt_warp *w, unsigned op, uint32_t mask) {
  uint32_t r, m;
  const uint32_t *val = w->val, *arg = w->arg;
  uint32_t *res = w->res;
  switch (op) {
  case SIMT_OP_SYNCWARP:
    return;
  case SIMT_OP_SHFL:
    for (m = mask; m; m &= m - 1) {
      unsigned l = (unsigned)__builtin_ctz(m);
      res[l] = val[arg[l] % SIMT_WARP];
    }
    return;
  case SIMT_OP_SHFL_UP:
    for (m = mask; m; m &= m - 1) {
      unsigned l = (unsigned)__builtin_ctz(m);
      res[l] = arg[l] <= l ? val[l - arg[l]] : val[l];
    }
    return;
  case SIMT_OP_SHFL_DOWN:
    for (m = mask; m; m &= m - 1) {
      unsigned l = (unsigned)__builtin_ctz(m);
      res[l] = arg[l] < SIMT_WARP - l ? val[l + arg[l]] : val[l];
    }
    return;
  case SIMT_OP_SHFL_XOR:
    for (m = mask; m; m &= m - 1) {
      unsigned l = (unsigned)__builtin_ctz(m);
      res[l] = (l ^ arg[l]) < SIMT_WARP ? val[l ^ arg[l]] : val[l];
    }
    return;
  case SIMT_OP_SCAN_ADD:
    r = 0;
    for (m = mask; m; m &= m - 1) {
      unsigned l = (unsigned)__builtin_ctz(m);
      res[l] = r;
      r += val[l];
    }
    for (m = mask; m; m &= m - 1)
      w->total[__builtin_ctz(m)] = r;
    return;
  case SIMT_OP_BALLOT:
    r = votes(w, mask);
    break;
  case SIMT_OP_ANY:
    r = votes(w, mask) != 0;
    break;
  default: /* SIMT_OP_ALL */
    r = votes(w, mask) == mask;
    break;
  }
  for (m = mask; m; m &= m - 1)
    res[__builtin_ctz(m)] = r;
}

/* compute() for a whole warp: straight loops, no bit scanning. */
static void compute_full(struct simt_warp *w, unsigned op) {
  const uint32_t *val = w->val, *arg = w->arg;
  uint32_t *res = w->res, r = 0;
  unsigned l;
  switch (op) {
  case SIMT_OP_SYNCWARP:
    return;
  case SIMT_OP_SHFL:
    for (l = 0; l < SIMT_WARP; l++)
      res[l] = val[arg[l] % SIMT_WARP];
    return;
  case SIMT_OP_SHFL_UP:
    for (l = 0; l < SIMT_WARP; l++)
      res[l] = val[arg[l] <= l ? l - arg[l] : l];
    return;
  case SIMT_OP_SHFL_DOWN:
    for (l = 0; l < SIMT_WARP; l++)
      res[l] = val[arg[l] < SIMT_WARP - l ? l + arg[l] : l];
    return;
  case SIMT_OP_SHFL_XOR:
    for (l = 0; l < SIMT_WARP; l++)
      res[l] = val[(l ^ arg[l]) < SIMT_WARP ? l ^ arg[l] : l];
    return;
  case SIMT_OP_SCAN_ADD:
    for (l = 0; l < SIMT_WARP; l++) {
      res[l] = r;
      r += val[l];
    }
    for (l = 0; l < SIMT_WARP; l++)
      w->total[l] = r;
    return;
  default:
    for (l = 0; l < SIMT_WARP; l++)
      r |= (uint32_t)(val[l] != 0) << l;
    r = op == SIMT_OP_BALLOT ? r : op == SIMT_OP_ANY ? r != 0 : r == ~0u;
    for (l = 0; l < SIMT_WARP; l++)
      res[l] = r;
    return;
  }
}

/* The last lane has arrived: results, then everyone back to the pool. */
static void complete(struct simt_run *r, struct simt_warp *w, unsigned gi) {
  unsigned op = w->groups[gi].op;
  uint32_t mask = w->groups[gi].mask;
  w->groups[gi] = w->groups[--w->ngroups];
  if (mask == ~0u) {
    /* Every lane was waiting, so none is in the ready list. */
    compute_full(w, op);
    memcpy(w->rq, w->lane, sizeof w->rq);
    w->nrq = SIMT_WARP;
  } else {
    compute(w, op, mask);
    struct simt_fiber **rq = w->rq + w->nrq;
    for (uint32_t m = mask; m; m &= m - 1)
      *rq++ = w->lane[__builtin_ctz(m)];
    w->nrq = (unsigned)(rq - w->rq);
  }
  r->ready_warps |= 1u << w->index;
  r->reselect = 1; /* the warp's segment ends here */
  align_reads(r, w, mask);
}

/* ---- violations (cold) --------------------------------------------------- */

static SIMT_NORETURN __attribute__((noinline, cold)) void
bad_mask(struct simt_fiber *f, unsigned op, uint32_t mask) {
  const struct simt_warp *w = f->warp;
  const char *name = simt__op_name(op);
  if (!(mask & 1u << f->lane))
    simt__fail(f, "%s(mask 0x%08x): the calling lane is not in the mask", name,
               mask);
  if (mask & ~w->exists)
    simt__fail(f, "%s(mask 0x%08x) names lanes 0x%08x that this block lacks",
               name, mask, mask & ~w->exists);
  if (mask & w->exited)
    simt__fail(f, "%s(mask 0x%08x) names lanes 0x%08x that have exited", name,
               mask, mask & w->exited);
  simt__fail(f, "%s(mask 0x%08x) names lanes 0x%08x that wait at __syncthreads",
             name, mask, mask & w->at_bar);
}

static SIMT_NORETURN __attribute__((noinline, cold)) void
bad_source(struct simt_fiber *f, unsigned op, uint32_t mask, int src) {
  simt__fail(f, "%s(mask 0x%08x) reads lane %d, outside the mask",
             simt__op_name(op), mask, src);
}

static SIMT_NORETURN __attribute__((noinline, cold)) void
bad_group(struct simt_fiber *f, unsigned op, uint32_t mask,
          const struct simt_group *g) {
  simt__fail(f, "%s(mask 0x%08x) while lanes 0x%08x wait in %s(mask 0x%08x)",
             simt__op_name(op), mask, g->arrived, simt__op_name(g->op),
             g->mask);
}

/* ---- arrival ------------------------------------------------------------- */

/* The group lane f joins (a new one when none overlaps its mask). */
static __attribute__((noinline)) struct simt_group *
join_slow(struct simt_fiber *f, unsigned op, uint32_t mask) {
  struct simt_warp *w = f->warp;
  for (unsigned i = 0; i < w->ngroups; i++) {
    struct simt_group *g = &w->groups[i];
    if (!(g->mask & mask))
      continue;
    if (g->op != op || g->mask != mask)
      bad_group(f, op, mask, g);
    return g;
  }
  struct simt_group *g = &w->groups[w->ngroups++];
  g->op = op;
  g->mask = mask;
  g->arrived = 0;
  return g;
}

/* Common case first: the warp's first group is this very collective. */
static inline struct simt_group *join(struct simt_fiber *f, unsigned op,
                                      uint32_t mask) {
  struct simt_group *g = &f->warp->groups[0];
  if (f->warp->ngroups && g->mask == mask && g->op == op)
    return g;
  return join_slow(f, op, mask);
}

/* Inlined into each collective, so that `op` is a constant and only its
 * own checks remain. */
static inline __attribute__((always_inline)) uint32_t
warp_op(unsigned op, uint32_t mask, uint32_t v, uint32_t arg) {
  struct simt_fiber *f = simt__self();
  struct simt_warp *w = f->warp;
  unsigned lane = f->lane;
  uint32_t bit = 1u << lane;
  /* Every named lane must be able to arrive: present, not exited, not
   * held at __syncthreads; and the caller must be one of them. */
  if (__builtin_expect(!(mask & bit) || (mask & w->unavailable), 0))
    bad_mask(f, op, mask);
  if (op >= SIMT_OP_SHFL && op <= SIMT_OP_SHFL_XOR) {
    int src = shfl_source(op, lane, arg);
    if (src >= 0 && !(mask & 1u << src))
      bad_source(f, op, mask, src);
  }
  struct simt_group *g = join(f, op, mask);
  g->arrived |= bit;
  if (op != SIMT_OP_SYNCWARP)
    w->val[lane] = v;
  if (op >= SIMT_OP_SHFL && op <= SIMT_OP_SHFL_XOR)
    w->arg[lane] = arg;
  if (g->arrived == mask)
    complete(f->run, w, (unsigned)(g - w->groups));
  simt__yield(f);
  return w->res[lane];
}

unsigned simt_ballot(unsigned mask, int pred) {
  return warp_op(SIMT_OP_BALLOT, mask, pred != 0, 0);
}

int simt_any(unsigned mask, int pred) {
  return (int)warp_op(SIMT_OP_ANY, mask, pred != 0, 0);
}

int simt_all(unsigned mask, int pred) {
  return (int)warp_op(SIMT_OP_ALL, mask, pred != 0, 0);
}

unsigned simt_shfl(unsigned mask, unsigned v, int src_lane) {
  return warp_op(SIMT_OP_SHFL, mask, v, (uint32_t)src_lane);
}

unsigned simt_shfl_up(unsigned mask, unsigned v, unsigned delta) {
  return warp_op(SIMT_OP_SHFL_UP, mask, v, delta);
}

unsigned simt_shfl_down(unsigned mask, unsigned v, unsigned delta) {
  return warp_op(SIMT_OP_SHFL_DOWN, mask, v, delta);
}

unsigned simt_shfl_xor(unsigned mask, unsigned v, unsigned lane_mask) {
  return warp_op(SIMT_OP_SHFL_XOR, mask, v, lane_mask);
}

unsigned simt_scan_add(unsigned mask, unsigned v, unsigned *total) {
  unsigned before = warp_op(SIMT_OP_SCAN_ADD, mask, v, 0);
  *total = simt__self()->warp->total[simt__self()->lane];
  return before;
}

void simt_syncwarp(unsigned mask) {
  (void)warp_op(SIMT_OP_SYNCWARP, mask, 0, 0);
}

/* ---- __syncthreads ------------------------------------------------------- */

static void release_barrier(struct simt_run *r) {
  for (unsigned wi = 0; wi < r->nwarps; wi++) {
    struct simt_warp *w = &r->ws->warps[wi];
    uint32_t m = w->at_bar;
    w->at_bar = 0;
    w->unavailable &= ~m;
    for (uint32_t b = m; b; b &= b - 1)
      simt__make_ready(r, w->lane[__builtin_ctz(b)]);
    if (m)
      align_reads(r, w, m);
  }
  r->at_bar = 0;
  r->reselect = 1;
}

void simt_syncthreads(void) {
  struct simt_fiber *f = simt__self();
  struct simt_warp *w = f->warp;
  struct simt_run *r = f->run;
  uint32_t waiting = groups_mask(w);
  if (waiting & 1u << f->lane)
    simt__fail(f,
               "__syncthreads while lanes of its warp wait for this lane in "
               "a warp collective (mask 0x%08x)",
               waiting);
  w->at_bar |= 1u << f->lane;
  w->unavailable |= 1u << f->lane;
  if (++r->at_bar == r->live)
    release_barrier(r);
  simt__yield(f);
}

/* ---- exit ---------------------------------------------------------------- */

void simt__thread_exit(struct simt_fiber *f) {
  struct simt_warp *w = f->warp;
  struct simt_run *r = f->run;
  unsigned pending = simt__cpa_pending(f);
  if (pending)
    simt__fail(f, "thread exits with %u cp.async copies pending", pending);
  for (unsigned i = 0; i < w->ngroups; i++) {
    const struct simt_group *g = &w->groups[i];
    if (g->mask & 1u << f->lane)
      simt__fail(f,
                 "thread exits while lanes 0x%08x wait for it in "
                 "%s(mask 0x%08x)",
                 g->arrived, simt__op_name(g->op), g->mask);
  }
  if (r->at_bar)
    simt__fail(f, "thread exits while %u threads wait at __syncthreads",
               r->at_bar);
  w->exited |= 1u << f->lane;
  w->unavailable |= 1u << f->lane;
  r->live--;
  if (w->exited == w->exists)
    simt__pcie_flush(r, w);
  else if (w->reads.count)
    simt__pcie_settle(r, w);
}

/* ---- deadlock report ----------------------------------------------------- */

void simt__describe_waits(struct simt_run *r, char *out, size_t n) {
  size_t used = 0;
  out[0] = 0;
  for (unsigned wi = 0; wi < r->nwarps && used < n; wi++) {
    const struct simt_warp *w = &r->ws->warps[wi];
    for (unsigned i = 0; i < w->ngroups && used < n; i++) {
      const struct simt_group *g = &w->groups[i];
      used += (size_t)snprintf(out + used, n - used,
                               "warp %u lanes 0x%08x wait in %s(mask 0x%08x); ",
                               wi, g->arrived, simt__op_name(g->op), g->mask);
    }
  }
  if (used < n)
    snprintf(out + used, n - used,
             "%u of %u live threads wait at "
             "__syncthreads",
             r->at_bar, r->live);
}
