/*
 * SIMT emulator internals: the objects of one launch and the functions the
 * emulator's files share (prefix simt__, hidden from the shared objects the
 * library is linked into).
 *
 * Ownership: a launch (struct simt_run) lives on the stack of the host thread
 * that called simt_run and owns everything reachable from it; all fibers of
 * the launch run on that thread, so nothing here is locked.  Only the pinned
 * range registry, the kernel registry, the process-wide PCIe totals and the
 * workspace pool are shared between host threads (each with its own lock).
 */
#ifndef IBP_SIMT_INTERNAL_H
#define IBP_SIMT_INTERNAL_H

#include "simt.h"
#include "simt_device.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__SANITIZE_ADDRESS__)
#define SIMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIMT_ASAN 1
#endif
#endif
#ifndef SIMT_ASAN
#define SIMT_ASAN 0
#endif

#define SIMT_HIDDEN __attribute__((visibility("hidden")))
#define SIMT_NORETURN __attribute__((noreturn))
#define SIMT_PRINTF(f, a) __attribute__((format(printf, f, a)))
/* A thread-local read by every device call: the initial-exec model makes
 * it one %fs-relative load even inside the simulated libcuda.so.1, where
 * the default (general-dynamic) model calls __tls_get_addr -- which ASan
 * intercepts, ~11 % of an e2e program's time under it.  A library
 * dlopened with such a variable takes it from glibc's static TLS reserve:
 * keep them few and small. */
#define SIMT_TLS_INITIAL_EXEC __attribute__((tls_model("initial-exec")))

#define SIMT_WARP 32u
#define SIMT_MAX_THREADS 1024u
/* Shared memory per block: sm_90's opt-in maximum (227 KiB). */
#define SIMT_MAX_SHARED (227u * 1024u)
/* Fresh shared memory and cp.async destinations read as this byte. */
#define SIMT_POISON 0xCD
#define SIMT_MSG_BYTES 512

/* ---- contexts and stacks (fiber_x86_64.c, fiber_stack.c) ----------------- */

/* A suspended execution context: a fiber's or the launching host thread's.
 * The stack bounds and ASan's fake stack matter only under ASan. */
struct simt_ctx {
  void *sp;
  const void *stack_lo;
  size_t stack_bytes;
  void *fake_stack;
};

/* Saves the callee-saved general registers on the current stack, stores
 * the stack pointer in *save_sp, then resumes the context whose stack
 * pointer is load_sp.  The _fpenv variant also saves and restores MXCSR and
 * the x87 control word (fiber_x86_64.c says when each is used). */
SIMT_HIDDEN void simt__ctx_swap(void **save_sp, void *load_sp);
SIMT_HIDDEN void simt__ctx_swap_fpenv(void **save_sp, void *load_sp);
/* Lays out a fresh stack below stack_top so that the first simt__ctx_swap
 * into the returned stack pointer calls fn(arg) (fn must never return). */
SIMT_HIDDEN void *simt__ctx_prepare(void *stack_top, void (*fn)(void *),
                                    void *arg);

/* One mapping holding `count` fiber stacks, each above a PROT_NONE guard
 * page so that an overflow faults instead of corrupting its neighbour. */
struct simt_stacks {
  char *map;
  size_t map_bytes, stride, stack_bytes, guard_bytes;
  unsigned count;
};
SIMT_HIDDEN int simt__stacks_map(struct simt_stacks *s, unsigned count);
SIMT_HIDDEN void simt__stacks_unmap(struct simt_stacks *s);
SIMT_HIDDEN char *simt__stack_lo(const struct simt_stacks *s, unsigned i);
/* ASan: clears the poison that the live frames of an abandoned fiber (one
 * suspended at sp on stack i) left behind; returning frames clear their
 * own. */
SIMT_HIDDEN void simt__stack_unpoison(const struct simt_stacks *s, unsigned i,
                                      const void *sp);

/* ---- per-thread and per-warp state --------------------------------------- */

enum simt_op {
  SIMT_OP_SYNCWARP,
  SIMT_OP_BALLOT,
  SIMT_OP_ANY,
  SIMT_OP_ALL,
  SIMT_OP_SHFL,
  SIMT_OP_SHFL_UP,
  SIMT_OP_SHFL_DOWN,
  SIMT_OP_SHFL_XOR,
  SIMT_OP_SCAN_ADD, /* exclusive prefix sum in lane order + total */
};
SIMT_HIDDEN const char *simt__op_name(unsigned op);

/* One cp.async copy: the source bytes were read at issue. */
struct simt_cpa {
  unsigned char *dst;
  uint32_t group;
  uint8_t bytes;
  unsigned char data[16];
};

struct simt_cpa_queue {
  struct simt_cpa *q; /* q[head, len) are pending, in issue order */
  unsigned head, len, cap;
  uint32_t committed; /* groups committed; the open group's id */
};

/* One warp-wide host read request: what each lane asked for. */
struct simt_req {
  uint32_t lanes;
  uint8_t len[SIMT_WARP];
  uintptr_t addr[SIMT_WARP];
};

