/*
 * The compact tracker (preload/track/track_compact.c): released pages come
 * back with their bytes on any access -- CPU loads and stores, the kernel
 * reading or writing them for a system call, several threads at once --
 * writes mark exactly the tensors of the pages they touch dirty (the model
 * of track_test.h), a page written since its protection or whose rebuild
 * does not give its bytes is never released, and unprotect gives every
 * byte back.  The "compressed copy" here is a plain copy of the bytes,
 * taken when the test says the region was compressed.
 *
 * Run under no_uffd user (TRACK_TEST_UFFD_USER=1), userfaultfd serves
 * user-mode faults only, as for an unprivileged process under
 * vm.unprivileged_userfaultfd=0: the libc hooks must then prepare every
 * kernel-side access (cases libc, kernel_race).  Exits 77 (skipped) where
 * userfaultfd is missing or lacks write protection.
 */
#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

#include "track_test.h"

/* The owner's side: the copy the tracker rebuilds from. */
typedef struct owner {
  arena *a;
  ibp_tracked *r;
  uint8_t *copy; /* the bytes "compressed", per arena offset */
  int corrupt;   /* rebuilds give one wrong byte */
  int refuse;    /* nothing is releasable */
} owner;

static int rebuild(void *arg, uintptr_t addr, size_t len, uint8_t *out) {
  owner *o = arg;
  memcpy(out, o->copy + (addr - (uintptr_t)o->a->mem), len);
  if (o->corrupt)
    out[len / 2] ^= 1;
  return 0;
}

static int releasable(void *arg, uintptr_t addr, size_t len) {
  owner *o = arg;
  const ibp_tracked *r = o->r;
  const uintptr_t R = r->tensor_bytes;
  const uintptr_t tend = r->base + r->bytes / R * R;
  if (o->refuse || addr < r->base || addr + len > tend)
    return 0;
  for (uintptr_t i = (addr - r->base) / R; i <= (addr + len - 1 - r->base) / R;
       i++)
    if (dirty_bit(r, i))
      return 0;
  return 1;
}

static const ibp_compact_ops ops = {rebuild, releasable, NULL};
static ibp_compact_ops ops_of[4];

/* A compact region over the whole arena (whose mapping starts a page), the
 * copy taken now. */
static ibp_tracked *compact_region(arena *a, owner *o, size_t bytes,
                                   uint32_t R) {
  static int next;
  ibp_tracked *r = region_new(a, 0, bytes, R);
  *o = (owner){a, r, malloc(a->npages * a->pg), 0, 0};
  CHECK(o->copy);
  memcpy(o->copy, a->mem, a->npages * a->pg);
  ibp_compact_ops *k = &ops_of[next++ % 4];
  *k = ops;
  k->arg = o;
  r->compact = k;
  if (ibp__track_protect(r) != 0) {
    printf("compact regions unavailable here: skipped\n");
    exit(77);
  }
  CHECK(!strcmp(ibp__track_kind_name(r), "compact"));
  return r;
}

/* Tracking ends (every byte back), then everything goes. */
static void close_region(arena *a, owner *o) {
  ibp__track_unprotect(o->r);
  region_free(o->r);
  free(o->copy);
  arena_free(a);
}

/* The same, the bytes checked once the tracking has ended. */
static void finish(arena *a, owner *o) {
  ibp__track_unprotect(o->r);
  arena_check_bytes(a);
  close_region(a, o);
}

static int resident(const void *p) {
  uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
  unsigned char v = 0;
  CHECK(mincore((void *)((uintptr_t)p & ~(pg - 1)), pg, &v) == 0);
  return v & 1;
}

static size_t whole_pages(const arena *a, const ibp_tracked *r) {
  return r->bytes / r->tensor_bytes * r->tensor_bytes / a->pg;
}

/* Released, then every byte read back: each page rebuilt once, nothing
 * dirty, the memory no longer resident in between. */
static void loads_with(uint32_t R, size_t bytes) {
  arena a;
  arena_init(&a, bytes / 4096 + 2);
  owner o;
  ibp_tracked *r = compact_region(&a, &o, bytes, R);
  long n = ibp__track_release(r);
  CHECK_EQ(n, whole_pages(&a, r));
  CHECK(ibp__track_resident_bytes(r) <=
        (long long)((a.npages - (size_t)n) * a.pg));
  CHECK_EQ(ibp__track_release(r), 0); /* nothing left to release */
  for (size_t p = 0; p < (size_t)n; p++)
    CHECK(!resident(a.mem + p * a.pg));
  arena_check_bytes(&a);
  CHECK_EQ(atomic_load(&r->pages_rebuilt), (uint64_t)n);
  region_check(&a, r);                /* loads mark nothing */
  CHECK_EQ(ibp__track_release(r), n); /* read back: releasable again */
  ibp__track_unprotect(r);
  arena_check_bytes(&a);
  CHECK(!strcmp(ibp__track_kind_name(r), "compact"));
  region_free(r);
  free(o.copy);
  arena_free(&a);
}

