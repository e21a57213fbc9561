/*
 * e2e_quiet: a region gone quiet (docs/ARCHITECTURE.md, "Quiet regions":
 * no write found for IBP_TRACK_QUIET ms, held by synchronous write-protect
 * faults) is served with no tracking system call on the copying thread,
 * and every write into it still reaches the device: CPU stores, read(2),
 * a raw read system call, a device-to-host cudaMemcpy into it, a pwrite
 * to /proc/self/mem, and pages dropped by madvise: MADV_REMOVE (zeros
 * from then on: the region is shared memory) and MADV_DONTNEED (which
 * keeps a shared page's bytes: e2e_stale_hard_writes drops private ones).
 * MADV_REMOVE only by the C library's call: a shared page dropped keeps
 * its write protection as a marker, so PAGEMAP_SCAN finds it unwritten, and
 * the scanning tracker sees the drop only as the call returns; a raw
 * system call is not seen (docs/ARCHITECTURE.md, "Quiet regions").
 *
 *   e2e_quiet            run with IBP_TRACK_QUIET well below QUIET_SLEEP_MS
 *   e2e_quiet --scanning run with IBP_TRACK_QUIET=0: the control, where
 *                        every copy must scan (so the counting below works)
 *   e2e_quiet --default  run with no IBP_TRACK_QUIET nor IBP_TRACKER: the
 *                        defaults, with a second without a write before
 *                        each step
 *
 * Before each write the program sleeps QUIET_SLEEP_MS (the region goes
 * quiet), copies a part of the region untouched since (a probe), then
 * writes, then copies the written range and its tensors: all checked
 * byte for byte (e2e_batch_verify), and the copies made on this thread
 * counted by PAGEMAP_SCAN calls -- this program defines ioctl, which
 * libibp's calls reach (the executable's symbols come first), and counts
 * those per thread.  Quiet: no probe and no check copy may scan;
 * scanning: every one must.  check_quiet.cmake then reads the report:
 * mode "faulting" reached (mode_switches), sync_faults counted.
 *
 * Skips (77) where no userfaultfd serving kernel-mode faults or no
 * PAGEMAP_SCAN exists: regions keep scanning there.
 */
#include "e2e_util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define QUIET_SLEEP_MS 250
#define PAGE 4096

static e2e_region regions[] = {
    {.name = "quiet",
     .size = (size_t)4 << 20,
     .tensor = 4096,
     .alloc = E2E_HOST_ALLOC,
     .data = E2E_F32},
};

/* ---- PAGEMAP_SCAN calls of this thread ----------------------------------- */

static __thread unsigned long scans;

int ioctl(int fd, unsigned long req, ...) {
  va_list ap;
  va_start(ap, req);
  void *arg = va_arg(ap, void *);
  va_end(ap);
  if (_IOC_TYPE(req) == 'f' && _IOC_NR(req) == 16) /* PAGEMAP_SCAN */
    scans++;
  return (int)syscall(SYS_ioctl, fd, req, arg);
}

/* A userfaultfd serving kernel-mode faults, and PAGEMAP_SCAN. */
static int quiet_possible(void) {
  int u = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
  if (u < 0)
    return 0;
  close(u);
  int pm = open("/proc/self/pagemap", O_RDONLY);
  if (pm < 0)
    return 0;
  unsigned long long a[12] = {sizeof a}; /* size, then an empty range */
  int ok =
      syscall(SYS_ioctl, pm, _IOWR('f', 16, unsigned long long[12]), a) >= 0 ||
      errno != ENOTTY;
  close(pm);
  return ok;
}

/* ---- the steps ----------------------------------------------------------- */

static e2e_region *R;
static e2e_batch batch;
static int scanning_run;
static unsigned char *dev;

static int default_run;

static void settle(void) {
  usleep(default_run ? 1000000 : QUIET_SLEEP_MS * 1000);
}

/* Copies [off, off+len) of the region and checks the bytes; `what` may
 * make tracking system calls only in the scanning run. */
static void copy_checked(const char *what, size_t off, size_t len) {
  batch.label = what;
  unsigned long before = scans;
  e2e_batch_copy(&batch, R, off, len, E2E_SYNC_H2D, 0);
  unsigned long made = scans - before;
  e2e_batch_verify(&batch, NULL, 0);
  if (scanning_run ? made == 0 : made != 0)
    e2e_fail("%s: the copy made %lu PAGEMAP_SCAN calls (want %s)", what, made,
             scanning_run ? "some" : "none");
}

/* Quiet, a probe copy, then `write` at [off, off+len), then the copies. */
static void step(const char *what, size_t off, size_t len,
                 void (*write)(size_t off, size_t len)) {
  settle();
  copy_checked("probe", (off + R->size / 2) % (R->size - PAGE), PAGE);
  write(off, len);
  memcpy(R->mirror + off, R->host + off, len); /* what it wrote */
  size_t lo = off / R->tensor * R->tensor;
  size_t hi = (off + len + R->tensor - 1) / R->tensor * R->tensor;
  copy_checked(what, off, len);
  copy_checked(what, lo, hi - lo);
}

