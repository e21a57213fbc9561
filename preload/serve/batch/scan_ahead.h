/*
 * The write tracker's scan of held copies, ahead of their batch's launch
 * (docs/ARCHITECTURE.md, "Batched launches").  A copy held from a region
 * the userfaultfd tracker watches must have its pages scanned after its
 * call and before its launch.  The batch posts each whole share of
 * IBP_SCAN_SHARE held copies -- the page runs they read -- as soon as it
 * is complete; scanner threads (IBP_SCANNERS of them) scan posted shares
 * while the application goes on; the flush settles the batch: it scans
 * the shares no scanner took and its own partial share, waits for those
 * being scanned, and is told what that costs on the model's timeline.
 */
#ifndef IBP_PRELOAD_SCAN_AHEAD_H
#define IBP_PRELOAD_SCAN_AHEAD_H

#include <stdatomic.h>
#include <stdint.h>

#include "track/track.h"

#define IBP_SCAN_SHARE 16

/* Pages [lo, hi] (4 KiB page numbers) of tracked t a held copy reads. */
typedef struct ibp_scan_run {
  ibp_tracked *t;
  uint64_t lo, hi;
} ibp_scan_run;

/* One share: filled by its batch while EMPTY, then posted. */
typedef struct ibp_scan_share {
  _Atomic int state; /* scan_ahead.c: EMPTY, POSTED, SCANNING, DONE */
  uint32_t nruns;
  double held_ns; /* device clock: its last copy held */
  double cost_ns; /* CPU time its scan took (whichever thread made it) */
  ibp_scan_run runs[IBP_SCAN_SHARE];
} ibp_scan_share;

/* Queues sh (filled, EMPTY) for the scanners, starting them at the first
 * post; with no scanner it stays posted for the flush. */
void ibp__scan_post(ibp_scan_share *sh);

/* The scan of a batch before its launch: shares[0..n) were posted in
 * order (each EMPTY or DONE afterwards: a share not posted is scanned
 * here too, as the tail is), tail[0..ntail) are the runs of its partial
 * share.  Scans what no scanner took, waits for the rest, and leaves every
 * share EMPTY.  Returns the nanoseconds the calling thread pays on the
 * model's timeline, from `now` (device clock): its own scan of the tail,
 * and the wait beyond it for the scanners, which each start a share a
 * poll or a wake-up after its last copy was held (or when they finish the
 * one before) and take the CPU time its scan took. */
double ibp__scan_settle(ibp_scan_share *shares, uint32_t n, ibp_scan_run *tail,
                        uint32_t ntail, double now);

/* In a forked child: no scanner runs there. */
void ibp__scan_after_fork_child(void);

#endif /* IBP_PRELOAD_SCAN_AHEAD_H */
