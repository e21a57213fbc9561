/*
 * The process-wide registry: one writer mutex, one published snapshot.
 * Writers copy the current region list, build a new snapshot, publish it,
 * wait for a grace period and free the old one (grace.c).
 */
#include "registry_internal.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t writer = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(ibp__snapshot *) current; /* NULL = no region */
static _Atomic size_t region_count;
static uint64_t next_id = 1; /* under writer */

int ibp_registry_init(ibp_region_release_hook hook, void *ctx) {
  pthread_mutex_lock(&writer);
  ibp__region_set_hook(hook, ctx);
  pthread_mutex_unlock(&writer);
  return 0;
}

int ibp_registry_empty(void) {
  return atomic_load_explicit(&region_count, memory_order_relaxed) == 0;
}

size_t ibp_registry_count(void) {
  return atomic_load_explicit(&region_count, memory_order_relaxed);
}

/* Writer lock held.  Publishes `next` (NULL when it holds no region) and
 * returns the snapshot it replaced once no lookup can be using it; the
 * caller frees it. */
static ibp__snapshot *publish(ibp__snapshot *next) {
  if (next != NULL && next->n == 0) {
    ibp__snapshot_free(next);
    next = NULL;
  }
  ibp__snapshot *old = atomic_exchange(&current, next);
  atomic_store_explicit(&region_count, next ? next->n : 0,
                        memory_order_relaxed);
  ibp__grace_wait();
  return old;
}

/* Writer lock held.  The current regions with `add` inserted (if not NULL)
 * and the one at index `skip` left out (if < n), as a new snapshot. */
static ibp__snapshot *rebuild(const ibp__snapshot *cur, ibp_region_rec *add,
                              size_t skip) {
  size_t n = cur ? cur->n : 0;
  ibp_region_rec **list = malloc((n + 1) * sizeof *list);
  if (list == NULL)
    return NULL;
  size_t at = add ? ibp__snapshot_lower_bound(cur, add->base) : n + 1;
  size_t k = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i == at)
      list[k++] = add;
    if (i < n && i != skip)
      list[k++] = cur->by_base[i];
  }
  ibp__snapshot *next = ibp__snapshot_build(list, k);
  free(list);
  return next;
}

static const ibp__snapshot empty_snapshot;

static int64_t add_locked(uintptr_t base, uint64_t bytes,
                          const ibp_region_rule *rule, const char *name) {
  ibp__snapshot *cur = atomic_load(&current);
  const ibp__snapshot *view = cur ? cur : &empty_snapshot;
  uintptr_t last = base + (uintptr_t)(bytes - 1);
  if (view->n > 0 && ibp__snapshot_overlap(view, base, last) != NULL)
    return IBP_REGISTRY_EOVERLAP;
  ibp_region_rec *r = ibp__region_new(next_id, base, bytes, rule, name);
  if (r == NULL)
    return IBP_REGISTRY_ENOMEM;
  ibp__snapshot *next = rebuild(view, r, SIZE_MAX);
  if (next == NULL) {
    ibp_region_release(r);
    return IBP_REGISTRY_ENOMEM;
  }
  ibp__snapshot_free(publish(next));
  return (int64_t)next_id++;
}

int64_t ibp_registry_add(const void *base, uint64_t bytes,
                         const ibp_region_rule *rule, const char *name) {
  uintptr_t b = (uintptr_t)base;
  if (base == NULL || bytes == 0 || bytes - 1 > UINTPTR_MAX - b)
    return IBP_REGISTRY_EINVAL;
  pthread_mutex_lock(&writer);
  int64_t id = add_locked(b, bytes, rule, name);
  pthread_mutex_unlock(&writer);
  return id;
}

static int remove_locked(uintptr_t base) {
  ibp__snapshot *cur = atomic_load(&current);
  if (cur == NULL)
    return -1;
  size_t i = ibp__snapshot_lower_bound(cur, base);
  if (i == cur->n || cur->by_base[i]->base != base)
    return -1;
  ibp_region_rec *r = cur->by_base[i];
  ibp__snapshot *next = NULL;
  if (cur->n > 1) {
    next = rebuild(cur, NULL, i);
    if (next == NULL)
      return -1;
  }
  atomic_store(&r->removed, 1);
  ibp__snapshot_free(publish(next));
  ibp_region_release(r); /* the registry's reference */
  return 0;
}

int ibp_registry_remove(const void *base) {
  pthread_mutex_lock(&writer);
  int rc = remove_locked((uintptr_t)base);
  pthread_mutex_unlock(&writer);
  return rc;
}

void ibp_registry_fini(void) {
  pthread_mutex_lock(&writer);
  ibp__snapshot *old = publish(NULL);
  for (size_t i = 0; old != NULL && i < old->n; i++) {
    atomic_store(&old->by_base[i]->removed, 1);
    ibp_region_release(old->by_base[i]); /* the registry's reference */
  }
  ibp__snapshot_free(old);
  pthread_mutex_unlock(&writer);
}

void ibp_registry_reset_after_fork(void) {
  pthread_mutex_init(&writer, NULL);
  ibp__grace_reset();
}

size_t ibp_registry_foreach(void (*fn)(const ibp_region_rec *r, void *ctx),
                            void *ctx) {
  pthread_mutex_lock(&writer);
  ibp__snapshot *cur = atomic_load(&current);
  size_t n = cur ? cur->n : 0;
  for (size_t i = 0; i < n; i++)
    fn(cur->by_base[i], ctx);
  pthread_mutex_unlock(&writer);
  return n;
}

ibp_find_result ibp_registry_find(const void *addr, size_t len,
                                  ibp_region_rec **out) {
  *out = NULL;
  if (ibp_registry_empty())
    return IBP_FIND_NONE;
  uintptr_t first = (uintptr_t)addr;
  uintptr_t span = len ? (uintptr_t)len - 1 : 0;
  uintptr_t last = span > UINTPTR_MAX - first ? UINTPTR_MAX : first + span;
  unsigned ticket = ibp__read_enter();
  ibp__snapshot *s = atomic_load(&current);
  ibp_region_rec *r = s ? ibp__snapshot_overlap(s, first, last) : NULL;
  if (r != NULL)
    ibp_region_acquire(r);
  ibp__read_exit(ticket);
  if (r == NULL)
    return IBP_FIND_NONE;
  *out = r;
  if (r->base <= first && last - r->base <= r->bytes - 1)
    return IBP_FIND_FOUND;
  return IBP_FIND_STRADDLES;
}
