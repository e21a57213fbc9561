/*
 * Quiet regions (track/track.h; docs/ARCHITECTURE.md, "Quiet regions"):
 * a region the userfaultfd tracker holds is watched in one of two modes.
 *
 *   scanning  the kernel records writes (track_uffd.c, asynchronous write
 *             protection); a copy scans its span first: one PAGEMAP_SCAN
 *             call per copy.
 *   faulting  a write faults and its tensors are marked before it goes on
 *             (track_sync.c, synchronous write protection); a copy makes
 *             no system call for tracking.
 *
 * The tick (every IBP__QUIET_TICK_NS, on track_sync.c's thread) moves a
 * region to faulting once no scan found a write in it for IBP_TRACK_QUIET
 * milliseconds (and as long since its last move), and back to scanning
 * once faults come at IBP__QUIET_BUSY_FAULTS or more a tick: a
 * synchronous fault costs the writer about twenty times the in-kernel
 * one (bench/track_scan.sh).
 *
 * A range of memory belongs to one userfaultfd at a time, and leaving one
 * clears its write protection, so a move cannot arm the new mode before
 * the old one lets go.  The gap is bridged by the mprotect tracker
 * (track_protect.c): each move runs
 *
 *   1. the bridge: the region's pages read-only (ibp__prot_protect_quiet:
 *      not while a hooked C-library call is between announcing its buffers
 *      and returning -- the next tick tries again); a CPU store faults and
 *      marks its tensors, a hooked call announces its buffers, both before
 *      they write;
 *   2. to faulting: one last scan of the whole region (marks every write
 *      recorded before 1), `mode` = faulting (copies stop scanning: every
 *      write is either scanned or bridged), unregister from the
 *      asynchronous descriptor, register and protect with the synchronous
 *      one;  to scanning: unregister from the synchronous descriptor (its
 *      waiting writers retry into the bridge), register and protect with
 *      the asynchronous one, `mode` = scanning;
 *   3. the bridge lifted (ibp__prot_unprotect).
 * So no write is ever missed.  What the bridge cannot do (docs/
 * ARCHITECTURE.md, "Quiet regions", which also says why the move back to
 * scanning keeps it): a kernel-side write that no hooked call announces,
 * made during the move (0.3 to tens of milliseconds), fails with EFAULT
 * as under the mprotect tracker.  A write through /proc/self/mem that the
 * hooks announce (procmem.c) waits under `lock` for a move under way, then
 * lifts its pages (ibp__quiet_kwrite_begin).  A move that fails part way leaves
 * the region scanning, or, when it cannot be registered again, counted as
 * written throughout (as a remapped region is).
 *
 * Only regions whose base is page-aligned move, and only while no other
 * region the userfaultfd tracker holds lies on their pages (a shared page
 * would leave the neighbour's descriptor too): every region it holds is in
 * the table, those that may not move too -- and every one when no region
 * moves (IBP_TRACK_QUIET=0), for ibp__quiet_dropped.
 * `lock` orders moves, re-protection and removal.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/log.h"
#include "track/track.h"
#include "track/track_private.h"

typedef struct entry {
  ibp_tracked *t;
  uintptr_t lo, hi;     /* its pages */
  int movable;          /* its base is page-aligned */
  uint64_t moved_ns;    /* real time of its last move (or of its adding) */
  uint64_t faults_seen; /* sync_faults at the last tick */
} entry;

_Atomic unsigned ibp__track_movable; /* entries that may move */
_Atomic unsigned ibp__track_held;    /* entries */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry *table;
static size_t held, cap;

static uint64_t quiet_ns(void) {
  return (uint64_t)ibp__cfg.track_quiet_ms * 1000000ull;
}

static entry *find(const ibp_tracked *t) {
  for (size_t i = 0; i < held; i++)
    if (table[i].t == t)
      return &table[i];
  return NULL;
}

/* t's pages [*lo, *hi); nonzero when its base is page-aligned. */
static int pages(const ibp_tracked *t, uintptr_t *lo, uintptr_t *hi) {
  const uintptr_t pg = ibp__page_size();
  *lo = t->base & ~(pg - 1);
  *hi = (t->base + (uintptr_t)t->bytes + pg - 1) & ~(pg - 1);
  return *lo == t->base && *hi > *lo;
}

