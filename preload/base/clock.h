/*
 * libibp's own time on the device's clock (base/clock.c).  On NVIDIA's
 * driver that is the host's monotonic clock and libibp's CPU time is what
 * it is.  On the simulated GPU (tests/sim), whose virtual clock models
 * every call's CPU cost from the device profile, libibp charges the
 * modelled cost of its own work too, so that an A/B comparison pays every
 * per-operation cost on both sides (docs/PROFILE.md, "The virtual clock").
 */
#ifndef IBP_PRELOAD_CLOCK_H
#define IBP_PRELOAD_CLOCK_H

#include <stdint.h>

/* The calling thread's time on the device's clock, in nanoseconds. */
double ibp__clock_ns(void);

/* Charges `us` microseconds of libibp's CPU work to the calling thread
 * (the simulated GPU's virtual clock; nothing on a real one). */
void ibp__clock_charge_us(double us);

/* The calling thread waited for another thread's work that ended at `ns`
 * on that thread's clock: on the simulated GPU its clock becomes at least
 * that (a wait the virtual clock cannot see, such as one for libibp's
 * worker); nothing on a real one, where the wait took its time. */
void ibp__clock_reach(double ns);

/* What libibp's own CPU work of `measured_ns` costs on the device's clock:
 * on the simulated GPU its model `model_ns` (every run modelled alike), on
 * a real one what it took. */
double ibp__clock_work_ns(double measured_ns, double model_ns);

/* Monotonic real time, nanoseconds. */
uint64_t ibp__real_ns(void);

/* The calling thread's CPU time, nanoseconds. */
uint64_t ibp__thread_cpu_ns(void);

#endif /* IBP_PRELOAD_CLOCK_H */
