/*
 * C-library calls that write (or read) caller memory from the kernel side
 * (docs/ARCHITECTURE.md, "No stale byte").  The kernel does not
 * fault on a read-only page the way a CPU store does: read(2) into a
 * tracked page fails with EFAULT.  So each hook announces the buffers it is
 * about to fill to the tracker (ibp__track_before_write: tensors marked
 * dirty, pages made writable) and then calls the real function with the
 * same arguments, returning its result and errno untouched.  From the
 * announcement until the call returns (ibp__track_kwrite_begin/end) no
 * recompression may protect pages again (serve/prepare/refresh.c), or the call
 * would fail with EFAULT halfway.
 *
 * Every hook is generated from one row of libc_hooks.def; what differs
 * between them is the announcement, a small helper below.  The real
 * function is found with ibp__libc_once (base/libc.h: its errno policy).
 *
 * Cost when nothing is tracked: one relaxed load (ibp__track_any); user
 * memory (iovecs, msghdr) is only read when something is tracked.  fread
 * is hooked because glibc reads large requests straight into the caller's
 * buffer with its internal read; small ones go through the FILE buffer and
 * memcpy, which faults and is handled like any CPU store.
 *
 * Compact regions kept with a userfaultfd that serves user-mode faults
 * only (track_compact.c) need the same for the kernel's reads of caller
 * memory (write(2) from a released page fails with EFAULT): the
 * IBP_LIBC_READ rows (write, send, fwrite ...) and the write rows announce
 * their buffers to ibp__compact_before_kernel, inside the window
 * ibp__compact_kaccess_begin/end, which keeps the pages ready until the
 * call returns.  Cost when no such region is held: one relaxed load.
 *
 * A descriptor of /proc/self/mem makes the write(2) family (the
 * IBP_LIBC_PUT rows) a kernel-side write into the process's memory at the
 * file offset, one the kernel cannot make wait for a userfaultfd: the
 * open hooks (IBP_LIBC_OPEN rows) remember such descriptors, and a write
 * through one announces its target (procmem.c) inside the kwrite window.
 * Cost for any other descriptor: one relaxed load.
 *
 * mprotect and madvise (the IBP_LIBC_CHANGE rows) change tracked pages
 * without a store: advice that discards or replaces page contents is
 * announced as a write; the application's mprotect goes to
 * ibp__track_app_protect first (its tensors dirty, the tracker's pages
 * there released, the region never re-protected), and its protection then
 * holds -- but a write fault on the region's pages is still the tracker's
 * (track.c, "The application's own mprotect").
 *
 * A row takes effect only when its symbol is listed in libibp.map (CTest
 * check_libc_hooks_listed).
 */
/* Fortified headers turn read() & co. into inline wrappers that cannot be
 * redefined; the hooks need the plain declarations. */
#undef _FORTIFY_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/libc.h"
#include "track/track.h"
#include "track/track_private.h"

/* ---- announcements ------------------------------------------------------- */

/* [buf, buf+n) is about to be written (w = 1) or read (w = 0) by the
 * kernel: the trackers make its pages ready (a write is announced to the
 * page-protection tracker too). */
static void touch(const void *buf, size_t n, int w) {
  if (w)
    ibp__track_before_write(buf, n);
  ibp__compact_before_kernel(buf, n, w);
}

static void announce_buf(const void *buf, size_t n, int w) {
  touch(buf, n, w);
}

/* The iovec array itself is read by the kernel, then its buffers. */
static void before_iov(const struct iovec *iov, size_t n, int w) {
  if (n > IOV_MAX)
    return; /* the call fails with EINVAL/EMSGSIZE, touching nothing */
  ibp__compact_before_kernel(iov, n * sizeof *iov, 0);
  for (size_t i = 0; i < n; i++)
    touch(iov[i].iov_base, iov[i].iov_len, w);
}

static void announce_iov(const struct iovec *iov, int cnt, int w) {
  if (cnt > 0)
    before_iov(iov, (size_t)cnt, w);
}

/* The source address is announced at its largest size: reading *alen here
 * could fault where the real call returns EFAULT. */
static void announce_from(const void *buf, size_t n,
                          const struct sockaddr *addr, const socklen_t *alen) {
  touch(buf, n, 1);
  if (addr && alen) {
    touch(addr, sizeof(struct sockaddr_storage), 1);
    touch(alen, sizeof *alen, 1);
  }
}

static void announce_to(const void *buf, size_t n, const struct sockaddr *addr,
                        socklen_t alen) {
  touch(buf, n, 0);
  if (addr)
    touch(addr, alen, 0);
}

