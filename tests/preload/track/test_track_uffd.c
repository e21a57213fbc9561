/*
 * The userfaultfd tracker (preload/track/track_uffd.c): CPU stores and
 * writes the kernel makes for the application land without a fault or an
 * error and are found by ibp__track_sync; re-protection consumes them
 * without losing one; remapped memory and a forked child count as all
 * written.  Exact dirty bits against the model of track_test.h.
 *
 * Runs with TRACK_TEST_TRACKER=userfaultfd (track_test_defs.c); exits 77
 * (skipped) where the kernel lacks asynchronous userfaultfd write
 * protection or PAGEMAP_SCAN (Linux < 6.7, or userfaultfd refused).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/msg.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "track_test.h"

static ibp_tracked *protected_region(arena *a, size_t off, size_t bytes,
                                     uint32_t R) {
  ibp_tracked *r = region_new(a, off, bytes, R);
  CHECK(ibp__track_protect(r) == 0);
  CHECK(!strcmp(ibp__track_kind_name(r), "userfaultfd"));
  return r;
}

static void sync_all(ibp_tracked *r) {
  CHECK(ibp__track_sync(r, r->base, r->bytes) == 0);
}

static void stores_with(uint32_t R, size_t bytes) {
  arena a;
  arena_init(&a, bytes / 4096 + 4);
  size_t pg = a.pg;
  ibp_tracked *r = protected_region(&a, 0, bytes, R);
  sync_all(r);
  region_check(&a, r);
  size_t last = (bytes - 1) / pg;
  size_t spots[] = {0,         1,      3 * pg + 17, 5 * pg - 1, last * pg,
                    bytes - 1, 2 * pg, 3 * pg + 18, 5 * pg - 2};
  for (size_t k = 0; k < sizeof spots / sizeof spots[0]; k++) {
    arena_store(&a, spots[k], (uint8_t)(k + 1));
    sync_all(r);
    region_check(&a, r);
  }
  /* the page past the region is not ours */
  arena_store(&a, (last + 1) * pg, 99);
  a.released[last + 1] = false;
  sync_all(r);
  region_check(&a, r);
  arena_check_bytes(&a);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

static void case_stores(void) {
  stores_with(1000, 16 * 4096 + 1234);
  stores_with(8192, 5 * 8192 + 5000);
  stores_with(4096, 12 * 4096);
  stores_with(100, 7 * 4096 + 50);
}