/* The open requests of a warp: request k (k-th host read of each lane) sits
 * at ring[(head + k - base) % cap] for base <= k < base + count. */
struct simt_reqwin {
  struct simt_req *ring;
  unsigned cap, head, count;
  uint64_t base;
};

struct simt_run;
struct simt_warp;

struct simt_fiber {
  struct simt_ctx ctx;
  struct simt_run *run;
  struct simt_warp *warp;
  unsigned lane, tid;
  unsigned idx[3];
  uint64_t host_reads; /* host reads issued: the next one's request index */
  struct simt_cpa_queue cpa;
};

/* A collective in progress; the groups of a warp have disjoint masks. */
struct simt_group {
  unsigned op;
  uint32_t mask, arrived;
};

struct simt_warp {
  uint32_t exists; /* lanes present in the block */
  uint32_t exited;
  uint32_t at_bar;      /* lanes waiting at __syncthreads */
  uint32_t unavailable; /* ~exists | exited | at_bar: may not be named */
  unsigned ngroups;
  struct simt_group groups[SIMT_WARP];
  uint32_t val[SIMT_WARP], arg[SIMT_WARP], res[SIMT_WARP];
  uint32_t total[SIMT_WARP]; /* SIMT_OP_SCAN_ADD: the group's sum, per lane */
  struct simt_fiber *lane[SIMT_WARP];
  struct simt_fiber *rq[SIMT_WARP]; /* ready lanes: rq[0, nrq) */
  unsigned nrq;
  unsigned index; /* in the block */
  struct simt_reqwin reads;
};

/* ---- workspace: fibers, warps and stacks, pooled between launches -------- */

struct simt_ws {
  unsigned cap; /* threads */
  struct simt_stacks stacks;
  struct simt_fiber *fibers;
  struct simt_warp *warps;
  int stacks_dirty; /* ASan: a launch left poisoned frames on these stacks */
  struct simt_ws *next;
};
SIMT_HIDDEN struct simt_ws *simt__ws_get(unsigned threads);
SIMT_HIDDEN void simt__ws_put(struct simt_ws *ws);

/* ---- shared memory (shared_mem.c) ---------------------------------------- */

struct simt_static_shared {
  const void *key;
  unsigned char *mem;
  size_t bytes;
};

struct simt_shmem {
  unsigned char *dyn;
  size_t dyn_bytes;
  struct simt_static_shared *st;
  unsigned nst, cap;
  size_t st_bytes;
};
SIMT_HIDDEN int simt__shmem_init(struct simt_shmem *m, size_t dyn_bytes);
SIMT_HIDDEN void simt__shmem_block_start(struct simt_shmem *m);
SIMT_HIDDEN void simt__shmem_free(struct simt_shmem *m);
SIMT_HIDDEN int simt__shmem_contains(const struct simt_shmem *m, const void *p,
                                     size_t bytes);

/* ---- pinned host ranges (host_read.c) ------------------------------------ */

struct simt_range {
  uintptr_t lo, hi;
  uintptr_t alias; /* where device-side writes land (simt_host_set_alias) */
};

/* A launch's private copy of the registry: lookups take no lock. */
struct simt_hostmap {
  struct simt_range *r;
  unsigned n, cap;
  uint64_t version;
  struct simt_range last; /* last range hit */
  int strict;             /* simt_set_strict_host_reads */
};
SIMT_HIDDEN void simt__hostmap_init(struct simt_hostmap *m);
SIMT_HIDDEN int simt__hostmap_sync(struct simt_hostmap *m);
SIMT_HIDDEN void simt__hostmap_free(struct simt_hostmap *m);
/* Checks a read of [a, a+n) made by fiber f; returns 1 when it lies in
 * pinned host memory, 0 when it touches none (device memory), and stops the
 * launch when it straddles a range's end. */
SIMT_HIDDEN int simt__host_check(struct simt_fiber *f, uintptr_t a, size_t n);

/* ---- PCIe accounting (pcie.c) -------------------------------------------- */

SIMT_HIDDEN void simt__pcie_record(struct simt_fiber *f, uintptr_t a,
                                   unsigned n);
/* Closes the requests that every live lane of w has gone past. */
SIMT_HIDDEN void simt__pcie_settle(struct simt_run *r, struct simt_warp *w);
/* Closes all of w's requests (the warp has finished). */
SIMT_HIDDEN void simt__pcie_flush(struct simt_run *r, struct simt_warp *w);
SIMT_HIDDEN void simt__pcie_reset_window(struct simt_reqwin *win);
SIMT_HIDDEN void simt__pcie_free_window(struct simt_reqwin *win);
SIMT_HIDDEN void simt__pcie_add_total(const simt_pcie *p);

/* ---- the launch ---------------------------------------------------------- */

