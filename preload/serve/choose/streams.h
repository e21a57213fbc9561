/*
 * The device's streams as libibp queued work on them (streams.c;
 * docs/ARCHITECTURE.md "The gate"): per device, the streams libibp last
 * decided copies on and when, by the chooser's estimates, each one's work
 * ends -- no driver call (a query would cost a call per copy).  A copy's
 * class says whether its own stream is still busy (copies back to back,
 * or one at a time); a timed copy's span is not charged for the other
 * streams' work queued ahead of it (it may wait for it on the link).
 * Threads: one lock for the table; reset in a forked child.
 */
#ifndef IBP_PRELOAD_STREAMS_H
#define IBP_PRELOAD_STREAMS_H

#include <cuda.h>

/* At now_ns on device dev's clock: whether stream s still runs what
 * libibp queued on it. */
int ibp__streams_busy(int dev, CUstream s, double now_ns);

/* A copy estimated est_ns was queued on stream s of device dev at now_ns
 * (after what it already runs). */
void ibp__streams_queued(int dev, CUstream s, double now_ns, double est_ns);

/* At now_ns: the work libibp queued on device dev's streams other than s
 * that is still to run, by the estimates (ns): what a copy on s started
 * now may wait for on the link or the copy engine. */
double ibp__streams_ahead(int dev, CUstream s, double now_ns);

void ibp__streams_after_fork_child(void);

#endif /* IBP_PRELOAD_STREAMS_H */
