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
#include <limits.h>
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

/* The application changing the protection of tracked pages takes them out
 * of tracking first (their tensors dirty): whatever it sets then holds, and
 * a later write cannot go unseen. */
static void announce_protect(const void *addr, size_t len) {
  ibp__track_app_protect(addr, len);
}

/* Advice that discards or replaces page contents is a write. */
static void announce_advice(const void *addr, size_t len, int advice) {
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
#include "track/libc_hooks.def"
#undef IBP_LIBC_WRITE
#undef IBP_LIBC_READ
#undef IBP_LIBC_CHANGE

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
    if (ibp__track_any())                                                      \
      announce;                                                                \
    return real args;                                                          \
  }

#include "track/libc_hooks.def"
#undef IBP_LIBC_WRITE
#undef IBP_LIBC_READ
#undef IBP_LIBC_CHANGE
#undef REAL
