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
 * The thread also runs track_quiet.c's tick between faults, and at once
 * when woken (ibp__syncwp_tick_now).
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
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
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
static int wake_fd = -1; /* eventfd: ibp__syncwp_tick_now (-1: none) */
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

static int set_wp(uintptr_t lo, uintptr_t hi, int protect) {
  struct uffdio_writeprotect w = {.range = {lo, hi - lo},
                                  .mode = protect ? UFFDIO_WRITEPROTECT_MODE_WP
                                                  : 0};
  return ioctl(fd, UFFDIO_WRITEPROTECT, &w);
}

static int register_range(uintptr_t lo, uintptr_t hi) {
  struct uffdio_register r = {.range = {lo, hi - lo},
                              .mode = UFFDIO_REGISTER_MODE_WP};
  if (ioctl(fd, UFFDIO_REGISTER, &r) != 0)
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
  ioctl(fd, UFFDIO_UNREGISTER, &u); /* also wakes the writers waiting */
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
  if (!len || fd < 0)
    return;
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

static void *fault_thread(void *arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  const int f = fd;
  uint64_t next_tick = ibp__real_ns() + IBP__QUIET_TICK_NS;
  for (;;) {
    uint64_t now = ibp__real_ns();
    if (now >= next_tick) {
      ibp__quiet_tick(now);
      next_tick = now + IBP__QUIET_TICK_NS;
      continue;
    }
    struct pollfd pfd[2] = {{.fd = f, .events = POLLIN},
                            {.fd = wake_fd, .events = POLLIN}};
    int wait_ms = (int)((next_tick - now) / 1000000) + 1;
    if (poll(pfd, 2, wait_ms) < 0 && errno != EINTR)
      break;
    uint64_t woken;
    if ((pfd[1].revents & POLLIN) &&
        syscall(SYS_read, wake_fd, &woken, sizeof woken) == (long)sizeof woken)
      next_tick = now; /* the tick now, then every IBP__QUIET_TICK_NS */
    if (!(pfd[0].revents & POLLIN))
      continue;
    struct uffd_msg m[16];
    ssize_t got = syscall(SYS_read, f, m, sizeof m);
    if (got < 0) {
      if (errno == EAGAIN || errno == EINTR)
        continue;
      break;
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
  if (!ok && fd >= 0) {
    close(fd);
    fd = -1;
  }
  if (ok) /* none: the tick comes every IBP__QUIET_TICK_NS all the same */
    wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
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

int ibp__syncwp_start_thread(void) {
  if (!ibp__syncwp_available())
    return -1;
  pthread_mutex_lock(&lock);
  int ok = thread_started || ibp__thread_start(fault_thread);
  thread_started |= ok;
  pthread_mutex_unlock(&lock);
  return ok ? 0 : -1;
}

void ibp__syncwp_tick_now(void) {
  const uint64_t one = 1;
  if (wake_fd >= 0) /* (a full counter is a wake-up pending all the same) */
    (void)!syscall(SYS_write, wake_fd, &one, sizeof one);
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
  int ok = table_add(t) == 0;
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
  if (fd >= 0)
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
  int rc = 0, saved = errno;
  pthread_mutex_lock(&lock);
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
  if (p && len) {
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
  if (fd >= 0)
    close(fd);
  fd = -1;
  if (wake_fd >= 0)
    close(wake_fd);
  wake_fd = -1;
  thread_started = 0;
  atomic_store(&availability, IBP__PROBE_UNKNOWN);
}
