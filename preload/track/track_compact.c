/*
 * The tracker of compact regions (track/track.h; docs/ARCHITECTURE.md,
 * "Compact regions").  The memory is libibp's own anonymous mapping,
 * registered with a userfaultfd of our own in missing-page and
 * write-protect mode, both synchronous: the faulting thread waits while
 * this file's thread answers.  Each page is in one of three states, changed
 * only under `lock`:
 *
 *   PROTECTED  resident and write-protected: the compressed copy may hold
 *              it (a page missing in this state was never touched, or the
 *              application dropped it: its tensors are marked dirty when
 *              it comes back as zeros)
 *   WRITTEN    resident and writable: written since it was last protected;
 *              its tensors were marked dirty before the write went on
 *   RELEASED   dropped (MADV_DONTNEED): the compressed copy holds it
 *
 * A write to a PROTECTED page marks the tensors on it dirty, makes it
 * WRITTEN and writable, then lets the write go on.  Any access to a
 * RELEASED page rebuilds it from the compressed copy (the owner's
 * ops->rebuild) and installs it (UFFDIO_COPY): write-protected for a read,
 * WRITTEN for a write.  Kernel-side accesses (read(2) into the memory, the
 * driver's staging copies) fault the same way where the descriptor serves
 * kernel-mode faults (opened without UFFD_USER_MODE_ONLY).
 *
 * Where the kernel refuses that (an unprivileged process under
 * vm.unprivileged_userfaultfd=0), the descriptor serves user-mode faults
 * only, and a kernel-side access to a page not ready for it fails with
 * EFAULT.  The C library calls that let the kernel read or write caller
 * memory are hooked (hooks_libc.c): before the real call,
 * ibp__compact_before_kernel touches the pages of its buffers that lie in
 * compact memory from user mode -- an atomic no-op store for the pages the
 * kernel will write (they become WRITTEN, their tensors dirty), a load for
 * the ones it will read (a released page comes back) -- and holds them:
 * while such a call is in flight, no page is released or write-protected
 * again (`kaccess`, checked under `lock`).  What no hook sees (raw system
 * calls, io_uring, process_vm_writev ...) fails there with EFAULT
 * (docs/CONFIG.md, mode=compact).
 *
 * Release (ibp__track_release, the worker): a PROTECTED page the owner
 * calls releasable is rebuilt into a buffer and compared with the page
 * byte for byte, without the lock (the comparison may fault on a page
 * never touched, which this thread serves); then, under the lock, every
 * page still PROTECTED and releasable is dropped.  A write between the two
 * made the page WRITTEN under the lock, so no write is ever lost, and a
 * page is only dropped once its rebuild was seen to give its bytes.
 *
 * Neither ops function nor anything under `lock` touches compact memory:
 * the fault thread needs the lock to serve such a touch.
 *
 * Linux >= 4.11 for missing pages of anonymous memory, >= 5.7 for write
 * protection; the constants Debian 12's headers lack are defined here.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"
#include "base/thread.h"
#include "track/track.h"
#include "track/track_private.h"

#ifndef UFFDIO_COPY_MODE_WP
#define UFFDIO_COPY_MODE_WP ((__u64)1 << 1)
#endif
#ifndef UFFD_PAGEFAULT_FLAG_WP
#define UFFD_PAGEFAULT_FLAG_WP (1 << 1)
#endif

enum { PROTECTED = 0, WRITTEN = 1, RELEASED = 2 };

/* The tracker's record of one region's pages [lo, hi). */
typedef struct ibp_compact_pages {
  uintptr_t lo, hi;
  size_t count;
  _Atomic uint8_t *state; /* per page */
} ibp_compact_pages;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int availability;
static int fd = -1;
/* The descriptor serves user-mode faults only: the libc hooks prepare
 * kernel-side accesses (set once by start, before any region is held). */
static _Atomic int user_only;
/* Regions held while user_only (the libc hooks' one relaxed load). */
static _Atomic unsigned user_held;
/* Hooked calls in flight whose buffers lie in compact memory, and this
 * thread's share of them (ibp__compact_kaccess_end gives it back).  Changed
 * under `lock`, so that a release or re-protection that holds it sees
 * every call that has prepared pages. */
