/*
 * Write tracking (track/): which tensors of a region were written since
 * they were compressed (docs/ARCHITECTURE.md "No stale byte", "Write
 * tracking").  Two trackers, chosen per region when it is protected:
 *
 *   userfaultfd (track_uffd.c, Linux >= 6.7): the kernel keeps the record.
 *     The region's pages are write-protected in asynchronous mode; a write
 *     -- a CPU store or the kernel writing on the application's behalf
 *     (read(2), io_uring, /proc/self/mem ...) -- only marks its page, and
 *     nothing the application can observe happens.  ibp__track_sync reads
 *     the marks (PAGEMAP_SCAN) before a copy judges the dirty bits.  A
 *     region no copy found written for IBP_TRACK_QUIET ms is held by
 *     synchronous write-protect faults instead (track_quiet.c,
 *     track_sync.c): then ibp__track_sync makes no system call.
 *   mprotect (track_protect.c, the fallback): the pages are held
 *     read-only; the first write to a page faults, marks the tensors on it
 *     dirty and makes the page writable.  Kernel-side writes the C library
 *     makes are announced by the libc hooks (hooks_libc.c), and the
 *     application's own SIGSEGV/SIGBUS handlers are chained
 *     (hooks_signal.c).
 *
 * IBP_TRACKER (config/) forces either; by default userfaultfd where the
 * kernel and the memory allow it.  The tracker depends on base/ only: a
 * region is described to it by an ibp_tracked, which the owner
 * (serve/region.h) embeds.
 */
#ifndef IBP_PRELOAD_TRACK_H
#define IBP_PRELOAD_TRACK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* What the owner of a compact region (track_compact.c) answers about it.
 * Both are called by the tracker under its lock, from its fault-handling
 * thread or from ibp__track_release; they must neither touch the region's
 * memory nor block. */
typedef struct ibp_compact_ops {
  /* Writes the bytes [addr, addr+len) held (one page at most, inside the
   * region) to out, from the compressed copy.  0, or -1. */
  int (*rebuild)(void *arg, uintptr_t addr, size_t len, uint8_t *out);
  /* Nonzero when the compressed copy holds [addr, addr+len) exactly: every
   * tensor overlapping it stored compressed, placed, clean and not being
   * rewritten. */
  int (*releasable)(void *arg, uintptr_t addr, size_t len);
  void *arg;
} ibp_compact_ops;

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
  _Atomic int kind;               /* ibp_tracker_kind holding it, or 0 */
  /* userfaultfd tracker (track_uffd.c) */
  _Atomic unsigned uffd_seq;   /* odd while re-protection consumes marks */
  _Atomic unsigned uffd_epoch; /* the tracker's epoch when protected */
  /* compact regions: set by the owner before protect (NULL: ordinary) ... */
  const ibp_compact_ops *compact;
  /* ... and the compact tracker's (track_compact.c) */
  struct ibp_compact_pages *_Atomic pages;
  _Atomic uint64_t pages_released; /* releases, counted per page */
  _Atomic uint64_t pages_rebuilt;  /* pages rebuilt on an access */
  _Atomic int discard; /* set by the owner: the memory is about to go, and
                          unprotect need not rebuild it */
  /* userfaultfd tracker, quiet regions (track_quiet.c): how writes are
   * caught now -- IBP_TRACK_SCANNING (the kernel records them, a copy
   * scans) or IBP_TRACK_FAULTING (a write faults, nothing to scan) */
  _Atomic int mode;
  _Atomic unsigned move_seq; /* odd while a move runs (track_quiet.c) */
  _Atomic int gap_to;        /* while one runs: the mode it leaves the
                              * pages below gap_done in, those pages'
                              * writes between the descriptors marked */
  _Atomic uintptr_t gap_done;
  _Atomic uint64_t scan_calls;    /* PAGEMAP_SCAN calls made for copies */
  _Atomic uint64_t sync_faults;   /* writes caught by faults while quiet */
  _Atomic uint64_t mode_switches; /* scanning <-> faulting, both ways */
  _Atomic uint64_t gap_writes;    /* chunks a move found written between
                                   * the descriptors (track_quiet.c) */
  _Atomic uint64_t last_write_ns; /* real time a scan last found a write */
  /* Bumped by every scan that finds a written page (whether or not its
   * tensors were dirty already) and every mark made without one
   * (ibp__track_mark_dirty, a preparation's mark of every tensor): equal
   * at two times, no write to the region was seen in between -- what lets
   * a move use a fingerprint taken early (track_quiet.c) */
  _Atomic uint64_t writes_seen;
  /* Nonzero while its owner prepares it (serve/prepare/compress.c reads
   * the whole region then): no move between the modes meanwhile -- a
   * move's fingerprint reads the region twice more, on another core,
   * and copies of the region wait for it -- only its first sum, taken
   * once (track_quiet.c) */
  _Atomic int moves_held;
  struct ibp_sync_pages *_Atomic spages; /* track_sync.c's page record */
} ibp_tracked;