struct simt_run {
  const simt_launch *l;
  unsigned nthreads, nwarps;
  simt_dim3 block_idx;
  uint64_t seed, rng;
  uint64_t rbits; /* unused 16-bit draws of the last simt__rand */
  unsigned rcount;
  struct simt_ws *ws;
  uint32_t ready_warps;  /* warps with ready lanes */
  struct simt_warp *cur; /* the warp whose segment is running */
  int reselect;          /* a segment ended: draw the next warp */
  unsigned live;         /* threads of the block not exited */
  unsigned at_bar;       /* threads waiting at __syncthreads */
  struct simt_ctx host;
  struct simt_ctx *switch_from; /* ASan: the context being left */
  struct simt_shmem shm;
  struct simt_hostmap hosts;
  simt_pcie pcie;
  int started; /* blocks have begun to run */
  int failed;
  char msg[SIMT_MSG_BYTES];
};

/* The fiber running on this host thread (NULL outside a launch). */
extern SIMT_HIDDEN SIMT_TLS_INITIAL_EXEC _Thread_local struct simt_fiber
    *simt__cur;

/* The calling fiber; a device function called outside a launch is a
 * programming error in the test itself and aborts with a message. */
SIMT_HIDDEN struct simt_fiber *simt__self_slow(void);
static inline struct simt_fiber *simt__self(void) {
  struct simt_fiber *f = simt__cur;
  return f ? f : simt__self_slow();
}

/* Scheduling (sched.c). */
SIMT_HIDDEN int simt__run_block(struct simt_run *r);
SIMT_HIDDEN void simt__switch(struct simt_run *r, struct simt_ctx *from,
                              struct simt_ctx *to, struct simt_fiber *to_fiber,
                              int leaving);

/* Scheduling unit: a warp's segment.  Lanes of the running warp are drawn
 * at random from its ready lanes; when one of its collectives completes
 * (or it has no ready lane left) the next warp is drawn at random from the
 * warps with ready lanes.  So lanes of a warp run in random order between
 * its sync points, warps' segments in random order, and the block's hot
 * stacks stay those of about one warp (sched.c explains the cost). */
static inline void simt__make_ready(struct simt_run *r, struct simt_fiber *f) {
  struct simt_warp *w = f->warp;
  w->rq[w->nrq++] = f;
  r->ready_warps |= 1u << w->index;
}

/* xorshift64*: the lane-order generator. */
static inline uint64_t simt__rand(struct simt_run *r) {
  uint64_t x = r->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->rng = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/* A draw from [0, n), n <= 32: 16 random bits each (bias below n/2^16),
 * four per xorshift step. */
static inline unsigned simt__draw(struct simt_run *r, unsigned n) {
  if (r->rcount == 0) {
    r->rbits = simt__rand(r);
    r->rcount = 4;
  }
  unsigned v = (unsigned)(r->rbits & 0xffff);
  r->rbits >>= 16;
  r->rcount--;
  return (v * n) >> 16;
}

SIMT_HIDDEN struct simt_warp *simt__draw_warp(struct simt_run *r);

/* Draws the next fiber to run and takes it out of the ready lanes; NULL
 * when no fiber is ready. */
static inline struct simt_fiber *simt__pick(struct simt_run *r) {
  struct simt_warp *w = r->cur;
  if (r->reselect || w->nrq == 0) {
    if (!r->ready_warps)
      return NULL;
    w = simt__draw_warp(r);
  }
  unsigned i = simt__draw(r, w->nrq);
  struct simt_fiber *f = w->rq[i];
  w->rq[i] = w->rq[--w->nrq];
  if (w->nrq == 0)
    r->ready_warps &= ~(1u << w->index);
  return f;
}

/* Hands the host thread to a fiber drawn from the ready pool (self again,
 * if it is in the pool and drawn), or to the launch's host context when
 * no fiber is ready.  Returns when self is resumed.  This is the hot path
 * of every collective, hence inline. */
static inline void simt__yield(struct simt_fiber *self) {
  struct simt_run *r = self->run;
  struct simt_fiber *next = simt__pick(r);
  if (!next) {
    simt__switch(r, &self->ctx, &r->host, NULL, 0);
    return;
  }
  if (next == self)
    return;
#if SIMT_ASAN
  simt__switch(r, &self->ctx, &next->ctx, next, 0);
#else
  simt__cur = next;
  simt__ctx_swap(&self->ctx.sp, next->ctx.sp);
#endif
}

/* Errors: a fiber's violation stops the launch and abandons the fiber. */
SIMT_HIDDEN SIMT_NORETURN SIMT_PRINTF(2,
                                      3) void simt__fail(struct simt_fiber *f,
                                                         const char *fmt, ...);
/* A violation found by the host side of the launch (no fiber to blame). */
SIMT_HIDDEN SIMT_PRINTF(2, 3) void simt__run_fail(struct simt_run *r,
                                                  const char *fmt, ...);

/* Warp bookkeeping (warp.c). */
SIMT_HIDDEN void simt__thread_exit(struct simt_fiber *f);
SIMT_HIDDEN void simt__describe_waits(struct simt_run *r, char *out, size_t n);

/* cp.async (cp_async.c). */
SIMT_HIDDEN unsigned simt__cpa_pending(const struct simt_fiber *f);
SIMT_HIDDEN void simt__cpa_free(struct simt_cpa_queue *q);

#endif /* IBP_SIMT_INTERNAL_H */
