/*
 * The write tracker's front (track/track.h): chooses the tracker of each
 * region when it is protected -- userfaultfd (track_uffd.c) where the
 * kernel and the memory allow it and IBP_TRACKER does not say otherwise,
 * else mprotect + SIGSEGV (track_protect.c) -- and sends every later call
 * to the tracker that holds the region.  The dirty bits themselves are
 * kept here (ibp__mark_span), the same for both.
 */
#include <stdatomic.h>
#include <unistd.h>

#include "base/log.h"
#include "track/track.h"
#include "track/track_private.h"

int ibp__probed_available(_Atomic int *state, pthread_mutex_t *lock,
                          int (*start)(void)) {
  int a = atomic_load_explicit(state, memory_order_acquire);
  if (a == IBP__PROBE_UNKNOWN) {
    pthread_mutex_lock(lock);
    a = atomic_load_explicit(state, memory_order_relaxed);
    if (a == IBP__PROBE_UNKNOWN) {
      a = start() ? IBP__PROBE_AVAILABLE : IBP__PROBE_UNAVAILABLE;
      atomic_store_explicit(state, a, memory_order_release);
    }
    pthread_mutex_unlock(lock);
  }
  return a == IBP__PROBE_AVAILABLE;
}

uintptr_t ibp__page_size(void) {
  static _Atomic uintptr_t pg;
  uintptr_t p = atomic_load_explicit(&pg, memory_order_relaxed);
  if (!p) {
    p = (uintptr_t)sysconf(_SC_PAGESIZE);
    atomic_store_explicit(&pg, p, memory_order_relaxed);
  }
  return p;
}

ibp__geom ibp__geom_of(const ibp_tracked *r) {
  uint64_t R = r->tensor_bytes;
  ibp__geom g = {r->dirty, r->base, r->base + (uintptr_t)(r->bytes / R * R), R};
  return g;
}

uint64_t ibp__mark_span(const ibp__geom *g, uintptr_t lo, uintptr_t hi) {
  lo = lo < g->base ? g->base : lo;
  hi = hi > g->tend ? g->tend : hi;
  if (lo >= hi || !g->dirty)
    return 0;
  uint64_t first = (lo - g->base) / g->R, last = (hi - 1 - g->base) / g->R;
  uint64_t newly = 0;
  for (uint64_t w = first / 32; w <= last / 32; w++) {
    uint32_t m = UINT32_MAX;
    if (w == first / 32)
      m &= UINT32_MAX << (first % 32);
    if (w == last / 32)
      m &= UINT32_MAX >> (31 - last % 32);
    uint32_t old = atomic_load_explicit(&g->dirty[w], memory_order_relaxed);
    if ((old & m) == m)
      continue;
    old = atomic_fetch_or(&g->dirty[w], m);
    newly += (uint64_t)__builtin_popcount(m & ~old);
  }
  return newly;
}

void ibp__track_mark_dirty(ibp_tracked *r, uintptr_t addr, size_t len) {
  if (!r || !len)
    return;
  atomic_fetch_add(&r->writes_seen, 1); /* before the bits: track.h */
  if (!r->dirty)
    return;
  ibp__geom g = ibp__geom_of(r);
  uintptr_t e = addr + len;
  uint64_t newly = ibp__mark_span(&g, addr, e < addr ? UINTPTR_MAX : e);
  if (newly)
    atomic_fetch_add_explicit(&r->dirty_tensors, newly, memory_order_relaxed);
}

static int kind(const ibp_tracked *t) {
  return atomic_load_explicit(&t->kind, memory_order_acquire);
}

int ibp__track_install(void) {
  if (ibp__cfg.tracker != IBP_TRACKER_MPROTECT && ibp__uffd_available())
    return 0; /* the mprotect tracker installs itself if a region needs it */
  if (ibp__cfg.tracker == IBP_TRACKER_USERFAULTFD)
    return -1;
  return ibp__prot_install();
}

int ibp__track_protect(ibp_tracked *t) {
  if (!t)
    return -1;
  if (t->compact) { /* the memory is libibp's: its own tracker or none */
    if (ibp__compact_protect(t) != 0)
      return -1;
    atomic_store_explicit(&t->kind, IBP_TRACKER_KIND_COMPACT,
                          memory_order_release);
    return 0;
  }
  if (ibp__cfg.tracker != IBP_TRACKER_MPROTECT && ibp__uffd_available()) {
    if (ibp__uffd_protect(t) == 0) {
      atomic_store_explicit(&t->kind, IBP_TRACKER_KIND_UFFD,
                            memory_order_release);
      return 0;
    }
    if (ibp__cfg.tracker == IBP_TRACKER_USERFAULTFD)
      return -1;
    ibp__log(IBP_LOG_INFO,
             "region '%s': userfaultfd cannot protect its memory; the "
             "mprotect tracker holds it",
             t->name);
  } else if (ibp__cfg.tracker == IBP_TRACKER_USERFAULTFD) {
    return -1;
  }
  if (ibp__prot_protect(t) != 0)
    return -1;
  atomic_store_explicit(&t->kind, IBP_TRACKER_KIND_MPROTECT,
                        memory_order_release);
  return 0;
}

void ibp__track_unprotect(ibp_tracked *t) {
  if (!t)
    return;
  if (kind(t) == IBP_TRACKER_KIND_MPROTECT)
    ibp__prot_unprotect(t);
  if (kind(t) == IBP_TRACKER_KIND_COMPACT)
    ibp__compact_unprotect(t); /* every page rebuilt first */
  /* userfaultfd: the pages stay registered (a neighbour may share an edge
   * page) and simply stop being scanned; a quiet region's leave the
   * synchronous descriptor */
  if (kind(t) == IBP_TRACKER_KIND_UFFD) {
    ibp__quiet_remove(t);
    ibp__uffd_forget(t);
  }
  atomic_store(&t->protected_, 0);
}

int ibp__track_sync(ibp_tracked *t, uintptr_t addr, size_t len) {
  if (kind(t) != IBP_TRACKER_KIND_UFFD)
    return 0;
  return ibp__uffd_sync(t, addr, len);
}

int ibp__track_reprotect(ibp_tracked *t) {
  switch (kind(t)) {
  case IBP_TRACKER_KIND_UFFD:
    return ibp__quiet_reprotect(t);
  case IBP_TRACKER_KIND_MPROTECT:
    return ibp__prot_reprotect(t);
  case IBP_TRACKER_KIND_COMPACT:
    return ibp__compact_reprotect(t);
  default:
    return -1;
  }
}

void ibp__track_quiesce(void) {
  ibp__prot_quiesce(); /* userfaultfd has no pass in flight outside a call */
}

int ibp__track_still_protected(ibp_tracked *t, uintptr_t a, size_t len) {
  switch (kind(t)) {
  case IBP_TRACKER_KIND_UFFD:
    return ibp__quiet_still_protected(t, a, len);
  case IBP_TRACKER_KIND_MPROTECT:
    return ibp__prot_still_protected(t, a, len);
  case IBP_TRACKER_KIND_COMPACT:
    return ibp__compact_still_protected(t, a, len);
  default:
    return 0;
  }
}

void ibp__track_after_fork_child(void) {
  ibp__prot_after_fork_child();
  ibp__uffd_after_fork_child();
  ibp__quiet_after_fork_child();
  ibp__syncwp_after_fork_child();
  ibp__compact_after_fork_child();
}
