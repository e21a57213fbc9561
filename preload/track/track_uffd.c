/*
 * The userfaultfd write tracker (track/track.h; docs/ARCHITECTURE.md,
 * "Write tracking").  The kernel keeps the record:
 *
 *   - protect: the region's pages are registered with our userfaultfd in
 *     write-protect mode and write-protected.  The descriptor was opened
 *     with UFFD_FEATURE_WP_ASYNC, so a write to such a page -- a CPU store,
 *     or the kernel writing for the application (read(2), io_uring, AIO,
 *     process_vm_writev, /proc/self/mem ...) -- is resolved by the kernel
 *     itself: the page loses its protection and counts as written.  No
 *     signal, no EFAULT, no message to read.
 *   - sync (before a copy judges the dirty bits of its span): PAGEMAP_SCAN
 *     lists the written pages of the span; their tensors are marked dirty.
 *     The scan only reads: a page stays "written" until re-protection, as
 *     a page the mprotect tracker released stays writable.
 *   - reprotect (serve/prepare/refresh.c): one scan over the region with
 *     PM_SCAN_WP_MATCHING marks the written pages' tensors dirty and
 *     protects those pages again, atomically per page.  While it runs
 *     `uffd_seq` is odd, and a sync that overlapped it scans again: it
 *     could have missed a page the scan had already re-protected but whose
 *     tensors were not marked yet.
 *   - still_protected: a scan finds no written page in the range.
 *
 * Regions need not be page-aligned, so two may share an edge page, whose
 * written state the kernel keeps once for both.  Protecting such a page
 * again (a neighbour's protect, re-protection or adopt) would drop a write
 * into the other's part that its scan has not seen yet, so every region
 * held is in `held` (under `lock`) and a page shared with one is never
 * simply protected: PM_SCAN_WP_MATCHING protects it if written and says
 * so, and then the tensors on it of every region there are marked.  While
 * that runs `edge_seq` is odd, and a sync over an edge page that
 * overlapped it scans again (as for `uffd_seq`).  Regions are assumed not
 * to overlap: only edge pages are shared.
 *
 * Every scan asks PM_SCAN_CHECK_WPASYNC: memory that is no longer ours
 * (mmap MAP_FIXED or mremap over the region, a forked child's copy) fails
 * the scan, and the region counts as written throughout (`lost`) -- unless
 * a quiet region's move (track_quiet.c, `move_seq`) took the pages off
 * meanwhile: then the scan is made again once they are back.  The
 * registration is never undone while the memory lives: a neighbouring
 * region may share an edge page, and a page no longer scanned costs one
 * minor fault at its next write.  The memory must be such that the scan
 * walks it (not VM_PFNMAP): protect checks that every page of the region
 * is reported write-protectable, else the mprotect tracker takes it.
 *
 * The descriptors are numbers the application may close (close_range
 * before exec, a daemon closing what it did not open) and reuse for files
 * of its own.  Closing the userfaultfd drops its registrations: the next
 * scan fails and the region is lost, as above.  The rarer calls (protect,
 * reprotect, a move's) and a failed scan check first that both numbers
 * still name our files (fstat's device and inode); once one does not,
 * neither is used again (`gone`) and every region counts as written.
 *
 * Linux >= 6.7; Debian 12's headers predate the constants, defined here.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "track/track.h"
#include "track/track_private.h"

/* ---- the kernel interface (linux/userfaultfd.h, linux/fs.h of 6.7) ------ */

#define UFFD_FEATURE_WP_UNPOPULATED_ (1ull << 13)
#define UFFD_FEATURE_WP_ASYNC_ (1ull << 15)
#define USER_MODE_ONLY 1 /* UFFD_USER_MODE_ONLY (5.11) */

typedef struct page_run {
  uint64_t start, end, categories;
} page_run;

typedef struct pm_scan {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
  uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
} pm_scan;

#define PAGEMAP_SCAN_ _IOWR('f', 16, pm_scan)
#define PAGE_IS_WPALLOWED_ (1ull << 0)
#define PAGE_IS_WRITTEN_ (1ull << 1)
#define PM_SCAN_WP_MATCHING_ (1ull << 0)
#define PM_SCAN_CHECK_WPASYNC_ (1ull << 1)

/* ---- the descriptors ----------------------------------------------------- */

