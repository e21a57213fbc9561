/* The library's lifetime (hooks/hooks.h).
 *
 * Nothing runs at load time (no constructor): the first hook that needs
 * the configuration loads it (base/config.c) and sets up, once, the
 * registry's release hook, the fork handler and the exit report (atexit). */
#include <pthread.h>
#include <stdlib.h>

#include "base/base.h"
#include "base/driver.h"
#include "hooks/hooks.h"
#include "serve/batch/batch.h"
#include "serve/choose/streams.h"
#include "serve/compact.h"
#include "serve/dtoh.h"
#include "serve/figures.h"
#include "serve/graph.h"
#include "serve/prepare/device.h"
#include "serve/region.h"
#include "serve/staged/staged.h"
#include "serve/worker.h"
#include "stats/discover.h"
#include "stats/stats.h"
#include "track/track.h"

static pthread_once_t start_once = PTHREAD_ONCE_INIT;

/* In the child, the parent's regions are of no use (CUDA cannot be used
 * after the parent initialised it; pinned memory, the shadow and the dirty
 * bitmap are not even mapped there): stop tracking and serving them. */
static void forget_region(const ibp_region_rec *rc, void *ctx) {
  (void)ctx;
  ibp_region_rec *r = (ibp_region_rec *)rc;
  ibp_served_region *s = ibp__served(r);
  if (s) {
    ibp__track_unprotect(&s->track);
    __atomic_store_n(&s->track.dirty, NULL, __ATOMIC_RELEASE);
  }
  ibp_region_transition(r, IBP_REGION_READY, IBP_REGION_DEGRADED);
  ibp_region_transition(r, IBP_REGION_COMPRESSING, IBP_REGION_DEGRADED);
}

/* The child of a fork: threads that held our locks do not exist there, and
 * the parent's GPU state is not the child's. */
static void after_fork_child(void) {
  ibp_registry_reset_after_fork();
  ibp__driver_after_fork_child();
  ibp__resolve_after_fork_child();
  ibp__worker_after_fork_child();
  ibp__device_after_fork_child();
  ibp__track_after_fork_child();
  ibp__stats_after_fork_child();
  ibp__dtoh_after_fork_child();
  ibp__graph_after_fork_child();
  ibp__batch_after_fork_child();
  ibp__staged_after_fork_child();
  ibp__streams_after_fork_child();
  ibp_registry_foreach(forget_region, NULL);
}

static void start(void) {
  ibp__guard++;
  ibp_registry_init(ibp__worker_release, NULL);
  ibp__compact_init(ibp__worker_wait);
  pthread_atfork(NULL, NULL, after_fork_child);
  if (!ibp__cfg.disabled && ibp__cfg.stats != IBP_STATS_OFF)
    atexit(ibp__figures_report);
  ibp__discover_start(); /* its table even without a pinned allocation */
  ibp__guard--;
}

int ibp__active(void) {
  int active = ibp__config_load();
  pthread_once(&start_once, start);
  return active;
}

/* A program's first driver call: libibp starts there too (the exit report
 * of a program that only queries its devices says what it saw, not "no
 * CUDA activity"). */
CUresult ibp__hook_cuInit(unsigned flags) {
  if (!ibp__guard)
    (void)ibp__active();
  return ibp__real_cuInit(flags);
}
