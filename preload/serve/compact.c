/* Compact regions (serve/compact.h): the memory libibp gives for a pinned
 * allocation, what its tracker asks of the shadow, which copies the GPU
 * paths may serve from the shadow alone, and the way back to pinned
 * memory. */
#include "serve/compact.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <uthash.h>

#include "base/driver.h"
#include "base/log.h"

/* ---- the memory ---------------------------------------------------------- */

/* One allocation ibp__compact_alloc gave (owned: one writer at a time under
 * `lock`). */
typedef struct mapping {
  uintptr_t base;
  size_t bytes, map_bytes;
  unsigned flags; /* cuMemHostAlloc's */
  CUcontext ctx;  /* current at the allocation */
  int dev;
  int pinned; /* registered with the driver since (ibp__compact_pin) */
  UT_hash_handle hh;
} mapping;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static mapping *mappings;
/* waits for the worker's jobs on a region (ibp__compact_init) */
static void (*wait_jobs)(ibp_region_rec *r, int dev);

void ibp__compact_init(void (*wait)(ibp_region_rec *r, int dev)) {
  wait_jobs = wait;
}

static _Atomic int any_mapping; /* a relaxed look before the lock */

/* The mapping that starts at `base`, or NULL (under lock). */
static mapping *mapping_at(uintptr_t base) {
  mapping *m = NULL;
  HASH_FIND(hh, mappings, &base, sizeof base, m);
  return m;
}

