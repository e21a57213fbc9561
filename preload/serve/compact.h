/*
 * Compact regions (compact.c; docs/ARCHITECTURE.md "Compact regions";
 * IBP_REGIONS mode=compact): a pinned allocation matching such a rule is
 * given libibp's own memory, which the driver never sees; once the region
 * is compressed, the pages whose bytes the shadow holds are released and
 * rebuilt from it on any access (track/track_compact.c), so the region
 * costs host memory at (1 - saved) of its size instead of (2 - saved).
 * Host-to-device copies of such a region are served from the shadow by
 * libibp's GPU paths; where the application needs the memory pinned after
 * all, the region is rebuilt, pinned and becomes an ordinary one
 * (ibp__compact_pin).
 */
#ifndef IBP_PRELOAD_SERVE_COMPACT_H
#define IBP_PRELOAD_SERVE_COMPACT_H

#include <stddef.h>
#include <stdint.h>

#include "registry/registry.h"
#include "serve/region.h"

/* Memory for a pinned allocation of n bytes matching a compact rule
 * (`flags`: cuMemHostAlloc's; made in context ctx of device dev), or NULL
 * when compact regions cannot be kept here (then the driver allocates,
 * and the region is ordinary). */
void *ibp__compact_alloc(size_t n, unsigned flags, CUcontext ctx, int dev);

/* What the driver would say of memory ibp__compact_alloc gave and did not
 * pin since. */
typedef struct ibp_compact_memory {
  uintptr_t base;
  size_t bytes;
  unsigned flags;
  CUcontext ctx;
  int dev;
} ibp_compact_memory;

/* 1 with *out filled when p lies in such memory, else 0 (a relaxed load
 * when there is none).  `pinned_too`: also memory pinned since (the
 * driver knows it then, as registered memory, not as its allocation). */
int ibp__compact_memory_of(const void *p, int pinned_too,
                           ibp_compact_memory *out);

/* cuMemFreeHost of p: when p is memory ibp__compact_alloc gave, unpins it
 * if it was pinned since, unmaps it and returns 1 (the region is
 * retired first by the caller); 0 when p is not ours. */
int ibp__compact_free(void *p);

/* Nonzero when [p, p+n) overlaps memory ibp__compact_alloc gave that is
 * not pinned (the driver does not know it). */
int ibp__compact_owns(const void *p, size_t n);

/* Nonzero when p is the start of memory ibp__compact_alloc gave. */
int ibp__compact_is_base(const void *p);

/* The compact region at p is about to be freed: its pages need not be
 * rebuilt when its tracking ends. */
void ibp__compact_discard(const void *p);

/* At libibp's start (hooks/init.c): how pinning a region back waits for
 * the background jobs on it (serve/worker.h, ibp__worker_wait: compact.c
 * sits below the worker, which pins regions itself). */
void ibp__compact_init(void (*wait)(ibp_region_rec *r, int dev));

/* ibp__compact_pin of every compact region [p, p+n) overlaps (a relaxed
 * load when there is none). */
void ibp__compact_pin_range(const void *p, size_t n, const char *why);

/* Makes the served region s of r compact (its memory is ibp__compact_alloc's):
 * before it is protected. */
void ibp__compact_attach(ibp_served_region *s);

/* Nonzero while s's memory is compact: released pages, not pinned. */
int ibp__compact_active(const ibp_served_region *s);

/* Nonzero when the GPU paths can serve bytes [off, off+len) of compact s
 * from the shadow alone: every tensor there stored compressed, placed and
 * clean, no refresh running. */
int ibp__compact_servable(const ibp_served_region *s, uint64_t off,
                          uint64_t len);

/* The longest run [off, off+n) of bytes, within [off, off+len), whose
 * tensors the shadow holds (ibp__compact_servable) or, when the first does
 * not, none of which it holds; *servable says which.  Returns n (0 when
 * len is 0). */
uint64_t ibp__compact_run(const ibp_served_region *s, uint64_t off,
                          uint64_t len, int *servable);

/* On the worker, once r is compressed or refreshed: releases the pages
 * the shadow holds (track/track.h, ibp__track_release). */
void ibp__compact_release(ibp_region_rec *r);

/* Nonzero when compact s has 1/`share` of its pages or more back since
 * the last release (read, or written and recompressed since): time for
 * another (refresh.c queues it with a refresh). */
int ibp__compact_release_due(const ibp_served_region *s, unsigned share);

/* When r is compact: rebuilds every page of it and pins the memory (the
 * application needs it pinned, or libibp no longer serves it: `why`, said
 * in one line); from then on r passes through like an ordinary region
 * that was demoted.  Returns 1 when r was compact (whether or not the
 * pinning succeeded: a warning says so), 0 when it was not (nothing
 * done). */
int ibp__compact_pin(ibp_region_rec *r, const char *why);

/* Host memory of s (stats): resident bytes of its pages, or -1. */
long long ibp__compact_resident(const ibp_served_region *s);

#endif /* IBP_PRELOAD_SERVE_COMPACT_H */
