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
 * Exits 77 (skipped) where userfaultfd cannot serve kernel-mode faults
 * (unprivileged, vm.unprivileged_userfaultfd=0) or lacks write protection.
 */
#include <pthread.h>
#include <sys/uio.h>
#include <sys/wait.h>

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
  ibp__track_unprotect(r);
  region_free(r);
  free(o.copy);
  arena_free(&a);
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
  ibp__track_unprotect(r);
  region_free(r);
  free(o.copy);
  arena_free(&a);
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
  ibp__track_unprotect(r);
  region_free(r);
  free(o.copy);
  arena_free(&a);
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
    for (size_t i = 0; i < bytes / 4096; i++) {
      uint32_t bit = 1u << (i % 32);
      if (!(atomic_fetch_and(&r->dirty[i / 32], ~bit) & bit))
        continue;
      if (ibp__track_still_protected(r, r->base + i * 4096, 4096))
        memcpy(o.copy + i * 4096, a.mem + i * 4096, 4096);
      else
        atomic_fetch_or(&r->dirty[i / 32], bit);
    }
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < 3; i++)
    pthread_join(th[i], NULL);
  arena_check_bytes(&a);
  ibp__track_unprotect(r);
  arena_check_bytes(&a);
  region_free(r);
  free(o.copy);
  arena_free(&a);
}

int main(int argc, char **argv) {
  const test_case cases[] = {{"loads", case_loads},
                             {"stores", case_stores},
                             {"kernel", case_kernel},
                             {"verify", case_verify},
                             {"race", case_race}};
  return run_case(cases, sizeof cases / sizeof cases[0], argc, argv);
}
