/*
 * Write tracking for shadow mode (docs/ARCHITECTURE.md, "No stale byte"):
 * the pages of a compressed region are held read-only; the first write to a
 * page faults, the tensors of every tracked region on that page are marked
 * dirty (served raw from then on) and the page is made writable, so the
 * store retries and succeeds.  Kernel-side writes (read(2) ...) are
 * announced by the libc hooks through ibp__track_before_write, which does
 * the same without a fault.
 *
 * The table.  SLOTS fixed slots, one per protected region, so the SIGSEGV
 * handler never locks or allocates.  A slot is FREE, BUSY (a writer fills
 * it), LIVE, or RETIRED (its page range stays behind as a tombstone, see
 * track_fault).  Writers (protect, unprotect) serialize on `wlock`; readers
 * (the handler, before_write) never block on them:
 *   - a reader enters a LIVE slot by incrementing `users` and re-reading the
 *     state (seq_cst, Dekker style); only then does it touch the region's
 *     ibp_tracked or the slot's page bitmap;
 *   - unprotect makes the pages writable, stores RETIRED, then waits until
 *     `users` drains.  After it returns no reader dereferences the
 *     ibp_tracked.
 * Per page the slot keeps one bit, "still protected by us".  Invariant:
 * a bit is cleared only after the tensors on its page were marked dirty,
 * and a page is made writable only after its bit was cleared -- so a page
 * can never be writable while its tensors are clean.
 *
 * Edge pages.  The base may be unaligned, so the first and last page may
 * hold other data, or belong to a neighbouring region too.  Every pass over
 * a page range therefore visits every LIVE slot covering it, and unprotect
 * leaves a shared page read-only while the neighbour still tracks it.  A
 * protect that races with a release of a shared page is caught by `gen`
 * (odd while protect changes protections; see release).
 *
 * The application's own mprotect.  The mprotect hook (hooks_libc.c)
 * calls ibp__track_app_protect before the real mprotect: the range is
 * announced like a write (its tensors marked dirty, the tracker's pages
 * there released and made writable), then the application's protection
 * applies.  The slot is marked app_owned, and ibp__track_reprotect never
 * protects that region again, so what the application set holds.  A write
 * fault on a page of a LIVE slot is still taken as the tracker's (see
 * track_fault): one the application provoked by making such a page
 * read-only itself makes the page writable and never reaches its handler.
 *
 * Limits.  SLOTS regions at once (protect fails beyond).  When
 * page-by-page release runs into vm.max_map_count, the whole region is
 * marked dirty and made writable (widen); serve/substitute.c then demotes
 * it as rewritten.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/log.h"
#include "track/track.h"
#include "track/track_private.h"

#define SLOTS IBP__PROT_SLOTS /* ~100 KiB of zero pages until used */

enum { SLOT_FREE = 0, SLOT_BUSY, SLOT_LIVE, SLOT_RETIRED };

typedef struct slot {
  _Atomic int state;
  _Atomic int users;
  _Atomic uintptr_t lo, hi; /* pages [lo, hi); read without entering */
  /* Written while BUSY; read only by readers that entered the slot. */
  ibp_tracked *r;
  ibp__geom g;
  _Atomic uint64_t *pages; /* bit k: page lo + k*page still read-only */
  size_t map_bytes;
  _Atomic int app_owned; /* the application changed protections here: they
                            hold, so never re-protect (refresh.c) */
} slot;

_Atomic unsigned ibp__track_live;

static slot slots[SLOTS];
static _Atomic int slots_used; /* slots [0, slots_used) were ever used */
static _Atomic unsigned gen;   /* odd while protect changes protections */
static _Atomic uintptr_t gen_lo, gen_hi; /* ... of these pages */
static _Atomic int releasing;            /* release passes in flight */
static _Atomic uintptr_t page;           /* page size, set by install */
static _Atomic int installed;
static pthread_mutex_t wlock = PTHREAD_MUTEX_INITIALIZER;

static _Atomic unsigned long events; /* protects and unprotects so far */

/* Calls that write from the kernel side (hooks_libc.c) between announcing
 * their buffers and returning; while any is, re-protection backs off. */
static _Atomic int kwrites;
static _Atomic int reprotecting; /* re-protections (or bridges) under way */

/* The address a stale fault was last retried at on this thread, and
 * `events` then (see track_fault). */
static __thread uintptr_t last_retry __attribute__((tls_model("initial-exec")));
static __thread unsigned long last_events
    __attribute__((tls_model("initial-exec")));

