/*
 * What the write tracker (track.c) shares with its two hook files
 * (hooks_signal.c, hooks_libc.c) beyond track/track.h.  Internal to track/.
 */
#ifndef IBP_PRELOAD_TRACK_PRIVATE_H
#define IBP_PRELOAD_TRACK_PRIVATE_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/base.h"
#include "track/track.h"

/* mprotect by system call: libibp exports an `mprotect` hook (hooks_libc.c),
 * which the tracker's own calls must not reach.  Async-signal-safe; sets
 * errno like mprotect. */
#include <sys/syscall.h>
#include <unistd.h>
static inline int ibp__sys_mprotect(void *addr, size_t len, int prot) {
  return (int)syscall(SYS_mprotect, addr, len, prot);
}

/* ---- track.c: what both trackers share ---------------------------------- */

/* Where the dirty bits of a region live and how its tensors lie. */
typedef struct ibp__geom {
  _Atomic uint32_t *dirty;
  uintptr_t base; /* tensor 0 */
  uintptr_t tend; /* end of the last whole tensor (the tail has no bit) */
  uint64_t R;
} ibp__geom;

IBP_HIDDEN ibp__geom ibp__geom_of(const ibp_tracked *r);

/* Sets the dirty bits of the tensors overlapping [lo, hi); returns how many
 * were newly set.  The seq_cst OR orders the bits before whatever the
 * caller does next (an mprotect that makes the page writable). */
IBP_HIDDEN uint64_t ibp__mark_span(const ibp__geom *g, uintptr_t lo,
                                   uintptr_t hi);

/* A tracker's availability, probed once by its start function (which
 * returns nonzero when the tracker works here): the first caller runs
 * start under `lock`, later ones read the answer (acquire).  A forked
 * child sets *state back to IBP__PROBE_UNKNOWN to probe again. */
enum { IBP__PROBE_UNKNOWN = 0, IBP__PROBE_AVAILABLE, IBP__PROBE_UNAVAILABLE };
IBP_HIDDEN int ibp__probed_available(_Atomic int *state, pthread_mutex_t *lock,
                                     int (*start)(void));

/* The page size (sysconf, read once). */
IBP_HIDDEN uintptr_t ibp__page_size(void);

/* ---- track_protect.c: the mprotect + SIGSEGV tracker ----------------------
 * ibp__prot_X is track.h's ibp__track_X for regions it holds.  It holds at
 * most IBP__PROT_SLOTS regions at once (a fixed table, so the fault handler
 * never allocates); protect fails beyond. */
#define IBP__PROT_SLOTS 1024

IBP_HIDDEN int ibp__prot_install(void);
IBP_HIDDEN int ibp__prot_protect(ibp_tracked *t);
IBP_HIDDEN void ibp__prot_unprotect(ibp_tracked *t);
IBP_HIDDEN int ibp__prot_reprotect(ibp_tracked *t);
IBP_HIDDEN void ibp__prot_quiesce(void);
IBP_HIDDEN int ibp__prot_still_protected(ibp_tracked *t, uintptr_t a,
                                         size_t len);
IBP_HIDDEN void ibp__prot_after_fork_child(void);

/* ---- track_uffd.c: the userfaultfd tracker --------------------------------
 * ibp__uffd_X is track.h's ibp__track_X for regions it holds. */

/* 1 when this kernel offers asynchronous userfaultfd write protection and
 * PAGEMAP_SCAN (probed once: a page protected, written, scanned). */
IBP_HIDDEN int ibp__uffd_available(void);
IBP_HIDDEN int ibp__uffd_protect(ibp_tracked *t);
IBP_HIDDEN int ibp__uffd_sync(ibp_tracked *t, uintptr_t a, size_t len);
IBP_HIDDEN int ibp__uffd_reprotect(ibp_tracked *t);
IBP_HIDDEN int ibp__uffd_still_protected(ibp_tracked *t, uintptr_t a,
                                         size_t len);
IBP_HIDDEN void ibp__uffd_after_fork_child(void);

/* Scans the whole of t (marking what it finds): 0, or -1 after lost(t). */
IBP_HIDDEN int ibp__uffd_scan_all(ibp_tracked *t);
/* Takes t's pages off the asynchronous descriptor (their protection goes
 * with it): 0, or -1 (nothing done when another region held shares a
 * page). */
IBP_HIDDEN int ibp__uffd_release(ibp_tracked *t);
/* Registers t's pages with the asynchronous descriptor again and protects
 * them all: 0, or -1. */
IBP_HIDDEN int ibp__uffd_adopt(ibp_tracked *t);
/* t's memory can no longer be watched: every tensor dirty from now on. */
IBP_HIDDEN void ibp__uffd_lost(ibp_tracked *t);
/* t is no longer protected: a neighbour's protection of a shared edge page
 * stops marking it (track.c, ibp__track_unprotect). */
IBP_HIDDEN void ibp__uffd_forget(ibp_tracked *t);

