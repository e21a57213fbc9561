/*
 * libibp region registry (registry/): the pinned host ranges that libibp
 * knows about, and everything attached to each one.
 *
 * A region is a pinned host range [base, base+bytes) registered when the
 * application allocates or registers pinned memory (docs/ARCHITECTURE.md,
 * "config/ and registry/").
 * Regions never overlap.  A record carries the region's identity (id, range,
 * name, the rule it matched), its state machine (candidate -> compressing
 * -> ready -> degraded), a reference count and one opaque owner pointer:
 * everything the interposer keeps about a region (codec data, write
 * tracking, per-device state, statistics) is the owner's.
 *
 * Lookup is the interposer's hot path (every host-to-device copy):
 *   - ibp_registry_empty() is one relaxed atomic load, so a copy made while
 *     no region exists costs a few ns;
 *   - ibp_registry_find() takes no lock.  Writers publish an immutable
 *     snapshot (a hash table of 2 MiB address buckets, each listing the
 *     regions that touch it) through one atomic pointer; a lookup hashes the
 *     bucket of its first and last byte, O(1) expected.  Copies spanning
 *     more than two buckets with no region at either end fall back to a
 *     binary search over the regions (O(log n)).
 *
 * Threading: every function may be called from any thread.  Writers (add,
 * remove, foreach, fini) serialize on one mutex; readers (find) never block.
 * A replaced snapshot is freed by the writer after a grace period: readers
 * announce themselves on one of two counters (selected by a parity bit); the
 * writer flips the parity and waits for the old counter to drain, twice.
 * Cost: two atomic read-modify-writes per lookup on a shared cache line, and
 * a writer that waits (sched_yield) for in-flight lookups (tens of ns each).
 * No snapshot outlives the writer that replaced it; memory is bounded by
 * one snapshot, O(regions + buckets touched).
 *
 * Ownership: the registry owns the region records.  A record stays valid
 * while a reference is held (ibp_registry_find acquires one, released with
 * ibp_region_release), even after ibp_registry_remove.  When the last
 * reference is dropped the release hook (if set) runs -- it frees the owner
 * -- and then the record itself is freed.
 *
 * The library never prints, exits or aborts, and makes no CUDA calls.
 * Dependencies: none of the project's (C11, pthreads).
 */
#ifndef IBP_REGISTRY_REGISTRY_H
#define IBP_REGISTRY_REGISTRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define IBP_REGISTRY_NAME_MAX 64     /* name: up to 63 characters + NUL */
#define IBP_REGISTRY_BUCKET_SHIFT 21 /* 2 MiB address buckets */

/* ---- errors -------------------------------------------------------------- */

/* Negative results of ibp_registry_add; values are pinned. */
typedef enum ibp_registry_error {
  IBP_REGISTRY_EINVAL = -1,   /* bytes == 0, base NULL, or range wraps */
  IBP_REGISTRY_EOVERLAP = -2, /* overlaps a registered region */
  IBP_REGISTRY_ENOMEM = -3    /* out of memory; the registry is unchanged */
} ibp_registry_error;

/* ---- region record ------------------------------------------------------- */

typedef enum ibp_region_state {
  IBP_REGION_CANDIDATE = 0,   /* registered; copies pass through */
  IBP_REGION_COMPRESSING = 1, /* a background thread owns the owner's data */
  IBP_REGION_READY = 2,       /* the owner's data complete; copies served */
  IBP_REGION_DEGRADED = 3     /* pass-through for good (terminal) */
} ibp_region_state;

/* Rule parameters copied from the matching config rule (plain fields; the
 * values of mode and track are those of config/config.h's ibp_mode and
 * ibp_track: 0 = shadow / protect, 1 = inplace / trust).  Part of the
 * region's identity: immutable after ibp_registry_add. */
typedef struct ibp_region_rule {
  uint32_t tensor_bytes; /* R */
  uint32_t chunk;        /* 1, 2, 4, 8; 0 = auto */
  double threshold;      /* 0.5..1.0; 0 = auto */
  double sample;         /* (0, 1]; 0 = codec default */
  uint32_t clusters;     /* Mask/Bitval pairs, 1..256; 0 = auto */
  uint8_t mode;
  uint8_t track;
  uint32_t index; /* 1-based number of the rule (docs/CONFIG.md); 0 = none */
} ibp_region_rule;

typedef struct ibp_region_rec {
  /* Immutable after ibp_registry_add. */
  uint64_t id; /* >= 1, unique for the life of the process */
  uintptr_t base;
  uint64_t bytes;
  char name[IBP_REGISTRY_NAME_MAX];
  ibp_region_rule rule;

  _Atomic int state;   /* ibp_region_state; change with ibp_region_transition */
  _Atomic int refs;    /* internal: references held (registry's included) */
  _Atomic int removed; /* 1 once ibp_registry_remove took it out */

  /* What the module that serves the region keeps about it (preload/:
   * serve/region.h); the registry never looks inside.  Set once with
   * ibp_region_set_owner, read with ibp_region_owner; the release hook
   * frees it. */
  void *owner;
} ibp_region_rec;

