/* A fault injection for libibp's own memory (LD_PRELOAD'ed before it):
 * the first anonymous mmap(2) of exactly FAIL_MMAP_BYTES bytes fails with
 * ENOMEM -- a compact region's mapping (serve/compact.c), made before the
 * driver's own allocation of the same size -- and one line on stderr says
 * so, so that a test can tell the failure happened.  Every other call is
 * the C library's. */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  static _Atomic int failed;
  void *(*real)(void *, size_t, int, int, int, off_t) =
      (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
  const char *e = getenv("FAIL_MMAP_BYTES");
  if (e && (flags & MAP_ANONYMOUS) && len == strtoull(e, NULL, 0) &&
      !atomic_exchange(&failed, 1)) {
    static const char msg[] = "fail_mmap: one mmap failed\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) {
      /* nothing to do: the test then fails on the missing line */
    }
    errno = ENOMEM;
    return MAP_FAILED;
  }
  if (!real) {
    errno = ENOSYS;
    return MAP_FAILED;
  }
  return real(addr, len, prot, flags, fd, off);
}
