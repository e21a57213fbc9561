/* The runtime's share of a call's CPU cost on the simulated GPU's virtual
 * clock (tests/sim/clock/simclock.h): charged for every call that queues
 * work (copies, sets, event records, stream waits, host functions), on
 * top of what the driver charges for its own entry point.  A preload that
 * intercepts at the driver level removes only the driver's share. */
#include "cudart_internal.h"

#include "simclock.h"

void cudartsim__charge_call(void) {
  simclock_charge_us(simclock_profile()->runtime_call_us);
}