/* Result of ibp_registry_find. */
typedef enum ibp_find_result {
  IBP_FIND_NONE = 0,     /* the range touches no region */
  IBP_FIND_FOUND = 1,    /* one region contains the whole range */
  IBP_FIND_STRADDLES = 2 /* the range overlaps a region only partly */
} ibp_find_result;

/* ---- lifetime ------------------------------------------------------------ */

/* Called once per record when its last reference is dropped, before the
 * registry frees it; frees the owner.  It may run in any
 * thread that releases a reference; it must not call registry functions. */
typedef void (*ibp_region_release_hook)(ibp_region_rec *r, void *ctx);

/* The registry is a process-wide singleton, ready (and empty) without any
 * call.  ibp_registry_init sets the release hook (NULL = none) and returns
 * 0; it may be called again to change it. */
int ibp_registry_init(ibp_region_release_hook hook, void *ctx);

/* Removes every region (as ibp_registry_remove does) and leaves the registry
 * empty and usable.  Records still referenced stay valid until released. */
void ibp_registry_fini(void);

/* In a child after fork(): re-initialises the writer mutex and the reader
 * counters (threads that were inside the registry do not exist there).
 * Regions are kept; call it before any other registry function in the
 * child.  What the owners keep (GPU state, page protection) is the
 * owner's to reset. */
void ibp_registry_reset_after_fork(void);

/* ---- writers ------------------------------------------------------------- */

/* Registers [base, base+bytes) in state CANDIDATE.
 *   base:  not NULL; base+bytes must not wrap.
 *   bytes: >= 1.
 *   rule:  may be NULL (all fields 0); copied.
 *   name:  may be NULL ("" ); copied, truncated to 63 characters.
 * Returns the region id (>= 1), or an ibp_registry_error (< 0). */
int64_t ibp_registry_add(const void *base, uint64_t bytes,
                         const ibp_region_rule *rule, const char *name);

/* Removes the region whose base is exactly `base`: later lookups no longer
 * find it; it is freed when the last reference is released.  Waits for
 * in-flight lookups (grace period).  Returns 0, or -1 when no region starts
 * at `base` (or on out of memory, leaving the registry unchanged). */
int ibp_registry_remove(const void *base);

/* Calls fn(r, ctx) for every registered region in address order, under the
 * writer lock (lookups continue meanwhile).  fn must not call registry
 * writers (deadlock).  Returns the number of regions visited. */
size_t ibp_registry_foreach(void (*fn)(const ibp_region_rec *r, void *ctx),
                            void *ctx);

/* Number of registered regions. */
size_t ibp_registry_count(void);

/* ---- readers (lock-free) ------------------------------------------------- */

/* Nonzero when no region is registered: one relaxed load.  A racing add may
 * be missed, as any lookup racing an add may miss it. */
int ibp_registry_empty(void);

/* Classifies [addr, addr+len) (len 0 is treated as 1; a range that wraps is
 * clipped at the top of the address space).
 *   out: not NULL.  On FOUND, *out is the containing region; on STRADDLES,
 *        the lowest region the range overlaps; a reference is acquired in
 *        both cases (release it with ibp_region_release).  On NONE, NULL.
 * Never blocks; takes no lock. */
ibp_find_result ibp_registry_find(const void *addr, size_t len,
                                  ibp_region_rec **out);

/* ---- region operations --------------------------------------------------- */

/* Takes another reference on a record already referenced by the caller. */
void ibp_region_acquire(ibp_region_rec *r);

/* Drops a reference; the last one frees the record (see Ownership).  NULL is
 * ignored. */
void ibp_region_release(ibp_region_rec *r);

/* Nonzero when from -> to is a legal transition:
 *   candidate -> compressing, compressing -> ready, compressing -> degraded,
 *   ready -> degraded, ready -> candidate (invalidated).
 * Nothing leaves degraded; a state never moves to itself. */
int ibp_region_transition_legal(ibp_region_state from, ibp_region_state to);

/* Moves r from `from` to `to` atomically (compare-and-swap, acq_rel).
 * Returns 1 when it moved; 0 when the transition is illegal or r was not in
 * `from`. */
int ibp_region_transition(ibp_region_rec *r, ibp_region_state from,
                          ibp_region_state to);

/* Current state (acquire). */
ibp_region_state ibp_region_state_get(const ibp_region_rec *r);

/* "candidate", "compressing", "ready", "degraded"; "unknown" otherwise. */
const char *ibp_region_state_name(ibp_region_state s);

/* The owner pointer (acquire); NULL until set. */
static inline void *ibp_region_owner(const ibp_region_rec *r) {
  return __atomic_load_n(&r->owner, __ATOMIC_ACQUIRE);
}

/* Publishes the owner (release): everything the owner wrote before is
 * visible to a thread that reads it with ibp_region_owner. */
static inline void ibp_region_set_owner(ibp_region_rec *r, void *owner) {
  __atomic_store_n(&r->owner, owner, __ATOMIC_RELEASE);
}

#endif /* IBP_REGISTRY_REGISTRY_H */
