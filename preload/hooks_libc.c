/*
 * C-library calls that write into caller memory from the kernel side
 * (DESIGN.md section 3).  The kernel does not fault on a read-only page the
 * way a CPU store does: read(2) into a tracked page fails with EFAULT.  So
 * each hook announces the buffers it is about to fill to the tracker
 * (ibp__track_before_write: tensors marked dirty, pages made writable) and
 * then calls the real function with the same arguments, returning its
 * result and errno untouched.  From the announcement until the call returns
 * (ibp__track_kwrite_begin/end) no recompression may protect pages again
 * (preload/refresh.c), or the call would fail with EFAULT halfway.
 *
 * Cost when nothing is tracked: one relaxed load (ibp__track_any); user
 * memory (iovecs, msghdr) is only read when something is tracked.  fread
 * is hooked because glibc reads large requests straight into the caller's
 * buffer with its internal read; small ones go through the FILE buffer and
 * memcpy, which faults and is handled like any CPU store.
 *
 * The _FORTIFY_SOURCE entry points (__read_chk ...) and fread_unlocked are
 * defined too; they take effect only when listed in libibp.map.
 */
/* Fortified headers turn read() & co. into inline wrappers that cannot be
 * redefined; the hooks need the plain declarations. */
#undef _FORTIFY_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"
#include "track_private.h"

/* The real function `name`, resolved once (a race resolves it twice, to
 * the same pointer).  On failure the hook fails with ENOSYS. */
#define REAL(type, name)                                                       \
  static void *_Atomic real_p;                                                 \
  type real = (type)resolve(&real_p, name)

static void *resolve(void *_Atomic *slot, const char *name) {
  void *f = atomic_load_explicit(slot, memory_order_acquire);
  if (f)
    return f;
  int saved = errno; /* the first lookup must not show in errno either */
  f = ibp__libc(name);
  atomic_store_explicit(slot, f, memory_order_release);
  errno = f ? saved : ENOSYS;
  return f;
}

static void before_iov(const struct iovec *iov, size_t n) {
  if (n > IOV_MAX)
    return; /* the call fails with EINVAL/EMSGSIZE, writing nothing */
  for (size_t i = 0; i < n; i++)
    ibp__track_before_write(iov[i].iov_base, iov[i].iov_len);
}

typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef ssize_t (*pread64_fn)(int, void *, size_t, off64_t);
typedef ssize_t (*readv_fn)(int, const struct iovec *, int);
typedef ssize_t (*preadv_fn)(int, const struct iovec *, int, off_t);
typedef ssize_t (*preadv64_fn)(int, const struct iovec *, int, off64_t);
typedef ssize_t (*recv_fn)(int, void *, size_t, int);
typedef ssize_t (*recvfrom_fn)(int, void *, size_t, int, struct sockaddr *,
                               socklen_t *);
typedef ssize_t (*recvmsg_fn)(int, struct msghdr *, int);
typedef size_t (*fread_fn)(void *, size_t, size_t, FILE *);

IBP_EXPORT ssize_t read(int fd, void *buf, size_t n) {
  REAL(read_fn, "read");
  if (!real)
    return -1;
  const int kw = ibp__track_kwrite_begin();
  if (kw)
    ibp__track_before_write(buf, n);
  ssize_t rc = real(fd, buf, n);
  ibp__track_kwrite_end(kw);
  return rc;
}

IBP_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off) {
  REAL(pread_fn, "pread");
  if (!real)
    return -1;
  const int kw = ibp__track_kwrite_begin();
  if (kw)
    ibp__track_before_write(buf, n);
  ssize_t rc = real(fd, buf, n, off);
  ibp__track_kwrite_end(kw);
  return rc;
}

IBP_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off64_t off) {
  REAL(pread64_fn, "pread64");
  if (!real)
    return -1;
  const int kw = ibp__track_kwrite_begin();
  if (kw)
    ibp__track_before_write(buf, n);
  ssize_t rc = real(fd, buf, n, off);
  ibp__track_kwrite_end(kw);
  return rc;
}

IBP_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt) {
  REAL(readv_fn, "readv");
  if (!real)
    return -1;
  const int kw = ibp__track_kwrite_begin();
  if (kw && cnt > 0)
    before_iov(iov, (size_t)cnt);
  ssize_t rc = real(fd, iov, cnt);
  ibp__track_kwrite_end(kw);
  return rc;
}

IBP_EXPORT ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off) {
  REAL(preadv_fn, "preadv");
  if (!real)
    return -1;
  const int kw = ibp__track_kwrite_begin();
  if (kw && cnt > 0)
    before_iov(iov, (size_t)cnt);
  ssize_t rc = real(fd, iov, cnt, off);
  ibp__track_kwrite_end(kw);
  return rc;
}

