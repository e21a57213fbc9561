/* What preload/base/config.c defines for libibp.so; the track tests link the
 * tracker's files without it (configuration never loaded: log at warn).
 * The tracker is the mprotect one unless TRACK_TEST_TRACKER says
 * userfaultfd or auto (test_track_uffd's cases); quiet regions stay
 * scanning unless TRACK_TEST_QUIET gives IBP_TRACK_QUIET. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

ibp_config ibp__cfg;

__attribute__((constructor)) static void choose_tracker(void) {
  const char *t = getenv("TRACK_TEST_TRACKER");
  ibp__cfg.tracker = !t                          ? IBP_TRACKER_MPROTECT
                     : !strcmp(t, "userfaultfd") ? IBP_TRACKER_USERFAULTFD
                     : !strcmp(t, "auto")        ? IBP_TRACKER_AUTO
                                                 : IBP_TRACKER_MPROTECT;
  const char *q = getenv("TRACK_TEST_QUIET"); /* IBP_TRACK_QUIET, ms */
  ibp__cfg.track_quiet_ms = q ? (unsigned)atoi(q) : 0;
}
__thread int ibp__guard;

int ibp__loaded(void) {
  return 0;
}