static int warned_install, warned_full, warned_mprotect;

static int covers(slot *s, uintptr_t plo, uintptr_t phi) {
  return atomic_load_explicit(&s->lo, memory_order_relaxed) < phi &&
         plo < atomic_load_explicit(&s->hi, memory_order_relaxed);
}

/* Enters s when it is LIVE and overlaps [plo, phi): 1 with `users` held. */
static int enter(slot *s, uintptr_t plo, uintptr_t phi) {
  if (atomic_load_explicit(&s->state, memory_order_relaxed) != SLOT_LIVE ||
      !covers(s, plo, phi))
    return 0;
  atomic_fetch_add(&s->users, 1);
  if (atomic_load(&s->state) == SLOT_LIVE && covers(s, plo, phi))
    return 1;
  atomic_fetch_sub(&s->users, 1);
  return 0;
}

/* Clears the protection bits of s's pages in [a, b) after marking their
 * tensors dirty and counting them in dirty_tensors.  Returns the number of
 * bits this call cleared.  The count goes up before the page can turn
 * writable: a copy that finds dirty_tensors == 0 skips the dirty bits
 * (substitute.c), so a write another thread makes through the page once it
 * is writable must already be counted. */
static uint64_t claim(slot *s, uintptr_t a, uintptr_t b) {
  uintptr_t pg = atomic_load_explicit(&page, memory_order_relaxed);
  uintptr_t lo = atomic_load_explicit(&s->lo, memory_order_relaxed);
  size_t k = (a - lo) / pg, kend = (b - lo) / pg;
  uint64_t claimed = 0;
  while (k < kend) {
    size_t w = k / 64, stop = (w + 1) * 64 < kend ? (w + 1) * 64 : kend;
    uint64_t m =
        (UINT64_MAX << (k % 64)) & (UINT64_MAX >> (63 - (stop - 1 - w * 64)));
    uint64_t set = atomic_load(&s->pages[w]) & m;
    if (set) {
      /* Pages between the lowest and highest set bit that are already
       * clear were marked when they were cleared: one span is exact. */
      uintptr_t p0 = lo + (w * 64 + (size_t)__builtin_ctzll(set)) * pg;
      uintptr_t p1 = lo + (w * 64 + 64 - (size_t)__builtin_clzll(set)) * pg;
      uint64_t newly = ibp__mark_span(&s->g, p0, p1);
      uint64_t old = atomic_fetch_and(&s->pages[w], ~set);
      claimed += (uint64_t)__builtin_popcountll(old & set);
      /* Marked again after the bits are clear: a refresh that cleared a
       * dirty bit between the first mark and the bit clearing either sees
       * the page unprotected or loses to this mark (refresh.c). */
      newly += ibp__mark_span(&s->g, p0, p1);
      if (newly)
        atomic_fetch_add(&s->r->dirty_tensors, newly);
    }
    k = stop;
  }
  return claimed;
}

/* A protect is changing the protections of pages overlapping [plo, phi). */
static int protect_pending(unsigned g, uintptr_t plo, uintptr_t phi) {
  return (g & 1) && atomic_load(&gen_lo) < phi && plo < atomic_load(&gen_hi);
}

enum { REL_COVERED = 1, REL_CLAIMED = 2, REL_FAILED = 4 };

static int bit(const uint64_t *set, int i) {
  return set[i / 64] >> (i % 64) & 1;
}

/* Claims the pages of other LIVE slots on page p (an edge page of s). */
static void claim_neighbours(const slot *self, uintptr_t p) {
  uintptr_t pg = atomic_load_explicit(&page, memory_order_relaxed);
  int n = atomic_load(&slots_used);
  for (int i = 0; i < n; i++) {
    slot *t = &slots[i];
    if (t == self || !enter(t, p, p + pg))
      continue;
    claim(t, p, p + pg);
    atomic_fetch_sub(&t->users, 1);
  }
}

/*
 * mprotect of part of s failed: after many scattered releases a region is
 * split into many mappings and the next split hits vm.max_map_count
 * (ENOMEM).  Tracking s page by page is then over: every still-protected
 * page of s (and of neighbours on its edge pages) is marked, and s's whole
 * range is made writable, which only merges mappings (read-only runs lie
 * strictly inside the range) and so cannot fail that way.  Returns 0, or
 * -1 when even that failed.
 */
