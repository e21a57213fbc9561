/*
 * The fault mode of quiet regions (track/track.h; docs/ARCHITECTURE.md,
 * "Quiet regions"): userfaultfd write protection in synchronous mode.  A
 * quiet region's pages are registered with a descriptor of their own and
 * write-protected; a write to one of them -- a CPU store, or the kernel
 * writing for the application (read(2), io_uring, process_vm_writev ...)
 * -- waits while this file's thread marks the tensors on the page dirty
 * and lifts the page's protection, then goes on.  So a copy from the
 * region makes no system call: every write before it has already marked
 * its tensors.  A write through /proc/self/mem cannot wait (it would fail
 * with EIO): the write hooks lift its pages first (procmem.c,
 * ibp__syncwp_lift).
 *
 * Per page one bit, "written since protected" (set under `lock` by the
 * fault thread, cleared by reprotect): still_protected reads it, as the
 * mprotect tracker's page bits are read.  The tensors are marked before the
 * bit is set and again after it, so a refresh that clears a dirty bit in
 * between either sees the bit or loses to the second mark.
 *
 * The descriptor must serve kernel-mode faults: opened without
 * UFFD_USER_MODE_ONLY, which an unprivileged process may do only under
 * vm.unprivileged_userfaultfd=1.  Elsewhere a kernel-side write to a
 * protected page would fail with EFAULT: the fault mode is then
 * unavailable and quiet regions keep scanning (track_quiet.c).
 *
 * Pages the application drops -- madvise(MADV_DONTNEED), MADV_REMOVE --
 * change (to zeros, or the file's bytes) without a write fault (a quiet
 * region's copy delivered the old bytes: e2e_stale_hard_writes): the C
 * library's madvise marks them written once the call returned
 * (ibp__syncwp_dropped, hooks_libc.c).  A raw system call is not seen.
 *
 * The descriptor is a number the application may close (close_range
 * before exec, a daemon closing what it did not open) and then reuse for a
 * file of its own: the thread checks after every wait that the number
 * still names our descriptor (POLLNVAL, fstat's device and inode) before
 * it reads, and every other use checks first.  Once it does not, the
 * descriptor is never used again (`gone`): the kernel has dropped its
 * registrations with it, so every region armed counts as written
 * throughout, and track_quiet.c's tick takes them back to scanning.
 *
 * Linux >= 5.7 (anonymous memory), 5.19 (shared memory); the constants
 * Debian 12's headers lack are defined here.
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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"
#include "track/track.h"
#include "track/track_private.h"

#define FEATURE_WP_SHMEM_ (1ull << 12) /* UFFD_FEATURE_WP_HUGETLBFS_SHMEM */
#define FEATURE_WP_UNPOPULATED_ (1ull << 13)

/* The tracker's record of one region's pages [lo, hi). */
typedef struct ibp_sync_pages {
  uintptr_t lo, hi;
  size_t count;
  _Atomic uint64_t *written; /* bit k: page lo + k*pg written since armed */
} ibp_sync_pages;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int availability;
static int fd = -1;
static dev_t fd_dev; /* what fd names, as fstat saw it when opened */
static ino_t fd_ino;
static _Atomic int gone; /* fd no longer ours: never used again */
static int gone_warned;
static int thread_started;
static ibp_tracked **table; /* regions armed, under lock */
static size_t held, table_cap;

/* ---- the descriptor ------------------------------------------------------ */

static int open_fd(uint64_t features) {
  int f = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  if (f < 0)
    return -1; /* EPERM: user-mode faults only here, which will not do */
  struct uffdio_api api = {.api = UFFD_API, .features = features};
  if (ioctl(f, UFFDIO_API, &api) != 0) {
    close(f);
    return -1;
  }
  return f;
}

/* fd still names the descriptor we opened (racy by nature: the number
 * may be closed and reused between this and the call that follows). */
static int fd_same(void) {
  struct stat st;
  return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == fd_dev &&
         st.st_ino == fd_ino;
}

static int set_wp(uintptr_t lo, uintptr_t hi, int protect) {
  if (atomic_load(&gone))
    return -1;
  struct uffdio_writeprotect w = {.range = {lo, hi - lo},
                                  .mode = protect ? UFFDIO_WRITEPROTECT_MODE_WP
                                                  : 0};
  return ioctl(fd, UFFDIO_WRITEPROTECT, &w);
}

