/* What preload/base/config.c defines for libibp.so; the track tests link the
 * tracker's files without it (configuration never loaded: log at warn). */
#include "base/base.h"

ibp_config ibp__cfg;
__thread int ibp__guard;

int ibp__loaded(void) {
  return 0;
}
