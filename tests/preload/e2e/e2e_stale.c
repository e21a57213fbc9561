/*
 * e2e_stale: every way a host buffer gets written, after its region was
 * compressed and served; the copies that follow must carry the new bytes
 * (README.md).
 *
 *   e2e_stale [--app-handler | --app-handler-signal | --app-handler-early |
 *              --hard-writes]
 *
 * Region "stale" (cudaHostAlloc, 2 MiB + 300, tensor 1000) is copied whole
 * once (served, IBP_WAIT_READY=1), then written in two rounds by: a one-byte
 * CPU store, stores at the region's edges, memset, memcpy over several
 * tensors, read(2) of a temporary file, pread, readv, preadv, fread of more
 * than 128 KiB and of a few bytes, recv, recvmsg and recvfrom from a
 * socketpair, a
 * device-to-host cudaMemcpy, cudaMemcpyAsync + synchronize, a
 * cudaMemcpyDefault from the device, a cudaMemcpyHostToHost into it, and a
 * memcpy right after a synchronous copy of the same bytes (which must
 * arrive as they were).
 * After each write the written range, its tensors, their neighbours, its
 * pages and a straddling range are copied and checked; the whole region
 * after each round.  Then (each release with copies still in flight):
 * cudaFreeHost + cudaHostAlloc / cudaMallocHost of
 * the same size (reports whether the address came back), a registration at
 * the freed address; cudaHostRegister / cudaHostUnregister of a mapping,
 * stores after unregistering, registering again, remapping the same
 * address; a region at an unaligned address with stores just outside it.
 *
 * --app-handler: after the first copies the program installs a SIGSEGV
 * handler of its own (sigaction, SA_SIGINFO) and faults on a PROT_NONE page
 * of its own, which the handler fixes with mprotect; the handler must run
 * for exactly those faults, the program must see its handler installed, and
 * the writes above must still never leave stale bytes.
 * --app-handler-signal: the same with signal().  --app-handler-early: the
 * handler is installed before the first CUDA call.
 * --hard-writes: writes this process's page protection cannot see: through
 * a second mapping of a registered memfd, by a forked child through a
 * MAP_SHARED registration, a store after the program's own mprotect of
 * region pages to read-write, madvise(MADV_DONTNEED) of registered private
 * pages (they read back as zeros), and recvmmsg into the region.
 */
#include "e2e_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEV_BYTES ((size_t)4 << 20)

static e2e_region regions[] = {
    {.name = "stale",
     .size = (2 << 20) + 300,
     .tensor = 1000,
     .alloc = E2E_HOST_ALLOC,
     .data = E2E_F32},
    {.name = "fr",
     .size = (1 << 20) + 64,
     .tensor = 512,
     .alloc = E2E_HOST_ALLOC,
     .data = E2E_BF16},
    {.name = "reg",
     .size = (1 << 20) + 2000,
     .tensor = 4096,
     .alloc = E2E_REGISTER,
     .data = E2E_F32},
    {.name = "regu",
     .size = (1 << 20) + 3001,
     .tensor = 1024,
     .alloc = E2E_REGISTER,
     .misalign = 1000,
     .data = E2E_BF16},
    {.name = "shm",
     .size = (1 << 20) + 16,
     .tensor = 2048,
     .alloc = E2E_REGISTER,
     .data = E2E_F32},
};
enum { STALE, FR, REG, REGU, SHM, NREGIONS };

typedef struct ctx {
  e2e_region *r;       /* the region being written */
  unsigned char *next; /* its next contents, r->size bytes */
  e2e_batch batch;
  cudaStream_t streams[2];
  e2e_rng rng;
  unsigned turn;      /* rotates the copy API */
  unsigned char *dev; /* device staging for device-to-host writes */
  size_t page;
  const char *what; /* the current case */
} ctx;

/* ---- checking ------------------------------------------------------------ */

static void copy(ctx *c, e2e_region *r, size_t off, size_t len) {
  if (len == 0)
    return;
  if (!e2e_batch_fits(&c->batch, len))
    e2e_batch_verify(&c->batch, c->streams, 2);
  c->batch.label = c->what;
  e2e_api api = (e2e_api)(c->turn++ % E2E_API_COUNT);
  e2e_batch_copy(&c->batch, r, off, len, api, c->streams[c->turn / 4 % 2]);
}