/* Orders registration, protection and the table `held` (below). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int availability;
static int uffd = -1, pagemap = -1;
/* What they name, as fstat saw it when opened (fds_ours). */
static struct stat uffd_st, pagemap_st;
static _Atomic int gone; /* closed or reused by the application */
static int gone_warned;
/* Regions protected in another epoch (before a fork) are not tracked. */
static _Atomic unsigned epoch = 1;

static int names(int fd, const struct stat *was) {
  struct stat st;
  return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == was->st_dev &&
         st.st_ino == was->st_ino;
}

/* Both descriptors still name our files, else `gone` from now on (the top
 * of the file).  Racy by nature: a number may be closed and reused between
 * this and the call that follows. */
static int fds_ours(void) {
  if (atomic_load(&gone) || uffd < 0 || pagemap < 0)
    return 0; /* (none: a forked child's, before it probes again) */
  if (names(uffd, &uffd_st) && names(pagemap, &pagemap_st))
    return 1;
  atomic_store(&gone, 1);
  ibp__warn_once(&gone_warned,
                 "write tracking: the application closed libibp's "
                 "userfaultfd or pagemap descriptor; regions it tracked "
                 "count as written");
  return 0;
}

static int open_uffd(void) {
  int fd =
      (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | USER_MODE_ONLY);
  if (fd < 0 && errno == EINVAL) /* before 5.11: no user-mode-only flag */
    fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return -1;
  struct uffdio_api api = {.api = UFFD_API,
                           .features = UFFD_FEATURE_WP_ASYNC_ |
                                       UFFD_FEATURE_WP_UNPOPULATED_};
  if (ioctl(fd, UFFDIO_API, &api) != 0 ||
      !(api.features & UFFD_FEATURE_WP_ASYNC_)) {
    close(fd);
    return -1;
  }
  return fd;
}

/* One PAGEMAP_SCAN of [lo, hi) for pages with `want`; up to n runs. */
static long scan_once(pm_scan *a, uintptr_t lo, uintptr_t hi, uint64_t flags,
                      uint64_t want, page_run *v, size_t n) {
  memset(a, 0, sizeof *a);
  a->size = sizeof *a;
  a->flags = flags | PM_SCAN_CHECK_WPASYNC_;
  a->start = lo;
  a->end = hi;
  a->vec = (uintptr_t)v;
  a->vec_len = n;
  a->category_anyof_mask = want;
  a->return_mask = want;
  return ioctl(pagemap, PAGEMAP_SCAN_, a);
}

static int wp_range(uintptr_t lo, uintptr_t hi) {
  struct uffdio_writeprotect w = {.range = {lo, hi - lo},
                                  .mode = UFFDIO_WRITEPROTECT_MODE_WP};
  return ioctl(uffd, UFFDIO_WRITEPROTECT, &w);
}

static int register_range(uintptr_t lo, uintptr_t hi) {
  struct uffdio_register r = {.range = {lo, hi - lo},
                              .mode = UFFDIO_REGISTER_MODE_WP};
  return ioctl(uffd, UFFDIO_REGISTER, &r);
}

/* A page of our own, protected, written, scanned: the kernel does what
 * this file relies on, or the mprotect tracker is used. */
static int probe(void) {
  long pg = sysconf(_SC_PAGESIZE);
  char *p = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return -1;
  uintptr_t lo = (uintptr_t)p, hi = lo + (uintptr_t)pg;
  page_run v[2];
  pm_scan a;
  int ok = register_range(lo, hi) == 0 && wp_range(lo, hi) == 0 &&
           scan_once(&a, lo, hi, 0, PAGE_IS_WRITTEN_, v, 2) == 0;
  if (ok) {
    *(volatile char *)p = 1;
    ok = scan_once(&a, lo, hi, PM_SCAN_WP_MATCHING_, PAGE_IS_WRITTEN_, v, 2) ==
             1 &&
         scan_once(&a, lo, hi, 0, PAGE_IS_WRITTEN_, v, 2) == 0;
  }
  munmap(p, (size_t)pg);
  return ok ? 0 : -1;
}

static int start(void) {
  int saved = errno;
  uffd = open_uffd();
  if (uffd >= 0)
    pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  int ok = uffd >= 0 && pagemap >= 0 && probe() == 0 &&
           fstat(uffd, &uffd_st) == 0 && fstat(pagemap, &pagemap_st) == 0;
  atomic_store(&gone, 0);
  if (!ok) {
    if (uffd >= 0)
      close(uffd);
    if (pagemap >= 0)
      close(pagemap);
    uffd = pagemap = -1;
  }
  ibp__log(IBP_LOG_INFO, "write tracking: %s",
           ok ? "userfaultfd (asynchronous write protection)"
              : "mprotect (no asynchronous userfaultfd write protection "
                "or PAGEMAP_SCAN here)");
  errno = saved;
  return ok;
}