static int register_range(uintptr_t lo, uintptr_t hi) {
  struct uffdio_register r = {.range = {lo, hi - lo},
                              .mode = UFFDIO_REGISTER_MODE_WP};
  if (atomic_load(&gone) || ioctl(fd, UFFDIO_REGISTER, &r) != 0)
    return -1;
  if (!(r.ioctls & (__u64)1 << _UFFDIO_WRITEPROTECT)) {
    struct uffdio_range u = {lo, hi - lo};
    ioctl(fd, UFFDIO_UNREGISTER, &u);
    return -1;
  }
  return 0;
}

static void unregister_range(uintptr_t lo, uintptr_t hi) {
  struct uffdio_range u = {lo, hi - lo};
  if (!atomic_load(&gone))
    ioctl(fd, UFFDIO_UNREGISTER, &u); /* also wakes the writers waiting */
}

/* Under lock: fd is ours still, or from now on `gone` (the top of the
 * file) -- the regions armed, their registrations dropped with the
 * descriptor, count as written throughout. */
static int fd_ours(void) {
  if (atomic_load(&gone) || fd < 0)
    return 0; /* (none: a forked child's, before it probes again) */
  if (fd_same())
    return 1;
  atomic_store(&gone, 1);
  for (size_t i = 0; i < held; i++)
    ibp__track_mark_dirty(table[i], table[i]->base, (size_t)table[i]->bytes);
  ibp__warn_once(&gone_warned,
                 "write tracking: the application closed libibp's "
                 "userfaultfd descriptor %d; %zu faulting region(s) count "
                 "as written and go back to scanning",
                 fd, held);
  return 0;
}

/* ---- the fault thread ---------------------------------------------------- */

static ibp_tracked *holder_of(uintptr_t a) {
  for (size_t i = 0; i < held; i++) {
    ibp_sync_pages *p = atomic_load(&table[i]->spages);
    if (p && a >= p->lo && a < p->hi)
      return table[i];
  }
  return NULL;
}

/* Under lock: pages [lo, hi) of t (inside p) written -- their tensors
 * dirty, then their "written" bits, then their tensors again (see the top
 * of the file) -- and writable (which wakes the writers waiting). */
static void lift(ibp_tracked *t, ibp_sync_pages *p, uintptr_t lo,
                 uintptr_t hi) {
  const uintptr_t pg = ibp__page_size();
  ibp__geom g = ibp__geom_of(t);
  uint64_t newly = ibp__mark_span(&g, lo, hi);
  for (uintptr_t a = lo; a < hi; a += pg) {
    size_t k = (a - p->lo) / pg;
    atomic_fetch_or(&p->written[k / 64], 1ull << (k % 64));
  }
  newly += ibp__mark_span(&g, lo, hi);
  if (newly)
    atomic_fetch_add(&t->dirty_tensors, newly);
  set_wp(lo, hi, 0);
}

/* Pages [lo, hi) dropped: in each region armed here, its pages among them
 * written, as by a fault. */
static void on_remove(uintptr_t lo, uintptr_t hi) {
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < held; i++) {
    ibp_sync_pages *p = atomic_load(&table[i]->spages);
    if (!p || hi <= p->lo || lo >= p->hi)
      continue;
    atomic_fetch_add_explicit(&table[i]->write_faults, 1, memory_order_relaxed);
    lift(table[i], p, lo > p->lo ? lo : p->lo, hi < p->hi ? hi : p->hi);
  }
  pthread_mutex_unlock(&lock);
}

void ibp__syncwp_dropped(uintptr_t a, size_t len) {
  const uintptr_t pg = ibp__page_size();
  if (!len || fd < 0 || atomic_load(&gone))
    return; /* (gone: every region armed counts as written) */
  uintptr_t e = a + len < a ? UINTPTR_MAX : a + len;
  on_remove(a & ~(pg - 1),
            e > UINTPTR_MAX - pg ? e & ~(pg - 1) : (e + pg - 1) & ~(pg - 1));
}

/* A write to page a: its tensors dirty, then the page writable. */
static void on_fault(uintptr_t addr) {
  const uintptr_t pg = ibp__page_size(), a = addr & ~(pg - 1);
  pthread_mutex_lock(&lock);
  ibp_tracked *t = holder_of(a);
  if (!t) { /* disarmed since: its writers retry on plain memory */
    struct uffdio_range r = {a, pg};
    if (!atomic_load(&gone))
      ioctl(fd, UFFDIO_WAKE, &r);
    pthread_mutex_unlock(&lock);
    return;
  }
  /* counted before the writer wakes: it may read the count next */
  atomic_fetch_add_explicit(&t->write_faults, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&t->sync_faults, 1, memory_order_relaxed);
  lift(t, atomic_load(&t->spages), a, a + pg);
  pthread_mutex_unlock(&lock);
  /* what the write cost its thread, on the simulated GPU's clock */
  ibp__clock_charge_us(1e-3 * IBP_TRACK_FAULT_NS);
}

