/*
 * What shared the link with a timed copy after it started (beside.c;
 * docs/ARCHITECTURE.md "The gate", contention): while copies of a
 * chooser are timed, each copy libibp queues on the link on another
 * stream gets an event before and after it.  One that completed inside a
 * timed span took its turns on the link there -- the staged path's
 * windows, which wait for their decodes, leave gaps another stream's copy
 * fills, and on a GPU whose streams share the link's bandwidth every such
 * copy slows the span -- so the span is read less the link time it took
 * there: its estimate, no more than it ran (between its events) nor than
 * the part of the span before it ended; never below the route's model
 * (contention explains an excess over the model, not a reading cheaper
 * than it).  One that completed after the span (queued behind it)
 * delayed nothing.  The work queued ahead of a span is the start events'
 * (streams.h); copies libibp does not see (outside every region, another
 * region's, a quiet run's left to the application's own call, a batched
 * launch) are not counted: their spans read dearer, as before.
 * Threads: under the chooser's lock but ibp__beside_wanted (lock-free
 * where nothing is timed) and the event records (outside it).
 */
#ifndef IBP_PRELOAD_BESIDE_H
#define IBP_PRELOAD_BESIDE_H

#include "base/driver.h"
#include "serve/choose/chooser.h"

/* Whether copies of ch are being timed on other streams than `stream`: a
 * copy queued on it now may share their spans (then ibp__beside_begin and
 * _end around it).  Lock-free where nothing is timed. */
int ibp__beside_wanted(ibp_chooser *ch, CUstream stream);

/* Before a copy holding the link about link_ns (as estimated) is queued on
 * `stream` of the slot's device (its context current): where copies of ch
 * timed on other streams still run and an entry is free, an event on
 * `stream` before it.  Returns the entry (-1: none) for
 * ibp__beside_end.  Never fails the copy. */
int ibp__beside_begin(ibp_device_slot *slot, ibp_chooser *ch, CUstream stream,
                      double link_ns, unsigned *gen);

/* After it (j, gen: ibp__beside_begin's; the same stream): the event
 * after the copy where `queued`, else the entry is freed (j < 0:
 * nothing; an entry freed and taken again meanwhile is left alone). */
void ibp__beside_end(ibp_device_slot *slot, ibp_chooser *ch, int j,
                     unsigned gen, CUstream stream, int queued);

/* Sample i is read or dropped: no entry waits for it (lock held). */
void ibp__beside_forget(ibp_chooser *ch, int i);

/* The span gpu (ns) of sample i, ending at event `end`, less the link
 * time of the copies beside it that completed inside it, never below
 * min(gpu, model_ns) (lock held; `end` completed). */
double ibp__beside_less(const ibp_driver *d, const ibp_device_slot *slot,
                        const ibp_chooser *ch, int i, CUevent end, double gpu,
                        double model_ns);

#endif /* IBP_PRELOAD_BESIDE_H */