/* A sync over a span finds only the writes inside the span's pages. */
static void case_span(void) {
  arena a;
  arena_init(&a, 20);
  size_t pg = a.pg;
  ibp_tracked *r = protected_region(&a, 0, 16 * pg, 2048);
  a.mem[3 * pg] = 1;
  a.mem[10 * pg + 5] = 2;
  CHECK(ibp__track_sync(r, r->base + 9 * pg, 3 * pg) == 0);
  arena_touch(&a, 10 * pg, 1);
  region_check(&a, r); /* page 3 not seen yet */
  CHECK(ibp__track_sync(r, r->base + 3 * pg + 100, 1) == 0);
  arena_touch(&a, 3 * pg, 1);
  region_check(&a, r);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* Writes the kernel makes into the region on the application's behalf:
 * each returns what it returns without libibp (no EFAULT, no EIO). */
static void case_kernel(void) {
  arena a;
  arena_init(&a, 24);
  size_t pg = a.pg;
  ibp_tracked *r = protected_region(&a, 0, 22 * pg, 4096);
  uint8_t *m = a.mem;

  int fds[2];
  CHECK(pipe(fds) == 0);
  CHECK(write(fds[1], "abcdefgh", 8) == 8);
  CHECK(syscall(SYS_read, fds[0], m + 1 * pg + 10, 8) == 8);
  memcpy(a.want + 1 * pg + 10, "abcdefgh", 8);
  arena_touch(&a, 1 * pg + 10, 8);

  CHECK(getrandom(m + 2 * pg, 64, 0) == 64);
  memcpy(a.want + 2 * pg, m + 2 * pg, 64);
  arena_touch(&a, 2 * pg, 64);

  CHECK(write(fds[1], "ijkl", 4) == 4);
  struct iovec iov = {m + 3 * pg + 4000, 200}; /* crosses into page 4 */
  CHECK(preadv2(fds[0], &iov, 1, -1, 0) == 4); /* not hooked */
  memcpy(a.want + 3 * pg + 4000, "ijkl", 4);
  arena_touch(&a, 3 * pg + 4000, 4);

  char src[300];
  memset(src, 0x3c, sizeof src);
  struct iovec local = {src, sizeof src}, remote = {m + 5 * pg + 7, 300};
  CHECK(process_vm_writev(getpid(), &local, 1, &remote, 1, 0) == 300);
  memcpy(a.want + 5 * pg + 7, src, 300);
  arena_touch(&a, 5 * pg + 7, 300);

  struct iovec out = {m + 6 * pg, 100};
  struct iovec in = {src, 100};
  CHECK(process_vm_readv(getpid(), &out, 1, &in, 1, 0) == 100);
  memcpy(a.want + 6 * pg, src, 100);
  arena_touch(&a, 6 * pg, 100);

  int mem = open("/proc/self/mem", O_RDWR);
  CHECK(mem >= 0);
  CHECK(pwrite(mem, "XYZ", 3, (off_t)(uintptr_t)(m + 7 * pg + 1)) == 3);
  close(mem);
  memcpy(a.want + 7 * pg + 1, "XYZ", 3);
  arena_touch(&a, 7 * pg + 1, 3);

  struct stat st;
  CHECK(fstat(fds[0], &st) == 0);
  CHECK(fstat(fds[0], (struct stat *)(m + 8 * pg)) == 0);
  memcpy(a.want + 8 * pg, m + 8 * pg, sizeof st);
  arena_touch(&a, 8 * pg, sizeof st);

  /* vmsplice from a pipe into user memory copies the pipe's bytes */
  CHECK(write(fds[1], "vmspl", 5) == 5);
  struct iovec vs = {m + 9 * pg + 50, 5};
  CHECK(vmsplice(fds[0], &vs, 1, 0) == 5);
  memcpy(a.want + 9 * pg + 50, "vmspl", 5);
  arena_touch(&a, 9 * pg + 50, 5);

  int q = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
  if (q >= 0) {
    struct {
      long type;
      char text[16];
    } msg = {1, "message-queue"};
    CHECK(msgsnd(q, &msg, sizeof msg.text, 0) == 0);
    CHECK(msgrcv(q, m + 10 * pg + 8, sizeof msg.text, 0, 0) ==
          (ssize_t)sizeof msg.text);
    memcpy(a.want + 10 * pg + 8, &msg, sizeof msg);
    arena_touch(&a, 10 * pg + 8, sizeof msg);
    msgctl(q, IPC_RMID, NULL);
  }

  close(fds[0]);
  close(fds[1]);
  sync_all(r);
  region_check(&a, r);
  arena_check_bytes(&a);
  CHECK_EQ(atomic_load(&r->protected_), 1);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* Re-protection marks what it consumes; afterwards a page counts as
 * protected until written again. */
static void case_reprotect(void) {
  arena a;
  arena_init(&a, 12);
  size_t pg = a.pg;
  ibp_tracked *r = protected_region(&a, 0, 10 * pg, 1024);
  arena_store(&a, 2 * pg + 3, 5);
  CHECK(!ibp__track_still_protected(r, r->base + 2 * pg, 1024));
  CHECK(ibp__track_still_protected(r, r->base + 4 * pg, 1024));
  CHECK(ibp__track_reprotect(r) == 0); /* no sync before: it marks */
  region_check(&a, r);
  CHECK(ibp__track_still_protected(r, r->base, 10 * pg));
  region_clear_dirty(r);
  memset(a.released, 0, sizeof a.released);
  arena_store(&a, 7 * pg, 6);
  CHECK(!ibp__track_still_protected(r, r->base + 7 * pg, 1024));
  CHECK(ibp__track_still_protected(r, r->base, 7 * pg));
  sync_all(r);
  region_check(&a, r);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* Memory mapped over the region is no longer protected: the scan refuses
 * it and every tensor counts as written. */
static void case_remap(void) {
  arena a;
  arena_init(&a, 12);
  size_t pg = a.pg;
  ibp_tracked *r = protected_region(&a, 0, 10 * pg, 4096);
  void *p = mmap(a.mem + 4 * pg, pg, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  CHECK(p == a.mem + 4 * pg);
  CHECK(ibp__track_sync(r, r->base, r->bytes) == -1);
  for (size_t i = 0; i < 10; i++)
    a.released[i] = true;
  region_check(&a, r);
  CHECK(ibp__track_reprotect(r) == -1);
  CHECK(!ibp__track_still_protected(r, r->base, pg));
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* A scan that fails part way -- the first call fills its buffer with 32
 * written runs, the next meets remapped pages -- still counts what it
 * marked: every tensor dirty, and counted. */
static void case_remap_late(void) {
  enum { PAGES = 96, RUNS = 36, REMAPPED = 80 };
  arena a;
  arena_init(&a, PAGES);
  size_t pg = a.pg;
  ibp_tracked *r = protected_region(&a, 0, PAGES * pg, (uint32_t)pg);
  for (size_t i = 0; i < RUNS; i++)
    arena_store(&a, 2 * i * pg, 1);
  void *p = mmap(a.mem + REMAPPED * pg, (PAGES - REMAPPED) * pg,
                 PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  CHECK(p == a.mem + REMAPPED * pg);
  CHECK(ibp__track_sync(r, r->base, r->bytes) == -1);
  for (size_t i = 0; i < PAGES; i++)
    a.released[i] = true;
  region_check(&a, r);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* Two regions share an edge page: a write there is found by both. */
static void case_shared(void) {
  arena a;
  arena_init(&a, 12);
  size_t pg = a.pg;
  ibp_tracked *r1 = protected_region(&a, 100, 5 * pg + 900, 500);
  ibp_tracked *r2 = protected_region(&a, 5 * pg + 1000, 5 * pg, 700);
  arena_store(&a, 5 * pg + 2000, 1);
  arena_store(&a, 2 * pg, 2);
  sync_all(r1);
  sync_all(r2);
  region_check(&a, r1);
  region_check(&a, r2);
  ibp__track_unprotect(r1);
  arena_store(&a, 5 * pg + 50, 3); /* r2 still tracks the shared page */
  sync_all(r2);
  region_check(&a, r2);
  ibp__track_unprotect(r2);
  region_free(r1);
  region_free(r2);
  arena_free(&a);
}

/* Two regions share an edge page: one's re-protection (its refresh)
 * protects the page again -- a write there into the other's part must
 * still be found by the other. */
static void case_shared_reprotect(void) {
  arena a;
  arena_init(&a, 12);
  size_t pg = a.pg;
  ibp_tracked *r1 = protected_region(&a, 100, 5 * pg + 900, 500);
  ibp_tracked *r2 = protected_region(&a, 5 * pg + 1000, 5 * pg, 700);
  arena_store(&a, 5 * pg + 500, 4); /* r1's part of the shared page */
  CHECK(ibp__track_reprotect(r2) == 0);
  region_clear_dirty(r2);
  sync_all(r1);
  region_check(&a, r1);
  ibp__track_unprotect(r1);
  ibp__track_unprotect(r2);
  region_free(r1);
  region_free(r2);
  arena_free(&a);
}

/* A write into [off, off+len) of the arena: a CPU store, read(2) from a
 * pipe, or process_vm_writev. */
enum { BY_STORE, BY_READ, BY_VM_WRITEV, BY_COUNT };

static void write_by(arena *a, int by, size_t off, size_t len) {
  uint8_t src[64];
  CHECK(len <= sizeof src);
  memset(src, 0x5a + by, len);
  if (by == BY_STORE) {
    memcpy(a->mem + off, src, len);
  } else if (by == BY_READ) {
    int fds[2];
    CHECK(pipe(fds) == 0);
    CHECK(write(fds[1], src, len) == (ssize_t)len);
    CHECK(syscall(SYS_read, fds[0], a->mem + off, len) == (ssize_t)len);
    close(fds[0]);
    close(fds[1]);
  } else {
    struct iovec local = {src, len}, remote = {a->mem + off, len};
    CHECK(process_vm_writev(getpid(), &local, 1, &remote, 1, 0) ==
          (ssize_t)len);
  }
  memcpy(a->want + off, src, len);
  arena_touch(a, off, len);
}

/* Each writer into each region's part of the shared page, then the other
 * region's re-protection: the writer's region still finds it. */
static void case_shared_writers(void) {
  for (int by = 0; by < BY_COUNT; by++)
    for (int side = 0; side < 2; side++) {
      arena a;
      arena_init(&a, 12);
      size_t pg = a.pg;
      ibp_tracked *r[2] = {protected_region(&a, 100, 5 * pg + 900, 500),
                           protected_region(&a, 5 * pg + 1000, 5 * pg, 700)};
      write_by(&a, by, side ? 5 * pg + 3000 : 5 * pg + 200, 40);
      CHECK(ibp__track_reprotect(r[!side]) == 0);
      region_check(&a, r[!side]); /* its tensors there too: the page's */
      region_clear_dirty(r[!side]);
      sync_all(r[side]);
      region_check(&a, r[side]);
      region_clear_dirty(r[side]); /* (as its refresh does) */
      memset(a.released, 0, sizeof a.released);
      CHECK(ibp__track_reprotect(r[side]) == 0);
      region_check(&a, r[side]); /* consumed once: clean now */
      arena_check_bytes(&a);
      ibp__track_unprotect(r[0]);
      ibp__track_unprotect(r[1]);
      region_free(r[0]);
      region_free(r[1]);
      arena_free(&a);
    }
}

/* A region protected beside one written on the page they share: the
 * new one's protection does not drop the write from the other's record;
 * once the neighbour is gone, a re-protection marks its own tensors only. */
static void case_shared_protect(void) {
  arena a;
  arena_init(&a, 12);
  size_t pg = a.pg;
  ibp_tracked *r1 = protected_region(&a, 100, 5 * pg + 900, 500);
  arena_store(&a, 5 * pg + 500, 4); /* r1's part of the page to share */
  ibp_tracked *r2 = protected_region(&a, 5 * pg + 1000, 5 * pg, 700);
  sync_all(r1);
  region_check(&a, r1);
  sync_all(r2);
  region_check(&a, r2);
  ibp__track_unprotect(r2);
  region_clear_dirty(r1);
  memset(a.released, 0, sizeof a.released);
  arena_store(&a, 5 * pg + 600, 5);
  CHECK(ibp__track_reprotect(r1) == 0);
  region_check(&a, r1);
  ibp__track_unprotect(r1);
  region_free(r1);
  region_free(r2);
  arena_free(&a);
}

/* One thread re-protects r2 without pause while another stores into its
 * neighbour r1's part of the page they share and syncs r1: every store is
 * found, however the sync falls against the re-protection's consuming the
 * page and marking r1 (`edge_seq`). */
static _Atomic int edge_stop;

static void *edge_reprotect(void *arg) {
  while (!atomic_load(&edge_stop))
    (void)ibp__track_reprotect(arg);
  return NULL;
}

static void case_shared_race(void) {
  arena a;
  arena_init(&a, 12);
  size_t pg = a.pg;
  ibp_tracked *r1 = protected_region(&a, 100, 5 * pg + 900, 500);
  ibp_tracked *r2 = protected_region(&a, 5 * pg + 1000, 5 * pg, 700);
  const size_t at = 5 * pg + 500, tensor = (at - 100) / 500;
  pthread_t th;
  CHECK(pthread_create(&th, NULL, edge_reprotect, r2) == 0);
  for (int i = 0; i < 100000; i++) {
    region_clear_dirty(r1);
    a.mem[at] = (uint8_t)i;
    CHECK(ibp__track_sync(r1, r1->base + tensor * 500, 500) == 0);
    CHECK(dirty_bit(r1, tensor));
  }
  atomic_store(&edge_stop, 1);
  pthread_join(th, NULL);
  ibp__track_unprotect(r1);
  ibp__track_unprotect(r2);
  region_free(r1);
  region_free(r2);
  arena_free(&a);
}

/* Writers store into random pages while a re-protecting thread consumes
 * the marks and a syncing thread reads them; no write is lost. */
enum { RACE_PAGES = 256, RACE_WRITERS = 2 };
static arena race_arena;
static ibp_tracked *race_region;
static _Atomic int race_stop;
static _Atomic uint8_t race_written[RACE_PAGES];

static void *race_writer(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  for (int i = 0; i < 20000; i++) {
    size_t p = (size_t)rand_r(&seed) % RACE_PAGES;
    race_arena.mem[p * race_arena.pg + (size_t)rand_r(&seed) % 4096] = 1;
    atomic_store(&race_written[p], 1);
  }
  return NULL;
}

static void *race_reprotect(void *arg) {
  (void)arg;
  while (!atomic_load(&race_stop))
    (void)ibp__track_reprotect(race_region);
  return NULL;
}

/* After each sync, every page written before it began is dirty: a page
 * the re-protection consumed must be marked by the time sync returns. */
static void *race_sync(void *arg) {
  (void)arg;
  uint8_t before[RACE_PAGES];
  while (!atomic_load(&race_stop)) {
    for (size_t p = 0; p < RACE_PAGES; p++)
      before[p] = atomic_load(&race_written[p]);
    CHECK(ibp__track_sync(race_region, race_region->base, race_region->bytes) ==
          0);
    for (size_t p = 0; p < RACE_PAGES; p++)
      CHECK(!before[p] || dirty_bit(race_region, p));
  }
  return NULL;
}

static void case_race(void) {
  arena_init(&race_arena, RACE_PAGES);
  race_region = protected_region(&race_arena, 0, RACE_PAGES * race_arena.pg,
                                 (uint32_t)race_arena.pg);
  pthread_t w[RACE_WRITERS], rp, sy;
  CHECK(pthread_create(&rp, NULL, race_reprotect, NULL) == 0);
  CHECK(pthread_create(&sy, NULL, race_sync, NULL) == 0);
  for (uintptr_t i = 0; i < RACE_WRITERS; i++)
    CHECK(pthread_create(&w[i], NULL, race_writer, (void *)(i + 1)) == 0);
  for (int i = 0; i < RACE_WRITERS; i++)
    pthread_join(w[i], NULL);
  atomic_store(&race_stop, 1);
  pthread_join(rp, NULL);
  pthread_join(sy, NULL);
  sync_all(race_region);
  for (size_t p = 0; p < RACE_PAGES; p++)
    race_arena.released[p] = atomic_load(&race_written[p]);
  region_check(&race_arena, race_region);
  ibp__track_unprotect(race_region);
  region_free(race_region);
  arena_free(&race_arena);
}

/* In a forked child the memory is not registered: all written. */
static void case_fork(void) {
  arena a;
  arena_init(&a, 6);
  ibp_tracked *r = protected_region(&a, 0, 4 * a.pg, 4096);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    ibp__track_after_fork_child();
    a.mem[0] = 9; /* the child's own copy */
    CHECK(ibp__track_sync(r, r->base, r->bytes) == -1);
    for (size_t i = 0; i < 4; i++)
      a.released[i] = true;
    region_check(&a, r);
    _exit(0);
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  sync_all(r); /* the parent's region is untouched */
  region_check(&a, r);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* Memory userfaultfd refuses (here: registered by another userfaultfd of
 * the application) goes to the mprotect tracker under IBP_TRACKER=auto
 * (this case runs with TRACK_TEST_TRACKER=auto) and is not tracked at all
 * under IBP_TRACKER=userfaultfd. */
static void case_fallback(void) {
  arena a;
  arena_init(&a, 8);
  int other = (int)syscall(SYS_userfaultfd, O_CLOEXEC | 1 /* user only */);
  CHECK(other >= 0);
  struct uffdio_api api = {.api = UFFD_API};
  CHECK(ioctl(other, UFFDIO_API, &api) == 0);
  struct uffdio_register reg = {.range = {(uintptr_t)a.mem, 4 * a.pg},
                                .mode = UFFDIO_REGISTER_MODE_MISSING};
  CHECK(ioctl(other, UFFDIO_REGISTER, &reg) == 0);
  ibp_tracked *r = region_new(&a, 0, 4 * a.pg, 4096);
  ibp__cfg.tracker = IBP_TRACKER_USERFAULTFD;
  CHECK(ibp__track_protect(r) == -1);
  CHECK(!strcmp(ibp__track_kind_name(r), "none"));
  ibp__cfg.tracker = IBP_TRACKER_AUTO;
  CHECK(ibp__track_protect(r) == 0);
  CHECK(!strcmp(ibp__track_kind_name(r), "mprotect"));
  arena_store(&a, a.pg + 5, 1); /* a fault, counted at once */
  CHECK_EQ(atomic_load(&r->write_faults), 1);
  region_check(&a, r);
  ibp__track_unprotect(r);
  /* the rest of the arena is userfaultfd's */
  ibp_tracked *r2 = region_new(&a, 4 * a.pg, 4 * a.pg, 4096);
  CHECK(ibp__track_protect(r2) == 0);
  CHECK(!strcmp(ibp__track_kind_name(r2), "userfaultfd"));
  ibp__track_unprotect(r2);
  close(other);
  region_free(r);
  region_free(r2);
  arena_free(&a);
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"stores", case_stores},
      {"span", case_span},
      {"kernel", case_kernel},
      {"reprotect", case_reprotect},
      {"remap", case_remap},
      {"remap_late", case_remap_late},
      {"shared", case_shared},
      {"shared_reprotect", case_shared_reprotect},
      {"shared_writers", case_shared_writers},
      {"shared_protect", case_shared_protect},
      {"shared_race", case_shared_race},
      {"race", case_race},
      {"fork", case_fork},
      {"fallback", case_fallback},
  };
  if (!ibp__uffd_available()) {
    printf("userfaultfd write protection unavailable: skipped\n");
    return 77;
  }
  return run_case(cases, sizeof cases / sizeof cases[0], argc, argv);
}