IBP_EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int cnt,
                            off64_t off) {
  REAL(preadv64_fn, "preadv64");
  if (!real)
    return -1;
  const int kw = ibp__track_kwrite_begin();
  if (kw && cnt > 0)
    before_iov(iov, (size_t)cnt);
  ssize_t rc = real(fd, iov, cnt, off);
  ibp__track_kwrite_end(kw);
  return rc;
}

IBP_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags) {
  REAL(recv_fn, "recv");
  if (!real)
    return -1;
  const int kw = ibp__track_kwrite_begin();
  if (kw)
    ibp__track_before_write(buf, n);
  ssize_t rc = real(fd, buf, n, flags);
  ibp__track_kwrite_end(kw);
  return rc;
}

/* The source address is announced at its largest size: reading *addrlen
 * here could fault where the real call returns EFAULT. */
IBP_EXPORT ssize_t recvfrom(int fd, void *restrict buf, size_t n, int flags,
                            __SOCKADDR_ARG addr, socklen_t *restrict alen) {
  REAL(recvfrom_fn, "recvfrom");
  if (!real)
    return -1;
  const int kw = ibp__track_kwrite_begin();
  if (kw) {
    ibp__track_before_write(buf, n);
    if (addr.__sockaddr__ && alen) {
      ibp__track_before_write(addr.__sockaddr__,
                              sizeof(struct sockaddr_storage));
      ibp__track_before_write(alen, sizeof *alen);
    }
  }
  ssize_t rc = real(fd, buf, n, flags, addr.__sockaddr__, alen);
  ibp__track_kwrite_end(kw);
  return rc;
}

/* The kernel writes the iovecs, the name and control buffers, and the
 * lengths and flags in the msghdr itself. */
IBP_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags) {
  REAL(recvmsg_fn, "recvmsg");
  if (!real)
    return -1;
  const int kw = ibp__track_kwrite_begin();
  if (kw && msg) {
    ibp__track_before_write(msg, sizeof *msg);
    ibp__track_before_write(msg->msg_name, msg->msg_namelen);
    ibp__track_before_write(msg->msg_control, msg->msg_controllen);
    before_iov(msg->msg_iov, msg->msg_iovlen);
  }
  ssize_t rc = real(fd, msg, flags);
  ibp__track_kwrite_end(kw);
  return rc;
}

/* size*n bytes; an overflowing product announces everything above ptr. */
static void before_fread(void *ptr, size_t size, size_t n) {
  size_t bytes;
  if (__builtin_mul_overflow(size, n, &bytes))
    bytes = SIZE_MAX;
  ibp__track_before_write(ptr, bytes);
}

IBP_EXPORT size_t fread(void *restrict ptr, size_t size, size_t n,
                        FILE *restrict fp) {
  REAL(fread_fn, "fread");
  if (!real)
    return 0;
  const int kw = ibp__track_kwrite_begin();
  if (kw)
    before_fread(ptr, size, n);
  size_t rc = real(ptr, size, n, fp);
  ibp__track_kwrite_end(kw);
  return rc;
}

/* Parenthesized: glibc defines a fread_unlocked macro when optimizing. */
IBP_EXPORT size_t(fread_unlocked)(void *restrict ptr, size_t size, size_t n,
                                  FILE *restrict fp) {
  REAL(fread_fn, "fread_unlocked");
  if (!real)
    return 0;
  const int kw = ibp__track_kwrite_begin();
  if (kw)
    before_fread(ptr, size, n);
  size_t rc = real(ptr, size, n, fp);
  ibp__track_kwrite_end(kw);
  return rc;
}

/* ---- _FORTIFY_SOURCE variants (no prototypes without fortify) ------------ */

typedef ssize_t (*read_chk_fn)(int, void *, size_t, size_t);
typedef ssize_t (*pread_chk_fn)(int, void *, size_t, off64_t, size_t);
typedef ssize_t (*recv_chk_fn)(int, void *, size_t, size_t, int);
typedef ssize_t (*recvfrom_chk_fn)(int, void *, size_t, size_t, int,
                                   struct sockaddr *, socklen_t *);
typedef size_t (*fread_chk_fn)(void *, size_t, size_t, size_t, FILE *);

IBP_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
IBP_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off,
                               size_t buflen);
IBP_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off,
                                 size_t buflen);
IBP_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen,
                              int flags);
IBP_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen,
                                  int flags, struct sockaddr *addr,
                                  socklen_t *alen);
IBP_EXPORT size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n,
                              FILE *fp);
IBP_EXPORT size_t __fread_unlocked_chk(void *ptr, size_t ptrlen, size_t size,
                                       size_t n, FILE *fp);

