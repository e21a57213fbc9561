/*
 * The device's streams as libibp queued work on them (streams.c;
 * docs/ARCHITECTURE.md "The gate"): per device, the streams libibp last
 * decided copies on and when, by the chooser's estimates, each one's work
 * ends -- no driver call (a query would cost a call per copy).  A copy's
 * class says whether its own stream is still busy (copies back to back,
 * or one at a time); a timed copy's span is not charged for the other
 * streams' work queued ahead of it (it may wait for it on the link): the
 * chooser records an event on each of those streams
 * (ibp__streams_others) and starts the span no earlier than the last of
 * them completed.
 * Threads: one lock for the table; reset in a forked child.
 */
#ifndef IBP_PRELOAD_STREAMS_H
#define IBP_PRELOAD_STREAMS_H

#include <cuda.h>
#include <pthread.h>

/* Whether stream s as thread t named it is the calling thread's stream
 * `here`: the per-thread default stream is another stream in each thread,
 * under one handle (CU_STREAM_PER_THREAD). */
static inline int ibp__stream_same(CUstream s, pthread_t t, CUstream here) {
  return s == here &&
         (here != CU_STREAM_PER_THREAD || pthread_equal(t, pthread_self()));
}

/* At now_ns on device dev's clock: 0 when stream s runs nothing libibp
 * queued on it, else how many of the device's streams do, s included
 * (copies of several streams back to back: their kernels may run side by
 * side) -- the application's streams, not libibp's own copy streams. */
unsigned ibp__streams_busy(int dev, CUstream s, double now_ns);

/* At now_ns on device dev's clock: how long (ns) the work libibp queued on
 * the device's link, every stream's, still runs -- what a copy queued now
 * would wait for on the link anyway (0: the link is idle). */
double ibp__streams_link_ahead_ns(int dev, double now_ns);

/* A copy estimated est_ns was queued on stream s of device dev at now_ns:
 * it starts after what s already runs and, when it uses the link (link_ns
 * > 0: how long it holds the link or the copy engine), after the link's
 * queued work, which every stream shares.  link_stream: the stream that
 * runs its link part, where not s (the staged path's copy stream), NULL
 * otherwise.  Returns how long, by the estimates, its link part waits for
 * the other streams' link work beyond what its own stream runs there (s,
 * or link_stream: a staged copy's windows wait for the copy stream's last
 * windows, not for s's decodes; 0: none) -- what its span there holds
 * besides its own (chooser.h, ibp_timing_queue). */
double ibp__streams_queued(int dev, CUstream s, double now_ns, double est_ns,
                           double link_ns, CUstream link_stream);

/* At now_ns: records ev[0..] (created) on device dev's streams other
 * than s and `also` whose work libibp queued last holds the link and still
 * runs, by the estimates -- what a copy on s started now may wait for on
 * the link or the copy engine (a decode in device memory holds neither) --
 * at most max of them, those whose work ends last first.  link_only = 0:
 * the application's streams whatever their work (a staged copy's whole
 * span, its decode included, waits for the SMs as well).
 * Skipped: the legacy and per-thread default streams (an event there
 * would order other streams' work, or land on this thread's own) and a
 * capturing stream.  Under the table's lock, so that a stream being
 * destroyed (ibp__streams_forget) is not recorded on.  Returns how many
 * were recorded; bit k of *gapped (gapped may be NULL): ev[k]'s work leaves the
 * link idle between its parts (a staged copy's windows, which wait for their
 * decodes and its buffers) -- another stream's copy may take turns with it
 * there, rather than wait for it to end. */
unsigned ibp__streams_mark_others(int dev, CUstream s, CUstream also,
                                  int link_only, double now_ns, CUevent ev[],
                                  unsigned max, unsigned *gapped);

/* libibp's own uploads on device dev -- a region's set-up there, the
 * fill's and a refresh's metadata (serve/prepare/): _begin before one,
 * _end once it has run.  They share the link with the copies libibp
 * times but run on streams the table does not hold (the first kv_blocks
 * call, timed while a region's set-up uploaded ~6 MB, measured twice its
 * model).
 * ibp__streams_own_clear: whether none runs now and none ended after
 * since_ns on the device's clock (a span started then is not theirs). */
void ibp__streams_own_begin(int dev);
void ibp__streams_own_end(int dev);
int ibp__streams_own_clear(int dev, double since_ns);

/* Stream s is destroyed (hooks_order.c): forgotten. */
void ibp__streams_forget(CUstream s);

/* Device dev's context ends: its streams are forgotten. */
void ibp__streams_forget_device(int dev);

void ibp__streams_after_fork_child(void);

#endif /* IBP_PRELOAD_STREAMS_H */