int ibp__uffd_available(void) {
  return ibp__probed_available(&availability, &lock, start);
}

/* ---- regions ------------------------------------------------------------- */

/* t's pages, [*lo, *hi). */
static void pages_of(const ibp_tracked *t, uintptr_t *lo, uintptr_t *hi) {
  uintptr_t pg = ibp__page_size();
  *lo = t->base & ~(pg - 1);
  *hi = (t->base + (uintptr_t)t->bytes + pg - 1) & ~(pg - 1);
}

/* Every page of [lo, hi) is write-protectable in asynchronous mode and
 * walked by the scan (not VM_PFNMAP memory, which it skips). */
static int covered(uintptr_t lo, uintptr_t hi) {
  page_run v[8];
  pm_scan a;
  uintptr_t at = lo;
  while (at < hi) {
    long n = scan_once(&a, at, hi, 0, PAGE_IS_WPALLOWED_, v, 8);
    if (n <= 0)
      return 0;
    for (long i = 0; i < n; i++) {
      if (v[i].start != at || v[i].end <= at)
        return 0;
      at = v[i].end;
    }
  }
  return 1;
}

static int scan_mark(ibp_tracked *t, uintptr_t lo, uintptr_t hi, uint64_t flags,
                     uint64_t *calls, uint64_t *newly_out);

/* ---- shared edge pages (the top of the file) ----------------------------- */

typedef struct held_region {
  ibp_tracked *t;
  uintptr_t lo, hi; /* its pages */
} held_region;

static held_region *held; /* every region protected here, under lock */
static size_t nheld, capheld;
static _Atomic unsigned edge_seq; /* odd: a shared page consumed, unmarked */

/* Under lock: room for one more region in `held`: 0, or -1. */
static int held_reserve(void) {
  if (nheld < capheld)
    return 0;
  size_t c = capheld ? 2 * capheld : 16;
  held_region *v = realloc(held, c * sizeof *v);
  if (!v)
    return -1;
  held = v;
  capheld = c;
  return 0;
}

/* Under lock: another region held lies on page p. */
static int shared_page(const ibp_tracked *t, uintptr_t p) {
  for (size_t i = 0; i < nheld; i++)
    if (held[i].t != t && held[i].lo <= p && p < held[i].hi)
      return 1;
  return 0;
}

/* Under lock: another region held lies on t's pages [lo, hi). */
static int shared_with(const ibp_tracked *t, uintptr_t lo, uintptr_t hi) {
  for (size_t i = 0; i < nheld; i++)
    if (held[i].t != t && held[i].lo < hi && lo < held[i].hi)
      return 1;
  return 0;
}

/* A write found in [lo, hi) of t: its tensors marked, as scan_mark does. */
static void record(ibp_tracked *t, uintptr_t lo, uintptr_t hi) {
  atomic_fetch_add(&t->writes_seen, 1);
  ibp__geom g = ibp__geom_of(t);
  uint64_t newly = ibp__mark_span(&g, lo, hi);
  if (newly) {
    atomic_fetch_add(&t->dirty_tensors, newly);
    atomic_fetch_add_explicit(&t->write_faults, newly, memory_order_relaxed);
    atomic_store_explicit(&t->last_write_ns, ibp__real_ns(),
                          memory_order_relaxed);
  }
}

/* Under lock, `edge_seq` odd: protects shared page p of t if written, and
 * then marks the tensors on it of t and of every region held there. */
static int consume_shared(ibp_tracked *t, uintptr_t p) {
  const uintptr_t pg = ibp__page_size();
  page_run v[1];
  pm_scan a;
  long n =
      scan_once(&a, p, p + pg, PM_SCAN_WP_MATCHING_, PAGE_IS_WRITTEN_, v, 1);
  if (n <= 0)
    return n < 0 ? -1 : 0;
  record(t, p, p + pg);
  for (size_t i = 0; i < nheld; i++)
    if (held[i].t != t && held[i].lo <= p && p < held[i].hi)
      record(held[i].t, p, p + pg);
  return 0;
}