enum { IBP_TRACK_SCANNING = 0, IBP_TRACK_FAULTING = 1 };

typedef enum ibp_tracker_kind {
  IBP_TRACKER_NONE = 0,
  IBP_TRACKER_KIND_UFFD,
  IBP_TRACKER_KIND_MPROTECT,
  IBP_TRACKER_KIND_COMPACT
} ibp_tracker_kind;

/* "userfaultfd", "mprotect" or "none": which tracker holds t (stats). */
static inline const char *ibp__track_kind_name(const ibp_tracked *t) {
  switch (atomic_load_explicit(&t->kind, memory_order_acquire)) {
  case IBP_TRACKER_KIND_UFFD:
    return "userfaultfd";
  case IBP_TRACKER_KIND_MPROTECT:
    return "mprotect";
  case IBP_TRACKER_KIND_COMPACT:
    return "compact";
  default:
    return "none";
  }
}

/* "scanning" or "faulting" for a region the userfaultfd tracker holds
 * (track_quiet.c), else "none" (stats). */
static inline const char *ibp__track_mode_name(const ibp_tracked *t) {
  if (atomic_load_explicit(&t->kind, memory_order_acquire) !=
      IBP_TRACKER_KIND_UFFD)
    return "none";
  return atomic_load_explicit(&t->mode, memory_order_relaxed) ==
                 IBP_TRACK_FAULTING
             ? "faulting"
             : "scanning";
}

/* Chooses the tracker (IBP_TRACKER) and, for the mprotect one, installs
 * the SIGSEGV/SIGBUS handler through the real sigaction, once.  The
 * handler chains to whatever was installed before and to what the
 * application installs later (hooks_signal.c).  Returns 0, or -1. */
int ibp__track_install(void);

/* Write-protects the pages of t.  Precondition: t->dirty is set and zero.
 * From then on a write to t marks the tensors it touches dirty (dirty,
 * dirty_tensors, write_faults): at once (mprotect), or at the next
 * ibp__track_sync over it (userfaultfd).  Returns 0, or -1 with nothing
 * protected. */
int ibp__track_protect(ibp_tracked *t);

/* Before a copy reads t's dirty bits for [addr, addr+len): brings in the
 * writes the kernel recorded there (userfaultfd; nothing to do for
 * mprotect).  Returns 0, or -1 when t's memory is no longer tracked (it
 * was remapped, or the process forked): then every tensor of t is marked
 * dirty. */
int ibp__track_sync(ibp_tracked *t, uintptr_t addr, size_t len);

/* Whether ibp__track_sync has work to do: scan (userfaultfd, scanning:
 * its cost grows with the span), or wait for a quiet region's move under
 * way (track_quiet.c) to mark what was written between its descriptors --
 * rather than nothing (mprotect, or a quiet region settled in the fault
 * mode: every write before now already marked).  A batched copy held
 * without a sync at the flush when this said no: a move back to scanning
 * still reads "faulting" until its gap's writes are marked (e2e_batch's
 * written case, under load, delivered rows written in that gap stale). */
static inline int ibp__track_scans(const ibp_tracked *t) {
  if (atomic_load_explicit(&t->kind, memory_order_relaxed) !=
      IBP_TRACKER_KIND_UFFD)
    return 0;
  const unsigned m = atomic_load(&t->move_seq);
  return (m & 1) || atomic_load(&t->mode) == IBP_TRACK_SCANNING ||
         atomic_load(&t->move_seq) != m;
}

/* The CPU time of one ibp__track_sync of `pages` 4 KiB pages on the
 * userfaultfd tracker, modelled: a call and a cost per page, measured by
 * bench/track_scan.sh (its medians on the 2-core development VM, 2026-11-27:
 * 2.2-2.5 us a call, 4.6-5.3 ns a page).  The simulated GPU's clock is
 * charged this figure rather than what a scan took, so that modelled times
 * do not vary with the host's load from run to run (docs/PROFILE.md, "The
 * virtual clock"). */
#define IBP_TRACK_SCAN_CALL_NS 2300.0
#define IBP_TRACK_SCAN_PAGE_NS 4.8
/* A write to a quiet region held by faults (track_sync.c): the writer waits
 * while libibp's fault thread marks the page's tensors and lifts its
 * protection, charged per fault.  bench/track_scan.sh's fault_ns on the
 * 2-core development VM: runs of 9.3-10.3 us, median 9.8 us (the scanning
 * mode's in-kernel fault: 1.25 us); a copy's sync while faulting: 4 ns,
 * no system call. */
