/*
 * The C-library hooks (preload/track/hooks_libc.c): kernel-side writes into a
 * protected region must succeed with the right bytes, mark the right
 * tensors dirty and never fault; results and errno are the real ones;
 * re-protection (a recompression) never makes one fail halfway, and never
 * undoes the application's own mprotect.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "track_test.h"

/* The fortified entry points (not declared without _FORTIFY_SOURCE). */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);

static uint8_t file_byte(size_t i) {
  return (uint8_t)((i * 7 + 3) ^ (i >> 9));
}

/* An unlinked temporary file of `size` bytes of file_byte. */
static int make_file(size_t size) {
  const char *dir = getenv("TMPDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/ibp_track_XXXXXX", dir ? dir : "/tmp");
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  unlink(path);
  uint8_t buf[4096];
  for (size_t off = 0; off < size; off += sizeof buf) {
    size_t n = size - off < sizeof buf ? size - off : sizeof buf;
    for (size_t i = 0; i < n; i++)
      buf[i] = file_byte(off + i);
    CHECK(write(fd, buf, n) == (ssize_t)n);
  }
  CHECK(lseek(fd, 0, SEEK_SET) == 0);
  return fd;
}

/* The model: [off, off+len) of the arena now holds the file's bytes from
 * file offset `from`, written by the kernel. */
static void got_file(arena *a, size_t off, size_t len, size_t from) {
  for (size_t i = 0; i < len; i++)
    a->want[off + i] = file_byte(from + i);
  arena_touch(a, off, len);
}

static void case_read(void) {
  arena a;
  arena_init(&a, 24);
  size_t pg = a.pg;
  ibp_tracked *r = region_new(&a, 0, 20 * pg, 1000);
  CHECK(ibp__track_protect(r) == 0);
  int fd = make_file(8 * pg);

  CHECK(read(fd, a.mem + 100, 2 * pg + 5) == (ssize_t)(2 * pg + 5));
  got_file(&a, 100, 2 * pg + 5, 0);
  region_check(&a, r);
  CHECK(page_prot(a.mem + 3 * pg) == 'r');

  CHECK(pread(fd, a.mem + 5 * pg + 10, 3000, 1234) == 3000);
  got_file(&a, 5 * pg + 10, 3000, 1234);
  CHECK(pread64(fd, a.mem + 6 * pg + 4090, 100, 5000) == 100);
  got_file(&a, 6 * pg + 4090, 100, 5000);
  region_check(&a, r);

  struct iovec iov[2] = {{a.mem + 8 * pg + 4000, 200},
                         {a.mem + 11 * pg + 1, 50}};
  CHECK(lseek(fd, 0, SEEK_SET) == 0);
  CHECK(readv(fd, iov, 2) == 250);
  got_file(&a, 8 * pg + 4000, 200, 0);
  got_file(&a, 11 * pg + 1, 50, 200);
  region_check(&a, r);

  iov[0] = (struct iovec){a.mem + 13 * pg + 5, 10};
  iov[1] = (struct iovec){a.mem + 15 * pg + 3, pg};
  CHECK(preadv(fd, iov, 2, 777) == (ssize_t)(10 + pg));
  got_file(&a, 13 * pg + 5, 10, 777);
  got_file(&a, 15 * pg + 3, pg, 787);
  iov[0] = (struct iovec){a.mem + 17 * pg + 64, 64};
  CHECK(preadv64(fd, iov, 1, 4096) == 64);
  got_file(&a, 17 * pg + 64, 64, 4096);
  region_check(&a, r);

  CHECK(lseek(fd, 0, SEEK_SET) == 0);
  CHECK(__read_chk(fd, a.mem + 18 * pg + 1, 10, 10) == 10);
  got_file(&a, 18 * pg + 1, 10, 0);
  region_check(&a, r);

  uint8_t local[64]; /* outside any region, while tracking is on */
  CHECK(pread(fd, local, sizeof local, 3) == (ssize_t)sizeof local);
  for (size_t i = 0; i < sizeof local; i++)
    CHECK(local[i] == file_byte(3 + i));

  CHECK_EQ(atomic_load(&r->write_faults), 0);
  arena_check_bytes(&a);
  ibp__track_unprotect(r);
  close(fd);
  region_free(r);
  arena_free(&a);
}

