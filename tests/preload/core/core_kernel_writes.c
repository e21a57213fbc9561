/* Writes the kernel makes into a ready region on the program's behalf,
 * none of them through a C-library call libibp hooks: raw read and pread64
 * system calls, preadv2, getrandom, process_vm_readv/writev, a write to
 * /proc/self/mem, fstat, vmsplice from a pipe, msgrcv, a Linux AIO read,
 * an io_uring read;
 * then raw madvise(MADV_DONTNEED) and a raw mprotect read-only and back
 * followed by stores.  Each call must succeed as it does without libibp
 * (no EFAULT, no EIO), and every copy from the region afterwards must bring
 * the bytes the host holds.  Run under LD_PRELOAD=libibp.so with the
 * userfaultfd tracker (passes without libibp too; the mprotect tracker
 * cannot make these calls succeed: docs/ARCHITECTURE.md).
 *
 * CORE_QUIET_MS=n (with IBP_TRACK_QUIET below n): before each write the
 * program sleeps n ms, so the region has gone quiet and is held by
 * synchronous write-protect faults (docs/ARCHITECTURE.md, "Quiet
 * regions") -- where a write to /proc/self/mem cannot wait for a fault and
 * is served by the pwrite hook (track/hooks_libc.c). */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define N (4u << 20)
#define CHUNK (256u << 10)

static uint8_t *host, *dev;
static int failures;

#define CK(call)                                                               \
  do {                                                                         \
    if ((call) != cudaSuccess) {                                               \
      fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #call);        \
      return 2;                                                                \
    }                                                                          \
  } while (0)

/* A call that must succeed (as without libibp). */
#define OK(cond, what)                                                         \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s failed: %s\n", what, strerror(errno));               \
      failures++;                                                              \
    }                                                                          \
  } while (0)

/* Copies chunk k of the region to the device and back, and compares. */
static int check(unsigned k, const char *after) {
  static uint8_t back[CHUNK];
  CK(cudaMemcpy(dev, host + k * CHUNK, CHUNK, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(back, dev, CHUNK, cudaMemcpyDeviceToHost));
  if (memcmp(back, host + k * CHUNK, CHUNK) != 0) {
    fprintf(stderr, "after %s: stale bytes in chunk %u\n", after, k);
    failures++;
  }
  return 0;
}

static uint8_t *at(unsigned k, size_t off) {
  return host + k * CHUNK + off;
}

/* CORE_QUIET_MS: no write for that long, so the region goes quiet. */
static void settle(void) {
  const char *q = getenv("CORE_QUIET_MS");
  if (q && atoi(q) > 0)
    usleep((useconds_t)atoi(q) * 1000u);
}

static void aio_read(int fd, void *buf, size_t len) {
  aio_context_t ctx = 0;
  OK(syscall(SYS_io_setup, 1, &ctx) == 0, "io_setup");
  struct iocb cb;
  memset(&cb, 0, sizeof cb);
  cb.aio_fildes = (uint32_t)fd;
  cb.aio_lio_opcode = IOCB_CMD_PREAD;
  cb.aio_buf = (uint64_t)(uintptr_t)buf;
  cb.aio_nbytes = len;
  struct iocb *list[1] = {&cb};
  struct io_event ev;
  OK(syscall(SYS_io_submit, ctx, 1, list) == 1, "io_submit");
  OK(syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL) == 1 &&
         ev.res == (int64_t)len,
     "io_getevents");
  syscall(SYS_io_destroy, ctx);
}

/* One IORING_OP_READ of len bytes of fd into buf, by raw system calls;
 * 0 when io_uring is not allowed here (seccomp, sysctl): skipped. */
static int uring_read(int fd, void *buf, unsigned len) {
  struct io_uring_params par;
  memset(&par, 0, sizeof par);
  int ring = (int)syscall(SYS_io_uring_setup, 4, &par);
  if (ring < 0)
    return 0;
  size_t sq_len = par.sq_off.array + par.sq_entries * sizeof(unsigned);
  size_t cq_len =
      par.cq_off.cqes + par.cq_entries * sizeof(struct io_uring_cqe);
  uint8_t *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED, ring,
                     IORING_OFF_SQ_RING);
  uint8_t *cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED, ring,
                     IORING_OFF_CQ_RING);
  struct io_uring_sqe *sqes =
      mmap(NULL, par.sq_entries * sizeof *sqes, PROT_READ | PROT_WRITE,
           MAP_SHARED, ring, IORING_OFF_SQES);
  int ok = sq != MAP_FAILED && cq != MAP_FAILED && sqes != MAP_FAILED;
  if (ok) {
    unsigned tail = *(unsigned *)(sq + par.sq_off.tail);
    unsigned idx = tail & *(unsigned *)(sq + par.sq_off.ring_mask);
    memset(&sqes[idx], 0, sizeof sqes[idx]);
    sqes[idx].opcode = IORING_OP_READ;
    sqes[idx].fd = fd;
    sqes[idx].addr = (uint64_t)(uintptr_t)buf;
    sqes[idx].len = len;
    ((unsigned *)(sq + par.sq_off.array))[idx] = idx;
    __atomic_store_n((unsigned *)(sq + par.sq_off.tail), tail + 1,
                     __ATOMIC_RELEASE);
    OK(syscall(SYS_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL,
               0) == 1,
       "io_uring_enter");
    unsigned head =
        __atomic_load_n((unsigned *)(cq + par.cq_off.head), __ATOMIC_ACQUIRE);
    struct io_uring_cqe *cqe =
        (struct io_uring_cqe *)(cq + par.cq_off.cqes) +
        (head & *(unsigned *)(cq + par.cq_off.ring_mask));
    OK(cqe->res == (int)len, "io_uring read");
  }
  close(ring);
  return ok;
}