/* Under lock: e may move (no other region on its pages). */
static int alone(const entry *e) {
  if (!e->movable)
    return 0;
  for (size_t i = 0; i < held; i++)
    if (&table[i] != e && table[i].lo < e->hi && e->lo < table[i].hi)
      return 0;
  return 1;
}

void ibp__quiet_add(ibp_tracked *t) {
  uintptr_t lo, hi;
  atomic_store(&t->mode, IBP_TRACK_SCANNING);
  atomic_store(&t->last_write_ns, ibp__real_ns());
  /* held all the same when it never moves (scanning for good: no
   * IBP_TRACK_QUIET, or no fault thread): ibp__quiet_dropped */
  const int moves = quiet_ns() && ibp__syncwp_start_thread() == 0;
  const int movable = pages(t, &lo, &hi) && moves;
  pthread_mutex_lock(&lock);
  if (!find(t) && held == cap) {
    size_t c = cap ? 2 * cap : 16;
    entry *v = realloc(table, c * sizeof *v);
    if (v) {
      table = v;
      cap = c;
    }
  }
  if (!find(t) && held < cap) {
    table[held++] = (entry){t, lo, hi, movable, ibp__real_ns(), 0};
    atomic_fetch_add(&ibp__track_held, 1);
  }
  if (movable)
    atomic_fetch_add(&ibp__track_movable, 1);
  pthread_mutex_unlock(&lock);
}

/* Step 1 and 3 of a move: the bridge up (0), or -1 when it cannot be now
 * (a hooked call writes from the kernel side: the next tick tries again). */
static int bridge_up(ibp_tracked *t) {
  return ibp__prot_install() == 0 && ibp__prot_protect_quiet(t) == 0 ? 0 : -1;
}

static void bridge_down(ibp_tracked *t) {
  ibp__prot_unprotect(t);
  atomic_store(&t->protected_, 1); /* still tracked, by userfaultfd */
}

/* Under lock: scanning -> faulting (see the top of the file). */
static void to_faulting(entry *e) {
  ibp_tracked *t = e->t;
  if (!alone(e) || bridge_up(t) != 0)
    return;
  if (ibp__uffd_scan_all(t) != 0) { /* no longer ours: lost() marked it */
    bridge_down(t);
    return;
  }
  atomic_fetch_add(&t->move_seq, 1);
  atomic_store(&t->mode, IBP_TRACK_FAULTING);
  if (ibp__uffd_release(t) != 0 || ibp__syncwp_arm(t, e->lo, e->hi) != 0) {
    if (ibp__uffd_adopt(t) != 0)
      ibp__uffd_lost(t);
    atomic_store(&t->mode, IBP_TRACK_SCANNING);
  } else {
    atomic_fetch_add_explicit(&t->mode_switches, 1, memory_order_relaxed);
  }
  atomic_fetch_add(&t->move_seq, 1);
  bridge_down(t);
  e->moved_ns = ibp__real_ns();
  e->faults_seen = atomic_load(&t->sync_faults);
}

/* Under lock: faulting -> scanning. */
static void to_scanning(entry *e) {
  ibp_tracked *t = e->t;
  if (bridge_up(t) != 0)
    return; /* faults go on catching every write; the next tick tries */
  atomic_fetch_add(&t->move_seq, 1);
  ibp__syncwp_disarm(t);
  if (ibp__uffd_adopt(t) != 0)
    ibp__uffd_lost(t);
  atomic_store(&t->mode, IBP_TRACK_SCANNING);
  atomic_fetch_add(&t->move_seq, 1);
  atomic_fetch_add_explicit(&t->mode_switches, 1, memory_order_relaxed);
  atomic_store(&t->last_write_ns, ibp__real_ns());
  bridge_down(t);
  e->moved_ns = ibp__real_ns();
}

void ibp__quiet_tick(uint64_t now) {
  const uint64_t q = quiet_ns();
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < held; i++) {
    entry *e = &table[i];
    ibp_tracked *t = e->t;
    if (!atomic_load(&t->protected_))
      continue;
    if (atomic_load(&t->mode) == IBP_TRACK_SCANNING) {
      uint64_t w = atomic_load(&t->last_write_ns);
      if (now - w >= q && now - e->moved_ns >= q)
        to_faulting(e);
    } else {
      uint64_t f = atomic_load(&t->sync_faults);
      if (f - e->faults_seen >= IBP__QUIET_BUSY_FAULTS)
        to_scanning(e);
      e->faults_seen = f;
    }
  }
  pthread_mutex_unlock(&lock);
}