static _Atomic int kaccess;
static __thread int my_kaccess __attribute__((tls_model("initial-exec")));
/* Every held region lies in [span_lo, span_hi) (grown under `lock`, reset
 * when none is held): the hooks' first filter, without the lock. */
static _Atomic uintptr_t span_lo = UINTPTR_MAX, span_hi;
static int thread_started;
static ibp_tracked **table; /* the regions held, under lock */
static size_t held, table_cap;
static uint8_t *page_buf; /* the fault thread's rebuilds, under lock */

/* ---- the descriptor ------------------------------------------------------ */

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1 /* Linux 5.11 */
#endif

static int open_fd(void) {
  /* kernel-mode faults too where the kernel allows it, else user-mode
   * faults only (the libc hooks then prepare kernel-side accesses) */
  int f = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  if (f < 0 && errno == EPERM) {
    f = (int)syscall(SYS_userfaultfd,
                     O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (f >= 0)
      atomic_store(&user_only, 1);
  }
  if (f < 0)
    return -1;
  struct uffdio_api api = {.api = UFFD_API, .features = 0};
  if (ioctl(f, UFFDIO_API, &api) != 0) {
    close(f);
    return -1;
  }
  return f;
}

static int set_wp(uintptr_t lo, uintptr_t hi, int protect) {
  struct uffdio_writeprotect w = {.range = {lo, hi - lo},
                                  .mode = protect ? UFFDIO_WRITEPROTECT_MODE_WP
                                                  : 0};
  return ioctl(fd, UFFDIO_WRITEPROTECT, &w);
}

static int register_range(uintptr_t lo, uintptr_t hi) {
  struct uffdio_register r = {.range = {lo, hi - lo},
                              .mode = UFFDIO_REGISTER_MODE_MISSING |
                                      UFFDIO_REGISTER_MODE_WP};
  if (ioctl(fd, UFFDIO_REGISTER, &r) != 0)
    return -1;
  /* both kinds of fault must be ours to answer */
  const __u64 need = (__u64)1 << _UFFDIO_COPY | (__u64)1 << _UFFDIO_WAKE |
                     (__u64)1 << _UFFDIO_WRITEPROTECT;
  if ((r.ioctls & need) != need) {
    struct uffdio_range u = {lo, hi - lo};
    ioctl(fd, UFFDIO_UNREGISTER, &u);
    return -1;
  }
  return 0;
}

static void wake(uintptr_t lo, uintptr_t len) {
  struct uffdio_range r = {lo, len};
  ioctl(fd, UFFDIO_WAKE, &r);
}

/* Installs one page at `at` from buf; a page already there (a second
 * fault on it) is left as it is and its waiters woken. */
static void install(uintptr_t at, const uint8_t *buf, int protect) {
  uintptr_t pg = ibp__page_size();
  struct uffdio_copy c = {.dst = at,
                          .src = (uintptr_t)buf,
                          .len = pg,
                          .mode = protect ? UFFDIO_COPY_MODE_WP : 0};
  if (ioctl(fd, UFFDIO_COPY, &c) != 0 && errno == EEXIST)
    wake(at, pg);
}

/* ---- the fault thread ---------------------------------------------------- */

static ibp_tracked *holder_of(uintptr_t a) {
  for (size_t i = 0; i < held; i++) {
    ibp_compact_pages *p = atomic_load(&table[i]->pages);
    if (p && a >= p->lo && a < p->hi)
      return table[i];
  }
  return NULL;
}

/* The tensors on page [a, a+pg) of t are written: dirty from now on. */
static void mark_page(ibp_tracked *t, uintptr_t a) {
  ibp__geom g = ibp__geom_of(t);
  uint64_t newly = ibp__mark_span(&g, a, a + ibp__page_size());
  if (newly)
    atomic_fetch_add(&t->dirty_tensors, newly);
  atomic_fetch_add_explicit(&t->write_faults, 1, memory_order_relaxed);
}

/* The bytes of page a of t (region bytes rebuilt, the rest zero); 0, or -1
 * when the rebuild failed. */
static int page_bytes(ibp_tracked *t, uintptr_t a, uint8_t *out) {
  uintptr_t pg = ibp__page_size(), end = t->base + (uintptr_t)t->bytes;
  memset(out, 0, pg);
  uintptr_t lo = a < t->base ? t->base : a, hi = a + pg < end ? a + pg : end;
  if (lo >= hi)
    return 0;
  return t->compact->rebuild(t->compact->arg, lo, hi - lo, out + (lo - a));
}

static void on_fault(uintptr_t addr, uint64_t flags) {
  static int warned;
  const uintptr_t pg = ibp__page_size(), a = addr & ~(pg - 1);
  pthread_mutex_lock(&lock);
  ibp_tracked *t = holder_of(a);
  if (!t) { /* unregistered since: its waiters retry on plain memory */
    wake(a, pg);
    pthread_mutex_unlock(&lock);
    return;
  }
  ibp_compact_pages *p = atomic_load(&t->pages);
  _Atomic uint8_t *st = &p->state[(a - p->lo) / pg];
  if (flags & UFFD_PAGEFAULT_FLAG_WP) {
    if (atomic_load(st) == RELEASED) {
      wake(a, pg); /* dropped meanwhile: the retry faults as missing */
    } else {
      mark_page(t, a);
      atomic_store(st, WRITTEN);
      set_wp(a, a + pg, 0); /* and wakes the writer */
    }
  } else {
    const int released = atomic_load(st) == RELEASED;
    if (!released)
      memset(page_buf, 0, pg); /* never touched: zeros */
    else if (page_bytes(t, a, page_buf) != 0)
      ibp__warn_once(&warned,
                     "region '%s': a released page could not be rebuilt; "
                     "its bytes are lost (a libibp bug)",
                     t->name);
    /* a page missing that we did not release was never touched, or was
     * dropped by the application (a raw madvise MADV_DONTNEED: zeros
     * now): its tensors may no longer be what the shadow holds */
    const int write = (flags & UFFD_PAGEFAULT_FLAG_WRITE) != 0;
    if (write || !released)
      mark_page(t, a);
    atomic_store(st, write || !released ? WRITTEN : PROTECTED);
    if (released) /* counted before the access goes on */
      atomic_fetch_add_explicit(&t->pages_rebuilt, 1, memory_order_relaxed);
    install(a, page_buf, released && !write);
  }
  pthread_mutex_unlock(&lock);
}

static void *fault_thread(void *arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  const int f = fd;
  for (;;) {
    struct pollfd pfd = {.fd = f, .events = POLLIN};
    if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
      break;
    struct uffd_msg m[16];
    /* the system call: libibp's own read hook need not see this */
    ssize_t got = syscall(SYS_read, f, m, sizeof m);
    if (got < 0) {
      if (errno == EAGAIN || errno == EINTR)
        continue;
      break;
    }
    for (size_t i = 0; i < (size_t)got / sizeof *m; i++)
      if (m[i].event == UFFD_EVENT_PAGEFAULT)
        on_fault((uintptr_t)m[i].arg.pagefault.address,
                 m[i].arg.pagefault.flags);
  }
  return NULL;
}

/* A page of our own registered, read, written and scanned: the kernel does
 * what this file relies on. */
static int probe(void) {
  uintptr_t pg = ibp__page_size();
  char *m = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (m == MAP_FAILED)
    return -1;
  uintptr_t lo = (uintptr_t)m;
  int ok = register_range(lo, lo + pg) == 0;
  if (ok) {
    struct uffdio_range u = {lo, pg};
    ioctl(fd, UFFDIO_UNREGISTER, &u);
  }
  munmap(m, pg);
  return ok ? 0 : -1;
}

static int start(void) {
  int saved = errno;
  fd = open_fd();
  page_buf = fd >= 0 ? malloc(ibp__page_size()) : NULL;
  int ok = page_buf && probe() == 0;
  if (!ok) {
    if (fd >= 0)
      close(fd);
    free(page_buf);
    page_buf = NULL;
    fd = -1;
  }
  if (!ok)
    atomic_store(&user_only, 0);
  else if (atomic_load(&user_only))
    ibp__log(IBP_LOG_INFO,
             "userfaultfd serves user-mode faults only here: compact "
             "regions rely on the C library hooks for system calls that "
             "read or write them (docs/CONFIG.md, mode=compact)");
  errno = saved;
  return ok;
}

int ibp__track_compact_available(void) {
  return ibp__probed_available(&availability, &lock, start);
}

/* ---- regions ------------------------------------------------------------- */

static int table_add(ibp_tracked *t) {
  if (held == table_cap) {
    size_t cap = table_cap ? 2 * table_cap : 16;
    ibp_tracked **v = realloc(table, cap * sizeof *v);
    if (!v)
      return -1;
    table = v;
    table_cap = cap;
  }
  table[held++] = t;
  return 0;
}

static void table_remove(const ibp_tracked *t) {
  for (size_t i = 0; i < held; i++)
    if (table[i] == t) {
      table[i] = table[--held];
      return;
    }
}

/* Under lock, after the table changed: the hooks' filter follows it. */
static void held_changed(void) {
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (size_t i = 0; i < held; i++) {
    ibp_compact_pages *p = atomic_load(&table[i]->pages);
    if (p) {
      lo = p->lo < lo ? p->lo : lo;
      hi = p->hi > hi ? p->hi : hi;
    }
  }
  atomic_store(&span_lo, lo);
  atomic_store(&span_hi, hi);
  atomic_store(&user_held, atomic_load(&user_only) ? (unsigned)held : 0u);
}

int ibp__compact_kaccess_begin(void) {
  if (!atomic_load_explicit(&user_held, memory_order_relaxed))
    return 0;
  return my_kaccess + 1;
}

void ibp__compact_kaccess_end(int began) {
  if (!began || my_kaccess == began - 1)
    return;
  atomic_fetch_sub(&kaccess, my_kaccess - (began - 1));
  my_kaccess = began - 1;
}

void ibp__compact_before_kernel(const void *addr, size_t len, int write) {
  if (!atomic_load_explicit(&user_held, memory_order_relaxed) || !len)
    return;
  uintptr_t a = (uintptr_t)addr, e = a + len < a ? UINTPTR_MAX : a + len;
  if (e <= atomic_load(&span_lo) || a >= atomic_load(&span_hi))
    return;
  /* Under the lock: the pages [lo, hi) this call relies on, and the hold
   * that keeps them as prepared until the call returns (a release or
   * re-protection after this sees it; one before it finished first). */
  const uintptr_t pg = ibp__page_size();
  uintptr_t lo = 0, hi = 0;
  int saved = errno;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < held; i++) { /* the lowest region overlapping */
    ibp_compact_pages *p = atomic_load(&table[i]->pages);
    if (p && a < p->hi && p->lo < e && (lo >= hi || p->lo < lo)) {
      lo = a > p->lo ? a & ~(pg - 1) : p->lo;
      hi = e < p->hi ? e : p->hi;
    }
  }
  if (lo < hi) {
    atomic_fetch_add(&kaccess, 1);
    my_kaccess++;
  }
  pthread_mutex_unlock(&lock);
  /* From user mode, each page: a store for the kernel to write it (the
   * tracker marks its tensors and lets it be written), a load for the
   * kernel to read it (a released page comes back).  The store is an
   * atomic no-op, so a thread writing the same byte meanwhile loses
   * nothing. */
  for (uintptr_t at = lo; at < hi; at += pg) {
    if (write)
      __atomic_fetch_or((unsigned char *)at, 0, __ATOMIC_RELAXED);
    else
      (void)*(volatile const unsigned char *)at;
  }
  errno = saved;
  /* a buffer across two compact regions: the next one too */
  if (hi && hi < e)
    ibp__compact_before_kernel((const void *)hi, e - hi, write);
}