/* Receiving, the kernel writes the iovecs, the name and control buffers,
 * and the lengths and flags in the msghdr itself; sending, it reads them
 * all. */
static void announce_msg(const struct msghdr *msg, int w) {
  if (!msg)
    return;
  touch(msg, sizeof *msg, w);
  touch(msg->msg_name, msg->msg_namelen, w);
  touch(msg->msg_control, msg->msg_controllen, w);
  before_iov(msg->msg_iov, msg->msg_iovlen, w);
}

/* The vector is written both ways (the kernel stores msg_len). */
static void announce_mmsg(const struct mmsghdr *v, unsigned int n, int w) {
  if (!v)
    return;
  touch(v, (size_t)n * sizeof *v, 1);
  for (unsigned i = 0; i < n && i < IOV_MAX; i++) {
    const struct msghdr *m = &v[i].msg_hdr;
    touch(m->msg_name, m->msg_namelen, w);
    touch(m->msg_control, m->msg_controllen, w);
    before_iov(m->msg_iov, m->msg_iovlen, w);
  }
}

/* size*n bytes; an overflowing product announces everything above ptr. */
static void announce_fread(const void *ptr, size_t size, size_t n, int w) {
  size_t bytes;
  if (__builtin_mul_overflow(size, n, &bytes))
    bytes = SIZE_MAX;
  touch(ptr, bytes, w);
}

/* Through a descriptor of /proc/self/mem (procmem.c) the kernel writes n
 * bytes of the process's memory at off (-1: the descriptor's position):
 * announced, inside the kwrite window; 0 for any other descriptor. */
static int mem_at(int fd, long long off, size_t n) {
  return ibp__procmem_fd(fd) ? ibp__procmem_write_begin(fd, off, n) : 0;
}

static int mem_iov(int fd, long long off, const struct iovec *iov, int cnt) {
  if (!ibp__procmem_fd(fd) || cnt <= 0 || cnt > IOV_MAX)
    return 0;
  size_t n = 0;
  for (int i = 0; i < cnt; i++)
    n = __builtin_add_overflow(n, iov[i].iov_len, &n) ? SIZE_MAX : n;
  return ibp__procmem_write_begin(fd, off, n);
}

/* The application changing the protection of tracked pages takes them out
 * of tracking first (their tensors dirty): whatever it sets then holds, and
 * a later write cannot go unseen. */
static void announce_protect(const void *addr, size_t len, int after) {
  if (!after)
    ibp__track_app_protect(addr, len);
}

/* Advice that discards or replaces page contents is a write: announced
 * before the call, and once it returned, the pages it dropped count as
 * written again, in a faulting region (track_sync.c) and in a scanning one
 * (track_quiet.c: the scan may not see a dropped page as written). */
static void announce_advice(const void *addr, size_t len, int advice,
                            int after) {
  if (after) {
    if (advice == MADV_DONTNEED || advice == MADV_REMOVE) {
      ibp__syncwp_dropped((uintptr_t)addr, len);
      ibp__quiet_dropped((uintptr_t)addr, len);
    }
    return;
  }
  switch (advice) {
  case MADV_NORMAL:
  case MADV_RANDOM:
  case MADV_SEQUENTIAL:
  case MADV_WILLNEED:
  case MADV_DONTFORK:
  case MADV_DOFORK:
  case MADV_HUGEPAGE:
  case MADV_NOHUGEPAGE:
  case MADV_DONTDUMP:
  case MADV_DODUMP:
    return;
  default:
    ibp__track_before_write(addr, len);
  }
}

/* ---- the hooks ----------------------------------------------------------- */

/* Names are parenthesized: glibc defines function-like macros for some
 * (fread_unlocked when optimizing).  Every row is declared first: the
 * __*_chk forms have no prototype once _FORTIFY_SOURCE is off. */
#define IBP_LIBC_WRITE(name, ret, params, args, announce, fail)                \
  IBP_EXPORT ret(name) params;
#define IBP_LIBC_READ IBP_LIBC_WRITE
#define IBP_LIBC_CHANGE IBP_LIBC_WRITE
#define IBP_LIBC_PUT(name, ret, params, args, announce, mem, fail)             \
  IBP_EXPORT ret(name) params;
#define IBP_LIBC_OPEN(name, params, args, path) IBP_EXPORT int(name) params;
#define IBP_LIBC_OPEN2 IBP_LIBC_OPEN
#include "track/libc_hooks.def"
#undef IBP_LIBC_WRITE
#undef IBP_LIBC_READ
#undef IBP_LIBC_CHANGE
#undef IBP_LIBC_PUT
#undef IBP_LIBC_OPEN
#undef IBP_LIBC_OPEN2

