/* The configuration, loaded lazily (base/base.h).
 *
 * Nothing runs at load time (no constructor): the configuration is read at
 * the first hook call that needs it, under pthread_once, and makes no CUDA
 * call.  A bad configuration is reported once and leaves libibp passing
 * everything through. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"

ibp_config ibp__cfg;
__thread int ibp__guard __attribute__((tls_model("initial-exec")));

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static _Atomic int loaded;
static int active;
static int wait_ready;

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
  else if (!ibp__cfg.disabled && ibp__profile_load_override() != 0)
    ibp__cfg.disabled = 1;
  /* discovery (stats/discover.c) needs the hooks even without a rule */
  const char *discover = getenv("IBP_DISCOVER");
  active = !ibp__cfg.disabled &&
           (ibp__cfg.n_rules > 0 ||
            (discover && discover[0] && strcmp(discover, "0") != 0));
  wait_ready = ibp__cfg.wait_ready;
  atomic_store(&loaded, 1);
  ibp__guard--;
}

int ibp__config_load(void) {
  pthread_once(&load_once, load);
  return active;
}

static int rule_is_auto(unsigned index) {
  return index >= 1 && index <= ibp__cfg.n_rules &&
         ibp__cfg.rules[index - 1].is_auto;
}

const char *ibp__rule_label(unsigned index, char *buf, size_t cap) {
  if (!rule_is_auto(index))
    snprintf(buf, cap, "rule %u", index);
  else if (ibp__cfg.n_rules == 1)
    snprintf(buf, cap, "auto");
  else
    snprintf(buf, cap, "auto, rule %u", index);
  return buf;
}

const char *ibp__rule_tensor_fix(unsigned index, uint64_t tensor, char *buf,
                                 size_t cap) {
  if (rule_is_auto(index))
    snprintf(buf, cap, "'min=%lluM,tensor=%llu' in place of auto",
             (unsigned long long)(IBP_CONFIG_AUTO_MIN_BYTES >> 20),
             (unsigned long long)tensor);
  else
    snprintf(buf, cap, "tensor=%llu in rule %u", (unsigned long long)tensor,
             index);
  return buf;
}

int ibp__loaded(void) {
  return atomic_load(&loaded);
}

int ibp__wait_ready(void) {
  ibp__config_load();
  return wait_ready;
}