/* fread of more than glibc's buffer goes straight to read(2). */
static void case_fread(void) {
  arena a;
  arena_init(&a, 80);
  size_t pg = a.pg;
  ibp_tracked *r = region_new(&a, 0, 76 * pg, 3000);
  CHECK(ibp__track_protect(r) == 0);
  int fd = make_file(256 * 1024 + 123);
  FILE *f = fdopen(fd, "rb");
  CHECK(f);
  CHECK(fread(a.mem + 2 * pg + 7, 1, 200000, f) == 200000);
  got_file(&a, 2 * pg + 7, 200000, 0);
  region_check(&a, r);
  CHECK(fread(a.mem + 60 * pg + 3, 10000, 2, f) == 2);
  got_file(&a, 60 * pg + 3, 20000, 200000);
  CHECK(fread_unlocked(a.mem + 70 * pg, 1, 100, f) == 100);
  got_file(&a, 70 * pg, 100, 220000);
  CHECK(__fread_chk(a.mem + 72 * pg + 9, 5000, 1, 5000, f) == 5000);
  got_file(&a, 72 * pg + 9, 5000, 220100);
  region_check(&a, r);
  CHECK_EQ(atomic_load(&r->write_faults), 0);
  arena_check_bytes(&a);
  fclose(f);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

static void fill_pattern(uint8_t *p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t)(i * 13 + seed);
}

