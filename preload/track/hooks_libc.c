/*
 * C-library calls that write into caller memory from the kernel side
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

static void announce_buf(const void *buf, size_t n) {
  ibp__track_before_write(buf, n);
}

static void before_iov(const struct iovec *iov, size_t n) {
  if (n > IOV_MAX)
    return; /* the call fails with EINVAL/EMSGSIZE, writing nothing */
  for (size_t i = 0; i < n; i++)
    ibp__track_before_write(iov[i].iov_base, iov[i].iov_len);
}

static void announce_iov(const struct iovec *iov, int cnt) {
  if (cnt > 0)
    before_iov(iov, (size_t)cnt);
}

/* The source address is announced at its largest size: reading *alen here
 * could fault where the real call returns EFAULT. */
static void announce_from(const void *buf, size_t n,
                          const struct sockaddr *addr, const socklen_t *alen) {
  ibp__track_before_write(buf, n);
  if (addr && alen) {
    ibp__track_before_write(addr, sizeof(struct sockaddr_storage));
    ibp__track_before_write(alen, sizeof *alen);
  }
}

/* The kernel writes the iovecs, the name and control buffers, and the
 * lengths and flags in the msghdr itself. */
static void announce_msg(const struct msghdr *msg) {
  if (!msg)
    return;
  ibp__track_before_write(msg, sizeof *msg);
  ibp__track_before_write(msg->msg_name, msg->msg_namelen);
  ibp__track_before_write(msg->msg_control, msg->msg_controllen);
  before_iov(msg->msg_iov, msg->msg_iovlen);
}

static void announce_mmsg(const struct mmsghdr *v, unsigned int n) {
  if (!v)
    return;
  ibp__track_before_write(v, (size_t)n * sizeof *v);
  for (unsigned i = 0; i < n && i < IOV_MAX; i++) {
    const struct msghdr *m = &v[i].msg_hdr;
    ibp__track_before_write(m->msg_name, m->msg_namelen);
    ibp__track_before_write(m->msg_control, m->msg_controllen);
    before_iov(m->msg_iov, m->msg_iovlen);
  }
}

/* size*n bytes; an overflowing product announces everything above ptr. */
static void announce_fread(const void *ptr, size_t size, size_t n) {
  size_t bytes;
  if (__builtin_mul_overflow(size, n, &bytes))
    bytes = SIZE_MAX;
  ibp__track_before_write(ptr, bytes);
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
#define IBP_LIBC_CHANGE IBP_LIBC_WRITE
#include "track/libc_hooks.def"
#undef IBP_LIBC_WRITE
#undef IBP_LIBC_CHANGE

/* `real`: the C library's `name`, resolved once; NULL (errno ENOSYS) when
 * it cannot be found. */
#define REAL(name, ret, params)                                                \
  static void *_Atomic real_p;                                                 \
  ret(*const real) params = (ret(*) params)ibp__libc_once(&real_p, #name)

/* The kernel writes: announce inside the kwrite window. */
#define IBP_LIBC_WRITE(name, ret, params, args, announce, fail)                \
  ret(name) params {                                                           \
    REAL(name, ret, params);                                                   \
    if (!real)                                                                 \
      return fail;                                                             \
    const int kw = ibp__track_kwrite_begin();                                  \
    if (kw)                                                                    \
      announce;                                                                \
    ret rc = real args;                                                        \
    ibp__track_kwrite_end(kw);                                                 \
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
#undef IBP_LIBC_CHANGE
#undef REAL