/* Under lock: protects t's pages [lo, hi) again -- with `marking`, only
 * the written ones, marking their tensors (scan_mark), else every page --
 * and an edge page shared with another region held by consume_shared, so
 * that neither loses a write there.  0, or -1. */
static int protect_sharing(ibp_tracked *t, uintptr_t lo, uintptr_t hi,
                           int marking, uint64_t *calls) {
  const uintptr_t pg = ibp__page_size();
  const int first = shared_page(t, lo);
  const int last = hi - pg != lo && shared_page(t, hi - pg);
  uintptr_t a = first ? lo + pg : lo, b = last ? hi - pg : hi;
  int rc = 0;
  if (first || last) {
    atomic_fetch_add(&edge_seq, 1);
    rc |= first ? consume_shared(t, lo) : 0;
    rc |= last ? consume_shared(t, hi - pg) : 0;
    atomic_fetch_add(&edge_seq, 1);
    *calls += (uint64_t)(first + last);
  }
  uint64_t newly;
  if (a < b)
    rc |= marking ? scan_mark(t, a, b, PM_SCAN_WP_MATCHING_, calls, &newly)
                  : wp_range(a, b);
  return rc ? -1 : 0;
}

int ibp__uffd_protect(ibp_tracked *t) {
  if (!t->dirty || !t->bytes || !ibp__uffd_available())
    return -1;
  uintptr_t lo, hi;
  pages_of(t, &lo, &hi);
  if (hi <= lo)
    return -1;
  int saved = errno;
  uint64_t calls = 0;
  pthread_mutex_lock(&lock);
  int ok = fds_ours() && held_reserve() == 0 && register_range(lo, hi) == 0;
  ok = ok && covered(lo, hi) && protect_sharing(t, lo, hi, 0, &calls) == 0;
  if (ok)
    held[nheld++] = (held_region){t, lo, hi};
  pthread_mutex_unlock(&lock);
  errno = saved;
  if (!ok)
    return -1;
  atomic_store(&t->uffd_seq, 0);
  atomic_store(&t->uffd_epoch, atomic_load(&epoch));
  atomic_store(&t->protected_, 1);
  ibp__quiet_add(t);
  return 0;
}

/* t's memory is no longer ours to watch: every tensor dirty from now on
 * (and serve/ demotes a region half dirty once a refresh cannot protect
 * its pages again: serve/prepare/refresh.c).  Returns -1. */
static int lost(ibp_tracked *t) {
  (void)fds_ours(); /* a scan failed: closed under us? then never again */
  unsigned e = atomic_exchange(&t->uffd_epoch, 0);
  ibp__track_mark_dirty(t, t->base, (size_t)t->bytes);
  if (e == atomic_load(&epoch))
    ibp__log(IBP_LOG_INFO,
             "region '%s': its memory is no longer write-protected "
             "(remapped?); every tensor counts as written",
             t->name);
  return -1;
}

/* Scans [lo, hi) of t for written pages, marks their tensors dirty and, when
 * `flags` has PM_SCAN_WP_MATCHING_, protects them again; *calls counts the
 * system calls, *newly the tensors newly marked.  0, or -1 when the memory
 * is no longer registered (or the scan failed). */
static int scan_mark(ibp_tracked *t, uintptr_t lo, uintptr_t hi, uint64_t flags,
                     uint64_t *calls, uint64_t *newly_out) {
  ibp__geom g = ibp__geom_of(t);
  page_run v[32];
  pm_scan a;
  uint64_t newly = 0;
  int rc = 0;
  while (lo < hi) {
    long n = scan_once(&a, lo, hi, flags, PAGE_IS_WRITTEN_, v, 32);
    (*calls)++;
    if (n < 0) {
      rc = -1; /* what the calls before marked is counted all the same */
      break;
    }
    if (n > 0) /* written pages, their tensors dirty already or not */
      atomic_fetch_add(&t->writes_seen, 1);
    for (long i = 0; i < n; i++)
      newly += ibp__mark_span(&g, v[i].start, v[i].end);
    if (a.walk_end <= lo)
      break;
    lo = a.walk_end;
  }
  if (newly) {
    atomic_fetch_add(&t->dirty_tensors, newly);
    atomic_fetch_add_explicit(&t->write_faults, newly, memory_order_relaxed);
    atomic_store_explicit(&t->last_write_ns, ibp__real_ns(),
                          memory_order_relaxed);
  }
  *newly_out = newly;
  return rc;
}