/* `real`: the C library's `name`, resolved once; NULL (errno ENOSYS) when
 * it cannot be found. */
#define REAL(name, ret, params)                                                \
  static void *_Atomic real_p;                                                 \
  ret(*const real) params = (ret(*) params)ibp__libc_once(&real_p, #name)

/* The kernel writes: announce inside the kwrite and compact windows. */
#define IBP_LIBC_WRITE(name, ret, params, args, announce, fail)                \
  ret(name) params {                                                           \
    REAL(name, ret, params);                                                   \
    if (!real)                                                                 \
      return fail;                                                             \
    const int kw = ibp__track_kwrite_begin();                                  \
    const int kc = ibp__compact_kaccess_begin();                               \
    if (kw || kc)                                                              \
      announce;                                                                \
    ret rc = real args;                                                        \
    ibp__compact_kaccess_end(kc);                                              \
    ibp__track_kwrite_end(kw);                                                 \
    return rc;                                                                 \
  }

/* The kernel reads: only compact memory needs telling. */
#define IBP_LIBC_READ(name, ret, params, args, announce, fail)                 \
  ret(name) params {                                                           \
    REAL(name, ret, params);                                                   \
    if (!real)                                                                 \
      return fail;                                                             \
    const int kc = ibp__compact_kaccess_begin();                               \
    if (kc)                                                                    \
      announce;                                                                \
    ret rc = real args;                                                        \
    ibp__compact_kaccess_end(kc);                                              \
    return rc;                                                                 \
  }

/* The application changes pages: announce while anything is tracked. */
#define IBP_LIBC_CHANGE(name, ret, params, args, announce, fail)               \
  ret(name) params {                                                           \
    REAL(name, ret, params);                                                   \
    if (!real)                                                                 \
      return fail;                                                             \
    const int watched = ibp__track_changes_watched();                          \
    int after = 0;                                                             \
    if (watched)                                                               \
      announce;                                                                \
    ret rc = real args;                                                        \
    if (watched) {                                                             \
      const int saved = errno;                                                 \
      after = 1;                                                               \
      announce;                                                                \
      errno = saved;                                                           \
    }                                                                          \
    return rc;                                                                 \
  }

/* The kernel reads the buffers, and writes the target when fd is one of
 * /proc/self/mem (inside the kwrite window `mem` opened). */
#define IBP_LIBC_PUT(name, ret, params, args, announce, mem, fail)             \
  ret(name) params {                                                           \
    REAL(name, ret, params);                                                   \
    if (!real)                                                                 \
      return fail;                                                             \
    const int kc = ibp__compact_kaccess_begin();                               \
    if (kc)                                                                    \
      announce;                                                                \
    const int km = mem;                                                        \
    ret rc = real args;                                                        \
    ibp__procmem_write_end(km);                                                \
    ibp__compact_kaccess_end(kc);                                              \
    return rc;                                                                 \
  }

/* A file opened: procmem.c remembers a descriptor of /proc/self/mem.  The
 * mode is read only where the flags say there is one. */
#define IBP_LIBC_OPEN(name, params, args, path)                                \
  int(name) params {                                                           \
    REAL(name, int, params);                                                   \
    mode_t mode = 0;                                                           \
    if (__OPEN_NEEDS_MODE(flags)) {                                            \
      va_list ap;                                                              \
      va_start(ap, flags);                                                     \
      mode = va_arg(ap, mode_t);                                               \
      va_end(ap);                                                              \
    }                                                                          \
    if (!real)                                                                 \
      return -1;                                                               \
    int fd = real args;                                                        \
    ibp__procmem_opened(fd, path);                                             \
    return fd;                                                                 \
  }

#define IBP_LIBC_OPEN2(name, params, args, path)                               \
  int(name) params {                                                           \
    REAL(name, int, params);                                                   \
    if (!real)                                                                 \
      return -1;                                                               \
    int fd = real args;                                                        \
    ibp__procmem_opened(fd, path);                                             \
    return fd;                                                                 \
  }

#include "track/libc_hooks.def"
#undef IBP_LIBC_WRITE
#undef IBP_LIBC_READ
#undef IBP_LIBC_CHANGE
#undef IBP_LIBC_PUT
#undef IBP_LIBC_OPEN
#undef IBP_LIBC_OPEN2
#undef REAL
