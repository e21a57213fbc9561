/*
 * Write tracking (track/): which tensors of a region were written since
 * they were compressed.  Shadow mode, track=protect: the region's pages are
 * held read-only; the first write to a page marks the tensors on it dirty
 * and makes the page writable (track.c, docs/ARCHITECTURE.md "No stale
 * byte").  Kernel-side writes the C library makes into caller memory
 * (read(2) ...) are announced by the libc hooks (hooks_libc.c), and the
 * application's own SIGSEGV/SIGBUS handlers are chained (hooks_signal.c).
 *
 * The tracker depends on base/ only: a region is described to it by an
 * ibp_tracked, which the owner (serve/region.h) embeds.
 */
#ifndef IBP_PRELOAD_TRACK_H
#define IBP_PRELOAD_TRACK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* One tracked region.  The owner sets the geometry and `dirty` before
 * ibp__track_protect and keeps them unchanged while tracked; the tracker
 * updates the rest from any thread. */
typedef struct ibp_tracked {
  uintptr_t base;
  uint64_t bytes;
  uint32_t tensor_bytes; /* R: tensor i is [base + i*R, base + (i+1)*R) */
  const char *name;      /* for messages; outlives the tracking */
  /* One bit per tensor (bit i%32 of dirty[i/32]), 1 = written since
   * compression: served raw.  Set with atomic OR from any thread; NULL
   * until the owner allocates it (device-mapped pinned memory). */
  _Atomic uint32_t *dirty;
  _Atomic uint64_t dirty_tensors; /* bits set in dirty (approximate) */
  _Atomic uint64_t write_faults;  /* writes the tracker caught */
  _Atomic int protected_;         /* the tracker holds the pages read-only */
} ibp_tracked;

/* Installs the SIGSEGV/SIGBUS handler through the real sigaction, once.
 * The handler chains to whatever was installed before and to what the
 * application installs later (hooks_signal.c).  Returns 0, or -1. */
int ibp__track_install(void);

/* Write-protects the pages of t (PROT_READ).  Precondition: t->dirty is set
 * and zero.  A write to a protected page marks the tensors of t on that
 * page dirty (dirty, dirty_tensors, write_faults) and makes the page
 * writable again.  Returns 0, or -1 with nothing protected. */
int ibp__track_protect(ibp_tracked *t);

/* Makes every page of t writable again (remove, degrade).  Idempotent. */
void ibp__track_unprotect(ibp_tracked *t);

/* Marks tensors of t overlapping [addr, addr+len) dirty without touching
 * page protection (device-to-host copies into a region). */
void ibp__track_mark_dirty(ibp_tracked *t, uintptr_t addr, size_t len);

/* ---- re-protection (serve/refresh.c) ------------------------------------- */

/* Protects every page of tracked t again without a gap (pages still
 * protected stay so); 0, or -1 when t is not tracked, a kernel-side write
 * is in progress, the application set protections in t itself, or mprotect
 * failed. */
int ibp__track_reprotect(ibp_tracked *t);

/* Waits until no fault or before_write pass is in flight. */
void ibp__track_quiesce(void);

/* Nonzero when every page of t overlapping [a, a+len) is held read-only by
 * the tracker. */
int ibp__track_still_protected(ibp_tracked *t, uintptr_t a, size_t len);

/* In the child after fork: the tracker's lock-free state stays valid; this
 * re-initialises anything lock-based. */
void ibp__track_after_fork_child(void);

#endif /* IBP_PRELOAD_TRACK_H */