static void case_loads(void) {
  loads_with(1000, 16 * 4096 + 1234);
  loads_with(8192, 5 * 8192 + 5000);
  loads_with(4096, 12 * 4096);
  loads_with(100, 7 * 4096 + 50);
}

/* Stores to released and resident pages: the bytes land, exactly the
 * tensors of the touched pages are dirty, and the written pages stay until
 * a re-protection and a new copy make them releasable again. */
static void stores_with(uint32_t R, size_t bytes) {
  arena a;
  arena_init(&a, bytes / 4096 + 2);
  owner o;
  ibp_tracked *r = compact_region(&a, &o, bytes, R);
  const size_t pg = a.pg, pages = whole_pages(&a, r);
  CHECK_EQ(ibp__track_release(r), pages);
  size_t spots[] = {0, 1, 3 * pg + 17, 5 * pg - 1, bytes - 1, 2 * pg};
  for (size_t k = 0; k < sizeof spots / sizeof spots[0]; k++) {
    arena_store(&a, spots[k], (uint8_t)(k + 1));
    region_check(&a, r);
  }
  arena_check_bytes(&a); /* every page back, written or read */
  /* written pages, and those of their now dirty tensors, stay */
  long n = ibp__track_release(r);
  size_t clean = 0;
  for (size_t p = 0; p < pages; p++)
    clean += releasable(&o, r->base + p * pg, pg) ? 1 : 0;
  CHECK_EQ(n, clean);
  for (size_t p = 0; p < pages; p++)
    if (!releasable(&o, r->base + p * pg, pg))
      CHECK(resident(a.mem + p * pg));
  for (size_t k = 0; k < sizeof spots / sizeof spots[0]; k++)
    CHECK(resident(a.mem + spots[k]));
  CHECK(!ibp__track_still_protected(r, r->base, pg));
  /* the owner's refresh: re-protect, take the new bytes, clear dirty */
  CHECK(ibp__track_reprotect(r) == 0);
  CHECK(ibp__track_still_protected(r, r->base, r->bytes));
  memcpy(o.copy, a.want, a.npages * pg);
  region_clear_dirty(r);
  memset(a.released, 0, sizeof a.released);
  CHECK(ibp__track_release(r) > 0);
  arena_check_bytes(&a);
  region_check(&a, r);
  close_region(&a, &o);
}

static void case_stores(void) {
  stores_with(1000, 16 * 4096 + 1234);
  stores_with(8192, 5 * 8192 + 5000);
  stores_with(100, 7 * 4096 + 50);
}

/* The kernel reads a released page (write(2) to a pipe) and writes one
 * (read(2) from a pipe, process_vm_writev): no EFAULT, the right bytes, and
 * the written tensors dirty. */
static void case_kernel(void) {
  arena a;
  arena_init(&a, 10);
  owner o;
  const size_t pg = a.pg;
  ibp_tracked *r = compact_region(&a, &o, 8 * pg, 512);
  CHECK_EQ(ibp__track_release(r), 8);
  int p[2];
  CHECK(pipe(p) == 0);
  uint8_t back[300];
  CHECK_EQ(write(p[1], a.mem + 2 * pg + 100, sizeof back), sizeof back);
  CHECK_EQ(read(p[0], back, sizeof back), sizeof back);
  CHECK(!memcmp(back, a.want + 2 * pg + 100, sizeof back));
  region_check(&a, r);
  uint8_t in[200];
  for (size_t i = 0; i < sizeof in; i++)
    in[i] = (uint8_t)(250 - i);
  CHECK_EQ(write(p[1], in, sizeof in), sizeof in);
  CHECK_EQ(read(p[0], a.mem + 5 * pg - 50, sizeof in), sizeof in);
  memcpy(a.want + 5 * pg - 50, in, sizeof in);
  arena_touch(&a, 5 * pg - 50, sizeof in);
  struct iovec local = {in, 64}, remote = {a.mem + 7 * pg + 3, 64};
  CHECK_EQ(process_vm_writev(getpid(), &local, 1, &remote, 1, 0), 64);
  memcpy(a.want + 7 * pg + 3, in, 64);
  arena_touch(&a, 7 * pg + 3, 64);
  arena_check_bytes(&a);
  region_check(&a, r);
  close(p[0]);
  close(p[1]);
  close_region(&a, &o);
}