/* ---- track_quiet.c: quiet regions, scanning <-> faulting ------------------
 * A region the userfaultfd tracker protects is added; the tick, on a
 * thread of its own, moves it between the modes; reprotect and
 * still_protected go to the mode that holds it. */
#define IBP__QUIET_TICK_NS 50000000ull /* 50 ms */
/* The tick's period: IBP__QUIET_TICK_NS; tests make it longer, to show
 * what does not wait for it. */
extern IBP_HIDDEN _Atomic uint64_t ibp__quiet_tick_ns;
/* Early fingerprints begun (each try), and used by a move (tests). */
extern IBP_HIDDEN _Atomic uint64_t ibp__quiet_early_tries,
    ibp__quiet_early_used;
/* Faults in one tick that send a faulting region back to scanning. */
#define IBP__QUIET_BUSY_FAULTS 32
/* Pages per sum of a move's fingerprint (a write between the descriptors
 * marks all of them). */
#define IBP__QUIET_CHUNK_PAGES 16
IBP_HIDDEN void ibp__quiet_add(ibp_tracked *t);
IBP_HIDDEN void ibp__quiet_remove(ibp_tracked *t);
/* Pages [a, a+len) dropped by the C library's madvise (MADV_DONTNEED,
 * MADV_REMOVE), once it returned: their tensors written in every scanning
 * region on them -- a shared region's dropped page keeps its write
 * protection as a marker, and a scan would find it unwritten.  Faulting
 * regions: ibp__syncwp_dropped. */
IBP_HIDDEN void ibp__quiet_dropped(uintptr_t a, size_t len);
IBP_HIDDEN void ibp__quiet_tick(uint64_t now_ns);
IBP_HIDDEN int ibp__quiet_reprotect(ibp_tracked *t);
IBP_HIDDEN int ibp__quiet_still_protected(ibp_tracked *t, uintptr_t a,
                                          size_t len);
IBP_HIDDEN void ibp__quiet_after_fork_child(void);
/* Around a write into [a, a+len) the kernel makes without being able to
 * wait for a userfaultfd (a write to /proc/self/mem: procmem.c), inside
 * the kwrite window: begin makes the pages of faulting regions there
 * written and writable (after a move under way, which it waits for), and
 * until end no faulting region is re-protected.  Takes a mutex: not from
 * a signal handler that may interrupt track_quiet.c. */
IBP_HIDDEN void ibp__quiet_kwrite_begin(uintptr_t a, size_t len);
IBP_HIDDEN void ibp__quiet_kwrite_end(void);
/* Moves t to `mode` now (tests, benchmarks): 0 when t is in it after. */
IBP_HIDDEN int ibp__quiet_now(ibp_tracked *t, int mode);
/* Tests only (NULL otherwise): called by a move while t's pages are in
 * neither descriptor, under track_quiet.c's lock. */
extern IBP_HIDDEN void (*ibp__quiet_gap_hook)(ibp_tracked *t);
/* Tests only (NULL otherwise): called once the tick has taken t's early
 * fingerprint (its moves held), under track_quiet.c's lock. */
extern IBP_HIDDEN void (*ibp__quiet_early_hook)(ibp_tracked *t);

/* ---- track_sync.c: synchronous userfaultfd, the faulting mode ------------ */
/* 1 when a userfaultfd serving kernel-mode faults works here (probed once). */
IBP_HIDDEN int ibp__syncwp_available(void);
/* Starts the fault thread: 0, or -1. */
IBP_HIDDEN int ibp__syncwp_start_thread(void);
/* Nonzero once the application closed the descriptor (or its number now
 * names another file): every region armed then counts as written
 * throughout, nothing is armed again, and faulting regions go back to
 * scanning (track_quiet.c's tick). */
IBP_HIDDEN int ibp__syncwp_gone(void);
/* Registers pages [lo, hi) of t and write-protects them: 0, or -1 with
 * nothing registered. */
IBP_HIDDEN int ibp__syncwp_arm(ibp_tracked *t, uintptr_t lo, uintptr_t hi);
/* Unregisters t's pages (plain memory again; waiting writers retry). */
IBP_HIDDEN void ibp__syncwp_disarm(ibp_tracked *t);
IBP_HIDDEN int ibp__syncwp_reprotect(ibp_tracked *t);
IBP_HIDDEN int ibp__syncwp_still_protected(ibp_tracked *t, uintptr_t a,
                                           size_t len);
/* A write the kernel cannot wait for a fault for is about to land in
 * [a, a+len) (track_quiet.c, ibp__quiet_kwrite_begin): the armed pages of
 * t there count as written, their tensors dirty, and are made writable. */
IBP_HIDDEN void ibp__syncwp_lift(ibp_tracked *t, uintptr_t a, size_t len);
/* Pages [a, a+len) dropped (madvise): written in every region armed here
 * that holds some (its tensors dirty, its page bits set). */
IBP_HIDDEN void ibp__syncwp_dropped(uintptr_t a, size_t len);
IBP_HIDDEN void ibp__syncwp_after_fork_child(void);

