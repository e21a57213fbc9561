/*
 * Discovery (stats/discover.c): what IBP_DISCOVER asks for -- every pinned
 * allocation the application makes, the host-to-device copies from it and
 * whether its bytes changed after its first copy, reported at exit with
 * suggested IBP_REGIONS rules (docs/USING.md, "Finding the regions").
 *
 * Off unless IBP_DISCOVER is set (`ibp run --discover` sets it): a copy
 * then costs one relaxed load of ibp__discovering (inline below).  On, a
 * copy takes a mutex and a scan of the allocations: discovery runs are for
 * learning the rules, not for speed.  Allocations and copies libibp makes
 * itself (under ibp__guard) are not counted, so `nth=` numbers the same
 * allocations as the interposer's rules do.
 */
#ifndef IBP_PRELOAD_STATS_DISCOVER_H
#define IBP_PRELOAD_STATS_DISCOVER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Nonzero while discovery records (set at the first pinned allocation
 * when IBP_DISCOVER asks for it; cleared in a forked child). */
extern _Atomic int ibp__discovering;

/* Reads IBP_DISCOVER (once) and, when it asks, starts recording and
 * registers the report at exit -- also for a program that never pins
 * memory, whose table is then empty (hooks/init.c, at libibp's start). */
void ibp__discover_start(void);

/* The application pinned [p, p+n) (cuMemHostAlloc, cuMemAllocHost,
 * cuMemHostRegister succeeded; `registered`: the last, its own memory).
 * Reads IBP_DISCOVER the first time. */
void ibp__discover_pinned(const void *p, size_t n, int registered);

/* [p, ...) is about to stop being pinned: its bytes are compared with
 * those of its first copy one last time. */
void ibp__discover_released(const void *p);

/* A host-to-device copy of n bytes from src (the slow path); `unified`:
 * a cuMemcpy whose source may be device memory. */
void ibp__discover_copy_slow(const void *src, size_t n, int unified);

/* A host-to-device copy of n bytes from src -- a plain copy, a row of a 2D
 * copy or an entry of a batch, every copy libibp can serve: counted when
 * discovering. */
static inline void ibp__discover_copy(const void *src, size_t n, int unified) {
  if (__builtin_expect(
          atomic_load_explicit(&ibp__discovering, memory_order_relaxed), 0))
    ibp__discover_copy_slow(src, n, unified);
}

/* The tensor size that fits copies whose offsets and lengths all divide
 * by `gcd` (their greatest common divisor, > 0): gcd itself up to 4 KiB,
 * else its largest divisor in [1 KiB, 4 KiB], else the largest divisor of
 * at most the rule maximum (1 MiB). */
uint64_t ibp__discover_fit_tensor(uint64_t gcd);

#endif /* IBP_PRELOAD_STATS_DISCOVER_H */