int ibp__compact_protect(ibp_tracked *t) {
  const uintptr_t pg = ibp__page_size();
  if (!t->compact || !t->dirty || !t->bytes || (t->base & (pg - 1)) ||
      !ibp__track_compact_available())
    return -1;
  ibp_compact_pages *p = calloc(1, sizeof *p);
  uintptr_t lo = t->base,
            hi = (t->base + (uintptr_t)t->bytes + pg - 1) & ~(pg - 1);
  if (!p || !(p->state = calloc((hi - lo) / pg, 1))) {
    free(p);
    return -1;
  }
  p->lo = lo;
  p->hi = hi;
  p->count = (hi - lo) / pg;
  int saved = errno;
  pthread_mutex_lock(&lock);
  int ok = fd >= 0 && (thread_started || ibp__thread_start(fault_thread));
  thread_started |= ok;
  ok = ok && table_add(t) == 0;
  if (ok && register_range(lo, hi) != 0) {
    table_remove(t);
    ok = 0;
  }
  if (ok) {
    atomic_store(&t->pages, p);
    if (set_wp(lo, hi, 1) != 0) { /* nothing faulted yet: undo */
      struct uffdio_range u = {lo, hi - lo};
      ioctl(fd, UFFDIO_UNREGISTER, &u);
      atomic_store(&t->pages, NULL);
      table_remove(t);
      ok = 0;
    }
  }
  if (ok)
    held_changed();
  pthread_mutex_unlock(&lock);
  errno = saved;
  if (!ok) {
    free(p->state);
    free(p);
    return -1;
  }
  atomic_store(&t->protected_, 1);
  return 0;
}

