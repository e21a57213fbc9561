/*
 * Quiet regions (preload/track/track_quiet.c, track_sync.c): a region the
 * userfaultfd tracker holds with no write found for IBP_TRACK_QUIET ms is
 * held by synchronous write-protect faults, and a copy's sync then makes no
 * system call; every write -- CPU stores and the kernel's own writes for
 * the application -- still marks its tensors before the next sync returns,
 * also while regions move between the modes under concurrent writers.
 * Exact dirty bits against the model of track_test.h.
 *
 * Runs with TRACK_TEST_TRACKER=userfaultfd TRACK_TEST_QUIET=100; exits 77
 * (skipped) where asynchronous userfaultfd write protection is missing or
 * no userfaultfd serves kernel-mode faults (unprivileged under
 * vm.unprivileged_userfaultfd=0): there regions keep scanning.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>

#include "base/clock.h"
#include "track_test.h"

static void skip_unless_quiet(void) {
  if (!ibp__uffd_available() || !ibp__syncwp_available()) {
    printf("skipped: no userfaultfd for quiet regions here\n");
    exit(77);
  }
}

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

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, ms % 1000 * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* Waits (up to 3 s) until the tick moved r to `mode`. */
static void wait_mode(ibp_tracked *r, int mode) {
  for (int i = 0; i < 300 && atomic_load(&r->mode) != mode; i++)
    sleep_ms(10);
  CHECK_EQ(atomic_load(&r->mode), mode);
}

/* No write for a second: copies make no tracking system call; a write
 * then is marked by its fault, before the next sync. */
