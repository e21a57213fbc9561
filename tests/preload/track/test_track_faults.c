/*
 * Write tracking by page faults (preload/track/track.c): CPU stores to
 * protected regions, exact dirty bits against the model of track_test.h, edge
 * pages, shared pages, unprotect, the slot table, and concurrency.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "track_test.h"

/* Stores at the given page-relative spots of a region with tensors of R
 * bytes: whole tensors, a tail, tensors larger and smaller than a page. */
static void stores_with(uint32_t R, size_t bytes) {
  arena a;
  arena_init(&a, bytes / 4096 + 4);
  size_t pg = a.pg;
  ibp_tracked *r = region_new(&a, 0, bytes, R);
  CHECK(ibp__track_protect(r) == 0);
  CHECK(atomic_load(&r->protected_));
  CHECK(page_prot(a.mem) == 'r');
  region_check(&a, r);

  size_t last = (bytes - 1) / pg, faults = 0;
  size_t spots[] = {0,         1,      3 * pg + 17, 5 * pg - 1, last * pg,
                    bytes - 1, 2 * pg, 3 * pg + 18, 5 * pg - 2};
  for (size_t k = 0; k < sizeof spots / sizeof spots[0]; k++) {
    size_t p = spots[k] / pg;
    faults += !a.released[p];
    arena_store(&a, spots[k], (uint8_t)(k + 1));
    region_check(&a, r);
    CHECK_EQ(atomic_load(&r->write_faults), faults);
  }
  /* The first page past the region is not ours: no fault counted. */
  arena_store(&a, (last + 1) * pg, 99);
  a.released[last + 1] = false;
  CHECK_EQ(atomic_load(&r->write_faults), faults);
  region_check(&a, r);
  arena_check_bytes(&a);
  ibp__track_unprotect(r);
  CHECK(!atomic_load(&r->protected_));
  region_free(r);
  arena_free(&a);
}

static void case_stores(void) {
  stores_with(1000, 16 * 4096 + 1234); /* tensors straddle pages, tail */
  stores_with(8192, 5 * 8192 + 5000);  /* R > page; a tail-only page */
  stores_with(4096, 12 * 4096);        /* aligned, no tail */
  stores_with(100, 7 * 4096 + 50);     /* many tensors per page */
  stores_with(24576, 3 * 24576 + 100); /* 6 pages per tensor */
}

