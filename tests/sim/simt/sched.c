/*
 * Scheduling one block: every GPU thread is a fiber; a fiber runs until it
 * reaches a collective, __syncthreads or its end, then hands the host thread
 * to the next fiber (simt__yield, simt_internal.h) or, when none is ready,
 * back to the launching host context.  Fibers switch to each other
 * directly: one switch per yield, no trip through a scheduler loop.
 *
 * Order: lanes of the running warp are drawn at random; at the end of a
 * warp segment (one of its collectives completes, __syncthreads releases,
 * or it has no ready lane) the next warp is drawn at random.  Drawing lanes
 * from the whole block instead would interleave warps more finely, but it
 * keeps the stacks of every thread of the block hot at once: with 4 warps
 * that overflows L1 and costs a third of the emulator's speed.  Any order
 * of two warps' segments still happens for some seed, which is what
 * exposes a missing __syncthreads.
 *
 * A violation abandons the failing fiber (and, with it, every suspended
 * fiber of the block): control returns to the host context, which reports.
 */
#include "simt_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#if SIMT_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

SIMT_TLS_INITIAL_EXEC _Thread_local struct simt_fiber *simt__cur;

struct simt_fiber *simt__self_slow(void) {
  fputs("simt: a device function was called outside a kernel launch\n", stderr);
  abort();
}

/* ---- switching ----------------------------------------------------------- */

#if SIMT_ASAN
/* ASan tracks one stack per thread; tell it where we are after a switch.
 * The host thread's stack bounds are learnt from the first switch away from
 * it (ASan reports the stack that was left). */
static void finish_switch(struct simt_run *r, void *fake_stack) {
  const void *lo;
  size_t bytes;
  __sanitizer_finish_switch_fiber(fake_stack, &lo, &bytes);
  if (r->switch_from == &r->host) {
    r->host.stack_lo = lo;
    r->host.stack_bytes = bytes;
  }
}
#endif

/* Leaves `from` for `to` (to_fiber: the fiber `to` belongs to, NULL for the
 * host).  `leaving` means `from` never runs again.  The common case, one
 * fiber to another without ASan, is inlined in simt__yield. */
void simt__switch(struct simt_run *r, struct simt_ctx *from,
                  struct simt_ctx *to, struct simt_fiber *to_fiber,
                  int leaving) {
  simt__cur = to_fiber;
#if SIMT_ASAN
  r->switch_from = from;
  __sanitizer_start_switch_fiber(leaving ? NULL : &from->fake_stack,
                                 to->stack_lo, to->stack_bytes);
#else
  (void)leaving;
#endif
  if (from == &r->host || to == &r->host)
    simt__ctx_swap_fpenv(&from->sp, to->sp);
  else
    simt__ctx_swap(&from->sp, to->sp);
#if SIMT_ASAN
  finish_switch(r, from->fake_stack);
#endif
}

/* A fiber's last switch: to the next ready fiber, or to the host. */
static SIMT_NORETURN void leave_for_good(struct simt_fiber *self) {
  struct simt_run *r = self->run;
  struct simt_fiber *next = simt__pick(r);
  if (!next)
    simt__switch(r, &self->ctx, &r->host, NULL, 1);
  else
    simt__switch(r, &self->ctx, &next->ctx, next, 1);
  __builtin_unreachable();
}

struct simt_warp *simt__draw_warp(struct simt_run *r) {
  uint32_t m = r->ready_warps;
  for (unsigned k = simt__draw(r, (unsigned)__builtin_popcount(m)); k; k--)
    m &= m - 1;
  r->reselect = 0;
  return r->cur = &r->ws->warps[__builtin_ctz(m)];
}

/* ---- a fiber's life ------------------------------------------------------ */

static SIMT_NORETURN void fiber_main(void *arg) {
  struct simt_fiber *f = arg;
  struct simt_run *r = f->run;
#if SIMT_ASAN
  finish_switch(r, NULL);
#endif
  r->l->entry(r->l->args);
  simt__thread_exit(f);
  leave_for_good(f);
}

/* Stacks sit at a 4 KiB-multiple stride, so every fiber's hot frames would
 * fall into the same L1 cache sets; starting each a different number of
 * cache lines below its top spreads them over all sets (9 lines: coprime
 * with the 64 sets of a 4 KiB page). */
static size_t color(unsigned t) {
  return (size_t)t * 9 * 64 % 4096;
}