static void verify(ctx *c) {
  c->batch.label = c->what;
  e2e_batch_verify(&c->batch, c->streams, 2);
}

static void copy_whole(ctx *c, e2e_region *r) {
  for (size_t off = 0; off < r->size; off += E2E_MAX_COPY)
    copy(c, r, off,
         r->size - off < E2E_MAX_COPY ? r->size - off : E2E_MAX_COPY);
  verify(c);
}

/* Copies what a write of [off, off+len) of c->r touched, and around it:
 * the bytes, their tensors, one tensor either side, their pages, and a
 * range straddling the start. */
static void check_write(ctx *c, size_t off, size_t len) {
  e2e_region *r = c->r;
  size_t t = r->tensor, end = off + len;
  size_t lo = off / t * t, hi = (end + t - 1) / t * t;
  hi = hi > r->size ? r->size : hi;
  uintptr_t base = (uintptr_t)r->host;
  uintptr_t plo = (base + off) & ~(uintptr_t)(c->page - 1);
  uintptr_t phi = (base + end + c->page - 1) & ~(uintptr_t)(c->page - 1);
  size_t pl = plo < base ? 0 : plo - base;
  size_t ph = phi - base > r->size ? r->size : phi - base;
  copy(c, r, off, len);
  copy(c, r, lo, hi - lo);
  if (lo > 0)
    copy(c, r, lo - t, t);
  copy(c, r, hi, r->size - hi < t ? r->size - hi : t);
  copy(c, r, pl, ph - pl);
  size_t s0 = off > 37 ? off - 37 : 0;
  copy(c, r, s0, (end + 11 < r->size ? end + 11 : r->size) - s0);
  verify(c);
  e2e_region_check_host(r, c->what);
}

/* ---- the writes ---------------------------------------------------------- */

/* A random range of c->r of min..max bytes. */
static size_t pick(ctx *c, size_t min, size_t max, size_t *len) {
  *len = min + (size_t)e2e_rng_below(&c->rng, max - min + 1);
  return (size_t)e2e_rng_below(&c->rng, c->r->size - *len + 1);
}

/* The program's record of a write of c->next[off, off+len). */
static void wrote(ctx *c, size_t off, size_t len) {
  memcpy(c->r->mirror + off, c->next + off, len);
}

static void w_store(ctx *c) {
  size_t len, off = pick(c, 1, 1, &len);
  unsigned char v = (unsigned char)(c->r->mirror[off] ^ 0x5A);
  *(volatile unsigned char *)(c->r->host + off) = v;
  c->r->mirror[off] = v;
  check_write(c, off, 1);
}

static void w_edges(ctx *c) {
  e2e_region *r = c->r;
  size_t t = r->tensor, k = 1 + (size_t)e2e_rng_below(&c->rng, 100);
  size_t at[] = {0, k * t - 1, k * t, r->size - 1};
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    r->host[at[i]] = c->next[at[i]] ^ 0x81;
    r->mirror[at[i]] = r->host[at[i]];
  }
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
    check_write(c, at[i], 1);
}

static void w_memset(ctx *c) {
  size_t len, off = pick(c, 1, 3 * c->r->tensor, &len);
  memset(c->r->host + off, 0x77, len);
  memset(c->r->mirror + off, 0x77, len);
  check_write(c, off, len);
}

static void w_memcpy(ctx *c) {
  size_t len, off = pick(c, 2 * c->r->tensor, 5 * c->r->tensor, &len);
  memcpy(c->r->host + off, c->next + off, len);
  wrote(c, off, len);
  check_write(c, off, len);
}

/* A temporary file holding c->next, for the reads below. */
static int next_file(ctx *c) {
  return e2e_temp_file(c->next, c->r->size);
}

static void expect_io(ctx *c, ssize_t got, size_t want) {
  if (got != (ssize_t)want)
    e2e_fail("%s: returned %zd, wanted %zu (%s)", c->what, got, want,
             got < 0 ? strerror(errno) : "short");
}

static void w_read(ctx *c) {
  size_t len, off = pick(c, 3 * c->page, 6 * c->page, &len);
  int fd = next_file(c);
  E2E_SYS(lseek(fd, (off_t)off, SEEK_SET) >= 0);
  expect_io(c, read(fd, c->r->host + off, len), len);
  close(fd);
  wrote(c, off, len);
  check_write(c, off, len);
}