void ibp__compact_unprotect(ibp_tracked *t) {
  ibp_compact_pages *p = atomic_load(&t->pages);
  if (!p)
    return;
  const uintptr_t pg = ibp__page_size();
  int saved = errno;
  pthread_mutex_lock(&lock);
  /* every page back with its bytes (unless they are no longer wanted),
   * then plain memory again */
  const int keep = !atomic_load(&t->discard);
  for (size_t k = 0; keep && k < p->count && fd >= 0; k++)
    if (atomic_load(&p->state[k]) == RELEASED) {
      uintptr_t a = p->lo + k * pg;
      if (page_bytes(t, a, page_buf) != 0)
        ibp__log(IBP_LOG_WARN,
                 "region '%s': a released page could not be rebuilt", t->name);
      atomic_store(&p->state[k], WRITTEN);
      install(a, page_buf, 0);
    }
  if (fd >= 0) {
    set_wp(p->lo, p->hi, 0);
    struct uffdio_range u = {p->lo, p->hi - p->lo};
    ioctl(fd, UFFDIO_UNREGISTER, &u);
  }
  table_remove(t);
  atomic_store(&t->pages, NULL);
  held_changed();
  pthread_mutex_unlock(&lock);
  errno = saved;
  free(p->state);
  free(p);
}

