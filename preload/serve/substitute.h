/*
 * Serving a host-to-device copy (substitute.c; docs/ARCHITECTURE.md "The
 * copy path"): find its region, describe the copy, ask the chooser among
 * the routes that can serve it (serve/route/route.h), submit, record.
 */
#ifndef IBP_PRELOAD_SUBSTITUTE_H
#define IBP_PRELOAD_SUBSTITUTE_H

#include "serve/copy.h"

/* Serves copy c from a ready region by the route the chooser picks.
 * Returns 0 when served (the copy is done or queued on c->stream), 1 when
 * the caller must run the real copy (outside every region, not ready,
 * capturing, the driver's copy chosen, error) -- an ordering point that
 * ends its stream's run of copies (ibp__batch_order) -- and 2 when it must
 * run the real copy the gate counted in that run (offered to its stream's
 * batch, or taken by a quiet run: ibp__batch_order_copy). */
int ibp__serve_htod(const ibp_copy *c);

/* Copy c, from a region or not, is the driver's without being looked at
 * (a row of a 2D copy after one the driver took): counted as passed for
 * `reason` (IBP_PASSED_*) in its region's statistics, once. */
void ibp__serve_passed(const ibp_copy *c, int reason);

#endif /* IBP_PRELOAD_SUBSTITUTE_H */