/* Waits (up to a second) for fd: 1 when it has messages, 0 when not, -1
 * when it is no longer ours (checked after the wait, before any read). */
static int wait_fd(void) {
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  const int n = poll(&pfd, 1, 1000);
  pthread_mutex_lock(&lock);
  const int ours = fd_ours(); /* (POLLNVAL: closed, fstat fails too) */
  pthread_mutex_unlock(&lock);
  return !ours ? -1 : n > 0 && (pfd.revents & POLLIN);
}

static void *fault_thread(void *arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  for (;;) {
    const int ready = wait_fd();
    if (ready < 0)
      break; /* closed under us: the thread ends, no spin on POLLNVAL */
    if (!ready)
      continue;
    struct uffd_msg m[16];
    ssize_t got = syscall(SYS_read, fd, m, sizeof m);
    if (got < 0) {
      pthread_mutex_lock(&lock);
      const int ours = fd_ours(); /* EBADF: closed since the wait */
      pthread_mutex_unlock(&lock);
      if (!ours)
        break;
      continue;
    }
    for (size_t i = 0; i < (size_t)got / sizeof *m; i++) {
      if (m[i].event == UFFD_EVENT_PAGEFAULT)
        on_fault((uintptr_t)m[i].arg.pagefault.address);
    }
  }
  return NULL;
}

/* Anonymous and shared memory of our own registered and protected: the
 * kernel does what this file relies on. */