static int widen(slot *s) {
  uintptr_t pg = atomic_load_explicit(&page, memory_order_relaxed);
  uintptr_t lo = atomic_load(&s->lo), hi = atomic_load(&s->hi);
  claim(s, lo, hi);
  claim_neighbours(s, lo);
  claim_neighbours(s, hi - pg);
  return ibp__sys_mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE);
}

/* The overlap of s's pages with [plo, phi). */
static void overlap(slot *s, uintptr_t plo, uintptr_t phi, uintptr_t *a,
                    uintptr_t *b) {
  uintptr_t lo = atomic_load(&s->lo), hi = atomic_load(&s->hi);
  *a = lo < plo ? plo : lo;
  *b = hi > phi ? phi : hi;
}

/*
 * Releases the page-aligned range [plo, phi) from every LIVE slot: marks the
 * tensors on still-protected pages dirty, clears their bits, makes the
 * covered pages writable.  Lock-free and async-signal-safe.
 *
 * Phases per pass: enter and claim every covering slot, then mprotect, then
 * count and leave -- so every region on a shared page is marked before the
 * page turns writable.  A pass is repeated when a protect of overlapping
 * pages ran meanwhile (gen moved): its slot may have been published after
 * our claim but its mprotect(PROT_READ) may have landed before ours.
 * The mprotect is forced even where this pass cleared no bit when the
 * caller faulted on the page (it is read-only, whoever cleared its bit), on
 * a repeated pass, and while another release is in flight (it may have
 * cleared a bit without having made the page writable yet).
 */
static unsigned release(uintptr_t plo, uintptr_t phi, int fault) {
  unsigned res = 0;
  atomic_fetch_add(&releasing, 1);
  for (int pass = 0;; pass++) {
    unsigned g = atomic_load(&gen);
    if (protect_pending(g, plo, phi)) {
      sched_yield(); /* protect blocks signals; it finishes without us */
      continue;
    }
    int n = atomic_load(&slots_used);
    uint64_t held[SLOTS / 64] = {0}, claimed_any[SLOTS / 64] = {0};
    uintptr_t a, b;
    for (int i = 0; i < n; i++) {
      slot *s = &slots[i];
      if (!enter(s, plo, phi))
        continue;
      overlap(s, plo, phi, &a, &b);
      held[i / 64] |= 1ull << (i % 64);
      if (claim(s, a, b))
        claimed_any[i / 64] |= 1ull << (i % 64);
    }
    int force = fault || pass > 0 || atomic_load(&releasing) > 1;
    for (int i = 0; i < n; i++) {
      slot *s = &slots[i];
      if (!bit(held, i) || (!bit(claimed_any, i) && !force))
        continue;
      overlap(s, plo, phi, &a, &b);
      if (ibp__sys_mprotect((void *)a, b - a, PROT_READ | PROT_WRITE) != 0 &&
          widen(s) != 0)
        res |= REL_FAILED;
    }
    for (int i = 0; i < n; i++) {
      if (!bit(held, i))
        continue;
      slot *s = &slots[i];
      res |= REL_COVERED;
      if (bit(claimed_any, i)) {
        res |= REL_CLAIMED;
        if (fault)
          atomic_fetch_add_explicit(&s->r->write_faults, 1,
                                    memory_order_relaxed);
      }
      atomic_fetch_sub(&s->users, 1);
    }
    if (atomic_load(&gen) == g)
      break;
  }
  atomic_fetch_sub(&releasing, 1);
  return res;
}

/* The page belonged to a region unprotected since (a RETIRED slot). */
static int in_tombstone(uintptr_t p) {
  int n = atomic_load(&slots_used);
  for (int i = 0; i < n; i++)
    if (atomic_load(&slots[i].state) == SLOT_RETIRED &&
        covers(&slots[i], p, p + 1))
      return 1;
  return 0;
}

/*
 * 1 when the write fault at addr is the tracker's (the store may retry).
 *   - A page of a LIVE slot is made writable (release): a fault there is
 *     always ours, even when another thread cleared the page's bit first,
 *     or when the application's own mprotect (ibp__track_app_protect) made
 *     the page read-only: its tensors are dirty already, and the fault is
 *     not chained to the application.
 *   - A page of a RETIRED slot only: unprotect ran between the fault and
 *     this handler and has made it writable since; retry.  Retried again at
 *     the same address only after a tracker event (protect or unprotect:
 *     the page may have been protected and unprotected again meanwhile);
 *     otherwise the page is read-only for another reason: chain.
 */