static void w_pread(ctx *c) {
  size_t len, off = pick(c, 1, 4 * c->page, &len);
  int fd = next_file(c);
  expect_io(c, pread(fd, c->r->host + off, len, (off_t)off), len);
  close(fd);
  wrote(c, off, len);
  check_write(c, off, len);
}

/* Two pieces of the region around a pageable piece, in one call. */
static void w_vector(ctx *c, int positional) {
  size_t len, off = pick(c, 3 * c->page, 5 * c->page, &len);
  size_t a = len / 3, b = len / 3, rest = len - a - b;
  unsigned char *mid = malloc(b);
  E2E_SYS(mid != NULL);
  struct iovec iov[3] = {
      {c->r->host + off, a}, {mid, b}, {c->r->host + off + a + b, rest}};
  int fd = next_file(c);
  if (positional) {
    expect_io(c, preadv(fd, iov, 3, (off_t)off), len);
  } else {
    E2E_SYS(lseek(fd, (off_t)off, SEEK_SET) >= 0);
    expect_io(c, readv(fd, iov, 3), len);
  }
  close(fd);
  if (memcmp(mid, c->next + off + a, b) != 0)
    e2e_fail("%s: the pageable piece was read wrong", c->what);
  free(mid);
  wrote(c, off, a);
  wrote(c, off + a + b, rest);
  check_write(c, off, len);
}

static void w_readv(ctx *c) {
  w_vector(c, 0);
}

static void w_preadv(ctx *c) {
  w_vector(c, 1);
}

static void w_fread(ctx *c) {
  size_t len, off = pick(c, (128 << 10) + 1, 160 << 10, &len);
  size_t len2, off2 = pick(c, 1, 3000, &len2);
  FILE *f = fdopen(next_file(c), "rb");
  E2E_SYS(f != NULL);
  E2E_SYS(fseek(f, (long)off, SEEK_SET) == 0);
  expect_io(c, (ssize_t)fread(c->r->host + off, 1, len, f), len);
  E2E_SYS(fseek(f, (long)off2, SEEK_SET) == 0);
  expect_io(c, (ssize_t)fread(c->r->host + off2, 1, len2, f), len2);
  fclose(f);
  wrote(c, off, len);
  wrote(c, off2, len2);
  check_write(c, off, len);
  check_write(c, off2, len2);
}

/* Sends c->next[off, off+len) into a socketpair and receives it into the
 * region with recv (how 0), recvmsg (1) or recvfrom (2). */
static void w_socket(ctx *c, int how) {
  size_t len, off = pick(c, 1, 48 << 10, &len);
  int sv[2];
  E2E_SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  E2E_SYS(send(sv[0], c->next + off, len, 0) == (ssize_t)len);
  size_t got = 0;
  while (got < len) {
    unsigned char *to = c->r->host + off + got;
    struct iovec iov = {to, len - got};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n = how == 0   ? recv(sv[1], to, len - got, 0)
                : how == 1 ? recvmsg(sv[1], &m, 0)
                           : recvfrom(sv[1], to, len - got, 0, NULL, NULL);
    if (n <= 0) {
      expect_io(c, n, len - got);
      break;
    }
    got += (size_t)n;
  }
  close(sv[0]);
  close(sv[1]);
  wrote(c, off, len);
  check_write(c, off, len);
}

static void w_recv(ctx *c) {
  w_socket(c, 0);
}

static void w_recvmsg(ctx *c) {
  w_socket(c, 1);
}

static void w_recvfrom(ctx *c) {
  w_socket(c, 2);
}

/* Device-to-host copies into the region: 0 cudaMemcpy D2H, 1
 * cudaMemcpyAsync D2H + cudaStreamSynchronize, 2 cudaMemcpy Default,
 * 3 cudaMemcpy HostToHost from pageable memory. */
static void w_cuda(ctx *c, int how) {
  size_t len, off = pick(c, 1, 3 * c->r->tensor + c->page, &len);
  unsigned char *dst = c->r->host + off;
  E2E_CK(cudaMemcpy(c->dev, c->next + off, len, cudaMemcpyDefault));
  switch (how) {
  case 0:
    E2E_CK(cudaMemcpy(dst, c->dev, len, cudaMemcpyDeviceToHost));
    break;
  case 1:
    E2E_CK(cudaMemcpyAsync(dst, c->dev, len, cudaMemcpyDeviceToHost,
                           c->streams[1]));
    E2E_CK(cudaStreamSynchronize(c->streams[1]));
    break;
  case 2:
    E2E_CK(cudaMemcpy(dst, c->dev, len, cudaMemcpyDefault));
    break;
  default:
    E2E_CK(cudaMemcpy(dst, c->next + off, len, cudaMemcpyHostToHost));
  }
  wrote(c, off, len);
  check_write(c, off, len);
}