static int tracked(const ibp_tracked *t) {
  unsigned e = atomic_load_explicit(&t->uffd_epoch, memory_order_relaxed);
  return e != 0 && e == atomic_load_explicit(&epoch, memory_order_relaxed) &&
         !atomic_load_explicit(&gone, memory_order_relaxed);
}

/* [a, a+len) as t's pages. */
static void span_pages(const ibp_tracked *t, uintptr_t a, size_t len,
                       uintptr_t *lo, uintptr_t *hi) {
  uintptr_t pg = ibp__page_size(), rlo, rhi;
  pages_of(t, &rlo, &rhi);
  uintptr_t e = a + len < a ? UINTPTR_MAX : a + len;
  *lo = a & ~(pg - 1);
  *hi = e > UINTPTR_MAX - pg ? rhi : (e + pg - 1) & ~(pg - 1);
  *lo = *lo < rlo ? rlo : *lo;
  *hi = *hi > rhi ? rhi : *hi;
}

/* What a copy over pages below hi may trust now: SETTLED_FAULTING (every
 * write there marked its tensors: nothing to scan) or SETTLED_SCANNING
 * (scan them); *seq: the `move_seq` that holds for.  While a move runs
 * (track_quiet.c: `move_seq` odd), waits until the move has marked what
 * was written there between the descriptors and watches those pages anew
 * (`gap_done`), in the mode it leaves them in (`gap_to`). */
enum { SETTLED_SCANNING, SETTLED_FAULTING };

static int settled(ibp_tracked *t, uintptr_t hi, unsigned *seq) {
  for (;;) {
    const unsigned m = atomic_load(&t->move_seq);
    *seq = m;
    if (!(m & 1))
      return atomic_load(&t->mode) == IBP_TRACK_FAULTING ? SETTLED_FAULTING
                                                         : SETTLED_SCANNING;
    /* gap_to is stored before gap_done passes a page: load after */
    const uintptr_t done = atomic_load(&t->gap_done);
    const int to = atomic_load(&t->gap_to);
    if (done >= hi && atomic_load(&t->move_seq) == m)
      return to == IBP_TRACK_FAULTING ? SETTLED_FAULTING : SETTLED_SCANNING;
    sched_yield();
  }
}

/* [lo, hi) holds an edge page of t that another region may share. */
static int on_edge(const ibp_tracked *t, uintptr_t lo, uintptr_t hi) {
  const uintptr_t pg = ibp__page_size(), end = t->base + (uintptr_t)t->bytes;
  return (lo < hi && (t->base & (pg - 1)) && lo <= t->base) ||
         (lo < hi && (end & (pg - 1)) && end < hi);
}

int ibp__uffd_sync(ibp_tracked *t, uintptr_t a, size_t len) {
  if (!tracked(t))
    return lost(t);
  uintptr_t lo, hi;
  unsigned m0;
  span_pages(t, a, len, &lo, &hi);
  /* quiet (track_quiet.c): every write faulted and marked its tensors */
  if (settled(t, hi, &m0) == SETTLED_FAULTING || lo >= hi)
    return 0;
  int saved = errno, rc = 0;
  uint64_t calls = 0, newly;
  const int edge = on_edge(t, lo, hi);
  for (;;) {
    unsigned s0 = atomic_load(&t->uffd_seq);
    unsigned e0 = edge ? atomic_load(&edge_seq) : 0;
    if ((s0 | e0) & 1) {
      sched_yield(); /* a re-protection is marking what it consumed */
      continue;
    }
    if (scan_mark(t, lo, hi, 0, &calls, &newly) != 0) {
      /* a move took the pages off: once it has marked what was written
       * on them between the descriptors, they fault (nothing to scan) or
       * are the asynchronous descriptor's again (scan again) */
      const unsigned m1 = atomic_load(&t->move_seq);
      if (m1 != m0 || (m1 & 1) || atomic_load(&t->mode) == IBP_TRACK_FAULTING) {
        if (settled(t, hi, &m0) == SETTLED_FAULTING)
          break;
        continue;
      }
      rc = lost(t); /* no move: the memory is no longer ours */
      break;
    }
    if (atomic_load(&t->uffd_seq) != s0 ||
        (edge && atomic_load(&edge_seq) != e0))
      continue;
    /* a move begun since may have taken the pages and given them back
     * (an arm that failed) before this scan: what was written meanwhile
     * is marked by its second sum, not recorded by the kernel */
    if (atomic_load(&t->move_seq) == m0)
      break;
    if (settled(t, hi, &m0) == SETTLED_FAULTING)
      break;
  }
  atomic_fetch_add_explicit(&t->scan_calls, calls, memory_order_relaxed);
  errno = saved;
  return rc;
}

