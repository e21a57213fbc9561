/*
 * The route DRIVER's model (route_driver.c) for an entry of the
 * application's own batch call, as timing that call needs it besides the
 * prior (serve/batch/batch_call.c).
 */
#ifndef IBP_PRELOAD_ROUTE_DRIVER_H
#define IBP_PRELOAD_ROUTE_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "profile/profile.h"

/* The copy engine's time (ns) for an entry of `bytes` bytes of one
 * cuMemcpyBatchAsync of `entries` entries: its bytes and its share of the
 * call's set-up -- the first entry's ce_setup_us, each later one's
 * ce_batch_setup_us (docs/PROFILE.md). */
double ibp__route_driver_entry_ns(const ibp_profile *p, uint64_t bytes,
                                  size_t entries);

/* The set-up (ns) of one cuMemcpyBatchAsync of `entries` entries, all of
 * them: what its entries' shares add up to. */
double ibp__route_driver_call_setup_ns(const ibp_profile *p, size_t entries);

#endif /* IBP_PRELOAD_ROUTE_DRIVER_H */