static void case_recv(void) {
  arena a;
  arena_init(&a, 24);
  size_t pg = a.pg;
  ibp_tracked *r = region_new(&a, 0, 22 * pg, 512);
  CHECK(ibp__track_protect(r) == 0);
  static uint8_t msg[3 * 4096];
  fill_pattern(msg, sizeof msg, 1);

  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  CHECK(write(sv[1], msg, 3 * pg) == (ssize_t)(3 * pg));
  CHECK(recv(sv[0], a.mem + pg + 50, 3 * pg, MSG_WAITALL) == (ssize_t)(3 * pg));
  memcpy(a.want + pg + 50, msg, 3 * pg);
  arena_touch(&a, pg + 50, 3 * pg);
  CHECK(write(sv[1], msg, 20) == 20);
  CHECK(__recv_chk(sv[0], a.mem + 5 * pg, 20, 20, 0) == 20);
  memcpy(a.want + 5 * pg, msg, 20);
  arena_touch(&a, 5 * pg, 20);
  region_check(&a, r);
  close(sv[0]);
  close(sv[1]);

  CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
  CHECK(send(sv[1], msg, 1000, 0) == 1000);
  struct sockaddr *from = (void *)(a.mem + 9 * pg + 16);
  socklen_t alen = sizeof(struct sockaddr_storage);
  CHECK(recvfrom(sv[0], a.mem + 6 * pg + 4000, 1000, 0, from, &alen) == 1000);
  memcpy(a.want + 6 * pg + 4000, msg, 1000);
  arena_touch(&a, 6 * pg + 4000, 1000);
  arena_touch(&a, 9 * pg + 16, sizeof(struct sockaddr_storage));
  memcpy(a.want + 9 * pg + 16, a.mem + 9 * pg + 16, alen); /* the kernel's */
  region_check(&a, r);

  /* recvmsg with the msghdr and iovecs themselves in the region (CPU stores
   * fault on page 12), two data buffers and an fd passed in the control
   * buffer. */
  fill_pattern(msg, 700, 9);
  struct iovec siov = {msg, 700};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } sctl;
  memset(&sctl, 0, sizeof sctl);
  struct msghdr smsg = {.msg_iov = &siov,
                        .msg_iovlen = 1,
                        .msg_control = sctl.buf,
                        .msg_controllen = sizeof sctl.buf};
  struct cmsghdr *c = CMSG_FIRSTHDR(&smsg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  int passed = sv[1];
  memcpy(CMSG_DATA(c), &passed, sizeof passed);
  CHECK(sendmsg(sv[1], &smsg, 0) == 700);

  size_t hoff = 12 * pg + 16, ioff = hoff + 256, coff = 18 * pg + 8;
  struct msghdr *m = (void *)(a.mem + hoff);
  struct iovec *riov = (void *)(a.mem + ioff);
  riov[0] = (struct iovec){a.mem + 14 * pg + 4000, 300};
  riov[1] = (struct iovec){a.mem + 16 * pg, 400};
  memset(m, 0, sizeof *m);
  m->msg_iov = riov;
  m->msg_iovlen = 2;
  m->msg_control = a.mem + coff;
  m->msg_controllen = CMSG_SPACE(sizeof(int));
  memcpy(a.want + ioff, riov, 2 * sizeof *riov);
  memcpy(a.want + hoff, m, sizeof *m);
  arena_touch(&a, hoff, 256 + 2 * sizeof *riov);
  /* Those CPU stores released page 12: protect it again, so that the
   * kernel's writes into the msghdr must be announced. */
  region_check(&a, r);
  CHECK_EQ(atomic_load(&r->write_faults), 1);
  ibp__track_unprotect(r);
  region_clear_dirty(r);
  memset(a.released, 0, sizeof a.released);
  atomic_store(&r->write_faults, 0);
  CHECK(ibp__track_protect(r) == 0);
  arena_touch(&a, hoff, sizeof *m);
  CHECK(recvmsg(sv[0], m, 0) == 700);
  CHECK(m->msg_controllen >= CMSG_LEN(sizeof(int)));
  struct cmsghdr *rc = CMSG_FIRSTHDR(m);
  CHECK(rc && rc->cmsg_type == SCM_RIGHTS);
  int got;
  memcpy(&got, CMSG_DATA(rc), sizeof got);
  struct stat st;
  CHECK(fstat(got, &st) == 0 && S_ISSOCK(st.st_mode));
  close(got);
  memcpy(a.want + 14 * pg + 4000, msg, 300);
  memcpy(a.want + 16 * pg, msg + 300, 400);
  arena_touch(&a, 14 * pg + 4000, 300);
  arena_touch(&a, 16 * pg, 400);
  arena_touch(&a, coff, CMSG_SPACE(sizeof(int)));
  memcpy(a.want + hoff, m, sizeof *m); /* what the kernel wrote back */
  memcpy(a.want + coff, a.mem + coff, CMSG_SPACE(sizeof(int)));
  region_check(&a, r);
  CHECK_EQ(atomic_load(&r->write_faults), 0);
  arena_check_bytes(&a);
  close(sv[0]);
  close(sv[1]);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* Invalid arguments, hidden from the compiler's argument checks. */
static void *volatile bad_ptr = (void *)16;
static volatile int bad_cnt = -1, big_cnt = IOV_MAX + 1;

/* Results and errno are the real function's, tracking on or off. */
static void passthrough_checks(int fd) {
  uint8_t buf[32];
  errno = 4242;
  CHECK(pread(fd, buf, 10, 0) == 10);
  CHECK(errno == 4242);
  CHECK(read(-1, buf, 1) == -1 && errno == EBADF);
  errno = 0;
  CHECK(read(fd, bad_ptr, 10) == -1 && errno == EFAULT);
  CHECK(readv(fd, NULL, bad_cnt) == -1 && errno == EINVAL);
  struct iovec iov = {buf, 1};
  CHECK(readv(fd, &iov, big_cnt) == -1 && errno == EINVAL);
  CHECK(recv(fd, buf, 1, 0) == -1 && errno == ENOTSOCK);
  CHECK(recvfrom(fd, buf, 1, 0, NULL, NULL) == -1 && errno == ENOTSOCK);
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
  CHECK(recvmsg(fd, &mh, 0) == -1 && errno == ENOTSOCK);
  CHECK(lseek(fd, 0, SEEK_SET) == 0);
  errno = 777;
  CHECK(read(fd, buf, sizeof buf) == (ssize_t)sizeof buf);
  CHECK(errno == 777);
  for (size_t i = 0; i < sizeof buf; i++)
    CHECK(buf[i] == file_byte(i));
  CHECK(read(fd, buf, 0) == 0);
}

static void case_passthrough(void) {
  int fd = make_file(4096);
  CHECK(!ibp__track_any());
  passthrough_checks(fd);
  arena a;
  arena_init(&a, 4);
  ibp_tracked *r = region_new(&a, 0, 2 * a.pg, 4096);
  CHECK(ibp__track_protect(r) == 0);
  CHECK(ibp__track_any());
  passthrough_checks(fd);
  CHECK_EQ(atomic_load(&r->dirty_tensors), 0);
  ibp__track_unprotect(r);
  close(fd);
  region_free(r);
  arena_free(&a);
}

typedef struct reprotector {
  ibp_tracked *r;
  atomic_int stop;
  unsigned long done, refused;
} reprotector;

static void *reprotect_loop(void *p) {
  reprotector *w = p;
  while (!atomic_load(&w->stop)) {
    if (ibp__track_reprotect(w->r) == 0)
      w->done++;
    else
      w->refused++;
  }
  return NULL;
}

/* A refresh re-protects the region over and over while reads into it run:
 * every read returns all its bytes (none fails with EFAULT halfway). */
static void case_reprotect(void) {
  arena a;
  arena_init(&a, 40);
  size_t pg = a.pg;
  ibp_tracked *r = region_new(&a, 0, 36 * pg, 1000);
  CHECK(ibp__track_protect(r) == 0);
  int fd = make_file(32 * pg);
  FILE *f = fdopen(dup(fd), "rb");
  CHECK(f);
  reprotector w = {.r = r};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, reprotect_loop, &w) == 0);
  for (int i = 0; i < 300; i++) {
    size_t off = (size_t)(i * 7919) % (4 * pg), len = 16 * pg + (size_t)i;
    CHECK(pread(fd, a.mem + off, len, 0) == (ssize_t)len);
    got_file(&a, off, len, 0);
    CHECK(fseek(f, 0, SEEK_SET) == 0);
    CHECK(fread(a.mem + off + 3, 1, len, f) == len);
    got_file(&a, off + 3, len, 0);
    CHECK(memcmp(a.mem, a.want, 36 * pg) == 0);
    usleep(50); /* room for re-protection between the reads */
  }
  atomic_store(&w.stop, 1);
  pthread_join(t, NULL);
  printf("reprotect: %lu done, %lu refused while a read ran\n", w.done,
         w.refused);
  CHECK(w.done > 0);
  fclose(f);
  close(fd);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* After the application's own mprotect on its pages, the region is never
 * re-protected: what it set holds. */
static void case_app_mprotect(void) {
  arena a;
  arena_init(&a, 8);
  ibp_tracked *r = region_new(&a, 0, 8 * a.pg, 4096);
  CHECK(ibp__track_protect(r) == 0);
  CHECK(ibp__track_reprotect(r) == 0);
  CHECK(mprotect(a.mem + a.pg, a.pg, PROT_READ | PROT_WRITE) == 0);
  CHECK(ibp__track_reprotect(r) != 0);
  a.mem[a.pg + 5] = 1; /* no fault needed: the page is the application's */
  a.want[a.pg + 5] = 1;
  arena_touch(&a, a.pg, a.pg);
  region_check(&a, r);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"read", case_read},           {"fread", case_fread},
      {"recv", case_recv},           {"passthrough", case_passthrough},
      {"reprotect", case_reprotect}, {"app_mprotect", case_app_mprotect},
  };
  setvbuf(stdout, NULL, _IONBF, 0);
  if (ibp__track_install() != 0) {
    fprintf(stderr, "cannot install the handler\n");
    return 1;
  }
  return run_case(cases, sizeof cases / sizeof cases[0], argc, argv);
}