int ibp__uffd_reprotect(ibp_tracked *t) {
  if (!tracked(t))
    return lost(t);
  unsigned s0 = atomic_load(&t->uffd_seq);
  if ((s0 & 1) || !atomic_compare_exchange_strong(&t->uffd_seq, &s0, s0 + 1))
    return -1; /* another re-protection runs: try later */
  uintptr_t lo, hi;
  pages_of(t, &lo, &hi);
  int saved = errno;
  uint64_t calls = 0;
  /* (track_quiet.c's lock is held: re-protections are one at a time) */
  pthread_mutex_lock(&lock);
  int rc = fds_ours() ? protect_sharing(t, lo, hi, 1, &calls) : -1;
  pthread_mutex_unlock(&lock);
  atomic_fetch_add(&t->uffd_seq, 1);
  errno = saved;
  return rc == 0 ? 0 : lost(t);
}

int ibp__uffd_still_protected(ibp_tracked *t, uintptr_t a, size_t len) {
  if (!tracked(t))
    return 0;
  uintptr_t lo, hi;
  span_pages(t, a, len, &lo, &hi);
  page_run v[1];
  pm_scan s;
  int saved = errno;
  long n = lo < hi ? scan_once(&s, lo, hi, 0, PAGE_IS_WRITTEN_, v, 1) : 0;
  if (n < 0)
    (void)fds_ours();
  errno = saved;
  return n == 0;
}

/* ---- quiet regions' moves (track_quiet.c) -------------------------------- */

int ibp__uffd_scan_all(ibp_tracked *t) {
  if (!tracked(t) || !fds_ours())
    return lost(t);
  uintptr_t lo, hi;
  pages_of(t, &lo, &hi);
  int saved = errno;
  uint64_t calls = 0, newly;
  int rc = scan_mark(t, lo, hi, 0, &calls, &newly);
  errno = saved;
  return rc == 0 ? 0 : lost(t);
}

int ibp__uffd_release(ibp_tracked *t) {
  uintptr_t lo, hi;
  pages_of(t, &lo, &hi);
  int saved = errno;
  pthread_mutex_lock(&lock);
  struct uffdio_range r = {lo, hi - lo};
  /* a neighbour protected since the move checked (its table gets it
   * after us): its pages stay */
  int rc = fds_ours() && !shared_with(t, lo, hi) &&
                   ioctl(uffd, UFFDIO_UNREGISTER, &r) == 0
               ? 0
               : -1;
  pthread_mutex_unlock(&lock);
  errno = saved;
  return rc;
}

int ibp__uffd_adopt(ibp_tracked *t) {
  if (!tracked(t))
    return -1;
  uintptr_t lo, hi;
  pages_of(t, &lo, &hi);
  int saved = errno;
  uint64_t calls = 0;
  pthread_mutex_lock(&lock);
  int ok = fds_ours() && register_range(lo, hi) == 0 &&
           protect_sharing(t, lo, hi, 0, &calls) == 0;
  pthread_mutex_unlock(&lock);
  errno = saved;
  return ok ? 0 : -1;
}

void ibp__uffd_forget(ibp_tracked *t) {
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < nheld; i++)
    if (held[i].t == t) {
      held[i] = held[--nheld];
      break;
    }
  pthread_mutex_unlock(&lock);
}

void ibp__uffd_lost(ibp_tracked *t) {
  (void)lost(t);
}

void ibp__uffd_after_fork_child(void) {
  /* the child's copy of the memory is not registered, and the descriptors
   * speak of the parent's address space */
  atomic_fetch_add(&epoch, 1);
  pthread_mutex_init(&lock, NULL);
  nheld = 0;
  atomic_store(&edge_seq, 0);
  if (!atomic_load(&gone) && uffd >= 0)
    close(uffd); /* (gone: the numbers may be the application's now) */
  if (!atomic_load(&gone) && pagemap >= 0)
    close(pagemap);
  uffd = pagemap = -1;
  atomic_store(&gone, 0);
  atomic_store(&availability, IBP__PROBE_UNKNOWN);
}
