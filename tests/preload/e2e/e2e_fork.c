/*
 * e2e_fork: fork() and libibp (README.md).
 *
 * 1. Before any CUDA call the parent goes through the paths libibp hooks
 *    whatever the program does -- dlsym (RTLD_DEFAULT; RTLD_NEXT in a
 *    child of its own, so a crash there is reported), sigaction, signal,
 *    read, pread, preadv, fread, recv -- and starts a thread that keeps
 *    calling read(), then forks while that thread runs.
 * 2. The child initialises CUDA itself (the simulated driver, like
 *    NVIDIA's, forbids a child to use CUDA after the parent's cuInit; the
 *    parent has made none) and runs a served, verified workload: random
 *    copies of a region, then a CPU store and a read(2) into the region and
 *    the copies after them.  It exits with its status.
 * 3. The parent waits for it, then runs the same workload itself.
 * 4. With CUDA initialised, a compressed (write-protected) registered region
 *    and copies in flight on a stream, the parent forks again; that child
 *    uses only the C library -- read, fread, recv into its private copy of
 *    the registered region, a CPU store there, sigaction, dlsym, malloc --
 *    and exits (running libibp's exit path); it must neither hang (alarm)
 *    nor crash.  The parent's copies must still be right afterwards.
 */
#include "e2e_util.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEV_BYTES ((size_t)2 << 20)

static e2e_region regions[] = {
    {.name = "fork",
     .size = (2 << 20) + 12,
     .tensor = 2048,
     .alloc = E2E_HOST_ALLOC,
     .data = E2E_F32},
    {.name = "forkreg",
     .size = (1 << 20) + 40,
     .tensor = 1024,
     .alloc = E2E_REGISTER,
     .data = E2E_BF16},
};

/* ---- the C library paths libibp hooks ------------------------------------ */

static void on_usr1(int sig) {
  (void)sig;
}

/* dlsym(RTLD_NEXT, ...) as an interposing application does; in a child
 * process of its own, so that a crash is reported and the test goes on. */
