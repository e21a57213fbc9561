/* libibp's time on the device's clock (base/clock.h).  The simulated GPU's
 * clock library exports simclock_now, simclock_charge_us and simclock_reach;
 * when the process has loaded it (its driver and runtime link it), they are
 * found once by name.  Nothing else of the simulator is known here. */
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#include "base/clock.h"
#include "base/libc.h"

static double (*sim_now)(void);
static void (*sim_charge)(double);
static void (*sim_reach)(double);
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void resolve(void) {
  sim_now = (double (*)(void))ibp__real_dlsym(RTLD_DEFAULT, "simclock_now");
  sim_charge =
      (void (*)(double))ibp__real_dlsym(RTLD_DEFAULT, "simclock_charge_us");
  sim_reach = (void (*)(double))ibp__real_dlsym(RTLD_DEFAULT, "simclock_reach");
  if (!sim_now || !sim_charge || !sim_reach)
    sim_now = NULL, sim_charge = NULL, sim_reach = NULL;
}

uint64_t ibp__real_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

uint64_t ibp__thread_cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

double ibp__clock_ns(void) {
  pthread_once(&once, resolve);
  return sim_now ? sim_now() : (double)ibp__real_ns();
}

void ibp__clock_charge_us(double us) {
  pthread_once(&once, resolve);
  if (sim_charge)
    sim_charge(us);
}

void ibp__clock_reach(double ns) {
  pthread_once(&once, resolve);
  if (sim_reach)
    sim_reach(ns);
}

double ibp__clock_work_ns(double measured_ns, double model_ns) {
  pthread_once(&once, resolve);
  return sim_now ? model_ns : measured_ns;
}