static int track_fault(uintptr_t addr) {
  uintptr_t pg = atomic_load_explicit(&page, memory_order_relaxed);
  uintptr_t p = addr & ~(pg - 1);
  if (!pg || p + pg < p)
    return 0;
  unsigned long ev = atomic_load(&events);
  unsigned res = release(p, p + pg, 1);
  if (res & REL_FAILED)
    return 0; /* cannot be made writable: as without us */
  if (res) {
    last_retry = 0;
    return 1;
  }
  if (in_tombstone(p) && (last_retry != addr || last_events != ev)) {
    last_retry = addr;
    last_events = ev;
    return 1;
  }
  last_retry = 0;
  return 0;
}

/*
 * The SIGSEGV/SIGBUS handler.  Flags (see ibp__track_install):
 *   SA_SIGINFO  we need si_addr and si_code;
 *   SA_ONSTACK  a fault from stack overflow must reach the application's
 *               handler on the alternate stack it set up (ignored without);
 *   SA_NODEFER  a fault inside this handler or inside the application's
 *               handler we chain to -- e.g. a write to a tracked page, or
 *               to an ibp_tracked sharing an edge page -- must reach us
 *               again rather than hit a blocked SIGSEGV, which the kernel
 *               turns into death;
 *   SA_RESTART  an asynchronous kill -SEGV to a handler that returns
 *               should not fail the interrupted system call.
 * A store to a read-only page is SIGSEGV with si_code SEGV_ACCERR; nothing
 * else can be a tracking fault (SIGBUS is hooked only to chain it the same
 * way, and si_addr means nothing in a signal sent by kill/sigqueue).
 */
static void on_fault(int sig, siginfo_t *si, void *uc) {
  int saved = errno;
  if (!(sig == SIGSEGV && si->si_code == SEGV_ACCERR &&
        track_fault((uintptr_t)si->si_addr)))
    ibp__sig_chain(sig, si, uc);
  errno = saved;
}

int ibp__prot_install(void) {
  if (atomic_load(&installed))
    return 0;
  pthread_mutex_lock(&wlock);
  int rc = 0;
  if (!atomic_load(&installed)) {
    long pg = sysconf(_SC_PAGESIZE);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER | SA_RESTART;
    rc = pg > 0 && !(pg & (pg - 1)) ? 0 : -1;
    if (rc == 0) {
      atomic_store(&page, (uintptr_t)pg);
      rc = ibp__sig_take_over(&sa);
    }
    if (rc == 0)
      atomic_store(&installed, 1);
    else
      ibp__warn_once(&warned_install, "write tracking: cannot install the "
                                      "SIGSEGV/SIGBUS handler; regions stay "
                                      "pass-through");
  }
  pthread_mutex_unlock(&wlock);
  return rc;
}

/* Under wlock. */
static slot *find_live(const ibp_tracked *r) {
  for (int i = 0; i < atomic_load(&slots_used); i++)
    if (atomic_load(&slots[i].state) == SLOT_LIVE && slots[i].r == r)
      return &slots[i];
  return NULL;
}

/* Under wlock: a FREE slot, else a RETIRED one (its tombstone is lost). */
static slot *pick_slot(void) {
  for (int i = 0; i < SLOTS; i++)
    if (atomic_load(&slots[i].state) == SLOT_FREE) {
      if (i >= atomic_load(&slots_used))
        atomic_store(&slots_used, i + 1);
      return &slots[i];
    }
  for (int i = 0; i < SLOTS; i++)
    if (atomic_load(&slots[i].state) == SLOT_RETIRED)
      return &slots[i];
  return NULL;
}

/* Under wlock: another LIVE slot still holds page p read-only.  Slots
 * cannot retire meanwhile (that takes wlock), so their bitmaps stay. */
static int shared_protected(const slot *self, uintptr_t p) {
  uintptr_t pg = atomic_load(&page);
  for (int i = 0; i < atomic_load(&slots_used); i++) {
    slot *s = &slots[i];
    if (s == self || atomic_load(&s->state) != SLOT_LIVE ||
        !covers(s, p, p + 1))
      continue;
    size_t k = (p - atomic_load(&s->lo)) / pg;
    if (atomic_load(&s->pages[k / 64]) >> (k % 64) & 1)
      return 1;
  }
  return 0;
}

/* Under wlock: makes s's pages writable (but for edge pages a neighbour
 * still tracks), retires s and waits until no reader is inside. */