static void fibers_init(struct simt_run *r) {
  struct simt_ws *ws = r->ws;
  const simt_dim3 b = r->l->block;
  for (unsigned w = 0; w < r->nwarps; w++) {
    struct simt_warp *wp = &ws->warps[w];
    unsigned n = r->nthreads - w * SIMT_WARP;
    wp->exists = n >= SIMT_WARP ? ~0u : (1u << n) - 1u;
    wp->exited = wp->at_bar = 0;
    wp->unavailable = ~wp->exists;
    wp->ngroups = 0;
    wp->nrq = 0;
    wp->index = w;
    simt__pcie_reset_window(&wp->reads);
  }
  r->ready_warps = 0;
  r->cur = &ws->warps[0];
  r->reselect = 1;
  for (unsigned t = 0; t < r->nthreads; t++) {
    struct simt_fiber *f = &ws->fibers[t];
    char *lo = simt__stack_lo(&ws->stacks, t);
    f->run = r;
    f->tid = t;
    f->lane = t % SIMT_WARP;
    f->warp = &ws->warps[t / SIMT_WARP];
    f->warp->lane[f->lane] = f;
    f->idx[0] = t % b.x;
    f->idx[1] = t / b.x % b.y;
    f->idx[2] = t / (b.x * b.y);
    f->host_reads = 0;
    f->cpa.head = f->cpa.len = 0;
    f->cpa.committed = 0;
    f->ctx.stack_lo = lo;
    f->ctx.stack_bytes = ws->stacks.stack_bytes;
    f->ctx.fake_stack = NULL;
    /* ASan: a fiber that finished never returned from its frames, whose
     * redzones are still poisoned (inlining decides where): clear them
     * before the stack is used again. */
    simt__stack_unpoison(&ws->stacks, t, f->ctx.sp);
    f->ctx.sp = simt__ctx_prepare(lo + ws->stacks.stack_bytes - color(t),
                                  fiber_main, f);
    simt__make_ready(r, f);
  }
  r->live = r->nthreads;
  r->at_bar = 0;
}

int simt__run_block(struct simt_run *r) {
  fibers_init(r);
  simt__shmem_block_start(&r->shm);
  if (simt__hostmap_sync(&r->hosts) != 0) {
    simt__run_fail(r, "out of memory copying the pinned-range registry");
    return -1;
  }
  struct simt_fiber *first = simt__pick(r);
  simt__switch(r, &r->host, &first->ctx, first, 0);
  /* Back here when no fiber can run any more, or after a violation; every
   * fiber left poisoned frames behind (ASan). */
  r->ws->stacks_dirty = 1;
  if (r->failed)
    return -1;
  if (r->live > 0) {
    char what[SIMT_MSG_BYTES];
    simt__describe_waits(r, what, sizeof what);
    simt__run_fail(r, "deadlock: no thread can run; %s", what);
    return -1;
  }
  return 0;
}

/* ---- errors -------------------------------------------------------------- */

/* "simt (SIMT_SEED=...): <where>: <what>": the seed first, so that it
 * survives any truncation of the message. */
static void vformat(struct simt_run *r, const char *where, const char *fmt,
                    va_list ap) {
  int n = snprintf(r->msg, sizeof r->msg,
                   "simt (SIMT_SEED=0x%llx): %s: ", (unsigned long long)r->seed,
                   where);
  if (n > 0 && (size_t)n < sizeof r->msg)
    vsnprintf(r->msg + n, sizeof r->msg - (size_t)n, fmt, ap);
  r->failed = 1;
}

void simt__run_fail(struct simt_run *r, const char *fmt, ...) {
  char where[64] = "launch";
  simt_dim3 b = r->block_idx;
  if (r->started)
    snprintf(where, sizeof where, "block (%u,%u,%u)", b.x, b.y, b.z);
  va_list ap;
  va_start(ap, fmt);
  vformat(r, where, fmt, ap);
  va_end(ap);
}

void simt__fail(struct simt_fiber *f, const char *fmt, ...) {
  struct simt_run *r = f->run;
  char where[128];
  simt_dim3 b = r->block_idx;
  snprintf(where, sizeof where,
           "block (%u,%u,%u) thread (%u,%u,%u) (warp %u lane %u)", b.x, b.y,
           b.z, f->idx[0], f->idx[1], f->idx[2], f->tid / SIMT_WARP, f->lane);
  va_list ap;
  va_start(ap, fmt);
  vformat(r, where, fmt, ap);
  va_end(ap);
  /* Abandon this fiber and every other one of the block. */
  simt__switch(r, &f->ctx, &r->host, NULL, 1);
  __builtin_unreachable();
}

void simt_trap(const char *what) {
  simt__fail(simt__self(), "trap: %s", what ? what : "(no message)");
}