int ibp__compact_reprotect(ibp_tracked *t) {
  ibp_compact_pages *p = atomic_load(&t->pages);
  if (!p)
    return -1;
  const uintptr_t pg = ibp__page_size();
  int rc = 0, saved = errno;
  pthread_mutex_lock(&lock);
  if (atomic_load(&kaccess)) /* a hooked call writes there from the kernel */
    rc = -1;
  for (size_t k = 0; k < p->count && rc == 0;) {
    if (atomic_load(&p->state[k]) != WRITTEN) {
      k++;
      continue;
    }
    size_t e = k;
    while (e < p->count && atomic_load(&p->state[e]) == WRITTEN)
      e++;
    rc = set_wp(p->lo + k * pg, p->lo + e * pg, 1);
    for (; rc == 0 && k < e; k++)
      atomic_store(&p->state[k], PROTECTED);
  }
  pthread_mutex_unlock(&lock);
  errno = saved;
  return rc == 0 ? 0 : -1;
}

int ibp__compact_still_protected(ibp_tracked *t, uintptr_t a, size_t len) {
  ibp_compact_pages *p = atomic_load(&t->pages);
  if (!p || !len)
    return p != NULL;
  const uintptr_t pg = ibp__page_size();
  uintptr_t lo = a < p->lo ? p->lo : a & ~(pg - 1);
  uintptr_t hi = a + len > p->hi ? p->hi : a + len;
  for (uintptr_t at = lo; at < hi; at += pg)
    if (atomic_load(&p->state[(at - p->lo) / pg]) == WRITTEN)
      return 0;
  return 1;
}

/* Page k of p may go: PROTECTED and releasable (under lock, or as a first
 * look without it). */