/* ---- track_compact.c: compact regions -------------------------------------
 * ibp__compact_X is track.h's ibp__track_X for the regions it holds. */
IBP_HIDDEN int ibp__compact_protect(ibp_tracked *t);
IBP_HIDDEN void ibp__compact_unprotect(ibp_tracked *t);
IBP_HIDDEN int ibp__compact_reprotect(ibp_tracked *t);
IBP_HIDDEN int ibp__compact_still_protected(ibp_tracked *t, uintptr_t a,
                                            size_t len);
IBP_HIDDEN void ibp__compact_after_fork_child(void);

/* Around a C-library call that lets the kernel read or write caller
 * memory, where compact regions are kept with a userfaultfd that serves
 * user-mode faults only (track_compact.c): begin (0 when no such region is
 * held: one relaxed load) ... ibp__compact_before_kernel for each buffer
 * ... the real call ... end(began).  The buffers' compact pages are made
 * ready for the kernel (write: written, their tensors dirty; read:
 * resident) and stay so until end. */
int ibp__compact_kaccess_begin(void);
void ibp__compact_kaccess_end(int began);
void ibp__compact_before_kernel(const void *addr, size_t len, int write);

/* ---- track_protect.c ----------------------------------------------------- */

/* Number of regions whose pages the tracker holds read-only now. */
extern IBP_HIDDEN _Atomic unsigned ibp__track_live;

/* Regions that may move to the fault mode (track_quiet.c): a write through
 * /proc/self/mem must lift a faulting region's pages first (procmem.c). */
extern IBP_HIDDEN _Atomic unsigned ibp__track_movable;

/* Nonzero while the mprotect tracker holds pages read-only: one relaxed
 * load, so the libc hooks cost nothing measurable otherwise (the
 * userfaultfd tracker sees kernel-side writes itself). */
static inline int ibp__track_any(void) {
  return atomic_load_explicit(&ibp__track_live, memory_order_relaxed) != 0;
}

/* Regions the userfaultfd tracker holds (track_quiet.c's table): what the
 * C library's page changes (madvise, mprotect) are announced for besides
 * ibp__track_any -- a scanning region misses a dropped shared page. */
extern IBP_HIDDEN _Atomic unsigned ibp__track_held;

static inline int ibp__track_changes_watched(void) {
  return ibp__track_any() ||
         atomic_load_explicit(&ibp__track_held, memory_order_relaxed) != 0;
}

/* ---- track.c, for the libc hooks ----------------------------------------- */

/* Called before something other than a CPU store writes [addr, addr+len):
 * the C library or the kernel (read(2) into the buffer ...).  Every tracked
 * region overlapping the range gets the overlapped tensors marked dirty and
 * those pages made writable.  One relaxed atomic load when nothing is
 * protected; async-signal-safe. */
void ibp__track_before_write(const void *addr, size_t len);

/* Around a libc call that writes caller memory from the kernel side:
 * begin (returns whether anything is tracked; then announce the buffers
 * with ibp__track_before_write) ... the real call ... end(began).  No
 * re-protection happens in between. */
int ibp__track_kwrite_begin(void);
void ibp__track_kwrite_end(int began);

/* The application's own mprotect of [addr, addr+len): announced like a
 * write, and the regions it touches are never re-protected. */
void ibp__track_app_protect(const void *addr, size_t len);

/* ---- procmem.c: writes through /proc/self/mem ---------------------------- */

/* After an open hook's real call returned fd: remembers it when path names
 * a procfs "mem" file (else forgets fd).  errno untouched. */
void ibp__procmem_opened(int fd, const char *path);
/* 1 when fd was remembered and still is that file (fstat); one relaxed
 * load for any other descriptor.  errno untouched. */
int ibp__procmem_fd(int fd);
/* Before a write of len bytes through procmem descriptor fd at offset off
 * (-1: its position): the target is announced as a kernel-side write to
 * both trackers (ibp__track_before_write, ibp__quiet_kwrite_begin) inside
 * the kwrite window.  Returns what write_end takes.  errno untouched. */
int ibp__procmem_write_begin(int fd, long long off, size_t len);
void ibp__procmem_write_end(int began);

/* ---- hooks_signal.c ------------------------------------------------------ */

/* Installs `ours` for SIGSEGV and SIGBUS with the real sigaction and from
 * then on virtualises both in the exported sigaction/signal: what was
 * installed before becomes "the application's action".  Idempotent per
 * signal.  Returns 0, or -1 with nothing changed. */
IBP_HIDDEN int ibp__sig_take_over(const struct sigaction *ours);

/* Delivers a SIGSEGV/SIGBUS that is not the tracker's to the application's
 * action (handler, SIG_IGN or SIG_DFL), from inside our handler.
 * Async-signal-safe; takes no lock. */
IBP_HIDDEN void ibp__sig_chain(int sig, siginfo_t *si, void *uc);

/* In the child after fork: clears the writer lock and reader counts. */
IBP_HIDDEN void ibp__sig_after_fork_child(void);

#endif /* IBP_PRELOAD_TRACK_PRIVATE_H */
