/*
 * The simulated GPU's virtual clock (libsimclock.so), shared by the
 * simulated driver and runtime: the device cost profile they model time
 * with, each host thread's virtual time, and the PCIe link's timeline
 * (docs/PROFILE.md, "The virtual clock").
 *
 * Times are virtual nanoseconds (double).  A host thread's clock advances
 * only by the modelled cost of the API calls it makes (simclock_charge_us)
 * and by waiting for modelled work (simclock_reach); a thread starts at
 * the latest time any thread has reached.  The link has one timeline per
 * direction: a transfer takes the free time after it is ready, gap after
 * gap, until it has had its duration, so streams share its bandwidth and
 * its busy time does not depend on the order their workers run in.
 * Each device's SMs have a timeline too: a kernel gets the SMs that
 * kernels reserved before it left free, and runs slower on fewer.
 *
 * The profile comes from SIMCUDA_PROFILE (a built-in name or a file,
 * profile/profile.h: the simulated GPU's truth, which libibp's model,
 * IBP_PROFILE, may get wrong), else IBP_PROFILE, else `a100-pcie4`; a bad
 * one is reported once on stderr and the default is used.  Thread-safe;
 * never exits.
 */
#ifndef IBP_SIMCLOCK_H
#define IBP_SIMCLOCK_H

#include "profile/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum simclock_link {
  SIMCLOCK_LINK_H2D = 0, /* host memory read by the device */
  SIMCLOCK_LINK_D2H = 1, /* device writes to host memory */
  SIMCLOCK_LINKS
} simclock_link;

/* The profile in use (loaded at the first call). */
const ibp_profile *simclock_profile(void);

/* The calling thread's virtual time. */
double simclock_now(void);

/* Advances the calling thread's clock by `us` microseconds (an API call's
 * CPU cost). */
void simclock_charge_us(double us);

/* The calling thread waited for modelled work that ends at `t`: its clock
 * becomes max(its clock, t). */
void simclock_reach(double t);

/* Reserves `dur` ns of `link`'s free time at or after `ready` (in one or
 * more pieces); returns when the last piece ends. */
double simclock_link_reserve(simclock_link link, double ready, double dur);

/* Devices with an SM timeline of their own; a higher device shares the
 * last one. */
#define SIMCLOCK_DEVICES 8

/* Reserves SMs of `device` (one of `total`) for a kernel that takes `dur`
 * ns on `want` SMs: want x dur SM-ns of work.  From `ready` on, in each
 * stretch of the timeline it gets min(want, what earlier reservations
 * left free) SMs and progresses at that over `want` of its full rate,
 * until its work is done; returns when it is.  Degenerate input: `want` 0
 * counts as 1, above `total` as `total` (`total` 0 as 1); `dur` <= 0
 * reserves nothing and returns `ready`. */
double simclock_sms_reserve(unsigned device, double ready, unsigned total,
                            unsigned want, double dur);

/* Forgets the link and SM timelines and the threads' starting point (tests). */
void simclock_reset(void);

#ifdef __cplusplus
}
#endif
#endif /* IBP_SIMCLOCK_H */