static int may_go(const ibp_tracked *t, const ibp_compact_pages *p, size_t k) {
  const uintptr_t pg = ibp__page_size(), a = p->lo + k * pg;
  return atomic_load(&p->state[k]) == PROTECTED &&
         t->compact->releasable(t->compact->arg, a, pg);
}

/* Drops the verified pages [k0, k1) of p that may still go. */
static long drop(ibp_tracked *t, ibp_compact_pages *p, const uint8_t *ok,
                 size_t k0, size_t k1) {
  const uintptr_t pg = ibp__page_size();
  long n = 0;
  pthread_mutex_lock(&lock);
  if (atomic_load(&kaccess)) /* a hooked call relies on the pages: later */
    k0 = k1;
  for (size_t k = k0; k < k1;) {
    if (!ok[k - k0] || !may_go(t, p, k)) {
      k++;
      continue;
    }
    size_t e = k;
    while (e < k1 && ok[e - k0] && may_go(t, p, e))
      e++;
    if (madvise((void *)(p->lo + k * pg), (e - k) * pg, MADV_DONTNEED) == 0)
      for (; k < e; k++, n++)
        atomic_store(&p->state[k], RELEASED);
    k = e;
  }
  pthread_mutex_unlock(&lock);
  return n;
}

#define RELEASE_BATCH 256 /* pages verified, then dropped under one lock */

long ibp__track_release(ibp_tracked *t) {
  ibp_compact_pages *p = atomic_load(&t->pages);
  if (!p || atomic_load(&t->kind) != IBP_TRACKER_KIND_COMPACT)
    return -1;
  const uintptr_t pg = ibp__page_size();
  uint8_t *buf = malloc(pg), ok[RELEASE_BATCH];
  if (!buf)
    return 0;
  /* whole pages of whole tensors only: the tail has no compressed copy */
  const ibp__geom g = ibp__geom_of(t);
  const size_t last = (g.tend - p->lo) / pg;
  long n = 0;
  int saved = errno;
  for (size_t k0 = 0; k0 < last; k0 += RELEASE_BATCH) {
    size_t k1 = k0 + RELEASE_BATCH < last ? k0 + RELEASE_BATCH : last;
    int any = 0;
    for (size_t k = k0; k < k1; k++) {
      const uintptr_t a = p->lo + k * pg;
      ok[k - k0] = may_go(t, p, k) &&
                   t->compact->rebuild(t->compact->arg, a, pg, buf) == 0 &&
                   memcmp(buf, (const void *)a, pg) == 0;
      any |= ok[k - k0];
    }
    if (any)
      n += drop(t, p, ok, k0, k1);
  }
  errno = saved;
  free(buf);
  if (n)
    atomic_fetch_add_explicit(&t->pages_released, (uint64_t)n,
                              memory_order_relaxed);
  return n;
}

long long ibp__track_resident_bytes(const ibp_tracked *t) {
  ibp_compact_pages *p = atomic_load(&((ibp_tracked *)t)->pages);
  if (!p)
    return -1;
  const uintptr_t pg = ibp__page_size();
  unsigned char vec[1024];
  long long bytes = 0;
  for (uintptr_t a = p->lo; a < p->hi; a += sizeof vec * pg) {
    size_t len = p->hi - a < sizeof vec * pg ? p->hi - a : sizeof vec * pg;
    if (mincore((void *)a, len, vec) != 0)
      return -1;
    for (size_t i = 0; i < (len + pg - 1) / pg; i++)
      bytes += (vec[i] & 1) ? (long long)pg : 0;
  }
  return bytes;
}

void ibp__compact_after_fork_child(void) {
  /* the memory was MADV_DONTFORK: the child has none of it, and neither
   * the fault thread nor the registrations */
  pthread_mutex_init(&lock, NULL);
  for (size_t i = 0; i < held; i++)
    atomic_store(&table[i]->pages, NULL);
  held = 0;
  atomic_store(&user_held, 0);
  atomic_store(&user_only, 0);
  atomic_store(&span_lo, UINTPTR_MAX);
  atomic_store(&span_hi, 0);
  atomic_store(&kaccess, 0);
  my_kaccess = 0;
  if (fd >= 0)
    close(fd);
  fd = -1;
  thread_started = 0;
  atomic_store(&availability, IBP__PROBE_UNKNOWN);
}