static int probe_one(int shared) {
  uintptr_t pg = ibp__page_size();
  char *m = mmap(NULL, pg, PROT_READ | PROT_WRITE,
                 (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return -1;
  m[0] = 1;
  uintptr_t lo = (uintptr_t)m;
  int ok = register_range(lo, lo + pg) == 0;
  if (ok) {
    ok = set_wp(lo, lo + pg, 1) == 0 && set_wp(lo, lo + pg, 0) == 0;
    unregister_range(lo, lo + pg);
  }
  munmap(m, pg);
  return ok ? 0 : -1;
}

static int start(void) {
  int saved = errno;
  fd = open_fd(FEATURE_WP_SHMEM_ | FEATURE_WP_UNPOPULATED_);
  if (fd < 0 && errno == EINVAL) /* an older kernel: anonymous memory */
    fd = open_fd(0);
  int ok = fd >= 0 && probe_one(0) == 0;
  if (ok)
    probe_one(1); /* shared memory may fail: such regions keep scanning */
  struct stat st;
  ok = ok && fstat(fd, &st) == 0;
  if (!ok && fd >= 0) {
    close(fd);
    fd = -1;
  }
  if (ok) {
    fd_dev = st.st_dev;
    fd_ino = st.st_ino;
    atomic_store(&gone, 0);
  }
  ibp__log(IBP_LOG_INFO, "write tracking: quiet regions %s",
           ok ? "are held by synchronous userfaultfd write protection"
              : "keep scanning (no userfaultfd serving kernel-mode faults "
                "here)");
  errno = saved;
  return ok;
}

int ibp__syncwp_available(void) {
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

int ibp__syncwp_gone(void) {
  return atomic_load_explicit(&gone, memory_order_relaxed);
}

int ibp__syncwp_start_thread(void) {
  if (!ibp__syncwp_available() || atomic_load(&gone))
    return -1; /* (gone: new regions keep scanning, none tries to move) */
  pthread_mutex_lock(&lock);
  int ok = thread_started || ibp__thread_start(fault_thread);
  thread_started |= ok;
  pthread_mutex_unlock(&lock);
  return ok ? 0 : -1;
}

int ibp__syncwp_arm(ibp_tracked *t, uintptr_t lo, uintptr_t hi) {
  if (atomic_load(&t->spages) || ibp__syncwp_start_thread() != 0)
    return -1;
  const uintptr_t pg = ibp__page_size();
  ibp_sync_pages *p = calloc(1, sizeof *p);
  size_t count = (hi - lo) / pg;
  if (!p || !(p->written = calloc((count + 63) / 64, sizeof *p->written))) {
    free(p);
    return -1;
  }
  p->lo = lo;
  p->hi = hi;
  p->count = count;
  int saved = errno;
  pthread_mutex_lock(&lock);
  int ok = fd_ours() && table_add(t) == 0;
  if (ok && register_range(lo, hi) != 0) {
    table_remove(t);
    ok = 0;
  }
  if (ok) {
    atomic_store(&t->spages, p);
    /* a fault lifts one base page: memory that cannot (huge pages, where
     * the kernel takes only whole ones) would leave its writer waiting */
    if (set_wp(lo, hi, 1) != 0 || set_wp(lo, lo + pg, 1) != 0) {
      unregister_range(lo, hi);
      atomic_store(&t->spages, NULL);
      table_remove(t);
      ok = 0;
    }
  }
  pthread_mutex_unlock(&lock);
  errno = saved;
  if (!ok) {
    free(p->written);
    free(p);
  }
  return ok ? 0 : -1;
}

void ibp__syncwp_disarm(ibp_tracked *t) {
  ibp_sync_pages *p = atomic_load(&t->spages);
  if (!p)
    return;
  int saved = errno;
  pthread_mutex_lock(&lock);
  if (fd_ours())
    unregister_range(p->lo, p->hi);
  table_remove(t);
  atomic_store(&t->spages, NULL);
  pthread_mutex_unlock(&lock);
  errno = saved;
  free(p->written);
  free(p);
}

int ibp__syncwp_reprotect(ibp_tracked *t) {
  ibp_sync_pages *p = atomic_load(&t->spages);
  if (!p)
    return -1;
  const uintptr_t pg = ibp__page_size();
  int saved = errno;
  pthread_mutex_lock(&lock);
  int rc = fd_ours() ? 0 : -1;
  for (size_t w = 0; w < (p->count + 63) / 64 && rc == 0; w++) {
    uint64_t bits = atomic_load(&p->written[w]);
    while (bits && rc == 0) {
      size_t b = (size_t)__builtin_ctzll(bits);
      size_t e = b;
      while (e < 64 && (bits >> e & 1))
        e++;
      uintptr_t a = p->lo + (w * 64 + b) * pg;
      rc = set_wp(a, a + (e - b) * pg, 1);
      uint64_t m =
          (e == 64 ? UINT64_MAX : (1ull << e) - 1) & ~((1ull << b) - 1);
      if (rc == 0)
        atomic_fetch_and(&p->written[w], ~m);
      bits &= ~m;
    }
  }
  pthread_mutex_unlock(&lock);
  errno = saved;
  return rc == 0 ? 0 : -1;
}

int ibp__syncwp_still_protected(ibp_tracked *t, uintptr_t a, size_t len) {
  ibp_sync_pages *p = atomic_load(&t->spages);
  if (!p)
    return 0;
  const uintptr_t pg = ibp__page_size();
  uintptr_t lo = a < p->lo ? p->lo : a & ~(pg - 1);
  uintptr_t e = a + len < a ? UINTPTR_MAX : a + len;
  uintptr_t hi = e > p->hi ? p->hi : e;
  for (uintptr_t at = lo; at < hi; at += pg) {
    size_t k = (at - p->lo) / pg;
    if (atomic_load(&p->written[k / 64]) >> (k % 64) & 1)
      return 0;
  }
  return 1;
}

void ibp__syncwp_lift(ibp_tracked *t, uintptr_t a, size_t len) {
  const uintptr_t pg = ibp__page_size();
  uintptr_t e = a + len < a ? UINTPTR_MAX - pg + 1 : a + len;
  int saved = errno;
  pthread_mutex_lock(&lock);
  ibp_sync_pages *p = atomic_load(&t->spages);
  if (p && len && fd_ours()) { /* (gone: written already) */
    uintptr_t lo = a & ~(pg - 1), hi = (e + pg - 1) & ~(pg - 1);
    lo = lo < p->lo ? p->lo : lo;
    hi = hi > p->hi ? p->hi : hi;
    if (lo < hi)
      lift(t, p, lo, hi);
  }
  pthread_mutex_unlock(&lock);
  errno = saved;
}

void ibp__syncwp_after_fork_child(void) {
  /* the child has neither the registrations nor the thread */
  pthread_mutex_init(&lock, NULL);
  for (size_t i = 0; i < held; i++)
    atomic_store(&table[i]->spages, NULL);
  held = 0;
  if (fd >= 0 && !atomic_load(&gone))
    close(fd); /* (gone: the number is the application's now) */
  fd = -1;
  atomic_store(&gone, 0);
  thread_started = 0;
  atomic_store(&availability, IBP__PROBE_UNKNOWN);
}
