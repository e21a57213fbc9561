/*
 * Pinned host ranges and device-side host reads.
 *
 * The registry is a sorted array of disjoint ranges under a rwlock with a
 * version counter.  A launch copies it when it starts a block and the
 * version has moved, so the per-read lookup (a one-entry cache, then a
 * binary search) takes no lock.
 *
 * A read that overlaps a pinned range must lie entirely inside it; a read
 * that touches no pinned range is taken to be device memory (not counted).
 */
#include "simt_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic int strict_host = -1; /* -1: not set, read SIMT_STRICT_HOST */
static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct simt_range *reg;
static unsigned reg_n, reg_cap;
static _Atomic uint64_t reg_version = 1;

/* Index of the last range with lo <= a, or -1. */
static long find_floor(const struct simt_range *r, unsigned n, uintptr_t a) {
  long lo = 0, hi = (long)n - 1, best = -1;
  while (lo <= hi) {
    long mid = lo + (hi - lo) / 2;
    if (r[mid].lo <= a) {
      best = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return best;
}

int simt_host_try_register(const void *base, size_t bytes) {
  uintptr_t lo = (uintptr_t)base;
  if (!base || bytes == 0 || lo + bytes < lo)
    return -1;
  int rc = -1;
  pthread_rwlock_wrlock(&reg_lock);
  long i = find_floor(reg, reg_n, lo);
  int overlaps = (i >= 0 && reg[i].hi > lo) ||
                 ((unsigned long)(i + 1) < reg_n && reg[i + 1].lo < lo + bytes);
  if (!overlaps && reg_n == reg_cap) {
    unsigned cap = reg_cap ? reg_cap * 2 : 16;
    struct simt_range *n = realloc(reg, cap * sizeof *n);
    if (n) {
      reg = n;
      reg_cap = cap;
    }
  }
  if (!overlaps && reg_n < reg_cap) {
    memmove(&reg[i + 2], &reg[i + 1], (reg_n - (size_t)(i + 1)) * sizeof *reg);
    reg[i + 1] = (struct simt_range){lo, lo + bytes, 0};
    reg_n++;
    atomic_fetch_add(&reg_version, 1);
    rc = 0;
  }
  pthread_rwlock_unlock(&reg_lock);
  return rc;
}

int simt_host_try_unregister(const void *base) {
  int rc = -1;
  pthread_rwlock_wrlock(&reg_lock);
  long i = find_floor(reg, reg_n, (uintptr_t)base);
  if (i >= 0 && reg[i].lo == (uintptr_t)base) {
    memmove(&reg[i], &reg[i + 1], (reg_n - (size_t)i - 1) * sizeof *reg);
    reg_n--;
    atomic_fetch_add(&reg_version, 1);
    rc = 0;
  }
  pthread_rwlock_unlock(&reg_lock);
  return rc;
}

int simt_host_set_alias(const void *base, void *alias) {
  int rc = -1;
  pthread_rwlock_wrlock(&reg_lock);
  long i = find_floor(reg, reg_n, (uintptr_t)base);
  if (i >= 0 && reg[i].lo == (uintptr_t)base) {
    reg[i].alias = (uintptr_t)alias;
    atomic_fetch_add(&reg_version, 1);
    rc = 0;
  }
  pthread_rwlock_unlock(&reg_lock);
  return rc;
}

void simt_host_register(const void *base, size_t bytes) {
  (void)simt_host_try_register(base, bytes);
}

void simt_host_unregister(const void *base) {
  (void)simt_host_try_unregister(base);
}

void simt_set_strict_host_reads(int on) {
  atomic_store(&strict_host, on != 0);
}

/* ---- a launch's copy ----------------------------------------------------- */

void simt__hostmap_init(struct simt_hostmap *m) {
  memset(m, 0, sizeof *m);
  int strict = atomic_load(&strict_host);
  if (strict < 0) {
    const char *env = getenv("SIMT_STRICT_HOST");
    strict = env && *env && strcmp(env, "0") != 0;
  }
  m->strict = strict;
}

int simt__hostmap_sync(struct simt_hostmap *m) {
  if (atomic_load(&reg_version) == m->version)
    return 0;
  int rc = 0;
  pthread_rwlock_rdlock(&reg_lock);
  if (reg_n > m->cap) {
    struct simt_range *n = realloc(m->r, reg_n * sizeof *n);
    if (n) {
      m->r = n;
      m->cap = reg_n;
    }
  }
  if (reg_n <= m->cap) {
    if (reg_n)
      memcpy(m->r, reg, reg_n * sizeof *reg);
    m->n = reg_n;
    m->version = atomic_load(&reg_version);
  } else {
    rc = -1;
  }
  pthread_rwlock_unlock(&reg_lock);
  m->last = (struct simt_range){0, 0, 0};
  return rc;
}

void simt__hostmap_free(struct simt_hostmap *m) {
  free(m->r);
  memset(m, 0, sizeof *m);
}

static SIMT_NORETURN __attribute__((noinline, cold)) void
strict_miss(struct simt_fiber *f, const struct simt_hostmap *m, uintptr_t a,
            uintptr_t b, long below) {
  if (below < 0)
    simt__fail(f,
               "host read [%#lx,%#lx) lies in no pinned range (strict "
               "host reads)",
               (unsigned long)a, (unsigned long)b);
  simt__fail(f,
             "host read [%#lx,%#lx) lies in no pinned range, %lu bytes "
             "past the end of [%#lx,%#lx) (strict host reads)",
             (unsigned long)a, (unsigned long)b,
             (unsigned long)(a - m->r[below].hi), (unsigned long)m->r[below].lo,
             (unsigned long)m->r[below].hi);
}

int simt__host_check(struct simt_fiber *f, uintptr_t a, size_t n) {
  struct simt_hostmap *m = &f->run->hosts;
  uintptr_t b = a + n;
  if (a >= m->last.lo && b <= m->last.hi && a < m->last.hi)
    return 1;
  long i = find_floor(m->r, m->n, a);
  const struct simt_range *hit = NULL;
  if (i >= 0 && m->r[i].hi > a)
    hit = &m->r[i];
  else if ((unsigned long)(i + 1) < m->n && m->r[i + 1].lo < b)
    hit = &m->r[i + 1];
  if (!hit && m->strict && n) /* zero bytes read nothing */
    strict_miss(f, m, a, b, i);
  if (!hit)
    return 0;
  if (a < hit->lo || b > hit->hi)
    simt__fail(f, "host read [%#lx,%#lx) runs past pinned range [%#lx,%#lx)",
               (unsigned long)a, (unsigned long)b, (unsigned long)hit->lo,
               (unsigned long)hit->hi);
  m->last = *hit;
  return 1;
}

void simt_read_host(void *dst, const void *src, unsigned bytes) {
  struct simt_fiber *f = simt__self();
  uintptr_t a = (uintptr_t)src;
  if (bytes == 0 || bytes > 16 || (bytes & (bytes - 1)) || a % bytes)
    simt__fail(f, "host read of %u bytes at %p: not an aligned 1/2/4/8/16",
               bytes, src);
  if (simt__host_check(f, a, bytes))
    simt__pcie_record(f, a, bytes);
  memcpy(dst, src, bytes);
}

/* A device-side store into pinned host memory goes over the bus like DMA:
 * through the range's alias when it has one, so the CPU's page protection
 * of the application's mapping does not see it. */
void simt_write_host(void *dst, const void *src, unsigned bytes) {
  struct simt_fiber *f = simt__self();
  uintptr_t a = (uintptr_t)dst;
  if (bytes == 0 || bytes > 16 || (bytes & (bytes - 1)) || a % bytes)
    simt__fail(f, "host write of %u bytes at %p: not an aligned 1/2/4/8/16",
               bytes, dst);
  char *to = dst;
  if (simt__host_check(f, a, bytes) && f->run->hosts.last.alias)
    to = (char *)f->run->hosts.last.alias + (a - f->run->hosts.last.lo);
  memcpy(to, src, bytes);
}