#define IBP_TRACK_FAULT_NS 9800.0
static inline double ibp__track_scan_model_ns(uint64_t calls, uint64_t pages) {
  return (double)calls * IBP_TRACK_SCAN_CALL_NS +
         (double)pages * IBP_TRACK_SCAN_PAGE_NS;
}

/* The modelled CPU time of ibp__track_sync(t, addr, len): one scan of the
 * span's pages where t scans, else nothing. */
static inline double ibp__track_sync_model_ns(const ibp_tracked *t,
                                              uintptr_t addr, size_t len) {
  if (len == 0 || !ibp__track_scans(t))
    return 0;
  return ibp__track_scan_model_ns(1, (addr + len - 1) / 4096 - addr / 4096 + 1);
}

/* Holds (held nonzero) or lets go (0) a quiet region's moves between
 * the scanning and faulting modes (track_quiet.c): while held it stays in
 * the mode it is in, writes caught as ever, and the tick sums its
 * contents once for the move to come (its early fingerprint).  Letting go
 * wakes the tick, which moves a scanning region to faulting at once
 * when no write was seen in it since it was protected (or last moved) or
 * for IBP_TRACK_QUIET ms; else a later tick moves it as usual.  For its
 * owner, around the region's preparation (docs/ARCHITECTURE.md, "Preparing
 * a region", "Quiet regions").  Any tracker, any time. */
void ibp__track_hold_moves(ibp_tracked *t, int held);

/* Device-side writes into t queued so far have landed (serve/dtoh.c's
 * wait returned): bytes write protection never sees, whose tensors were
 * marked when they were queued, or not at all before t was tracked.  An
 * early fingerprint taken before may hold older bytes than a reader after
 * this reads, with no write seen in between -- dropped (one being summed
 * is not kept), so the move sums anew (track_quiet.c).  For its owner,
 * after each such wait and before it reads the region.  Any tracker, any
 * time. */
void ibp__track_landed(ibp_tracked *t);

/* Stops tracking t (remove, degrade): its pages are writable again
 * (mprotect), or left protected in the asynchronous mode, where a write
 * costs one minor fault per page once (userfaultfd).  Idempotent. */
void ibp__track_unprotect(ibp_tracked *t);

/* Marks tensors of t overlapping [addr, addr+len) dirty without touching
 * page protection (device-to-host copies into a region). */
void ibp__track_mark_dirty(ibp_tracked *t, uintptr_t addr, size_t len);

/* ---- re-protection (serve/prepare/refresh.c)
 * ------------------------------------- */

/* Protects every page of tracked t again without a gap (pages still
 * protected stay so); every write recorded until then has marked its
 * tensors dirty when it returns.  0, or -1 when t is not tracked, a
 * kernel-side write is in progress, the application set protections in t
 * itself, or mprotect / the scan failed. */
int ibp__track_reprotect(ibp_tracked *t);

/* Waits until no fault or before_write pass is in flight. */
void ibp__track_quiesce(void);

/* Nonzero when no page of t overlapping [a, a+len) was written since the
 * last ibp__track_reprotect (held read-only by the tracker). */
int ibp__track_still_protected(ibp_tracked *t, uintptr_t a, size_t len);

/* ---- compact regions (track_compact.c) ------------------------------------
 * A compact region's memory is libibp's own anonymous mapping, given to the
 * application for a pinned allocation (docs/CONFIG.md, mode=compact).  Its
 * tracker is userfaultfd in synchronous mode: a write to a protected page
 * waits while the tracker's thread marks its tensors dirty (like the
 * mprotect tracker, but for kernel-side writes too), and a released page
 * is rebuilt from the compressed copy when anything touches it.  Needs a
 * userfaultfd that serves kernel-mode faults (privileged, or
 * vm.unprivileged_userfaultfd=1). */

/* 1 when compact regions can be kept here (probed once). */
int ibp__track_compact_available(void);

/* Releases the pages of compact region t whose bytes the compressed copy
 * holds (ops->releasable), each only after its rebuild was compared with
 * it byte for byte, and never one written since it was last protected.
 * Returns the pages released now, or -1 when t is not a protected compact
 * region. */
long ibp__track_release(ibp_tracked *t);

/* Bytes of compact region t's pages that are resident (mincore), or -1. */
long long ibp__track_resident_bytes(const ibp_tracked *t);

/* In the child after fork: the tracker's lock-free state stays valid; this
 * re-initialises anything lock-based.  The child has no userfaultfd
 * registration: its regions held by that tracker count as untracked. */
void ibp__track_after_fork_child(void);

#endif /* IBP_PRELOAD_TRACK_H */
