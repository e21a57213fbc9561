/*
 * Helpers of the write-tracking tests: an arena of mmap'd pages, region
 * records placed in it, and an independent model of which dirty bits must
 * be set.
 *
 * The model is deliberately naive: every page the test wrote to (or handed
 * to a C-library call) is "released"; tensor i of a region must be dirty
 * exactly when its byte range [base + i*R, base + (i+1)*R) intersects a
 * released page.  It is computed tensor by tensor, page by page, never
 * with the tracker's word/bit arithmetic.
 *
 * Every case runs in its own process (argv[1] names it); a failed CHECK
 * prints the condition and exits 1.
 */
#ifndef IBP_TRACK_TEST_H
#define IBP_TRACK_TEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/libc.h"
#include "track/track.h"
#include "track/track_private.h"

#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);    \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define CHECK_EQ(a, b)                                                         \
  do {                                                                         \
    unsigned long long a_ = (unsigned long long)(a);                           \
    unsigned long long b_ = (unsigned long long)(b);                           \
    if (a_ != b_) {                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%llu != %llu)\n",        \
              __FILE__, __LINE__, #a, #b, a_, b_);                             \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define MAX_PAGES 1100

/* Pages [0, npages) of one mapping, the bytes they should hold, and which
 * of them were released. */
typedef struct arena {
  uint8_t *mem;
  uint8_t *want;
  size_t npages, pg;
  bool released[MAX_PAGES];
} arena;

static inline void arena_init(arena *a, size_t npages) {
  memset(a, 0, sizeof *a);
  CHECK(npages <= MAX_PAGES);
  a->pg = (size_t)sysconf(_SC_PAGESIZE);
  a->npages = npages;
  a->mem = mmap(NULL, npages * a->pg, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(a->mem != MAP_FAILED);
  a->want = malloc(npages * a->pg);
  CHECK(a->want);
  for (size_t i = 0; i < npages * a->pg; i++)
    a->mem[i] = a->want[i] = (uint8_t)(i * 131 + 7);
}

static inline void arena_free(arena *a) {
  munmap(a->mem, a->npages * a->pg);
  free(a->want);
}

/* Marks the pages touched by [off, off+len) released in the model. */
static inline void arena_touch(arena *a, size_t off, size_t len) {
  for (size_t p = off / a->pg; len && p <= (off + len - 1) / a->pg; p++)
    a->released[p] = true;
}

/* A CPU store of one byte, recorded in the model. */
static inline void arena_store(arena *a, size_t off, uint8_t v) {
  a->mem[off] = v;
  a->want[off] = v;
  arena_touch(a, off, 1);
}

static inline void arena_check_bytes(const arena *a) {
  for (size_t i = 0; i < a->npages * a->pg; i++)
    if (a->mem[i] != a->want[i]) {
      fprintf(stderr, "byte %zu (page %zu): %u, want %u\n", i, i / a->pg,
              a->mem[i], a->want[i]);
      CHECK(a->mem[i] == a->want[i]);
    }
}

/* A tracked region for [off, off+bytes) of the arena, tensors of R bytes,
 * with a zeroed dirty bitmap (one spare word to catch stray bits); its
 * name is stored right after it. */
static inline ibp_tracked *region_new(arena *a, size_t off, size_t bytes,
                                      uint32_t R) {
  enum { name_max = 32 };
  ibp_tracked *r = calloc(1, sizeof *r + name_max);
  CHECK(r);
  r->base = (uintptr_t)a->mem + off;
  r->bytes = bytes;
  r->tensor_bytes = R;
  char *name = (char *)(r + 1);
  snprintf(name, name_max, "test@%zu", off);
  r->name = name;
  size_t words = bytes / R / 32 + 2;
  r->dirty = calloc(words, sizeof *r->dirty);
  CHECK(r->dirty);
  return r;
}

static inline void region_free(ibp_tracked *r) {
  free((void *)r->dirty);
  free(r);
}

static inline void region_clear_dirty(ibp_tracked *r) {
  size_t words = r->bytes / r->tensor_bytes / 32 + 2;
  for (size_t w = 0; w < words; w++)
    atomic_store(&r->dirty[w], 0);
  atomic_store(&r->dirty_tensors, 0);
}

static inline bool dirty_bit(const ibp_tracked *r, size_t i) {
  return atomic_load(&r->dirty[i / 32]) >> (i % 32) & 1;
}

/* Compares every dirty bit of r (and the spare bits past the last tensor)
 * with the model; also r->dirty_tensors. */
static inline void region_check(const arena *a, const ibp_tracked *r) {
  size_t R = r->tensor_bytes, n = r->bytes / R, set = 0;
  size_t off = r->base - (uintptr_t)a->mem;
  for (size_t i = 0; i < n; i++) {
    bool want = false;
    for (size_t p = 0; p < a->npages; p++) {
      size_t plo = p * a->pg, phi = plo + a->pg;
      size_t tlo = off + i * R, thi = tlo + R;
      if (a->released[p] && tlo < phi && plo < thi)
        want = true;
    }
    if (dirty_bit(r, i) != want) {
      fprintf(stderr, "region %s tensor %zu of %zu: dirty %d, want %d\n",
              r->name, i, n, dirty_bit(r, i), want);
      CHECK(dirty_bit(r, i) == want);
    }
    set += want;
  }
  for (size_t i = n; i < (n / 32 + 2) * 32; i++)
    CHECK(!dirty_bit(r, i));
  CHECK_EQ(atomic_load(&r->dirty_tensors), set);
}

/* Protection of the page holding addr, from /proc/self/maps: 'w' when
 * writable, 'r' when read-only, '-' when neither, 0 when unmapped. */
static inline char page_prot(const void *addr) {
  FILE *f = fopen("/proc/self/maps", "r");
  CHECK(f);
  char line[512], res = 0;
  while (!res && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char perm[5];
    if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perm) == 3 &&
        lo <= (uintptr_t)addr && (uintptr_t)addr < hi)
      res = perm[1] == 'w' ? 'w' : perm[0] == 'r' ? 'r' : '-';
  }
  fclose(f);
  return res;
}

typedef struct test_case {
  const char *name;
  void (*fn)(void);
} test_case;

static inline int run_case(const test_case *cases, size_t n, int argc,
                           char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CASE\n", argv[0]);
    return 2;
  }
  for (size_t i = 0; i < n; i++)
    if (!strcmp(cases[i].name, argv[1])) {
      cases[i].fn();
      printf("%s: ok\n", argv[1]);
      return 0;
    }
  fprintf(stderr, "unknown case %s\n", argv[1]);
  return 2;
}

#endif /* IBP_TRACK_TEST_H */