/* The owner's refresh after a re-protection: the bytes of each dirty
 * tensor (of R) whose pages stayed protected become the copy's, and it is
 * clean again; the others stay dirty. */
static void take_dirty(owner *o, size_t bytes, size_t R) {
  ibp_tracked *r = o->r;
  for (size_t i = 0; i < bytes / R; i++) {
    uint32_t bit = 1u << (i % 32);
    if (!(atomic_fetch_and(&r->dirty[i / 32], ~bit) & bit))
      continue;
    if (ibp__track_still_protected(r, r->base + i * R, R))
      memcpy(o->copy + i * R, o->a->mem + i * R, R);
    else
      atomic_fetch_or(&r->dirty[i / 32], bit);
  }
}

/* Whether userfaultfd serves user-mode faults only here (the test runs
 * under no_uffd user): then the libc hooks alone keep system calls
 * working, and one that bypasses them fails with EFAULT. */
static int user_mode_only(void) {
  const char *e = getenv("TRACK_TEST_UFFD_USER");
  return e && *e == '1';
}

/* The kernel's own view of released memory, bypassing the hooks: works
 * where userfaultfd serves kernel-mode faults, EFAULT where it does not. */
static void raw_syscalls(arena *a, ibp_tracked *r, int fd_w) {
  CHECK(ibp__track_release(r) >= 0);
  uint8_t *spot = NULL;
  for (size_t p = 0; p < a->npages && !spot; p++)
    if (!resident(a->mem + p * a->pg))
      spot = a->mem + p * a->pg;
  CHECK(spot);
  long rc = syscall(SYS_write, fd_w, spot, 16);
  if (user_mode_only()) {
    CHECK_EQ(rc, -1);
    CHECK_EQ(errno, EFAULT);
  } else {
    CHECK_EQ(rc, 16);
  }
}

/* Every hooked C-library call that lets the kernel read or write compact
 * memory, on released pages: the bytes move, exactly the tensors of the
 * pages written are dirty, nothing fails. */