static void retire(slot *s) {
  uintptr_t pg = atomic_load(&page);
  uintptr_t lo = atomic_load(&s->lo), hi = atomic_load(&s->hi);
  if (shared_protected(s, lo))
    lo += pg;
  if (lo < hi && shared_protected(s, hi - pg))
    hi -= pg;
  if (lo < hi)
    ibp__sys_mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE);
  atomic_store(&s->state, SLOT_RETIRED);
  atomic_fetch_add(&events, 1);
  while (atomic_load(&s->users))
    sched_yield();
  munmap((void *)s->pages, s->map_bytes);
  s->pages = NULL;
  s->r = NULL;
  atomic_fetch_sub(&ibp__track_live, 1);
}

/* A page bitmap with the first npages bits set (mmap: page-aligned memory
 * of our own, never on a page the tracker protects). */
static _Atomic uint64_t *new_bitmap(size_t npages, size_t *bytes) {
  uintptr_t pg = atomic_load(&page);
  size_t words = (npages + 63) / 64;
  *bytes = (words * 8 + pg - 1) & ~(pg - 1);
  void *m = mmap(NULL, *bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return NULL;
  _Atomic uint64_t *bits = m;
  for (size_t w = 0; w < words; w++)
    atomic_init(&bits[w], UINT64_MAX);
  if (npages % 64)
    atomic_init(&bits[words - 1], UINT64_MAX >> (64 - npages % 64));
  return bits;
}

/* Under wlock, s BUSY: publishes s and write-protects its pages inside the
 * odd `gen` window.  All signals are blocked meanwhile, so no handler on
 * this thread can wait for the window to close.  Returns 0 or an errno. */
static int publish(slot *s) {
  uintptr_t lo = atomic_load(&s->lo), hi = atomic_load(&s->hi);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  atomic_store(&gen_lo, lo);
  atomic_store(&gen_hi, hi);
  atomic_fetch_add(&gen, 1);
  atomic_fetch_add(&ibp__track_live, 1);
  atomic_store(&s->state, SLOT_LIVE);
  atomic_fetch_add(&events, 1);
  int rc = ibp__sys_mprotect((void *)lo, hi - lo, PROT_READ) ? errno : 0;
  atomic_fetch_add(&gen, 1);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

int ibp__prot_protect(ibp_tracked *r) {
  if (!r || !r->dirty || !r->bytes || ibp__prot_install() != 0)
    return -1;
  uintptr_t pg = atomic_load(&page);
  uintptr_t end = r->base + (uintptr_t)r->bytes;
  if (end < r->base || end > UINTPTR_MAX - pg)
    return -1;
  uintptr_t lo = r->base & ~(pg - 1), hi = (end + pg - 1) & ~(pg - 1);
  size_t map_bytes;
  _Atomic uint64_t *bits = new_bitmap((hi - lo) / pg, &map_bytes);
  if (!bits)
    return -1;
  pthread_mutex_lock(&wlock);
  int rc = 0;
  slot *s = find_live(r) ? NULL : pick_slot();
  if (!s && !find_live(r)) {
    rc = -1;
    ibp__warn_once(&warned_full,
                   "region '%s': write tracking table full (%d regions); it "
                   "stays pass-through",
                   r->name, SLOTS);
  }
  if (s) {
    atomic_store(&s->state, SLOT_BUSY);
    s->r = r;
    s->g = ibp__geom_of(r);
    s->pages = bits;
    s->map_bytes = map_bytes;
    atomic_store(&s->app_owned, 0);
    atomic_store(&s->lo, lo);
    atomic_store(&s->hi, hi);
    int err = publish(s);
    if (err == 0) {
      atomic_store(&r->protected_, 1);
    } else {
      rc = -1;
      retire(s); /* also unmaps bits */
      ibp__warn_once(&warned_mprotect,
                     "region '%s': write protection failed (%s); it stays "
                     "pass-through",
                     r->name, strerror(err));
    }
  }
  pthread_mutex_unlock(&wlock);
  if (!s)
    munmap((void *)bits, map_bytes);
  return rc;
}

void ibp__prot_unprotect(ibp_tracked *r) {
  if (!r)
    return;
  pthread_mutex_lock(&wlock);
  slot *s = find_live(r);
  if (s)
    retire(s);
  atomic_store(&r->protected_, 0);
  pthread_mutex_unlock(&wlock);
}

void ibp__track_before_write(const void *addr, size_t len) {
  if (!atomic_load_explicit(&ibp__track_live, memory_order_relaxed) || !len)
    return;
  uintptr_t pg = atomic_load_explicit(&page, memory_order_relaxed);
  uintptr_t a = (uintptr_t)addr, e = a + len;
  e = e < a ? UINTPTR_MAX : e;
  uintptr_t plo = a & ~(pg - 1), phi = (e + pg - 1) & ~(pg - 1);
  phi = phi < e ? UINTPTR_MAX & ~(pg - 1) : phi;
  /* Cheap filter before release's shared-counter traffic: most reads in a
   * process go nowhere near a tracked region. */
  int n = atomic_load_explicit(&slots_used, memory_order_relaxed), hit = 0;
  for (int i = 0; i < n && !hit; i++)
    hit = atomic_load_explicit(&slots[i].state, memory_order_relaxed) ==
              SLOT_LIVE &&
          covers(&slots[i], plo, phi);
  if (!hit)
    return;
  int saved = errno;
  release(plo, phi, 0);
  errno = saved;
}

void ibp__prot_after_fork_child(void) {
  /* Only the forking thread exists: nobody is inside a slot, a release, or
   * a protect window, and nobody holds the locks. */
  pthread_mutex_init(&wlock, NULL);
  for (int i = 0; i < SLOTS; i++)
    atomic_store(&slots[i].users, 0);
  atomic_store(&releasing, 0);
  atomic_store(&kwrites, 0);
  atomic_store(&reprotecting, 0);
  if (atomic_load(&gen) & 1)
    atomic_fetch_add(&gen, 1);
  ibp__sig_after_fork_child();
}

/* ---- re-protection (refresh.c) ------------------------------------------- */

int ibp__track_kwrite_begin(void) {
  if (!ibp__track_any())
    return 0;
  atomic_fetch_add(&kwrites, 1);
  /* seq_cst against reprotect's store then load: either it sees us and
   * backs off, or we see it and wait until it is done, then announce */
  while (atomic_load(&reprotecting))
    sched_yield();
  return 1;
}

void ibp__track_kwrite_end(int began) {
  if (began)
    atomic_fetch_sub(&kwrites, 1);
}

void ibp__track_app_protect(const void *addr, size_t len) {
  ibp__track_before_write(addr, len);
  uintptr_t a = (uintptr_t)addr, e = a + len < a ? UINTPTR_MAX : a + len;
  int n = atomic_load(&slots_used);
  for (int i = 0; i < n; i++)
    if (len && atomic_load(&slots[i].state) == SLOT_LIVE &&
        covers(&slots[i], a, e))
      atomic_store(&slots[i].app_owned, 1);
}

int ibp__prot_reprotect(ibp_tracked *r) {
  pthread_mutex_lock(&wlock);
  slot *s = find_live(r);
  int rc = -1;
  atomic_fetch_add(&reprotecting, 1);
  /* a kernel-side write in progress would fail with EFAULT; an application
   * that set protections itself keeps them: try again later / never */
  if (s && !atomic_load(&kwrites) && !atomic_load(&s->app_owned)) {
    uintptr_t pg = atomic_load(&page);
    uintptr_t lo = atomic_load(&s->lo), hi = atomic_load(&s->hi);
    size_t npages = (hi - lo) / pg, words = (npages + 63) / 64;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    atomic_store(&gen_lo, lo);
    atomic_store(&gen_hi, hi);
    atomic_fetch_add(&gen, 1); /* releases on these pages repeat their pass */
    for (size_t w = 0; w < words; w++)
      atomic_store(&s->pages[w], w + 1 < words || npages % 64 == 0
                                     ? UINT64_MAX
                                     : UINT64_MAX >> (64 - npages % 64));
    rc = ibp__sys_mprotect((void *)lo, hi - lo, PROT_READ) ? -1 : 0;
    atomic_fetch_add(&events, 1);
    atomic_fetch_add(&gen, 1);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  atomic_fetch_sub(&reprotecting, 1);
  pthread_mutex_unlock(&wlock);
  return rc;
}

void ibp__prot_quiesce(void) {
  while (atomic_load(&releasing))
    sched_yield();
}

int ibp__prot_still_protected(ibp_tracked *r, uintptr_t a, size_t len) {
  pthread_mutex_lock(&wlock);
  slot *s = find_live(r);
  int all = s != NULL;
  if (s) {
    uintptr_t pg = atomic_load(&page), lo = atomic_load(&s->lo);
    size_t k = ((a & ~(pg - 1)) - lo) / pg, kend = (a + len - 1 - lo) / pg;
    for (; all && k <= kend; k++)
      all = (atomic_load(&s->pages[k / 64]) >> (k % 64)) & 1;
  }
  pthread_mutex_unlock(&wlock);
  return all;
}