int ibp__quiet_now(ibp_tracked *t, int mode) {
  pthread_mutex_lock(&lock);
  entry *e = find(t);
  if (e && atomic_load(&t->mode) != mode) {
    if (mode == IBP_TRACK_FAULTING)
      to_faulting(e);
    else
      to_scanning(e);
  }
  int rc = atomic_load(&t->mode) == mode ? 0 : -1;
  pthread_mutex_unlock(&lock);
  return rc;
}

void ibp__quiet_dropped(uintptr_t a, size_t len) {
  const uintptr_t pg = ibp__page_size();
  if (!len)
    return;
  const uintptr_t e = a + len < a ? UINTPTR_MAX : a + len;
  const uintptr_t lo = a & ~(pg - 1),
                  hi = e > UINTPTR_MAX - pg ? e : (e + pg - 1) & ~(pg - 1);
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < held; i++) {
    ibp_tracked *t = table[i].t;
    if (table[i].lo >= hi || lo >= table[i].hi ||
        atomic_load(&t->mode) != IBP_TRACK_SCANNING)
      continue;
    const uintptr_t from = lo > t->base ? lo : t->base,
                    end = t->base + (uintptr_t)t->bytes,
                    to = hi < end ? hi : end;
    if (from < to) {
      ibp__track_mark_dirty(t, from, to - from);
      atomic_store(&t->last_write_ns, ibp__real_ns());
    }
  }
  pthread_mutex_unlock(&lock);
}

void ibp__quiet_remove(ibp_tracked *t) {
  pthread_mutex_lock(&lock);
  entry *e = find(t);
  if (e) {
    /* the memory may be about to go: simply plain memory again (the
     * asynchronous tracker does not unregister either) */
    ibp__syncwp_disarm(t);
    atomic_store(&t->mode, IBP_TRACK_SCANNING);
    if (e->movable)
      atomic_fetch_sub(&ibp__track_movable, 1);
    atomic_fetch_sub(&ibp__track_held, 1);
    *e = table[--held];
  }
  pthread_mutex_unlock(&lock);
}

/* Writes the kernel makes without being able to wait for a fault
 * (/proc/self/mem: procmem.c), between lifting their pages and returning;
 * while any is, faulting regions are not re-protected.  Read under lock,
 * incremented before it is taken. */
static _Atomic int unwaitable;

void ibp__quiet_kwrite_begin(uintptr_t a, size_t len) {
  atomic_fetch_add(&unwaitable, 1);
  if (!atomic_load_explicit(&ibp__track_movable, memory_order_relaxed))
    return; /* nothing faulting, nothing moving */
  const uintptr_t e = a + len < a ? UINTPTR_MAX : a + len;
  pthread_mutex_lock(&lock); /* after a move under way */
  for (size_t i = 0; i < held; i++)
    if (table[i].lo < e && a < table[i].hi &&
        atomic_load(&table[i].t->mode) == IBP_TRACK_FAULTING)
      ibp__syncwp_lift(table[i].t, a, len);
  pthread_mutex_unlock(&lock);
}

void ibp__quiet_kwrite_end(void) {
  atomic_fetch_sub(&unwaitable, 1);
}

int ibp__quiet_reprotect(ibp_tracked *t) {
  pthread_mutex_lock(&lock);
  int rc = atomic_load(&t->mode) != IBP_TRACK_FAULTING ? ibp__uffd_reprotect(t)
           : atomic_load(&unwaitable)                  ? -1 /* try later */
                                      : ibp__syncwp_reprotect(t);
  /* a refresh follows writes: no move until it is well over */
  atomic_store(&t->last_write_ns, ibp__real_ns());
  pthread_mutex_unlock(&lock);
  return rc;
}

int ibp__quiet_still_protected(ibp_tracked *t, uintptr_t a, size_t len) {
  pthread_mutex_lock(&lock);
  int rc = atomic_load(&t->mode) == IBP_TRACK_FAULTING
               ? ibp__syncwp_still_protected(t, a, len)
               : ibp__uffd_still_protected(t, a, len);
  pthread_mutex_unlock(&lock);
  return rc;
}

void ibp__quiet_after_fork_child(void) {
  pthread_mutex_init(&lock, NULL);
  held = 0;
  atomic_store(&ibp__track_movable, 0);
  atomic_store(&ibp__track_held, 0);
  atomic_store(&unwaitable, 0);
}