static void case_calls(void) {
  skip_unless_quiet();
  arena a;
  arena_init(&a, 64);
  size_t pg = a.pg;
  ibp_tracked *r = protected_region(&a, 0, 64 * pg, 1000);
  arena_store(&a, 5 * pg + 3, 9);
  sync_all(r);
  CHECK(atomic_load(&r->scan_calls) > 0); /* scanning at first */
  region_check(&a, r);
  sleep_ms(1100); /* no write for a second */
  CHECK_EQ(atomic_load(&r->mode), IBP_TRACK_FAULTING);
  CHECK(!ibp__track_scans(r));
  uint64_t calls = atomic_load(&r->scan_calls);
  for (int i = 0; i < 1000; i++)
    CHECK(ibp__track_sync(r, r->base + (size_t)i % 60 * pg, 4 * pg) == 0);
  CHECK_EQ(atomic_load(&r->scan_calls), calls); /* 0 a copy */
  arena_store(&a, 40 * pg + 100, 7);
  CHECK(ibp__track_sync(r, r->base + 40 * pg, 100) == 0);
  region_check(&a, r);
  CHECK_EQ(atomic_load(&r->sync_faults), 1);
  CHECK_EQ(atomic_load(&r->scan_calls), calls);
  arena_check_bytes(&a);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* Moves r to faulting now and checks it is there. */
static void quiet(ibp_tracked *r) {
  CHECK(ibp__quiet_now(r, IBP_TRACK_FAULTING) == 0);
  CHECK(!ibp__track_scans(r));
}

/* Each write path into a faulting region: the call succeeds as without
 * libibp, and the tensors it wrote are dirty at the next sync, which
 * makes no system call. */
static void case_paths(void) {
  skip_unless_quiet();
  arena a;
  arena_init(&a, 16);
  size_t pg = a.pg;
  uint8_t *m = a.mem;
  ibp_tracked *r = protected_region(&a, 0, 16 * pg, 512);
  quiet(r);
  const uint64_t calls = atomic_load(&r->scan_calls);

  arena_store(&a, 1 * pg + 17, 0xaa); /* a CPU store */
  sync_all(r);
  region_check(&a, r);

  int fds[2];
  quiet(r);
  CHECK(pipe(fds) == 0);
  CHECK(write(fds[1], "abcdefgh", 8) == 8);
  CHECK(syscall(SYS_read, fds[0], m + 2 * pg + 10, 8) == 8); /* raw read(2) */
  memcpy(a.want + 2 * pg + 10, "abcdefgh", 8);
  arena_touch(&a, 2 * pg + 10, 8);
  sync_all(r);
  region_check(&a, r);

  quiet(r);
  CHECK(write(fds[1], "12345", 5) == 5);
  CHECK(read(fds[0], m + 3 * pg + 4090, 5) == 5); /* read(2), two pages */
  memcpy(a.want + 3 * pg + 4090, "12345", 5);
  arena_touch(&a, 3 * pg + 4090, 5);
  sync_all(r);
  region_check(&a, r);
  close(fds[0]);
  close(fds[1]);

  int sv[2];
  quiet(r);
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  CHECK(send(sv[0], "socket", 6, 0) == 6);
  CHECK(recv(sv[1], m + 5 * pg + 1, 6, 0) == 6); /* recv */
  memcpy(a.want + 5 * pg + 1, "socket", 6);
  arena_touch(&a, 5 * pg + 1, 6);
  sync_all(r);
  region_check(&a, r);
  quiet(r);
  CHECK(send(sv[0], "rawrecv", 7, 0) == 7);
  CHECK(syscall(SYS_recvfrom, sv[1], m + 6 * pg + 9, 7, 0, NULL, NULL) == 7);
  memcpy(a.want + 6 * pg + 9, "rawrecv", 7);
  arena_touch(&a, 6 * pg + 9, 7);
  sync_all(r);
  region_check(&a, r);
  close(sv[0]);
  close(sv[1]);

  quiet(r);
  char src[300];
  memset(src, 0x3c, sizeof src);
  struct iovec local = {src, sizeof src}, remote = {m + 7 * pg + 7, 300};
  CHECK(process_vm_writev(getpid(), &local, 1, &remote, 1, 0) == 300);
  memcpy(a.want + 7 * pg + 7, src, 300);
  arena_touch(&a, 7 * pg + 7, 300);
  sync_all(r);
  region_check(&a, r);

  /* a write to /proc/self/mem cannot wait for a fault (the kernel's
   * access_remote_vm): the write hooks announce it (procmem.c) */
  quiet(r);
  int mem = open("/proc/self/mem", O_RDWR);
  CHECK(mem >= 0);
  CHECK(pwrite(mem, "procmem", 7, (off_t)(uintptr_t)(m + 8 * pg + 3)) == 7);
  memcpy(a.want + 8 * pg + 3, "procmem", 7);
  arena_touch(&a, 8 * pg + 3, 7);
  sync_all(r);
  region_check(&a, r);
  quiet(r); /* write(2) at the descriptor's position, over two pages */
  CHECK(lseek(mem, (off_t)(uintptr_t)(m + 10 * pg + 4093), SEEK_SET) >= 0);
  CHECK(write(mem, "lseek", 5) == 5);
  memcpy(a.want + 10 * pg + 4093, "lseek", 5);
  arena_touch(&a, 10 * pg + 4093, 5);
  sync_all(r);
  region_check(&a, r);
  quiet(r);
  struct iovec two[2] = {{"pwri", 4}, {"tev", 3}};
  CHECK(pwritev(mem, two, 2, (off_t)(uintptr_t)(m + 12 * pg + 50)) == 7);
  memcpy(a.want + 12 * pg + 50, "pwritev", 7);
  arena_touch(&a, 12 * pg + 50, 7);
  sync_all(r);
  region_check(&a, r);
  close(mem);

  quiet(r);
  CHECK(getrandom(m + 9 * pg + 64, 64, 0) == 64);
  memcpy(a.want + 9 * pg + 64, m + 9 * pg + 64, 64);
  arena_touch(&a, 9 * pg + 64, 64);
  sync_all(r);
  region_check(&a, r);

  /* a device-side write (serve/dtoh.c announces it) */
  quiet(r);
  ibp__track_mark_dirty(r, r->base + 11 * pg, pg); /* the model: pages */
  arena_touch(&a, 11 * pg, pg);
  sync_all(r);
  region_check(&a, r);

  CHECK_EQ(atomic_load(&r->scan_calls), calls);
  arena_check_bytes(&a);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* Writes come faster than IBP__QUIET_BUSY_FAULTS a tick: back to scanning,
 * and every write still marked. */
static void case_busy(void) {
  skip_unless_quiet();
  enum { PAGES = 512 };
  arena a;
  arena_init(&a, PAGES);
  size_t pg = a.pg;
  ibp_tracked *r = protected_region(&a, 0, PAGES * pg, (uint32_t)pg);
  wait_mode(r, IBP_TRACK_FAULTING);
  for (size_t p = 0; p < PAGES; p += 2) {
    arena_store(&a, p * pg + 1, 5);
    if (p % 64 == 0)
      sleep_ms(5);
  }
  wait_mode(r, IBP_TRACK_SCANNING);
  for (size_t p = 1; p < PAGES; p += 2)
    arena_store(&a, p * pg + 2, 6);
  sync_all(r);
  region_check(&a, r);
  arena_check_bytes(&a);
  CHECK(atomic_load(&r->mode_switches) >= 2);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* A refresh's re-protection while faulting: what it consumed was marked;
 * a page counts as protected again until written. */
static void case_reprotect(void) {
  skip_unless_quiet();
  arena a;
  arena_init(&a, 8);
  size_t pg = a.pg;
  ibp_tracked *r = protected_region(&a, 0, 8 * pg, 2048);
  quiet(r);
  arena_store(&a, 3 * pg + 10, 1);
  sync_all(r);
  region_check(&a, r);
  CHECK(!ibp__track_still_protected(r, r->base + 3 * pg, pg));
  CHECK(ibp__track_still_protected(r, r->base + 4 * pg, pg));
  CHECK(ibp__track_reprotect(r) == 0);
  CHECK(ibp__track_still_protected(r, r->base, 8 * pg));
  region_clear_dirty(r);
  memset(a.released, 0, sizeof a.released);
  arena_store(&a, 3 * pg + 11, 2); /* faults again */
  sync_all(r);
  region_check(&a, r);
  CHECK(!ibp__track_still_protected(r, r->base + 3 * pg, pg));
  CHECK_EQ(atomic_load(&r->sync_faults), 2);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* A region whose base is not page-aligned stays scanning, and so does
 * one sharing its last page with it; alone, a region whose end is not
 * page-aligned moves. */
static void case_unaligned(void) {
  skip_unless_quiet();
  arena a;
  arena_init(&a, 16);
  size_t pg = a.pg;
  ibp_tracked *r1 = protected_region(&a, 0, 6 * pg + 100, 500);
  ibp_tracked *r2 = protected_region(&a, 6 * pg + 200, 6 * pg, 500);
  sleep_ms(400);
  CHECK_EQ(atomic_load(&r1->mode), IBP_TRACK_SCANNING);
  CHECK_EQ(atomic_load(&r2->mode), IBP_TRACK_SCANNING);
  CHECK(ibp__quiet_now(r2, IBP_TRACK_FAULTING) != 0);
  CHECK(ibp__quiet_now(r1, IBP_TRACK_FAULTING) != 0);
  arena_store(&a, 3 * pg, 4);
  arena_store(&a, 6 * pg + 150, 4); /* the shared page */
  sync_all(r1);
  sync_all(r2);
  region_check(&a, r1);
  region_check(&a, r2);
  ibp__track_unprotect(r2);
  quiet(r1);
  arena_store(&a, 6 * pg + 10, 5);
  arena_store(&a, 2 * pg, 5);
  sync_all(r1);
  region_check(&a, r1);
  ibp__track_unprotect(r1);
  region_free(r1);
  region_free(r2);
  arena_free(&a);
}

/* Writers store into random pages while a mover thread moves the region
 * between the modes as fast as it can and a syncing thread checks that
 * every page written before a sync began is dirty when it returns. */
enum { RACE_PAGES = 512, RACE_WRITERS = 2 };
static arena race_arena;
static ibp_tracked *race_region;
static _Atomic int race_stop;
static _Atomic uint8_t race_written[RACE_PAGES];
static _Atomic unsigned race_moves;

static void *race_writer(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  for (int i = 0; i < 3000; i++) {
    size_t p = (size_t)rand_r(&seed) % RACE_PAGES;
    race_arena.mem[p * race_arena.pg + (size_t)rand_r(&seed) % 4096] = 1;
    atomic_store(&race_written[p], 1);
    if (i % 16 == 0)
      sched_yield();
  }
  return NULL;
}

static void *race_mover(void *arg) {
  (void)arg;
  for (int i = 0; !atomic_load(&race_stop); i++) {
    (void)ibp__quiet_now(race_region,
                         i % 2 ? IBP_TRACK_SCANNING : IBP_TRACK_FAULTING);
    atomic_fetch_add(&race_moves, 1);
  }
  return NULL;
}

static void *race_sync(void *arg) {
  (void)arg;
  uint8_t before[RACE_PAGES];
  while (!atomic_load(&race_stop)) {
    for (size_t p = 0; p < RACE_PAGES; p++)
      before[p] = atomic_load(&race_written[p]);
    /* a scan that a move took the pages from scans again: the region is
     * never given up for a move (track_uffd.c, ibp__uffd_sync) */
    CHECK_EQ(
        ibp__track_sync(race_region, race_region->base, race_region->bytes), 0);
    for (size_t p = 0; p < RACE_PAGES; p++)
      if (before[p] && !dirty_bit(race_region, p)) {
        fprintf(stderr, "page %zu written before the sync, clean after\n", p);
        CHECK(0);
      }
  }
  return NULL;
}

static void case_race(void) {
  skip_unless_quiet();
  arena_init(&race_arena, RACE_PAGES);
  race_region = protected_region(&race_arena, 0, RACE_PAGES * race_arena.pg,
                                 (uint32_t)race_arena.pg);
  pthread_t w[RACE_WRITERS], mv, sy;
  CHECK(pthread_create(&mv, NULL, race_mover, NULL) == 0);
  CHECK(pthread_create(&sy, NULL, race_sync, NULL) == 0);
  for (uintptr_t i = 0; i < RACE_WRITERS; i++)
    CHECK(pthread_create(&w[i], NULL, race_writer, (void *)(i + 1)) == 0);
  for (int i = 0; i < RACE_WRITERS; i++)
    pthread_join(w[i], NULL);
  /* a few moves at least, however the threads were scheduled */
  while (atomic_load(&race_moves) < 4)
    sched_yield();
  atomic_store(&race_stop, 1);
  pthread_join(mv, NULL);
  pthread_join(sy, NULL);
  sync_all(race_region);
  /* the fault thread may still be marking (a tick's scan): the count of
   * dirty tensors is their bits' once it has let go of the region */
  ibp__track_unprotect(race_region);
  for (size_t p = 0; p < RACE_PAGES; p++)
    race_arena.released[p] = atomic_load(&race_written[p]);
  region_check(&race_arena, race_region);
  fprintf(stderr, "moves: %u\n", atomic_load(&race_moves));
  region_free(race_region);
  arena_free(&race_arena);
}

/* A copy's scan that a move took the pages from (they left the
 * asynchronous descriptor) scans again once the move has given them back:
 * the region is not given up for a move.  Without a move, a scan that
 * fails does give it up: every tensor counts as written. */
static ibp_tracked *raced_region;

static void *raced_move_end(void *arg) {
  (void)arg;
  sleep_ms(20);
  CHECK(ibp__uffd_adopt(raced_region) == 0);
  atomic_fetch_add(&raced_region->move_seq, 1);
  return NULL;
}

static void case_raced_scan(void) {
  skip_unless_quiet();
  arena a;
  arena_init(&a, 8);
  raced_region = protected_region(&a, 0, 8 * a.pg, (uint32_t)a.pg);
  /* a move under way, as track_quiet.c makes one */
  CHECK(ibp__uffd_release(raced_region) == 0);
  atomic_fetch_add(&raced_region->move_seq, 1);
  pthread_t mv;
  CHECK(pthread_create(&mv, NULL, raced_move_end, NULL) == 0);
  sync_all(raced_region);
  pthread_join(mv, NULL);
  arena_store(&a, 3 * a.pg + 1, 4);
  sync_all(raced_region);
  region_check(&a, raced_region);
  /* a real move there and back runs move_seq through two odd spans */
  const unsigned seq = atomic_load(&raced_region->move_seq);
  CHECK(seq % 2 == 0);
  CHECK(ibp__quiet_now(raced_region, IBP_TRACK_FAULTING) == 0);
  CHECK_EQ(atomic_load(&raced_region->move_seq), seq + 2);
  CHECK(ibp__quiet_now(raced_region, IBP_TRACK_SCANNING) == 0);
  CHECK_EQ(atomic_load(&raced_region->move_seq), seq + 4);
  /* no move: the memory is no longer watched */
  CHECK(ibp__uffd_release(raced_region) == 0);
  CHECK(ibp__track_sync(raced_region, raced_region->base,
                        raced_region->bytes) != 0);
  for (size_t p = 0; p < 8; p++)
    a.released[p] = true;
  region_check(&a, raced_region);
  ibp__track_unprotect(raced_region);
  region_free(raced_region);
  arena_free(&a);
}

/* Writes made while a move has the pages in neither descriptor -- a CPU
 * store, a raw read(2), process_vm_writev -- all succeed (no bridge that
 * would refuse them with EFAULT), and the move's fingerprint marks them:
 * every page of each chunk written (the pages the move summed).  A move
 * with no write in its gap marks nothing. */
static arena gap_arena;
static int gap_pipe[2];
static size_t gap_pages[3];

static void gap_store(size_t page, size_t at) {
  arena *a = &gap_arena;
  uint8_t *m = a->mem + page * a->pg + at;
  switch (page % 3) {
  case 0:
    *m ^= 0x5a;
    a->want[page * a->pg + at] = *m;
    break;
  case 1:
    CHECK(write(gap_pipe[1], "gapread", 7) == 7);
    CHECK(syscall(SYS_read, gap_pipe[0], m, 7) == 7);
    memcpy(a->want + page * a->pg + at, "gapread", 7);
    break;
  default: {
    char src[64];
    memset(src, 0x71, sizeof src);
    struct iovec local = {src, sizeof src}, remote = {m, sizeof src};
    CHECK(process_vm_writev(getpid(), &local, 1, &remote, 1, 0) == 64);
    memcpy(a->want + page * a->pg + at, src, sizeof src);
  }
  }
}

/* The hooks act only for the test's own moves (ibp__quiet_now on the
 * main thread), not for the tick's on the fault thread. */
static pthread_t main_thread;

static int own_move(void) {
  return pthread_equal(pthread_self(), main_thread);
}

static unsigned gap_hook_calls; /* the test's own moves that opened a gap */

static void gap_writer(ibp_tracked *t) {
  (void)t;
  if (!own_move())
    return;
  gap_hook_calls++;
  for (size_t i = 0; i < 3 && gap_pages[i]; i++)
    gap_store(gap_pages[i], 100 + 8 * i);
}

/* Moves r to `mode` with gap_writer writing pages p0, p1, p2 (0: none)
 * in the gap, and records their chunks in the model. */
static void gap_touch(size_t p);

static void gap_move(ibp_tracked *r, int mode, size_t p0, size_t p1,
                     size_t p2) {
  gap_pages[0] = p0;
  gap_pages[1] = p1;
  gap_pages[2] = p2;
  CHECK(ibp__quiet_now(r, mode) == 0);
  for (size_t i = 0; i < 3 && gap_pages[i]; i++)
    gap_touch(gap_pages[i]);
}

/* After a move: `writes` chunks caught so far, every dirty bit and byte
 * as the model says. */
static void gap_verify(ibp_tracked *r, uint64_t writes) {
  CHECK_EQ(atomic_load(&r->gap_writes), writes);
  sync_all(r);
  region_check(&gap_arena, r);
  arena_check_bytes(&gap_arena);
}

/* Nothing dirty, in r and the model; every page protected again. */
static void gap_fresh(ibp_tracked *r) {
  region_clear_dirty(r);
  memset(gap_arena.released, 0, sizeof gap_arena.released);
  CHECK(ibp__track_reprotect(r) == 0);
}

/* The model: every page of the chunk holding page p written. */
static void gap_touch(size_t p) {
  const size_t c = p / IBP__QUIET_CHUNK_PAGES * IBP__QUIET_CHUNK_PAGES;
  arena_touch(&gap_arena, c * gap_arena.pg,
              IBP__QUIET_CHUNK_PAGES * gap_arena.pg);
}

static void case_gap(void) {
  skip_unless_quiet();
  arena *a = &gap_arena;
  arena_init(a, 4 * IBP__QUIET_CHUNK_PAGES);
  ibp_tracked *r = protected_region(a, 0, a->npages * a->pg, 512);
  CHECK(pipe(gap_pipe) == 0);

  /* no write in the gap: nothing marked, either way */
  CHECK(ibp__quiet_now(r, IBP_TRACK_FAULTING) == 0);
  CHECK(ibp__quiet_now(r, IBP_TRACK_SCANNING) == 0);
  sync_all(r);
  region_check(a, r);
  CHECK_EQ(atomic_load(&r->gap_writes), 0);

  /* to faulting: three paths into three chunks */
  ibp__quiet_gap_hook = gap_writer;
  const size_t C = IBP__QUIET_CHUNK_PAGES;
  gap_move(r, IBP_TRACK_FAULTING, 1 * C + 3, 2 * C + 4, 3 * C + 5);
  gap_verify(r, 3);

  /* to scanning: a page written while faulting (lifted, not summed) is
   * written again in the gap beside a still-protected one of its chunk */
  gap_fresh(r);
  arena_store(a, (2 * C + 9) * a->pg + 5, 0x33); /* faults, lifted, marked */
  gap_pages[0] = 2 * C + 9;
  gap_pages[1] = 0;
  CHECK(ibp__quiet_now(r, IBP_TRACK_SCANNING) == 0);
  gap_verify(r, 3); /* a lifted page: not summed */
  gap_move(r, IBP_TRACK_FAULTING, 2 * C + 10, 0, 0); /* protected, same */
  gap_verify(r, 4);

  /* to scanning: the three paths into protected pages of three chunks */
  gap_fresh(r);
  gap_move(r, IBP_TRACK_SCANNING, 0 * C + 6, 1 * C + 7, 3 * C + 8);
  ibp__quiet_gap_hook = NULL;
  gap_verify(r, 7);

  close(gap_pipe[0]);
  close(gap_pipe[1]);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(a);
}

/* A copy's sync made while a move has the pages in neither descriptor
 * returns only once the move has marked what was written on its span
 * there: its dirty bit is read as the sync returns, on another thread. */
static ibp_tracked *wait_region;
static size_t wait_page;
static _Atomic int wait_bit = -1;

static void *wait_sync(void *arg) {
  (void)arg;
  const size_t pg = gap_arena.pg;
  CHECK(ibp__track_sync(wait_region, wait_region->base + wait_page * pg, pg) ==
        0);
  const size_t R = wait_region->tensor_bytes;
  atomic_store(&wait_bit, dirty_bit(wait_region, wait_page * pg / R));
  return NULL;
}

/* ibp__track_scans in the gap: a batched copy held there records its
 * span for the flush's sync only when it says yes (serve/batch/batch.c) --
 * in a move back to scanning the mode still reads "faulting", while the
 * gap's writes are not marked yet. */
static _Atomic int gap_scans = -1;

static void wait_writer(ibp_tracked *t) {
  if (!own_move())
    return;
  gap_store(wait_page, 12);
  atomic_store(&gap_scans, ibp__track_scans(t));
  pthread_t th;
  atomic_store(&wait_bit, -1);
  CHECK(pthread_create(&th, NULL, wait_sync, NULL) == 0);
  CHECK(pthread_detach(th) == 0);
  sleep_ms(30); /* long enough for the sync to have returned, were it not
                 * held until the move marked its pages */
}

static void case_gap_wait(void) {
  skip_unless_quiet();
  arena *a = &gap_arena;
  arena_init(a, 4 * IBP__QUIET_CHUNK_PAGES);
  wait_region = protected_region(a, 0, a->npages * a->pg, 512);
  CHECK(pipe(gap_pipe) == 0);
  ibp__quiet_gap_hook = wait_writer;
  for (int dir = 0; dir < 2; dir++) {
    /* the last chunk: the second sum passes it last */
    wait_page = a->npages - 2 - (size_t)dir;
    region_clear_dirty(wait_region); /* the first move marked the chunk */
    CHECK(ibp__track_reprotect(wait_region) == 0);
    CHECK(ibp__quiet_now(wait_region,
                         dir ? IBP_TRACK_SCANNING : IBP_TRACK_FAULTING) == 0);
    for (int i = 0; i < 300 && atomic_load(&wait_bit) < 0; i++)
      sleep_ms(10);
    CHECK_EQ(atomic_load(&wait_bit), 1);
    CHECK_EQ(atomic_exchange(&gap_scans, -1), 1);
  }
  ibp__quiet_gap_hook = NULL;
  close(gap_pipe[0]);
  close(gap_pipe[1]);
  ibp__track_unprotect(wait_region);
  region_free(wait_region);
  arena_free(a);
}

/* What a move must not do: go to faulting while a write through
 * /proc/self/mem is in flight (it cannot wait for a fault: EIO); read a
 * page the application made unreadable (it would crash); lose pages
 * dropped just before it (MADV_REMOVE keeps a shared page's protection,
 * so the last scan finds it unwritten, and the fault mode was not armed
 * yet when the C library's madvise announced it). */
static void case_gap_limits(void) {
  skip_unless_quiet();
  arena a;
  arena_init(&a, 2 * IBP__QUIET_CHUNK_PAGES);
  const size_t pg = a.pg;
  ibp_tracked *r = protected_region(&a, 0, a.npages * pg, 512);

  ibp__quiet_kwrite_begin(r->base + 3 * pg, 8); /* a procmem write */
  CHECK(ibp__quiet_now(r, IBP_TRACK_FAULTING) != 0);
  ibp__quiet_kwrite_end();
  CHECK(ibp__quiet_now(r, IBP_TRACK_FAULTING) == 0);

  CHECK(syscall(SYS_mprotect, a.mem + 5 * pg, pg, PROT_NONE) == 0);
  CHECK(ibp__quiet_now(r, IBP_TRACK_SCANNING) != 0); /* no crash */
  CHECK(syscall(SYS_mprotect, a.mem + 5 * pg, pg, PROT_READ | PROT_WRITE) == 0);
  CHECK(ibp__quiet_now(r, IBP_TRACK_SCANNING) == 0);
  CHECK(syscall(SYS_mprotect, a.mem + 5 * pg, pg, PROT_NONE) == 0);
  CHECK(ibp__quiet_now(r, IBP_TRACK_FAULTING) != 0);
  CHECK(syscall(SYS_mprotect, a.mem + 5 * pg, pg, PROT_READ | PROT_WRITE) == 0);
  sync_all(r);
  region_check(&a, r);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);

  /* shared memory: a page dropped, announced, then the move, then the
   * announcement's second half (hooks_libc.c's order) */
  const size_t n = 2 * IBP__QUIET_CHUNK_PAGES;
  uint8_t *m = mmap(NULL, n * pg, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED);
  memset(m, 0x5c, n * pg);
  arena sh = {.mem = m, .npages = n, .pg = pg};
  ibp_tracked *s = protected_region(&sh, 0, n * pg, 512);
  CHECK(syscall(SYS_madvise, m + 9 * pg, pg, MADV_REMOVE) == 0);
  ibp__syncwp_dropped((uintptr_t)(m + 9 * pg), pg);
  CHECK(ibp__quiet_now(s, IBP_TRACK_FAULTING) == 0);
  ibp__quiet_dropped((uintptr_t)(m + 9 * pg), pg);
  CHECK(ibp__track_sync(s, s->base, s->bytes) == 0);
  const size_t R = s->tensor_bytes;
  for (size_t i = 9 * pg / R; i < 10 * pg / R; i++)
    CHECK(dirty_bit(s, i));
  CHECK_EQ(atomic_load(&s->dirty_tensors), pg / R);
  ibp__track_unprotect(s);
  region_free(s);
  munmap(m, n * pg);
}

/* Memory the fault mode cannot hold (a shared mapping of a disk file,
 * where userfaultfd's synchronous write protection takes only anonymous
 * and shared memory): the move gives the pages back to the scanning
 * descriptor, marks what was written between, and the region never tries
 * again.  Skipped where the temporary directory is not on a disk. */
static void case_gap_unarmable(void) {
  skip_unless_quiet();
  const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  const size_t n = 2 * IBP__QUIET_CHUNK_PAGES;
  char path[] = "/var/tmp/track_quiet_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  unlink(path);
  CHECK(ftruncate(fd, (off_t)(n * pg)) == 0);
  uint8_t *m = mmap(NULL, n * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(m != MAP_FAILED);
  arena *a = &gap_arena;
  memset(a, 0, sizeof *a);
  a->mem = m;
  a->npages = n;
  a->pg = pg;
  a->want = malloc(n * pg);
  CHECK(a->want);
  for (size_t i = 0; i < n * pg; i++)
    m[i] = a->want[i] = (uint8_t)(i * 7 + 1);
  ibp_tracked *r = region_new(a, 0, n * pg, 512);
  if (ibp__track_protect(r) != 0 ||
      strcmp(ibp__track_kind_name(r), "userfaultfd") != 0) {
    printf("skipped: the scanning tracker cannot hold a disk file here\n");
    exit(77);
  }
  CHECK(pipe(gap_pipe) == 0);
  ibp__quiet_gap_hook = gap_writer;
  gap_hook_calls = 0;
  gap_pages[0] = IBP__QUIET_CHUNK_PAGES + 3; /* a read(2) from a pipe */
  gap_pages[1] = 0;
  if (ibp__quiet_now(r, IBP_TRACK_FAULTING) == 0) {
    printf("skipped: the fault mode holds a disk file here\n");
    exit(77);
  }
  CHECK_EQ(atomic_load(&r->gap_writes), 1);
  gap_touch(gap_pages[0]);
  sync_all(r);
  region_check(a, r);
  arena_check_bytes(a);
  CHECK_EQ(gap_hook_calls, 1);
  CHECK(ibp__quiet_now(r, IBP_TRACK_FAULTING) != 0);
  CHECK_EQ(gap_hook_calls, 1); /* no second try */
  CHECK_EQ(atomic_load(&r->gap_writes), 1);
  ibp__quiet_gap_hook = NULL;
  arena_store(a, 5 * pg + 1, 0x42); /* scanning still sees writes */
  sync_all(r);
  region_check(a, r);
  close(gap_pipe[0]);
  close(gap_pipe[1]);
  ibp__track_unprotect(r);
  region_free(r);
  munmap(m, n * pg);
  free(a->want);
  close(fd);
}

/* The early fingerprint (track_quiet.c): a region whose moves its owner
 * holds (while it prepares it) is summed once by the tick; letting go
 * moves it at once (the fault thread woken) when no write was seen, from
 * that sum -- unless a write came since, when the move sums anew: a store
 * no scan found yet, and one refreshed and undone in the gap, which the
 * early sum would not tell.  Run with TRACK_TEST_QUIET=10000: no move
 * for want of writes during a case. */
static _Atomic int early_taken;
static ibp_tracked *early_r;
static _Atomic int early_gap_armed; /* the next gap of early_r: write */

static void early_seen(ibp_tracked *t) {
  (void)t;
  atomic_store(&early_taken, 1);
}

/* A region over gap_arena, its moves held, protected and summed early. */
static ibp_tracked *early_region(void) {
  arena *a = &gap_arena;
  arena_init(a, 4 * IBP__QUIET_CHUNK_PAGES);
  ibp_tracked *r = region_new(a, 0, a->npages * a->pg, 512);
  ibp__quiet_early_hook = early_seen;
  ibp__track_hold_moves(r, 1);
  CHECK(ibp__track_protect(r) == 0);
  for (int i = 0; i < 300 && !atomic_load(&early_taken); i++)
    sleep_ms(10);
  CHECK(atomic_load(&early_taken));
  CHECK_EQ(atomic_load(&r->mode), IBP_TRACK_SCANNING);
  return r;
}

/* The gap hook for a move on the fault thread: gap_writer's writes, once,
 * into early_r. */
static void early_gap_writer(ibp_tracked *t) {
  if (t != early_r || !atomic_exchange(&early_gap_armed, 0))
    return;
  gap_hook_calls++;
  for (size_t i = 0; i < 3 && gap_pages[i]; i++)
    gap_store(gap_pages[i], 100 + 8 * i);
}

static void early_end(ibp_tracked *r) {
  ibp__quiet_early_hook = NULL;
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&gap_arena);
}

/* No write: faulting as soon as it is let go; the three paths into three
 * chunks in the gap are caught against the early sum. */
static void case_early(void) {
  skip_unless_quiet();
  ibp_tracked *r = early_r = early_region();
  const size_t C = IBP__QUIET_CHUNK_PAGES;
  CHECK(pipe(gap_pipe) == 0);
  gap_pages[0] = 0 * C + 3; /* page % 3: the path (gap_store) */
  gap_pages[1] = 1 * C + 6;
  gap_pages[2] = 3 * C + 5;
  atomic_store(&early_gap_armed, 1);
  ibp__quiet_gap_hook = early_gap_writer;
  ibp__track_hold_moves(r, 0);
  wait_mode(r, IBP_TRACK_FAULTING);
  ibp__quiet_gap_hook = NULL;
  CHECK_EQ(gap_hook_calls, 1);
  CHECK_EQ(atomic_load(&ibp__quiet_early_used), 1); /* the move's first sum */
  for (size_t i = 0; i < 3; i++)
    gap_touch(gap_pages[i]);
  gap_verify(r, 3);
  close(gap_pipe[0]);
  close(gap_pipe[1]);
  early_end(r);
}

/* A store after the early sum that no copy's scan found: the move's last
 * scan marks it, and the move sums anew (no chunk caught in the gap). */
static void case_early_written(void) {
  skip_unless_quiet();
  ibp_tracked *r = early_region();
  arena *a = &gap_arena;
  arena_store(a, (2 * IBP__QUIET_CHUNK_PAGES + 1) * a->pg + 9, 0x11);
  ibp__track_hold_moves(r, 0);
  wait_mode(r, IBP_TRACK_FAULTING);
  CHECK_EQ(atomic_load(&r->gap_writes), 0);
  CHECK_EQ(atomic_load(&ibp__quiet_early_used), 0); /* summed anew */
  sync_all(r);
  region_check(a, r);
  arena_check_bytes(a);
  early_end(r);
}

/* A chunk written after the early sum, refreshed (marks cleared, its page
 * protected again), and written back to what the early sum holds in the
 * gap: caught, as the move summed anew. */
static void case_early_undone(void) {
  skip_unless_quiet();
  ibp_tracked *r = early_region();
  arena *a = &gap_arena;
  const size_t q = 2 * IBP__QUIET_CHUNK_PAGES + 4; /* q % 3 == 0: XOR */
  gap_store(q, 100); /* where gap_writer writes it (gap_pages[0]) */
  arena_touch(a, q * a->pg + 100, 1);
  sync_all(r);
  region_check(a, r);
  gap_fresh(r);
  ibp__quiet_gap_hook = gap_writer;
  gap_move(r, IBP_TRACK_FAULTING, q, 0, 0); /* XOR again: as summed */
  ibp__quiet_gap_hook = NULL;
  gap_verify(r, 1);
  early_end(r);
}

/* A device-side write lands by DMA, which write protection does not see:
 * serve/dtoh.c marks its tensors when it is queued, before its bytes land
 * -- or not at all when it was queued before the region was tracked (a
 * copy into a candidate; the preparation waits for it, ibp__dtoh_wait,
 * then reads the region).  An early sum taken before the bytes landed
 * holds older bytes than the preparation read, and writes_seen did not
 * move; a CPU write in the gap that puts those older bytes back would
 * match it.  The preparation says when the bytes landed
 * (ibp__track_landed): the move sums anew and catches the write.  The
 * DMA here is a second mapping of the same memory. */
static uint8_t *landed_page;

static void landed_gap_writer(ibp_tracked *t) {
  (void)t;
  if (own_move() && landed_page) {
    gap_hook_calls++;
    memset(landed_page, 0, (size_t)sysconf(_SC_PAGESIZE)); /* as summed */
  }
}

static void case_early_landed(void) {
  skip_unless_quiet();
  const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  const size_t C = IBP__QUIET_CHUNK_PAGES, n = 2 * C, p = C + 5;
  int fd = memfd_create("track_quiet_dma", MFD_CLOEXEC);
  CHECK(fd >= 0);
  CHECK(ftruncate(fd, (off_t)(n * pg)) == 0);
  uint8_t *m = mmap(NULL, n * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  uint8_t *dma = mmap(NULL, n * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(m != MAP_FAILED && dma != MAP_FAILED);
  memset(m, 0, n * pg);
  arena sh = {.mem = m, .npages = n, .pg = pg};
  ibp_tracked *r = region_new(&sh, 0, n * pg, 512);
  ibp__quiet_early_hook = early_seen;
  ibp__track_hold_moves(r, 1);
  if (ibp__track_protect(r) != 0 ||
      strcmp(ibp__track_kind_name(r), "userfaultfd") != 0) {
    printf("skipped: the scanning tracker cannot hold shared memory here\n");
    exit(77);
  }
  for (int i = 0; i < 300 && !atomic_load(&early_taken); i++)
    sleep_ms(10);
  CHECK(atomic_load(&early_taken));
  memset(dma + p * pg, 0x6b, pg); /* lands: no page of m written */
  ibp__track_landed(r);           /* the preparation's ibp__dtoh_wait */
  CHECK_EQ(atomic_load(&r->dirty_tensors), 0); /* it reads 0x6b */
  landed_page = m + p * pg;
  ibp__quiet_gap_hook = landed_gap_writer;
  CHECK(ibp__quiet_now(r, IBP_TRACK_FAULTING) == 0);
  ibp__quiet_gap_hook = NULL;
  CHECK_EQ(gap_hook_calls, 1);
  CHECK(ibp__track_sync(r, r->base, r->bytes) == 0);
  const size_t R = r->tensor_bytes;
  for (size_t i = p * pg / R; i < (p + 1) * pg / R; i++)
    CHECK(dirty_bit(r, i)); /* 0x6b as read, zeros now */
  ibp__quiet_early_hook = NULL;
  ibp__track_hold_moves(r, 0);
  ibp__track_unprotect(r);
  region_free(r);
  munmap(dma, n * pg);
  munmap(m, n * pg);
  close(fd);
}

/* The owner letting go wakes the tick (track_quiet.c, tick_wake): with
 * the tick's period made 30 s, a region let go with no write seen still
 * moves at once, from its early sum. */
static void case_early_wake(void) {
  skip_unless_quiet();
  ibp_tracked *r = early_region();
  atomic_store(&ibp__quiet_tick_ns, 30000000000ull);
  sleep_ms(200); /* the wait under way (50 ms) is over: the next is 30 s */
  const uint64_t t0 = ibp__real_ns();
  ibp__track_hold_moves(r, 0);
  for (int i = 0; i < 100 && atomic_load(&r->mode) != IBP_TRACK_FAULTING; i++)
    sleep_ms(10);
  CHECK_EQ(atomic_load(&r->mode), IBP_TRACK_FAULTING);
  fprintf(stderr, "moved %.1f ms after letting go\n",
          (double)(ibp__real_ns() - t0) / 1e6);
  CHECK_EQ(atomic_load(&ibp__quiet_early_used), 1);
  CHECK_EQ(atomic_load(&ibp__quiet_early_tries), 1);
  arena_store(&gap_arena, 7 * gap_arena.pg + 1, 3); /* faults */
  sync_all(r);
  region_check(&gap_arena, r);
  arena_check_bytes(&gap_arena);
  early_end(r);
}

/* An early sum that fails (a page the application made unreadable) is
 * not tried again every tick while the moves are held; the move when
 * they are let go sums for itself. */
static void case_early_failed(void) {
  skip_unless_quiet();
  arena *a = &gap_arena;
  arena_init(a, 4 * IBP__QUIET_CHUNK_PAGES);
  ibp_tracked *r = region_new(a, 0, a->npages * a->pg, 512);
  ibp__quiet_early_hook = early_seen;
  CHECK(ibp__track_protect(r) == 0);
  CHECK(syscall(SYS_mprotect, a->mem + 5 * a->pg, a->pg, PROT_NONE) == 0);
  ibp__track_hold_moves(r, 1);
  sleep_ms(600); /* 12 ticks */
  CHECK_EQ(atomic_load(&ibp__quiet_early_tries), 1);
  CHECK(!atomic_load(&early_taken));
  CHECK(syscall(SYS_mprotect, a->mem + 5 * a->pg, a->pg,
                PROT_READ | PROT_WRITE) == 0);
  sleep_ms(200);
  CHECK_EQ(atomic_load(&ibp__quiet_early_tries), 1); /* until let go */
  ibp__track_hold_moves(r, 0);
  wait_mode(r, IBP_TRACK_FAULTING);
  CHECK_EQ(atomic_load(&ibp__quiet_early_used), 0);
  arena_store(a, 9 * a->pg + 1, 3);
  sync_all(r);
  region_check(a, r);
  arena_check_bytes(a);
  early_end(r);
}

/* A large region's early sum (256 MiB: tens of milliseconds at least)
 * keeps neither the fault thread nor track_quiet.c's lock: stores into a
 * faulting region (each a fault), and calls that take the lock (the C
 * library's madvise announcing dropped pages), go on meanwhile: of those
 * begun during the sum, most end in it too (a thread may wait for a core
 * now and then).  Before, the first one begun during the sum waited for
 * all of it, and none ended in it. */
static _Atomic int aside_taken;
static _Atomic uint64_t aside_taken_ns;

static void aside_seen(ibp_tracked *t) {
  (void)t;
  atomic_store(&aside_taken_ns, ibp__real_ns());
  atomic_store(&aside_taken, 1);
}

static void case_early_aside(void) {
  skip_unless_quiet();
  const size_t pg = (size_t)sysconf(_SC_PAGESIZE), big = 256u << 20;
  arena a;
  arena_init(&a, 1000);
  ibp_tracked *r = protected_region(&a, 0, a.npages * pg, 512);
  quiet(r);
  uint8_t *m = mmap(NULL, big, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  uint8_t *other = mmap(NULL, pg, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED && other != MAP_FAILED);
  memset(m, 0x5a, big);
  arena ab = {.mem = m, .npages = big / pg, .pg = pg};
  ibp_tracked *b = region_new(&ab, 0, big, 1u << 20);
  ibp__quiet_early_hook = aside_seen;
  ibp__track_hold_moves(b, 1);
  const uint64_t t0 = ibp__real_ns();
  CHECK(ibp__track_protect(b) == 0);
  static uint64_t began[1000], ended[1000]; /* 0: before the sum began */
  uint64_t worst = 0;
  size_t p = 0;
  while (!atomic_load(&aside_taken)) {
    CHECK(p < a.npages); /* (2 ms a page: the sum took over 2 s) */
    const int during = atomic_load(&ibp__quiet_early_tries) > 0;
    const uint64_t s = ibp__real_ns();
    arena_store(&a, p * pg + 3, 0x21);        /* a fault */
    ibp__quiet_dropped((uintptr_t)other, pg); /* takes the lock */
    const uint64_t e = ibp__real_ns();
    worst = e - s > worst ? e - s : worst;
    began[p] = during ? s : 0;
    ended[p++] = during ? e : 0;
    sleep_ms(2); /* under IBP__QUIET_BUSY_FAULTS a tick: r stays put */
  }
  const uint64_t done = atomic_load(&aside_taken_ns);
  size_t begun = 0, inside = 0; /* begun during the sum; ended in it too */
  for (size_t i = 0; i < p; i++) {
    begun += began[i] && began[i] < done;
    inside += began[i] && ended[i] < done;
  }
  fprintf(stderr,
          "early sum within %.1f ms; of %zu stores, %zu begun in it, %zu "
          "ended in it too; the slowest %.2f ms\n",
          (double)(done - t0) / 1e6, p, begun, inside, (double)worst / 1e6);
  CHECK(begun >= 1);
  CHECK(inside * 2 >= begun);
  sync_all(r);
  region_check(&a, r);
  arena_check_bytes(&a);
  ibp__quiet_early_hook = NULL;
  ibp__track_hold_moves(b, 0);
  ibp__track_unprotect(b);
  ibp__track_unprotect(r);
  region_free(b);
  region_free(r);
  munmap(m, big);
  munmap(other, pg);
  arena_free(&a);
}

/* The application closes descriptors it did not open (close_range before
 * exec, a daemon's loop): libibp's userfaultfds and pagemap.  Nothing it
 * then does sees libibp: no thread spins on the closed numbers, a number
 * reused for the application's pipe is neither read nor written, a store
 * into the faulting region succeeds -- and is not lost: the region counts
 * as written throughout and goes back to scanning. */
static int closed_ours(void) {
  int n = 0;
  for (int fd = 3; fd < 1024; fd++) {
    char path[64], link[256];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(path, link, sizeof link - 1);
    if (len <= 0)
      continue;
    link[len] = 0;
    if (strstr(link, "userfaultfd") || strstr(link, "eventfd") ||
        strstr(link, "pagemap")) {
      CHECK(close(fd) == 0);
      n++;
    }
  }
  return n;
}

static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void case_fd_closed(void) {
  skip_unless_quiet();
  arena a;
  arena_init(&a, 4 * IBP__QUIET_CHUNK_PAGES);
  const size_t pg = a.pg;
  ibp_tracked *r = protected_region(&a, 0, a.npages * pg, 512);
  quiet(r);
  arena_store(&a, 2 * pg + 1, 9);
  const int closed = closed_ours();
  CHECK(closed >= 2); /* both userfaultfds, the pagemap file */
  const double c0 = cpu_ms();
  sleep_ms(300);
  const double spent = cpu_ms() - c0;
  fprintf(stderr, "%d closed; %.1f ms of CPU in 300 ms\n", closed, spent);
  CHECK(spent < 60); /* no thread spinning on POLLNVAL */
  int pipes[8][2], n = 0;
  for (; n < 8; n++) { /* the closed numbers, reused */
    CHECK(pipe(pipes[n]) == 0);
    CHECK(write(pipes[n][1], "appdata!", 8) == 8);
  }
  arena_store(&a, 20 * pg + 5, 7); /* into the faulting region */
  ibp__track_hold_moves(r, 1);
  ibp__track_hold_moves(r, 0); /* wakes the tick */
  sleep_ms(1500);
  for (int i = 0; i < n; i++) { /* exactly what the application wrote */
    char buf[16];
    CHECK(fcntl(pipes[i][0], F_SETFL, O_NONBLOCK) == 0);
    CHECK_EQ(read(pipes[i][0], buf, sizeof buf), 8);
    CHECK(!memcmp(buf, "appdata!", 8));
    close(pipes[i][0]);
    close(pipes[i][1]);
  }
  wait_mode(r, IBP_TRACK_SCANNING);
  arena_store(&a, 40 * pg + 5, 6);
  (void)ibp__track_sync(r, r->base, r->bytes); /* -1: no longer tracked */
  for (size_t p = 0; p < a.npages; p++)
    a.released[p] = true; /* every tensor counts as written */
  region_check(&a, r);
  arena_check_bytes(&a);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* An edge page shared by a region the userfaultfd tracker holds and one
 * the mprotect tracker holds (its memory refused by userfaultfd, or
 * IBP_TRACKER given per process before a fallback): the page is
 * write-protected by both, each tracker catches each write there
 * (the mprotect fault comes first, then the userfaultfd one), in either
 * of the userfaultfd tracker's modes, and after each region's
 * re-protection.  CPU stores and read(2) through the C library (announced
 * to the mprotect tracker), into either region's part. */
static void mixed_write(arena *a, ibp_tracked *ra, ibp_tracked *rb, size_t off,
                        int via_read) {
  if (via_read) {
    int fds[2];
    CHECK(pipe(fds) == 0);
    CHECK(write(fds[1], "mixed", 5) == 5);
    CHECK(read(fds[0], a->mem + off, 5) == 5);
    memcpy(a->want + off, "mixed", 5);
    arena_touch(a, off, 5);
    close(fds[0]);
    close(fds[1]);
  } else {
    arena_store(a, off, (uint8_t)(off * 3 + 1));
  }
  sync_all(ra);
  CHECK(ibp__track_sync(rb, rb->base, rb->bytes) == 0);
  region_check(a, ra);
  region_check(a, rb);
  arena_check_bytes(a);
}

/* Both regions refreshed: nothing dirty, every page protected again. */
static void mixed_fresh(arena *a, ibp_tracked *ra, ibp_tracked *rb) {
  region_clear_dirty(ra);
  region_clear_dirty(rb);
  memset(a->released, 0, sizeof a->released);
  CHECK(ibp__track_reprotect(ra) == 0);
  CHECK(ibp__track_reprotect(rb) == 0);
}

static void case_mixed_edge(void) {
  skip_unless_quiet();
  arena a;
  arena_init(&a, 12);
  const size_t pg = a.pg, edge = 6 * pg;
  /* tensors of both on the edge page: ra's up to edge + 1000 */
  ibp_tracked *ra = protected_region(&a, 0, edge + 1000, 200);
  ibp_tracked *rb = region_new(&a, edge + 1100, 6 * pg - 1100, 500);
  CHECK(ibp__prot_protect(rb) == 0);
  atomic_store(&rb->kind, IBP_TRACKER_KIND_MPROTECT);
  for (int faulting = 0; faulting < 2; faulting++) {
    if (faulting)
      quiet(ra); /* its end is not page-aligned: it moves all the same */
    for (int via_read = 0; via_read < 2; via_read++) {
      mixed_fresh(&a, ra, rb);
      mixed_write(&a, ra, rb, edge + 40 + (size_t)via_read * 8, via_read);
      mixed_fresh(&a, ra, rb);
      mixed_write(&a, ra, rb, edge + 1300 + (size_t)via_read * 8, via_read);
      mixed_write(&a, ra, rb, edge + 60, 0); /* the page writable now */
    }
    CHECK_EQ(atomic_load(&ra->mode),
             faulting ? IBP_TRACK_FAULTING : IBP_TRACK_SCANNING);
  }
  ibp__track_unprotect(rb);
  ibp__track_unprotect(ra);
  region_free(ra);
  region_free(rb);
  arena_free(&a);
}

int main(int argc, char **argv) {
  main_thread = pthread_self();
  static const test_case cases[] = {
      {"calls", case_calls},
      {"paths", case_paths},
      {"busy", case_busy},
      {"reprotect", case_reprotect},
      {"unaligned", case_unaligned},
      {"race", case_race},
      {"raced_scan", case_raced_scan},
      {"gap", case_gap},
      {"gap_wait", case_gap_wait},
      {"gap_limits", case_gap_limits},
      {"gap_unarmable", case_gap_unarmable},
      {"early", case_early},
      {"early_written", case_early_written},
      {"early_undone", case_early_undone},
      {"early_landed", case_early_landed},
      {"early_wake", case_early_wake},
      {"early_failed", case_early_failed},
      {"early_aside", case_early_aside},
      {"fd_closed", case_fd_closed},
      {"mixed_edge", case_mixed_edge},
  };
  return run_case(cases, sizeof cases / sizeof *cases, argc, argv);
}