int main(void) {
  CK(cudaHostAlloc((void **)&host, N, cudaHostAllocMapped));
  CK(cudaMalloc((void **)&dev, CHUNK));
  for (size_t i = 0; i < N; i++)
    host[i] = (uint8_t)(i % 97 < 80 ? 0x3c : i * 13);
  for (unsigned k = 0; k < N / CHUNK; k++) /* ready, served, checked */
    if (check(k, "nothing"))
      return 2;

  char file[] = "/tmp/core_kernel_writes.XXXXXX";
  int f = mkstemp(file);
  OK(f >= 0, "mkstemp");
  uint8_t data[8192];
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = (uint8_t)(i * 7 + 1);
  OK(write(f, data, sizeof data) == (ssize_t)sizeof data, "write");
  int p[2];
  OK(pipe(p) == 0, "pipe");

  settle();
  OK(write(p[1], data, 100) == 100 &&
         syscall(SYS_read, p[0], at(0, 5), 100) == 100,
     "raw read");
  check(0, "a raw read(2)");
  settle();
  OK(syscall(SYS_pread64, f, at(1, 4000), 5000, 0) == 5000, "raw pread64");
  check(1, "a raw pread64(2)");
  settle();
  struct iovec iov = {at(2, 10), 3000};
  OK(preadv2(f, &iov, 1, 100, 0) == 3000, "preadv2");
  check(2, "preadv2");
  settle();
  OK(getrandom(at(3, 0), 4096, 0) == 4096, "getrandom");
  check(3, "getrandom");
  settle();
  struct iovec local = {data, 6000}, remote = {at(4, 1), 6000};
  OK(process_vm_writev(getpid(), &local, 1, &remote, 1, 0) == 6000,
     "process_vm_writev");
  check(4, "process_vm_writev");
  settle();
  struct iovec into = {at(5, 2), 6000}, from = {data + 100, 6000};
  OK(process_vm_readv(getpid(), &into, 1, &from, 1, 0) == 6000,
     "process_vm_readv");
  check(5, "process_vm_readv");
  /* CORE_NO_PROC_MEM=1: not on a compact region, whose pages the kernel
   * cannot fault in for another address space's access (docs/CONFIG.md) */
  settle();
  if (!getenv("CORE_NO_PROC_MEM")) {
    int mem = open("/proc/self/mem", O_RDWR);
    OK(mem >= 0 && pwrite(mem, data, 700, (off_t)(uintptr_t)at(6, 9)) == 700,
       "write to /proc/self/mem");
    if (mem >= 0)
      close(mem);
    check(6, "a write to /proc/self/mem");
  }
  settle();
  OK(fstat(f, (struct stat *)at(7, 16)) == 0, "fstat");
  check(7, "fstat");
  settle();
  struct iovec vs = {at(8, 3), 50};
  OK(write(p[1], data, 50) == 50 && vmsplice(p[0], &vs, 1, 0) == 50,
     "vmsplice");
  check(8, "vmsplice");
  settle();
  int q = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
  if (q >= 0) { /* System V IPC may be absent in a container: skipped */
    struct {
      long type;
      char text[64];
    } msg = {1, "into the region"};
    OK(msgsnd(q, &msg, sizeof msg.text, 0) == 0 &&
           msgrcv(q, at(9, 8), sizeof msg.text, 0, 0) ==
               (ssize_t)sizeof msg.text,
       "msgrcv");
    msgctl(q, IPC_RMID, NULL);
    check(9, "msgrcv");
  }
  settle();
  aio_read(f, at(10, 0), 4096);
  check(10, "a Linux AIO read");

  settle();
  if (uring_read(f, at(13, 20), 4096))
    check(13, "an io_uring read");

  settle();
  OK(syscall(SYS_madvise, at(11, 0), 2 * 4096, MADV_DONTNEED) == 0,
     "raw madvise");
  check(11, "a raw madvise(MADV_DONTNEED)");
  settle();
  OK(syscall(SYS_mprotect, at(12, 0), 8192, PROT_READ) == 0 &&
         syscall(SYS_mprotect, at(12, 0), 8192, PROT_READ | PROT_WRITE) == 0,
     "raw mprotect");
  memset(at(12, 100), 0x77, 5000);
  check(12, "a raw mprotect and stores");

  close(p[0]);
  close(p[1]);
  close(f);
  unlink(file);
  for (unsigned k = 0; k < N / CHUNK; k++)
    check(k, "everything");
  if (failures) {
    fprintf(stderr, "core_kernel_writes: %d failures\n", failures);
    return 1;
  }
  printf("core_kernel_writes: ok\n");
  return 0;
}
