/*
 * The device's streams as libibp queued work on them (streams.c;
 * docs/ARCHITECTURE.md "The gate"): per device, the streams libibp last
 * decided copies on and when, by the chooser's estimates, each one's work
 * ends -- no driver call (a query would cost a call per copy).  A copy's
 * class says whether its own stream is still busy (copies back to back,
 * or one at a time) and whether another stream's work shares the link
 * (what a copy measures then is compared only with copies that shared it
 * too).  Threads: one lock for the table; reset in a forked child.
 */
#ifndef IBP_PRELOAD_STREAMS_H
#define IBP_PRELOAD_STREAMS_H

#include <cuda.h>

/* At now_ns on device dev's clock: *busy, stream s still runs what libibp
 * queued on it; *shared, another stream does. */
void ibp__streams_look(int dev, CUstream s, double now_ns, int *busy,
                       int *shared);

/* A copy estimated est_ns was queued on stream s of device dev at now_ns
 * (after what it already runs). */
void ibp__streams_queued(int dev, CUstream s, double now_ns, double est_ns);

void ibp__streams_after_fork_child(void);

#endif /* IBP_PRELOAD_STREAMS_H */