void *ibp__compact_alloc(size_t n, unsigned flags, CUcontext ctx, int dev) {
  const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  const size_t len = (n + pg - 1) / pg * pg;
  if (n == 0 || len < n || !ibp__track_compact_available())
    return NULL;
  mapping *m = calloc(1, sizeof *m);
  void *p = m ? mmap(NULL, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
              : MAP_FAILED;
  if (p == MAP_FAILED) {
    free(m);
    return NULL;
  }
  /* like the driver's pinned memory, not inherited by a forked child; and
   * released page by page, so never a huge page */
  (void)madvise(p, len, MADV_DONTFORK);
  (void)madvise(p, len, MADV_NOHUGEPAGE);
  *m = (mapping){.base = (uintptr_t)p,
                 .bytes = n,
                 .map_bytes = len,
                 .flags = flags,
                 .ctx = ctx,
                 .dev = dev};
  pthread_mutex_lock(&lock);
  HASH_ADD(hh, mappings, base, sizeof m->base, m);
  atomic_store(&any_mapping, 1);
  pthread_mutex_unlock(&lock);
  return p;
}

int ibp__compact_free(void *p) {
  if (!p || !atomic_load_explicit(&any_mapping, memory_order_relaxed))
    return 0;
  pthread_mutex_lock(&lock);
  mapping *m = mapping_at((uintptr_t)p);
  if (m)
    HASH_DEL(mappings, m);
  pthread_mutex_unlock(&lock);
  if (!m)
    return 0;
  const ibp_driver *d = ibp__driver();
  if (m->pinned && d)
    d->cuMemHostUnregister(p);
  munmap(p, m->map_bytes);
  free(m);
  return 1;
}

int ibp__compact_memory_of(const void *p, int pinned_too,
                           ibp_compact_memory *out) {
  if (!atomic_load_explicit(&any_mapping, memory_order_relaxed))
    return 0;
  const uintptr_t a = (uintptr_t)p;
  int found = 0;
  pthread_mutex_lock(&lock);
  mapping *m, *next;
  HASH_ITER(hh, mappings, m, next) {
    if ((pinned_too || !m->pinned) && a >= m->base && a < m->base + m->bytes) {
      *out = (ibp_compact_memory){m->base, m->bytes, m->flags, m->ctx, m->dev};
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&lock);
  return found;
}

int ibp__compact_owns(const void *p, size_t n) {
  if (!atomic_load_explicit(&any_mapping, memory_order_relaxed))
    return 0;
  const uintptr_t lo = (uintptr_t)p, hi = lo + n;
  int owns = 0;
  pthread_mutex_lock(&lock);
  mapping *m, *next;
  HASH_ITER(hh, mappings, m, next) {
    if (!m->pinned && lo < m->base + m->bytes && m->base < hi) {
      owns = 1;
      break;
    }
  }
  pthread_mutex_unlock(&lock);
  return owns;
}

int ibp__compact_is_base(const void *p) {
  if (!p || !atomic_load_explicit(&any_mapping, memory_order_relaxed))
    return 0;
  pthread_mutex_lock(&lock);
  const int found = mapping_at((uintptr_t)p) != NULL;
  pthread_mutex_unlock(&lock);
  return found;
}

void ibp__compact_discard(const void *p) {
  ibp_region_rec *r = NULL;
  if (ibp_registry_find(p, 1, &r) == IBP_FIND_FOUND &&
      r->base == (uintptr_t)p && ibp__served(r))
    atomic_store(&ibp__served(r)->track.discard, 1);
  ibp_region_release(r);
}

void ibp__compact_pin_range(const void *p, size_t n, const char *why) {
  if (!ibp__compact_owns(p, n))
    return;
  uintptr_t a = (uintptr_t)p, end = a + n;
  while (a < end) {
    ibp_region_rec *r = NULL;
    if (ibp_registry_find((const void *)a, end - a, &r) == IBP_FIND_NONE)
      break;
    ibp__compact_pin(r, why);
    uintptr_t region_end = r->base + r->bytes;
    ibp_region_release(r);
    a = region_end;
  }
}

/* ---- what the tracker asks ----------------------------------------------- */

static int bit(const uint8_t *flags, uint64_t t) {
  return (flags[t / 8] >> (t % 8)) & 1;
}

static int word_bit(const _Atomic uint32_t *map, uint64_t t) {
  return (atomic_load_explicit(&map[t / 32], memory_order_acquire) >>
          (t % 32)) &
         1;
}

/* Tensors [first, last] are stored compressed, placed, clean and not
 * being rewritten: the shadow holds their bytes. */
static int held_by_shadow(const ibp_served_region *s, uint64_t first,
                          uint64_t last) {
  const ibp_layout *l = &s->layout;
  if (last >= s->geometry.tensors || !l->flags || !s->track.dirty ||
      last >= atomic_load_explicit(&l->filled, memory_order_acquire))
    return 0;
  const int refreshing =
      atomic_load_explicit(&s->refresh.refreshing, memory_order_acquire);
  for (uint64_t t = first; t <= last; t++)
    if (!bit(l->flags, t) || !l->lengths[t] || word_bit(s->track.dirty, t) ||
        (refreshing && word_bit(s->refresh.busy, t)))
      return 0;
  return 1;
}

static int rebuild(void *arg, uintptr_t addr, size_t len, uint8_t *out) {
  const ibp_served_region *s = arg;
  const ibp_layout *l = &s->layout;
  const uint64_t R = s->geometry.tensor_bytes;
  const uint64_t off = addr - s->track.base, end = off + len;
  if (!len || end > s->geometry.tensors * R)
    return -1;
  for (uint64_t t = off / R; t <= (end - 1) / R; t++) {
    const uint64_t lo = t * R > off ? t * R : off;
    const uint64_t hi = (t + 1) * R < end ? (t + 1) * R : end;
    const uint32_t K = l->clusters.count;
    const uint32_t id = K > 1 ? ibp_cluster_id(l->ids, K, t) : 0;
    if (!bit(l->flags, t) || !l->lengths[t] || id >= K ||
        ibp_decompress_tensor_part(
            &l->clusters.params[id], (const uint8_t *)l->shadow + l->offsets[t],
            l->lengths[t], 1, (uint32_t)(lo - t * R), (uint32_t)(hi - lo),
            out + (lo - off)) != IBP_OK)
      return -1;
  }
  return 0;
}

static int releasable(void *arg, uintptr_t addr, size_t len) {
  const ibp_served_region *s = arg;
  const uint64_t R = s->geometry.tensor_bytes;
  if (!len || addr < s->track.base)
    return 0;
  const uint64_t off = addr - s->track.base;
  return held_by_shadow(s, off / R, (off + len - 1) / R);
}

void ibp__compact_attach(ibp_served_region *s) {
  s->compact_ops = (ibp_compact_ops){rebuild, releasable, s};
  s->track.compact = &s->compact_ops;
  atomic_store(&s->compact, 1);
}

int ibp__compact_active(const ibp_served_region *s) {
  return atomic_load_explicit(&s->compact, memory_order_acquire);
}

int ibp__compact_servable(const ibp_served_region *s, uint64_t off,
                          uint64_t len) {
  const uint64_t R = s->geometry.tensor_bytes;
  if (!len || atomic_load_explicit(&s->refresh.filling, memory_order_acquire))
    return 0;
  return held_by_shadow(s, off / R, (off + len - 1) / R);
}

uint64_t ibp__compact_run(const ibp_served_region *s, uint64_t off,
                          uint64_t len, int *servable) {
  const uint64_t R = s->geometry.tensor_bytes;
  if (!len)
    return 0;
  const int filling =
      atomic_load_explicit(&s->refresh.filling, memory_order_acquire);
  uint64_t t = off / R, end = off + len;
  *servable = !filling && held_by_shadow(s, t, t);
  uint64_t at = (t + 1) * R;
  while (at < end && !filling && held_by_shadow(s, at / R, at / R) == *servable)
    at += R;
  return (at < end ? at : end) - off;
}

/* ---- releasing, and the way back ----------------------------------------- */

void ibp__compact_release(ibp_region_rec *r) {
  ibp_served_region *s = ibp__served(r);
  if (!s || !ibp__compact_active(s) || atomic_load(&r->removed) ||
      ibp_region_state_get(r) != IBP_REGION_READY)
    return;
  atomic_store(&s->host.rebuilt_mark, atomic_load(&s->track.pages_rebuilt));
  long n = ibp__track_release(&s->track);
  long long resident = ibp__track_resident_bytes(&s->track);
  if (resident >= 0)
    atomic_store(&s->host.resident_bytes, (uint64_t)resident);
  if (n > 0)
    ibp__log(IBP_LOG_DEBUG, "region '%s': %ld pages released", r->name, n);
}

/* The flags cuMemHostRegister takes for memory cuMemHostAlloc'd with
 * `alloc` (write-combining has no equivalent: plain cached memory reads
 * the same bytes). */
static unsigned register_flags(unsigned alloc) {
  unsigned f = 0;
  if (alloc & CU_MEMHOSTALLOC_PORTABLE)
    f |= CU_MEMHOSTREGISTER_PORTABLE;
  if (alloc & CU_MEMHOSTALLOC_DEVICEMAP)
    f |= CU_MEMHOSTREGISTER_DEVICEMAP;
  return f;
}

int ibp__compact_pin(ibp_region_rec *r, const char *why) {
  ibp_served_region *s = ibp__served(r);
  const ibp_driver *d = ibp__driver();
  if (!s || !atomic_exchange(&s->compact, 0))
    return 0; /* not compact (any more) */
  /* no copy decides for the GPU paths from now on, and no worker job on r
   * runs while its pages come back */
  ibp_region_transition(r, IBP_REGION_READY, IBP_REGION_DEGRADED);
  if (wait_jobs)
    wait_jobs(r, -1);
  ibp_region_transition(r, IBP_REGION_READY, IBP_REGION_DEGRADED);
  ibp__track_unprotect(&s->track); /* every page rebuilt */
  pthread_mutex_lock(&lock);
  mapping *m = mapping_at(r->base);
  int rc = -1;
  if (m) {
    CUcontext ignored;
    int pushed =
        d && s->home_ctx && d->cuCtxPushCurrent(s->home_ctx) == CUDA_SUCCESS;
    rc = d && d->cuMemHostRegister((void *)m->base, m->map_bytes,
                                   register_flags(m->flags)) == CUDA_SUCCESS
             ? 0
             : -1;
    if (pushed)
      d->cuCtxPopCurrent(&ignored);
    m->pinned = rc == 0;
  }
  pthread_mutex_unlock(&lock);
  if (rc == 0)
    ibp__log(IBP_LOG_INFO,
             "region '%s': %s; its memory is rebuilt and pinned, and it is "
             "an ordinary region from now on",
             r->name, why);
  else
    ibp__log(IBP_LOG_WARN,
             "region '%s': %s, but its memory could not be pinned; it "
             "passes through",
             r->name, why);
  return 1;
}

int ibp__compact_release_due(const ibp_served_region *s, unsigned share) {
  if (!ibp__compact_active(s))
    return 0;
  const uint64_t back =
      atomic_load_explicit(&s->track.pages_rebuilt, memory_order_relaxed) -
      atomic_load_explicit(&s->host.rebuilt_mark, memory_order_relaxed);
  const uint64_t pages = s->track.bytes / 4096 + 1;
  return back * share >= pages;
}

long long ibp__compact_resident(const ibp_served_region *s) {
  return ibp__track_resident_bytes(&s->track);
}