static void w_d2h(ctx *c) {
  w_cuda(c, 0);
}
static void w_d2h_async(ctx *c) {
  w_cuda(c, 1);
}
static void w_d2h_default(ctx *c) {
  w_cuda(c, 2);
}
static void w_h2h(ctx *c) {
  w_cuda(c, 3);
}

/* A synchronous copy returns when its bytes are on the device: overwriting
 * them right after must not change what arrived. */
static void w_after_sync(ctx *c) {
  size_t len, off = pick(c, 1, 4 * c->r->tensor, &len);
  if (!e2e_batch_fits(&c->batch, len))
    verify(c);
  c->batch.label = c->what;
  e2e_batch_copy(&c->batch, c->r, off, len,
                 c->turn++ % 2 ? E2E_SYNC_H2D : E2E_SYNC_DEFAULT, 0);
  memcpy(c->r->host + off, c->next + off, len);
  wrote(c, off, len);
  check_write(c, off, len);
}

static const struct {
  const char *name;
  void (*fn)(ctx *);
} writes[] = {
    {"CPU store of one byte", w_store},
    {"CPU stores at the edges", w_edges},
    {"memset", w_memset},
    {"memcpy over several tensors", w_memcpy},
    {"read(2) of a file", w_read},
    {"pread", w_pread},
    {"readv", w_readv},
    {"preadv", w_preadv},
    {"fread (> 128 KiB, then a few bytes)", w_fread},
    {"recv from a socketpair", w_recv},
    {"recvmsg from a socketpair", w_recvmsg},
    {"recvfrom a socketpair", w_recvfrom},
    {"cudaMemcpy device-to-host into the region", w_d2h},
    {"cudaMemcpyAsync device-to-host into the region + sync", w_d2h_async},
    {"cudaMemcpy(Default) device-to-host into the region", w_d2h_default},
    {"cudaMemcpy host-to-host into the region", w_h2h},
    {"memcpy right after a synchronous copy of the same bytes", w_after_sync},
};

static void write_rounds(ctx *c, e2e_region *r, int rounds) {
  c->r = r;
  for (int round = 1; round <= rounds; round++) {
    e2e_fill(&c->rng, c->next, r->size, r->tensor, r->data);
    for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++) {
      char what[160];
      snprintf(what, sizeof what, "region %s, round %d, %s: ", r->name, round,
               writes[i].name);
      c->what = what;
      writes[i].fn(c);
    }
    c->what = "whole region after a round of writes: ";
    copy_whole(c, r);
  }
}

/* ---- allocations at a reused address ------------------------------------- */

/* A fresh allocation (or registration) of r, with the contents found there
 * (fill 0) or new contents (fill 1): every copy must show the bytes now
 * there, also after a store. */
static void check_fresh(ctx *c, e2e_region *r, const char *how, int fill) {
  char what[160];
  snprintf(what, sizeof what, "region %s after %s: ", r->name, how);
  c->what = what;
  if (fill)
    e2e_region_fill(r, &c->rng);
  else
    memcpy(r->mirror, r->host, r->size);
  copy_whole(c, r);
  c->r = r;
  w_store(c);
}

/* Asynchronous copies of the whole of r on a stream, not waited for: the
 * free or unregistration that follows must let them finish first. */
static void copies_in_flight(ctx *c, e2e_region *r) {
  c->batch.label = c->what = "copies in flight when the region was released: ";
  for (size_t off = 0; off < r->size; off += E2E_MAX_COPY)
    copy(c, r, off,
         r->size - off < E2E_MAX_COPY ? r->size - off : E2E_MAX_COPY);
}