/* Only n <= buflen bytes are written; a larger n aborts in the real one. */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen) {
  REAL(read_chk_fn, "__read_chk");
  if (!real)
    return -1;
  const int kw = ibp__track_kwrite_begin();
  if (kw)
    ibp__track_before_write(buf, n);
  ssize_t rc = real(fd, buf, n, buflen);
  ibp__track_kwrite_end(kw);
  return rc;
}

ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen) {
  REAL(pread_chk_fn, "__pread_chk");
  if (!real)
    return -1;
  const int kw = ibp__track_kwrite_begin();
  if (kw)
    ibp__track_before_write(buf, n);
  ssize_t rc = real(fd, buf, n, off, buflen);
  ibp__track_kwrite_end(kw);
  return rc;
}

ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen) {
  REAL(pread_chk_fn, "__pread64_chk");
  if (!real)
    return -1;
  const int kw = ibp__track_kwrite_begin();
  if (kw)
    ibp__track_before_write(buf, n);
  ssize_t rc = real(fd, buf, n, off, buflen);
  ibp__track_kwrite_end(kw);
  return rc;
}

ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags) {
  REAL(recv_chk_fn, "__recv_chk");
  if (!real)
    return -1;
  const int kw = ibp__track_kwrite_begin();
  if (kw)
    ibp__track_before_write(buf, n);
  ssize_t rc = real(fd, buf, n, buflen, flags);
  ibp__track_kwrite_end(kw);
  return rc;
}

ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
                       struct sockaddr *addr, socklen_t *alen) {
  REAL(recvfrom_chk_fn, "__recvfrom_chk");
  if (!real)
    return -1;
  const int kw = ibp__track_kwrite_begin();
  if (kw) {
    ibp__track_before_write(buf, n);
    if (addr && alen) {
      ibp__track_before_write(addr, sizeof(struct sockaddr_storage));
      ibp__track_before_write(alen, sizeof *alen);
    }
  }
  ssize_t rc = real(fd, buf, n, buflen, flags, addr, alen);
  ibp__track_kwrite_end(kw);
  return rc;
}

size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp) {
  REAL(fread_chk_fn, "__fread_chk");
  if (!real)
    return 0;
  const int kw = ibp__track_kwrite_begin();
  if (kw)
    before_fread(ptr, size, n);
  size_t rc = real(ptr, ptrlen, size, n, fp);
  ibp__track_kwrite_end(kw);
  return rc;
}

size_t __fread_unlocked_chk(void *ptr, size_t ptrlen, size_t size, size_t n,
                            FILE *fp) {
  REAL(fread_chk_fn, "__fread_unlocked_chk");
  if (!real)
    return 0;
  const int kw = ibp__track_kwrite_begin();
  if (kw)
    before_fread(ptr, size, n);
  size_t rc = real(ptr, ptrlen, size, n, fp);
  ibp__track_kwrite_end(kw);
  return rc;
}

/* ---- recvmmsg, and calls that change a tracked page without a store ----- */

typedef int (*recvmmsg_fn)(int, struct mmsghdr *, unsigned int, int,
                           struct timespec *);
typedef int (*mprotect_fn)(void *, size_t, int);
typedef int (*madvise_fn)(void *, size_t, int);

IBP_EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags,
                        struct timespec *timeout) {
  REAL(recvmmsg_fn, "recvmmsg");
  if (!real)
    return -1;
  const int kw = ibp__track_kwrite_begin();
  if (kw && v) {
    ibp__track_before_write(v, (size_t)n * sizeof *v);
    for (unsigned i = 0; i < n && i < IOV_MAX; i++) {
      struct msghdr *m = &v[i].msg_hdr;
      ibp__track_before_write(m->msg_name, m->msg_namelen);
      ibp__track_before_write(m->msg_control, m->msg_controllen);
      before_iov(m->msg_iov, m->msg_iovlen);
    }
  }
  int rc = real(fd, v, n, flags, timeout);
  ibp__track_kwrite_end(kw);
  return rc;
}

/* The application changing the protection of tracked pages takes them out
 * of tracking first (their tensors dirty): whatever it sets then holds, and
 * a later write cannot go unseen. */
IBP_EXPORT int mprotect(void *addr, size_t len, int prot) {
  REAL(mprotect_fn, "mprotect");
  if (!real)
    return -1;
  if (ibp__track_any())
    ibp__track_app_protect(addr, len);
  return real(addr, len, prot);
}

/* Advice that discards or replaces page contents is a write. */
IBP_EXPORT int madvise(void *addr, size_t len, int advice) {
  REAL(madvise_fn, "madvise");
  if (!real)
    return -1;
  if (ibp__track_any() && advice != MADV_NORMAL && advice != MADV_RANDOM &&
      advice != MADV_SEQUENTIAL && advice != MADV_WILLNEED &&
      advice != MADV_DONTFORK && advice != MADV_DOFORK &&
      advice != MADV_HUGEPAGE && advice != MADV_NOHUGEPAGE &&
      advice != MADV_DONTDUMP && advice != MADV_DODUMP)
    ibp__track_before_write(addr, len);
  return real(addr, len, advice);
}
