/*
 * Internals shared by the registry's files (prefix ibp__).
 *
 * snapshot.c  immutable lookup structure: regions sorted by base plus an
 *             open-addressing hash of 2 MiB buckets -> run of regions
 * grace.c     reader announcement counters and the writer's grace period
 * region.c    record allocation, references, state machine
 * registry.c  the singleton: publish, add, remove, find, foreach, fork
 */
#ifndef IBP_REGISTRY_INTERNAL_H
#define IBP_REGISTRY_INTERNAL_H

#include "registry.h"

/* One hash slot: a bucket and its run in ibp__snapshot.lists. */
typedef struct ibp__slot {
  uint64_t key; /* bucket index + 1; 0 = empty slot */
  uint32_t first;
  uint32_t count;
} ibp__slot;

/* Never modified after ibp__snapshot_build returns. */
typedef struct ibp__snapshot {
  size_t n;                 /* regions */
  ibp_region_rec **by_base; /* n regions, ascending base */
  uint64_t mask;            /* hash slots - 1 (power of two) */
  ibp__slot *slots;
  ibp_region_rec **lists; /* bucket runs, each ascending base */
} ibp__snapshot;

/* Builds a snapshot of the n regions in `sorted` (ascending base, no
 * overlap).  n may be 0.  NULL on out of memory. */
ibp__snapshot *ibp__snapshot_build(ibp_region_rec *const *sorted, size_t n);
void ibp__snapshot_free(ibp__snapshot *s);

/* Index of the first region whose base is >= addr (n when none). */
size_t ibp__snapshot_lower_bound(const ibp__snapshot *s, uintptr_t addr);

/* The lowest region overlapping [first, last] (inclusive bounds), or NULL. */
ibp_region_rec *ibp__snapshot_overlap(const ibp__snapshot *s, uintptr_t first,
                                      uintptr_t last);

/* Reader side: announce / retire a lookup.  Returns the counter to retire. */
unsigned ibp__read_enter(void);
void ibp__read_exit(unsigned ticket);
/* Writer side (writer lock held): returns once every lookup that could
 * have seen a snapshot replaced before the call has retired. */
void ibp__grace_wait(void);
void ibp__grace_reset(void);

/* New record with one reference (the registry's); NULL on out of memory. */
ibp_region_rec *ibp__region_new(uint64_t id, uintptr_t base, uint64_t bytes,
                                const ibp_region_rule *rule, const char *name);
/* Sets the hook that ibp_region_release calls before freeing. */
void ibp__region_set_hook(ibp_region_release_hook hook, void *ctx);

#endif /* IBP_REGISTRY_INTERNAL_H */
