/*
 * Writes through /proc/self/mem (docs/ARCHITECTURE.md, "Quiet regions"):
 * a pwrite to such a descriptor is a kernel-side write into the process's
 * own memory at the file offset, made by the kernel's access_remote_vm,
 * which cannot wait for a userfaultfd -- into a quiet region held by
 * synchronous faults it would fail with EIO -- and which ignores page
 * protection on private memory -- under the mprotect tracker it would go
 * unseen.  So the write hooks (hooks_libc.c, the IBP_LIBC_PUT rows of
 * libc_hooks.def) announce the target range as a write before the real
 * call, as the read hooks announce their buffers.
 *
 * Which descriptors: those the open hooks (IBP_LIBC_OPEN rows) saw opened
 * on a path whose last component is "mem" in procfs (/proc/self/mem,
 * /proc/<pid>/mem, /proc/thread-self/mem ...), remembered per descriptor
 * with the file's device and inode.  A write checks the descriptor's bit
 * (one relaxed load), and only where it is set compares fstat with what
 * was remembered -- so a descriptor closed and reused since (no close
 * hook) is not taken for one.  Another process's mem file counts too: its
 * offsets announced here cost at most some tensors marked dirty.
 *
 * Not seen (docs/ARCHITECTURE.md): descriptors above PROCMEM_FDS, ones
 * opened by raw system call, by fopen or inherited, duplicates (dup,
 * fcntl), writes by raw system call or through stdio, and ptrace.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "track/track.h"
#include "track/track_private.h"

#define PROCMEM_FDS 4096
#define PROC_MAGIC 0x9fa0 /* PROC_SUPER_MAGIC */

static _Atomic uint64_t marked[PROCMEM_FDS / 64];
static struct { _Atomic uint64_t dev, ino; } ids[PROCMEM_FDS];

static int named_mem(const char *path) {
  size_t n = path ? strlen(path) : 0;
  return n >= 3 && !strcmp(path + n - 3, "mem") &&
         (n == 3 || path[n - 4] == '/');
}

void ibp__procmem_opened(int fd, const char *path) {
  if (fd < 0 || fd >= PROCMEM_FDS)
    return;
  const uint64_t bit = 1ull << (fd % 64);
  struct statfs fs;
  struct stat st;
  int saved = errno;
  if (named_mem(path) && fstatfs(fd, &fs) == 0 && fs.f_type == PROC_MAGIC &&
      fstat(fd, &st) == 0) {
    atomic_store(&ids[fd].dev, (uint64_t)st.st_dev);
    atomic_store(&ids[fd].ino, (uint64_t)st.st_ino);
    atomic_fetch_or(&marked[fd / 64], bit);
  } else if (atomic_load_explicit(&marked[fd / 64], memory_order_relaxed) &
             bit) {
    atomic_fetch_and(&marked[fd / 64], ~bit); /* reused */
  }
  errno = saved;
}

int ibp__procmem_fd(int fd) {
  if (fd < 0 || fd >= PROCMEM_FDS ||
      !(atomic_load_explicit(&marked[fd / 64], memory_order_relaxed) >>
            (fd % 64) &
        1))
    return 0;
  struct stat st;
  int saved = errno;
  int same = fstat(fd, &st) == 0 &&
             (uint64_t)st.st_dev == atomic_load(&ids[fd].dev) &&
             (uint64_t)st.st_ino == atomic_load(&ids[fd].ino);
  errno = saved;
  return same;
}

/* What write_begin returns: which windows it opened. */
enum { BEGAN_QUIET = 1, BEGAN_PROT = 2 };

int ibp__procmem_write_begin(int fd, long long off, size_t len) {
  /* the mprotect tracker's window; the quiet one's always (a region that
   * may move could be added, and go faulting, during a long write) */
  const int prot = ibp__track_kwrite_begin();
  int saved = errno;
  if (off < 0) /* write(2): at the descriptor's position */
    off = (long long)lseek(fd, 0, SEEK_CUR);
  errno = saved;
  if (off < 0) {
    ibp__track_kwrite_end(prot);
    return 0; /* the real call will fail the same way */
  }
  if (prot)
    ibp__track_before_write((const void *)(uintptr_t)off, len);
  ibp__quiet_kwrite_begin((uintptr_t)off, len);
  return BEGAN_QUIET | (prot ? BEGAN_PROT : 0);
}

void ibp__procmem_write_end(int began) {
  if (!began)
    return;
  ibp__quiet_kwrite_end();
  ibp__track_kwrite_end(!!(began & BEGAN_PROT));
}