static void free_realloc(ctx *c) {
  e2e_region *r = &regions[FR];
  for (int i = 0; i < 2; i++) {
    unsigned char *old = r->host;
    copies_in_flight(c, r);
    E2E_CK(cudaFreeHost(old));
    verify(c);
    free(r->mirror);
    r->alloc = i == 0 ? E2E_HOST_ALLOC : E2E_MALLOC_HOST;
    e2e_region_alloc(r);
    e2e_note("cudaFreeHost + %s of the same size: %s address",
             i == 0 ? "cudaHostAlloc" : "cudaMallocHost",
             r->host == old ? "same" : "different");
    const char *how = i == 0 ? "cudaFreeHost + cudaHostAlloc"
                             : "cudaFreeHost + cudaMallocHost";
    check_fresh(c, r, how, 0);
    check_fresh(c, r, how, 1);
  }
  /* A registration where the freed allocation was. */
  unsigned char *old = r->host;
  copies_in_flight(c, r);
  E2E_CK(cudaFreeHost(old));
  verify(c);
  free(r->mirror);
  void *m = mmap(old, r->size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  e2e_note("cudaFreeHost + mmap at the freed address + cudaHostRegister: %s",
           m == old ? "same address"
                    : "could not map it, registering elsewhere");
  if (m != old) {
    if (m != MAP_FAILED)
      munmap(m, r->size);
    m = MAP_FAILED;
  }
  r->alloc = E2E_REGISTER;
  if (m == MAP_FAILED) {
    e2e_region_alloc(r);
  } else {
    r->map = m;
    r->map_len = r->size;
    r->host = m;
    E2E_SYS((r->mirror = malloc(r->size)) != NULL);
    E2E_CK(cudaHostRegister(r->host, r->size, 0));
  }
  check_fresh(c, r, "cudaFreeHost + cudaHostRegister at the same address", 0);
  check_fresh(c, r, "cudaFreeHost + cudaHostRegister at the same address", 1);
}

/* Registration cycles on an mmap'd region. */
static void register_cycles(ctx *c, e2e_region *r) {
  e2e_region_alloc(r);
  check_fresh(c, r, "cudaHostRegister", 1);
  write_rounds(c, r, 1);
  /* Unregistered: plain memory again, stores must simply work. */
  copies_in_flight(c, r);
  E2E_CK(cudaHostUnregister(r->host));
  verify(c);
  e2e_fill(&c->rng, r->host, r->size, r->tensor, r->data);
  r->host[r->size / 2] ^= 1;
  E2E_CK(cudaHostRegister(r->host, r->size, 0));
  check_fresh(c, r, "cudaHostUnregister, stores, cudaHostRegister", 0);
  /* The same address, mapped anew. */
  E2E_CK(cudaHostUnregister(r->host));
  void *m = mmap(r->map, r->map_len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  E2E_SYS(m == r->map);
  E2E_CK(cudaHostRegister(r->host, r->size, 0));
  check_fresh(c, r,
              "cudaHostUnregister, mmap at the same address, cudaHostRegister",
              0);
  /* Stores just outside the region, on its first and last pages. */
  c->what = "stores just outside the region on its pages: ";
  if (r->host > r->map)
    r->map[0] ^= 0xFF;
  if (r->host + r->size < r->map + r->map_len)
    r->map[r->map_len - 1] ^= 0xFF;
  copy_whole(c, r);
  e2e_region_free(r);
}

/* ---- the application's own SIGSEGV handler ------------------------------- */

static unsigned char *own_page;
static size_t own_len;
static volatile sig_atomic_t app_calls, app_expected;

static void app_fix(void) {
  if (++app_calls > app_expected) {
    static const char msg[] = "e2e_stale: FAIL: the application's SIGSEGV "
                              "handler ran for a fault that is not its own\n";
    ssize_t n = write(2, msg, sizeof msg - 1);
    (void)n;
    _exit(E2E_EXIT_MISMATCH);
  }
  mprotect(own_page, own_len, PROT_READ | PROT_WRITE);
}

static void app_action(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  if (si->si_addr != own_page)
    app_expected = 0; /* not ours: reported by app_fix */
  app_fix();
}

static void app_handler(int sig) {
  (void)sig;
  app_fix();
}

static void install_handler(int use_signal) {
  if (!own_page) {
    own_len = (size_t)sysconf(_SC_PAGESIZE);
    own_page =
        mmap(NULL, own_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    E2E_SYS(own_page != MAP_FAILED);
  }
  if (use_signal) {
    E2E_SYS(signal(SIGSEGV, app_handler) != SIG_ERR);
  } else {
    struct sigaction sa = {.sa_sigaction = app_action, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    E2E_SYS(sigaction(SIGSEGV, &sa, NULL) == 0);
  }
}

/* Faults on the program's own PROT_NONE page; its handler must fix it. */
static void own_fault(int use_signal, const char *when) {
  struct sigaction cur;
  E2E_SYS(sigaction(SIGSEGV, NULL, &cur) == 0);
  int mine = use_signal ? cur.sa_handler == app_handler
                        : (cur.sa_flags & SA_SIGINFO) &&
                              cur.sa_sigaction == app_action;
  if (!mine)
    e2e_fail("%s: sigaction(SIGSEGV) does not report the program's handler",
             when);
  E2E_SYS(mprotect(own_page, own_len, PROT_NONE) == 0);
  app_expected++;
  *(volatile unsigned char *)own_page = (unsigned char)app_expected;
  if (app_calls != app_expected || own_page[0] != app_expected)
    e2e_fail("%s: the program's SIGSEGV handler ran %d times for %d faults",
             when, (int)app_calls, (int)app_expected);
}

/* ---- writes page protection cannot see ----------------------------------- */

/* A forked child copies c->next[off, off+len) to `to` (a MAP_SHARED
 * mapping of the region's memory).  Returns 0 when it did. */
static int child_writes(ctx *c, unsigned char *to, size_t off, size_t len) {
  pid_t pid = fork();
  E2E_SYS(pid >= 0);
  if (pid == 0) {
    memcpy(to + off, c->next + off, len);
    _exit(0);
  }
  int status;
  E2E_SYS(waitpid(pid, &status, 0) == pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return 0;
  e2e_fail("%sthe child writer failed (%s %d)", c->what,
           WIFEXITED(status) ? "exit status" : "killed by signal",
           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  return -1;
}

/* Writes through a second mapping of a registered memfd, and from a forked
 * child through its MAP_SHARED registration. */
static void shared_writes(ctx *c) {
  e2e_region *r = &regions[SHM];
  int fd = memfd_create("ibp-e2e-shm", 0);
  E2E_SYS(fd >= 0);
  E2E_SYS(ftruncate(fd, (off_t)r->size) == 0);
  unsigned char *a =
      mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  unsigned char *b =
      mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  E2E_SYS(a != MAP_FAILED && b != MAP_FAILED);
  r->host = a;
  E2E_SYS((r->mirror = malloc(r->size)) != NULL);
  E2E_CK(cudaHostRegister(a, r->size, 0));
  e2e_region_fill(r, &c->rng);
  c->r = r;
  c->what = "shared mapping, first copies: ";
  copy_whole(c, r);
  e2e_fill(&c->rng, c->next, r->size, r->tensor, r->data);

  size_t len, off = pick(c, 1, 5 * r->tensor, &len);
  memcpy(b + off, c->next + off, len);
  wrote(c, off, len);
  c->what = "shared mapping, memcpy through a second mapping: ";
  check_write(c, off, len);

  off = pick(c, 1, 5 * r->tensor, &len);
  c->what = "shared mapping, memcpy by a forked child: ";
  if (child_writes(c, a, off, len) == 0)
    wrote(c, off, len);
  else
    memcpy(r->mirror + off, r->host + off, len); /* whatever is there */
  check_write(c, off, len);
  E2E_CK(cudaHostUnregister(a));
  munmap(a, r->size);
  munmap(b, r->size);
  close(fd);
  free(r->mirror);
}

/* Page-aligned [off, off+len) inside r covering at least one page. */
static size_t pick_pages(ctx *c, size_t *len) {
  uintptr_t base = (uintptr_t)c->r->host, page = c->page;
  uintptr_t first = (base + page - 1) & ~(page - 1);
  size_t pages = (base + c->r->size - first) / page;
  size_t n = 1 + (size_t)e2e_rng_below(&c->rng, 3);
  size_t at = (size_t)e2e_rng_below(&c->rng, pages - n + 1);
  *len = n * page;
  return first - base + at * page;
}

/* The program's own mprotect (to what it believes the pages already are),
 * then a store; madvise(MADV_DONTNEED), which zero-fills private pages;
 * recvmmsg. */
static void private_writes(ctx *c) {
  e2e_region *r = &regions[REG];
  e2e_region_alloc(r);
  check_fresh(c, r, "cudaHostRegister", 1);

  size_t len, off = pick_pages(c, &len);
  E2E_SYS(mprotect(r->host + off, len, PROT_READ | PROT_WRITE) == 0);
  r->host[off + 7] ^= 0x3C;
  r->mirror[off + 7] ^= 0x3C;
  c->what = "mprotect(PROT_READ|PROT_WRITE) by the program, then a store: ";
  check_write(c, off, len);

  off = pick_pages(c, &len);
  E2E_SYS(madvise(r->host + off, len, MADV_DONTNEED) == 0);
  memset(r->mirror + off, 0, len);
  c->what = "madvise(MADV_DONTNEED) of private registered pages: ";
  check_write(c, off, len);

  e2e_fill(&c->rng, c->next, r->size, r->tensor, r->data);
  off = pick(c, 2, 8000, &len);
  int sv[2];
  E2E_SYS(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
  size_t half = len / 2;
  E2E_SYS(send(sv[0], c->next + off, half, 0) == (ssize_t)half);
  E2E_SYS(send(sv[0], c->next + off + half, len - half, 0) ==
          (ssize_t)(len - half));
  struct iovec iov[2] = {{r->host + off, half},
                         {r->host + off + half, len - half}};
  struct mmsghdr msgs[2] = {{.msg_hdr = {.msg_iov = &iov[0], .msg_iovlen = 1}},
                            {.msg_hdr = {.msg_iov = &iov[1], .msg_iovlen = 1}}};
  c->what = "recvmmsg: ";
  int n = recvmmsg(sv[1], msgs, 2, MSG_WAITFORONE, NULL);
  if (n == 2 && msgs[0].msg_len == half && msgs[1].msg_len == len - half) {
    wrote(c, off, len);
  } else {
    e2e_fail("recvmmsg: returned %d (%s)", n, n < 0 ? strerror(errno) : "");
    memcpy(r->mirror + off, r->host + off, len); /* whatever is there */
  }
  close(sv[0]);
  close(sv[1]);
  check_write(c, off, len);
  e2e_region_free(r);
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv) {
  e2e_begin("e2e_stale");
  const char *mode = argc > 1 ? argv[1] : "";
  int app = strcmp(mode, "--app-handler") == 0;
  int app_signal = strcmp(mode, "--app-handler-signal") == 0;
  int app_early = strcmp(mode, "--app-handler-early") == 0;
  int hard = strcmp(mode, "--hard-writes") == 0;
  if (argc > 2 || (*mode && !app && !app_signal && !app_early && !hard))
    e2e_die("usage: e2e_stale [--app-handler | --app-handler-signal | "
            "--app-handler-early | --hard-writes]");
  if (app_early)
    install_handler(0);
  e2e_regions_env(regions, NREGIONS);

  ctx c = {.page = (size_t)sysconf(_SC_PAGESIZE)};
  e2e_rng_seed(&c.rng, e2e_seed(), 2);
  e2e_batch_init(&c.batch, DEV_BYTES, 0);
  E2E_CK(cudaStreamCreate(&c.streams[1]));
  E2E_CK(cudaMalloc((void **)&c.dev, 1 << 20));
  c.next = malloc(regions[STALE].size); /* the largest */
  E2E_SYS(c.next != NULL);
  if (hard) {
    shared_writes(&c);
    private_writes(&c);
  } else {
    e2e_region *r = &regions[STALE];
    e2e_region_alloc(r);
    e2e_region_fill(r, &c.rng);
    c.what = "first copies: ";
    copy_whole(&c, r);
    if (app || app_signal)
      install_handler(app_signal);
    if (app || app_signal || app_early)
      own_fault(app_signal, "after the first copies");
    write_rounds(&c, r, 2);

    e2e_region_alloc(&regions[FR]);
    e2e_region_fill(&regions[FR], &c.rng);
    c.what = "region fr, first copies: ";
    copy_whole(&c, &regions[FR]);
    free_realloc(&c);
    e2e_region_free(&regions[FR]);
    register_cycles(&c, &regions[REG]);
    register_cycles(&c, &regions[REGU]);
    if (app || app_signal || app_early)
      own_fault(app_signal, "at the end");
    e2e_region_free(r);
  }
  free(c.next);
  E2E_CK(cudaFree(c.dev));
  E2E_CK(cudaStreamDestroy(c.streams[1]));
  e2e_batch_destroy(&c.batch);
  return e2e_end();
}
