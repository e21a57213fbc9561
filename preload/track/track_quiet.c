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
 * The tick (every IBP__QUIET_TICK_NS, on a thread of its own) moves a
 * region to faulting once no scan found a write in it for IBP_TRACK_QUIET
 * milliseconds (and as long since its last move), and back to scanning
 * once faults come at IBP__QUIET_BUSY_FAULTS or more a tick: a
 * synchronous fault costs the writer about twenty times the in-kernel
 * one (bench/track_scan.sh).  No move while the region's owner holds them
 * (ibp__track_hold_moves: while it prepares the region); the tick sums the
 * region once meanwhile (its early fingerprint, below; outside `lock`),
 * and letting go wakes the tick, which moves it at once when no write was
 * seen since it was protected.
 *
 * A range of memory belongs to one userfaultfd at a time, and leaving one
 * clears its write protection, so a move cannot arm the new mode before
 * the old one lets go: in between, a write is recorded nowhere.  Each
 * move sums the region's contents first (its fingerprint, below; to
 * faulting, the early one when no write was seen since it), then
 *
 *   to faulting: one last scan of the whole region (marks every write
 *      recorded so far); `move_seq` odd; unregister from the asynchronous
 *      descriptor, register and protect with the synchronous one;
 *   to scanning: `move_seq` odd; unregister from the synchronous
 *      descriptor (its waiting writers go on, unrecorded), register and
 *      protect with the asynchronous one;
 *
 * then sums again: the pages of every chunk whose sum changed were written
 * in the gap and their tensors are marked; `mode` turns, `move_seq` even.
 * While `move_seq` is odd a copy's sync waits (track_uffd.c) until the
 * second sum has passed its pages (`gap_done`, chunk by chunk), so it
 * never trusts the bits before the gap's writes there are marked.  No write is
 * refused, as none is missed: before, the mprotect tracker's read-only
 * pages bridged the gap, and a kernel-side write no hooked call announced
 * failed with EFAULT there (docs/ARCHITECTURE.md, "Quiet regions").  A
 * write through /proc/self/mem that the hooks announce (procmem.c) waits
 * under `lock` for a move under way, then lifts its pages
 * (ibp__quiet_kwrite_begin).  A move that fails part way leaves the region
 * scanning (the gap's writes marked), or, when it cannot be registered
 * again, counted as written throughout (as a remapped region is).
 *
 * Only regions whose base is page-aligned move, and only while no other
 * region the userfaultfd tracker holds lies on their pages (a shared page
 * would leave the neighbour's descriptor too): every region it holds is in
 * the table, those that may not move too -- and every one when no region
 * moves (IBP_TRACK_QUIET=0), for ibp__quiet_dropped.  A neighbour
 * protected after alone() but not yet in the table is in track_uffd.c's:
 * it refuses the release, and the region is adopted again and stays put.
 * `lock` orders moves, re-protection and removal.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"
#include "track/track.h"
#include "track/track_private.h"

/* A move's fingerprint (below): the sums of a region's chunks. */
typedef struct fingerprint {
  size_t pages, chunks;
  XXH128_hash_t *sum; /* per chunk */
  uint64_t *chosen;   /* bit k: page k summed; NULL: every page */
  uint8_t *buf;       /* one chunk's pages, as read */
} fingerprint;

typedef struct entry {
  ibp_tracked *t;
  uint64_t id;          /* unique: a removed entry's t may be added anew */
  uintptr_t lo, hi;     /* its pages */
  uintptr_t end;        /* t->base + t->bytes */
  int movable;          /* its base is page-aligned */
  uint64_t moved_ns;    /* real time of its last move (or of its adding) */
  uint64_t faults_seen; /* sync_faults at the last tick */
  uint64_t quiet_from;  /* t->writes_seen at its adding or last move */
  int let_go;           /* its owner let go of its moves since the tick */
  fingerprint early;    /* summed while its moves were held (sum NULL: none) */
  uint64_t early_seen;  /* t->writes_seen before that sum began */
  unsigned landed;      /* ibp__track_landed calls: a sum under way is stale */
  int early_failed;     /* an early sum failed: no other until let go */
} entry;

_Atomic unsigned ibp__track_movable; /* entries that may move */
_Atomic unsigned ibp__track_held;    /* entries */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry *table;
static size_t held, cap;
static uint64_t next_id = 1; /* under lock */

_Atomic uint64_t ibp__quiet_early_tries, ibp__quiet_early_used;

static uint64_t quiet_ns(void) {
  return (uint64_t)ibp__cfg.track_quiet_ms * 1000000ull;
}

static entry *find(const ibp_tracked *t) {
  for (size_t i = 0; i < held; i++)
    if (table[i].t == t)
      return &table[i];
  return NULL;
}

static entry *find_id(uint64_t id) {
  for (size_t i = 0; i < held; i++)
    if (table[i].id == id)
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

/* ---- the tick's thread ----------------------------------------------------

 * Its own, not track_sync.c's fault thread: a write into a faulting region
 * waits for that thread, and a tick may sum a region or move one for tens
 * of milliseconds.  Woken through a condition variable (tick_wake), not a
 * descriptor: the application may close descriptors it did not open
 * (close_range before exec, a daemon's loop), and one reused for its own
 * file would then be ours to read and write. */
_Atomic uint64_t ibp__quiet_tick_ns = IBP__QUIET_TICK_NS;

static pthread_mutex_t tick_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tick_cond; /* on CLOCK_MONOTONIC, once cond_ready */
static int cond_ready, tick_started, tick_woken; /* under tick_lock */

static struct timespec monotonic_in(uint64_t ns) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ns += (uint64_t)ts.tv_nsec;
  ts.tv_sec += (time_t)(ns / 1000000000u);
  ts.tv_nsec = (long)(ns % 1000000000u);
  return ts;
}

static void *tick_main(void *arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  for (;;) {
    const struct timespec until =
        monotonic_in(atomic_load(&ibp__quiet_tick_ns));
    pthread_mutex_lock(&tick_lock);
    int rc = 0;
    while (!tick_woken && rc != ETIMEDOUT)
      rc = pthread_cond_timedwait(&tick_cond, &tick_lock, &until);
    tick_woken = 0;
    pthread_mutex_unlock(&tick_lock);
    ibp__quiet_tick(ibp__real_ns());
  }
  return NULL;
}

static int cond_init(void) {
  pthread_condattr_t a;
  if (pthread_condattr_init(&a) != 0)
    return 0;
  int ok = pthread_condattr_setclock(&a, CLOCK_MONOTONIC) == 0 &&
           pthread_cond_init(&tick_cond, &a) == 0;
  pthread_condattr_destroy(&a);
  return ok;
}

/* Starts the tick's thread once: 0, or -1. */
static int tick_start(void) {
  pthread_mutex_lock(&tick_lock);
  cond_ready = cond_ready || cond_init();
  tick_started = tick_started || (cond_ready && ibp__thread_start(tick_main));
  const int ok = tick_started;
  pthread_mutex_unlock(&tick_lock);
  return ok ? 0 : -1;
}

/* The tick now, then every ibp__quiet_tick_ns (a no-op without it). */
static void tick_wake(void) {
  pthread_mutex_lock(&tick_lock);
  if (tick_started) {
    tick_woken = 1;
    pthread_cond_signal(&tick_cond);
  }
  pthread_mutex_unlock(&tick_lock);
}

void ibp__quiet_add(ibp_tracked *t) {
  uintptr_t lo, hi;
  atomic_store(&t->mode, IBP_TRACK_SCANNING);
  atomic_store(&t->last_write_ns, ibp__real_ns());
  /* held all the same when it never moves (scanning for good: no
   * IBP_TRACK_QUIET, or no fault thread): ibp__quiet_dropped */
  const int moves =
      quiet_ns() && ibp__syncwp_start_thread() == 0 && tick_start() == 0;
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
    table[held++] = (entry){.t = t,
                            .id = next_id++,
                            .lo = lo,
                            .hi = hi,
                            .end = t->base + (uintptr_t)t->bytes,
                            .movable = movable,
                            .moved_ns = ibp__real_ns(),
                            .quiet_from = atomic_load(&t->writes_seen)};
    atomic_fetch_add(&ibp__track_held, 1);
    if (movable)
      atomic_fetch_add(&ibp__track_movable, 1);
  }
  pthread_mutex_unlock(&lock);
}

/* Writes the kernel makes without being able to wait for a fault
 * (/proc/self/mem: procmem.c), between lifting their pages and returning;
 * while any is, no region moves to faulting and faulting regions are not
 * re-protected.  Read under lock, incremented before it is taken. */
static _Atomic int unwaitable;

/* ---- a move's fingerprint ------------------------------------------------

 * Pages that have left one descriptor and not yet joined the other record
 * no write.  Their contents are summed before they leave (XXH3, 128 bits,
 * one sum per IBP__QUIET_CHUNK_PAGES pages) and again once they are watched
 anew; a
 * chunk whose sum changed was written in between, and its tensors are
 * marked then -- before a copy may trust the bits (move_seq odd). */
void (*ibp__quiet_gap_hook)(ibp_tracked *t);
void (*ibp__quiet_early_hook)(ibp_tracked *t);

static void fingerprint_drop(fingerprint *f) {
  free(f->sum);
  free(f->chosen);
  free(f->buf);
}

static int chosen(const fingerprint *f, size_t k) {
  return !f->chosen || (f->chosen[k / 64] >> (k % 64) & 1);
}

/* The sum of chunk c's chosen pages, each up to the region's end, read
 * with process_vm_readv into f->buf: a page the application made
 * unreadable (PROT_NONE, unmapped) fails the read, never the process.
 * 0, or -1 when a page could not be read. */
static int chunk_sum(const entry *e, fingerprint *f, size_t c,
                     XXH128_hash_t *out) {
  const uintptr_t pg = ibp__page_size();
  const uintptr_t end = e->end; /* (e may be a copy: e->t not read) */
  struct iovec remote[IBP__QUIET_CHUNK_PAGES];
  size_t n = 0, bytes = 0;
  for (size_t k = c * IBP__QUIET_CHUNK_PAGES;
       k < f->pages && k < (c + 1) * IBP__QUIET_CHUNK_PAGES; k++) {
    const uintptr_t a = e->lo + k * pg, b = a + pg < end ? a + pg : end;
    if (!chosen(f, k))
      continue;
    if (n && (uintptr_t)remote[n - 1].iov_base + remote[n - 1].iov_len == a)
      remote[n - 1].iov_len += b - a; /* contiguous: one entry */
    else
      remote[n++] = (struct iovec){(void *)a, b - a};
    bytes += b - a;
  }
  struct iovec local = {f->buf, bytes};
  /* by this thread's id: the process's fails once its first thread has
   * exited */
  const pid_t self = (pid_t)syscall(SYS_gettid);
  if (bytes && process_vm_readv(self, &local, 1, remote, (unsigned long)n, 0) !=
                   (ssize_t)bytes)
    return -1;
  *out = XXH3_128bits(f->buf, bytes);
  return 0;
}

/* Sums e's pages -- those still write-protected in the fault mode when
 * protected_only (a written page's tensors are marked already).  0, or -1
 * (out of memory: no move now). */
static int fingerprint_take(const entry *e, int protected_only,
                            fingerprint *f) {
  const uintptr_t pg = ibp__page_size();
  *f = (fingerprint){0};
  f->pages = (e->hi - e->lo) / pg;
  f->chunks = (f->pages + IBP__QUIET_CHUNK_PAGES - 1) / IBP__QUIET_CHUNK_PAGES;
  f->sum = malloc(f->chunks * sizeof *f->sum);
  f->buf = malloc(IBP__QUIET_CHUNK_PAGES * pg);
  if (protected_only)
    f->chosen = calloc((f->pages + 63) / 64, sizeof *f->chosen);
  if (!f->sum || !f->buf || (protected_only && !f->chosen)) {
    fingerprint_drop(f);
    return -1;
  }
  for (size_t k = 0; protected_only && k < f->pages; k++)
    if (ibp__syncwp_still_protected(e->t, e->lo + k * pg, pg))
      f->chosen[k / 64] |= 1ull << (k % 64);
  for (size_t c = 0; c < f->chunks; c++)
    if (chunk_sum(e, f, c, &f->sum[c]) != 0) {
      fingerprint_drop(f); /* unreadable: no move (it would go unseen) */
      return -1;
    }
  return 0;
}

/* Once the pages are watched again, in mode `to`: marks the chosen pages
 * of every chunk whose sum changed, chunk by chunk, and lets the copies on
 * each through as soon as it is done (gap_done); drops f. */
static void fingerprint_check(const entry *e, fingerprint *f, int to) {
  const uintptr_t pg = ibp__page_size();
  uint64_t caught = 0;
  atomic_store(&e->t->gap_to, to);
  for (size_t c = 0; c < f->chunks; c++) {
    XXH128_hash_t now;
    if (chunk_sum(e, f, c, &now) != 0 || !XXH128_isEqual(now, f->sum[c])) {
      caught++;
      for (size_t k = c * IBP__QUIET_CHUNK_PAGES;
           k < f->pages && k < (c + 1) * IBP__QUIET_CHUNK_PAGES; k++)
        if (chosen(f, k))
          ibp__track_mark_dirty(e->t, e->lo + k * pg, pg);
    }
    atomic_store(&e->t->gap_done,
                 e->lo + (c + 1) * IBP__QUIET_CHUNK_PAGES * pg);
  }
  atomic_store(&e->t->gap_done, UINTPTR_MAX);
  if (caught)
    atomic_store(&e->t->last_write_ns, ibp__real_ns());
  atomic_fetch_add_explicit(&e->t->gap_writes, caught, memory_order_relaxed);
  fingerprint_drop(f);
}

/* From here copies wait (ibp__uffd_sync) until the move has checked their
 * pages. */
static void gap_open(ibp_tracked *t) {
  atomic_store(&t->gap_done, 0);
  atomic_store(&t->gap_to, IBP_TRACK_SCANNING);
  atomic_fetch_add(&t->move_seq, 1);
}

static void in_gap(ibp_tracked *t) {
  if (ibp__quiet_gap_hook)
    ibp__quiet_gap_hook(t);
}

/* ---- the early fingerprint ----------------------------------------------

 * A move to faulting sums the region before its last scan, and copies
 * scan (a system call each) until its pages leave: a sum of 230 MiB takes
 * 50-120 ms.  So while the region's owner prepares it (moves held, track.h)
 * the tick sums it once, off every copy's path, and the move that follows
 * may start from that sum (docs/ARCHITECTURE.md, "Quiet regions").
 *
 * Why an early sum will do.  The first sum must hold what the region held
 * at a time from which on every write is either recorded by the
 * asynchronous descriptor until the last scan marks it, or falls in the
 * gap, where it changes its chunk's sum -- or leaves the chunk as it was
 * then, and no copy could tell.  A sum taken earlier holds exactly that
 * when no write at all reached the region from before it began to the end
 * of the last scan.  Every write path shows in writes_seen (track.h): a
 * CPU store, read(2)/recv, process_vm_writev or /proc/self/mem leaves its
 * page written for the asynchronous descriptor until a scan finds it (a
 * copy's, a refresh's re-protection, at the latest the last scan: all bump
 * it), a device-side write or a dropped page is marked through
 * ibp__track_mark_dirty (bumps it) -- when it is queued, though, and its
 * bytes land later, unseen (or it was queued before the region was
 * tracked): once its owner's wait saw them land (ibp__track_landed, before
 * it reads the region), an early sum taken before is dropped
 * (track_quiet_early_landed).  When it moved, the early sum is
 * dropped and the move sums and scans anew: a chunk written since it,
 * then refreshed (marks cleared) and written back in the gap would match
 * it -- the early sum would not merely mark more. */

/* The tick sums one region early at a time, on its own thread (a write
 * into a faulting region waits for the fault thread, never for this) and
 * outside `lock` (copies' moves, refreshes, madvise and the owner's
 * hold_moves take it): what the sum needs of the entry is copied under
 * `lock` first (writes_seen before the sum begins, as above), and the sum
 * is kept only if, under `lock` again, the entry is still there (its id:
 * a region removed may be added anew at the same address), still
 * scanning, has not moved (move_seq) and no device write landed
 * (`landed`) meanwhile.  A sum that failed (a page unreadable, no memory)
 * is not tried again until the owner lets go (track_quiet_early_failed). */
typedef struct early_job {
  entry e; /* a copy: its id and pages (e.t is not read) */
  unsigned move_seq, landed;
  uint64_t seen;
} early_job;

/* Under lock, while e's moves are held: e wants its early sum now. */
static int wants_early(const entry *e) {
  return !e->early.sum && !e->early_failed && alone(e) &&
         atomic_load(&e->t->mode) == IBP_TRACK_SCANNING &&
         !(atomic_load(&e->t->move_seq) & 1);
}

/* Under lock: what the early sum of e needs. */
static early_job early_begin(const entry *e) {
  early_job j = {.e = *e};
  j.e.early = (fingerprint){0};
  j.move_seq = atomic_load(&e->t->move_seq);
  j.landed = e->landed;
  j.seen = atomic_load(&e->t->writes_seen); /* before it: above */
  return j;
}

/* Under lock: the entry j was taken from, if the sum it began still holds
 * for it (above). */
static entry *early_still_good(const early_job *j) {
  entry *e = find_id(j->e.id);
  if (!e || e->early.sum || e->landed != j->landed ||
      atomic_load(&e->t->move_seq) != j->move_seq ||
      atomic_load(&e->t->mode) != IBP_TRACK_SCANNING)
    return NULL;
  return e;
}

/* Not under lock: sums j's region, then keeps the sum if it still holds. */
static void early_take(const early_job *j) {
  fingerprint f;
  atomic_fetch_add_explicit(&ibp__quiet_early_tries, 1, memory_order_relaxed);
  const int rc = fingerprint_take(&j->e, 0, &f); /* (f dropped on failure) */
  pthread_mutex_lock(&lock);
  entry *failed = rc != 0 ? find_id(j->e.id) : NULL;
  entry *e = rc == 0 ? early_still_good(j) : NULL;
  if (failed)
    failed->early_failed = 1; /* not every tick: until it is let go */
  if (e) {
    e->early = f;
    e->early_seen = j->seen;
    if (ibp__quiet_early_hook)
      ibp__quiet_early_hook(e->t);
  } else if (rc == 0) {
    fingerprint_drop(&f);
  }
  pthread_mutex_unlock(&lock);
}

/* Under lock, for a move to faulting: its first sum into f, then one last
 * scan of the whole region (marks every write recorded so far) -- e's
 * early fingerprint if no write was seen since it (above).  0; 1: no move
 * now (no memory, a page unreadable); -1: the pages are no longer ours
 * (lost() marked them). */
static int sum_then_scan(entry *e, fingerprint *f) {
  const int early = e->early.sum != NULL;
  *f = e->early;
  e->early = (fingerprint){0};
  if (!early && fingerprint_take(e, 0, f) != 0)
    return 1;
  if (ibp__uffd_scan_all(e->t) != 0) {
    fingerprint_drop(f);
    return -1;
  }
  if (!early)
    return 0;
  if (atomic_load(&e->t->writes_seen) == e->early_seen) {
    atomic_fetch_add_explicit(&ibp__quiet_early_used, 1, memory_order_relaxed);
    return 0;
  }
  fingerprint_drop(f); /* written since: sum, then scan, now */
  return sum_then_scan(e, f);
}

/* ---- moves ----------------------------------------------------------------
 */

/* Under lock: e never moves again (it keeps scanning). */
static void immovable(entry *e) {
  if (e->movable)
    atomic_fetch_sub(&ibp__track_movable, 1);
  e->movable = 0;
}

/* Under lock, in a move: e's pages could not be registered again -- every
 * tensor counts as written, copies go on (scanning fails them), and e
 * never moves again. */
static void lost_in_move(entry *e, fingerprint *f) {
  fingerprint_drop(f);
  ibp__uffd_lost(e->t);
  atomic_store(&e->t->gap_to, IBP_TRACK_SCANNING);
  atomic_store(&e->t->gap_done, UINTPTR_MAX);
  immovable(e);
}

/* Under lock: scanning -> faulting (see the top of the file). */
static void to_faulting(entry *e) {
  ibp_tracked *t = e->t;
  fingerprint f;
  if (!alone(e) || atomic_load(&unwaitable))
    return;                     /* the next tick tries again */
  e->moved_ns = ibp__real_ns(); /* a try: the next in IBP_TRACK_QUIET ms */
  const int summed = sum_then_scan(e, &f);
  if (summed != 0) {
    if (summed < 0) /* no longer ours: lost() marked it */
      immovable(e);
    return;
  }
  gap_open(t);
  const int left = ibp__uffd_release(t) == 0;
  if (left)
    in_gap(t);
  if (left && ibp__syncwp_arm(t, e->lo, e->hi) == 0) {
    fingerprint_check(e, &f, IBP_TRACK_FAULTING);
    atomic_store(&t->mode, IBP_TRACK_FAULTING);
    atomic_fetch_add_explicit(&t->mode_switches, 1, memory_order_relaxed);
  } else if (ibp__uffd_adopt(t) == 0) {
    fingerprint_check(e, &f, IBP_TRACK_SCANNING); /* back, minus the gap */
    immovable(e); /* memory the fault mode cannot hold (a disk file's
                   * mapping, huge pages): no try every IBP_TRACK_QUIET */
  } else {
    lost_in_move(e, &f);
  }
  atomic_fetch_add(&t->move_seq, 1);
  e->moved_ns = ibp__real_ns();
  e->faults_seen = atomic_load(&t->sync_faults);
  e->quiet_from = atomic_load(&t->writes_seen);
}

/* Under lock: faulting -> scanning.  The protected pages cannot change
 * while they are summed: a write to one waits for a fault, which lifts
 * it -- and marks it -- first. */
static void to_scanning(entry *e) {
  ibp_tracked *t = e->t;
  fingerprint f;
  fingerprint_drop(&e->early); /* (none while faulting: held, it scans) */
  e->early = (fingerprint){0};
  if (fingerprint_take(e, 1, &f) != 0)
    return; /* faults go on catching every write; the next tick tries */
  gap_open(t);
  ibp__syncwp_disarm(t);
  in_gap(t);
  if (ibp__uffd_adopt(t) == 0) {
    fingerprint_check(e, &f, IBP_TRACK_SCANNING);
  } else {
    lost_in_move(e, &f);
  }
  atomic_store(&t->mode, IBP_TRACK_SCANNING);
  atomic_fetch_add(&t->move_seq, 1);
  atomic_fetch_add_explicit(&t->mode_switches, 1, memory_order_relaxed);
  atomic_store(&t->last_write_ns, ibp__real_ns());
  e->moved_ns = ibp__real_ns();
  e->quiet_from = atomic_load(&t->writes_seen);
}

/* Under lock: no scan found a write in e for IBP_TRACK_QUIET ms, and as
 * long since its last move. */
static int quiet_for_long(const entry *e, uint64_t now) {
  const uint64_t q = quiet_ns();
  return now - atomic_load(&e->t->last_write_ns) >= q && now - e->moved_ns >= q;
}

void ibp__quiet_tick(uint64_t now) {
  early_job job = {0};
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < held; i++) {
    entry *e = &table[i];
    ibp_tracked *t = e->t;
    if (!atomic_load(&t->protected_))
      continue;
    if (atomic_load(&t->mode) == IBP_TRACK_FAULTING && ibp__syncwp_gone()) {
      to_scanning(e); /* its descriptor closed under it (track_sync.c) */
      immovable(e);
    } else if (atomic_load_explicit(&t->moves_held, memory_order_relaxed)) {
      if (!job.e.id && wants_early(e)) /* (its owner prepares it: track.h) */
        job = early_begin(e);
    } else if (atomic_load(&t->mode) == IBP_TRACK_SCANNING) {
      /* let go with no write seen while it was prepared: a quiet spell
       * as good as IBP_TRACK_QUIET ms, no need to wait for one */
      if (quiet_for_long(e, now) ||
          (e->let_go && atomic_load(&t->writes_seen) == e->quiet_from))
        to_faulting(e);
    } else {
      uint64_t f = atomic_load(&t->sync_faults);
      if (f - e->faults_seen >= IBP__QUIET_BUSY_FAULTS)
        to_scanning(e);
      e->faults_seen = f;
    }
    e->let_go = 0;
  }
  pthread_mutex_unlock(&lock);
  if (job.e.id)
    early_take(&job);
}