static void by_stores(size_t off, size_t len) {
  for (size_t i = 0; i < len; i++)
    R->host[off + i] = (unsigned char)(R->host[off + i] * 7 + 1);
}

static void from_file(size_t off, size_t len, int raw) {
  char path[] = "/tmp/e2e_quiet.XXXXXX";
  int f = mkstemp(path);
  E2E_SYS(f >= 0);
  unlink(path);
  unsigned char *b = malloc(len);
  E2E_SYS(b != NULL);
  for (size_t i = 0; i < len; i++)
    b[i] = (unsigned char)(i * 31 + 5);
  E2E_SYS(write(f, b, len) == (ssize_t)len && lseek(f, 0, SEEK_SET) == 0);
  ssize_t got = raw ? syscall(SYS_read, f, R->host + off, len)
                    : read(f, R->host + off, len);
  if (got != (ssize_t)len)
    e2e_fail("%s into the quiet region: %zd (%s)", raw ? "raw read" : "read",
             got, strerror(errno));
  close(f);
  free(b);
}

static void by_read(size_t off, size_t len) {
  from_file(off, len, 0);
}
static void by_raw_read(size_t off, size_t len) {
  from_file(off, len, 1);
}

static void by_dtoh(size_t off, size_t len) {
  E2E_CK(cudaMemset(dev, 0x5a, len));
  E2E_CK(cudaMemcpy(R->host + off, dev, len, cudaMemcpyDeviceToHost));
}

static void by_proc_mem(size_t off, size_t len) {
  unsigned char *b = malloc(len);
  E2E_SYS(b != NULL);
  for (size_t i = 0; i < len; i++)
    b[i] = (unsigned char)(i * 13 + 3);
  int mem = open("/proc/self/mem", O_RDWR);
  E2E_SYS(mem >= 0);
  ssize_t put = pwrite(mem, b, len, (off_t)(uintptr_t)(R->host + off));
  if (put != (ssize_t)len)
    e2e_fail("pwrite to /proc/self/mem into the quiet region: %zd (%s)", put,
             strerror(errno));
  close(mem);
  free(b);
}

/* Whole pages of [off, off+len) dropped by madvise(advice); MADV_REMOVE
 * frees their memory: they read as zeros after. */
static void dropped(size_t off, size_t len, int advice) {
  unsigned char *a = R->host + off;
  if (madvise(a, len, advice) != 0)
    e2e_fail("madvise(%d) of the quiet region: %s", advice, strerror(errno));
  for (size_t i = 0; advice == MADV_REMOVE && i < len; i++)
    if (a[i])
      e2e_fail("madvise(MADV_REMOVE): byte %zu not zero", off + i);
}

static void by_remove(size_t off, size_t len) {
  dropped(off, len, MADV_REMOVE);
}
static void by_dontneed(size_t off, size_t len) {
  dropped(off, len, MADV_DONTNEED);
}

int main(int argc, char **argv) {
  e2e_begin("e2e_quiet");
  scanning_run = argc > 1 && !strcmp(argv[1], "--scanning");
  default_run = argc > 1 && !strcmp(argv[1], "--default");
  if (!quiet_possible()) {
    e2e_note("skipped: no userfaultfd serving kernel-mode faults or no "
             "PAGEMAP_SCAN here");
    return E2E_EXIT_SKIP;
  }
  e2e_regions_env(regions, 1);
  R = &regions[0];
  e2e_region_alloc(R);
  e2e_rng rng;
  e2e_rng_seed(&rng, e2e_seed(), 1);
  e2e_region_fill(R, &rng);
  e2e_batch_init(&batch, (size_t)1 << 20, 2);
  const size_t part = E2E_MAX_COPY;
  E2E_CK(cudaMalloc((void **)&dev, (size_t)64 << 10));
  for (size_t off = 0; off < R->size; off += part) { /* ready */
    e2e_batch_copy(&batch, R, off, part, E2E_SYNC_H2D, 0);
    e2e_batch_verify(&batch, NULL, 0);
  }

  step("CPU stores", 5 * PAGE + 100, 3000, by_stores);
  step("read(2)", 40 * PAGE + 4000, 9000, by_read);
  step("a raw read system call", 90 * PAGE + 7, 5000, by_raw_read);
  step("a device-to-host cudaMemcpy", 200 * PAGE + 512, 20000, by_dtoh);
  step("a pwrite to /proc/self/mem", 300 * PAGE + 33, 6000, by_proc_mem);
  step("madvise(MADV_REMOVE)", 400 * PAGE, 3 * PAGE, by_remove);
  step("madvise(MADV_DONTNEED)", 600 * PAGE, 2 * PAGE, by_dontneed);

  settle();
  for (size_t off = 0; off < R->size; off += part)
    copy_checked("the whole region", off, part);
  e2e_region_check_host(R, "at the end");
  E2E_CK(cudaFree(dev));
  e2e_batch_destroy(&batch);
  e2e_region_free(R);
  return e2e_end();
}