static void case_memcpy(void) {
  arena a;
  arena_init(&a, 24);
  size_t pg = a.pg;
  ibp_tracked *r = region_new(&a, 0, 20 * pg, 1536);
  CHECK(ibp__track_protect(r) == 0);
  uint8_t src[3 * 4096 + 100];
  for (size_t i = 0; i < sizeof src; i++)
    src[i] = (uint8_t)(i ^ 0x5a);
  size_t off = 4 * pg + 300;
  memcpy(a.mem + off, src, sizeof src);
  memcpy(a.want + off, src, sizeof src);
  arena_touch(&a, off, sizeof src);
  region_check(&a, r);
  memset(a.mem + 15 * pg + 5, 0xee, 2 * pg);
  memset(a.want + 15 * pg + 5, 0xee, 2 * pg);
  arena_touch(&a, 15 * pg + 5, 2 * pg);
  region_check(&a, r);
  arena_check_bytes(&a);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* Base and end in the middle of pages that also hold unrelated data. */
static void case_unaligned(void) {
  arena a;
  arena_init(&a, 10);
  size_t pg = a.pg, off = pg + 100, bytes = 4 * pg + 300;
  ibp_tracked *r = region_new(&a, off, bytes, 700);
  CHECK(ibp__track_protect(r) == 0);
  CHECK(page_prot(a.mem) == 'w');
  CHECK(page_prot(a.mem + pg) == 'r');
  CHECK(page_prot(a.mem + 5 * pg) == 'r');
  CHECK(page_prot(a.mem + 6 * pg) == 'w');
  arena_store(&a, pg + 10, 1); /* before the region, on its first page */
  CHECK_EQ(atomic_load(&r->write_faults), 1);
  region_check(&a, r);
  arena_store(&a, off + bytes + 5, 2); /* after it, on its last page */
  CHECK_EQ(atomic_load(&r->write_faults), 2);
  region_check(&a, r);
  arena_store(&a, 10, 3); /* pages outside: no tracking at all */
  arena_store(&a, 6 * pg + 10, 4);
  a.released[0] = a.released[6] = false;
  CHECK_EQ(atomic_load(&r->write_faults), 2);
  arena_store(&a, 3 * pg, 5);
  region_check(&a, r);
  arena_check_bytes(&a);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* r1 and r2 share page 2. */
static void case_shared(void) {
  arena a;
  arena_init(&a, 8);
  size_t pg = a.pg, split = 2 * pg + pg / 2;
  ibp_tracked *r1 = region_new(&a, 0, split, 300);
  ibp_tracked *r2 = region_new(&a, split, 5 * pg - split, 300);
  CHECK(ibp__track_protect(r1) == 0);
  CHECK(ibp__track_protect(r2) == 0);
  arena_store(&a, 2 * pg + 8, 1); /* r1's part of the shared page */
  region_check(&a, r1);
  region_check(&a, r2);
  CHECK_EQ(atomic_load(&r1->write_faults), 1);
  CHECK_EQ(atomic_load(&r2->write_faults), 1);
  arena_store(&a, 4 * pg, 2);
  region_check(&a, r1);
  region_check(&a, r2);
  ibp__track_unprotect(r1);
  ibp__track_unprotect(r2);

  /* Unprotecting r1 keeps the shared page read-only for r2. */
  memset(a.released, 0, sizeof a.released);
  region_clear_dirty(r1);
  region_clear_dirty(r2);
  atomic_store(&r1->write_faults, 0);
  atomic_store(&r2->write_faults, 0);
  CHECK(ibp__track_protect(r1) == 0);
  CHECK(ibp__track_protect(r2) == 0);
  ibp__track_unprotect(r1);
  CHECK(page_prot(a.mem) == 'w');
  CHECK(page_prot(a.mem + pg) == 'w');
  CHECK(page_prot(a.mem + 2 * pg) == 'r');
  CHECK(page_prot(a.mem + 3 * pg) == 'r');
  a.mem[pg] = a.want[pg] = 3; /* r1 untracked: no fault, no mark */
  arena_store(&a, 2 * pg + 1, 4);
  region_check(&a, r2);
  CHECK_EQ(atomic_load(&r2->write_faults), 1);
  CHECK_EQ(atomic_load(&r1->write_faults), 0);
  for (size_t w = 0; w < r1->bytes / 300 / 32 + 2; w++)
    CHECK_EQ(atomic_load(&r1->dirty[w]), 0);
  ibp__track_unprotect(r2);
  CHECK(page_prot(a.mem + 3 * pg) == 'w');
  arena_check_bytes(&a);
  region_free(r1);
  region_free(r2);
  arena_free(&a);
}

static void case_unprotect(void) {
  enum { FULL = IBP__PROT_SLOTS };
  arena a;
  arena_init(&a, FULL + 16);
  size_t pg = a.pg;
  ibp_tracked *r = region_new(&a, 0, 8 * pg, 2048);
  CHECK(ibp__track_protect(r) == 0);
  CHECK(ibp__track_protect(r) == 0); /* already: no second slot */
  CHECK_EQ(atomic_load(&ibp__track_live), 1);
  arena_store(&a, pg + 1, 1);
  ibp__track_unprotect(r);
  CHECK_EQ(atomic_load(&ibp__track_live), 0);
  for (size_t p = 0; p < 8; p++) {
    CHECK(page_prot(a.mem + p * pg) == 'w');
    a.mem[p * pg + 7] = a.want[p * pg + 7] = 9; /* not marked */
  }
  CHECK_EQ(atomic_load(&r->write_faults), 1);
  region_check(&a, r);
  ibp__track_unprotect(r); /* idempotent */
  CHECK(!atomic_load(&r->protected_));

  /* Protect again (reusing a retired slot), then fill the table. */
  memset(a.released, 0, sizeof a.released);
  region_clear_dirty(r);
  CHECK(ibp__track_protect(r) == 0);
  static ibp_tracked *many[FULL];
  for (size_t i = 0; i < FULL - 1; i++) {
    many[i] = region_new(&a, (10 + i) * pg, pg, 512);
    CHECK(ibp__track_protect(many[i]) == 0);
  }
  ibp_tracked *extra = region_new(&a, (FULL + 12) * pg, pg, 512);
  CHECK(ibp__track_protect(extra) == -1);
  CHECK(!atomic_load(&extra->protected_));
  CHECK(page_prot(a.mem + (FULL + 12) * pg) == 'w');
  arena_store(&a, 12 * pg + 3, 5); /* many[2] */
  region_check(&a, many[2]);
  ibp__track_unprotect(many[5]);
  CHECK(ibp__track_protect(extra) == 0);
  arena_store(&a, (FULL + 12) * pg, 6);
  region_check(&a, extra);
  arena_store(&a, 3 * pg, 7);
  region_check(&a, r);
  ibp__track_unprotect(extra);
  ibp__track_unprotect(r);
  for (size_t i = 0; i < FULL - 1; i++) {
    ibp__track_unprotect(many[i]);
    region_free(many[i]);
  }
  CHECK_EQ(atomic_load(&ibp__track_live), 0);
  arena_check_bytes(&a);
  region_free(extra);
  region_free(r);
  arena_free(&a);
}

/* ibp__track_mark_dirty and before_write on their own. */
static void case_mark(void) {
  arena a;
  arena_init(&a, 6);
  size_t pg = a.pg;
  ibp_tracked *r = region_new(&a, 10, 4 * pg, 1000); /* n = 16 */
  ibp__track_mark_dirty(r, r->base + 999, 2);
  CHECK(dirty_bit(r, 0) && dirty_bit(r, 1) && !dirty_bit(r, 2));
  CHECK_EQ(atomic_load(&r->dirty_tensors), 2);
  ibp__track_mark_dirty(r, r->base + 16000, 300); /* tail only */
  ibp__track_mark_dirty(r, r->base - 10, 10);     /* before the base */
  ibp__track_mark_dirty(r, r->base + 1500, 0);
  CHECK_EQ(atomic_load(&r->dirty_tensors), 2);
  ibp__track_mark_dirty(r, r->base - 5, SIZE_MAX); /* wraps: clipped */
  for (size_t i = 0; i < 16; i++)
    CHECK(dirty_bit(r, i));
  CHECK(!dirty_bit(r, 16));
  CHECK_EQ(atomic_load(&r->dirty_tensors), 16);
  /* Nothing protected: no effect, no fault. */
  ibp__track_before_write(a.mem, 4 * pg);
  ibp__track_before_write((void *)16, SIZE_MAX);
  region_clear_dirty(r);
  CHECK(ibp__track_protect(r) == 0);
  ibp__track_before_write(a.mem + 2 * pg + 5, 1);
  arena_touch(&a, 2 * pg + 5, 1);
  region_check(&a, r);
  CHECK(page_prot(a.mem + 2 * pg) == 'w');
  CHECK(page_prot(a.mem + 3 * pg) == 'r');
  ibp__track_before_write((void *)(uintptr_t)-4096, SIZE_MAX); /* clipped */
  ibp__track_before_write(a.mem + pg, SIZE_MAX);
  arena_touch(&a, pg, 5 * pg);
  region_check(&a, r);
  CHECK_EQ(atomic_load(&r->write_faults), 0);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* At vm.max_map_count, releasing one page (which splits a mapping) fails
 * with ENOMEM: the tracker must give up on the region as a whole (every
 * tensor dirty, the whole range writable) instead of faulting forever. */
static void case_maplimit(void) {
  arena a;
  arena_init(&a, 40);
  size_t pg = a.pg;
  ibp_tracked *r = region_new(&a, 0, 32 * pg, 3000);
  CHECK(ibp__track_protect(r) == 0);
  /* Fill the mapping table: every other page of a reservation PROT_NONE. */
  size_t k, K = 70000;
  uint8_t *fill = mmap(NULL, 2 * K * pg, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  CHECK(fill != MAP_FAILED);
  for (k = 0; k < K; k++)
    if (mprotect(fill + (2 * k + 1) * pg, pg, PROT_NONE) != 0)
      break;
  if (k == K) {
    munmap(fill, 2 * K * pg);
    fprintf(stderr, "maplimit: vm.max_map_count not reached; skipped\n");
    exit(77);
  }
  CHECK(errno == ENOMEM);
  a.mem[5 * pg + 1] = 1; /* claim, mprotect fails, whole region released */
  a.mem[20 * pg] = 2;    /* no fault any more */
  munmap(fill, 2 * K * pg);
  a.want[5 * pg + 1] = 1;
  a.want[20 * pg] = 2;
  arena_touch(&a, 0, 32 * pg);
  region_check(&a, r);
  CHECK_EQ(atomic_load(&r->write_faults), 1);
  for (size_t p = 0; p < 32; p++)
    CHECK(page_prot(a.mem + p * pg) == 'w');
  arena_check_bytes(&a);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
}

/* ---- threads ------------------------------------------------------------- */

#define TPAGES 256
static arena tarena;

typedef struct worker {
  int id;
  size_t stores;
} worker;

/* Thread id writes every page p with p % 4 == id and p % 3 != 0, three
 * bytes per page, in a scattered order. */
static void *store_worker(void *arg) {
  worker *w = arg;
  size_t pg = tarena.pg;
  for (size_t k = 0; k < TPAGES; k++) {
    size_t p = (k * 97) % TPAGES;
    if (p % 4 != (size_t)w->id || p % 3 == 0)
      continue;
    for (size_t j = 0; j < 3; j++) {
      size_t off = p * pg + (j * 1499 + (size_t)w->id) % pg;
      tarena.mem[off] = (uint8_t)(w->id + 1 + j);
    }
    w->stores++;
  }
  return NULL;
}

static void case_threads(void) {
  arena *a = &tarena;
  arena_init(a, TPAGES);
  size_t pg = a->pg;
  ibp_tracked *r = region_new(a, 0, TPAGES * pg, 6144);
  CHECK(ibp__track_protect(r) == 0);
  pthread_t t[4];
  worker w[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (worker){i, 0};
    CHECK(pthread_create(&t[i], NULL, store_worker, &w[i]) == 0);
  }
  size_t pages = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    pages += w[i].stores;
  }
  for (size_t p = 0; p < TPAGES; p++) {
    if (p % 3 == 0)
      continue;
    for (size_t j = 0; j < 3; j++) {
      size_t off = p * pg + (j * 1499 + p % 4) % pg;
      a->want[off] = (uint8_t)(p % 4 + 1 + j);
    }
    a->released[p] = true;
  }
  CHECK_EQ(atomic_load(&r->write_faults), pages);
  region_check(a, r);
  arena_check_bytes(a);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(a);
}

/* Protect/unprotect cycles while three threads keep storing into the region
 * and one keeps calling before_write: the slot protocol must never lose a
 * fault (crash) nor touch a retired region. */
static _Atomic int stop;

static void *race_store(void *arg) {
  size_t id = (size_t)arg, pg = tarena.pg, i = 0;
  while (!atomic_load(&stop)) {
    size_t p = (i++ * 7 + id) % 32;
    tarena.mem[p * pg + id] = (uint8_t)i;
  }
  return NULL;
}

static void *race_announce(void *arg) {
  (void)arg;
  size_t i = 0, pg = tarena.pg;
  while (!atomic_load(&stop))
    ibp__track_before_write(tarena.mem + (i++ % 30) * pg + 100, pg);
  return NULL;
}

static void case_race(void) {
  arena *a = &tarena;
  arena_init(a, 40);
  size_t pg = a->pg;
  ibp_tracked *r = region_new(a, 50, 32 * pg - 100, 4000);
  pthread_t t[4];
  for (size_t i = 0; i < 3; i++)
    CHECK(pthread_create(&t[i], NULL, race_store, (void *)i) == 0);
  CHECK(pthread_create(&t[3], NULL, race_announce, NULL) == 0);
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  int cycles = 0;
  do {
    region_clear_dirty(r);
    CHECK(ibp__track_protect(r) == 0);
    sched_yield();
    ibp__track_unprotect(r);
    cycles++;
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (now.tv_sec - start.tv_sec < 2);
  /* Unprotected now: the writers go on, nothing may be marked. */
  region_clear_dirty(r);
  uint64_t faults = atomic_load(&r->write_faults);
  struct timespec pause = {0, 50 * 1000 * 1000};
  nanosleep(&pause, NULL);
  CHECK_EQ(atomic_load(&r->write_faults), faults);
  CHECK_EQ(atomic_load(&r->dirty_tensors), 0);
  for (size_t w = 0; w < r->bytes / 4000 / 32 + 2; w++)
    CHECK_EQ(atomic_load(&r->dirty[w]), 0);
  atomic_store(&stop, 1);
  for (int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  printf("race: %d protect/unprotect cycles, %llu faults\n", cycles,
         (unsigned long long)faults);
  CHECK(cycles > 10);
  region_free(r);
  arena_free(a);
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"stores", case_stores},       {"memcpy", case_memcpy},
      {"unaligned", case_unaligned}, {"shared", case_shared},
      {"unprotect", case_unprotect}, {"mark", case_mark},
      {"maplimit", case_maplimit},   {"threads", case_threads},
      {"race", case_race},
  };
  setvbuf(stdout, NULL, _IONBF, 0);
  if (ibp__track_install() != 0) {
    fprintf(stderr, "cannot install the handler\n");
    return 1;
  }
  return run_case(cases, sizeof cases / sizeof cases[0], argc, argv);
}
