/* Lazy initialisation and process lifetime.
 *
 * Nothing runs at load time (no constructor): the configuration is read at
 * the first hook call that needs it, under pthread_once, and makes no CUDA
 * call.  A bad configuration is reported once and leaves libibp passing
 * everything through.  Stats are written by an atexit handler; the child of
 * a fork gets its locks and threads reset. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload.h"

ibp_config ibp__cfg;
__thread int ibp__guard __attribute__((tls_model("initial-exec")));

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static _Atomic int loaded;
static int active;
static int wait_ready;

static void release_region(ibp_region_rec *r, void *ctx) {
  (void)ctx;
  ibp__worker_release(r);
}

/* In the child, the parent's regions are of no use (CUDA cannot be used
 * after the parent initialised it; pinned memory, the shadow and the dirty
 * bitmap are not even mapped there): stop tracking and serving them. */
static void forget_region(const ibp_region_rec *rc, void *ctx) {
  (void)ctx;
  ibp_region_rec *r = (ibp_region_rec *)rc;
  ibp__track_unprotect(r);
  __atomic_store_n(&r->dirty, NULL, __ATOMIC_RELEASE);
  ibp_region_transition(r, IBP_REGION_READY, IBP_REGION_DEGRADED);
  ibp_region_transition(r, IBP_REGION_COMPRESSING, IBP_REGION_DEGRADED);
}

/* The child of a fork: threads that held our locks do not exist there, and
 * the parent's GPU state is not the child's. */
static void after_fork_child(void) {
  ibp_registry_reset_after_fork();
  ibp__resolve_after_fork_child();
  ibp__worker_after_fork_child();
  ibp__device_after_fork_child();
  ibp__track_after_fork_child();
  ibp__stats_after_fork_child();
  ibp__dtoh_after_fork_child();
  ibp_registry_foreach(forget_region, NULL);
}

static void report_config_error(const ibp_config_error *e) {
  char buf[512];
  ibp_config_format_error(e, buf, sizeof buf - 1);
  size_t n = strlen(buf);
  buf[n++] = '\n';
  ssize_t w = write(STDERR_FILENO, buf, n);
  (void)w;
}

static void load(void) {
  ibp_config_error err;
  ibp__guard++;
  if (ibp_config_load(&ibp__cfg, NULL, &err) != 0)
    report_config_error(&err);
  active = !ibp__cfg.disabled && ibp__cfg.n_rules > 0;
  const char *w = getenv("IBP_WAIT_READY");
  wait_ready = w && strcmp(w, "1") == 0;
  atomic_store(&loaded, 1);
  ibp_registry_init(release_region, NULL);
  pthread_atfork(NULL, NULL, after_fork_child);
  if (!ibp__cfg.disabled && ibp__cfg.stats != IBP_STATS_OFF)
    atexit(ibp__stats_report);
  ibp__guard--;
}

void ibp__init(void) {
  pthread_once(&init_once, load);
}

int ibp__active(void) {
  ibp__init();
  return active;
}

int ibp__loaded(void) {
  return atomic_load(&loaded);
}

int ibp__wait_ready(void) {
  ibp__init();
  return wait_ready;
}