static void case_libc(void) {
  arena a;
  arena_init(&a, 40);
  owner o;
  const size_t pg = a.pg, bytes = 38 * pg;
  ibp_tracked *r = compact_region(&a, &o, bytes, 1024);
  uint8_t in[3 * 4096 + 77], out[sizeof in];
  for (size_t i = 0; i < sizeof in; i++)
    in[i] = (uint8_t)(i * 7 + 3);
  int p[2], sv[2];
  CHECK(pipe(p) == 0);
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  FILE *f = tmpfile();
  CHECK(f);
  const int fd = fileno(f);
/* the bytes at offset `at` now hold `src` (a kernel write) */
#define LANDED(at, src, n)                                                     \
  do {                                                                         \
    memcpy(a.want + (at), (src), (n));                                         \
    arena_touch(&a, (at), (n));                                                \
  } while (0)
/* the kernel read n bytes at `at` into out: they were the region's */
#define READ_BACK(at, n) CHECK(!memcmp(out, a.want + (at), (n)))

  /* read(2)/write(2) through a pipe */
  CHECK(ibp__track_release(r) > 0);
  CHECK_EQ(write(p[1], a.mem + 2 * pg + 100, 300), 300);
  CHECK_EQ(read(p[0], out, 300), 300);
  READ_BACK(2 * pg + 100, 300);
  CHECK_EQ(write(p[1], in, 200), 200);
  CHECK_EQ(read(p[0], a.mem + 5 * pg - 50, 200), 200);
  LANDED(5 * pg - 50, in, 200);
  /* pwrite/pread on a file */
  ibp__track_release(r);
  CHECK_EQ(pwrite(fd, a.mem + 9 * pg + 1, 2 * pg, 0), (ssize_t)(2 * pg));
  CHECK_EQ(pread(fd, out, 2 * pg, 0), (ssize_t)(2 * pg));
  READ_BACK(9 * pg + 1, 2 * pg);
  CHECK_EQ(pwrite(fd, in, 500, 0), 500);
  CHECK_EQ(pread(fd, a.mem + 12 * pg + 4000, 500, 0), 500);
  LANDED(12 * pg + 4000, in, 500);
  /* writev/readv over two released spans */
  ibp__track_release(r);
  struct iovec wv[2] = {{a.mem + 14 * pg, 100}, {a.mem + 16 * pg + 9, 50}};
  CHECK_EQ(writev(p[1], wv, 2), 150);
  CHECK_EQ(read(p[0], out, 150), 150);
  CHECK(!memcmp(out, a.want + 14 * pg, 100));
  CHECK(!memcmp(out + 100, a.want + 16 * pg + 9, 50));
  CHECK_EQ(write(p[1], in, 150), 150);
  struct iovec rv[2] = {{a.mem + 18 * pg + 5, 70},
                        {a.mem + 19 * pg + 4090, 80}};
  CHECK_EQ(readv(p[0], rv, 2), 150);
  LANDED(18 * pg + 5, in, 70);
  LANDED(19 * pg + 4090, in + 70, 80);
  /* send/recv, sendmsg/recvmsg on a socket */
  ibp__track_release(r);
  CHECK_EQ(send(sv[0], a.mem + 21 * pg + 7, 400, 0), 400);
  CHECK_EQ(recv(sv[1], out, 400, MSG_WAITALL), 400);
  READ_BACK(21 * pg + 7, 400);
  CHECK_EQ(send(sv[0], in, 300, 0), 300);
  CHECK_EQ(recv(sv[1], a.mem + 23 * pg + 3000, 300, MSG_WAITALL), 300);
  LANDED(23 * pg + 3000, in, 300);
  struct iovec mv = {a.mem + 25 * pg + 11, 600};
  struct msghdr m = {.msg_iov = &mv, .msg_iovlen = 1};
  CHECK_EQ(sendmsg(sv[0], &m, 0), 600);
  CHECK_EQ(recv(sv[1], out, 600, MSG_WAITALL), 600);
  READ_BACK(25 * pg + 11, 600);
  CHECK_EQ(send(sv[0], in, 600, 0), 600);
  mv.iov_base = a.mem + 27 * pg + 2000;
  CHECK_EQ(recvmsg(sv[1], &m, MSG_WAITALL), 600);
  LANDED(27 * pg + 2000, in, 600);
  /* stdio: requests this large go straight between the buffer and the
   * file */
  ibp__track_release(r);
  CHECK(fseek(f, 0, SEEK_SET) == 0);
  CHECK_EQ(fwrite(a.mem + 29 * pg + 3, 1, sizeof out, f), sizeof out);
  CHECK(fflush(f) == 0);
  CHECK_EQ(pread(fd, out, sizeof out, 0), (ssize_t)sizeof out);
  READ_BACK(29 * pg + 3, sizeof out);
  CHECK_EQ(pwrite(fd, in, sizeof in, 0), (ssize_t)sizeof in);
  CHECK(fseek(f, 0, SEEK_SET) == 0);
  CHECK_EQ(fread(a.mem + 33 * pg + 5, 1, sizeof in, f), sizeof in);
  LANDED(33 * pg + 5, in, sizeof in);
#undef LANDED
#undef READ_BACK
  raw_syscalls(&a, r, p[1]);
  arena_check_bytes(&a);
  region_check(&a, r);
  fclose(f);
  close(p[0]);
  close(p[1]);
  close(sv[0]);
  close(sv[1]);
  ibp__track_unprotect(r);
  arena_check_bytes(&a);
  region_free(r);
  free(o.copy);
  arena_free(&a);
}

/* Threads move bytes in and out of the region with read(2)/write(2)
 * through pipes while it is released and re-protected over and over: no
 * call fails, no byte is lost (the hooks' hold keeps prepared pages as
 * they were until the call returns). */
typedef struct kracer {
  arena *a;
  unsigned seed;
  size_t stripe, stripes; /* owns tensors congruent to stripe */
  _Atomic int *stop;
  _Atomic long calls;
} kracer;

static void *kernel_racer(void *arg) {
  kracer *w = arg;
  arena *a = w->a;
  unsigned s = w->seed;
  int p[2];
  CHECK(pipe(p) == 0);
  uint8_t buf[3000], back[3000];
  while (!atomic_load(w->stop)) {
    s = s * 1103515245u + 12345u;
    size_t tensors = a->npages * a->pg / 1024 / w->stripes;
    size_t t = ((s >> 8) % tensors) * w->stripes + w->stripe;
    size_t len = 1 + (s >> 4) % 1000, off = t * 1024 + (s >> 12) % 24;
    for (size_t i = 0; i < len; i++)
      buf[i] = (uint8_t)(s + i);
    CHECK_EQ(write(p[1], buf, len), len);
    CHECK_EQ(read(p[0], a->mem + off, len), len);
    memcpy(a->want + off, buf, len);
    /* and back out through the kernel */
    s = s * 1103515245u + 12345u;
    t = ((s >> 8) % tensors) * w->stripes + w->stripe;
    off = t * 1024 + (s >> 12) % 24;
    CHECK_EQ(write(p[1], a->mem + off, len), len);
    CHECK_EQ(read(p[0], back, len), len);
    CHECK(!memcmp(back, a->want + off, len));
    atomic_fetch_add(&w->calls, 1);
    usleep(20); /* room for the refreshes, which wait for no call in flight */
  }
  close(p[0]);
  close(p[1]);
  return NULL;
}