void ibp__track_hold_moves(ibp_tracked *t, int held) {
  atomic_store_explicit(&t->moves_held, held != 0, memory_order_relaxed);
  if (held || !atomic_load_explicit(&ibp__track_movable, memory_order_relaxed))
    return;
  pthread_mutex_lock(&lock);
  entry *e = find(t);
  if (e) {
    e->let_go = 1;
    e->early_failed = 0; /* the next preparation tries again */
  }
  pthread_mutex_unlock(&lock);
  /* the move on the tick's thread, at its priority (the owner's may be
   * lowered: serve/prepare/pack.c), and now rather than in up to
   * IBP__QUIET_TICK_NS */
  if (e)
    tick_wake();
}

void ibp__track_landed(ibp_tracked *t) {
  if (!atomic_load_explicit(&ibp__track_movable, memory_order_relaxed))
    return; /* no entry summed early */
  pthread_mutex_lock(&lock);
  entry *e = find(t);
  if (e) {
    fingerprint_drop(&e->early); /* (a tick while held takes it again) */
    e->early = (fingerprint){0};
    e->landed++; /* and a sum under way is not kept */
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
    /* faulting ones too: a drop just before a move to faulting summed
     * already is seen neither by its last scan nor by ibp__syncwp_dropped
     * (the region was not armed yet) -- `lock` puts this after the move */
    if (table[i].lo >= hi || lo >= table[i].hi)
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
    fingerprint_drop(&e->early);
    *e = table[--held];
  }
  pthread_mutex_unlock(&lock);
}

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
  /* the child has no tick thread: a new one, on a new condition */
  pthread_mutex_init(&tick_lock, NULL);
  cond_ready = tick_started = tick_woken = 0;
  atomic_store(&ibp__track_movable, 0);
  atomic_store(&ibp__track_held, 0);
  atomic_store(&unwaitable, 0);
}