static void dlsym_next(void) {
  pid_t pid = fork();
  E2E_SYS(pid >= 0);
  if (pid == 0)
    _exit(dlsym(RTLD_NEXT, "free") == (void *)free ? 0 : 1);
  int status;
  E2E_SYS(waitpid(pid, &status, 0) == pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    e2e_fail("dlsym(RTLD_NEXT, \"free\") in a child: %s %d",
             WIFEXITED(status) ? "wrong answer, exit" : "killed by signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

/* Reads, receives and looks up symbols; `into` is where the data goes
 * (n >= 8 KiB).  Exits 1 when a call gives the wrong answer. */
static void libc_paths(unsigned char *into, size_t n) {
  if (!dlsym(RTLD_DEFAULT, "malloc"))
    e2e_fail("dlsym(RTLD_DEFAULT, \"malloc\") failed: %s", dlerror());
  struct sigaction sa = {.sa_handler = on_usr1};
  sigemptyset(&sa.sa_mask);
  E2E_SYS(sigaction(SIGUSR1, &sa, NULL) == 0);
  E2E_SYS(signal(SIGUSR2, on_usr1) != SIG_ERR);

  unsigned char *want = malloc(n);
  E2E_SYS(want != NULL);
  for (size_t i = 0; i < n; i++)
    want[i] = (unsigned char)(i * 7 + 3);
  int fd = e2e_temp_file(want, n);
  ssize_t got = read(fd, into, 4096);
  got += pread(fd, into + 4096, 2048, 4096);
  struct iovec iov = {into + 6144, 2048};
  got += preadv(fd, &iov, 1, 6144);
  FILE *f = fdopen(fd, "rb");
  E2E_SYS(f != NULL);
  E2E_SYS(fseek(f, 8192, SEEK_SET) == 0);
  got += (ssize_t)fread(into + 8192, 1, n - 8192, f);
  fclose(f);
  int sv[2];
  E2E_SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  E2E_SYS(send(sv[0], want, 1000, 0) == 1000);
  got += recv(sv[1], into, 1000, MSG_WAITALL);
  close(sv[0]);
  close(sv[1]);
  if (got != (ssize_t)(n + 1000) || memcmp(into, want, n) != 0)
    e2e_fail("C library reads before fork: %zd bytes, content %s", got,
             memcmp(into, want, n) ? "wrong" : "right");
  free(want);
}

static atomic_int reader_stop, reader_reading;

/* Keeps calling read() until told to stop; says when its first read
 * returned.  The fork waits for that: a thread still starting up
 * allocates (its TLS, the sanitizers' per-thread state), and the
 * sanitizers' allocator (GCC 12's libasan) is not fork-safe -- a child
 * forked while another thread holds its lock hangs in its first malloc,
 * with or without libibp.  Once reading, the loop allocates nothing. */
static void *reader(void *arg) {
  (void)arg;
  int fd = open("/dev/zero", O_RDONLY);
  E2E_SYS(fd >= 0);
  char buf[512];
  while (!atomic_load(&reader_stop)) {
    if (read(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
      e2e_fail("read(/dev/zero) in the reader thread failed");
    atomic_store(&reader_reading, 1);
  }
  close(fd);
  return NULL;
}

/* ---- the CUDA workload --------------------------------------------------- */

static void workload(const char *who, uint64_t stream_no) {
  e2e_region *r = &regions[0];
  e2e_rng rng;
  e2e_rng_seed(&rng, e2e_seed(), stream_no);
  e2e_region_alloc(r);
  e2e_region_fill(r, &rng);
  e2e_batch b;
  e2e_batch_init(&b, DEV_BYTES, stream_no);
  b.label = who;
  cudaStream_t streams[2] = {0, 0};
  E2E_CK(cudaStreamCreate(&streams[1]));
  e2e_random_plan plan = {.regions = r,
                          .nregions = 1,
                          .streams = streams,
                          .nstreams = 2,
                          .copies = 150};
  e2e_random_copies(&b, &plan, &rng);

  /* Writes after compression: a CPU store and a read(2). */
  r->host[12345] ^= 0x40;
  r->mirror[12345] ^= 0x40;
  e2e_fill(&rng, r->mirror + 300000, 20000, 20000, E2E_F32);
  int fd = e2e_temp_file(r->mirror + 300000, 20000);
  if (read(fd, r->host + 300000, 20000) != 20000)
    e2e_fail("%sread(2) into the region failed", who);
  close(fd);
  e2e_batch_copy(&b, r, 12288, 4096, E2E_SYNC_H2D, 0);
  e2e_batch_copy(&b, r, 296000, 30000, E2E_ASYNC_H2D, streams[1]);
  e2e_batch_verify(&b, streams, 2);
  e2e_region_check_host(r, who);
  E2E_CK(cudaStreamDestroy(streams[1]));
  e2e_batch_destroy(&b);
  e2e_region_free(r);
}

/* ---- fork with CUDA initialised ------------------------------------------ */

static void child_libc_only(e2e_region *reg) {
  unsigned before = e2e_failures(); /* the parent's, inherited */
  alarm(10);           /* a deadlock in the child ends as SIGALRM */
  reg->host[100] ^= 1; /* the region's pages are protected in the parent */
  libc_paths(reg->host + 4096, 64 << 10);
  void *p = malloc(1 << 20);
  E2E_SYS(p != NULL);
  free(p);
  exit(e2e_failures() != before ? E2E_EXIT_MISMATCH : 0);
}

static void fork_after_init(void) {
  e2e_region *reg = &regions[1];
  e2e_rng rng;
  e2e_rng_seed(&rng, e2e_seed(), 7);
  e2e_region_alloc(reg);
  e2e_region_fill(reg, &rng);
  e2e_batch b;
  e2e_batch_init(&b, DEV_BYTES, 7);
  b.label = "parent, fork after cuInit: ";
  cudaStream_t s;
  E2E_CK(cudaStreamCreate(&s));
  e2e_batch_copy(&b, reg, 0, 256 << 10, E2E_SYNC_H2D, 0);
  e2e_batch_verify(&b, &s, 1);
  for (size_t off = 0; off + (64 << 10) <= reg->size; off += 64 << 10)
    if (e2e_batch_fits(&b, 64 << 10))
      e2e_batch_copy(&b, reg, off, 64 << 10, E2E_ASYNC_H2D, s);
  pid_t pid = fork(); /* copies still in flight on s */
  E2E_SYS(pid >= 0);
  if (pid == 0)
    child_libc_only(reg);
  e2e_batch_verify(&b, &s, 1);
  int status;
  E2E_SYS(waitpid(pid, &status, 0) == pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    e2e_fail("child forked after cuInit (C library only): %s %d",
             WIFEXITED(status) ? "exit status" : "killed by signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  reg->host[200] ^= 1;
  reg->mirror[200] ^= 1;
  e2e_batch_copy(&b, reg, 0, reg->size, E2E_ASYNC_DEFAULT, s);
  e2e_batch_verify(&b, &s, 1);
  E2E_CK(cudaStreamDestroy(s));
  e2e_batch_destroy(&b);
  e2e_region_free(reg);
}

int main(void) {
  e2e_begin("e2e_fork");
  e2e_regions_env(regions, 2);
  unsigned char *buf = malloc(64 << 10);
  E2E_SYS(buf != NULL);
  dlsym_next();
  libc_paths(buf, 64 << 10);
  free(buf);
  pthread_t tid;
  if (pthread_create(&tid, NULL, reader, NULL) != 0)
    e2e_die("pthread_create failed");
  while (!atomic_load(&reader_reading))
    usleep(100);

  pid_t pid = fork();
  E2E_SYS(pid >= 0);
  if (pid == 0) {
    unsigned before = e2e_failures(); /* the parent's, inherited */
    workload("child: ", 10);
    int ok = e2e_failures() == before;
    e2e_note("child: %s", ok ? "verified" : "failed");
    exit(ok ? 0 : E2E_EXIT_MISMATCH);
  }
  int status;
  E2E_SYS(waitpid(pid, &status, 0) == pid);
  atomic_store(&reader_stop, 1);
  pthread_join(tid, NULL);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    e2e_fail("the child's workload failed: %s %d",
             WIFEXITED(status) ? "exit status" : "killed by signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  workload("parent: ", 20);
  fork_after_init();
  return e2e_end();
}