static void case_kernel_race(void) {
  arena a;
  arena_init(&a, 64);
  owner o;
  const size_t bytes = 64 * a.pg, R = 1024;
  ibp_tracked *r = compact_region(&a, &o, bytes, R);
  _Atomic int stop = 0;
  kracer w[2];
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    w[i] = (kracer){&a, (unsigned)i * 77 + 5, (size_t)i, 2, &stop, 0};
    CHECK(pthread_create(&th[i], NULL, kernel_racer, &w[i]) == 0);
  }
  /* until both sides made progress (10 s at most) */
  long rounds = 0;
  const time_t deadline = time(NULL) + 10;
  while (time(NULL) < deadline &&
         (rounds < 200 || atomic_load(&w[0].calls) < 200 ||
          atomic_load(&w[1].calls) < 200)) {
    ibp__track_release(r);
    if (ibp__track_reprotect(r) != 0)
      continue; /* a hooked call in flight: the refresh waits */
    rounds++;
    take_dirty(&o, bytes, R);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  printf("%ld refresh rounds, %ld + %ld calls\n", rounds,
         atomic_load(&w[0].calls), atomic_load(&w[1].calls));
  CHECK(rounds > 0 && w[0].calls > 0 && w[1].calls > 0);
  arena_check_bytes(&a);
  finish(&a, &o);
}

/* A rebuild that would not give the page's bytes never releases it; a
 * region the owner calls unreleasable keeps every page. */
static void case_verify(void) {
  arena a;
  arena_init(&a, 6);
  owner o;
  ibp_tracked *r = compact_region(&a, &o, 4 * a.pg, 1024);
  o.corrupt = 1;
  CHECK_EQ(ibp__track_release(r), 0);
  o.corrupt = 0;
  o.refuse = 1;
  CHECK_EQ(ibp__track_release(r), 0);
  CHECK_EQ(ibp__track_resident_bytes(r), (long long)(4 * a.pg));
  o.refuse = 0;
  /* a copy that no longer matches (the owner's bug): nothing released */
  o.copy[a.pg + 9] ^= 0x40;
  CHECK_EQ(ibp__track_release(r), 3);
  arena_check_bytes(&a);
  close_region(&a, &o);
}

/* Threads store into random spots while the region is released over and
 * over: no store is lost. */
typedef struct racer {
  arena *a;
  unsigned seed;
  size_t limit;
  _Atomic int *stop;
} racer;

static void *race_writer(void *arg) {
  racer *w = arg;
  unsigned s = w->seed;
  while (!atomic_load(w->stop)) {
    s = s * 1103515245u + 12345u;
    size_t off = (s >> 8) % w->limit;
    /* each writer owns the bytes congruent to its seed mod 4 */
    off = off / 4 * 4 + w->seed % 4;
    uint8_t v = (uint8_t)(s >> 3);
    w->a->mem[off] = v;
    w->a->want[off] = v;
  }
  return NULL;
}

static void case_race(void) {
  arena a;
  arena_init(&a, 64);
  owner o;
  const size_t bytes = 64 * a.pg;
  ibp_tracked *r = compact_region(&a, &o, bytes, 4096);
  _Atomic int stop = 0;
  racer w[3];
  pthread_t th[3];
  for (int i = 0; i < 3; i++) {
    w[i] = (racer){&a, (unsigned)i + 1, bytes, &stop};
    CHECK(pthread_create(&th[i], NULL, race_writer, &w[i]) == 0);
  }
  for (int round = 0; round < 200; round++) {
    ibp__track_release(r);
    /* a refresh: re-protect, then take the bytes of the dirty tensors
     * whose pages stayed protected */
    CHECK(ibp__track_reprotect(r) == 0);
    take_dirty(&o, bytes, 4096);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < 3; i++)
    pthread_join(th[i], NULL);
  arena_check_bytes(&a);
  finish(&a, &o);
}

int main(int argc, char **argv) {
  const test_case cases[] = {{"loads", case_loads},
                             {"stores", case_stores},
                             {"kernel", case_kernel},
                             {"verify", case_verify},
                             {"race", case_race},
                             {"libc", case_libc},
                             {"kernel_race", case_kernel_race}};
  return run_case(cases, sizeof cases / sizeof cases[0], argc, argv);
}
