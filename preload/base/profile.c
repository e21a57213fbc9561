/* The device cost profile IBP_PROFILE names (base/base.h), loaded with the
 * configuration: a bad one is reported like any bad configuration value
 * and libibp passes everything through. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"

static ibp_profile override;
static int have_override;

int ibp__profile_load_override(void) {
  if (!ibp__cfg.profile[0])
    return 0;
  char err[512], msg[700];
  if (ibp_profile_load(ibp__cfg.profile, &override, err, sizeof err) == 0) {
    have_override = 1;
    return 0;
  }
  int n = snprintf(msg, sizeof msg,
                   "[ibp] IBP_PROFILE, token '%s': %s \xe2\x80\x94 libibp "
                   "passes everything through\n",
                   ibp__cfg.profile, err);
  if (n > 0 && write(STDERR_FILENO, msg, strlen(msg)) < 0)
    n = 0;
  return -1;
}

const ibp_profile *ibp__profile_override(void) {
  return have_override ? &override : NULL;
}
